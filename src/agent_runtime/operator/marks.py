"""The drawing pieces of the timeline: SVG elements, a line of text, the mark of each event
kind, the link between two marks, and the legend that names the marks.

Every element goes through :func:`element` (``xml.etree``), so every text is escaped
for XML, its control characters too (:func:`agent_runtime.logfmt.escape`: XML 1.0 has
no way to hold most of them, and a terminal showing the file must not run them), and
attribute names are written the SVG way (``font_size`` becomes ``font-size``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..logfmt import escape

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
    "fenced": "#475569",
    "done": "#111827",
    "failed": "#dc2626",
    "cancelled": "#6b7280",
    "retried": "#0e7490",
    "attention": "#c2410c",
    "resolved": "#7c3aed",
    "stopped": "#64748b",
    "lane": "#f1f5f9",
    "muted": "#64748b",
}


def element(parent: ET.Element, tag: str, text: str | None = None, **attrs: object) -> ET.Element:
    element = ET.SubElement(
        parent, tag, {k.rstrip("_").replace("_", "-"): escape(str(v)) for k, v in attrs.items()}
    )
    if text is not None:
        element.text = escape(text)
    return element


def text_line(
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
    return element(parent, "text", text, x=f"{x:.1f}", y=f"{y:.1f}", font_size=size, **attrs)


def mark(parent: ET.Element, kind: str, x: float, y: float, *, doubt: bool = False) -> None:
    """The symbol of one event kind centred on (x, y)."""
    if kind in ("claim", "takeover"):
        points = f"{x - 7:.1f},{y - 8:.1f} {x + 8:.1f},{y:.1f} {x - 7:.1f},{y + 8:.1f}"
        element(parent, "polygon", points=points, fill=COLORS[kind])
    elif kind == "decide":
        element(parent, "circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=7, fill=COLORS["decide"])
    elif kind == "intent":
        points = f"{x:.1f},{y - 9:.1f} {x + 9:.1f},{y:.1f} {x:.1f},{y + 9:.1f} {x - 9:.1f},{y:.1f}"
        if doubt:
            element(parent, "polygon", points=points, fill="#fff7ed", stroke=COLORS["doubt"])
            element(
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
            element(parent, "polygon", points=points, fill=COLORS["intent"])
    elif kind in ("created", "already_done", "failed"):
        element(
            parent,
            "rect",
            x=f"{x - 7:.1f}",
            y=f"{y - 7:.1f}",
            width=14,
            height=14,
            fill=COLORS[kind],
        )
    elif kind in ("crash", "expired", "fenced"):
        dash = {"stroke_dasharray": "3 2"} if kind != "crash" else {}
        for dx in (-1, 1):
            element(
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
        element(
            parent,
            "rect",
            x=f"{x - 2:.1f}",
            y=f"{y - 9:.1f}",
            width=4,
            height=18,
            fill=COLORS["stopped"],
        )
    elif kind == "retried":  # an operator's retry: a ring with an arrow head on it
        element(
            parent,
            "circle",
            cx=f"{x:.1f}",
            cy=f"{y:.1f}",
            r=7,
            fill="none",
            stroke=COLORS["retried"],
            stroke_width=2.5,
            stroke_dasharray="33 11",
        )
        points = f"{x + 4:.1f},{y - 10:.1f} {x + 10:.1f},{y - 6:.1f} {x + 3:.1f},{y - 3:.1f}"
        element(parent, "polygon", points=points, fill=COLORS["retried"])
    elif kind == "attention":  # parked for an operator: an octagon with an exclamation mark
        r, k = 9.0, 3.7
        corners = [
            (-k, -r), (k, -r), (r, -k), (r, k), (k, r), (-k, r), (-r, k), (-r, -k)
        ]  # fmt: skip
        points = " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in corners)
        element(parent, "polygon", points=points, fill=COLORS["attention"])
        element(
            parent,
            "text",
            "!",
            x=f"{x:.1f}",
            y=f"{y + 4:.1f}",
            font_size=12,
            font_weight="bold",
            text_anchor="middle",
            fill="#ffffff",
        )
    elif kind == "resolved":  # an operator's decision on a call in doubt: a ticked ring
        element(
            parent,
            "circle",
            cx=f"{x:.1f}",
            cy=f"{y:.1f}",
            r=8,
            fill="none",
            stroke=COLORS["resolved"],
            stroke_width=2.5,
        )
        tick = f"M{x - 4:.1f},{y:.1f} L{x - 1:.1f},{y + 3:.1f} L{x + 4:.1f},{y - 3:.1f}"
        element(parent, "path", d=tick, fill="none", stroke=COLORS["resolved"], stroke_width=2)
    elif kind == "done":
        element(
            parent,
            "circle",
            cx=f"{x:.1f}",
            cy=f"{y:.1f}",
            r=8,
            fill="none",
            stroke=COLORS["done"],
            stroke_width=2,
        )
        element(parent, "circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=4, fill=COLORS["done"])
    else:  # cancelled
        element(
            parent,
            "circle",
            cx=f"{x:.1f}",
            cy=f"{y:.1f}",
            r=8,
            fill="none",
            stroke=COLORS["cancelled"],
            stroke_width=2,
        )
        element(
            parent,
            "line",
            x1=f"{x - 6:.1f}",
            y1=f"{y + 6:.1f}",
            x2=f"{x + 6:.1f}",
            y2=f"{y - 6:.1f}",
            stroke=COLORS["cancelled"],
            stroke_width=2,
        )


def curve(
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
    element(
        parent, "path", d=path, fill="none", stroke=colour, stroke_width=1.5, stroke_dasharray=dash
    )
    if label:  # above the end of the link, where a lane keeps some room
        text_line(
            parent,
            x2,
            y2 - 13,
            label,
            size=9,
            fill=colour,
            text_anchor="middle",
            class_="link-label",
        )


def legend(svg: ET.Element, y: float) -> None:
    group = element(svg, "g", class_="legend")
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
        ("retried", "retried"),
        ("attention", "needs attention"),
        ("resolved", "resolved"),
    )
    x = 24.0
    for kind, name in items:
        if kind == "doubt":
            mark(group, "intent", x, y, doubt=True)
        else:
            mark(group, kind, x, y)
        text_line(group, x + 14, y + 4, name, size=10, fill="#0f172a")
        x += 22 + len(name) * 6.4 + 18
