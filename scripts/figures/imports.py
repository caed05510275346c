"""The product's import graph, read from the code's own import statements.

A room is a product package (``pyproject.toml``'s packages) or one of its subpackages; the
modules at a package's top level belong to the package's own room. An arrow from room A to
room B means some module of A imports a module of B, at any depth of the module (an import
inside a function counts: it is still a dependency). ``if TYPE_CHECKING:`` imports count too.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from scripts.figures.draw import Arrow, Box, Diagram

ROOT = Path(__file__).resolve().parents[2]


def product_packages(root: Path = ROOT) -> list[str]:
    """The top-level packages ``pyproject.toml`` ships (``include = ["serving*", ...]``)."""
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = data["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted(p.rstrip("*") for p in patterns if (root / p.rstrip("*")).is_dir())


def room_of(module: str, rooms: set[str]) -> str | None:
    """The deepest room holding ``module`` (``serving.render.vllm`` -> ``serving.render``)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in rooms:
            return candidate
    return None


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            # `from bench import load` imports the module bench.load.
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
    return found


@dataclass(frozen=True)
class ImportGraph:
    rooms: tuple[str, ...]
    #: (importing room, imported room) -> the module-level imports behind the arrow.
    edges: dict[tuple[str, str], tuple[str, ...]]
    modules: dict[str, int]
    #: Each room's height: the longest chain of module imports below its highest module.
    heights: dict[str, int] = field(default_factory=dict)

    def circles(self) -> list[list[str]]:
        """Groups of rooms that import each other, directly or through others."""
        graph: dict[str, set[str]] = defaultdict(set)
        for a, b in self.edges:
            graph[a].add(b)
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        found: list[list[str]] = []

        def visit(v: str) -> None:  # Tarjan's strongly connected components
            index[v] = low[v] = len(index)
            stack.append(v)
            for w in sorted(graph[v]):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

        for v in self.rooms:
            if v not in index:
                visit(v)
        return sorted(found)


def import_graph(root: Path = ROOT) -> ImportGraph:
    packages = product_packages(root)
    files = sorted(f for p in packages for f in (root / p).rglob("*.py"))
    names = {f: _module_name(f, root) for f in files}
    # Every package with an __init__.py is a room: a top-level package and its subpackages.
    rooms = {n for f, n in names.items() if f.name == "__init__.py" and n.count(".") <= 1}
    modules: dict[str, int] = defaultdict(int)
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    known = set(names.values())
    below: dict[str, set[str]] = defaultdict(set)
    for f, name in names.items():
        here = room_of(name, rooms)
        if here is None:
            continue
        modules[here] += 1
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        for target in _imported(tree, name, f.name == "__init__.py"):
            module = room_of(target, known)
            if module is not None and module != name:
                below[name].add(module)
            there = room_of(target, rooms)
            if there is not None and there != here and not there.startswith(here + "."):
                # A package importing its own subpackage (`bench` -> `bench.load`) is how the
                # package exports its names: drawn like any other arrow, except to itself.
                edges[(here, there)].add(f"{name} -> {target}")
    height: dict[str, int] = {}

    def climb(module: str, path: frozenset[str]) -> int:
        if module not in height:
            # A module in a circle is placed by the imports outside it.
            height[module] = max(
                (climb(m, path | {module}) + 1 for m in sorted(below[module]) if m not in path),
                default=0,
            )
        return height[module]

    heights: dict[str, int] = {}
    for name in sorted(known):
        room = room_of(name, rooms)
        if room is not None:
            heights[room] = max(heights.get(room, 0), climb(name, frozenset()))
    return ImportGraph(
        rooms=tuple(sorted(rooms)),
        edges={k: tuple(sorted(v)) for k, v in sorted(edges.items())},
        modules=dict(modules),
        heights=heights,
    )


def diagram(graph: ImportGraph | None = None) -> Diagram:
    graph = graph or import_graph()
    boxes = [
        Box(
            room,
            f"{room.replace('.', '/')}/",
            (f"{graph.modules.get(room, 0)} modules",),
            role=_role(room),
        )
        for room in graph.rooms
    ]
    # Rows by height: a room sits above the rooms its modules import. An arrow that climbs (to
    # a room as high or higher) is red: two rooms whose modules import each other both ways.
    level = graph.heights
    down = [(a, b) for a, b in graph.edges if level.get(a, 0) > level.get(b, 0)]
    up = [(a, b) for a, b in graph.edges if level.get(a, 0) <= level.get(b, 0)]
    arrows = [Arrow(a, b) for a, b in reduced(down)] + [Arrow(a, b, alarm=True) for a, b in up]
    caption = "an arrow: the upper room imports the lower one, directly or through others; " + (
        f"red: an import back up, between rooms that import each other ({len(up)})"
        if up
        else "no import goes back up"
    )
    return Diagram(
        "Import graph of the product packages", boxes, arrows, caption=caption, levels=level
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
        "gemma4": "input",
        "components": "network",
        "policies": "verdict",
        "serving": "compute",
        "bench": "storage",
        "endpoint": "control",
        "healthchecks": "control",
        "mcp_server": "input",
    }.get(top, "compute")
