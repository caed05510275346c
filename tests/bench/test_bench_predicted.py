"""`gemma4 bench compare --predict STACK`: the model over each run, far-off cells flagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.cli import main
from bench.reports.predicted import FAR_OFF_FLOOR, Overlay, overlay
from bench.results.store import RunStore, load_run
from serving.capacity.perf import StepModel, Workload
from serving.capacity.perf_stack import model_for_settings
from serving.capacity.plan import load_stack_settings

LEVELS = (1, 2, 4, 6)


def _slowdown(model: StepModel) -> float:
    """How much slower a throttled cell's steps are: twice the factor the flag allows
    (1 + the threshold either way, so a band of 100 % or more still flags a slow cell)."""
    return 2.0 * (1.0 + max(model.band, FAR_OFF_FLOOR))


def _cells(model: StepModel, slow: str | None = None) -> list[dict[str, Any]]:
    """Cells whose figures are the model's own (``slow``: that cell's steps take
    :func:`_slowdown` times as long, as a throttled GPU's would)."""
    out = []
    for c in LEVELS:
        p = model.at_concurrency(c, Workload(512, 128))
        key = f"c{c}-p512-o128"
        factor = _slowdown(model) if key == slow else 1.0
        out.append(
            {
                "id": key,
                "status": "ok",
                "concurrency": c,
                "prompt_tokens": 512,
                "output_tokens": 128,
                "request_rate": None,
                "completed": 4 * c,
                "total_input_tokens": 4 * c * 512,
                "mean_output_tokens": 128.0,
                "client_mean_itl_ms": p.step_s * 1000 * factor,
                "server_mean_ttft_ms": p.engine_ttft_s * 1000,
                "server_mean_e2el_ms": p.engine_e2e_s * 1000,
                "mean_e2el_ms": p.engine_e2e_s * 1000,
                "mean_in_flight": float(c),
                "request_throughput": p.requests_per_s,
            }
        )
    return out


def _run(path: Path, label: str, cells: list[dict[str, Any]]) -> Path:
    grid = {
        "concurrency": list(LEVELS),
        "prompt_tokens": [512],
        "output_tokens": [128],
        "request_rates": [None],
    }
    meta = {"model": "m", "url": "http://x", "label": label, "hardware": "l4", "grid": grid}
    store = RunStore.open(path, meta, resume=False)
    for record in cells:
        store.append_cell(record)
    store.close()
    return path


def _overlay(path: Path, model: StepModel) -> Overlay:
    return overlay(load_run(path), model, "l4", load_stack_settings("l4"))


@pytest.fixture
def model() -> StepModel:
    return model_for_settings(load_stack_settings("l4"))[0]


def test_a_run_the_model_explains_has_no_flag(tmp_path: Path, model: StepModel) -> None:
    item = _overlay(_run(tmp_path / "a", "a", _cells(model)), model)
    assert len(item.rows) == len(LEVELS) and item.flagged == []
    for row in item.rows:
        assert row["error"]["itl"] == pytest.approx(0.0, abs=1e-9)
    assert item.threshold == max(model.band, 0.2)  # uncalibrated: the model's own band


def test_a_cell_far_off_the_prediction_is_flagged(tmp_path: Path, model: StepModel) -> None:
    item = _overlay(_run(tmp_path / "a", "a", _cells(model, slow="c4-p512-o128")), model)
    assert item.flagged == ["c4-p512-o128"]
    (row,) = [r for r in item.rows if r["far_off"]]
    # Predicted 1 / factor of the measured.
    assert row["error"]["itl"] == pytest.approx(1 / _slowdown(model) - 1)


def test_a_cell_just_within_the_factor_is_not_flagged(tmp_path: Path, model: StepModel) -> None:
    """Slower than predicted by a little less than 1 + the threshold: within the band."""
    cells = _cells(model)
    factor = 0.95 * (1.0 + max(model.band, FAR_OFF_FLOOR))
    cells[2]["client_mean_itl_ms"] *= factor
    item = _overlay(_run(tmp_path / "a", "a", cells), model)
    assert item.flagged == []


def test_compare_overlays_the_prediction(
    tmp_path: Path, model: StepModel, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "a", "a", _cells(model))
    b = _run(tmp_path / "b", "b", _cells(model, slow="c2-p512-o128"))
    out = tmp_path / "out"
    assert main(["compare", str(a), str(b), "--predict", "l4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "## Predicted vs measured: b" in text
    (flag_line,) = [ln for ln in text.splitlines() if "**!**" in ln and ln.startswith("| c")]
    assert flag_line.startswith("| c2-p512-o128 |")
    assert "## Predicted vs measured" in (out / "compare.md").read_text()
    charts = sorted(p.name for p in (out / "charts").glob("predicted-*.png"))
    assert charts == ["predicted-a-p512-o128.png", "predicted-b-p512-o128.png"]
    assert main(["compare", str(a), str(b), "--predict", "l4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [o["far_off"] for o in data["predicted"]] == [[], ["c2-p512-o128"]]


def test_compare_refuses_an_unknown_stack(
    tmp_path: Path, model: StepModel, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "a", "a", _cells(model))
    assert main(["compare", str(a), str(a), "--predict", "nostack"]) == 2
    assert "--predict: unknown stack 'nostack': no Pulumi.nostack.yaml in " in (
        capsys.readouterr().err
    )


def test_predict_reads_the_stack_of_the_project_it_runs_in(
    tmp_path: Path,
    model: StepModel,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As `pulumi -s`: the Pulumi project of the current directory, not the installed one."""
    a = _run(tmp_path / "a", "a", _cells(model))
    project = tmp_path / "elsewhere"
    (project / "sub").mkdir(parents=True)
    root = Path(__file__).resolve().parents[2]
    (project / "Pulumi.yaml").write_text((root / "Pulumi.yaml").read_text())
    (project / "Pulumi.mine.yaml").write_text((root / "Pulumi.l4.yaml").read_text())
    monkeypatch.chdir(project / "sub")
    assert main(["compare", str(a), "--predict", "mine"]) == 0
    said = f"gemma4 bench compare: reading {(project / 'Pulumi.mine.yaml').resolve()}\n"
    assert capsys.readouterr().err == said
    assert main(["compare", str(a), "--predict", "l4"]) == 2  # not in this project


def test_one_run_with_predict_shows_the_overlay_alone(
    tmp_path: Path, model: StepModel, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "a", "a", _cells(model, slow="c6-p512-o128"))
    assert main(["compare", str(a), "--predict", "l4", "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert text.startswith("## Predicted vs measured: a")
    assert (tmp_path / "o" / "predicted.md").read_text().startswith("## Predicted vs measured")
    assert main(["compare", str(a)]) == 2  # without --predict one run is not a comparison
