"""Absolute rules (``expect=``, ``at_most_once=``): what must hold whatever the baseline did.

Comparing with the crash-free baseline cannot see a bug that is in every run, and calls a
crash that happens to avoid it ``effect_lost``. The user states what must hold instead:

    expect={"send_invoice": 3}   exactly 3 send_invoice effects in a run that finished (more
                                 is broken as soon as it happens)
    expect=check                 check(effects) over the run's effect log, a list of
                                 (name, arg) in the order they happened: None or True when it
                                 holds; False, a message, or an AssertionError when it does not
    at_most_once=["charge"]      no charge effect happens twice with the same arg

Every rule is checked in the baseline first. A rule the baseline breaks is one
``rule_broken`` finding under ``run``; the effect names it governs are then judged by the
rules alone (a crash that avoids the bug is not ``effect_lost``), and it is not reported
again per scenario. The rules the baseline keeps are checked in every scenario.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crashresume._context import Effect, ScenarioLog
from crashresume._errors import UsageError
from crashresume._findings import Finding, FindingKind
from crashresume._judge import Judge, _freeze, show_effect
from crashresume._report import Rerun
from crashresume._runner import Life
from crashresume._scenarios import BASELINE_ID

_EXPECT_ADVICE = (
    "give expect={'effect name': count, ...} or a function of the effect log, e.g. "
    "expect=lambda effects: len(effects) <= 3"
)


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One absolute rule; ``name`` is the effect name it governs (None: the whole log)."""

    name: str | None
    count: int | None = None  # expect={name: count}
    once: bool = False  # at_most_once=[name]
    check: Callable[[list[Effect]], Any] | None = None  # expect=check

    def broken(self, performed: list[Effect], *, finished: bool) -> str | None:
        """Why ``performed`` breaks this rule, or None; ``finished``: the run got to its end."""
        if self.check is not None:
            return self._checked(performed) if finished else None
        if self.once:
            counts: Counter[Hashable] = Counter()
            shown: dict[Hashable, str] = {}
            for name, arg in performed:
                if name == self.name:
                    counted = _freeze(arg)
                    counts[counted] += 1
                    shown.setdefault(counted, show_effect(name, arg))
            twice = [f"{shown[k]} happened {_times(n)}" for k, n in counts.items() if n > 1]
            if twice:
                return f"{'; '.join(twice)}, at_most_once=[{self.name!r}] allows once"
            return None
        wanted = self.count or 0
        got = sum(1 for name, _ in performed if name == self.name)
        if got > wanted or (finished and got < wanted):
            return (
                f"{self.name} happened {_times(got) if got else 'never'}, "
                f"expect={{{self.name!r}: {wanted}}} wants {_times(wanted)}"
            )
        return None

    def _checked(self, performed: list[Effect]) -> str | None:
        label = getattr(self.check, "__name__", "the rule")
        assert self.check is not None
        try:
            verdict = self.check(list(performed))
        except AssertionError as exc:  # its first line: pytest appends its own explanation
            said = str(exc).strip().partition("\n")[0]
            return f"expect={label}: {said}" if said else f"expect={label} failed"
        if verdict is None or verdict is True:
            return None
        if isinstance(verdict, str) and verdict:
            return f"expect={label}: {verdict}"
        if verdict is False:
            return f"expect={label} returned False for the effect log"
        raise UsageError(
            f"expect={label} returned {verdict!r}; a rule returns None or True when the log "
            "is fine, and False or a message (a non-empty str) when it is not"
        )


def check_rules(expect: Any, at_most_once: Any) -> tuple[Rule, ...] | None:
    """The rules of ``conform(expect=..., at_most_once=...)``, or None when there are none."""
    rules: list[Rule] = []
    if expect is None:
        pass
    elif isinstance(expect, Mapping):
        for name, count in expect.items():
            if not isinstance(name, str):
                raise UsageError(
                    f"expect: the key {name!r} is not an effect name; {_EXPECT_ADVICE}"
                )
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise UsageError(
                    f"expect[{name!r}]={count!r}: give how many {name} effects a run must "
                    "make, a whole number from 0 up"
                )
            rules.append(Rule(name=name, count=count))
    elif callable(expect):
        rules.append(Rule(name=None, check=expect))
    else:
        raise UsageError(f"expect={expect!r}: {_EXPECT_ADVICE}")
    if at_most_once is not None:
        if isinstance(at_most_once, str | bytes) or not isinstance(at_most_once, Iterable):
            raise UsageError(
                f"at_most_once must be a list of effect names; did you mean "
                f"at_most_once=[{at_most_once!r}]?"
            )
        for name in at_most_once:
            if not isinstance(name, str):
                raise UsageError(
                    f"at_most_once: {name!r} is not an effect name; give the names, e.g. "
                    "at_most_once=['charge']"
                )
            rules.append(Rule(name=name, once=True))
    return tuple(rules) or None


class RuledJudge(Judge):
    """A ``Judge`` that also checks absolute rules, in the baseline and in every scenario."""

    def __init__(
        self,
        rules: Sequence[Rule],
        baseline: Life,
        log: ScenarioLog,
        rerun: Rerun,
        inputs: Sequence[Any],
    ) -> None:
        super().__init__(baseline, log, rerun, inputs)
        self._kept = tuple(rules)  # the rules the baseline keeps
        self._python, self._cli = _spelled(rules)

    def _finding(self, kind: FindingKind, scenario: str, message: str) -> Finding:
        """Every finding's rerun lines carry the rules, so that they reproduce it."""
        finding = super()._finding(kind, scenario, message)
        only = f"only={scenario!r}"
        cli = finding.rerun_cli
        return dataclasses.replace(
            finding,
            rerun=finding.rerun.replace(only, f"{only}, {self._python}", 1),
            rerun_cli=f"{cli} {self._cli}" if cli.startswith("crashresume ") and self._cli else cli,
        )

    def baselines(self, repeat: Life, repeat_log: ScenarioLog) -> list[Finding]:
        findings = super().baselines(repeat, repeat_log)
        broken: list[Rule] = []
        messages: list[str] = []
        for rule in self._kept:
            message = rule.broken(self._performed, finished=True)
            if message is not None:
                broken.append(rule)
                messages.append(message)
        if broken:
            findings.append(
                self._finding(
                    FindingKind.RULE_BROKEN,
                    BASELINE_ID,
                    "without any crash: " + "; ".join(messages),
                )
            )
            self.exempt = frozenset(rule.name for rule in broken if rule.name is not None)
            self._kept = tuple(rule for rule in self._kept if rule not in broken)
        return findings

    def scenario(self, scenario: str, lives: list[Life], log: ScenarioLog) -> list[Finding]:
        findings = super().scenario(scenario, lives, log)
        finished = lives[-1].completed
        messages = [
            message
            for rule in self._kept
            if (message := rule.broken(log.performed, finished=finished)) is not None
        ]
        if messages:
            findings.append(self._finding(FindingKind.RULE_BROKEN, scenario, "; ".join(messages)))
        return findings


def _spelled(rules: Sequence[Rule]) -> tuple[str, str]:
    """The rules as conform arguments, and as the CLI options that can say them."""
    counts = {rule.name: rule.count for rule in rules if rule.count is not None}
    once = [rule.name for rule in rules if rule.once]
    checks = [getattr(rule.check, "__name__", "check") for rule in rules if rule.check]
    python = []
    if counts:
        python.append(f"expect={counts!r}")
    if checks:
        python.append(f"expect={checks[0]}")
    if once:
        python.append(f"at_most_once={once!r}")
    cli = [f"--expect {shlex.quote(f'{name}={count}')}" for name, count in counts.items()]
    cli += [f"--at-most-once {shlex.quote(str(name))}" for name in once]
    return ", ".join(python), " ".join(cli)


def make_judge(
    rules: Sequence[Rule] | None,
    baseline: Life,
    log: ScenarioLog,
    rerun: Rerun,
    inputs: Sequence[Any],
) -> Judge:
    """The judge of one ``conform`` call: with the rules, when there are any."""
    if not rules:
        return Judge(baseline, log, rerun, inputs)
    return RuledJudge(rules, baseline, log, rerun, inputs)
