"""Regenerate the generated parts of the performance and cost pages and their pictures: the
stack table (docs/performance-model.md, docs/deploy/cost.md), the evidence
(docs/performance-evidence.md), the cold start tables (docs/cold-start.md,
docs/cold-start-evidence.md) and docs/img/perf/*.svg.

    .venv/bin/python scripts/perf_docs.py           # rewrite the blocks and docs/img/perf/*.svg
    .venv/bin/python scripts/perf_docs.py --check   # exit 1 when a page or a picture is stale

The check compares token by token, every number within a tolerance (:func:`differences`):
CPUs and math libraries differ in the last bits (an AVX2-only AMD prints 258.938438 where an
AVX-512 one prints 258.938437), so a coordinate may differ by :data:`SVG_TOLERANCE_PT` and a
number by one unit of its last digit."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serving.capacity import coldstart, stack_table, start_budget  # noqa: E402
from serving.capacity.perf_checks import BEGIN, END, render_markdown  # noqa: E402

GUIDE = ROOT / "docs" / "performance-model.md"
EVIDENCE = ROOT / "docs" / "performance-evidence.md"
COST = ROOT / "docs" / "deploy" / "cost.md"
COLD_START = ROOT / "docs" / "cold-start.md"
COLD_START_EVIDENCE = ROOT / "docs" / "cold-start-evidence.md"
IMAGES = ROOT / "docs" / "img" / "perf"
VALIDATION_BEGIN = (
    "<!-- BEGIN GENERATED VALIDATION by scripts/perf_docs.py: do not edit by hand -->"
)
VALIDATION_END = "<!-- END GENERATED VALIDATION -->"


#: How far a coordinate of a committed picture may be from the regenerated one: a thousandth of
#: a point, far below what a screen shows; machines differ by a millionth.
SVG_TOLERANCE_PT = 1e-3
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
#: Matplotlib names clip paths and glyphs by a hash of their text, floats included.
_SVG_ID = re.compile(r'(?<=id=")[^"]+|(?<=url\(#)[^)]+|(?<=xlink:href="#)[^"]+')


def _skeleton(text: str) -> tuple[str, list[str]]:
    """``text`` with every number replaced by ``#``, and the numbers."""
    return _NUMBER.sub("#", text), _NUMBER.findall(text)


def _unit(number: str) -> float:
    """One unit of the last digit printed: 1 for ``26``, 0.001 for ``0.187``."""
    mantissa, _, exponent = number.lower().partition("e")
    places = len(mantissa.partition(".")[2])
    return 10.0 ** (-places + (int(exponent) if exponent else 0))


def _named_in_order(text: str) -> str:
    """An SVG with its ids and references renamed in order of first appearance."""
    names: dict[str, str] = {}
    return _SVG_ID.sub(lambda m: names.setdefault(m.group(0), f"id{len(names)}"), text)


def differences(new: str, old: str, *, tolerance: float | None = None) -> list[str]:
    """How ``old`` differs from ``new`` beyond the numbers' tolerance: every number within
    ``tolerance`` (absolute), or, without one, within one unit of the last digit printed in
    either; everything else the same. Empty when they agree."""
    new_skeleton, new_numbers = _skeleton(new)
    old_skeleton, old_numbers = _skeleton(old)
    if new_skeleton != old_skeleton:
        for n, (a, b) in enumerate(
            zip(new_skeleton.splitlines(), old_skeleton.splitlines(), strict=False)
        ):
            if a != b:
                return [f"line {n + 1}: {b[:120]!r} is now {a[:120]!r}"]
        return ["a different number of lines"]
    found = []
    for a, b in zip(new_numbers, old_numbers, strict=True):
        if a == b:
            continue  # the same digits: nothing to weigh (a hash's "21e756" is no number)
        allowed = tolerance if tolerance is not None else max(_unit(a), _unit(b))
        if abs(float(a) - float(b)) > allowed * (1 + 1e-9):
            found.append(f"{b} is now {a}")
    return found[:5]


def same_figure(new: str, old: str) -> bool:
    return not differences(_named_in_order(new), _named_in_order(old), tolerance=SVG_TOLERANCE_PT)


def _replace(page: Path, text: str, begin: str, end: str, block: str) -> str:
    """``text`` of ``page`` with everything from ``begin`` to ``end`` (both included) replaced
    by ``block`` (which carries the markers again)."""
    if begin not in text or end not in text:
        raise SystemExit(f"{page}: no generated block ({begin} ... {end})")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + block + tail


def draw(folder: Path) -> list[tuple[str, str]]:
    """Every shipped stack's latency/throughput figure and the cost figure into ``folder``;
    (caption, path relative to the page) for each."""
    from serving.capacity.perf_plot import plot_cost, plot_stack, plot_throughput
    from serving.capacity.plan import load_stack_settings, stack_names
    from serving.capacity.plan_perf import workload_for
    from serving.capacity.simulate import Traffic

    folder.mkdir(parents=True, exist_ok=True)
    stacks = {name: load_stack_settings(name, ROOT) for name in stack_names(ROOT)}
    out = []
    for name, settings in stacks.items():
        w = workload_for(settings, None, None)
        traffic = Traffic(1.0, w.prompt_tokens, w.output_tokens)
        plot_stack(folder / f"{name}.svg", name, settings, traffic, throughput=False)
        out.append(
            (
                f"{name}: simulated p50, p95 and p99 TTFT and end-to-end latency at the "
                f"client against requests/s offered to one instance, {w.prompt_tokens} prompt "
                f"+ {w.output_tokens} output tokens, with the stack's p95 SLOs",
                f"img/perf/{name}.svg",
            )
        )
    plot_cost(folder / "cost.svg", stacks)
    plot_throughput(folder / "throughput.svg", stacks)
    out.append(
        (
            "Every stack: predicted output tokens/s per chip and million output tokens per USD "
            "against output tokens/s per user (1 / ITL), a point per concurrency, the model's "
            "error band shaded",
            "img/perf/throughput.svg",
        )
    )
    out.append(
        (
            "Cost per million requests against load, one instance of every stack; a stack at an "
            "unknown price named in the legend, not drawn",
            "img/perf/cost.svg",
        )
    )
    return out


def updated(figures: list[tuple[str, str]]) -> dict[Path, tuple[str, str]]:
    """Every page with generated blocks: (its text, its text with fresh blocks)."""
    from serving.capacity.perf_validation import render_markdown as render_validation

    stacks = stack_table.plans(ROOT)
    validation = VALIDATION_BEGIN + "\n" + render_validation(figures) + "\n" + VALIDATION_END
    blocks = {
        GUIDE: [(stack_table.BEGIN, stack_table.END, stack_table.render_markdown(stacks))],
        COST: [
            (
                stack_table.BEGIN,
                stack_table.END,
                stack_table.render_markdown(stacks, stack_table.COST_ROWS),
            )
        ],
        EVIDENCE: [
            (BEGIN, END, render_markdown()),
            (VALIDATION_BEGIN, VALIDATION_END, validation),
        ],
        COLD_START: [
            (
                coldstart.BEGIN,
                coldstart.END,
                coldstart.render_markdown({name: s for name, (s, _) in stacks.items()}),
            ),
            (
                coldstart.SAVINGS_BEGIN,
                coldstart.SAVINGS_END,
                coldstart.render_savings({name: s for name, (s, _) in stacks.items()}),
            ),
            (
                start_budget.BEGIN,
                start_budget.END,
                start_budget.render_markdown({name: s for name, (s, _) in stacks.items()}),
            ),
        ],
        COLD_START_EVIDENCE: [
            (coldstart.FIGURES_BEGIN, coldstart.FIGURES_END, coldstart.render_figures()),
        ],
    }
    out = {}
    for page, fresh in blocks.items():
        text = new = page.read_text(encoding="utf-8")
        for begin, end, block in fresh:
            new = _replace(page, new, begin, end, block)
        out[page] = text, new
    return out


def main(argv: list[str]) -> int:
    if "--check" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            figures = draw(Path(tmp))
            stale = [
                str(IMAGES / f.name)
                for f in sorted(Path(tmp).iterdir())
                if not (IMAGES / f.name).is_file()
                or not same_figure(f.read_text(), (IMAGES / f.name).read_text())
            ]
        pages = [
            f"{page} ({'; '.join(found)})"
            for page, (text, new) in updated(figures).items()
            if (found := differences(new, text))
        ]
        stale = pages + stale
        if stale:
            print(
                f"stale: {', '.join(stale)}: run .venv/bin/python scripts/perf_docs.py",
                file=sys.stderr,
            )
            return 1
        return 0
    for page, (_, new) in updated(draw(IMAGES)).items():
        page.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
