"""What a reader would see wrong in a figure, from the geometry Chromium rendered
(``scripts/browser_check.py`` measures it; docs/development.md, "The browser check").

Pure: boxes and points in, one line per problem out, so each rule is tested without a
browser. Coordinates and sizes are CSS pixels of the SVG shown at its own size."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Two boxes overlap when they share more than this many pixels each way: antialiasing and
#: Chromium's rounding of a glyph's box stay below it, a label printed over another does not.
TOLERANCE = 1.0
#: The smallest font size, in CSS pixels on the page, a figure's text may be shown at. The
#: page's own text is 16 px and its smallest 12.8 px (Material: html at 125 %, .md-typeset at
#: .8rem, captions .64rem); 9 px, a little over half the body's size, is the smallest a reader
#: still reads at arm's length without zooming.
MIN_FONT_PX = 9.0
#: matplotlib draws text as glyph outlines this many units to the em, scaled by
#: size / FONT_SCALE (``matplotlib.textpath.TextToPath.FONT_SCALE``; a test holds the two equal).
FONT_SCALE = 100.0
#: A figure larger than these is refused by name instead of opened.
MAX_BYTES = 1_000_000
MAX_ELEMENTS = 20_000


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: Box) -> bool:
        wide = min(self.right, other.right) - max(self.left, other.left)
        high = min(self.bottom, other.bottom) - max(self.top, other.top)
        return wide > TOLERANCE and high > TOLERANCE

    def holds(self, x: float, y: float) -> bool:
        return (
            self.left + TOLERANCE < x < self.right - TOLERANCE
            and self.top + TOLERANCE < y < self.bottom - TOLERANCE
        )

    def __str__(self) -> str:
        return f"({self.left:.0f},{self.top:.0f})-({self.right:.0f},{self.bottom:.0f})"


@dataclass(frozen=True)
class Text:
    label: str
    box: Box
    #: Font size in CSS pixels at the figure's own size.
    size: float
    #: For a tick label: "x" or "y" and the id of its axis (matplotlib's ``matplotlib.axis_N``).
    tick: str = ""
    axis: str = ""


@dataclass(frozen=True)
class Edge:
    #: Graphviz's title of the edge ("a->b").
    name: str
    labelled: bool


@dataclass(frozen=True)
class Legend:
    name: str
    box: Box
    #: The data points of its axes: (artist id, x, y).
    points: tuple[tuple[str, float, float], ...]


@dataclass(frozen=True)
class Picture:
    texts: tuple[Text, ...]
    edges: tuple[Edge, ...] = ()
    legends: tuple[Legend, ...] = ()


def read_picture(data: Mapping[str, Any]) -> Picture:
    """The measurements the browser returned (lists and numbers) as a :class:`Picture`."""
    return Picture(
        texts=tuple(
            Text(t["label"], Box(*t["box"]), t["size"], t.get("tick") or "", t.get("axis") or "")
            for t in data["texts"]
        ),
        edges=tuple(Edge(e["name"], e["labelled"]) for e in data["edges"]),
        legends=tuple(
            Legend(g["name"], Box(*g["box"]), tuple((a, x, y) for a, x, y in g["points"]))
            for g in data["legends"]
        ),
    )


def _pairs(texts: Sequence[Text]) -> Iterable[tuple[Text, Text]]:
    """Every two texts whose boxes overlap (sorted by left edge: a figure's hundreds of labels
    are not compared each with each)."""
    ordered = sorted(texts, key=lambda t: t.box.left)
    for i, a in enumerate(ordered):
        for b in (ordered[j] for j in range(i + 1, len(ordered))):
            if b.box.left >= a.box.right:
                break
            if a.box.overlaps(b.box):
                yield a, b


def overlapping_texts(texts: Sequence[Text]) -> list[str]:
    """Labels printed over each other (two tick labels of one axis: :func:`colliding_ticks`)."""
    return [
        f"overlapping text: {a.label!r} {a.box} and {b.label!r} {b.box}"
        for a, b in _pairs(texts)
        if not (a.axis and a.axis == b.axis)
    ]


def colliding_ticks(texts: Sequence[Text]) -> list[str]:
    """Neighbouring tick labels of one axis printed over each other."""
    axes: dict[tuple[str, str], list[Text]] = {}
    for text in texts:
        if text.axis:
            axes.setdefault((text.tick, text.axis), []).append(text)
    problems = []
    for (tick, axis), labels in sorted(axes.items()):
        centres = sorted(labels, key=lambda t: _centre(t.box)[tick == "y"])
        for a, b in itertools.pairwise(centres):
            if a.box.overlaps(b.box):
                problems.append(
                    f"tick labels collide on the {tick} axis ({axis}):"
                    f" {a.label!r} {a.box} and {b.label!r} {b.box}"
                )
    return problems


def _centre(box: Box) -> tuple[float, float]:
    return (box.left + box.right) / 2, (box.top + box.bottom) / 2


def unlabelled_edges(edges: Sequence[Edge]) -> list[str]:
    """Where a diagram labels its edges, every edge it leaves without one."""
    labelled = sum(e.labelled for e in edges)
    if not labelled:
        return []
    return [
        f"edge without a label: {e.name} ({labelled} of {len(edges)} edges labelled)"
        for e in edges
        if not e.labelled
    ]


def covered_points(legends: Sequence[Legend]) -> list[str]:
    """Legends drawn over data points of their axes."""
    problems = []
    for legend in legends:
        covered = [(a, x, y) for a, x, y in legend.points if legend.box.holds(x, y)]
        if covered:
            artists = ", ".join(sorted({a for a, _, _ in covered}))
            _, x, y = covered[0]
            problems.append(
                f"legend covers data: {legend.name} {legend.box} hides {len(covered)} points of"
                f" {artists}, e.g. ({x:.0f},{y:.0f})"
            )
    return problems


def problems(picture: Picture) -> list[str]:
    """Everything wrong with a figure whatever page shows it."""
    return [
        *overlapping_texts(picture.texts),
        *colliding_ticks(picture.texts),
        *unlabelled_edges(picture.edges),
        *covered_points(picture.legends),
    ]


def small_texts(texts: Sequence[Text], scale: float, page: str) -> list[str]:
    """Text too small to read where ``page`` shows the figure at ``scale`` of its own width."""
    small = sorted((t for t in texts if t.size * scale < MIN_FONT_PX), key=lambda t: t.size)
    if not small:
        return []
    least = small[0]
    return [
        f"text too small on /{page}: {len(small)} of {len(texts)} texts under {MIN_FONT_PX:g} px"
        f" (shown at {scale:.0%} of its width), the smallest {least.label!r}"
        f" {least.size * scale:.1f} px"
    ]


def too_large(size: int, elements: int) -> str | None:
    """Why a figure of ``size`` bytes and ``elements`` elements is not opened, or None."""
    if size > MAX_BYTES:
        return f"refused: {size:,} bytes, more than {MAX_BYTES:,}"
    if elements > MAX_ELEMENTS:
        return f"refused: {elements:,} elements, more than {MAX_ELEMENTS:,}"
    return None
