"""The figure rules of the browser check (scripts/picture_checks.py): boxes and points in,
problems out, without a browser; and matplotlib's SVG read the way the browser check's
measuring script reads it (scripts/browser_check.py proves the whole on planted figures in
Chromium each time it runs)."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

import pytest

from scripts.picture_checks import (
    FONT_SCALE,
    MAX_BYTES,
    MAX_ELEMENTS,
    MIN_FONT_PX,
    Box,
    Edge,
    Legend,
    Picture,
    Text,
    colliding_ticks,
    covered_points,
    overlapping_texts,
    problems,
    read_picture,
    small_texts,
    too_large,
    unlabelled_edges,
)


def text(label: str, left: float, top: float, right: float, bottom: float, **kw: str) -> Text:
    return Text(label, Box(left, top, right, bottom), 12.0, **kw)


def test_boxes_overlap_only_by_more_than_the_tolerance() -> None:
    a = Box(0, 0, 10, 10)
    assert not a.overlaps(Box(10, 0, 20, 10))  # side by side
    assert not a.overlaps(Box(9, 0, 20, 10))  # one pixel: antialiasing, rounding
    assert a.overlaps(Box(8, 0, 20, 10))
    assert not a.overlaps(Box(8, 9, 20, 20))  # wide, but one pixel high
    assert a.holds(5, 5) and not a.holds(0.5, 5) and not a.holds(5, 11)


def test_texts_printed_over_each_other_are_named_with_their_boxes() -> None:
    found = overlapping_texts(
        [
            text("first", 0, 0, 100, 10),
            text("apart", 200, 0, 240, 10),
            text("second", 50, 5, 120, 15),
        ]
    )
    assert found == ["overlapping text: 'first' (0,0)-(100,10) and 'second' (50,5)-(120,15)"]


def test_overlap_is_found_past_texts_that_do_not_overlap() -> None:
    """Sorted by left edge, a long label still meets one that starts after shorter ones."""
    texts = [
        text("long", 0, 0, 300, 10),
        text("short", 10, 50, 20, 60),
        text("far", 250, 2, 280, 12),
    ]
    assert [p.split(":")[1] for p in overlapping_texts(texts)] == [
        " 'long' (0,0)-(300,10) and 'far' (250,2)-(280,12)"
    ]


def test_tick_labels_of_one_axis_are_left_to_the_tick_rule() -> None:
    ticks = [
        text("0.1", 0, 0, 30, 10, tick="x", axis="a1"),
        text("0.2", 20, 0, 50, 10, tick="x", axis="a1"),
    ]
    assert overlapping_texts(ticks) == []
    assert colliding_ticks(ticks) == [
        "tick labels collide on the x axis (a1): '0.1' (0,0)-(30,10) and '0.2' (20,0)-(50,10)"
    ]
    # A tick label over a text that is not one of its axis's is an overlap.
    other = text("annotation", 10, 2, 40, 12)
    assert len(overlapping_texts([*ticks, other])) == 2


def test_tick_labels_are_compared_with_their_neighbours_along_their_axis() -> None:
    y = [
        text("10", 0, 100, 20, 110, tick="y", axis="a2"),
        text("30", 0, 0, 20, 10, tick="y", axis="a2"),
        text("20", 0, 8, 20, 18, tick="y", axis="a2"),
    ]
    found = colliding_ticks(y)
    assert len(found) == 1 and "'30'" in found[0] and "'20'" in found[0] and "y axis" in found[0]
    # Two axes' labels are never neighbours.
    assert (
        colliding_ticks(
            [
                text("1", 0, 0, 30, 10, tick="x", axis="a1"),
                text("2", 0, 0, 30, 10, tick="x", axis="a3"),
            ]
        )
        == []
    )


def test_an_edge_without_a_label_only_where_edges_are_labelled() -> None:
    assert unlabelled_edges([Edge("a->b", False), Edge("b->c", False)]) == []
    assert unlabelled_edges([Edge("a->b", True), Edge("b->c", False), Edge("c->d", True)]) == [
        "edge without a label: b->c (2 of 3 edges labelled)"
    ]


def test_a_legend_over_data_points_names_them() -> None:
    legend = Legend(
        "legend_1",
        Box(0, 0, 100, 50),
        (("line2d_1", 50, 25), ("line2d_2", 150, 25), ("line2d_1", 10, 10)),
    )
    assert covered_points([legend]) == [
        "legend covers data: legend_1 (0,0)-(100,50) hides 2 points of line2d_1, e.g. (50,25)"
    ]
    # A point on the legend's frame is not hidden by it.
    assert covered_points([Legend("legend_1", Box(0, 0, 100, 50), (("line2d_1", 100, 25),))]) == []


def test_text_too_small_at_the_width_a_page_shows_the_figure() -> None:
    texts = [Text("title", Box(0, 0, 1, 1), 16.0), Text("tick", Box(0, 0, 1, 1), 12.0)]
    assert small_texts(texts, 1.0, "deploy/gke/") == []
    scale = 0.7  # 16 px stays above the threshold, 12 px does not
    assert 16 * scale >= MIN_FONT_PX > 12 * scale
    assert small_texts(texts, scale, "deploy/gke/") == [
        f"text too small on /deploy/gke/: 1 of 2 texts under {MIN_FONT_PX:g} px (shown at 70% of"
        " its width), the smallest 'tick' 8.4 px"
    ]


def test_a_figure_too_large_is_refused_by_its_size() -> None:
    assert too_large(MAX_BYTES, MAX_ELEMENTS) is None
    assert (
        too_large(MAX_BYTES + 1, 1) == f"refused: {MAX_BYTES + 1:,} bytes, more than {MAX_BYTES:,}"
    )
    assert too_large(1, MAX_ELEMENTS + 1) == (
        f"refused: {MAX_ELEMENTS + 1:,} elements, more than {MAX_ELEMENTS:,}"
    )


def test_the_browser_measurements_read_as_a_picture_and_checked_together() -> None:
    picture = read_picture(
        {
            "texts": [
                {"label": "a", "box": [0, 0, 10, 10], "size": 12, "tick": "", "axis": ""},
                {"label": "b", "box": [5, 5, 15, 15], "size": 12, "tick": "", "axis": ""},
            ],
            "edges": [{"name": "a->b", "labelled": True}, {"name": "b->c", "labelled": False}],
            "legends": [
                {"name": "legend_1", "box": [0, 0, 10, 10], "points": [["line2d_1", 5, 5]]}
            ],
        }
    )
    assert picture == Picture(
        texts=(Text("a", Box(0, 0, 10, 10), 12), Text("b", Box(5, 5, 15, 15), 12)),
        edges=(Edge("a->b", True), Edge("b->c", False)),
        legends=(Legend("legend_1", Box(0, 0, 10, 10), (("line2d_1", 5, 5),)),),
    )
    assert [p.split(":")[0] for p in problems(picture)] == [
        "overlapping text",
        "edge without a label",
        "legend covers data",
    ]


def test_matplotlib_writes_the_svg_the_measuring_script_reads() -> None:
    """The browser check's script finds text drawn as glyphs in groups text_N (the string in a
    comment, a group scaled by size / FONT_SCALE), tick labels inside xtick_N/ytick_N of
    matplotlib.axis_N, legends as legend_N inside axes_N, data as line2d_N children of axes_N
    after its background patch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.textpath import TextToPath

    assert TextToPath.FONT_SCALE == FONT_SCALE
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], "o", label="data")
    ax.set_xticks([1, 2], ["one", "two"], fontsize=7)
    ax.legend()
    out = io.StringIO()
    fig.savefig(out, format="svg")
    plt.close(fig)
    root = ET.fromstring(out.getvalue(), ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    ns = {"s": "http://www.w3.org/2000/svg"}
    axes = root.find(".//s:g[@id='axes_1']", ns)
    assert axes is not None
    ids = [c.get("id", "") for c in axes if isinstance(c.tag, str) and c.tag.endswith("}g")]
    assert ids[0].startswith("patch_") and any(i.startswith("line2d_") for i in ids)
    assert "legend_1" in ids
    tick = axes.find("s:g[@id='matplotlib.axis_1']/s:g[@id='xtick_1']", ns)
    assert tick is not None
    label = next(g for g in tick if g.get("id", "").startswith("text_"))
    comments = [str(c.text).strip() for c in label if not isinstance(c.tag, str)]
    assert comments == ["one"]
    glyphs = next(c for c in label if isinstance(c.tag, str) and c.tag.endswith("}g"))
    scale = re.search(r"scale\(([\d.]+) -([\d.]+)\)", glyphs.get("transform", ""))
    assert scale is not None and float(scale[1]) * FONT_SCALE == pytest.approx(7)
