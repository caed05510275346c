"""The documentation's figures: drawn from what the code declares, and shown on the pages.

The figures are drawn when the site is built (scripts/mkdocs_hooks.py); these tests hold that
each one is drawn from the code's own data (change the data and the picture changes), that
every figure is shown on a page and every figure a page shows is drawn, and that the pages
carry no diagram source and no list Python-Markdown would not render.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
import shlex
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mkdocs.structure.files import Files

from preview.harness import ROOT
from scripts.figures import DIAGRAMS, GKE_STACK, Figure
from scripts.figures.bench_run import SHOWN
from scripts.figures.draw import FONT, Arrow, Box, Diagram, DotError, svg
from scripts.figures.imports import import_graph
from scripts.figures.topology import cloud_run_diagram, gke_diagram, render
from scripts.picture_checks import MIN_FONT_PX
from scripts.rooms import room

DOCS = ROOT / "docs"


SVG = "{http://www.w3.org/2000/svg}"
#: The docs' content column, CSS px, in the browser check's 1,280 px window (Material's
#: theme there: a 925 pt figure was shown at 56 % of its 1,233 px): a wider figure is scaled
#: down to it.
CONTENT_PX = 690


@dataclass(frozen=True)
class Text:
    text: str
    x: float
    y: float
    size: float
    anchor: str

    def box(self) -> tuple[float, float, float, float]:
        """Left, top, right, bottom: about 0.6 x the font size per character, the baseline
        at 80% of the font size down."""
        width = 0.6 * self.size * len(self.text)
        left = {"start": self.x, "end": self.x - width}.get(self.anchor, self.x - width / 2)
        return left, self.y - 0.8 * self.size, left + width, self.y + 0.2 * self.size


def _texts(group: ET.Element) -> list[Text]:
    return [
        Text(
            t.text or "",
            float(t.get("x", 0)),
            float(t.get("y", 0)),
            float(t.get("font-size", 14)),
            t.get("text-anchor", "start"),
        )
        for t in group.iter(f"{SVG}text")
    ]


def _groups(root: ET.Element, kind: str) -> dict[str, ET.Element]:
    """Graphviz's ``g.node`` or ``g.edge`` groups by their ``title`` (a box's key, ``a->b``)."""
    return {
        g.findtext(f"{SVG}title") or "": g for g in root.iter(f"{SVG}g") if g.get("class") == kind
    }


def _numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", text)]


def _outline(node: ET.Element) -> tuple[float, float, float, float]:
    """A box's left, top, right, bottom: its shape's points (a rounded box is a path)."""
    shape = next(e for e in node if e.tag in (f"{SVG}path", f"{SVG}polygon"))
    numbers = _numbers(shape.get("d") or shape.get("points") or "")
    xs, ys = numbers[0::2], numbers[1::2]
    return min(xs), min(ys), max(xs), max(ys)


def _route(edge: ET.Element) -> list[tuple[float, float]]:
    """Points along an arrow's line (Graphviz's ``M p C p p p ...`` cubic Bezier path)."""
    line = next(e for e in edge if e.tag == f"{SVG}path")
    numbers = _numbers(line.get("d") or "")
    points = list(zip(numbers[0::2], numbers[1::2], strict=True))
    out = [points[0]]
    for i in range(0, len(points) - 3, 3):
        p0, p1, p2, p3 = points[i : i + 4]
        for step in range(1, 21):
            t = step / 20
            out.append(
                tuple(  # type: ignore[arg-type]
                    (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t**2 * c + t**3 * d
                    for a, b, c, d in zip(p0, p1, p2, p3, strict=True)
                )
            )
    return out


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@functools.cache
def _rendered(stack: str) -> list[Any]:
    return render(stack, ROOT)


def _arrows(d: Diagram) -> set[tuple[str, str]]:
    titles = {b.key: b.title for b in d.boxes}
    return {(titles[a.src], titles[a.dst]) for a in d.arrows}


# --- topology ---------------------------------------------------------------------------


def test_the_gke_topology_shows_the_serving_path_as_the_program_declares_it() -> None:
    d = gke_diagram(GKE_STACK, _rendered(GKE_STACK))
    titles = {b.title for b in d.boxes}
    assert {
        "Gateway",
        "HTTPRoute",
        "InferencePool",
        "endpoint picker",
        "vLLM Pods",
        "HorizontalPodAutoscaler",
        "accelerator node pool",
        "system node pool",
        "model bucket",
        "download job (Cloud Run)",
    } <= titles
    assert {
        ("clients", "Gateway"),
        ("Gateway", "HTTPRoute"),
        ("HTTPRoute", "InferencePool"),
        ("InferencePool", "vLLM Pods"),
        ("InferencePool", "endpoint picker"),
        ("HorizontalPodAutoscaler", "vLLM Pods"),
        ("vLLM Pods", "accelerator node pool"),
        ("endpoint picker", "system node pool"),
        ("vLLM Pods", "model bucket"),
        ("download job (Cloud Run)", "model bucket"),
    } <= _arrows(d)
    lines = {line for b in d.boxes for line in b.lines}
    assert "g2-standard-8 + 1 x nvidia-l4" in lines  # the accelerator pool as declared
    assert "1-4 replicas" in lines  # the HPA's bounds


def test_the_gke_topology_follows_the_references_not_the_kinds() -> None:
    """An HTTPRoute whose backend names no declared pool, and an HPA aimed elsewhere, lose
    their arrows: the picture shows what the objects reference, not what they should."""
    resources = copy.deepcopy(_rendered(GKE_STACK))
    for r in resources:
        kind = str(r.type).rsplit(":", 1)[-1]
        if kind == "HTTPRoute":
            r.inputs["spec"]["rules"][0]["backendRefs"][0]["name"] = "another-pool"
        if kind == "HorizontalPodAutoscaler":
            r.inputs["spec"]["scaleTargetRef"]["name"] = "another-deployment"
    arrows = _arrows(gke_diagram(GKE_STACK, resources))
    assert ("HTTPRoute", "InferencePool") not in arrows
    assert ("HorizontalPodAutoscaler", "vLLM Pods") not in arrows
    assert ("InferencePool", "vLLM Pods") in arrows


def test_the_cloud_run_topology_shows_bucket_job_service_sidecar_and_monitoring() -> None:
    d = cloud_run_diagram("l4", _rendered("l4"))
    assert {
        ("clients", "Cloud Run service"),
        ("Cloud Run service", "container vllm"),
        ("Cloud Run service", "sidecar collector"),
        ("container vllm", "sidecar collector"),
        ("container vllm", "model bucket"),
        ("download job (Cloud Run)", "model bucket"),
        ("sidecar collector", "Cloud Monitoring"),
    } <= _arrows(d)
    labels = {(a.src, a.dst): a.label for a in d.arrows}
    assert "reads weights (ro)" in labels.values()  # the service mounts the bucket read-only
    assert "writes weights" in labels.values()
    # The sidecar gets no requests: its arrow says what the service declares for it instead.
    titles = {b.key: b.title for b in d.boxes}
    shown = {(titles[a.src], titles[a.dst]): a.label for a in d.arrows}
    assert shown["Cloud Run service", "sidecar collector"] == "starts after vllm"


# --- the import graph -------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_import_graph_is_read_from_the_import_statements(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/cli.py": "import argparse\nfrom serving.config import settings\n",
            "app/server.py": "from serving.capacity import plan\n",
            "serving/__init__.py": "",
            "serving/config/__init__.py": "",
            "serving/config/settings.py": "from ..capacity import plan\n",
            "serving/capacity/__init__.py": "",
            "serving/capacity/plan.py": "def f():\n    from serving.render import argv\n",
            "serving/render/__init__.py": "",
            "serving/render/argv.py": "def f():\n    from serving.config import settings\n",
            "serving/promotion.py": "",
        },
    )
    graph = import_graph(root, ("app", "serving"))
    # A cli.py is in the command-line layer; serving/'s own __init__ and promotion.py import
    # nothing and nothing imports them: left out.
    assert graph.rooms == (
        "app",
        "command line",
        "serving.capacity",
        "serving.config",
        "serving.render",
    )
    assert set(graph.edges) == {
        ("command line", "serving.config"),
        ("app", "serving.capacity"),
        ("serving.config", "serving.capacity"),  # a relative import
        ("serving.capacity", "serving.render"),  # an import inside a function counts
        ("serving.render", "serving.config"),
    }
    assert graph.circles() == [["serving.capacity", "serving.config", "serving.render"]]
    from scripts.figures.imports import diagram

    d = diagram(graph)
    # The circle's rooms share a height above what they import (nothing); its arrows are red.
    assert d.levels == {
        "app": 1,
        "command line": 1,
        "serving.capacity": 0,
        "serving.config": 0,
        "serving.render": 0,
    }
    assert {(a.src, a.dst, a.alarm) for a in d.arrows} == {
        ("app", "serving.capacity", False),
        ("command line", "serving.config", False),
        ("serving.capacity", "serving.render", True),
        ("serving.config", "serving.capacity", True),
        ("serving.render", "serving.config", True),
    }
    assert "red: rooms that import each other, an import circle (3)" in d.caption
    assert [b.title for b in d.boxes][:2] == ["app/", "command line"]


def test_the_drawing_leaves_out_arrows_implied_by_others_but_keeps_who_reaches_whom() -> None:
    from scripts.figures.imports import _reaches, reduced

    edges = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d"), ("d", "c"), ("a", "d")]
    kept = reduced(edges)
    assert ("a", "c") not in kept and ("a", "d") not in kept
    for a, b in edges:
        assert _reaches(kept, a, b)
    assert reduced([("x", "y")]) == [("x", "y")]


def test_the_product_import_graph_is_the_architecture_pages_room_graph() -> None:
    """The figure shows the rooms and arrows `tests/test_architecture.py` holds to the page's
    table, and no circle: every arrow goes down."""
    from scripts.figures.imports import diagram
    from scripts.rooms import import_graph as module_graph
    from scripts.rooms import product_modules, room_graph

    graph = import_graph()
    modules = product_modules()
    rooms = room_graph(module_graph(modules), modules)
    assert set(graph.edges) == {(a, b) for a, targets in rooms.items() for b in targets}
    assert {"command line", "preview", "serving.config", "bench"} <= set(graph.rooms)
    # The preview runs the policy pack; components render through the domain package.
    assert ("preview", "policies") in graph.edges
    assert any(a == "components" and b.startswith("serving") for a, b in graph.edges)
    assert graph.circles() == []
    d = diagram(graph)
    assert not any(a.alarm for a in d.arrows)
    assert all(graph.heights[a.src] > graph.heights[a.dst] for a in d.arrows)
    assert sum(graph.modules.values()) == sum(
        1 for m, p in modules.items() if room(m, p) in graph.rooms
    )


# --- drawing ---------------------------------------------------------------------------


@functools.cache
def _drawn(name: str) -> str:
    figure = next(f for f in DIAGRAMS if f.name == name)
    return svg(figure.draw(ROOT))


@pytest.mark.parametrize("name", [f.name for f in DIAGRAMS])
def test_every_diagram_is_laid_out_so_a_reader_can_read_it(name: str) -> None:
    """What dot laid out: no arrow through a box, no text on another, every arrow labelled
    where the figure labels arrows, and no text below 12 pt, or below 9 px once the page
    scales the figure to its content column."""
    root = ET.fromstring(_drawn(name))
    nodes, edges = _groups(root, "node"), _groups(root, "edge")
    assert nodes and edges
    labelled = [title for title, g in edges.items() if _texts(g)]
    assert labelled == [] or labelled == list(edges), (name, set(edges) - set(labelled))
    outlines = {key: _outline(g) for key, g in nodes.items()}
    for title, g in edges.items():
        src, dst = title.split("->")
        for key, (left, top, right, bottom) in outlines.items():
            inside = (left + 2, top + 2, right - 2, bottom - 2)
            through = [p for p in _route(g) if _overlap((*p, *p), inside)]
            assert key in (src, dst) or through == [], f"{name}: {title} runs through {key}"
    texts = _texts(root)
    for a, b in itertools.combinations(texts, 2):
        assert not _overlap(a.box(), b.box()), f"{name}: {a.text!r} on {b.text!r}"
    width = float(root.get("width", "").removesuffix("pt"))
    smallest = min(t.size for t in texts)
    assert smallest >= FONT
    # The width and the font sizes share one unit: the page's scale-down applies to both.
    assert smallest * min(1.0, CONTENT_PX / width) >= MIN_FONT_PX, f"{name} is {width} pt wide"


def test_a_drawn_figure_shows_every_label_as_text_the_same_on_every_build() -> None:
    d = Diagram(
        "A & B",
        [Box("a", "first <box>", ("--flag=1",)), Box("b:c", 'second "quoted"', ())],
        [Arrow("a", "b:c", "calls"), Arrow("b:c", "a", "answers", dashed=True)],
        caption="a caption",
    )
    drawn = svg(d)
    root = ET.fromstring(drawn)
    assert sorted(t.text for t in _texts(root)) == sorted(d.labels())
    assert set(_groups(root, "edge")) == {"a->b:c", "b:c->a"}
    assert "graphviz version" not in drawn
    assert svg(d) == drawn


def _fake_dot(tmp_path: Path, script: str | None) -> Path:
    if script is not None:
        (tmp_path / "dot").write_text(script)
        (tmp_path / "dot").chmod(0o755)
    return tmp_path


@pytest.mark.parametrize(
    ("script", "says"),
    [
        (None, "Graphviz's dot is not on PATH; install Graphviz: apt-get install graphviz"),
        ("#!/bin/sh\necho 'Error: syntax error' >&2\nexit 3\n", "dot exited 3: Error: syntax"),
    ],
)
def test_without_a_working_dot_the_build_stops_with_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str | None, says: str
) -> None:
    from mkdocs.exceptions import PluginError

    import scripts.mkdocs_hooks as hooks

    monkeypatch.setenv("PATH", str(_fake_dot(tmp_path, script)))
    d = Diagram("Some figure", [Box("a", "a")], [])
    with pytest.raises(DotError) as raised:
        svg(d)
    assert str(raised.value).startswith("the figure 'Some figure' cannot be drawn: ")
    assert says in str(raised.value) and "\n" not in str(raised.value)
    # The docs build: MkDocs prints a hook's PluginError as its message alone, no traceback.
    monkeypatch.setattr(hooks, "_drawn", {})
    monkeypatch.setattr("scripts.figures.DIAGRAMS", (Figure("x.svg", lambda _: d),))
    config = type("Config", (), {"config_file_path": str(ROOT / "mkdocs.yml")})()
    with pytest.raises(PluginError, match=r"^the figure 'Some figure' cannot be drawn: "):
        hooks.on_files(Files([]), config)


# --- the path from a stack file to the verdicts -------------------------------------------


def test_the_preview_path_shows_the_exact_command_line_and_verdicts() -> None:
    from preview.build import build_preview
    from scripts.figures.flow import command_lines, diagram

    p = build_preview("l4")
    d = diagram(p, ROOT)
    argv = next(b for b in d.boxes if b.key == "argv")
    assert shlex.split(" ".join(argv.lines)) == shlex.split(p.vllm_command_line)
    # The count the preview prints ("Resources (N):"), split as the preview marks them.
    program = next(b for b in d.boxes if b.key == "program")
    custom = sum(r.custom for r in p.resources)
    components = len(p.resources) - custom
    assert (
        program.lines[0]
        == f"{len(p.resources)} resources: {custom} in the cloud, {components} components"
    )
    policies = next(b for b in d.boxes if b.key == "policies")
    passed = sum(v.verdict == "pass" for v in p.policies)
    assert policies.title == f"policy pack: {len(p.policies)} policies"
    assert policies.lines[0].startswith(f"{passed} pass, ")
    refusing = next(a.label for a in d.arrows if (a.src, a.dst) == ("policies", "verdict"))
    assert refusing.startswith(f"{p.mandatory_violations} mandatory violation")
    assert command_lines("vllm serve m --a 1 --b") == ("vllm serve m", "--a 1", "--b")
    # The drawing shows these very lines (the figure is drawn from this stack's preview).
    root = ET.fromstring(_drawn("preview-path.svg"))
    texts = {key: [t.text for t in _texts(g)] for key, g in _groups(root, "node").items()}
    assert texts["argv"][1:] == list(argv.lines)
    assert texts["program"][1] == program.lines[0]
    assert texts["policies"][:2] == [policies.title, policies.lines[0]]


# --- the pages ---------------------------------------------------------------------------


def _pages() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md"))}


def test_every_figure_is_shown_and_every_figure_shown_is_drawn() -> None:
    shown: dict[str, list[str]] = {}
    for path, text in _pages().items():
        for target in re.findall(r"!\[[^\]]*\]\(((?:\.\./)*figures/[^)\s]+)\)", text):
            shown.setdefault(target.rsplit("/", 1)[-1], []).append(str(path.relative_to(DOCS)))
    assert sorted(shown) == sorted([f.name for f in DIAGRAMS] + list(SHOWN))
    pages = {page for pages in shown.values() for page in pages}
    assert {
        "deploy/gke.md",
        "deploy/cloud-run.md",
        "architecture.md",
        "benchmark.md",
        "preview.md",
        "promotion-ci.md",
    } <= pages


#: An image a page shows: Markdown's ``![alt](target)`` or an HTML ``<img src="target">``.
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)|<img\b[^>]*\bsrc=[\"']([^\"']+)", re.IGNORECASE)


def test_every_image_a_page_shows_is_an_svg_the_browser_check_measures() -> None:
    """The browser check measures every label of an SVG (scripts/browser_check.py); a PNG's
    text is pixels it cannot read, so a raster chart on a page would go unchecked."""
    shown = {
        (str(path.relative_to(DOCS)), target)
        for path, text in _pages().items()
        for found in IMAGE.findall(text)
        for target in found
        if target
    }
    assert any(target.endswith("bench-heatmap-p95-ttft.svg") for _, target in shown)
    assert {(page, t) for page, t in shown if not t.lower().endswith(".svg")} == set()
    # Nor drawn at build time, nor committed beside the pages (docs/img/).
    assert [f.name for f in DIAGRAMS if not f.name.endswith(".svg")] == []
    assert [name for name in SHOWN if not name.endswith(".svg")] == []
    committed = {p for p in DOCS.rglob("*") if p.is_file() and p.suffix not in (".md", ".css")}
    assert committed and {p for p in committed if p.suffix != ".svg"} == set()


def test_the_pages_image_pattern_finds_markdown_and_html_images() -> None:
    text = '![a](figures/x.png) [![b](<img/y.jpg>)](img/y.jpg) <img alt="c" src="z.gif">'
    assert [t for found in IMAGE.findall(text) for t in found if t] == [
        "figures/x.png",
        "img/y.jpg",
        "z.gif",
    ]


def test_the_benchmark_charts_are_svgs_drawn_alike_on_every_build_and_fit_the_column(
    tmp_path: Path,
) -> None:
    """Drawn by the benchmark's own chart code as SVG, byte-identical from the same run, each
    no wider than the content column (shown at its own size, its 7 pt text at 9.3 px), each
    title naming the fake server the run was recorded against."""
    from scripts.figures.bench_run import write

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    first, again = write(tmp_path / "a"), write(tmp_path / "b")
    assert [p.name for p in first] == list(SHOWN)
    for a, b in zip(first, again, strict=True):
        drawn = a.read_bytes()
        assert drawn == b.read_bytes(), a.name
        root = ET.fromstring(drawn)
        assert root.tag == f"{SVG}svg", a.name
        width_px = float(root.get("width", "").removesuffix("pt")) * 4 / 3
        assert width_px <= CONTENT_PX, f"{a.name} is {width_px:.0f} px wide"
        assert b"paced fake server (not a GPU)" in drawn, a.name


def test_the_benchmark_charts_say_they_come_from_a_fake_server() -> None:
    from bench.results.store import load_run
    from scripts.figures.bench_run import RUN

    label = load_run(RUN).run["label"]
    assert "fake server" in label and "not a GPU" in label
    text = (DOCS / "benchmark.md").read_text()
    assert "fake server" in text.split("figures/bench-")[0].rsplit("##", 1)[-1]


def test_no_page_holds_diagram_source() -> None:
    for path, text in _pages().items():
        assert "```mermaid" not in text, path


#: A list item: Python-Markdown needs a blank line before a list that follows a paragraph,
#: and 4 spaces to nest one list in another.
ITEM = re.compile(r"^(?P<indent> *)(?:[-*+]|\d+\.) \S")


def list_problems(text: str) -> list[str]:
    """The list items Python-Markdown would not render as list items."""
    problems = []
    in_list = fence = False
    prev = ""
    for n, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence:
            prev = line
            continue
        item = ITEM.match(line)
        if item and 0 < len(item["indent"]) < 4 and in_list:
            problems.append(f"line {n}: a nested list indented {len(item['indent'])} spaces")
        elif item and not in_list and prev.strip() and not prev.lstrip().startswith("|"):
            problems.append(f"line {n}: a list right after a paragraph (no blank line)")
        if item:
            in_list = True
        elif line.strip() and not line.startswith(" ") and not prev.strip():
            in_list = False
        prev = line
    return problems


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("- a\n  - b\n", ["line 2: a nested list indented 2 spaces"]),
        ("- a\n    - b\n", []),
        ("Text:\n- a\n", ["line 2: a list right after a paragraph (no blank line)"]),
        ("Text:\n\n- a\n- b\n\nMore.\n", []),
        ("```\nx:\n- a\n  - b\n```\n", []),
    ],
)
def test_the_list_check_sees_lists_that_would_not_render(text: str, found: list[str]) -> None:
    assert list_problems(text) == found


def test_every_list_on_every_page_renders() -> None:
    problems = {
        str(path.relative_to(DOCS)): found
        for path, text in _pages().items()
        if (found := list_problems(text))
    }
    assert problems == {}
