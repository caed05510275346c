"""The rooms of the code, as docs/architecture.md names them: each module's room, the imports
between modules (read with `ast`) and rooms, and the circles in them. The command-line layer is
`gemma4/*`, `scripts/*` and any `cli.py` or `__main__.py`; any other module is in the room of
its folder."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The product's packages (tests are not product code).
PACKAGES = (
    "serving",
    "components",
    "policies",
    "gemma4",
    "bench",
    "healthchecks",
    "mcp_server",
    "endpoint",
    "enginecheck",
    "preview",
    "scripts",
)
COMMAND_LINE = "command line"


def product_modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every product module."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def in_command_line(module: str, path: Path) -> bool:
    """`gemma4/*`, `scripts/*`, and any `cli.py` or `__main__.py`."""
    return module.split(".")[0] in ("gemma4", "scripts") or path.name in ("cli.py", "__main__.py")


#: Packages whose folders (and top-level modules) are rooms of their own.
DIVIDED = ("serving", "bench")


def room(module: str, path: Path) -> str:
    """The room of a module: the command-line layer, `serving.<room>` or `bench.<room>`, else
    its package."""
    parts = module.split(".")
    if in_command_line(module, path):
        return COMMAND_LINE
    if parts[0] in DIVIDED and len(parts) > 1:
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


_Statement = tuple[int | None, str | None, tuple[str, ...], int]
"""An import statement: (level, module, names, line); level None for `import`."""


@functools.lru_cache(maxsize=4096)
def _parsed_imports(text: str) -> tuple[_Statement, ...]:
    """The import statements of a source text, in `ast.walk` order. Cached by text: tests copy
    the tree with one file changed and read every file again."""
    statements: list[_Statement] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            statements.append((None, None, tuple(a.name for a in node.names), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            statements.append((node.level, node.module, names, node.lineno))
    return tuple(statements)


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every name an `import` or `from` statement anywhere in the file imports (module level,
    function level, under `if TYPE_CHECKING:` alike), absolute, with its line; for `from X
    import y`, X too (its `__init__` runs)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for level, name, names, line in _parsed_imports(path.read_text()):
        if level is None:
            for alias in names:
                yield alias, line
            continue
        if level:
            base = package[: len(package) - (level - 1)]
            origin = ".".join([*base, *([name] if name else [])])
        else:
            origin = name or ""
        yield origin, line
        for alias in names:
            yield f"{origin}.{alias}", line


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {product module it imports: line}."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        for name, line in imported_names(module, path):
            target = name
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # A module's own packages are imported before it anyway (`from . import sibling`
            # names a sibling, not a dependency on the package's `__init__`).
            if target and target != module and not module.startswith(f"{target}."):
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def room_graph(
    graph: dict[str, dict[str, int]], modules: dict[str, Path]
) -> dict[str, dict[str, int]]:
    """room -> {room it imports: a line}: the rooms of the real imports between rooms."""
    rooms: dict[str, dict[str, int]] = {}
    for module, edges in graph.items():
        here = room(module, modules[module])
        rooms.setdefault(here, {})
        for target, line in edges.items():
            there = room(target, modules[target])
            rooms.setdefault(there, {})
            if there != here:
                rooms[here].setdefault(there, line)
    return rooms
