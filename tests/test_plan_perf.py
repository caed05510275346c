"""`gemma4 plan`'s performance part: the curve, the hardware search, calibrating from a run."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.results.store import RunStore
from gemma4.plan_cli import main
from serving.capacity.calibration import load_calibration
from serving.capacity.evidence import evidence
from serving.capacity.perf import Coefficients, StepModel, Workload
from serving.capacity.perf_stack import model_for_settings
from serving.capacity.perf_validation import front_end
from serving.capacity.plan import ROOT, load_stack_settings, stack_names

STACKS = stack_names(ROOT)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_prints_its_predicted_curve(
    capsys: pytest.CaptureFixture[str], stack: str
) -> None:
    code, out, _ = run(capsys, "-s", stack, "--json")
    assert code == 0
    perf = json.loads(out)["performance"]
    settings = load_stack_settings(stack)
    curve = perf["curve"]
    assert next(p["concurrency"] for p in curve) == 1
    assert curve[-1]["concurrency"] == settings.vllm.max_num_seqs
    assert perf["measured"] is False and perf["calibrated"] is False
    assert perf["band"] == model_for_settings(settings, calibrations=None)[0].band > 0
    # More concurrency: more throughput, each stream slower (a batch reads more KV).
    for a, b in itertools.pairwise(curve):
        assert b["output_tokens_per_s"] > a["output_tokens_per_s"]
        assert b["itl_ms"] >= a["itl_ms"]
    # Little's law holds in what it prints (at the engine: concurrency is what it holds; the
    # API server's time, before the engine, holds no slot).
    model = model_for_settings(settings, calibrations=None)[0]
    w = Workload(perf["prompt_tokens"], perf["output_tokens"])
    for p in curve:
        # One in flight queues behind nobody at the API server: its own time only.
        one = p["concurrency"] == 1
        api = model.server_time_s(w) if one else model.api_server_s(p["requests_per_s"], w)
        assert 0 < api < p["engine_ttft_ms"] / 1000
        assert p["requests_per_s"] * (p["engine_e2e_ms"] / 1000 - api) == pytest.approx(
            p["concurrency"], rel=1e-6
        )
    code, out, _ = run(capsys, "-s", stack)
    assert "PREDICTED, not measured" in out and "uncalibrated" in out


def test_the_l4_single_stream_is_bandwidth_bound() -> None:
    """One stream on an L4 reads the loaded weights each step: 300 GB/s over 8.28 GiB is
    33.7 tokens/s at full bandwidth; the measured prior for 4-bit weights on Ada (80 %, vLLM's
    Marlin kernel on an L4) and 1.5 ms a step, near 26."""
    model, _ = model_for_settings(load_stack_settings("l4"))
    step = model.decode_step_s(1, 640)
    assert 1 / step < 300e9 / (8.28 * 2**30)
    assert model.coefficients.bandwidth_efficiency == 0.8
    assert 1 / step == pytest.approx(26.0, rel=0.03)


def test_all_stacks_and_the_search_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """Every stack's plan and the search exit 0; how long they take is a figure of
    scripts/command-speed (the target: under 2 s each on 2 cores), not a window of a test."""
    for stack in STACKS:
        assert run(capsys, "-s", stack, "--json")[0] == 0
    assert run(capsys, "search", "--rate", "5", "--ttft-p95-ms", "1000", "--itl-ms", "60")[0] == 0


# --- calibrate ----------------------------------------------------------------------------

TRUTH = Coefficients(
    bandwidth_efficiency=0.62,
    decode_compute_efficiency=0.3,
    step_overhead_s=0.003,
    prefill_compute_efficiency=0.35,
    prefill_overhead_s=0.04,
)


def _cells(model: StepModel) -> list[dict[str, Any]]:
    """Cells as a sweep stores them, with figures the model with TRUTH gives (a perfect
    engine): client per-step ITL, server TTFT and E2E, the client's in-flight count."""
    out = []
    for prompt in (128, 2048):
        for c in (1, 2, 4, 6):
            w = Workload(prompt, 64)
            p = model.at_concurrency(c, w)
            key = f"c{c}-p{prompt}-o64"
            out.append(
                {
                    "id": key,
                    "status": "ok",
                    "concurrency": c,
                    "prompt_tokens": prompt,
                    "output_tokens": 64,
                    "request_rate": None,
                    "completed": 8 * c,
                    "total_input_tokens": 8 * c * prompt,
                    "mean_output_tokens": 64.0,
                    "client_mean_itl_ms": p.step_s * 1000,
                    "server_mean_ttft_ms": p.engine_ttft_s * 1000,
                    "server_mean_e2el_ms": p.engine_e2e_s * 1000,
                    "mean_e2el_ms": p.engine_e2e_s * 1000 + 2.0,
                    "mean_in_flight": float(c),
                    "output_throughput": p.output_tokens_per_s * 0.9,
                }
            )
            if c == 1:  # alone: the spreads of its gaps and first tokens around their means
                itl, ttft = p.step_s * 1000, p.ttft_s * 1000
                out[-1] |= {"total_output_tokens": 8 * 64, "mean_itl_ms": itl,
                            "mean_ttft_ms": ttft} | {
                    f"{stat}_{metric}_ms": mean * ratio
                    for metric, mean in (("itl", itl), ("ttft", ttft))
                    for stat, ratio in (("median", 0.93), ("p90", 1.49), ("p95", 1.65),
                                        ("p99", 2.09))
                }  # fmt: skip
    return out


def _write_run(path: Path, cells: list[dict[str, Any]], model: str, hardware: str) -> Path:
    grid = {
        "concurrency": [1, 2, 4, 6],
        "prompt_tokens": [128, 2048],
        "output_tokens": [64],
        "request_rates": [None],
    }
    meta = {
        "model": model,
        "url": "http://x",
        "label": "l4-run",
        "hardware": hardware,
        "engine_version": "0.27.1",
    }
    store = RunStore.open(path, {**meta, "grid": grid}, resume=False)
    for record in cells:
        store.append_cell(record)
    store.close()
    return path


@pytest.mark.long
def test_calibrate_fits_a_run_and_the_stack_then_uses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_stack_settings("l4")
    prior, _ = model_for_settings(settings, calibrations=None)
    truth = replace(prior, coefficients=TRUTH)
    run_dir = _write_run(tmp_path / "run", _cells(truth), settings.model.model, "l4")
    out = tmp_path / "calibrations"
    code, text, err = run(
        capsys, "calibrate", str(run_dir), "-s", "l4", "--where", "test", "--out", str(out)
    )
    assert code == 0, err
    # The run's concurrency-1 cells measured both spreads; the longer prompt's are kept.
    assert "spread around the mean at concurrency 1" in text
    for label in ("token gap", "first token"):
        (line,) = [x for x in text.splitlines() if x.startswith(f"  {label}: ")]
        shown = [float(part.split()[1]) for part in line.split(": ", 1)[1].split(", ")]
        assert shown == pytest.approx([0.93, 1.65, 2.09], rel=0.02), line
    (path,) = out.glob("*.json")
    assert path.name == "cloud-run--l4--gemma-4-12B-it-qat-w4a16-ct--vllm-0.27.1.json"
    calibration = load_calibration(path)
    # The cells are bandwidth-bound in decode: the decode compute efficiency is not
    # identifiable from them, and bandwidth efficiency trades against the per-step constant;
    # what a calibration must get right is what it predicts.
    fitted = replace(prior, coefficients=calibration.coefficients)
    for cell in _cells(truth):
        w = Workload(cell["prompt_tokens"], 64)
        got, want = (
            fitted.at_concurrency(cell["concurrency"], w),
            truth.at_concurrency(cell["concurrency"], w),
        )
        assert got.step_s == pytest.approx(want.step_s, rel=0.03), cell["id"]
        assert got.engine_ttft_s == pytest.approx(want.engine_ttft_s, rel=0.05), cell["id"]
    # A step's reads and compute add (StepModel.overlap 0): the fit may trade bandwidth for
    # compute efficiency, but never beyond what the chip can do.
    assert 0.0 < calibration.coefficients.bandwidth_efficiency <= 1.0
    assert calibration.provenance["run"] == "l4-run"
    assert calibration.provenance["where"] == "test"
    assert calibration.provenance["image"] == settings.image
    assert calibration.provenance["synthetic"] is False
    assert calibration.held_out_error["itl"] is not None
    assert calibration.held_out_error["itl"] < 0.01
    model, used = model_for_settings(settings, calibrations=out)
    assert used is not None and model.coefficients == calibration.coefficients
    assert "calibrated on l4-run" in model.basis
    # A calibration measures the engine, not the platform's front end: one nobody measured
    # (Cloud Run's is DERIVED from published one-user cells) still widens the band.
    measured_front = front_end(settings.deploy_platform)[1]
    widen = 0.0 if measured_front else float(evidence()["unmeasured_band_widening"])
    assert calibration.band < 0.5
    assert model.band == pytest.approx(calibration.band + widen)
    # The same L4, checkpoint and engine on GKE is another stack: this run does not change it.
    gke, used_gke = model_for_settings(load_stack_settings("gke-l4"), calibrations=out)
    assert used_gke is None and "uncalibrated" in gke.basis


def test_a_synthetic_calibration_never_stands_in_for_a_real_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_stack_settings("l4")
    prior, _ = model_for_settings(settings, calibrations=None)
    run_dir = _write_run(
        tmp_path / "run", _cells(replace(prior, coefficients=TRUTH)), settings.model.model, "l4"
    )
    out = tmp_path / "c"
    args = ["calibrate", str(run_dir), "-s", "l4", "--synthetic", "--out", str(out)]
    assert run(capsys, *args)[0] == 0
    assert model_for_settings(settings, calibrations=out)[1] is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": "google/gemma-4-12B-it"}, "the run measured model 'google/gemma-4-12B-it'"),
        ({"hardware": "tpu-v6e-1"}, "the run measured hardware 'tpu-v6e-1'"),
        ({"cells": []}, "no measured closed-loop cell"),
        ({"cells": "two"}, "at least 4 concurrency levels"),
    ],
)
def test_calibrate_refuses_a_run_it_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], message: str
) -> None:
    settings = load_stack_settings("l4")
    prior, _ = model_for_settings(settings, calibrations=None)
    cells = _cells(replace(prior, coefficients=TRUTH))
    if change.get("cells") == []:
        cells = [{**c, "status": "failed"} for c in cells]
    elif change.get("cells") == "two":
        cells = [c for c in cells if c["concurrency"] in (1, 2)]
    run_dir = _write_run(
        tmp_path / "run",
        cells,
        change.get("model", settings.model.model),
        change.get("hardware", "l4"),
    )
    code, _, err = run(capsys, "calibrate", str(run_dir), "-s", "l4", "--out", str(tmp_path / "o"))
    assert code == 2 and message in err, err
    assert not (tmp_path / "o").exists()


def test_calibrate_refuses_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "calibrate", str(tmp_path / "nope"), "-s", "l4")
    assert code == 2 and "no such run folder" in err
    code, _, err = run(capsys, "calibrate", str(tmp_path), "-s", "l4", "--where", "x" * 201)
    assert code == 2 and "--where must be 1 to 200 characters" in err
    code, _, err = run(capsys, "calibrate", str(tmp_path), "-s", "nostack")
    assert code == 2 and "unknown stack 'nostack': no Pulumi.nostack.yaml in" in err


def test_calibration_files_are_read_strictly(tmp_path: Path) -> None:
    from serving.capacity.calibration import CalibrationError

    good: dict[str, Any] = {
        "schema": 1,
        "hardware": "l4",
        "checkpoint": "c",
        "vllm": "vllm 0.27.1",
        "coefficients": Coefficients().as_dict(),
        "held_out_error": {"itl": 0.1},
        "provenance": {"run": "r"},
    }
    bad: list[tuple[dict[str, Any], str]] = [
        ({**good, "schema": 2}, "not a calibration"),
        ({**good, "coefficients": {"bandwidth_efficiency": 0.5}}, "coefficients must have"),
        (
            {**good, "coefficients": {**good["coefficients"], "bandwidth_efficiency": -1}},
            "bandwidth_efficiency must be in (0, 1]",
        ),
        ({**good, "held_out_error": {"p99": 0.1}}, "held_out_error keys"),
        (
            {**good, "held_out_error": {"itl": math.inf}},
            "holds Infinity, which is not a JSON number",
        ),
        ({**good, "hardware": ""}, "short strings"),
        ({**good, "provenance": []}, "provenance must be a mapping"),
        ({**good, "mean_accepted_length": 0.5}, "mean_accepted_length must be a number in"),
        ({**good, "mean_accepted_length": "2"}, "mean_accepted_length must be a number in"),
    ]
    path = tmp_path / "x.json"
    path.write_text(json.dumps(good))
    assert load_calibration(path).band == 0.1
    for data, message in bad:
        path.write_text(json.dumps(data))
        with pytest.raises(CalibrationError, match=message.replace("(", r"\(").replace("]", r"\]")):
            load_calibration(path)
    path.write_text("{" * 300_000)
    with pytest.raises(CalibrationError, match="larger than"):
        load_calibration(path)


def test_calibrate_refuses_a_run_that_is_not_physical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step times that would need the L4 to read its weights at 40x its bandwidth."""
    settings = load_stack_settings("l4")
    prior, _ = model_for_settings(settings, calibrations=None)
    cells = _cells(replace(prior, coefficients=TRUTH))
    for c in cells:
        c["client_mean_itl_ms"] /= 40
    run_dir = _write_run(tmp_path / "run", cells, settings.model.model, "l4")
    code, _, err = run(capsys, "calibrate", str(run_dir), "-s", "l4", "--out", str(tmp_path / "o"))
    assert code == 2 and "faster than reading the weights once" in err, err
    assert not (tmp_path / "o").exists()


def test_calibrate_refuses_a_fit_that_needs_an_efficiency_above_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Latencies divided by 1.7: still slower than one read of the weights, but only an
    engine reading at more than 100 % of the L4's bandwidth would be that fast."""
    settings = load_stack_settings("l4")
    prior, _ = model_for_settings(settings, calibrations=None)
    cells = _cells(replace(prior, coefficients=TRUTH))
    for c in cells:
        for key in ("client_mean_itl_ms", "server_mean_ttft_ms", "server_mean_e2el_ms"):
            c[key] /= 1.7
    run_dir = _write_run(tmp_path / "run", cells, settings.model.model, "l4")
    code, _, err = run(capsys, "calibrate", str(run_dir), "-s", "l4", "--out", str(tmp_path / "o"))
    assert code == 2 and "an efficiency above 1 would be needed" in err, err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_calibration_files_with_booleans_for_numbers_are_refused(tmp_path: Path) -> None:
    from serving.capacity.calibration import CalibrationError

    data = {
        "schema": 1,
        "hardware": "l4",
        "checkpoint": "c",
        "vllm": "v",
        "coefficients": {**Coefficients().as_dict(), "bandwidth_efficiency": True},
        "held_out_error": {},
        "provenance": {},
    }
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="coefficients must be numbers"):
        load_calibration(path)
    data["coefficients"] = Coefficients().as_dict()
    data["held_out_error"] = {"itl": False}
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match="held_out_error values"):
        load_calibration(path)


def test_the_curve_is_for_the_request_shape_asked(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "-s", "l4", "--json", "--prompt-tokens", "4096", "--output-tokens", "16"
    )
    long = json.loads(out)["performance"]
    code2, out2, _ = run(capsys, "-s", "l4", "--json")
    short = json.loads(out2)["performance"]
    assert code == code2 == 0
    assert (long["prompt_tokens"], long["output_tokens"]) == (4096, 16)
    assert (short["prompt_tokens"], short["output_tokens"]) == (512, 128)  # the stack's defaults
    assert long["curve"][0]["ttft_ms"] > 4 * short["curve"][0]["ttft_ms"]


@pytest.mark.parametrize("value", ["0", "-5", "10000001"])
def test_plan_refuses_a_bad_request_shape(capsys: pytest.CaptureFixture[str], value: str) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse refuses it before the command runs
        run(capsys, "-s", "l4", "--output-tokens", value)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "--output-tokens must be an integer from 1 to 10000000" in err


def test_an_mtp_stack_takes_the_accepted_length_its_run_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from serving.capacity.perf import Speculation

    settings = load_stack_settings("rtx6000")
    prior, _ = model_for_settings(settings, calibrations=None)
    from serving.capacity.evidence import accepted_length, mtp_prior_acceptance

    assert prior.speculation is not None
    assert prior.speculation.mean_accepted_length == accepted_length(mtp_prior_acceptance(), 3)
    truth = replace(prior, coefficients=TRUTH, speculation=Speculation(3, 2.6))
    # As the benchmark stores them: the counters' deltas (160 of 300 draft tokens accepted in
    # 100 drafts: 1 + 160 / 100 = 2.6) and the figures they give.
    spec = {"num_drafts": 100, "num_draft_tokens": 300, "num_accepted_tokens": 160}
    figures = {"spec_decode_acceptance_rate": 160 / 300, "spec_decode_acceptance_length": 2.6}
    cells = [
        {
            **c,
            **figures,
            "spec_decode": {
                **spec,
                "acceptance_rate": 160 / 300,
                "mean_acceptance_length": 2.6,
                "acceptance_by_position": [],
            },
        }
        for c in _cells(truth)
    ]
    run_dir = _write_run(tmp_path / "run", cells, settings.model.model, "rtx-pro-6000")
    out = tmp_path / "c"
    code, _, err = run(capsys, "calibrate", str(run_dir), "-s", "rtx6000", "--out", str(out))
    assert code == 0, err
    (path,) = out.glob("*.json")
    calibration = load_calibration(path)
    assert calibration.mean_accepted_length == pytest.approx(2.6)
    # The measured acceptance, pooled over the 8 cells' counters, with where it comes from.
    assert calibration.mtp_acceptance is not None
    assert calibration.mtp_acceptance["num_drafts"] == 800
    assert calibration.mtp_acceptance["acceptance_rate"] == pytest.approx(160 / 300)
    assert "vLLM's spec-decode counters over 8 cell(s)" in calibration.acceptance_source
    model, _ = model_for_settings(settings, calibrations=out)
    assert model.speculation is not None and model.speculation.mean_accepted_length == 2.6
    # With 4 tokens a sequence, the reads and the compute both add to every step: the fit may
    # trade bandwidth for compute efficiency; what it must get right is what it predicts.
    for cell in _cells(truth):
        w = Workload(cell["prompt_tokens"], 64)
        got = model.at_concurrency(cell["concurrency"], w).step_s
        assert got == pytest.approx(truth.at_concurrency(cell["concurrency"], w).step_s, rel=0.03)


def test_calibrate_says_when_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_stack_settings("l4")
    prior, _ = model_for_settings(settings, calibrations=None)
    run_dir = _write_run(
        tmp_path / "run", _cells(replace(prior, coefficients=TRUTH)), settings.model.model, "l4"
    )
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run(capsys, "calibrate", str(run_dir), "-s", "l4", "--out", str(blocker / "x"))
    assert code == 2 and "cannot write" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("stack", "says"),
    [
        ("l4", "NOT measured: DERIVED from published cells"),
        ("tpu-v6e1", "NOT measured: DERIVED from published cells"),
        ("gke-l4", "NOT measured, a stand-in"),
    ],
)
def test_the_table_says_how_its_front_end_was_had(
    capsys: pytest.CaptureFixture[str], stack: str, says: str
) -> None:
    """Cloud Run's front end is derived from published one-user cells, GKE's is a stand-in
    built on it: the caption under the curve says which, never "measured"."""
    code, out, err = run(capsys, "-s", stack, "--concurrency", "1")
    assert code == 0, err
    flat = " ".join(out.split())
    seconds = front_end(load_stack_settings(stack).deploy_platform)[0]
    assert f"front end, {seconds * 1000:.0f} ms" in flat
    assert f"({says})" in flat
    code, out, err = run(capsys, "-s", stack, "--json")
    perf = json.loads(out)["performance"]
    assert perf["front_end_basis"] == ("stand-in" if "stand-in" in says else "derived")
    assert perf["front_end_measured"] is False
