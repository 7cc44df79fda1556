"""Results of a mutation run, the equivalent-mutant annotations, and the report.

Each mutant's result is one JSON line in the results file (a run can be resumed, and
several runs add up). The report (markdown, and the same as JSON beside it) gives per
module: killed, killed by timeout, survived, errors, total, and the score -- one table a
tier (:mod:`.tiers`: the protocol's, killed by the suite; the tests tier's, by their own
``tests/`` files), never added up; and every survivor with its diff and its verdict:
``equivalent: <why>`` when
``properties/mutation/equivalent.toml`` says so (checked in, one ``[[equivalent]]``
table per mutant: ``id``, ``why``), else ``open`` -- a gap in the suite.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from . import tiers

ANNOTATIONS: Final = Path(__file__).resolve().parent / "equivalent.toml"
STATUSES: Final = ("killed", "timeout", "survived", "error")


@dataclass(frozen=True, kw_only=True)
class Result:
    id: str
    module: str
    where: str
    operator: str
    line: int
    status: str  # killed | timeout | survived | error (the command could not run)
    seconds: float
    detail: str  # what killed it (the violation, the schedule), or how far it got
    diff: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Result:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


def load_results(path: Path) -> dict[str, Result]:
    """The results in ``path`` by mutant id (a later line for the same id wins)."""
    if not path.exists():
        return {}
    found: dict[str, Result] = {}
    for row in path.read_text("utf-8").splitlines():
        if row.strip():
            result = Result.from_json(json.loads(row))
            found[result.id] = result
    return found


def append_result(path: Path, result: Result) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(asdict(result)) + "\n")


def load_annotations(path: Path = ANNOTATIONS) -> dict[str, str]:
    """``{mutant id: why it is equivalent}`` from an annotations file."""
    if not path.exists():
        return {}
    tables = tomllib.loads(path.read_text("utf-8")).get("equivalent", [])
    found: dict[str, str] = {}
    for table in tables:
        mutant_id = str(table["id"])
        if mutant_id in found:  # two reasons for one mutant: which one holds is unsaid
            raise ValueError(f"{path}: mutant {mutant_id} is argued equivalent twice")
        found[mutant_id] = str(table["why"])
    return found


def annotation(mutant_id: str, why: str) -> str:
    """One ``[[equivalent]]`` table, as the annotations file holds it."""
    # A JSON string is a TOML basic string (the same escapes).
    return f"[[equivalent]]\nid = {json.dumps(mutant_id)}\nwhy = {json.dumps(why)}\n"


def summary(results: Iterable[Result], annotations: Mapping[str, str]) -> dict[str, Any]:
    """Per module: counts by status, equivalent survivors, and the scores."""
    modules: dict[str, dict[str, Any]] = {}
    for r in results:
        row = modules.setdefault(
            r.module, {**dict.fromkeys(STATUSES, 0), "equivalent": 0, "total": 0, "seconds": 0.0}
        )
        row[r.status] += 1
        row["total"] += 1
        row["seconds"] += r.seconds
        if r.status == "survived" and r.id in annotations:
            row["equivalent"] += 1
    for row in modules.values():
        dead = row["killed"] + row["timeout"]
        row["seconds"] = round(row["seconds"], 1)
        row["score"] = round(dead / row["total"], 3) if row["total"] else None
        real = row["total"] - row["equivalent"]
        row["score_without_equivalent"] = round(dead / real, 3) if real else None
    return dict(sorted(modules.items()))


def write(
    results: Mapping[str, Result],
    annotations: Mapping[str, str],
    report: Path,
    *,
    context: Mapping[str, Any],
) -> dict[str, Any]:
    """Write ``report`` (markdown) and ``report`` with ``.json``; return the JSON."""
    ordered = sorted(results.values(), key=lambda r: (r.module, r.line, r.id))
    per_module = summary(ordered, annotations)
    survivors = [
        {
            **asdict(r),
            "verdict": f"equivalent: {annotations[r.id]}" if r.id in annotations else "open",
        }
        for r in ordered
        if r.status == "survived"
    ]
    data = {
        **context,
        "modules": per_module,
        "tiers": {
            tier: summary([r for r in ordered if tier_of(r) == tier], annotations)
            for tier in tiers.TIERS
        },
        "survivors": survivors,
        "results": [asdict(r) for r in ordered],
    }
    report.parent.mkdir(parents=True, exist_ok=True)
    report.with_suffix(".json").write_text(json.dumps(data, indent=2), "utf-8")
    report.write_text(markdown(annotations, survivors, ordered, context), "utf-8")
    return data


def tier_of(r: Result) -> str:
    """A result's tier (a SQL file's statements may be of both: operator.sql's are)."""
    try:
        return tiers.tier_of(r.module, r.where)
    except KeyError:  # a statement since renamed: the suite's, as before the tiers
        return tiers.PROTOCOL


def markdown(
    annotations: Mapping[str, str],
    survivors: list[dict[str, Any]],
    ordered: list[Result],
    context: Mapping[str, Any],
) -> str:
    lines = ["# Mutation report", ""]
    lines += [f"- {key}: {value}" for key, value in context.items()]
    for tier, title in (
        (tiers.PROTOCOL, "protocol (killed by python -m properties.mutation.check)"),
        (tiers.TESTS, "tests (killed by each statement's or module's own tests/ files)"),
    ):
        mine = [r for r in ordered if tier_of(r) == tier]
        if not mine:
            continue
        rows = summary(mine, annotations)
        lines += [
            "",
            f"### Tier: {title}",
            "",
            "| module | killed | timeout | survived | of them equivalent | error | total "
            "| score (killed+timeout)/total | without equivalent | seconds |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, row in rows.items():
            lines.append(
                f"| {name} | {row['killed']} | {row['timeout']} | {row['survived']} "
                f"| {row['equivalent']} | {row['error']} | {row['total']} | {_pct(row['score'])} "
                f"| {_pct(row['score_without_equivalent'])} | {row['seconds']} |"
            )
    lines += ["", f"## Survivors ({len(survivors)})", ""]
    for s in survivors:
        lines += [
            f"### `{s['id']}` ({s['where']}, line {s['line']}, {s['operator']}, "
            f"tier {tier_of(Result.from_json(s))})",
            "",
            f"**{s['verdict']}**",
            "",
            "```diff",
            *[row for row in s["diff"].splitlines() if not row.startswith(("---", "+++"))],
            "```",
            "",
        ]
    lines += ["## Killed", "", "| mutant | status | seconds | by |", "|---|---|---|---|"]
    for r in ordered:
        if r.status != "survived":
            by = r.detail.replace("|", "\\|").replace("\n", " / ")[:200]
            lines.append(f"| `{r.id}` | {r.status} | {r.seconds:.1f} | {by} |")
    return "\n".join(lines) + "\n"


def _pct(score: float | None) -> str:
    return "-" if score is None else f"{score:.0%}"
