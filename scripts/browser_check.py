#!/usr/bin/env python3
"""Open every page and every SVG figure of the built documentation site in headless Chromium
and check what a reader sees (docs/development.md, "The browser check").

    .venv/bin/python scripts/browser_check.py /tmp/site [--screenshots DIR]

Exit 0 every page and figure passed, 1 a page, a figure or the self-check failed, 2 bad usage
or no browser."""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python scripts/browser_check.py`
    sys.path.insert(0, str(ROOT))

from scripts import picture_checks  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: The window: a laptop's width, where Material shows both sidebars and the narrowest column.
WINDOW = (1280, 1000)
DEFAULT_SHOTS = Path(tempfile.gettempdir()) / f"gemma4-docs-screenshots-{os.getuid()}"

#: What a reader must never see, run in the page: returns a list of problems.
CHECK_JS = r"""
const problems = [];
const article = document.querySelector("article") || document.body;
// The content column: Material's .md-content (its tables' scroll boxes reach its padding).
const column = (document.querySelector(".md-content") || article).getBoundingClientRect();
// 1. Raw Markdown or diagram source in text outside code.
const RAW = [
  [/\n[ \t]*([-*+]|\d+\.)[ \t]+\S/, "a list item that did not become a list"],
  [/\*\*\S[^*]*\*\*/, "bold markers (**)"],
  [/```/, "a code fence"],
  [/(^|\n)[ \t]*#{1,6}[ \t]+\S/, "a heading marker (#)"],
  [/\]\([^)\s]+\)/, "a Markdown link ](...)"],
  [/(^|\n)[ \t]*\|[ \t]*:?-{3,}/, "a table's separator row"],
  [/`[^`\s][^`\n]*`/, "a code span's backticks"],
  [/(^|\n)[ \t]*!!![ \t]+\w/, "an admonition marker (!!!)"],
];
const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const parent = node.parentElement;
  if (!parent || parent.closest("pre, code, kbd, script, style, .highlight, svg")) continue;
  for (const [pattern, what] of RAW) {
    const m = node.textContent.match(pattern);
    if (m) {
      const near = node.textContent.slice(Math.max(0, m.index - 30), m.index + 60);
      problems.push(`raw markdown: ${what}: ${JSON.stringify(near)}`);
      break;
    }
  }
}
for (const el of article.querySelectorAll(".mermaid, pre, code")) {
  if (el.classList.contains("mermaid") ||
      /^\s*(flowchart|graph)\s+(LR|RL|TD|TB|BT)\b|^\s*sequenceDiagram\b/.test(el.textContent)) {
    problems.push(`raw diagram source: ${JSON.stringify(el.textContent.trim().slice(0, 60))}`);
  }
}
// 2. Wide content that is cut off rather than scrollable.
function scroller(el) {
  for (let e = el; e && e !== article.parentElement; e = e.parentElement) {
    const style = getComputedStyle(e);
    if (["auto", "scroll"].includes(style.overflowX) && e.scrollWidth > e.clientWidth) return e;
  }
  return null;
}
for (const el of article.querySelectorAll("table, pre, img, .md-typeset__scrollwrap")) {
  const what = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "");
  const style = getComputedStyle(el);
  if (["hidden", "clip"].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1) {
    problems.push(`clipped: ${what} hides ${el.scrollWidth - el.clientWidth}px`);
    continue;
  }
  const box = scroller(el) || el;
  const rect = box.getBoundingClientRect();
  if (rect.width > 0 && rect.right > column.right + 1) {
    const past = Math.round(rect.right - column.right);
    problems.push(`clipped: ${what} runs ${past}px past the column`);
  }
}
// 3. Images that did not load.
for (const img of document.querySelectorAll("img")) {
  if (!img.complete || img.naturalWidth === 0) {
    problems.push(`image not loaded: ${img.getAttribute("src")}`);
  }
}
return problems;
"""

#: The geometry of an SVG opened on its own, as the reader's browser draws it: every text (its
#: box, font size, and whether it is a tick label), Graphviz's edges, and each matplotlib
#: legend with the data points of its axes. In CSS pixels of the figure at its own size.
FIGURE_JS = r"""
const [FONT_SCALE, SECONDS] = arguments;
const deadline = performance.now() + 1000 * SECONDS;
// Chromium runs a script to its end whatever WebDriver's timeout: it stops itself.
function late() {
  if (performance.now() > deadline) throw new Error(`measuring took over ${SECONDS} s`);
}
const svg = document.documentElement;
function box(el) {
  const r = el.getBoundingClientRect();
  return [r.left, r.top, r.right, r.bottom];
}
// Drawn: not hidden, not transparent, not empty (an invisible label is no fault).
function drawn(el) {
  for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
    const style = getComputedStyle(e);
    if (style.display === "none" || style.visibility === "hidden" ||
        parseFloat(style.opacity) === 0) return false;
  }
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.height > 0;
}
// How many CSS pixels one unit of el's y axis is (rotation included).
function scale(el) {
  const m = el.getScreenCTM();
  return m ? Math.hypot(m.c, m.d) : 0;
}
const texts = [];
function add(el, label, size, at) {
  late();
  if (!label.trim() || !drawn(el)) return;
  // matplotlib: a tick label is the text group inside xtick_N / ytick_N of matplotlib.axis_N.
  const tick = el.closest('g[id^="xtick_"], g[id^="ytick_"]');
  const axis = tick && tick.closest('g[id^="matplotlib.axis_"]');
  texts.push({label: label.trim(), box: at, size: size,
              tick: tick ? tick.id[0] : "", axis: axis ? axis.id : ""});
}
// Text as text: Graphviz, and matplotlib with svg.fonttype none. Its box is the font's whole
// line (ascent to descent); the glyphs' own (canvas's measure of the same string in the same
// font) is what a reader sees touch another label.
const pen = document.createElementNS("http://www.w3.org/1999/xhtml", "canvas").getContext("2d");
function ink(el) {
  const style = getComputedStyle(el);
  pen.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const m = pen.measureText(el.textContent);
  const b = el.getBBox();
  const baseline = b.y + m.fontBoundingBoxAscent;
  const top = baseline - m.actualBoundingBoxAscent, bottom = baseline + m.actualBoundingBoxDescent;
  const ctm = el.getScreenCTM();
  const corners = [[b.x, top], [b.x + b.width, top], [b.x, bottom], [b.x + b.width, bottom]]
    .map(([x, y]) => new DOMPoint(x, y).matrixTransform(ctm));
  const xs = corners.map((p) => p.x), ys = corners.map((p) => p.y);
  return [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
}
for (const el of svg.querySelectorAll("text")) {
  add(el, el.textContent, parseFloat(getComputedStyle(el).fontSize) * scale(el), ink(el));
}
// Text as glyph outlines (matplotlib's default): a group text_N holding a comment with the
// string and a group scaled by size / FONT_SCALE, holding the glyphs.
for (const g of svg.querySelectorAll('g[id^="text_"]')) {
  const glyphs = [...g.children].find((c) => c.tagName === "g");
  if (g.querySelector("text") || !glyphs) continue;
  const note = [...g.childNodes].find((n) => n.nodeType === Node.COMMENT_NODE);
  add(g, note ? note.data : g.id, FONT_SCALE * scale(glyphs), box(g));
}
// Graphviz: an edge is a group of class edge, its title "a->b", its label a text.
const edges = [...svg.querySelectorAll("g.edge")].map((g) => late() || ({
  name: (g.querySelector("title") || g).textContent.trim(),
  labelled: [...g.querySelectorAll("text")].some((t) => t.textContent.trim()),
}));
// A data point: a marker (its centre) or a vertex of a path of a line, collection or patch
// of the axes, strictly inside the axes' background (a vertex on its frame is a spine or a
// reference line's end, one outside is clipped away).
function points(axes) {
  const out = [];
  const frame = [...axes.children].find((c) => c.id.startsWith("patch_"));
  const inside = frame && frame.getBoundingClientRect();
  const keep = (id, x, y) => {
    if (!inside || (x > inside.left + 1 && x < inside.right - 1 &&
                    y > inside.top + 1 && y < inside.bottom - 1)) out.push([id, x, y]);
  };
  for (const artist of axes.children) {
    late();
    if (artist === frame || !/^(line2d|PathCollection|patch)_/.test(artist.id) ||
        !drawn(artist)) continue;
    for (const use of artist.querySelectorAll("use")) {
      const [l, t, r, b] = box(use);
      keep(artist.id, (l + r) / 2, (t + b) / 2);
    }
    for (const path of artist.querySelectorAll("path")) {
      if (path.closest("defs")) continue;
      const m = path.getScreenCTM();
      const n = (path.getAttribute("d") || "").match(/-?[\d.]+(e-?\d+)?/gi) || [];
      for (let i = 0; i + 1 < n.length; i += 2) {
        const p = new DOMPoint(+n[i], +n[i + 1]).matrixTransform(m);
        keep(artist.id, p.x, p.y);
      }
    }
  }
  return out;
}
const legends = [];
for (const legend of svg.querySelectorAll('g[id^="legend_"]')) {
  if (!drawn(legend)) continue;
  const own = legend.closest('g[id^="axes_"]');
  const axes = own ? [own] : [...svg.querySelectorAll('g[id^="axes_"]')];
  legends.push({name: legend.id, box: box(legend), points: axes.flatMap(points)});
}
return {texts: texts, edges: edges, legends: legends};
"""
#: Every SVG a page shows in an <img>, and its width there over its own width.
SHOWN_JS = r"""
return [...document.querySelectorAll("img")]
  // Not one hidden (in a closed tab, say): width 0 is no size a reader reads it at.
  .filter((i) => /\.svg$/.test(new URL(i.currentSrc || i.src).pathname) &&
                 i.naturalWidth > 0 && i.getBoundingClientRect().width > 0)
  .map((i) => [i.currentSrc || i.src, i.getBoundingClientRect().width / i.naturalWidth]);
"""
#: The longest a page or figure may take to load, and a figure to be measured.
LOAD_SECONDS = 20

#: A page with every fault the check must see, and the problems it must report for it.
BAD_PAGE = """<!doctype html><html><head><title>bad</title></head><body><article
style="width:400px">
<p>Serving objects:
- the vLLM Deployment, a nested list that collapsed</p>
<p>left as **bold** source</p>
<p>a `code span` left as text</p>
<pre class="mermaid">flowchart LR
  A --> B</pre>
<div style="overflow:hidden;width:300px"><table style="overflow:hidden;display:block;width:300px">
<tr><td style="white-space:nowrap">a very wide cell that cannot fit in three hundred pixels at all
</td></tr></table></div>
<img src="missing.png" alt="missing">
<script>console.error("an error on the console")</script>
</article></body></html>
"""
BAD_EXPECTED = (
    "a list item that did not become a list",
    "bold markers",
    "a code span's backticks",
    "raw diagram source",
    "clipped: table",
    "image not loaded: missing.png",
    "console:",
)
GOOD_PAGE = """<!doctype html><html><head><title>good</title></head><body><article
style="width:400px"><ul><li>a list<ul><li>nested</li></ul></li></ul>
<p>Plain text with a - dash and 2 * 3.</p>
<div style="overflow-x:auto"><table><tr><td style="white-space:nowrap">a very wide cell that
scrolls inside its own box instead of being cut off</td></tr></table></div>
<pre style="overflow-x:auto"><code>- code may hold **anything** ```</code></pre>
</article></body></html>
"""
#: A graph as Graphviz (dot -Tsvg) writes one: a column of nodes, each edge a group of class
#: edge holding its title, its path and arrowhead, and its label's <text> when it has one.
GRAPH_SVG = """<svg width="68pt" height="204pt" viewBox="0.00 0.00 68.00 204.00"
xmlns="http://www.w3.org/2000/svg"><g id="graph0" class="graph"
transform="scale(1 1) rotate(0) translate(4 200)"><title>g</title>
<polygon fill="white" stroke="transparent" points="-4,4 -4,-200 64,-200 64,4 -4,4"/>
<g id="node1" class="node"><title>a</title>
<ellipse fill="none" stroke="black" cx="27" cy="-178" rx="27" ry="18"/>
<text text-anchor="middle" x="27" y="-174.3" font-family="Times,serif" font-size="14.00">a</text>
</g>
<g id="node2" class="node"><title>b</title>
<ellipse fill="none" stroke="black" cx="27" cy="-91" rx="27" ry="18"/>
<text text-anchor="middle" x="27" y="-87.3" font-family="Times,serif" font-size="14.00">b</text>
</g>
<g id="edge1" class="edge"><title>a&#45;&gt;b</title>
<path fill="none" stroke="black" d="M27,-159.8C27,-148.16 27,-132.55 27,-119.24"/>
<polygon fill="black" stroke="black" points="30.5,-119.18 27,-109.18 23.5,-119.18 30.5,-119.18"/>
<text text-anchor="middle" x="43.5" y="-130.8" font-family="Times,serif"
font-size="14.00">uses</text>
</g>
<g id="node3" class="node"><title>c</title>
<ellipse fill="none" stroke="black" cx="27" cy="-18" rx="27" ry="18"/>
<text text-anchor="middle" x="27" y="-14.3" font-family="Times,serif" font-size="14.00">c</text>
</g>
<g id="edge2" class="edge"><title>b&#45;&gt;c</title>
<path fill="none" stroke="black" d="M27,-72.81C27,-64.79 27,-55.05 27,-46.07"/>
<polygon fill="black" stroke="black" points="30.5,-46.03 27,-36.03 23.5,-46.03 30.5,-46.03"/>
LABEL</g></g></svg>
"""


@dataclass(frozen=True)
class Browser:
    binary: str
    driver: str


def find_browser() -> Browser | None:
    """Chromium (or Chrome) and a chromedriver, or None."""
    binary = next((b for b in map(shutil.which, BROWSERS) if b), None)
    candidates = [shutil.which("chromedriver")]
    if os.environ.get("CHROMEWEBDRIVER"):  # GitHub's runners
        candidates.append(str(Path(os.environ["CHROMEWEBDRIVER"]) / "chromedriver"))
    driver = next((d for d in candidates if d and Path(d).is_file()), None)
    if binary is None or driver is None:
        return None
    return Browser(binary, driver)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium(browser: Browser) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser.binary
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=browser.driver), options=options)
    driver.set_page_load_timeout(LOAD_SECONDS)
    driver.set_script_timeout(LOAD_SECONDS)
    try:
        yield driver
    finally:
        driver.quit()


def check_page(driver: Any, url: str) -> list[str]:
    """Open ``url`` and return what is wrong with it as a reader sees it."""
    from selenium.common.exceptions import TimeoutException

    try:
        driver.get(url)
    except TimeoutException:
        return [f"the page did not load in {LOAD_SECONDS} s"]
    deadline = time.monotonic() + 10
    while driver.execute_script("return document.readyState") != "complete":
        if time.monotonic() > deadline:
            return ["the page did not finish loading in 10 s"]
        time.sleep(0.05)
    problems: list[str] = list(driver.execute_script(CHECK_JS))
    for entry in driver.get_log("browser"):
        if entry.get("level") == "SEVERE":
            problems.append(f"console: {str(entry.get('message', ''))[:200]}")
    return problems


def site_figures(site: Path) -> list[str]:
    """Every SVG of the built site: the figures drawn when it is built and the committed
    images, as paths relative to its root."""
    return sorted(
        str(p.relative_to(site))
        for folder in ("figures", "img")
        for p in (site / folder).rglob("*.svg")
    )


def shown_figures(driver: Any, base: str) -> list[tuple[str, float]]:
    """The SVGs of the site the open page shows, each with its width there over its own."""
    return [
        (src.removeprefix(base), scale)
        for src, scale in driver.execute_script(SHOWN_JS)
        if src.startswith(base)
    ]


def measure(driver: Any, site: Path, base: str, figure: str) -> picture_checks.Picture | str:
    """The geometry of one figure opened on its own, or why it was not measured."""
    from selenium.common.exceptions import TimeoutException, WebDriverException

    path = site / figure
    size = path.stat().st_size
    small = size <= picture_checks.MAX_BYTES
    elements = len(re.findall(rb"<[A-Za-z]", path.read_bytes())) if small else 0
    refused = picture_checks.too_large(size, elements)
    if refused:
        return refused
    try:
        driver.get(base + figure)
        data = driver.execute_script(FIGURE_JS, picture_checks.FONT_SCALE, LOAD_SECONDS)
    except TimeoutException:
        return f"not measured in {LOAD_SECONDS} s"
    except WebDriverException as error:  # the figure broke the measuring script
        return f"not measured: {str(error.msg).splitlines()[0]}"
    return picture_checks.read_picture(data)


def check_figures(
    driver: Any, site: Path, base: str, shown: dict[str, list[tuple[str, float]]]
) -> dict[str, list[str]]:
    """What is wrong with each figure of the site: on its own, and where ``shown`` (figure:
    [(page, scale)]) shows it."""
    found: dict[str, list[str]] = {}
    figures = site_figures(site)
    for figure in sorted(set(shown) - set(figures)):  # shown, but not where figures are kept
        found[figure] = ["shown by a page but not under figures/ or img/: not checked"]
    for figure in figures:
        picture = measure(driver, site, base, figure)
        if isinstance(picture, str):
            found[figure] = [picture]
            continue
        found[figure] = picture_checks.problems(picture) + [
            problem
            for page, scale in shown.get(figure, [])
            for problem in picture_checks.small_texts(picture.texts, scale, page)
        ]
    return found


def plant_figures(folder: Path) -> dict[str, str]:
    """Write into ``folder`` a figure for each fault the figure check must see, and clean ones;
    returns each figure's path with the problem it must report ("" for a clean one)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (folder / "figures").mkdir()
    planted = {}

    def save(fig: Any, name: str, problem: str) -> None:
        fig.savefig(folder / "figures" / name, format="svg")
        plt.close(fig)
        planted[f"figures/{name}"] = problem

    for fonttype in ("path", "none"):  # matplotlib's glyph outlines, and text as text
        with plt.rc_context({"svg.fonttype": fonttype}):
            fig = plt.figure(figsize=(3, 1))
            fig.text(0.1, 0.5, "a label printed")
            fig.text(0.3, 0.5, "over another")
            save(fig, f"overlap-{fonttype}.svg", "overlapping text: 'a label printed'")
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xticks(range(6), [f"a long tick label {i}" for i in range(6)])
    save(fig, "ticks.svg", "tick labels collide on the x axis")
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(range(9), [1, 2, 3, 4, 5, 4, 3, 2, 1], "o", label="points under the legend")
    ax.legend(loc="center")
    save(fig, "legend.svg", "legend covers data: legend_1")
    fig = plt.figure(figsize=(3, 1))
    fig.text(0.1, 0.5, "small print", fontsize=4)
    save(fig, "small.svg", "text too small on /pictures.html: 1 of 1 texts")
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 3, 4], [1, 4, 9, 16], "o-", label="rising")
    ax.set(title="A clean chart", xlabel="x label", ylabel="y label")
    ax.legend(loc="upper left")
    save(fig, "clean.svg", "")
    label = (
        '<text text-anchor="middle" x="43.5" y="-57.8" font-family="Times,serif"'
        ' font-size="14.00">reads</text>'
    )
    for name, edge, problem in (
        ("edge.svg", "", "edge without a label: b->c"),
        ("graph.svg", label, ""),
    ):
        (folder / "figures" / name).write_text(GRAPH_SVG.replace("LABEL", edge), encoding="utf-8")
        planted[f"figures/{name}"] = problem
    images = "".join(f'<img src="{figure}"><br>' for figure in planted)
    (folder / "pictures.html").write_text(f"<!doctype html><body>{images}</body>", encoding="utf-8")
    return planted


def self_check(driver: Any) -> list[str]:
    """What the check fails to see on a page with every fault and on a figure with each, or
    wrongly sees on a clean page or figure."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bad.html").write_text(BAD_PAGE, encoding="utf-8")
        (Path(tmp) / "good.html").write_text(GOOD_PAGE, encoding="utf-8")
        planted = plant_figures(Path(tmp))
        with serve(Path(tmp)) as base:
            found = check_page(driver, base + "bad.html")
            for expected in BAD_EXPECTED:
                if not any(expected in p for p in found):
                    failures.append(f"self-check: a page with a fault ({expected}) passed: {found}")
            clean = check_page(driver, base + "good.html")
            failures += [f"self-check: a clean page reported: {p}" for p in clean]
            driver.get(base + "pictures.html")
            shown: dict[str, list[tuple[str, float]]] = {}
            for figure, scale in shown_figures(driver, base):
                shown.setdefault(figure, []).append(("pictures.html", scale))
            seen = check_figures(driver, Path(tmp), base, shown)
            for figure, problem in planted.items():
                if problem and not any(problem in p for p in seen[figure]):
                    failures.append(
                        f"self-check: a figure with a fault ({problem}) passed: {seen[figure]}"
                    )
                if not problem:
                    failures += [f"self-check: a clean figure reported: {p}" for p in seen[figure]]
    return failures


def site_pages(site: Path) -> list[str]:
    """Every page of the built site, as paths relative to its root ('' is the front page)."""
    pages = sorted(
        str(p.parent.relative_to(site)) + "/" for p in site.rglob("index.html") if p.is_file()
    )
    return ["" if p == "./" else p for p in pages]


def section_pages() -> dict[str, str]:
    """The front page and the first page of each navigation section (for screenshots)."""
    import yaml

    def first(item: Any) -> str:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        return first(value[0]) if isinstance(value, list) else str(value)

    shots = {}
    for item in yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]:
        page = first(item).removesuffix(".md")
        shots[next(iter(item))] = "" if page == "index" else page + "/"
    return shots


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/browser_check.py", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("site", type=Path, help="the built site (mkdocs build --site-dir)")
    parser.add_argument(
        "--screenshots", type=Path, default=DEFAULT_SHOTS, help=f"default {DEFAULT_SHOTS}"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"browser check: {args.site} holds no built site (index.html)", file=sys.stderr)
        return 2
    browser = find_browser()
    if browser is None:
        print(
            "browser check: NOT RUN: no Chromium and chromedriver on PATH (Debian: apt-get install"
            " chromium chromium-driver; scripts/setup does it when run as root)",
            file=sys.stderr,
        )
        return 2
    begun = time.monotonic()
    shutil.rmtree(args.screenshots, ignore_errors=True)
    args.screenshots.mkdir(parents=True)
    pages = site_pages(args.site)
    shots = {page: title for title, page in section_pages().items()}
    failed = 0
    with chromium(browser) as driver:
        failures = self_check(driver)
        for failure in failures:
            print(failure)
        with serve(args.site) as base:
            shown: dict[str, list[tuple[str, float]]] = {}
            for page in pages:
                problems = check_page(driver, base + page)
                for figure, scale in shown_figures(driver, base):
                    shown.setdefault(figure, []).append((page, scale))
                if page in shots:
                    name = shots[page].lower().replace(" ", "-") + ".png"
                    driver.save_screenshot(str(args.screenshots / name))
                if problems:
                    failed += 1
                    print(f"/{page}:")
                    for problem in problems:
                        print(f"  {problem}")
            figures = check_figures(driver, args.site, base, shown)
    bad_figures = sum(bool(problems) for problems in figures.values())
    for figure, problems in figures.items():
        for problem in problems:
            print(f"{figure}: {problem}")
    elapsed = time.monotonic() - begun
    print(
        f"browser check: {len(pages)} pages, {failed} with problems, {len(figures)} figures,"
        f" {bad_figures} with problems"
        + (f", self-check FAILED ({len(failures)})" if failures else ", self-check passed")
        + f", {elapsed:.0f} s; screenshots in {args.screenshots}"
    )
    return 1 if failed or bad_figures or failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
