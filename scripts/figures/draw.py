"""Boxes and arrows drawn with matplotlib into SVG: the documentation's diagrams.

A diagram is data first (:class:`Diagram`: boxes, arrows, a layout), drawn second
(:func:`write_svg`). The text stays text in the SVG (``svg.fonttype: none``), so a test can
read back every label a figure shows, and the file is the same on every build (no date, a
fixed id salt).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

#: Colours by role, shared by every diagram (a reader learns them once).
COLOURS = {
    "network": "#dbeafe",
    "compute": "#dcfce7",
    "storage": "#fef9c3",
    "control": "#ede9fe",
    "watch": "#fee2e2",
    "input": "#f1f5f9",
    "verdict": "#ffedd5",
}
EDGE = "#334155"
#: Width of one character of the diagrams' font, in layout units (a box grows with its text).
CHAR = 0.105
LINE = 0.28


@dataclass(frozen=True)
class Box:
    key: str
    title: str
    lines: tuple[str, ...] = ()
    role: str = "compute"


@dataclass(frozen=True)
class Arrow:
    src: str
    dst: str
    label: str = ""
    #: A dashed arrow: a reference or a watch, not a data path.
    dashed: bool = False
    #: Drawn in red: an arrow that should not exist (an import circle).
    alarm: bool = False


@dataclass
class Diagram:
    title: str
    boxes: list[Box]
    arrows: list[Arrow]
    #: Rows top to bottom, each a list of box keys left to right.
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""
    #: Rows are a grid: the i-th key of every row shares a column ("" leaves a cell empty).
    grid: bool = False
    #: Without rows: each box's height above the bottom row, when the figure decides it.
    levels: dict[str, int] | None = None

    def labels(self) -> list[str]:
        """Every text the figure shows, in drawing order (what a test reads back)."""
        out = [self.title, *([self.caption] if self.caption else [])]
        for box in self.boxes:
            out.append(box.title)
            out.extend(box.lines)
        out.extend(a.label for a in self.arrows if a.label)
        return out


def _size(box: Box) -> tuple[float, float]:
    longest = max(len(t) for t in (box.title, *box.lines))
    return max(1.6, longest * CHAR + 0.4), (1 + len(box.lines)) * LINE + 0.3


#: Waypoint keys start with this character (never in a box's key).
WAYPOINT = "\x1f"


def waypoint(src: str, dst: str, row: int) -> str:
    return f"{WAYPOINT}{src}{WAYPOINT}{dst}{WAYPOINT}{row}"


def layered_rows(
    keys: Sequence[str], arrows: Iterable[Arrow], levels: dict[str, int] | None = None
) -> list[list[str]]:
    """Rows for a layered drawing: a box sits above everything it points to (longest path to
    a box that points nowhere), or at its height in ``levels``. Within a row, boxes follow the
    mean position of the boxes pointing at them, so arrows cross less."""
    keys = list(keys)
    out: dict[str, set[str]] = {k: set() for k in keys}
    for a in arrows:
        if a.src in out and a.dst in out and a.src != a.dst:
            out[a.src].add(a.dst)
    depth: dict[str, int] = {}

    def height(key: str, path: tuple[str, ...]) -> int:
        if key in depth:
            return depth[key]
        below = [height(d, (*path, key)) + 1 for d in sorted(out[key]) if d not in path]
        # A box in a circle is placed by the part of the graph outside the circle.
        depth[key] = max(below, default=0)
        return depth[key]

    if levels is not None:
        depth.update({k: levels.get(k, 0) for k in keys})
    for key in keys:
        height(key, ())
    top = max(depth.values(), default=0)
    rows: list[list[str]] = [[] for _ in range(top + 1)]
    for key in keys:
        rows[top - depth[key]].append(key)
    rows = [r for r in rows if r]
    # An arrow that spans rows passes through a waypoint in each row between, which takes part
    # in the ordering like a narrow box: the arrow then goes between boxes, not through them.
    row_of = {k: i for i, r in enumerate(rows) for k in r}
    for src in list(out):
        for dst in sorted(out[src]):
            if row_of[dst] - row_of[src] > 1 and not any(
                a.src == src and a.dst == dst and a.alarm for a in arrows
            ):
                chain = [waypoint(src, dst, r) for r in range(row_of[src] + 1, row_of[dst])]
                out[src].discard(dst)
                for here, there in itertools.pairwise([src, *chain, dst]):
                    out.setdefault(here, set()).add(there)
                for r, key in zip(range(row_of[src] + 1, row_of[dst]), chain, strict=True):
                    rows[r].append(key)
                keys += chain
    into: dict[str, set[str]] = {k: {s for s, ds in out.items() if k in ds} for k in keys}
    placed = {k: (i + 0.5) / len(row) for row in rows for i, k in enumerate(row)}

    def mean(group: set[str], fallback: set[str], own: float) -> float:
        near = [placed[k] for k in group] or [placed[k] for k in fallback]
        return sum(near) / len(near) if near else own

    # Barycentre sweeps: down (by the boxes pointing in), up (by the boxes pointed to), down.
    for sweep in (rows, rows[::-1], rows):
        upward = sweep is not rows
        for row in sweep:
            row.sort(
                key=lambda k: (
                    mean(out[k], into[k], placed[k])
                    if upward
                    else mean(into[k], out[k], placed[k]),
                    k,
                )
            )
            for i, k in enumerate(row):
                placed[k] = (i + 0.5) / len(row)
    return [r for r in rows if r]


def _anchor(
    centre: tuple[float, float], size: tuple[float, float], toward: tuple[float, float]
) -> tuple[float, float]:
    """Where the line from a box's centre toward a point leaves the box."""
    (x, y), (w, h) = centre, size
    dx, dy = toward[0] - x, toward[1] - y
    if dx == 0 and dy == 0:
        return x, y
    scale = min(
        (w / 2) / abs(dx) if dx else float("inf"),
        (h / 2) / abs(dy) if dy else float("inf"),
    )
    return x + dx * scale, y + dy * scale


def write_svg(diagram: Diagram, path: Path, *, gap: float = 0.6) -> None:
    """Draw ``diagram`` into ``path`` (SVG)."""
    boxes = {b.key: b for b in diagram.boxes}
    rows = diagram.rows or layered_rows(list(boxes), diagram.arrows, diagram.levels)
    sizes = {k: _size(b) for k, b in boxes.items()}
    sizes[""] = (0.0, 0.0)
    sizes.update({k: (0.3, 0.0) for row in rows for k in row if k.startswith(WAYPOINT)})
    widths = [sum(sizes[k][0] for k in row) + gap * (len(row) - 1) for row in rows]
    total_w = max(widths, default=1.0)
    heights = [max(sizes[k][1] for k in row) for row in rows]
    row_gap = 1.0
    total_h = sum(heights) + row_gap * (len(rows) - 1)
    centres: dict[str, tuple[float, float]] = {}
    y = total_h
    if diagram.grid:
        ncols = max(len(r) for r in rows)
        col_w = [
            max((sizes[r[j]][0] for r in rows if j < len(r) and r[j]), default=0)
            for j in range(ncols)
        ]
        total_w = sum(col_w) + gap * (ncols - 1)
    for row, width, height in zip(rows, widths, heights, strict=True):
        x = (total_w - width) / 2
        for j, k in enumerate(row):
            if diagram.grid:
                x = sum(col_w[:j]) + gap * j
                w = col_w[j]
            else:
                w = sizes[k][0]
            if k:
                centres[k] = (x + w / 2, y - height / 2)
            x += w + gap
        y -= height + row_gap
    margin = 0.3
    total_w = max(total_w, len(diagram.title) * CHAR * 1.2, len(diagram.caption) * CHAR * 0.9)
    title_h = 0.5 + (0.35 if diagram.caption else 0)
    fig_w, fig_h = total_w + 2 * margin, total_h + 2 * margin + title_h
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "gemma4-docs", "font.size": 10}):
        fig = plt.figure(figsize=(fig_w * 0.9, fig_h * 0.9))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(-margin, total_w + margin)
        ax.set_ylim(-margin, total_h + margin + title_h)
        ax.axis("off")
        ax.text(
            total_w / 2, total_h + margin + title_h - 0.25, diagram.title,
            ha="center", va="center", fontsize=12, fontweight="bold",
        )  # fmt: skip
        if diagram.caption:
            ax.text(
                total_w / 2, total_h + margin + title_h - 0.6, diagram.caption,
                ha="center", va="center", fontsize=9, style="italic", color="#475569",
            )  # fmt: skip
        for k, box in boxes.items():
            (cx, cy), (w, h) = centres[k], sizes[k]
            ax.add_patch(
                FancyBboxPatch(
                    (cx - w / 2, cy - h / 2), w, h,
                    boxstyle="round,pad=0,rounding_size=0.12",
                    facecolor=COLOURS.get(box.role, "#ffffff"), edgecolor=EDGE, linewidth=1,
                )
            )  # fmt: skip
            top = cy + h / 2 - 0.15 - LINE / 2
            ax.text(cx, top, box.title, ha="center", va="center", fontweight="bold")
            for i, line in enumerate(box.lines, start=1):
                ax.text(
                    cx, top - i * LINE, line, ha="center", va="center", fontsize=9,
                    family="monospace" if line.startswith("--") else None,
                )  # fmt: skip
        for arrow in diagram.arrows:
            if arrow.src not in centres or arrow.dst not in centres:
                continue
            via = sorted(
                (k for k in centres if k.startswith(waypoint(arrow.src, arrow.dst, 0)[:-1])),
                key=lambda k: int(k.rsplit(WAYPOINT, 1)[1]),
            )
            points = [centres[arrow.src], *(centres[k] for k in via), centres[arrow.dst]]
            start = _anchor(points[0], sizes[arrow.src], points[1])
            end = _anchor(points[-1], sizes[arrow.dst], points[-2])
            colour = "#dc2626" if arrow.alarm else EDGE
            dash = "--" if arrow.dashed else "-"
            route = [start, *points[1:-1], end]
            for p, q in itertools.pairwise(route[:-1]):
                ax.plot([p[0], q[0]], [p[1], q[1]], color=colour, linestyle=dash, linewidth=1.1)
            ax.add_patch(
                FancyArrowPatch(
                    route[-2], end, arrowstyle="-|>", mutation_scale=12, color=colour,
                    linestyle=dash, linewidth=1.1,
                )
            )  # fmt: skip
            if arrow.label:
                p, q = route[-2], end
                ax.text(
                    (p[0] + q[0]) / 2, (p[1] + q[1]) / 2, arrow.label,
                    ha="center", va="center", fontsize=8, color=colour,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},
                )  # fmt: skip
        fig.savefig(
            path,
            format=path.suffix.lstrip(".") or "svg",
            metadata={"Date": None} if path.suffix == ".svg" else None,
            dpi=80,
        )
        plt.close(fig)


def legend(roles: Mapping[str, str]) -> str:
    """A one-line key of the colours used: 'blue: network, ...' (for a figure's caption)."""
    return ", ".join(f"{name}: {what}" for name, what in roles.items())
