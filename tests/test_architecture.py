"""The rooms of docs/architecture.md hold: every import of the code (module and function level)
is one the page's table allows, no module imports itself through others, the rooms beneath the
command-line layer import each other in no circle (in the table and in the code), the domain
imports none of the outer packages nor Pulumi, and only the command-line layer parses
arguments."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
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
    "scripts",
)
COMMAND_LINE = "command line"
#: Libraries that read a command line; only the command-line layer imports one.
ARGUMENT_PARSERS = frozenset({"argparse", "optparse", "getopt", "click", "typer"})
#: What the domain (`serving/`) never imports, at module or function level: the packages around
#: it (Pulumi components, policies, commands, benchmark, MCP server, health checks).
OUTSIDE_THE_DOMAIN = frozenset(
    {"components", "policies", "gemma4", "bench", "mcp_server", "healthchecks"}
)
#: Top-level folders holding no product code.
NOT_PRODUCT = frozenset({"tests", "docs", "site", "image"})


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every product module."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def in_command_line(module: str, path: Path) -> bool:
    """`gemma4/*`, `scripts/*`, and any `cli.py` or `__main__.py`."""
    return module.split(".")[0] in ("gemma4", "scripts") or path.name in ("cli.py", "__main__.py")


def room(module: str, path: Path) -> str:
    """The room of a module: the command-line layer, `serving.<room>`, else its package."""
    parts = module.split(".")
    if in_command_line(module, path):
        return COMMAND_LINE
    if parts[0] == "serving" and len(parts) > 1:
        return f"serving.{parts[1]}"
    return parts[0]


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every name an `import` or `from` statement anywhere in the file imports (module level,
    function level, under `if TYPE_CHECKING:` alike), absolute, with its line; for `from X
    import y`, X too (its `__init__` runs)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            yield origin, node.lineno
            for alias in node.names:
                yield f"{origin}.{alias.name}", node.lineno


def python_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every Python file of the repository outside the folders
    that hold no product code (tests, docs) and hidden ones (`.venv`, `.git`): the product's
    packages, any other package or folder, and top-level modules."""
    found = {}
    for top in sorted(root.iterdir()):
        if top.name.startswith(".") or top.name in NOT_PRODUCT:
            continue
        paths = [top] if top.suffix == ".py" else sorted(top.rglob("*.py")) if top.is_dir() else []
        for path in paths:
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__" and len(parts) > 1:
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def reads_the_command_line(module: str, path: Path) -> list[str]:
    """`file:line: what` for each argument-parsing library the file imports (anywhere, in any
    form) and each use of `sys.argv`."""
    where = path.name
    found = list(
        dict.fromkeys(
            f"{where}:{line}: imports {name.split('.')[0]}"
            for name, line in imported_names(module, path)
            if name.split(".")[0] in ARGUMENT_PARSERS
        )
    )
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "argv"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ) or (
            isinstance(node, ast.ImportFrom)
            and node.module == "sys"
            and any(a.name == "argv" for a in node.names)
        ):
            found.append(f"{where}:{node.lineno}: reads sys.argv")
    return found


def command_line_readers(root: Path = ROOT) -> list[str]:
    """Where a module outside the command-line layer reads the command line."""
    return [
        f"{path.relative_to(root)}: {problem}"
        for module, path in python_files(root).items()
        if not in_command_line(module, path)
        for problem in reads_the_command_line(module, path)
    ]


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


def allowed_imports(page: Path = PAGE) -> dict[str, set[str]]:
    """The table "room | may import" of the architecture page."""
    text = page.read_text()
    section = text.split("## Who may import whom", 1)[1]
    table: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        rooms = set(re.findall(r"`([^`]+)`", cells[1]))
        table[cells[0].strip("`")] = rooms
    return table


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


def table_graph(table: dict[str, set[str]]) -> dict[str, dict[str, int]]:
    """room -> {room the page's table lets it import: 0}."""
    rooms: dict[str, dict[str, int]] = {r: {} for r in table}
    for here, allowed in table.items():
        for there in sorted(allowed - {"nothing"}):
            rooms.setdefault(there, {})
            rooms[here][there] = 0
    return rooms


def beneath_the_command_line(rooms: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The room graph without the command-line layer (it sits on top; what reaches up into it
    is listed in the table)."""
    return {
        here: {there: line for there, line in edges.items() if there != COMMAND_LINE}
        for here, edges in rooms.items()
        if here != COMMAND_LINE
    }


def domain_imports_outside(modules: dict[str, Path], root: Path = ROOT) -> list[str]:
    """`file:line: name` for each import (module or function level) of a `serving` module of
    an outer package or of Pulumi."""
    found = [
        f"{path.relative_to(root)}:{line}: imports {top}"
        for module, path in modules.items()
        if module.split(".")[0] == "serving"
        for name, line in imported_names(module, path)
        for top in [name.split(".")[0]]
        if top in OUTSIDE_THE_DOMAIN or top.startswith("pulumi")
    ]
    return list(dict.fromkeys(found))


MODULES = product_modules()
GRAPH = import_graph(MODULES)


def test_the_page_names_every_room_once() -> None:
    table = allowed_imports()
    rooms = {room(m, p) for m, p in MODULES.items()} - {"serving"}
    assert set(table) == rooms
    for allowed in table.values():
        assert allowed - {"nothing"} <= rooms


def test_every_import_between_rooms_is_allowed_by_the_page() -> None:
    table = allowed_imports()
    table["serving"] = set()  # serving/__init__.py: a docstring
    wrong = []
    for module, edges in GRAPH.items():
        here = room(module, MODULES[module])
        for target, line in edges.items():
            there = room(target, MODULES[target])
            if there != here and there not in table[here]:
                wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {here} -> {there}")
    assert wrong == [], "imports the table of docs/architecture.md does not allow"


def test_no_import_cycle_among_product_modules() -> None:
    assert cycles(GRAPH) == []


def test_only_the_command_line_layer_reads_the_command_line() -> None:
    """argparse (or another parser, or `sys.argv`) nowhere outside `gemma4/`, `scripts/`, a
    `cli.py` or a `__main__.py`, in any folder of the repository but the tests."""
    assert python_files().keys() >= MODULES.keys()
    assert command_line_readers() == []


def test_the_domain_imports_no_outer_package_nor_pulumi() -> None:
    """`serving/` imports nothing of components, policies, gemma4, bench, mcp_server,
    healthchecks, and no `pulumi*` module, at module or function level."""
    assert any(m.startswith("serving.") for m in MODULES)
    assert domain_imports_outside(MODULES) == []


def test_the_rooms_beneath_the_command_line_form_no_cycle() -> None:
    """Rooms as nodes: neither the page's table nor the code's real imports between rooms
    hold a circle beneath the command-line layer; the only circles of the whole room graph
    run through that layer."""
    real = room_graph(GRAPH, MODULES)
    table = table_graph(allowed_imports())
    assert "serving.sizing" in real["serving.config"]
    assert "serving.sizing" in real["serving.capacity"]
    for rooms in (real, table):
        assert cycles(beneath_the_command_line(rooms)) == []
        assert all(COMMAND_LINE in c for c in cycles(rooms))


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("from serving.config.settings import Settings\n", "room"),
        ("def late():\n    from serving.capacity import plan\n", "cycle"),
        ("def late():\n    from serving.config import netrange\n", "room cycle"),
        ("def late():\n    from components.stack import build\n", "outside"),
        ("import pulumi_gcp.config.vars\n", "outside"),
        ("def late():\n    from healthchecks import checks\n", "outside"),
    ],
)
def test_the_checks_catch_a_forbidden_import(tmp_path: Path, source: str, problem: str) -> None:
    """A copy of the tree with one bad import added: the check that matters finds it."""
    import shutil

    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    target = {
        "room": tmp_path / "serving" / "catalog" / "hardware.py",
        "cycle": tmp_path / "serving" / "catalog" / "models.py",
        "room cycle": tmp_path / "serving" / "sizing" / "memory.py",
        "outside": tmp_path / "serving" / "config" / "stack_file.py",
    }[problem]
    target.write_text(target.read_text() + "\n" + source)
    modules = product_modules(tmp_path)
    graph = import_graph(modules)
    if problem == "room":
        assert "serving.config.settings" in graph["serving.catalog.hardware"]
        assert "serving.config" not in allowed_imports()["serving.catalog"]
    elif problem == "cycle":
        assert any("serving.catalog.models" in c for c in cycles(graph))
    elif problem == "room cycle":
        assert cycles(graph) == []
        rooms = beneath_the_command_line(room_graph(graph, modules))
        assert ["serving.config", "serving.sizing"] in cycles(rooms)
    else:
        found = domain_imports_outside(modules, tmp_path)
        assert len(found) == 1 and found[0].startswith("serving/config/stack_file.py:"), found


@pytest.mark.parametrize(
    ("where", "source"),
    [
        ("serving/capacity/perf.py", "import argparse\n"),
        ("mcp_server/server.py", "def late():\n    from argparse import ArgumentParser\n"),
        ("bench/fidelity/harness.py", "import argparse as options\n"),
        ("bench/fidelity/pacedserver/__init__.py", "import optparse\n"),
        ("components/stack.py", "import getopt\n"),
        ("serving/config/settings.py", "import sys\nARGS = sys.argv[1:]\n"),
        ("newpackage/tool.py", "import argparse\n"),
        ("tool.py", "import argparse\n"),
    ],
)
def test_a_command_line_read_outside_the_layer_is_found(
    tmp_path: Path, where: str, source: str
) -> None:
    """A module outside the command-line layer reading the command line, in any folder of the
    repository: the check names it; the same lines in a `cli.py`, a `__main__.py`, under
    `gemma4/` or `scripts/` pass, and under `tests/` are not looked at."""
    target = tmp_path / where
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text('"""A module."""\n\n' + source)
    found = command_line_readers(tmp_path)
    assert len(found) == 1 and found[0].startswith(f"{where}: "), found
    for allowed in ("cli.py", "__main__.py"):
        target = target.rename(target.with_name(allowed))
        assert command_line_readers(tmp_path) == []
    for layer in ("gemma4", "scripts", "tests"):
        moved = tmp_path / layer / "anything" / "module.py"
        moved.parent.mkdir(parents=True)
        target = target.rename(moved)
        assert command_line_readers(tmp_path) == []
