"""A run's history as an SVG timeline: one lane per worker generation, one column per event.

Hand-written SVG: the standard library's ``xml.etree`` assembles it (so every
text is escaped and the file is well-formed XML), nothing else is needed. Time
runs left to right in journal order, not to scale: a crash and its restart can be
milliseconds or hours apart, and every mark carries its own time underneath.

Marks: a triangle where a generation claimed the run (red when it took over a
lease), a circle per decision, a diamond per intent (hollow with a ``?`` while it
has no confirm), a square per confirm (teal when the remote answered
``already_done``), a red cross where a worker died, a grey bar where one handed the
run back. Dashed red curves join a dead worker to the claim that took its run over;
dotted lines join an intent to the confirm another generation wrote for it under the
same key.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from .runview import Event, RunHistory, clock_text

SVG_NS = "http://www.w3.org/2000/svg"
COLUMN = 104  # px per event
LANE = 84  # px per lane
LABELS = 210  # px of lane labels on the left
TOP = 70  # px above the first lane
MIN_WIDTH = 1160  # px, so the legend fits
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
CHARS = 16  # characters of detail text that fit in a column without squeezing
VERDICT_LINE = 16  # px per line of verdict text

COLORS = {
    "claim": "#334155",
    "takeover": "#b91c1c",
    "decide": "#2563eb",
    "intent": "#d97706",
    "doubt": "#ea580c",
    "created": "#16a34a",
    "already_done": "#0d9488",
    "crash": "#dc2626",
    "expired": "#dc2626",
    "done": "#111827",
    "failed": "#dc2626",
    "cancelled": "#6b7280",
    "stopped": "#64748b",
    "lane": "#f1f5f9",
    "muted": "#64748b",
}


def _el(parent: ET.Element, tag: str, text: str | None = None, **attrs: object) -> ET.Element:
    element = ET.SubElement(
        parent, tag, {k.rstrip("_").replace("_", "-"): str(v) for k, v in attrs.items()}
    )
    if text is not None:
        element.text = text
    return element


def _text(
    parent: ET.Element,
    x: float,
    y: float,
    text: str,
    *,
    size: int = 10,
    fit: float | None = None,
    **attrs: object,
) -> ET.Element:
    """A line of text; longer than ``fit`` px allows, it is squeezed, never cut."""
    if fit is not None and len(text) * size * 0.62 > fit:
        attrs.update(textLength=f"{fit:.0f}", lengthAdjust="spacingAndGlyphs")
    return _el(parent, "text", text, x=f"{x:.1f}", y=f"{y:.1f}", font_size=size, **attrs)


def _mark(parent: ET.Element, kind: str, x: float, y: float, *, doubt: bool = False) -> None:
    """The symbol of one event kind centred on (x, y)."""
    if kind in ("claim", "takeover"):
        points = f"{x - 7:.1f},{y - 8:.1f} {x + 8:.1f},{y:.1f} {x - 7:.1f},{y + 8:.1f}"
        _el(parent, "polygon", points=points, fill=COLORS[kind])
    elif kind == "decide":
        _el(parent, "circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=7, fill=COLORS["decide"])
    elif kind == "intent":
        points = f"{x:.1f},{y - 9:.1f} {x + 9:.1f},{y:.1f} {x:.1f},{y + 9:.1f} {x - 9:.1f},{y:.1f}"
        if doubt:
            _el(parent, "polygon", points=points, fill="#fff7ed", stroke=COLORS["doubt"])
            _el(
                parent,
                "text",
                "?",
                x=f"{x:.1f}",
                y=f"{y + 4:.1f}",
                font_size=11,
                font_weight="bold",
                text_anchor="middle",
                fill=COLORS["doubt"],
            )
        else:
            _el(parent, "polygon", points=points, fill=COLORS["intent"])
    elif kind in ("created", "already_done", "failed"):
        _el(
            parent,
            "rect",
            x=f"{x - 7:.1f}",
            y=f"{y - 7:.1f}",
            width=14,
            height=14,
            fill=COLORS[kind],
        )
    elif kind in ("crash", "expired"):
        dash = {"stroke_dasharray": "3 2"} if kind == "expired" else {}
        for dx in (-1, 1):
            _el(
                parent,
                "line",
                x1=f"{x - 8:.1f}",
                y1=f"{y - 8 * dx:.1f}",
                x2=f"{x + 8:.1f}",
                y2=f"{y + 8 * dx:.1f}",
                stroke=COLORS[kind],
                stroke_width=3,
                stroke_linecap="round",
                **dash,
            )
    elif kind == "stopped":
        _el(
            parent,
            "rect",
            x=f"{x - 2:.1f}",
            y=f"{y - 9:.1f}",
            width=4,
            height=18,
            fill=COLORS["stopped"],
        )
    elif kind == "done":
        _el(
            parent,
            "circle",
            cx=f"{x:.1f}",
            cy=f"{y:.1f}",
            r=8,
            fill="none",
            stroke=COLORS["done"],
            stroke_width=2,
        )
        _el(parent, "circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=4, fill=COLORS["done"])
    else:  # cancelled
        _el(
            parent,
            "circle",
            cx=f"{x:.1f}",
            cy=f"{y:.1f}",
            r=8,
            fill="none",
            stroke=COLORS["cancelled"],
            stroke_width=2,
        )
        _el(
            parent,
            "line",
            x1=f"{x - 6:.1f}",
            y1=f"{y + 6:.1f}",
            x2=f"{x + 6:.1f}",
            y2=f"{y - 6:.1f}",
            stroke=COLORS["cancelled"],
            stroke_width=2,
        )


def _symbol(event: Event, history: RunHistory) -> tuple[str, bool]:
    """(mark kind, in doubt) of an event."""
    if event.kind == "confirm":
        step = next(s for s in history.steps if s.seq == event.seq)
        return ("already_done" if step.remote_status == "already_done" else "created"), False
    if event.kind == "intent":
        step = next(s for s in history.steps if s.seq == event.seq)
        return "intent", step.state == "in_doubt"
    return event.kind, False


def _lanes(history: RunHistory) -> list[int | None]:
    generations = {c.generation for c in history.claims}
    generations |= {e.generation for e in history.events if e.generation is not None}
    lanes: list[int | None] = [*sorted(generations)]
    if any(e.generation is None for e in history.events):
        lanes.append(None)  # the operator's own acts (a cancel)
    return lanes


def _lane_caption(history: RunHistory, generation: int | None) -> tuple[str, str, str]:
    if generation is None:
        return "operator", "", "outside any lease"
    owner = history.owners.get(generation, "")
    claim = next((c for c in history.claims if c.generation == generation), None)
    how = {
        "first": "first claim",
        "free": "claimed a free run",
        "expired": "took over: lease expired",
        "live": "took over a live lease",
    }.get(claim.kind if claim else "", "claim not recorded")
    run = history.run
    if generation == run.generation and run.status == "running" and run.owner is not None:
        if not run.lease_live:
            how += "; lease expired"
        elif history.owner_gone:
            how += "; process gone"
        else:
            how += "; holds the lease"
    return f"generation {generation}", owner, how


def render(history: RunHistory) -> str:
    """The SVG document (a string) of one run's history."""
    run = history.run
    events = history.events
    lanes = _lanes(history)
    row = {generation: index for index, generation in enumerate(lanes)}
    body_width = COLUMN * max(len(events), 1)
    width = max(LABELS + body_width + 24, MIN_WIDTH)
    chars = max(40, int((width - 40) / 6.6))
    verdicts = history.in_doubt or ["nothing in doubt: every intent has its confirm"]
    wrapped = [textwrap.wrap(v, chars) for v in (*verdicts, *history.notes)]
    verdict_height = 28 + VERDICT_LINE * sum(len(w) for w in wrapped) + 6 * len(wrapped)
    lanes_bottom = TOP + LANE * max(len(lanes), 1)
    height = lanes_bottom + verdict_height + 70

    svg = ET.Element(
        "svg",
        {
            "xmlns": SVG_NS,
            "width": str(width),
            "height": str(height),
            "viewBox": f"0 0 {width} {height}",
            "font-family": FONT,
            "class": "crashresume-timeline",
            "data-run": run.id,
        },
    )
    _el(svg, "title", f"run {run.id}: journal timeline")
    _el(svg, "rect", x=0, y=0, width=width, height=height, fill="#ffffff")
    steps = sum(1 for s in history.steps if s.state == "confirmed")
    takeovers = sum(1 for c in history.claims if c.takeover)
    doubt = f"{len(history.in_doubt)} in doubt" if history.in_doubt else "nothing in doubt"
    _text(svg, 16, 26, f"run {run.id} \u2014 {run.status}", size=16, font_weight="bold")
    _text(
        svg,
        16,
        46,
        f"{steps} steps confirmed \u00b7 llm_calls {run.llm_calls} \u00b7 generation "
        f"{run.generation} \u00b7 {takeovers} takeover(s) \u00b7 {doubt}",
        size=11,
        fill=COLORS["muted"],
    )
    _text(
        svg,
        16,
        61,
        "one column per journal event, in order (not to scale); local times from cr_now()",
        size=10,
        fill=COLORS["muted"],
    )

    def centre(index: int, generation: int | None) -> tuple[float, float]:
        return LABELS + COLUMN * (index + 0.5), TOP + LANE * row[generation] + 22

    if not lanes:
        _text(
            svg, 16, TOP + 30, "no worker has claimed this run yet", size=12, fill=COLORS["muted"]
        )
    for generation in lanes:
        top = TOP + LANE * row[generation]
        group = _el(
            svg, "g", class_="lane", data_generation="" if generation is None else generation
        )
        _el(group, "rect", x=0, y=top, width=width, height=LANE, fill=_lane_fill(row[generation]))
        name, owner, how = _lane_caption(history, generation)
        _text(group, 12, top + 20, name, size=12, font_weight="bold")
        if owner:
            _text(group, 12, top + 36, owner, size=9, fit=LABELS - 20, fill=COLORS["muted"])
        _text(group, 12, top + 50, how, size=9, fit=LABELS - 20, fill=COLORS["muted"])
        columns = [i for i, e in enumerate(events) if e.generation == generation]
        if columns and generation is not None:
            x1, y = centre(columns[0], generation)
            x2, _ = centre(columns[-1], generation)
            _el(
                group,
                "line",
                x1=f"{x1:.1f}",
                y1=f"{y:.1f}",
                x2=f"{x2:.1f}",
                y2=f"{y:.1f}",
                stroke="#94a3b8",
                stroke_width=2,
            )
            live = (
                generation == run.generation
                and run.status == "running"
                and run.lease_live
                and not history.owner_gone
            )
            if live and run.lease_expires_at is not None:
                _el(
                    group,
                    "line",
                    x1=f"{x2:.1f}",
                    y1=f"{y:.1f}",
                    x2=f"{width - 12:.1f}",
                    y2=f"{y:.1f}",
                    stroke="#94a3b8",
                    stroke_width=2,
                    stroke_dasharray="6 4",
                )
                _text(
                    group,
                    width - 14,
                    y - 6,
                    f"lease until {clock_text(run.lease_expires_at)}",
                    size=9,
                    text_anchor="end",
                    fill=COLORS["muted"],
                )

    position = {(e.kind, e.seq, e.generation): i for i, e in enumerate(events)}
    links = _el(svg, "g", class_="links")
    for i, event in enumerate(events):
        if event.kind == "takeover" and event.generation is not None:
            dead = position.get(("crash", None, event.generation - 1))
            if dead is not None and event.generation - 1 in row:
                _curve(
                    links,
                    centre(dead, event.generation - 1),
                    centre(i, event.generation),
                    COLORS["takeover"],
                    "5 4",
                )
    for step in history.steps:
        if step.resent and step.intent_by in row and step.confirmed_by in row:
            a = position.get(("intent", step.seq, step.intent_by))
            b = position.get(("confirm", step.seq, step.confirmed_by))
            if a is not None and b is not None:
                _curve(
                    links,
                    centre(a, step.intent_by),
                    centre(b, step.confirmed_by),
                    COLORS["already_done"],
                    "2 3",
                    label=f"same key {step.key}",
                )

    marks = _el(svg, "g", class_="events")
    for i, event in enumerate(events):
        x, y = centre(i, event.generation)
        symbol, in_doubt = _symbol(event, history)
        group = _el(
            marks,
            "g",
            class_=f"event {event.kind}" + (" in-doubt" if in_doubt else ""),
            data_kind=event.kind,
            data_seq="" if event.seq is None else event.seq,
            data_key=event.key or "",
            data_generation="" if event.generation is None else event.generation,
            data_at=event.at.isoformat(),
        )
        _el(group, "title", event.text)
        _mark(group, symbol, x, y, doubt=in_doubt)
        colour = COLORS["doubt"] if in_doubt else "#0f172a"
        # A halo in the lane's own colour keeps labels readable where a link crosses them.
        halo = {
            "stroke": _lane_fill(row[event.generation]),
            "stroke_width": 3,
            "paint_order": "stroke",
            "stroke_linejoin": "round",
        }
        _text(
            group,
            x,
            y + 24,
            event.label,
            size=10,
            fit=COLUMN - 6,
            font_weight="bold",
            text_anchor="middle",
            fill=colour,
            class_="label",
            **halo,
        )
        for n, line in enumerate(event.details):
            _text(
                group,
                x,
                y + 36 + 11 * n,
                line,
                size=9,
                fit=COLUMN - 8,
                text_anchor="middle",
                fill=COLORS["muted"],
                class_="detail",
                **halo,
            )

    _verdicts(svg, lanes_bottom, wrapped, doubts=len(history.in_doubt))
    _legend(svg, height - 34)
    ET.indent(svg)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(svg, encoding="unicode") + "\n"


def _lane_fill(index: int) -> str:
    return COLORS["lane"] if index % 2 == 0 else "#ffffff"


def _curve(
    parent: ET.Element,
    start: tuple[float, float],
    end: tuple[float, float],
    colour: str,
    dash: str,
    *,
    label: str | None = None,
) -> None:
    (x1, y1), (x2, y2) = start, end
    mid = (x1 + x2) / 2
    path = f"M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
    _el(parent, "path", d=path, fill="none", stroke=colour, stroke_width=1.5, stroke_dasharray=dash)
    if label:  # above the end of the link, where a lane keeps some room
        _text(
            parent,
            x2,
            y2 - 13,
            label,
            size=9,
            fill=colour,
            text_anchor="middle",
            class_="link-label",
        )


def _verdicts(svg: ET.Element, top: float, wrapped: list[list[str]], *, doubts: int) -> None:
    """The in-doubt verdicts (orange), then the notes on the run."""
    doubt = doubts > 0
    group = _el(svg, "g", class_="verdicts")
    _text(
        group,
        16,
        top + 22,
        "in doubt" if doubt else "verdict",
        size=12,
        font_weight="bold",
        fill=COLORS["doubt"] if doubt else "#0f172a",
    )
    y = top + 22 + VERDICT_LINE
    for index, lines in enumerate(wrapped):
        colour = COLORS["doubt"] if index < doubts else "#0f172a"
        for line in lines:
            _text(group, 16, y, line, size=11, fill=colour, class_="verdict")
            y += VERDICT_LINE
        y += 6


def _legend(svg: ET.Element, y: float) -> None:
    group = _el(svg, "g", class_="legend")
    items = (
        ("claim", "claim"),
        ("takeover", "takeover"),
        ("decide", "decision"),
        ("intent", "intent"),
        ("doubt", "intent in doubt"),
        ("created", "confirm: created"),
        ("already_done", "confirm: already_done"),
        ("crash", "worker died"),
        ("stopped", "handed back"),
        ("done", "run done"),
    )
    x = 24.0
    for kind, name in items:
        if kind == "doubt":
            _mark(group, "intent", x, y, doubt=True)
        else:
            _mark(group, kind, x, y)
        _text(group, x + 14, y + 4, name, size=10, fill="#0f172a")
        x += 22 + len(name) * 6.4 + 18


def write(history: RunHistory, path: str | Path) -> Path:
    """Render ``history`` to ``path`` (UTF-8); returns the path written."""
    target = Path(path)
    target.write_text(render(history), encoding="utf-8")
    return target
