"""The benchmark page's charts, drawn by the benchmark's own chart code from a recorded run.

The run in ``data/paced-run/`` (``run.json`` and ``cells.jsonl``, nothing else) was recorded
on 127.0.0.1 against the repository's paced fake server in step-model mode, not against vLLM
and not on a GPU; its label says so, and so does every chart's title:

    .venv/bin/python -m bench.fidelity.pacedserver --step-model '{}' --output-tokens 64
    .venv/bin/gemma4 bench run --url http://127.0.0.1:PORT --model synthetic \\
      --concurrency 1,4,16 --prompt-tokens 128,1024 --output-tokens 64 --no-tokenize \\
      --num-requests 16 --label "paced fake server (not a GPU)" --out RUN

The charts are the ones ``gemma4 bench run`` writes into ``RUN/charts/``, through the same
functions (:mod:`bench.reports.charts`, :mod:`bench.reports.latency_charts`), drawn as SVG
(the file name's suffix chooses the format) rather than PNG: the browser check measures an
SVG's every label (docs/development.md, "The browser check"), a PNG's none.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

RUN = Path(__file__).resolve().parent / "data" / "paced-run"
#: The charts shown on the benchmark page: (file written, chart file name prefix in the run).
SHOWN = {
    "bench-latency-p95-ttft.svg": "latency-p95_ttft_ms-",
    "bench-output-throughput.svg": "lines-output_throughput-",
    "bench-heatmap-p95-ttft.svg": "heatmap-p95_ttft_ms-",
}


def write(out: Path) -> list[Path]:
    """Draw the shown charts of the recorded run into ``out``; returns the files written."""
    from bench.reports.charts import plan_charts, render_chart
    from bench.reports.latency_charts import latency_plans, render_latency, slo_ttft_ms
    from bench.results.store import load_run

    run = load_run(RUN)
    name = str(run.run.get("label") or "")
    charts: dict[str, tuple[Callable[[Any, Path], object], Any]] = {
        p.filename: (render_chart, p) for p in plan_charts(run.cells, label=name)
    }
    for p in latency_plans([(name, run.cells)], slo_ms=slo_ttft_ms(run.run)):
        charts[p.filename] = (render_latency, p)
    for target, prefix in SHOWN.items():
        found = next((c for f, c in charts.items() if f.startswith(prefix)), None)
        if found is None:
            raise RuntimeError(f"the recorded run in {RUN} has no chart {prefix}*")
        render, chart = found
        render(chart, out / target)
    return [out / target for target in SHOWN]
