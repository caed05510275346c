"""The rooms of docs/architecture.md hold: every import of the code (module and function level)
is one the page's table allows, no module imports itself through others, and only the
command-line layer parses arguments."""

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
#: Entry modules that still parse their own options outside the command-line layer (named on
#: the architecture page); the test fails when one more appears, or when one of these stops.
OWN_PARSERS = frozenset(
    {"mcp_server.server", "bench.fidelity.harness", "bench.fidelity.pacedserver"}
)


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


def room(module: str, path: Path) -> str:
    """The room of a module: the command-line layer, `serving.<room>`, else its package."""
    parts = module.split(".")
    if parts[0] in ("gemma4", "scripts") or path.name in ("cli.py", "__main__.py"):
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


def test_only_the_command_line_layer_imports_argparse() -> None:
    parsing = {
        module
        for module, path in MODULES.items()
        if room(module, path) != COMMAND_LINE
        and any(name.split(".")[0] == "argparse" for name, _ in imported_names(module, path))
    }
    assert parsing == OWN_PARSERS


def test_the_domain_imports_no_pulumi() -> None:
    pulumi = [
        module
        for module, path in MODULES.items()
        if module.startswith("serving")
        and any(name.split(".")[0].startswith("pulumi") for name, _ in imported_names(module, path))
    ]
    assert pulumi == []


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("from serving.config.settings import Settings\n", "room"),
        ("def late():\n    from serving.capacity import plan\n", "cycle"),
        ("import argparse\n", "argparse"),
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
        "argparse": tmp_path / "serving" / "capacity" / "perf.py",
    }[problem]
    target.write_text(target.read_text() + "\n" + source)
    modules = product_modules(tmp_path)
    graph = import_graph(modules)
    if problem == "room":
        assert "serving.config.settings" in graph["serving.catalog.hardware"]
        assert "serving.config" not in allowed_imports()["serving.catalog"]
    elif problem == "cycle":
        assert any("serving.catalog.models" in c for c in cycles(graph))
    else:
        path = modules["serving.capacity.perf"]
        assert any(n == "argparse" for n, _ in imported_names("serving.capacity.perf", path))
