"""The pool world's unserved stories (:mod:`properties.pool_states`' ``unserved`` and
``unserved_mixed``): a supervisor names the waiting runs of agents it does not serve, each
once, when they have waited two polls (at most 100 a look), and no other run. Time moves only
through the clock seam; the supervisor's look is forced at each pass, or made directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

from .pool_hearing import at, hearing
from .runner import LEASE

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

UNSERVED_AGENT: Final = "nobody-serves-this"
# What the operator is told (docs/04-operating-it.md): a run is named once it has waited
# two polls, at most 100 a look; the story holds the supervisor to that, not to its constants.
AFTER_POLLS: Final = 2
LIMIT: Final = 100
OTHER_UNSERVED: Final = "nobody-serves-that"  # sorts first


def unserved(pool: PoolRunner) -> str | None:
    """A run of an agent nobody serves, looked at every second (the supervisor's look
    forced at every pass, as the world forces its watchdog); then ``LIMIT`` more."""
    pool.reset()
    world = pool.world
    s = world.supervised("main")
    journal = Journal(pool.conn)
    seconds = [0]
    waited = AFTER_POLLS * world.settings.poll

    def look() -> set[str]:
        s.supervisor.unserved._next = 0.0  # a poll has passed: it looks at this pass
        world.sweep(s)
        return set(s.supervisor.unserved.named)

    try:
        with hearing(lambda: seconds[0]) as said:
            journal.create_run("u0", UNSERVED_AGENT, None)
            named: list[tuple[int, set[str]]] = []
            while seconds[0] <= waited + 1:
                named.append((seconds[0], look()))
                pool._advance(1.0)
                seconds[0] += 1
            late = [f"u{n:03d}" for n in range(1, LIMIT + 1)]
            for run in late:
                journal.create_run(run, UNSERVED_AGENT, None)
            started = seconds[0]
            pool._advance(waited)
            seconds[0] += int(waited)
            cut = look()
            again = look()
    except Exception as exc:  # the supervisor's pass raised: its loop would die with it
        return f"the unserved story raised {type(exc).__name__}: {exc}"
    finally:
        pool.cleanup()
    wanted = [(t, {"u0"} if t >= waited else set()) for t, _ in named]
    if named != wanted:
        return f"runs named at each second: {named}, not {wanted} ({AFTER_POLLS} polls)"
    first = at(said, rf"unserved run=u0 agent={UNSERVED_AGENT} status=pending waited=")
    if [t for t, _ in first] != [int(waited)]:
        return f"u0 said unserved at seconds {first}, once at {waited:g}"
    expected = {"u0", *late[: LIMIT - 1]}
    if cut != expected or again != expected:
        return (
            f"a look cut at LIMIT {LIMIT} named {len(cut)} runs, then {len(again)} (the "
            f"{LIMIT} longest waiting, kept): missing {sorted(expected - cut)[:3]}"
        )
    fresh = [line for t, line in said if t == started + int(waited) and " run=u" in line]
    if len(fresh) != LIMIT - 1:
        return f"the cut look said {len(fresh)} runs unserved, not the {LIMIT - 1} new ones"
    return None


def unserved_mixed(pool: PoolRunner) -> str | None:
    """Runs of two agents nobody serves -- pending ones, and one whose worker elsewhere died
    holding it -- beside two the look must never name: a failed run of such an agent, and
    a run of the supervisor's own agent it had no room to take yet (no sweep between)."""
    pool.reset()
    world = pool.world
    s = world.supervised("main")
    journal = Journal(pool.conn)
    try:
        with hearing(lambda: 0) as said:
            for run, agent in (("v1", OTHER_UNSERVED), ("v2", OTHER_UNSERVED)):
                journal.create_run(run, agent, None)
                lease = journal.claim(run, f"elsewhere:{run}", LEASE)
                assert lease is not None, f"{run} could not be claimed"
            journal.fail(Lease(run_id="v2", owner="elsewhere:v2", generation=1), "given up")
            for run, agent in (("u0", UNSERVED_AGENT), ("v0", OTHER_UNSERVED), ("s0", "support")):
                journal.create_run(run, agent, None)
            after = AFTER_POLLS * world.settings.poll
            pool._advance(LEASE + after + 1)
            named = sorted(s.supervisor.unserved.look(pool.conn))
            # u0 stops waiting (claimed elsewhere), then its holder dies: it waits again
            assert journal.claim("u0", "elsewhere:u0", LEASE) is not None
            gone = sorted(s.supervisor.unserved.look(pool.conn))
            pool._advance(LEASE + after + 1)
            again = sorted(s.supervisor.unserved.look(pool.conn))
    except Exception as exc:  # the supervisor's look raised: its loop would die with it
        return f"the mixed unserved story raised {type(exc).__name__}: {exc}"
    finally:
        pool.cleanup()
    if named != ["u0", "v0", "v1"]:
        return (
            f"the look named {named}, not u0, v0 (pending) and v1 (its lease ran out): never "
            "v2 (failed) nor s0 (the supervisor's own agent)"
        )
    if (gone, again) != ([], ["u0"]):
        return (
            f"after u0 was claimed elsewhere the look named {gone}, and once its holder died "
            f"{again}: a run that stops waiting and waits again is named again, alone"
        )
    lines = [line.split()[1] + " " + line.split()[3] for _, line in said]
    wanted = ["run=u0 status=pending", "run=v0 status=pending", "run=v1 status=running"]
    if lines != [*wanted, "run=u0 status=running"]:
        return f"the looks said {lines}: the longest waiting first, each once, then u0 again"
    return None


def unserved_cut(pool: PoolRunner) -> str | None:
    """A named run pushed out of a look cut at its limit while it still waits: ``LIMIT``
    runs of its agent, held elsewhere since before it was made, lose their holders after it
    was named. They fill the look (its agent's runs by last change: theirs is older), so
    the named run is not in it; when they are claimed again, the run, still waiting all
    along, must not be named a second time (a cut look forgets none)."""
    pool.reset()
    world = pool.world
    s = world.supervised("main")
    journal = Journal(pool.conn)
    after = AFTER_POLLS * world.settings.poll
    held = [f"h{n:03d}" for n in range(LIMIT)]
    try:
        with hearing(lambda: 0) as said:
            for run in held:
                journal.create_run(run, UNSERVED_AGENT, None)
                assert journal.claim(run, f"elsewhere:{run}", LEASE) is not None
            pool._advance(1.0)
            journal.create_run("u0", UNSERVED_AGENT, None)
            pool._advance(after)
            first = s.supervisor.unserved.look(pool.conn)
            pool._advance(LEASE + after)
            cut = s.supervisor.unserved.look(pool.conn)
            for run in held:
                assert journal.claim(run, f"again:{run}", LEASE) is not None
            last = s.supervisor.unserved.look(pool.conn)
    except Exception as exc:  # the supervisor's look raised: its loop would die with it
        return f"the cut unserved story raised {type(exc).__name__}: {exc}"
    finally:
        pool.cleanup()
    if first != ["u0"] or sorted(cut) != held:
        return f"the looks named {first}, then {len(cut)} runs, not u0 then the {LIMIT} others"
    u0 = [line for _, line in said if " run=u0 " in line]
    if last or len(u0) != 1:
        return (
            f"u0, waiting all along, was said unserved {len(u0)} times (the last look named "
            f"{last}): a look cut at its limit forgot it"
        )
    return None
