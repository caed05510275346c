"""The product's import graph, room by room (:mod:`scripts.rooms`), read from the code's own
import statements: an arrow from room A to room B means some module of A imports one of B, at
any depth (inside a function or under ``TYPE_CHECKING`` too)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from scripts.figures.draw import Arrow, Box, Diagram
from scripts.rooms import (
    COMMAND_LINE,
    DIVIDED,
    PACKAGES,
    ROOT,
    cycles,
    product_modules,
    room,
    room_graph,
)


@dataclass(frozen=True)
class ImportGraph:
    rooms: tuple[str, ...]
    #: (importing room, imported room) -> the imports behind the arrow (``module -> module``).
    edges: dict[tuple[str, str], tuple[str, ...]]
    modules: dict[str, int]
    #: Each room's height: the longest chain of rooms below it (a circle is not followed round).
    heights: dict[str, int] = field(default_factory=dict)

    def circles(self) -> list[list[str]]:
        """Groups of rooms that import each other, directly or through others."""
        graph: dict[str, dict[str, int]] = {r: {} for r in self.rooms}
        for a, b in self.edges:
            graph[a][b] = 0
        return sorted(cycles(graph))


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> ImportGraph:
    """The rooms of ``packages`` under ``root``, the imports between them and their heights.
    A room whose modules import no other room and that no room imports (``serving/``'s own
    ``__init__``, a docstring) is left out."""
    from scripts.rooms import import_graph as module_graph

    modules = product_modules(root, packages)
    graph = module_graph(modules)
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in sorted(graph.items()):
        here = room(module, modules[module])
        for target in sorted(targets):
            there = room(target, modules[target])
            if there != here:
                edges.setdefault((here, there), []).append(f"{module} -> {target}")
    rooms = tuple(sorted({r for edge in edges for r in edge}))
    counts = Counter(room(m, p) for m, p in modules.items())
    below = room_graph(graph, modules)
    # Rooms in a circle share one height: the longest chain of rooms below the circle.
    together = {r: frozenset(c) for c in cycles(below) for r in c}
    memo: dict[frozenset[str], int] = {}

    def height(r: str) -> int:
        group = together.get(r, frozenset({r}))
        if group not in memo:
            memo[group] = max(
                (height(b) + 1 for a in sorted(group) for b in below[a] if b not in group),
                default=0,
            )
        return memo[group]

    return ImportGraph(
        rooms=rooms,
        edges={k: tuple(v) for k, v in sorted(edges.items())},
        modules={r: counts[r] for r in rooms},
        heights={r: height(r) for r in rooms},
    )


def _title(name: str, root: Path = ROOT) -> str:
    """A room as its folder (``serving/config/``), its file (``serving/promotion.py``) or the
    command-line layer."""
    if name == COMMAND_LINE:
        return "command line"
    if name in DIVIDED:  # the package's own __init__: its folders are rooms of their own
        return f"{name}/__init__.py"
    path = name.replace(".", "/")
    return f"{path}.py" if (root / f"{path}.py").is_file() else f"{path}/"


def diagram(graph: ImportGraph | None = None, root: Path = ROOT) -> Diagram:
    graph = graph or import_graph(root)
    boxes = [
        Box(
            room,
            _title(room, root),
            (
                *(("gemma4/, scripts/, cli.py, __main__.py",) if room == COMMAND_LINE else ()),
                f"{graph.modules.get(room, 0)} module"
                + ("" if graph.modules.get(room, 0) == 1 else "s"),
            ),
            role=_role(room),
        )
        for room in graph.rooms
    ]
    # Rows by height: a room sits above the rooms it imports. Rooms that import each other
    # (a circle) share a height; the arrows between them are red.
    level = graph.heights
    together = {r: i for i, c in enumerate(graph.circles()) for r in c}
    circled = [(a, b) for a, b in graph.edges if together.get(a, -1) == together.get(b, -2)]
    down = [e for e in graph.edges if e not in circled]
    arrows = [Arrow(a, b) for a, b in reduced(down)] + [Arrow(a, b, alarm=True) for a, b in circled]
    caption = "an arrow: the upper room imports the lower one, directly or through others; " + (
        f"red: rooms that import each other, an import circle ({len(circled)})"
        if circled
        else "no room imports itself through others"
    )
    return Diagram(
        "Import graph of the product's rooms", boxes, arrows, caption=caption, levels=level
    )


def reduced(edges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The fewest arrows that keep who reaches whom: an arrow A -> C is left out when A reaches
    C through other arrows (A -> B -> C). Read left to right, so the result is the same on every
    build."""
    kept = list(edges)
    for edge in sorted(edges):
        rest = [e for e in kept if e != edge]
        if _reaches(rest, *edge):
            kept = rest
    return kept


def _reaches(edges: list[tuple[str, str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        here = todo.pop()
        for a, b in edges:
            if a == here and b not in seen:
                if b == goal:
                    return True
                seen.add(b)
                todo.append(b)
    return False


def _role(room: str) -> str:
    top = room.split(".")[0]
    return {
        COMMAND_LINE: "input",
        "preview": "verdict",
        "components": "network",
        "policies": "verdict",
        "serving": "compute",
        "bench": "storage",
        "endpoint": "control",
        "healthchecks": "control",
        "mcp_server": "input",
    }.get(top, "compute")
