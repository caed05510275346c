#!/usr/bin/env python3
"""Open every page of the built documentation site in headless Chromium and check what a
reader sees (docs/development.md, "The browser check").

    .venv/bin/python scripts/browser_check.py /tmp/site [--screenshots DIR]

Exit 0 every page passed, 1 a page or the self-check failed, 2 bad usage or no browser."""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
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
    try:
        yield driver
    finally:
        driver.quit()


def check_page(driver: Any, url: str) -> list[str]:
    """Open ``url`` and return what is wrong with it as a reader sees it."""
    driver.get(url)
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


def self_check(driver: Any) -> list[str]:
    """What the check fails to see on a page with every fault, or wrongly sees on a clean one."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bad.html").write_text(BAD_PAGE, encoding="utf-8")
        (Path(tmp) / "good.html").write_text(GOOD_PAGE, encoding="utf-8")
        with serve(Path(tmp)) as base:
            found = check_page(driver, base + "bad.html")
            for expected in BAD_EXPECTED:
                if not any(expected in p for p in found):
                    failures.append(f"self-check: a page with a fault ({expected}) passed: {found}")
            clean = check_page(driver, base + "good.html")
            failures += [f"self-check: a clean page reported: {p}" for p in clean]
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
            for page in pages:
                problems = check_page(driver, base + page)
                if page in shots:
                    name = shots[page].lower().replace(" ", "-") + ".png"
                    driver.save_screenshot(str(args.screenshots / name))
                if problems:
                    failed += 1
                    print(f"/{page}:")
                    for problem in problems:
                        print(f"  {problem}")
    elapsed = time.monotonic() - begun
    print(
        f"browser check: {len(pages)} pages, {failed} with problems"
        + (f", self-check FAILED ({len(failures)})" if failures else ", self-check passed")
        + f", {elapsed:.0f} s; screenshots in {args.screenshots}"
    )
    return 1 if failed or failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
