"""The SLO gate: thresholds from the stack file, per-cell checks, exit statuses for CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench import evaluate, load_run, slo_for_stack, stack_config
from bench.cli import main
from serving.config.groups import SloSettings
from tests.bench._cells import cell, write_run

ROOT = Path(__file__).resolve().parents[2]


def _stack(tmp_path: Path, name: str, **slo: Any) -> Path:
    """A copy of the l4 stack file with extra SLO keys."""
    data = yaml.safe_load((ROOT / "Pulumi.l4.yaml").read_text())
    for key, value in slo.items():
        data["config"][f"gemma4-vllm:{key}"] = value
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(data))
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    return tmp_path


def test_stack_config_strips_the_project_prefix() -> None:
    config = stack_config("l4", ROOT)
    assert config["hardware"] == "l4"
    assert not any(k.startswith("gemma4-vllm:") for k in config)


def test_thresholds_come_from_the_stack_file(tmp_path: Path) -> None:
    cwd = _stack(tmp_path, "t", sloP95TtftMs=150, sloMinSuccessRate=0.9, sloMinRequestsPerSecond=5)
    slo = slo_for_stack("t", cwd)
    assert (slo.slo_p95_ttft_ms, slo.slo_min_success_rate) == (150, 0.9)
    assert slo.slo_min_requests_per_second == 5
    assert slo.slo_p95_e2e_ms == SloSettings().slo_p95_e2e_ms  # default where absent


def test_evaluate_passes_and_fails_per_cell() -> None:
    cells = [
        cell(1, 128, p95_ttft_ms=100.0, p95_e2el_ms=900.0),
        cell(8, 128, p95_ttft_ms=300.0, p95_e2el_ms=900.0, success_rate=0.95),
        cell(64, 4096, status="skipped"),
    ]
    loose = SloSettings(slo_p95_ttft_ms=1000, slo_p95_e2e_ms=2000, slo_min_success_rate=0.9)
    result = evaluate(cells, loose)
    assert result.passed
    assert (result.measured_cells, result.skipped_cells) == (2, 1)
    strict = SloSettings(slo_p95_ttft_ms=200, slo_p95_e2e_ms=2000, slo_min_success_rate=0.99)
    result = evaluate(cells, strict)
    assert not result.passed
    assert sorted((f.cell, f.slo) for f in result.failures) == [
        ("c8-p128-o16", "sloMinSuccessRate"),
        ("c8-p128-o16", "sloP95TtftMs"),
    ]


def test_min_requests_per_second_uses_the_best_cell() -> None:
    cells = [cell(1, 128, request_throughput=1.0), cell(8, 128, request_throughput=7.5)]
    assert evaluate(cells, SloSettings(slo_min_requests_per_second=7.0)).passed
    result = evaluate(cells, SloSettings(slo_min_requests_per_second=8.0))
    assert [(f.cell, f.value) for f in result.failures] == [("run", 7.5)]


def test_no_measured_cell_fails() -> None:
    result = evaluate([cell(1, 128, status="skipped")], SloSettings())
    assert not result.passed


def test_a_cell_with_no_success_fails_latency_checks() -> None:
    result = evaluate([cell(1, 128, p95_ttft_ms=None, success_rate=0.0)], SloSettings())
    assert {f.slo for f in result.failures} == {"sloP95TtftMs", "sloMinSuccessRate"}


def test_gate_cli_exit_statuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The run's model ("m") is not the stack's: these calls judge the SLOs regardless.
    other = "--allow-other-target"
    run = tmp_path / "run"
    write_run(run, [cell(1, 128), cell(8, 128, p95_ttft_ms=400.0)], label="r", hardware="l4")
    cwd = _stack(tmp_path, "strict", sloP95TtftMs=300)
    _stack(tmp_path, "loose", sloP95TtftMs=500)
    assert main(["gate", str(run), "-s", "loose", "--cwd", str(cwd), other]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["gate", str(run), "-s", "strict", "--cwd", str(cwd), other]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "c8-p128-o16" in out and "sloP95TtftMs" in out
    assert main(["gate", str(run), "-s", "strict", "--cwd", str(cwd), "--json", other]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is False
    assert doc["failures"][0]["value"] == 400.0
    assert (
        main(["gate", str(run), "-s", "l4", "--cwd", str(ROOT), other]) == 0
    )  # the real stack file
    assert main(["gate", str(run), "-s", "nope", "--cwd", str(cwd)]) == 2
    assert main(["gate", str(tmp_path / "none"), "-s", "loose", "--cwd", str(cwd)]) == 2
    assert main(["gate", str(run)]) == 2  # -s is required
    assert load_run(run).label == "r"


@pytest.mark.parametrize(
    ("model", "hardware", "stack", "said"),
    [
        ("google/gemma-4-12B-it", "l4", None, "made against model 'google/gemma-4-12B-it'"),
        ("google/gemma-4-12B-it-qat-w4a16-ct", "rtx6000", None, "on hardware 'rtx6000'"),
        ("google/gemma-4-12B-it-qat-w4a16-ct", None, None, "does not record its hardware"),
        ("google/gemma-4-12B-it-qat-w4a16-ct", "l4", "rtx6000", "against stack 'rtx6000'"),
    ],
)
def test_gate_refuses_a_run_of_another_target(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model: str,
    hardware: str | None,
    stack: str | None,
    said: str,
) -> None:
    run = tmp_path / "run"
    write_run(run, [cell(1, 128)], label="r", hardware=hardware)
    meta = json.loads((run / "run.json").read_text())
    meta["model"] = model
    if stack is not None:
        meta["stack"] = stack
    (run / "run.json").write_text(json.dumps(meta))
    assert main(["gate", str(run), "-s", "l4", "--cwd", str(ROOT)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and said in out and "--allow-other-target" in out
    assert main(["gate", str(run), "-s", "l4", "--cwd", str(ROOT), "--allow-other-target"]) == 0
    assert said in capsys.readouterr().out


def test_gate_passes_a_run_of_the_stacks_own_target(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_run(run, [cell(1, 128)], label="r", hardware="l4")
    meta = json.loads((run / "run.json").read_text())
    meta.update(model="google/gemma-4-12B-it-qat-w4a16-ct", stack="l4")
    (run / "run.json").write_text(json.dumps(meta))
    assert main(["gate", str(run), "-s", "l4", "--cwd", str(ROOT)]) == 0


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("image", "vllm/vllm-openai:v0.0.1", "image 'vllm/vllm-openai:v0.0.1'"),
        ("model_revision", "0123456789abcdef", "checkpoint revision '0123456789abcdef'"),
        ("model_repo", "google/gemma-4-12B-it", "checkpoint 'google/gemma-4-12B-it'"),
    ],
)
def test_gate_refuses_a_run_of_a_same_named_stack_that_ran_something_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str, said: str
) -> None:
    # Same stack name, model name and hardware (another project's `l4`, or `l4` before a
    # promotion): what the run measured is told by the image and checkpoint it recorded.
    from bench.cli import stack_identity

    run = tmp_path / "run"
    write_run(run, [cell(1, 128)], label="r", hardware="l4")
    meta = json.loads((run / "run.json").read_text())
    own = stack_identity("l4", ROOT)
    assert own and own["image"] and own["model_revision"]
    meta.update(
        model="google/gemma-4-12B-it-qat-w4a16-ct", stack="l4", target={**own, field: value}
    )
    (run / "run.json").write_text(json.dumps(meta))
    assert main(["gate", str(run), "-s", "l4", "--cwd", str(ROOT)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and said in out, out
    meta["target"] = own
    (run / "run.json").write_text(json.dumps(meta))
    assert main(["gate", str(run), "-s", "l4", "--cwd", str(ROOT)]) == 0
