"""Boxes and arrows laid out by Graphviz's ``dot`` into SVG: the documentation's diagrams.

A diagram is data first (:class:`Diagram`: boxes, arrows, which boxes share a row), laid out
and drawn second (:func:`svg`). dot places the boxes in rows, routes every arrow around the
boxes and gives every arrow's label a place of its own, so no arrow runs through a box and no
label sits on another. The text stays text in the SVG (Graphviz's ``g.node`` and ``g.edge``
groups, each with its ``title`` and ``text``), so a test can read back every label a figure
shows; the file is the same on every build with the same Graphviz and fonts (no date, and the
version comment, which differs between machines, is dropped).
"""

from __future__ import annotations

import html
import re
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

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
ALARM = "#dc2626"
#: Points. The docs' content column is about 690 CSS px wide in a 1,280 px window: a figure at
#: most 920 pt wide shows 12 pt text at 9 px or more when the page scales it down.
FONT = 12
TITLE_FONT = 14
#: Characters of a caption line (a longer caption would widen the figure).
CAPTION_WIDTH = 80
#: Seconds: dot lays out these figures in well under one.
DOT_TIMEOUT_S = 60
INSTALL_HINT = "install Graphviz: apt-get install graphviz (scripts/setup does, run as root)"


class DotError(RuntimeError):
    """dot is missing or failed: the message names the figure and what to do."""


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
    caption: str = ""
    #: Each box's height above the bottom row, when the figure decides it: boxes of one height
    #: share a row. Otherwise dot puts a box above the boxes it points to.
    levels: dict[str, int] | None = None

    def labels(self) -> list[str]:
        """Every text the figure shows (what a test reads back)."""
        out = [self.title, *textwrap.wrap(self.caption, CAPTION_WIDTH)]
        for box in self.boxes:
            out.append(box.title)
            out.extend(box.lines)
        out.extend(a.label for a in self.arrows if a.label)
        return out


def _id(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _text(text: str) -> str:
    return html.escape(text, quote=False)


def _box_label(box: Box) -> str:
    lines = [f'<FONT POINT-SIZE="{FONT + 1}"><B>{_text(box.title)}</B></FONT>']
    for line in box.lines:
        mono = line.startswith("--")
        lines.append(f'<FONT FACE="Courier">{_text(line)}</FONT>' if mono else _text(line))
    return "<" + "<BR/>".join(lines) + ">"


def dot_source(diagram: Diagram) -> str:
    """The diagram in Graphviz's language: top to bottom, boxes in rows, labelled arrows."""
    caption = [f"<I>{_text(line)}</I>" for line in textwrap.wrap(diagram.caption, CAPTION_WIDTH)]
    title = f'<FONT POINT-SIZE="{TITLE_FONT}"><B>{_text(diagram.title)}</B></FONT>'
    font = f'fontname="Helvetica", fontsize={FONT}, fontcolor="{EDGE}"'
    out = [
        f"digraph {_id(diagram.title)} {{",
        f"  graph [{font}, labelloc=t, nodesep=0.3, ranksep=0.45, pad=0.1,",
        f"         label=<{'<BR/>'.join([title, *caption])}>];",
        f'  node [{font}, shape=box, style="rounded,filled", color="{EDGE}", margin="0.15,0.06"];',
        # An arrow's label in a fixed-width font: the room dot keeps for it is the room a
        # browser draws it in (dot overestimates a proportional font's width, unevenly).
        f'  edge [{font.replace("Helvetica", "Courier")}, color="{EDGE}", arrowsize=0.8];',
    ]
    for box in diagram.boxes:
        fill = COLOURS.get(box.role, "#ffffff")
        out.append(f'  {_id(box.key)} [label={_box_label(box)}, fillcolor="{fill}"];')
    levels = diagram.levels or {}
    for level in sorted(set(levels.values())):
        same = [k for k, v in levels.items() if v == level]
        out.append("  { rank=same; " + " ".join(_id(k) for k in same) + " }")
    for a in diagram.arrows:
        attrs = [f"label={_id(a.label)}"] if a.label else []
        attrs += ["style=dashed"] * a.dashed
        attrs += [f'color="{ALARM}", fontcolor="{ALARM}"'] * a.alarm
        out.append(f"  {_id(a.src)} -> {_id(a.dst)} [{', '.join(attrs)}];")
    return "\n".join([*out, "}", ""])


def svg(diagram: Diagram) -> str:
    """The diagram laid out and drawn by ``dot -Tsvg``; :class:`DotError` naming the figure
    when dot is missing or fails."""
    where = f"the figure {diagram.title!r}"
    try:
        done = subprocess.run(
            ["dot", "-Tsvg"],
            input=dot_source(diagram),
            capture_output=True,
            text=True,
            timeout=DOT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise DotError(
            f"{where} cannot be drawn: Graphviz's dot is not on PATH; {INSTALL_HINT}"
        ) from None
    except subprocess.TimeoutExpired:
        raise DotError(f"{where} cannot be drawn: dot ran longer than {DOT_TIMEOUT_S} s") from None
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[:1] or ["no message"]
        raise DotError(f"{where} cannot be drawn: dot exited {done.returncode}: {reason[0]}")
    return _centred(re.sub(r"<!-- Generated by graphviz.*?-->\n", "", done.stdout, flags=re.DOTALL))


def _centred(drawn: str) -> str:
    """Each line of a box's (or the title's) label in the middle of the box. Graphviz starts
    such a line where its own estimate of the line's width would centre it, an estimate wider
    than a browser draws the text; an arrow's label is centred by Graphviz itself."""
    parts = re.split(r'(?=<g id=")', drawn)
    for i, part in enumerate(parts):
        shape = re.search(r'<(?:polygon|path) [^>]*?(?:points|d)="([^"]*)"', part)
        if shape and 'text-anchor="start"' in part:
            xs = [float(x) for x in re.findall(r"(-?[\d.]+),", shape[1])]
            middle = f'text-anchor="middle" x="{(min(xs) + max(xs)) / 2:g}"'
            parts[i] = re.sub(r'text-anchor="start" x="[^"]*"', middle, part)
    return "".join(parts)


def write_svg(diagram: Diagram, path: Path) -> None:
    """Draw ``diagram`` into ``path`` (SVG)."""
    path.write_text(svg(diagram), encoding="utf-8")
