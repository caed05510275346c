"""The scheduler simulation: deterministic, consistent with the closed forms where they apply,
never faster than a request alone, slower as load rises, and what each mechanism it models
(slots, chunked prefill, KV preemption, the prefix cache, MTP, balancers) does to the tail."""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest

from serving.capacity.perf import Speculation, StepModel, Workload
from serving.capacity.perf_stack import model_for_settings
from serving.capacity.plan import ROOT, load_stack_settings, stack_names
from serving.capacity.simulate import TraceRequest, Traffic, simulate

W = Workload(512, 128)


def _model(stack: str) -> StepModel:
    return model_for_settings(load_stack_settings(stack), calibrations=None)[0]


def test_a_seed_gives_the_same_run_and_another_seed_another() -> None:
    model = _model("l4")
    cap = model.capacity_rps(W)
    traffic = Traffic(0.6 * cap, 512, 128, prompt_p95=1500, output_p95=300)
    one, two = simulate(model, traffic, seed=3), simulate(model, traffic, seed=3)
    assert one == two
    assert simulate(model, traffic, seed=4).latency_ms != one.latency_ms


@pytest.mark.parametrize("stack", stack_names(ROOT))
def test_means_agree_with_the_closed_forms_below_saturation(stack: str) -> None:
    """Where the closed forms apply (Poisson arrivals, fixed lengths, one replica, no queue for
    a slot) the simulated means are theirs within 10 %."""
    model = _model(stack)
    cap = model.capacity_rps(W)
    for share in (0.05, 0.3):
        sim = simulate(model, Traffic(share * cap, 512, 128), requests=3000)
        closed = model.at_rate(share * cap, W)
        assert not sim.saturated
        for name, value in (("ttft", closed.ttft_s), ("itl", closed.itl_s), ("e2e", closed.e2e_s)):
            # Within 10 %, or a step: a request reaching a busy engine waits for the step in
            # progress, which the closed forms count on average only.
            tolerance = max(0.10 * value, closed.step_s) * 1000
            assert sim.latency_ms[name]["mean"] == pytest.approx(value * 1000, abs=tolerance), name


@pytest.mark.parametrize("stack", ["l4", "rtx6000", "gke-tpu-v6e"])
def test_as_the_rate_falls_the_latencies_converge_to_a_request_alone(stack: str) -> None:
    model = _model(stack)
    alone = model.single_stream(W)
    sim = simulate(model, Traffic(model.capacity_rps(W) * 1e-4, 512, 128), requests=200)
    for name, value in (("ttft", alone.ttft_s), ("itl", alone.itl_s), ("e2e", alone.e2e_s)):
        for q in ("p50", "p99", "mean"):
            assert sim.latency_ms[name][q] >= value * 1000 * (1 - 1e-9), (name, q)
            assert sim.latency_ms[name][q] == pytest.approx(value * 1000, rel=0.01), (name, q)
    # The closed form's open loop has the same floor.
    low = model.at_rate(1e-4, W)
    assert (low.ttft_s, low.itl_s, low.e2e_s) == pytest.approx(
        (alone.ttft_s, alone.itl_s, alone.e2e_s), rel=1e-3
    )
    assert min(low.ttft_s - alone.ttft_s, low.itl_s - alone.itl_s, low.e2e_s - alone.e2e_s) >= 0
    assert alone.ttft_s == model.at_concurrency(1, W).ttft_s


@pytest.mark.parametrize("stack", ["l4", "gke-tpu-v6e"])
def test_latency_never_falls_as_load_rises(stack: str) -> None:
    model = _model(stack)
    cap = model.capacity_rps(W)
    runs = [simulate(model, Traffic(s * cap, 512, 128), requests=2000) for s in (0.1, 0.4, 0.7)]
    for a, b in itertools.pairwise(runs):
        for name in ("ttft", "itl", "e2e"):
            for q in ("p50", "p95", "p99", "mean"):
                assert b.latency_ms[name][q] >= a.latency_ms[name][q] * 0.999, (name, q)


def test_past_capacity_the_queue_grows_and_the_run_says_so() -> None:
    model = _model("rtx6000")
    cap = model.capacity_rps(W)
    assert not simulate(model, Traffic(0.5 * cap, 512, 128)).saturated
    over = simulate(model, Traffic(1.3 * cap, 512, 128))
    assert over.saturated
    assert over.throughput_rps < 1.3 * cap
    # The engine, always busy, serves about its capacity: the closed form's within 10 %.
    assert over.throughput_rps == pytest.approx(cap, rel=0.10)


def test_the_error_from_the_number_of_requests_is_reported_and_shrinks() -> None:
    model = _model("l4")
    traffic = Traffic(0.5 * model.capacity_rps(W), 512, 128, output_p95=300)
    few, many = simulate(model, traffic, requests=300), simulate(model, traffic, requests=6000)
    for name in ("ttft", "e2e", "itl"):
        assert 0 < many.error[name]["p95"] < few.error[name]["p95"]
    assert many.requests == 6000 and many.warmup == 600


def test_a_small_kv_cache_preempts_and_recomputes() -> None:
    model = _model("rtx6000")
    roomy = dataclasses.replace(model, max_num_seqs=32)
    tight = dataclasses.replace(roomy, kv_capacity_tokens=3.5 * 640)  # 3.5 whole requests
    traffic = Traffic(0.6 * roomy.capacity_rps(W), 512, 128)
    free, squeezed = simulate(roomy, traffic), simulate(tight, traffic)
    assert free.preemptions == 0 < squeezed.preemptions
    assert squeezed.latency_ms["e2e"]["p95"] > free.latency_ms["e2e"]["p95"]


def test_a_shared_prefix_in_the_cache_shortens_the_first_token() -> None:
    model = _model("l4")
    rate = 0.3 * model.capacity_rps(Workload(4000, 64))
    cold = simulate(model, Traffic(rate, 4000, 64), requests=500)
    warm = simulate(model, Traffic(rate, 4000, 64, shared_prefix_tokens=3500), requests=500)
    assert warm.latency_ms["ttft"]["p50"] < 0.5 * cold.latency_ms["ttft"]["p50"]


def test_mtp_advances_each_sequence_by_its_mean_accepted_length() -> None:
    model = _model("rtx6000")
    plain = simulate(model, Traffic(0.01, 512, 128), requests=50)
    spec = dataclasses.replace(model, speculation=Speculation(3, 2.5))
    drafted = simulate(spec, Traffic(0.01, 512, 128), requests=50)
    alone = spec.single_stream(W)
    assert drafted.latency_ms["itl"]["p50"] == pytest.approx(alone.itl_s * 1000, rel=0.01)
    assert drafted.latency_ms["itl"]["p50"] < plain.latency_ms["itl"]["p50"]


def test_chunked_prefill_puts_the_others_prompts_in_the_token_gaps() -> None:
    """Long prompts arriving while others decode: a step carrying a chunk is longer, so the
    ITL tail is well above its median; without prompts to prefill it is not."""
    model = _model("rtx6000")
    busy = simulate(model, Traffic(0.5 * model.capacity_rps(Workload(8000, 64)), 8000, 64))
    assert busy.latency_ms["itl"]["p99"] > 3 * busy.latency_ms["itl"]["p50"]


def test_cloud_run_holds_requests_at_the_front_past_the_instance_limit() -> None:
    model = _model("l4")
    rate = 2.5 * model.capacity_rps(W)
    run = simulate(model, Traffic(rate, 512, 128), replicas=3, balancer="cloud-run")
    assert run.held_at_front > 0 and not run.saturated


def test_the_endpoint_picker_keeps_a_shorter_tail_than_random_spreading() -> None:
    model = _model("gke-tpu-v6e")
    traffic = Traffic(6 * 0.8 * model.capacity_rps(W), 512, 128)
    picked = simulate(model, traffic, replicas=6, balancer="endpoint-picker")
    spread = simulate(model, traffic, replicas=6, balancer="random")
    assert picked.latency_ms["ttft"]["p99"] < spread.latency_ms["ttft"]["p99"]


def test_bursty_arrivals_lengthen_the_tail_at_the_same_mean_rate() -> None:
    model = _model("l4")
    rate = 0.5 * model.capacity_rps(W)
    poisson = simulate(model, Traffic(rate, 512, 128))
    bursty = simulate(model, Traffic(rate, 512, 128, burstiness=0.25))
    assert bursty.latency_ms["ttft"]["p95"] > 1.5 * poisson.latency_ms["ttft"]["p95"]


def test_a_trace_is_replayed_at_its_own_or_a_given_rate() -> None:
    model = _model("rtx6000")
    trace = tuple(TraceRequest(i * 0.5, 100 + i % 7, 20 + i % 5) for i in range(100))
    own = simulate(model, Traffic(2.0, 1, 1, trace=trace), requests=100)
    assert own.requests == 100
    faster = simulate(model, Traffic(40.0, 1, 1, trace=trace), requests=100)
    assert faster.latency_ms["ttft"]["p95"] >= own.latency_ms["ttft"]["p95"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"balancer": "round-robin"}, "balancer must be one of engine, cloud-run"),
        ({"replicas": 0}, "replicas must be an integer in [1, 1000]"),
        ({"replicas": 2}, "balancer 'engine' is one replica"),
        ({"requests": 5}, "requests must be an integer in [10, 100000]"),
    ],
)
def test_bad_options_are_refused_by_name(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        simulate(_model("l4"), Traffic(0.1, 512, 128), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0}, "rate must be a number in"),
        ({"burstiness": -1}, "burstiness must be a number in"),
        ({"prompt_p95": 100}, "prompt tokens p95 (100) must be at least its mean (512)"),
        ({"output_p95": 10_000}, "more than 3.87 x its mean"),
        ({"shared_prefix_tokens": 600}, "shared_prefix_tokens must be an integer in [0, 512]"),
    ],
)
def test_bad_traffic_is_refused_by_name(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"rate": 1.0, "prompt_tokens": 512, "output_tokens": 128, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        Traffic(**args)  # type: ignore[arg-type]


def test_a_request_longer_than_max_model_len_is_refused() -> None:
    model = _model("gke-tpu-v6e")  # max-model-len 4096
    with pytest.raises(ValueError, match="longer than max-model-len"):
        simulate(model, Traffic(0.1, 4000, 200))
    longest = Traffic(0.1, 1000, 200, prompt_p95=2500).longest_request()
    assert 2500 < longest - 200 < 10_000


@pytest.mark.parametrize("stack", stack_names(ROOT))
def test_the_closed_forms_never_get_faster_as_the_rate_rises(stack: str) -> None:
    model = _model(stack)
    for w in (Workload(512, 128), Workload(2000, 64), Workload(64, 512)):
        if model.max_model_len and w.prompt_tokens + w.output_tokens > model.max_model_len:
            continue
        cap = model.capacity_rps(w)
        alone = model.single_stream(w)
        previous = (alone.ttft_s, alone.itl_s, alone.e2e_s)
        for i in range(1, 60):
            p = model.at_rate(cap * i / 60 * 0.999, w)
            now = (p.ttft_s, p.itl_s, p.e2e_s)
            assert all(a >= b * (1 - 1e-9) for a, b in zip(now, previous, strict=True)), (w, i)
            previous = now


def test_a_queue_growing_behind_many_slots_is_saturation() -> None:
    """64 replicas of 256 slots hold more requests than a run sends: a queue that grows
    without bound is still said, by the requests in flight growing through the run."""
    model = dataclasses.replace(_model("gke-l4"), max_num_seqs=256)
    rate = 64 * 2 * model.capacity_rps(W)
    run = simulate(
        model, Traffic(rate, 512, 128), replicas=64, balancer="endpoint-picker", requests=3000
    )
    assert run.saturated
    calm = simulate(
        model, Traffic(rate / 4, 512, 128), replicas=64, balancer="endpoint-picker", requests=3000
    )
    assert not calm.saturated
