"""A conversation's verdicts drawn on its ``sequence`` axis: the HTML page's timelines.

An edge module under :mod:`.html`: inline SVG of one conversation (the
turns' boundaries, one lane per assertion with a mark where it was decided,
where it was stopped early), the marks and their legend. Colour is never a
mark's only carrier: each has its letter and shape too.
"""

from __future__ import annotations

from typing import NamedTuple

from mantle_stream.outputs.html_text import escaped, reason_html, where_text
from mantle_stream.outputs.records import ReportConversation

__all__ = ["MARKS", "STOP_COLOUR", "legend", "mark_shape", "stopped_at", "timeline"]

#: verdict → (colour, letter, shape): colour is never the only carrier.
MARKS: dict[str, tuple[str, str, str]] = {
    "passed": ("#1a7f37", "P", "circle"),
    "failed": ("#cf222e", "F", "square"),
    "errored": ("#bc4c00", "E", "triangle"),
    "skipped": ("#6e7781", "S", "diamond"),
    "pending": ("#8250df", "?", "ring"),
}
STOP_COLOUR = "#a40e26"


def stopped_at(conv: ReportConversation) -> int | None:
    """Where a conversation stopped early was stopped (``None``: it was not).

    The stop came at the earliest ``decided_at`` among its decided assertions
    that failed, or else at the last one decided (``None`` as well when no
    decision names an event: then the stop is drawn at the end of the axis).
    """
    if not conv.stopped_early:
        return None
    decided = [a for a in conv.assertions if a.verdict in ("passed", "failed", "errored")]
    failed = [a.decided_at for a in decided if a.verdict == "failed" and a.decided_at is not None]
    if failed:
        return min(failed)
    at = [a.decided_at for a in decided if a.decided_at is not None]
    return max(at) if at else None


def _axis_end(conv: ReportConversation) -> int:
    decided = [a.decided_at for a in conv.assertions if a.decided_at is not None]
    return max([conv.events, 1, *decided, *conv.turn_starts])


def mark_shape(verdict: str, x: float, y: float, r: float = 7.0) -> str:
    colour, letter, shape = MARKS.get(verdict, MARKS["pending"])
    if shape == "circle":
        body = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{colour}"/>'
    elif shape == "square":
        body = (
            f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" '
            f'fill="{colour}"/>'
        )
    elif shape == "triangle":
        body = (
            f'<polygon points="{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y + r:.1f} '
            f'{x - r - 1:.1f},{y + r:.1f}" fill="{colour}"/>'
        )
    elif shape == "diamond":
        body = (
            f'<polygon points="{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y:.1f} '
            f'{x:.1f},{y + r + 1:.1f} {x - r - 1:.1f},{y:.1f}" fill="#ffffff" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
    else:  # ring
        body = (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r - 1:.1f}" fill="#ffffff" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
    fill = colour if shape in ("diamond", "ring") else "#ffffff"
    return (
        body + f'<text x="{x:.1f}" y="{y + 3.5:.1f}" font-size="10" font-weight="700" '
        f'text-anchor="middle" fill="{fill}">{letter}</text>'
    )


def _stop_shape(x: float, y: float, r: float = 7.0) -> str:
    """An octagon with a white bar: the stop sign."""
    k = r * 0.414
    points = " ".join(
        f"{x + dx:.1f},{y + dy:.1f}"
        for dx, dy in (
            (-k, -r),
            (k, -r),
            (r, -k),
            (r, k),
            (k, r),
            (-k, r),
            (-r, k),
            (-r, -k),
        )
    )
    return (
        f'<polygon points="{points}" fill="{STOP_COLOUR}"/>'
        f'<rect x="{x - r * 0.6:.1f}" y="{y - 1.5:.1f}" width="{r * 1.2:.1f}" height="3" '
        'fill="#ffffff"/>'
    )


def legend() -> str:
    """What each mark means, drawn with the marks themselves."""
    items = []
    for verdict in MARKS:
        items.append(
            f'<span><svg width="18" height="18" viewBox="0 0 18 18" aria-hidden="true">'
            f"{mark_shape(verdict, 9, 9)}</svg>{verdict}</span>"
        )
    items.append(
        '<span><svg width="18" height="18" viewBox="0 0 18 18" aria-hidden="true">'
        f"{_stop_shape(9, 9)}</svg>stopped early here (dashed line)</span>"
    )
    items.append(
        '<span><svg width="18" height="18" viewBox="0 0 18 18" aria-hidden="true">'
        '<line x1="9" y1="1" x2="9" y2="17" stroke="#8c959f" stroke-width="1.5"/></svg>'
        "a turn begins (its user message)</span>"
    )
    return (
        '<div class="legend" id="legend"><strong>Legend:</strong>' + "".join(items) + "</div>"
        '<p class="meta">Each lane is one assertion; its mark sits at the <code>sequence</code> '
        "of the event that decided it, or at the end of the axis when the end of the "
        "conversation decided it (or nothing did). Hover a mark for its reason.</p>"
    )


LABEL_WIDTH = 230
WIDTH = 960
LANE = 20
TOP = 26
BOTTOM = 22


class _Axis(NamedTuple):
    """Where a timeline's ``sequence`` axis runs: from ``x0`` (sequence 0) to ``x1``
    (sequence ``end``), its lanes down to ``bottom``."""

    x0: int
    x1: int
    end: int
    bottom: int

    def x(self, seq: int) -> float:
        return self.x0 + (self.x1 - self.x0) * seq / self.end


def timeline(conv: ReportConversation) -> str:
    """One conversation's verdicts on its ``sequence`` axis, as inline SVG."""
    lanes = len(conv.assertions)
    height = TOP + max(lanes, 1) * LANE + BOTTOM
    axis = _Axis(LABEL_WIDTH + 10, WIDTH - 16, _axis_end(conv), TOP + lanes * LANE)
    x0, x1, end, bottom = axis
    out = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
        f'height="{height}" role="img" aria-label="verdict timeline">'
    ]
    for i in range(lanes):  # alternate lane shading
        if i % 2 == 0:
            out.append(
                f'<rect x="{x0 - 8}" y="{TOP + i * LANE}" width="{x1 - x0 + 16}" '
                f'height="{LANE}" fill="#f6f8fa"/>'
            )
    # The sequence axis.
    out.append(
        f'<line x1="{x0}" y1="{bottom + 2}" x2="{x1}" y2="{bottom + 2}" stroke="#59636e"/>'
        f'<text x="{x0}" y="{bottom + 16}" font-size="10" fill="#59636e">0</text>'
        f'<text x="{x1}" y="{bottom + 16}" font-size="10" text-anchor="end" '
        f'fill="#59636e">sequence {end}</text>'
    )
    out += _turns(conv, axis)
    out += _lanes(conv, axis)
    if conv.stopped_early:
        out.append(_stop(conv, axis))
    out.append("</svg>")
    return "".join(out)


def _turns(conv: ReportConversation, axis: _Axis) -> list[str]:
    """Turn boundaries: a line at each turn's user message; labels only where they fit."""
    out = []
    last_label = -1e9
    for n, seq in enumerate(conv.turn_starts, 1):
        tx = axis.x(seq)
        out.append(
            f"<g><title>turn {n} begins at sequence {seq}</title>"
            f'<line x1="{tx:.1f}" y1="{TOP - 6}" x2="{tx:.1f}" y2="{axis.bottom + 2}" '
            'stroke="#8c959f" stroke-width="1"/></g>'
        )
        if tx - last_label >= 22:
            out.append(
                f'<text x="{tx + 2:.1f}" y="{TOP - 9}" font-size="10" fill="#59636e">t{n}</text>'
            )
            last_label = tx
    return out


def _lanes(conv: ReportConversation, axis: _Axis) -> list[str]:
    """One lane per assertion: its label, and its mark where it was decided."""
    out = []
    for i, a in enumerate(conv.assertions):
        y = TOP + i * LANE + LANE / 2
        label = f"#{a.index} {a.kind}"
        if len(label) > 30:
            label = label[:29] + "…"
        out.append(
            f'<text x="{LABEL_WIDTH}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#1f2328">{escaped(label)}</text>'
        )
        at = "the end of the conversation" if a.decided_at is None else f"sequence {a.decided_at}"
        where = where_text(a.file, a.line)
        tip = f"#{a.index} {a.kind}: {a.verdict} at {at}"
        if where:
            tip += f" ({where})"
        if a.reason:
            tip += f"\n{a.reason}"
        mx = axis.x(axis.end if a.decided_at is None else a.decided_at)
        out.append(
            f'<g class="mark {a.verdict}"><title>{reason_html(tip)}</title>'
            f"{mark_shape(a.verdict, mx, y)}</g>"
        )
    return out


def _stop(conv: ReportConversation, axis: _Axis) -> str:
    """Where a conversation stopped early was stopped: a dashed line and a stop sign."""
    stop = stopped_at(conv)
    sx = axis.x(axis.end if stop is None else stop)
    at = "the end" if stop is None else f"sequence {stop}"
    return (
        f'<g class="stop"><title>stopped early at {at}'
        + (
            ": what it had not decided then is skipped"
            if any(a.verdict == "skipped" for a in conv.assertions)
            else ""
        )
        + "</title>"
        f'<line x1="{sx:.1f}" y1="{TOP - 4}" x2="{sx:.1f}" y2="{axis.bottom + 2}" '
        f'stroke="{STOP_COLOUR}" stroke-width="2" stroke-dasharray="4 3"/>'
        f"{_stop_shape(sx, TOP - 12)}</g>"
    )
