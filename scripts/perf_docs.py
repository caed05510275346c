"""Regenerate the generated parts of docs/performance-model.md and its pictures.

    .venv/bin/python scripts/perf_docs.py           # rewrite the blocks and docs/img/perf/*.svg
    .venv/bin/python scripts/perf_docs.py --check   # exit 1 when the page or a picture is stale

The page's first block comes from serving/capacity/perf_checks.py, the second (evidence, validation
against published figures, targets) from serving/capacity/perf_validation.py; the pictures (latency
against throughput for every shipped stack, cost per million requests against load) from
serving/capacity/perf_plot.py. No network: everything comes from the model, the catalogues and the
evidence file. tests/test_perf_docs.py runs the check, so the page cannot drift from the model.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serving.capacity.perf_checks import BEGIN, END, render_markdown  # noqa: E402

PAGE = ROOT / "docs" / "performance-model.md"
IMAGES = ROOT / "docs" / "img" / "perf"
VALIDATION_BEGIN = (
    "<!-- BEGIN GENERATED VALIDATION by scripts/perf_docs.py: do not edit by hand -->"
)
VALIDATION_END = "<!-- END GENERATED VALIDATION -->"


def _replace(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with everything from ``begin`` to ``end`` (both included) replaced by
    ``block`` (which carries the markers again)."""
    if begin not in text or end not in text:
        raise SystemExit(f"{PAGE}: no generated block ({begin} ... {end})")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + block + tail


def draw(folder: Path) -> list[tuple[str, str]]:
    """Every shipped stack's latency/throughput figure and the cost figure into ``folder``;
    (caption, path relative to the page) for each."""
    from serving.capacity.perf_plot import plot_cost, plot_stack
    from serving.capacity.plan import load_stack_settings, stack_names
    from serving.capacity.plan_perf import workload_for

    folder.mkdir(parents=True, exist_ok=True)
    stacks = {name: load_stack_settings(name, ROOT) for name in stack_names(ROOT)}
    out = []
    for name, settings in stacks.items():
        w = workload_for(settings, None, None)
        plot_stack(folder / f"{name}.svg", name, settings, w)
        out.append(
            (
                f"{name}: mean end-to-end latency at the client against requests/s, "
                f"{w.prompt_tokens} prompt + {w.output_tokens} output tokens",
                f"img/perf/{name}.svg",
            )
        )
    plot_cost(folder / "cost.svg", stacks)
    out.append(("Cost per million requests against load, every stack", "img/perf/cost.svg"))
    return out


def updated(text: str, figures: list[tuple[str, str]]) -> str:
    """``text`` with both generated blocks replaced by fresh ones."""
    from serving.capacity.perf_validation import render_markdown as render_validation

    text = _replace(text, BEGIN, END, render_markdown())
    body = VALIDATION_BEGIN + "\n" + render_validation(figures) + "\n" + VALIDATION_END
    return _replace(text, VALIDATION_BEGIN, VALIDATION_END, body)


def main(argv: list[str]) -> int:
    text = PAGE.read_text(encoding="utf-8")
    if "--check" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            figures = draw(Path(tmp))
            stale = [
                str(IMAGES / f.name)
                for f in sorted(Path(tmp).iterdir())
                if not (IMAGES / f.name).is_file()
                or (IMAGES / f.name).read_bytes() != f.read_bytes()
            ]
        if updated(text, figures) != text:
            stale.insert(0, str(PAGE))
        if stale:
            print(
                f"stale: {', '.join(stale)}: run .venv/bin/python scripts/perf_docs.py",
                file=sys.stderr,
            )
            return 1
        return 0
    figures = draw(IMAGES)
    PAGE.write_text(updated(text, figures), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
