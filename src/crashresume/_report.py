"""The report ``conform`` returns: findings, readable text, JSON, and rerun hints."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crashresume._faults import describe_fault_id
from crashresume._findings import Finding, FindingKind
from crashresume._scenarios import (
    describe_overlap,
    describe_points,
    parse_overlap_id,
    parse_scenario_id,
)

SHOWN_PER_KIND = 5  # findings of one kind printed in full by str(report); the rest are counted
_MAX_PYTHON_INPUTS = 120  # characters of repr(inputs) a rerun hint spells out
_MAX_CLI_INPUTS = 200  # characters of quoted inputs a CLI rerun hint spells out

ID_LEGEND = (
    "scenario ids: run = the crash-free baseline; run-<k> = died right after effect call k; "
    "run-before-<k> = died right before effect call k; '-then-' chains a crash in the resumed "
    "run, whose effect calls are counted from 1 again; run-overlap-<k> (-before-<k>) = the first "
    "run froze right after (before) effect call k, its restart ran, then it woke; "
    "run-<fault>-<k> = effect call k met that fault (faults=)"
)


class Rerun:
    """Builds the 'rerun just this scenario' lines for one ``conform`` call."""

    def __init__(
        self, factory: Callable[..., Any], inputs: Sequence[Any], mode: str, repeat: int = 1
    ) -> None:
        name = getattr(factory, "__name__", "")
        self.name = name if name.isidentifier() else "make_agent"
        spelled = repr(list(inputs))
        self._inputs = spelled if len(spelled) <= _MAX_PYTHON_INPUTS else "inputs"
        self._note = "" if self._inputs == spelled else f"  # the same {len(inputs)} inputs"
        self._mode = "" if mode == "inprocess" else f", mode={mode!r}"
        self._cli_mode = "" if mode == "inprocess" else f" --mode {mode}"
        if repeat > 1:  # a finding of a race needs the repetitions to show again
            self._mode += f", repeat={repeat}"
            self._cli_mode += f" --repeat {repeat}"
        module = getattr(factory, "__module__", None)
        qualname = getattr(factory, "__qualname__", "")
        importable = bool(module) and module != "__main__" and "<" not in qualname and qualname
        self._target = f"{module}:{qualname}" if importable else "MODULE:FACTORY"
        if all(isinstance(item, str) for item in inputs):
            quoted = " ".join(shlex.quote(item) for item in inputs)
            self._cli_inputs: str | None = (
                quoted if len(quoted) <= _MAX_CLI_INPUTS else f"<the same {len(inputs)} inputs>"
            )
        else:
            self._cli_inputs = None

    def python(self, scenario: str) -> str:
        return (
            f"conform({self.name}, inputs={self._inputs}, only={scenario!r}{self._mode})"
            f"{self._note}"
        )

    def cli(self, scenario: str) -> str:
        if self._cli_inputs is None:
            return "(no CLI equivalent: the CLI passes inputs as strings; use the Python call)"
        return (
            f"crashresume check {self._target} --inputs {self._cli_inputs} "
            f"--only {scenario}{self._cli_mode}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """The outcome of ``conform``. ``passed`` is true exactly when there are no findings."""

    subject: str  # the factory's name
    inputs: int  # how many inputs each life was fed
    mode: str  # "inprocess" or "process"
    crashes: int  # crashes per scenario the plan went up to
    baseline_effects: int  # effect calls the crash-free baseline made
    explore: str = "exhaustive"  # "exhaustive" (the plan) or "hypothesis" (drawn schedules)
    seed: int | None = None  # the Hypothesis seed (explore="hypothesis" only)
    examples: int | None = None  # schedules Hypothesis ran (explore="hypothesis" only)
    repeat: int = 1  # times each scenario ran (repeat=N); findings then carry their count
    scenarios: list[str] = field(default_factory=list)  # ids of the crash scenarios run
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # things worth knowing that are not findings

    @property
    def passed(self) -> bool:
        """True when no scenario found anything."""
        return not self.findings

    def kinds(self) -> set[FindingKind]:
        """The kinds of finding present, e.g. ``{FindingKind.DUPLICATE_EFFECT}``."""
        return {finding.kind for finding in self.findings}

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        return {
            "passed": self.passed,
            "subject": self.subject,
            "inputs": self.inputs,
            "mode": self.mode,
            "crashes": self.crashes,
            "baseline_effects": self.baseline_effects,
            "explore": self.explore,
            "seed": self.seed,
            "examples": self.examples,
            "repeat": self.repeat,
            "scenarios": list(self.scenarios),
            "findings": [finding.to_dict() for finding in self.findings],
            "notes": list(self.notes),
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """The report as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    def _search(self) -> str:
        if self.explore == "exhaustive":
            return "" if self.repeat == 1 else f", repeat={self.repeat}"
        return f", explore={self.explore} seed={self.seed} examples={self.examples}"

    def __str__(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        found = "no findings" if self.passed else _plural(len(self.findings), "finding")
        lines = [
            f"crashresume: {verdict}: {self.subject} over {_plural(self.inputs, 'input')}, "
            f"{found} in {_plural(len(self.scenarios), 'crash scenario')} "
            f"({_plural(self.baseline_effects, 'effect call')} in the baseline, "
            f"crashes={self.crashes}, mode={self.mode}{self._search()})"
        ]
        by_kind: dict[FindingKind, list[Finding]] = {}
        for finding in self.findings:
            by_kind.setdefault(finding.kind, []).append(finding)
        for kind in FindingKind:
            group = by_kind.get(kind)
            if not group:
                continue
            lines.append("")
            lines.append(f"{kind}: {_plural(len(group), 'scenario')}")
            for finding in group[:SHOWN_PER_KIND]:
                seen = f", in {finding.repeats} runs" if finding.repeats else ""
                lines.append(f"  {finding.scenario} ({_describe(finding.scenario)}){seen}:")
                lines.append(f"    {finding.message}")
                lines.append(f"    rerun: {finding.rerun}")
                lines.append(f"    cli:   {finding.rerun_cli}")
            hidden = len(group) - SHOWN_PER_KIND
            if hidden > 0:
                lines.append(
                    f"  ... and {hidden} more {kind} (report.findings and report.to_json() "
                    "list every one)"
                )
        if self.notes:
            lines.append("")
            lines.append("notes:")
            lines.extend(f"  - {note}" for note in self.notes)
        if not self.passed:
            lines.append("")
            lines.append(ID_LEGEND)
        return "\n".join(lines)


def _describe(scenario: str) -> str:
    frozen = parse_overlap_id(scenario)
    if frozen is not None:
        return describe_overlap(frozen)
    fault = describe_fault_id(scenario)
    if fault is not None:
        return fault
    points = parse_scenario_id(scenario)
    return describe_points(points) if points else "the crash-free baseline"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
