"""The performance model respects the machine, and `gemma4 plan` says what it cannot serve.

Properties over every shipped stack and a spread of request shapes the planner accepts: no
curve point (closed loop, open loop, a burst) computes faster than the chip's dense peak or
reads its weights faster than its peak bandwidth; a shape longer than max-model-len is
refused; the client's latency includes the platform's front end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemma4.plan_cli import main
from serving.capacity.perf import StepModel, Workload
from serving.capacity.perf_stack import model_for_settings
from serving.capacity.plan import ROOT, load_stack_settings, stack_names

STACKS = stack_names(ROOT)
PROMPTS = (1, 16, 128, 1000, 2048, 4000, 8192, 30000)
OUTPUTS = (1, 2, 64, 512, 2000)


def _shapes(model: StepModel) -> list[Workload]:
    limit = model.max_model_len or 10**9
    return [Workload(p, o) for p in PROMPTS for o in OUTPUTS if p + o <= limit]


def _within_the_chip(model: StepModel, w: Workload, flops_per_s: float, step: float) -> None:
    device = model.device
    assert flops_per_s <= device.dense_flops * (1 + 1e-9), (w, flops_per_s)
    # Every step reads the weights once: no step is shorter than that read at peak bandwidth.
    assert model.shape.weight_bytes / step <= device.memory_bandwidth_bytes_per_s * (1 + 1e-9)


def _flops_per_s(model: StepModel, w: Workload, requests_per_s: float) -> float:
    k = model.speculation.num_speculative_tokens if model.speculation else 0
    per_request = model.prefill_flops(w.prompt_tokens) + 2.0 * model.decode_steps(
        w.output_tokens
    ) * ((1 + k) * model.shape.params + k * model.shape.drafter_params)
    return requests_per_s * per_request


@pytest.mark.parametrize("stack", STACKS)
def test_no_point_needs_more_than_the_chip_has(stack: str) -> None:
    model, _ = model_for_settings(load_stack_settings(stack), calibrations=None)
    for w in _shapes(model):
        capacity = model.capacity_rps(w)
        for c in (1, 2, 8, model.max_num_seqs, 4 * model.max_num_seqs):
            p = model.at_concurrency(c, w)
            _within_the_chip(model, w, _flops_per_s(model, w, p.requests_per_s), p.step_s)
            assert p.utilisation["compute"] <= 1 + 1e-9
            assert p.utilisation["bandwidth"] <= 1 + 1e-9
            assert p.ceiling in ("compute", "bandwidth", "slots", "kv-cache", "api-server")
        for share in (0.1, 0.5, 0.9):
            p = model.at_rate(capacity * share, w)
            _within_the_chip(model, w, _flops_per_s(model, w, p.requests_per_s), p.step_s)


@pytest.mark.parametrize("stack", ["l4", "rtx6000", "tpu-v6e1"])
def test_a_burst_never_computes_faster_than_the_peak(stack: str) -> None:
    model, _ = model_for_settings(load_stack_settings(stack), calibrations=None)
    for requests in (1, 8, 64):
        for w in (Workload(2048, 1), Workload(128, 16)):
            mean, last = model.burst(requests, w)
            assert 0 < mean <= last
            assert _flops_per_s(model, w, requests / last) <= model.device.dense_flops


def test_concurrent_prefills_share_the_chip() -> None:
    """The issue's example: 2048-token prompts, one output token, on an L4. Six in flight
    cannot finish faster than six prefills' FLOPs at the L4's 121 TFLOPS allow."""
    model, _ = model_for_settings(load_stack_settings("l4"), calibrations=None)
    w = Workload(2048, 1)
    ceiling = 121e12 / (2 * model.shape.params * 2048)
    for c in (1, 2, 6):
        assert model.at_concurrency(c, w).requests_per_s <= ceiling
    # One prefill already fills the chip: six in flight add at most what one step's
    # constant and the weights' read left idle, not six times the rate.
    assert (
        model.at_concurrency(6, w).requests_per_s < 1.2 * model.at_concurrency(1, w).requests_per_s
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse refuses a value before the command runs
        code = int(str(exc.code))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_shape_longer_than_max_model_len_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "-s", "tpu-v6e1", "--prompt-tokens", "8000")
    assert code == 2 and out == ""
    assert "max-model-len (4096)" in err and "Traceback" not in err
    # Exactly at the limit is served.
    code, _, err = run(
        capsys, "-s", "tpu-v6e1", "--json", "--prompt-tokens", "4000", "--output-tokens", "96"
    )
    assert code == 0, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mtp-acceptance", "1.5"], "--mtp-acceptance must be a number from 0 to 1"),
        (["--mtp-acceptance", "nan"], "--mtp-acceptance must be a number from 0 to 1"),
        (["--concurrency", "0"], "--concurrency values must be integers from 1"),
        (["--concurrency", "1,x"], "--concurrency values must be integers from 1"),
        (["--concurrency", ""], "--concurrency takes 1 to 64"),
        (["--calibration-run", "/nonexistent"], "--calibration-run /nonexistent:"),
        (["--plot", "/tmp/x.gif"], "must end in .png or .svg"),
    ],
)
def test_plan_refuses_bad_input_with_one_message(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _out, err = run(capsys, "-s", "rtx6000", *argv)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_the_json_contract_and_the_client_view(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys,
        "-s",
        "rtx6000",
        "--json",
        "--prompt-tokens",
        "512",
        "--output-tokens",
        "64",
        "--concurrency",
        "4,1,2",
        "--mtp-acceptance",
        "0.3",
    )
    assert code == 0, err
    result = json.loads(out)
    assert isinstance(result["usd_per_hour"], float)
    perf = result["performance"]
    assert isinstance(perf["band"], float)
    assert [p["concurrency"] for p in perf["curve"]] == [1, 2, 4]
    for p in perf["curve"]:
        for key in (
            "ttft_ms",
            "itl_ms",
            "step_ms",
            "e2e_ms",
            "output_tokens_per_s",
            "requests_per_s",
        ):
            assert isinstance(p[key], float), key
        # The client's figures are the engine's plus the platform's front end.
        assert p["ttft_ms"] == pytest.approx(p["engine_ttft_ms"] + perf["front_end_ms"])
        assert p["e2e_ms"] == pytest.approx(p["engine_e2e_ms"] + perf["front_end_ms"])
    assert perf["front_end_ms"] > 0 and perf["front_end_source"]
    assert perf["mtp"]["acceptance"] == 0.3
    assert perf["mean_accepted_length"] == pytest.approx(1 + 0.3 + 0.09 + 0.027)


def test_mtp_bounds_bracket_the_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "-s", "rtx6000", "--json")
    assert code == 0, err
    perf = json.loads(out)["performance"]
    bounds = perf["mtp"]["bounds"]
    one = perf["curve"][0]["itl_ms"]
    assert bounds["all_accepted"]["itl_ms_at_1"] <= one <= bounds["none_accepted"]["itl_ms_at_1"]
    assert bounds["none_accepted"]["mean_accepted_length"] == 1.0
    assert bounds["all_accepted"]["mean_accepted_length"] == 4.0
    assert "median of published" in perf["mtp"]["acceptance_source"]


def test_the_slo_is_held_to_the_client_latency() -> None:
    from serving.capacity.perf import Slo

    settings = load_stack_settings("l4")
    model, _ = model_for_settings(settings)
    w = Workload(128, 1)
    one = model.at_concurrency(1, w)
    assert one.e2e_s > one.engine_e2e_s
    # An SLO between the engine's and the client's latency is not met.
    between = Slo(e2e_ms=(one.engine_e2e_s + one.e2e_s) / 2 * 1000)
    assert not between.met_by(one)


def test_plan_draws_a_picture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "l4.png"
    code, _, err = run(capsys, "-s", "l4", "--plot", str(path))
    assert code == 0, err
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = run(capsys, "-s", "l4", "--plot", str(tmp_path / "missing" / "x.svg"))
    assert code == 2 and "cannot write" in err and "Traceback" not in err


@pytest.mark.parametrize("stack", STACKS)
def test_the_simulation_needs_no_more_than_the_chip_has(stack: str) -> None:
    """Past capacity every engine is always busy: what the simulation serves still computes
    no faster than the dense peak, and no step reads the weights faster than peak bandwidth."""
    from serving.capacity.simulate import Traffic, simulate

    model, _ = model_for_settings(load_stack_settings(stack), calibrations=None)
    device = model.device
    for w in (Workload(2000, 16), Workload(128, 256)):
        if model.max_model_len and w.prompt_tokens + w.output_tokens > model.max_model_len:
            continue
        rate = 1.5 * model.capacity_rps(w)
        run = simulate(model, Traffic(rate, w.prompt_tokens, w.output_tokens), requests=400)
        assert run.saturated
        assert _flops_per_s(model, w, run.throughput_rps) <= device.dense_flops * (1 + 1e-9)
        step = run.busy_s / run.steps
        assert model.shape.weight_bytes / step <= device.memory_bandwidth_bytes_per_s
