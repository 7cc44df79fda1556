"""A run's history as an SVG timeline: one lane per worker generation, one column per event.

Hand-written SVG: the standard library's ``xml.etree`` assembles it (so every
text is escaped and the file is well-formed XML), nothing else is needed. Time
runs left to right in journal order, not to scale: a crash and its restart can be
milliseconds or hours apart, and every mark carries its own time underneath.

Marks: a triangle where a generation claimed the run (red when it took over a
lease), a circle per decision, a diamond per intent (hollow with a ``?`` while it
has no confirm), a square per confirm (teal when the remote answered
``already_done``), a red cross where a worker died (dashed grey where a forced
takeover fenced it out), a grey bar where one handed the run back, a ring with an
arrow where an operator retried the run (on the operator's lane; the failure it
cleared stays where it happened). Dashed red
curves join a dead worker to the claim that took its run over; dotted lines join
an intent to the confirm another generation wrote for it under the same key.

:func:`render` draws, top to bottom: the header, the lanes, the links between
lanes, the events, the verdicts, the legend. :class:`Layout` decides every size
and position first, so each drawing step only places what it is given.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .lanes import lane_caption, lane_generations, mark_of
from .marks import COLORS, curve, element, legend, mark, text_line
from .views import Event, RunHistory, clock_text

SVG_NS = "http://www.w3.org/2000/svg"
COLUMN = 104  # px per event
LANE = 84  # px per lane
LABELS = 210  # px of lane labels on the left
TOP = 70  # px above the first lane
MIN_WIDTH = 1450  # px, so the legend fits
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
VERDICT_LINE = 16  # px per line of verdict text
NO_DOUBT = "nothing in doubt: every intent has its confirm"


@dataclass(frozen=True, kw_only=True)
class Layout:
    """Where everything goes: the lanes (one per generation), the page, the verdict lines."""

    lanes: list[int | None]  # generations top to bottom; None: the operator's own acts
    width: int
    height: int
    lanes_bottom: int  # y where the verdicts start
    wrapped: list[list[str]]  # each verdict, then each note, wrapped to the page

    @classmethod
    def of(cls, history: RunHistory) -> Layout:
        lanes = lane_generations(history)
        width = max(LABELS + COLUMN * max(len(history.events), 1) + 24, MIN_WIDTH)
        chars = max(40, int((width - 40) / 6.6))
        verdicts = history.in_doubt or [NO_DOUBT]
        wrapped = [textwrap.wrap(v, chars) for v in (*verdicts, *history.notes)]
        verdict_height = 28 + VERDICT_LINE * sum(len(w) for w in wrapped) + 6 * len(wrapped)
        lanes_bottom = TOP + LANE * max(len(lanes), 1)
        return cls(
            lanes=lanes,
            width=width,
            height=lanes_bottom + verdict_height + 70,
            lanes_bottom=lanes_bottom,
            wrapped=wrapped,
        )

    def row(self, generation: int | None) -> int:
        return self.lanes.index(generation)

    def lane_top(self, generation: int | None) -> int:
        return TOP + LANE * self.row(generation)

    def lane_fill(self, generation: int | None) -> str:
        return COLORS["lane"] if self.row(generation) % 2 == 0 else "#ffffff"

    def centre(self, column: int, generation: int | None) -> tuple[float, float]:
        """The middle of event ``column``'s mark on ``generation``'s lane."""
        return LABELS + COLUMN * (column + 0.5), self.lane_top(generation) + 22


def render(history: RunHistory) -> str:
    """The SVG document (a string) of one run's history."""
    layout = Layout.of(history)
    svg = _page(history, layout)
    _header(svg, history)
    _lanes(svg, history, layout)
    _links(svg, history, layout)
    _events(svg, history, layout)
    _verdicts(svg, layout, doubts=len(history.in_doubt))
    legend(svg, layout.height - 34)
    ET.indent(svg)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(svg, encoding="unicode") + "\n"


def write(history: RunHistory, path: str | Path) -> Path:
    """Render ``history`` to ``path`` (UTF-8); returns the path written."""
    target = Path(path)
    target.write_text(render(history), encoding="utf-8")
    return target


# -- the steps of render, in drawing order ---------------------------------------------------


def _page(history: RunHistory, layout: Layout) -> ET.Element:
    """The root element, its title and a white background."""
    width, height = layout.width, layout.height
    svg = ET.Element(
        "svg",
        {
            "xmlns": SVG_NS,
            "width": str(width),
            "height": str(height),
            "viewBox": f"0 0 {width} {height}",
            "font-family": FONT,
            "class": "crashresume-timeline",
            "data-run": history.run.id,
        },
    )
    element(svg, "title", f"run {history.run.id}: journal timeline")
    element(svg, "rect", x=0, y=0, width=width, height=height, fill="#ffffff")
    return svg


def _header(svg: ET.Element, history: RunHistory) -> None:
    """The run, its status and three counts, and how to read the picture."""
    run = history.run
    steps = sum(1 for s in history.steps if s.state == "confirmed")
    takeovers = sum(1 for c in history.claims if c.takeover)
    doubt = f"{len(history.in_doubt)} in doubt" if history.in_doubt else "nothing in doubt"
    text_line(svg, 16, 26, f"run {run.id} \u2014 {run.status}", size=16, font_weight="bold")
    text_line(
        svg,
        16,
        46,
        f"{steps} steps confirmed \u00b7 llm_calls {run.llm_calls} \u00b7 generation "
        f"{run.generation} \u00b7 {takeovers} takeover(s) \u00b7 {doubt}",
        size=11,
        fill=COLORS["muted"],
    )
    text_line(
        svg,
        16,
        61,
        "one column per journal event, in order (not to scale); local times from cr_now()",
        size=10,
        fill=COLORS["muted"],
    )


def _lanes(svg: ET.Element, history: RunHistory, layout: Layout) -> None:
    """One band per generation: its caption, and a line from its first to its last event."""
    if not layout.lanes:
        text_line(
            svg, 16, TOP + 30, "no worker has claimed this run yet", size=12, fill=COLORS["muted"]
        )
    for generation in layout.lanes:
        top = layout.lane_top(generation)
        group = element(
            svg, "g", class_="lane", data_generation="" if generation is None else generation
        )
        element(
            group,
            "rect",
            x=0,
            y=top,
            width=layout.width,
            height=LANE,
            fill=layout.lane_fill(generation),
        )
        name, owner, how = lane_caption(history, generation)
        text_line(group, 12, top + 20, name, size=12, font_weight="bold")
        if owner:
            text_line(group, 12, top + 36, owner, size=9, fit=LABELS - 20, fill=COLORS["muted"])
        text_line(group, 12, top + 50, how, size=9, fit=LABELS - 20, fill=COLORS["muted"])
        columns = [i for i, e in enumerate(history.events) if e.generation == generation]
        if columns and generation is not None:
            _lifeline(group, history, layout, generation, columns[0], columns[-1])


def _lifeline(
    group: ET.Element,
    history: RunHistory,
    layout: Layout,
    generation: int,
    first: int,
    last: int,
) -> None:
    """A generation's line; the one holding a live lease goes on, dashed, to its expiry."""
    x1, y = layout.centre(first, generation)
    x2, _ = layout.centre(last, generation)
    element(
        group,
        "line",
        x1=f"{x1:.1f}",
        y1=f"{y:.1f}",
        x2=f"{x2:.1f}",
        y2=f"{y:.1f}",
        stroke="#94a3b8",
        stroke_width=2,
    )
    run = history.run
    live = (
        generation == run.generation
        and run.status == "running"
        and run.lease_live
        and not history.owner_gone
    )
    if not live or run.lease_expires_at is None:
        return
    element(
        group,
        "line",
        x1=f"{x2:.1f}",
        y1=f"{y:.1f}",
        x2=f"{layout.width - 12:.1f}",
        y2=f"{y:.1f}",
        stroke="#94a3b8",
        stroke_width=2,
        stroke_dasharray="6 4",
    )
    text_line(
        group,
        layout.width - 14,
        y - 6,
        f"lease until {clock_text(run.lease_expires_at)}",
        size=9,
        text_anchor="end",
        fill=COLORS["muted"],
    )


def _links(svg: ET.Element, history: RunHistory, layout: Layout) -> None:
    """A dead worker to the claim that took its run over; an intent to another
    generation's confirm under the same key."""
    events = history.events
    position = {(e.kind, e.seq, e.generation): i for i, e in enumerate(events)}
    links = element(svg, "g", class_="links")
    for i, event in enumerate(events):
        if event.kind == "takeover" and event.generation is not None:
            before = event.generation - 1  # died, or was fenced out by a forced takeover
            dead = position.get(("crash", None, before), position.get(("fenced", None, before)))
            if dead is not None and before in layout.lanes:
                curve(
                    links,
                    layout.centre(dead, before),
                    layout.centre(i, event.generation),
                    COLORS["takeover"],
                    "5 4",
                )
    for step in history.steps:
        if step.resent and step.intent_by in layout.lanes and step.confirmed_by in layout.lanes:
            a = position.get(("intent", step.seq, step.intent_by))
            b = position.get(("confirm", step.seq, step.confirmed_by))
            if a is not None and b is not None:
                curve(
                    links,
                    layout.centre(a, step.intent_by),
                    layout.centre(b, step.confirmed_by),
                    COLORS["already_done"],
                    "2 3",
                    label=f"same key {step.key}",
                )


def _events(svg: ET.Element, history: RunHistory, layout: Layout) -> None:
    """Each event's mark on its lane, its label and its detail lines underneath."""
    marks = element(svg, "g", class_="events")
    for i, event in enumerate(history.events):
        x, y = layout.centre(i, event.generation)
        symbol, in_doubt = mark_of(event, history)
        group = element(
            marks,
            "g",
            class_=f"event {event.kind}" + (" in-doubt" if in_doubt else ""),
            data_kind=event.kind,
            data_seq="" if event.seq is None else event.seq,
            data_key=event.key or "",
            data_generation="" if event.generation is None else event.generation,
            data_at=event.at.isoformat(),
        )
        element(group, "title", event.text)
        mark(group, symbol, x, y, doubt=in_doubt)
        _event_texts(group, event, x, y, in_doubt=in_doubt, halo=layout.lane_fill(event.generation))


def _event_texts(
    group: ET.Element, event: Event, x: float, y: float, *, in_doubt: bool, halo: str
) -> None:
    # A halo in the lane's own colour keeps labels readable where a link crosses them.
    ring = {
        "stroke": halo,
        "stroke_width": 3,
        "paint_order": "stroke",
        "stroke_linejoin": "round",
    }
    text_line(
        group,
        x,
        y + 24,
        event.label,
        size=10,
        fit=COLUMN - 6,
        font_weight="bold",
        text_anchor="middle",
        fill=COLORS["doubt"] if in_doubt else "#0f172a",
        class_="label",
        **ring,
    )
    for n, line in enumerate(event.details):
        text_line(
            group,
            x,
            y + 36 + 11 * n,
            line,
            size=9,
            fit=COLUMN - 8,
            text_anchor="middle",
            fill=COLORS["muted"],
            class_="detail",
            **ring,
        )


def _verdicts(svg: ET.Element, layout: Layout, *, doubts: int) -> None:
    """The in-doubt verdicts (orange), then the notes on the run."""
    top = layout.lanes_bottom
    doubt = doubts > 0
    group = element(svg, "g", class_="verdicts")
    text_line(
        group,
        16,
        top + 22,
        "in doubt" if doubt else "verdict",
        size=12,
        font_weight="bold",
        fill=COLORS["doubt"] if doubt else "#0f172a",
    )
    y = top + 22 + VERDICT_LINE
    for index, lines in enumerate(layout.wrapped):
        colour = COLORS["doubt"] if index < doubts else "#0f172a"
        for line in lines:
            text_line(group, 16, y, line, size=11, fill=colour, class_="verdict")
            y += VERDICT_LINE
        y += 6


# -- what the steps ask of the history --------------------------------------------------------
