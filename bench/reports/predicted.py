"""Predicted against measured: the performance model's figures beside a run's, cell by cell.

``gemma4 bench compare RUN... --predict STACK``: for each measured closed-loop cell, read as the
calibration reads it (:func:`serving.capacity.calibration.observations`), the model's
prediction, the relative error and a flag on figures off by more than the model's band either
way; the pictures are `gemma4 plan --plot`'s with the run's cells as markers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.results.store import RunData
from serving.capacity.calibration import measured, observations, predict
from serving.capacity.perf import StepModel, Workload
from serving.capacity.simulate import Traffic

__all__ = ["FAR_OFF_FLOOR", "Overlay", "overlay"]

#: A calibrated model's band can be small; a cell is flagged only beyond at least this much.
FAR_OFF_FLOOR = 0.2
_FIGURES = (
    ("ttft", "TTFT ms", 1000.0),
    ("itl", "ITL ms/step", 1000.0),
    ("e2e", "E2E ms", 1000.0),
    ("tokens_per_s", "output tok/s", 1.0),
)


@dataclass(frozen=True)
class Overlay:
    run: str
    basis: str
    threshold: float
    rows: list[dict[str, Any]]
    #: The stack predicted (its name and ``serving.config.settings.Settings``, which this room
    #: does not import: docs/architecture.md) and the run's measured cells, for the pictures.
    stack: str
    settings: Any
    cells: list[dict[str, Any]]

    @property
    def flagged(self) -> list[str]:
        return [r["id"] for r in self.rows if r["far_off"]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "basis": self.basis,
            "threshold": self.threshold,
            "measured_vs_predicted": self.rows,
            "far_off": self.flagged,
        }

    def markdown(self) -> str:
        lines = [
            f"## Predicted vs measured: {self.run}",
            "",
            f"Model: {self.basis}. Predicted figures are the model's, never measurements; "
            f"**!** marks a figure off by more than a factor of {1 + self.threshold:.2f} "
            "either way.",
            "",
            "| cell | " + " | ".join(f"{t} (meas. / pred.)" for _, t, _ in _FIGURES) + " |",
            "|---|" + "---:|" * len(_FIGURES),
        ]
        for r in self.rows:
            texts = []
            for key, _, scale in _FIGURES:
                m, p, e = r["measured"][key], r["predicted"][key], r["error"][key]
                if m is None:
                    texts.append(f"- / {p * scale:,.1f}")
                    continue
                mark = " **!**" if _far_off(p, m, self.threshold) else ""
                texts.append(f"{m * scale:,.1f} / {p * scale:,.1f} ({e:+.0%}){mark}")
            lines.append(f"| {r['id']} | " + " | ".join(texts) + " |")
        if not self.rows:
            lines.append("| (no measured closed-loop cell with a step time) |" + " |" * 4)
        lines.append("")
        return "\n".join(lines)

    def write_charts(self, folder: Path) -> list[Path]:
        """`gemma4 plan --plot`'s pictures of the stack (:func:`serving.capacity.perf_plot.
        plot_stack`) with the run's measured cells on them, one per request shape it ran,
        into ``folder`` (made if missing); returns the files written."""
        from serving.capacity.perf_plot import measured_points, plot_stack

        folder.mkdir(parents=True, exist_ok=True)
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in self.run)[:60]
        shapes = sorted({(int(c["prompt_tokens"]), int(c["output_tokens"])) for c in self.cells})
        written = []
        for prompt, output in shapes:
            path = folder / f"predicted-{safe}-p{prompt}-o{output}.png"
            plot_stack(
                path, self.stack, self.settings, Traffic(1.0, prompt, output),
                measured=measured_points(self.cells, Workload(prompt, output)), flag="--out",
            )  # fmt: skip
            written.append(path)
        return written


def _far_off(predicted: float | None, measured: float | None, threshold: float) -> bool:
    """Whether one figure is off by more than a factor ``1 + threshold`` either way (a measured
    figure slower than the prediction is judged as one faster: with a band of 100 % or more, a
    relative error on the slow side, never below -100 %, could flag nothing)."""
    if not predicted or not measured or predicted <= 0 or measured <= 0:
        return False
    ratio = predicted / measured
    return ratio > 1.0 + threshold or 1.0 / ratio > 1.0 + threshold


def overlay(run: RunData, model: StepModel, stack: str, settings: Any) -> Overlay:
    """The model's prediction (``model``: ``stack``'s, of ``settings``) for each measured
    closed-loop cell of ``run`` beside it."""
    threshold = max(model.band, FAR_OFF_FLOOR)
    rows = []
    # Every measured cell is shown beside the prediction, however few its requests.
    for o in observations(run.cells, model.max_num_seqs, min_requests=1):
        p = predict(model, o)
        m = measured(o)
        error = {k: ((p[k] - v) / v if v else None) for k, v in m.items()}
        rows.append(
            {
                "id": o.cell,
                "concurrency": o.concurrency,
                "prompt_tokens": round(o.prompt_tokens),
                "output_tokens": round(o.output_tokens),
                "measured": m,
                "predicted": p,
                "error": error,
                "far_off": any(_far_off(p[k], v, threshold) for k, v in m.items()),
            }
        )
    cells = [c for c in run.cells if c.get("status") == "ok"]
    return Overlay(run.label, model.basis, threshold, rows, stack, settings, cells)
