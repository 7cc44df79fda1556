"""The remotes' reads, and ``fenced_act`` for them: a fenced worker reads nothing either.

A read acts on nothing, so no remote holds a record of it; the desk only logs its answer
(``answers``, op ``lookup_order``), and that line names the order read, not the call, and
the request's fencing generation, not its run. The cloud's workers never read (its tools
only create), so the desk's lookups are every read a worker makes.

``fenced_act`` for the effects (:mod:`properties.checks`) tells a request's sender by its
run and generation. A read is told by who ran while it was logged instead: the runner
checks after every event, and only a worker that ran since the last check (``moved``) can
have sent a request since. A read logged in that window was sent by one of those workers
of its generation; if every one of them had been told by its own heartbeat that the run
was taken over (``fenced_after``, the remotes' logs as they stood then) before the read was
logged, a fenced worker sent it: the runtime's guard (``Worker._guard``) stands before
every request, and before a read's it is the only thing that does (a read has no fenced
statement in front of it; ``_still_owner`` skips reads). A window with a sender that was
not fenced is not judged: it may have been that one's (two runs can share a generation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from .violations import Violation

READ_OPS: Final = frozenset({"lookup_order"})  # the desk's answers to a read


@dataclass(frozen=True, kw_only=True)
class Read:
    """What a remote answered one read request, in its log's order."""

    remote: str  # "desk": its log numbers reads and effects alike
    seq: int
    ref: str  # what was read (an order id): not the call, not the run
    generation: int | None  # the request's fencing generation, if it sent one
    answer: str  # found, or the refusal's error code


def desk_reads(log: list[dict[str, Any]]) -> list[Read]:
    """The reads in the desk's answer log (its ``/v1/answers``, or ``Support.answers()``)."""
    return [
        Read(
            remote="desk",
            seq=obj["seq"],
            ref=obj["ref"],
            generation=obj.get("generation"),
            answer=obj["answer"],
        )
        for obj in log
        if obj["op"] in READ_OPS
    ]


class Sender(Protocol):
    """A worker as the runner keeps it (:class:`properties.driving.WorkerRec`)."""

    label: str
    run: str
    generation: int | None
    fenced_after: dict[str, int] | None


def fenced_reads(reads: Sequence[Read], senders: Sequence[Sender]) -> list[Violation]:
    """``fenced_act`` for the ``reads`` logged since the last check, whose only possible
    senders are ``senders``: the workers that ran since, each with its generation."""
    found: list[Violation] = []
    for r in reads:
        could = [w for w in senders if r.generation is not None and w.generation == r.generation]
        fenced = [w for w in could if _fenced_before(w, r)]
        if not could or fenced != could:
            continue
        who = " or ".join(w.label for w in fenced)
        found.append(
            Violation(
                "fenced_act",
                fenced[0].run,
                None,
                f"{who} (generation {r.generation}) read {r.ref} from the {r.remote} "
                f"(answered {r.answer}) after its own heartbeat had found the run taken over: "
                "a fenced worker sends nothing, a read included",
            )
        )
    return found


def _fenced_before(w: Sender, r: Read) -> bool:
    """Whether ``w``'s heartbeat had found its run taken over before ``r`` was logged."""
    return w.fenced_after is not None and r.seq > w.fenced_after.get(r.remote, 0)
