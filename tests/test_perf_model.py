"""serving.capacity.perf: the step model's physics, loads, SLO search, bounds and refusals."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from serving.capacity.perf import (
    Coefficients,
    Device,
    KvLayer,
    Shape,
    Slo,
    Speculation,
    StepModel,
    Workload,
    erlang_c_wait,
)
from serving.capacity.perf_stack import autoscaling_bounds, benchmark_grid, model_for_settings
from serving.capacity.plan import load_stack_settings

SHAPE = Shape(
    "s", weight_bytes=8e9, params=12e9, kv_layers=(KvLayer(40, 1000.0, 1024), KvLayer(8, 500.0))
)
DEVICE = Device("d", memory_bandwidth_bytes_per_s=300e9, dense_flops=121e12)
IDEAL = Coefficients(1.0, 1.0, 0.0, 1.0, 0.0)
W = Workload(512, 128)


def model(**changes: object) -> StepModel:
    return replace(StepModel(SHAPE, DEVICE, IDEAL, max_num_seqs=16), **changes)  # type: ignore[arg-type]


def test_kv_reads_stop_growing_past_the_window_on_sliding_layers_only() -> None:
    assert SHAPE.kv_bytes_read(512) == 40 * 1000 * 512 + 8 * 500 * 512
    assert SHAPE.kv_bytes_read(4096) == 40 * 1000 * 1024 + 8 * 500 * 4096


def test_a_step_is_its_bytes_and_its_flops_plus_a_constant() -> None:
    m = model(coefficients=Coefficients(0.5, 0.25, 0.002, 0.5, 0.0))
    read = 8e9 + 4 * SHAPE.kv_bytes_read(1000)
    flops = 2 * 4 * 12e9
    reads_s, compute_s = read / (0.5 * 300e9), flops / (0.25 * 121e12)
    # The tokens' arithmetic is not hidden under the weights' stream (the default).
    assert m.decode_step_s(4, 1000) == pytest.approx(reads_s + compute_s + 0.002)
    # The roofline (everything hidden under the larger) is the floor; in between, a share.
    roof = replace(m, overlap=1.0)
    assert roof.decode_step_s(4, 1000) == pytest.approx(max(reads_s, compute_s) + 0.002)
    half = replace(m, overlap=0.5)
    assert half.decode_step_s(4, 1000) == pytest.approx(reads_s + compute_s / 2 + 0.002)
    for bad in (-0.1, 1.1, math.nan):
        with pytest.raises(ValueError, match=r"overlap must be in \[0, 1\]"):
            replace(m, overlap=bad)
    # A wide batch turns the step compute-bound: the FLOPs set it, not the bytes.
    wide = replace(m, max_num_seqs=4096)
    big = 2 * 2048 * 12e9 / (0.25 * 121e12)
    assert wide.decode_step_s(2048, 100) >= big + 0.002


def test_speculative_decoding_reads_the_drafter_and_divides_the_step_by_the_accepted_length() -> (
    None
):
    shape = replace(SHAPE, drafter_bytes=0.8e9, drafter_params=0.4e9)
    plain = model(shape=shape)
    spec = model(shape=shape, speculation=Speculation(3, 2.5))
    assert spec.decode_step_s(1, 600) > plain.decode_step_s(1, 600)
    p = spec.at_concurrency(1, W)
    assert p.itl_s == pytest.approx(p.step_s / 2.5)
    # At one stream the step is bandwidth-bound: MTP wins; at a large batch compute catches up.
    wide = replace(spec, max_num_seqs=512)
    plain_wide = replace(plain, max_num_seqs=512)
    gain_1 = plain.at_concurrency(1, W).itl_s / spec.at_concurrency(1, W).itl_s
    gain_512 = plain_wide.at_concurrency(512, W).itl_s / wide.at_concurrency(512, W).itl_s
    assert gain_1 > 1.5 > gain_512


def test_closed_loop_obeys_littles_law_and_queues_past_max_num_seqs() -> None:
    m = model()
    for c in (1, 4, 16, 64):
        p = m.at_concurrency(c, W)
        assert p.requests_per_s * p.e2e_s == pytest.approx(c)
        assert p.output_tokens_per_s == pytest.approx(p.requests_per_s * W.output_tokens)
    full, over = m.at_concurrency(16, W), m.at_concurrency(64, W)
    assert over.requests_per_s == pytest.approx(full.requests_per_s)
    assert over.queue_s > 0 and over.ttft_s == pytest.approx(full.ttft_s + over.queue_s)


def test_open_loop_solves_littles_law_and_refuses_beyond_capacity() -> None:
    m = model()
    capacity = m.capacity_rps(W)
    light, heavy = m.at_rate(0.1 * capacity, W), m.at_rate(0.9 * capacity, W)
    assert light.stable and heavy.stable
    assert heavy.e2e_s > light.e2e_s and heavy.batch > light.batch
    assert heavy.in_flight == pytest.approx(0.9 * capacity * heavy.e2e_s)
    assert not m.at_rate(capacity * 1.01, W).stable
    assert math.isinf(m.at_rate(capacity * 1.01, W).ttft_s)


def test_erlang_c_matches_the_single_server_queue() -> None:
    # M/M/1: wait = rho / (mu - lambda).
    assert erlang_c_wait(1, 0.5, 1.0) == pytest.approx(0.5 / (1.0 - 0.5))
    assert math.isinf(erlang_c_wait(4, 4.0, 1.0))
    assert erlang_c_wait(64, 1.0, 1.0) < 1e-12


def test_the_largest_rate_meeting_an_slo_meets_it_and_one_more_does_not() -> None:
    m = model(coefficients=Coefficients())
    rate = m.max_rate_meeting(Slo(ttft_ms=2000), W)
    assert Slo(ttft_ms=2000).met_by(m.at_rate(rate, W))
    assert not Slo(ttft_ms=2000).met_by(m.at_rate(rate * 1.01, W))
    assert m.max_rate_meeting(Slo(ttft_ms=1), W) == 0.0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Workload(0, 10), "prompt_tokens must be in"),
        (lambda: Workload(10, True), "output_tokens must be an integer"),
        (lambda: Slo(ttft_ms=math.nan), "ttft_ms must be a finite number"),
        (lambda: Slo(itl_ms=-1), "itl_ms must be in"),
        (lambda: Coefficients(bandwidth_efficiency=0), "bandwidth_efficiency must be in"),
        (lambda: Coefficients(step_overhead_s=math.inf), "step_overhead_s must be in"),
        (lambda: Speculation(3, 5.0), "mean_accepted_length must be in"),
        (lambda: model().at_rate(math.inf, W), "rate must be a finite number"),
        (lambda: model().at_concurrency(0, W), "concurrency must be in"),
    ],
)
def test_bad_inputs_are_refused_with_the_field_named(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


def test_autoscaling_bounds_cover_the_peak_within_the_slo() -> None:
    m, _ = model_for_settings(load_stack_settings("rtx6000"))
    slo = Slo(ttft_ms=1000, itl_ms=60)
    bounds = autoscaling_bounds(m, W, slo, base_rate=0.0, peak_rate=20.0)
    assert bounds.min_replicas == 0  # scale to zero
    assert bounds.max_replicas * bounds.per_replica_rps >= 20.0
    assert (bounds.max_replicas - 1) * bounds.per_replica_rps < 20.0
    # Planned on the pessimistic side of the band, with headroom, and still meeting the SLO.
    assert bounds.per_replica_rps == pytest.approx(m.max_rate_meeting(slo, W) * 0.8 / (1 + m.band))
    assert slo.met_by(m.at_rate(bounds.per_replica_rps, W))
    assert autoscaling_bounds(m, W, slo, base_rate=5.0, peak_rate=20.0).min_replicas >= 1
    with pytest.raises(ValueError, match="cannot meet"):
        autoscaling_bounds(m, W, Slo(itl_ms=0.01), base_rate=0, peak_rate=1)
    with pytest.raises(ValueError, match="base_rate <= peak_rate"):
        autoscaling_bounds(m, W, slo, base_rate=2, peak_rate=1)
    with pytest.raises(ValueError, match="above the cap"):
        autoscaling_bounds(m, W, slo, base_rate=0, peak_rate=1e6)


def test_the_benchmark_grid_spans_one_to_max_num_seqs_through_the_knee() -> None:
    for stack in ("l4", "rtx6000", "tpu-v6e1"):
        m, _ = model_for_settings(load_stack_settings(stack))
        grid = benchmark_grid(m, W)
        assert grid[0] == 1 and grid[-1] == m.max_num_seqs
        assert grid == sorted(set(grid)) and len(grid) <= 6


def test_an_instance_limit_below_the_engine_slots_sets_the_burst_rate() -> None:
    """Cloud Run lets ``instance_slots`` requests in at once and keeps the rest in its own
    queue: with 2 slots in front of 16 engine slots, 8 one-token requests pass 2 at a time,
    each pair after the last one's answer has left the API server."""
    m = model(coefficients=replace(IDEAL, step_overhead_s=0.001, prefill_overhead_s=0.01))
    w = Workload(16, 1)
    free_mean, free_last = m.burst(8, w)
    gated_mean, gated_last = m.burst(8, w, instance_slots=2)
    _, lone_last = m.burst(1, w)
    assert gated_last > free_last and gated_mean > free_mean
    # 4 rounds of 2, each at least a lone request's time to its answer.
    assert gated_last >= 4 * lone_last - 1e-9
    # Slots at or above the cell change nothing.
    assert m.burst(8, w, instance_slots=8) == (free_mean, free_last)
    assert m.burst(8, w, instance_slots=1)[1] >= 8 * lone_last - 1e-9
    with pytest.raises(ValueError, match="instance_slots"):
        m.burst(8, w, instance_slots=0)
