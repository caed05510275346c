"""The rooms of docs/architecture.md hold: every import of the code (module and function level)
is one the page's table allows, no module imports itself through others, no room imports
itself through others (in the table and in the code, the command-line layer included), the
domain imports none of the outer packages nor Pulumi, and only the command-line layer parses
arguments."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from scripts.rooms import (
    COMMAND_LINE,
    PACKAGES,
    ROOT,
    cycles,
    import_graph,
    imported_names,
    in_command_line,
    product_modules,
    room,
    room_graph,
)

PAGE = ROOT / "docs" / "architecture.md"
#: Libraries that read a command line; only the command-line layer imports one.
ARGUMENT_PARSERS = frozenset({"argparse", "optparse", "getopt", "click", "typer"})
#: The one module that builds a parser of another program: vLLM's own `vllm serve` parser,
#: from its snapshot, to read the arguments a resource gives vLLM (never `sys.argv`).
OTHER_PROGRAMS_PARSER = "serving/launch/vllm_args.py: vllm_args.py:14: imports argparse"
#: What the domain (`serving/`) never imports, at module or function level: the packages around
#: it (Pulumi components, policies, commands, benchmark, MCP server, health checks, preview).
OUTSIDE_THE_DOMAIN = frozenset(
    {"components", "policies", "gemma4", "bench", "mcp_server", "healthchecks", "preview"}
)
#: Top-level folders holding no product code.
NOT_PRODUCT = frozenset({"tests", "docs", "site", "image"})


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


def table_graph(table: dict[str, set[str]]) -> dict[str, dict[str, int]]:
    """room -> {room the page's table lets it import: 0}."""
    rooms: dict[str, dict[str, int]] = {r: {} for r in table}
    for here, allowed in table.items():
        for there in sorted(allowed - {"nothing"}):
            rooms.setdefault(there, {})
            rooms[here][there] = 0
    return rooms


def room_circles(
    graph: dict[str, dict[str, int]], modules: dict[str, Path], page: Path = PAGE
) -> list[str]:
    """Each circle of rooms, in the code's real imports and in the page's table, as
    `where: a, b, ...` (rooms that import each other, directly or through others)."""
    return [
        f"{where}: {', '.join(circle)}"
        for where, rooms in (
            ("code", room_graph(graph, modules)),
            ("table", table_graph(allowed_imports(page))),
        )
        for circle in cycles(rooms)
    ]


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


@functools.cache
def _modules() -> dict[str, Path]:
    return product_modules()


@functools.cache
def _graph() -> dict[str, dict[str, int]]:
    """Read once, by the first test that needs it (never at collection: every pytest worker
    collects this module)."""
    return import_graph(_modules())


def test_the_page_names_every_room_once() -> None:
    table = allowed_imports()
    rooms = {room(m, p) for m, p in _modules().items()} - {"serving"}
    assert set(table) == rooms
    for allowed in table.values():
        assert allowed - {"nothing"} <= rooms


def test_every_import_between_rooms_is_allowed_by_the_page() -> None:
    table = allowed_imports()
    table["serving"] = set()  # serving/__init__.py: a docstring
    wrong = []
    for module, edges in _graph().items():
        here = room(module, _modules()[module])
        for target, line in edges.items():
            there = room(target, _modules()[target])
            if there != here and there not in table[here]:
                wrong.append(f"{_modules()[module].relative_to(ROOT)}:{line}: {here} -> {there}")
    assert wrong == [], "imports the table of docs/architecture.md does not allow"


def test_no_import_cycle_among_product_modules() -> None:
    assert cycles(_graph()) == []


def test_only_the_command_line_layer_reads_the_command_line() -> None:
    """argparse (or another parser, or `sys.argv`) nowhere outside `gemma4/`, `scripts/`, a
    `cli.py` or a `__main__.py`, in any folder of the repository but the tests."""
    assert python_files().keys() >= _modules().keys()
    assert [r for r in command_line_readers() if r != OTHER_PROGRAMS_PARSER] == []


def test_the_domain_imports_no_outer_package_nor_pulumi() -> None:
    """`serving/` imports nothing of components, policies, gemma4, bench, mcp_server,
    healthchecks, and no `pulumi*` module, at module or function level."""
    assert any(m.startswith("serving.") for m in _modules())
    assert domain_imports_outside(_modules()) == []


def test_no_room_imports_itself_through_others() -> None:
    """Rooms as nodes, the command-line layer one of them: neither the page's table nor the
    code's real imports between rooms hold a circle. The command-line layer sits on top: no
    room reaches back up into it."""
    real = room_graph(_graph(), _modules())
    assert "serving.sizing" in real["serving.config"]
    assert "serving.sizing" in real["serving.capacity"]
    assert "preview" in real["mcp_server"] and "preview" in real[COMMAND_LINE]
    assert "bench.results" in real["bench.load"] and "bench.results" in real["bench.reports"]
    assert room_circles(_graph(), _modules()) == []
    assert not any(COMMAND_LINE in rooms for rooms in allowed_imports().values())


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
    _copy_of_the_tree(tmp_path)
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
        assert room_circles(graph, modules) == ["code: serving.config, serving.sizing"]
    else:
        found = domain_imports_outside(modules, tmp_path)
        assert len(found) == 1 and found[0].startswith("serving/config/stack_file.py:"), found


def _copy_of_the_tree(tmp_path: Path) -> Path:
    import shutil

    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    return tmp_path


@pytest.mark.parametrize(
    ("where", "source", "circle"),
    [
        # The two circles there were: the MCP tools running the preview's command line, the
        # fidelity harness running the benchmark's.
        (
            "mcp_server/tools.py",
            "def late():\n    from gemma4.preview import main\n",
            "code: command line, mcp_server",
        ),
        (
            "bench/fidelity/harness.py",
            "from bench.cli import main\n",
            "code: bench.fidelity, command line",
        ),
        (
            "preview/build.py",
            "def late():\n    import gemma4.guard\n",
            "code: command line, preview",
        ),
        # The benchmark's folders are rooms: the circles there were (a request's record in the
        # load path, the comparison's charts in the stored results).
        (
            "bench/results/stats.py",
            "from bench.load.hotpath import RequestSpec\n",
            "code: bench.load, bench.results",
        ),
        (
            "bench/results/gate.py",
            "def late():\n    from bench.reports import charts\n",
            "code: bench.reports, bench.results",
        ),
    ],
)
def test_a_room_circle_is_found(tmp_path: Path, where: str, source: str, circle: str) -> None:
    """A copy of the tree where a room reaches back up into one above it (the command-line
    layer, or a room of the benchmark): no module imports itself, yet the rooms do, and the
    check names them."""
    root = _copy_of_the_tree(tmp_path)
    target = root / where
    target.write_text(target.read_text() + "\n" + source)
    modules = product_modules(root)
    graph = import_graph(modules)
    assert cycles(graph) == []
    [found] = room_circles(graph, modules)
    where, rooms = circle.split(": ")
    assert found.startswith(f"{where}: ")
    assert set(rooms.split(", ")) <= set(found.split(": ")[1].split(", ")), found


def test_a_room_circle_in_the_table_is_found(tmp_path: Path) -> None:
    """The page's table letting two rooms import each other is a circle too, even where the
    code makes no such import."""
    page = tmp_path / "architecture.md"
    row = "| `endpoint` | nothing |"
    assert row in PAGE.read_text()
    page.write_text(PAGE.read_text().replace(row, "| `endpoint` | `healthchecks` |"))
    assert room_circles(_graph(), _modules(), page) == ["table: endpoint, healthchecks"]


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
