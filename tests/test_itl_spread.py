"""A token gap's and a first token's measured spreads: built from a benchmark cell's
percentiles, refused when they are not a distribution, carried by a calibration file, and what
they do (and do not do) to the simulation's figures."""

from __future__ import annotations

import dataclasses
import math
import random
import types
from typing import Any, cast

import pytest

from serving.capacity import itl_spread
from serving.capacity.calibration import Calibration, CalibrationError, calibrate
from serving.capacity.perf import Coefficients, StepModel, Workload
from serving.capacity.perf_stack import model_for_settings
from serving.capacity.plan import load_stack_settings
from serving.capacity.simulate import Traffic, simulate

W = Workload(512, 128)
#: The figures of a concurrency-1 closed-loop cell on the sim-check engine (2026-11-29 07:34).
CELL_1: dict[str, Any] = {
    "id": "c1-p512-o128",
    "status": "ok",
    "concurrency": 1,
    "request_rate": None,
    "total_output_tokens": 4096,
    "mean_itl_ms": 3.34,
    "median_itl_ms": 3.11,
    "p90_itl_ms": 4.98,
    "p95_itl_ms": 5.51,
    "p99_itl_ms": 6.98,
}
#: Its first tokens, from the concurrency-1 cell at 512 prompt tokens of the 19:16 sim-check run
#: on an Intel Xeon (2026-11-29): p95 1.9 times the mean.
TTFT_1 = {
    "prompt_tokens": 512,
    "mean_ttft_ms": 33.17,
    "median_ttft_ms": 30.68,
    "p90_ttft_ms": 38.77,
    "p95_ttft_ms": 61.99,
    "p99_ttft_ms": 72.31,
}


def _model() -> StepModel:
    return model_for_settings(load_stack_settings("l4"), calibrations=None)[0]


def test_a_spread_has_the_cells_percentiles_and_mean_one() -> None:
    spread = itl_spread.from_cells([CELL_1])
    assert len(spread) == itl_spread.POINTS
    assert math.fsum(spread) / len(spread) == pytest.approx(1.0, abs=1e-9)
    mean = CELL_1["mean_itl_ms"]
    for q, key in ((0.5, "median"), (0.95, "p95"), (0.99, "p99")):
        assert itl_spread.at(spread, q) * mean == pytest.approx(
            CELL_1[f"{key}_itl_ms"], rel=0.06
        ), key
    assert list(spread) == sorted(spread)
    assert itl_spread.at((), 0.99) == 1.0


def test_a_spread_shows_the_cells_own_ratios() -> None:
    spread = itl_spread.from_cells([CELL_1])
    mean = CELL_1["mean_itl_ms"]
    for q, key in ((0.5, "median_itl_ms"), (0.95, "p95_itl_ms"), (0.99, "p99_itl_ms")):
        assert itl_spread.at(spread, q) * mean == pytest.approx(CELL_1[key], rel=0.02)
    assert itl_spread.at((), 0.95) == 1.0
    assert itl_spread.at(spread, 0.0) == spread[0] and itl_spread.at(spread, 1.0) == spread[-1]


@pytest.mark.parametrize(
    ("figures", "says"),
    [
        ((3.0, 3.0, 2.0, 4.0, 5.0), "p50 <= p90"),  # not ordered
        ((3.0, 0.0, 4.0, 5.0, 6.0), "positive"),
        ((math.nan, 3.0, 4.0, 5.0, 6.0), "positive"),
        ((1.0, 5.0, 6.0, 7.0, 8.0), "does not fit"),  # a mean below half the median
        ((30.0, 1.0, 1.1, 1.2, 1.3), "does not fit"),  # a mean far above every percentile
    ],
)
def test_figures_that_are_no_distribution_are_refused(
    figures: tuple[float, ...], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        itl_spread.from_percentiles(*figures)


def test_only_a_measured_closed_loop_cell_at_concurrency_one_gives_a_spread() -> None:
    open_loop = {**CELL_1, "request_rate": 2.0}  # other requests' prefills share its steps
    failed = {**CELL_1, "status": "failed"}
    busier = {**CELL_1, "concurrency": 4}
    broken = {**CELL_1, "p95_itl_ms": None}
    unsaid = {k: v for k, v in CELL_1.items() if k != "status"}  # not a cell the bench wrote
    assert itl_spread.from_cells([open_loop, failed, busier, broken, unsaid]) == ()
    wider = {**CELL_1, "total_output_tokens": 9000, "p99_itl_ms": 9.0}
    assert itl_spread.from_cells([CELL_1, wider]) == itl_spread.from_cells([wider])


@pytest.mark.parametrize(
    ("spread", "says"),
    [
        ([1.0] * 10, "hold 100"),
        ([0.5] * 50 + [1.5] * 49 + [math.inf], "finite"),
        ([-0.5] * 50 + [2.5] * 50, r"in \[0, 100\]"),
        ([1.5] * 50 + [0.5] * 50, "non-decreasing"),
        ([1.1] * 100, "mean 1"),
        ([True] * 100, "finite numbers"),
    ],
)
def test_a_model_refuses_a_spread_that_is_not_one(spread: list[Any], says: str) -> None:
    with pytest.raises(ValueError, match=f"itl_spread.*{says}|{says}"):
        dataclasses.replace(_model(), itl_spread=tuple(spread))


def test_the_simulation_spreads_token_gaps_and_keeps_every_mean() -> None:
    """A request alone: each gap is a step, so the gaps' percentiles are the spread's times the
    step; the means (ITL, TTFT, E2E) and TTFT/E2E percentiles do not move."""
    plain = _model()
    spread = itl_spread.from_cells([CELL_1])
    spread_model = dataclasses.replace(plain, itl_spread=spread)
    traffic = Traffic(plain.capacity_rps(W) * 1e-4, 512, 128)
    a = simulate(plain, traffic, requests=100)
    b = simulate(spread_model, traffic, requests=100)
    step = plain.single_stream(W).itl_s * 1000
    assert a.latency_ms["itl"]["p95"] == pytest.approx(step, rel=1e-6)
    # Between the spread's two points around p95 (at 0.945 and 0.955), times the step.
    assert step * spread[94] * (1 - 1e-9) <= b.latency_ms["itl"]["p95"] <= step * spread[95]
    assert b.latency_ms["itl"]["p99"] > 1.8 * step
    assert b.latency_ms["itl"]["mean"] == pytest.approx(a.latency_ms["itl"]["mean"], rel=1e-9)
    assert b.latency_ms["ttft"] == a.latency_ms["ttft"]
    assert b.latency_ms["e2e"] == a.latency_ms["e2e"]


def _calibration(**extra: Any) -> dict[str, Any]:
    c = Calibration(
        "nvidia-l4",
        "google/gemma-4-12B-it-qat-w4a16-ct",
        "0.27.1",
        Coefficients(),
        {"ttft": 0.1, "itl": 0.1, "e2e": 0.1},
        {"run": "test"},
        itl_spread=itl_spread.from_cells([CELL_1]),
    )
    return {**c.as_dict(), **extra}


def test_a_calibration_file_carries_its_spread() -> None:
    data = _calibration()
    assert Calibration.from_dict(data, "c.json").itl_spread == itl_spread.from_cells([CELL_1])
    old = {k: v for k, v in data.items() if k != "itl_spread"}  # written before it existed
    assert Calibration.from_dict(old, "c.json").itl_spread == ()


@pytest.mark.parametrize(
    "bad",
    [{"x": 1}, "1.0", [1.0] * 3, [0.5] * 50 + [1.5] * 49 + [2.0], [None] * 100],
)
def test_a_calibration_file_with_a_bad_spread_is_refused_by_name(bad: Any) -> None:
    with pytest.raises(CalibrationError, match=r"c\.json: itl_spread"):
        Calibration.from_dict(_calibration(itl_spread=bad), "c.json")


def test_calibrate_measures_the_spread_of_its_concurrency_one_cell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from serving.capacity import calibration

    # The coefficients' fit is tested elsewhere (tests/bench/test_calibration_synthetic.py).
    monkeypatch.setattr(calibration, "fit", lambda base, obs: base.coefficients)
    monkeypatch.setattr(calibration, "held_out", lambda base, obs: {"itl": 0.05})
    base = _model()
    cells = []
    for c in (1, 2, 4, 6):
        point = base.at_concurrency(c, W)
        itl = point.itl_s * 1000
        cells.append({
            **CELL_1, "id": f"c{c}", "concurrency": c, "completed": 32, "failed": 0,
            "mean_itl_ms": itl, "median_itl_ms": itl * 0.93, "p90_itl_ms": itl * 1.49,
            "p95_itl_ms": itl * 1.65, "p99_itl_ms": itl * 2.09,
            "mean_ttft_ms": point.ttft_s * 1000, "mean_e2el_ms": point.e2e_s * 1000,
            "median_ttft_ms": point.ttft_s * 920, "p90_ttft_ms": point.ttft_s * 1170,
            "p95_ttft_ms": point.ttft_s * 1870, "p99_ttft_ms": point.ttft_s * 2180,
            "mean_output_tokens": 128.0, "median_prompt_tokens": 512, "prompt_tokens": 512,
            "output_tokens": 128, "mean_in_flight": float(c), "server_in_flight": float(c),
        })  # fmt: skip
    fitted = calibrate(base, cells, hardware="h", checkpoint="c", vllm="v", provenance={})
    assert itl_spread.at(fitted.itl_spread, 0.95) == pytest.approx(1.65, rel=0.05)
    assert itl_spread.at(fitted.ttft_spread, 0.95) == pytest.approx(1.87, rel=0.05)
    again = Calibration.from_dict(fitted.as_dict(), "c.json")
    assert (again.itl_spread, again.ttft_spread) == (fitted.itl_spread, fitted.ttft_spread)


def test_a_fit_at_full_efficiency_is_refused_on_a_chip_not_on_a_stand_in() -> None:
    """Steps that do not grow with the batch or the context: only an efficiency of 1 (reads
    that cost nothing) fits. On the stack's chip that is refused as not physical; on a device
    whose figures are only ceilings (sim-check's CPU core) it is the fit."""
    from serving.capacity.calibration import Observation, fit
    from serving.capacity.perf import Device

    base = _model()
    floor = base.shape.weight_bytes / base.device.memory_bandwidth_bytes_per_s
    obs = [
        Observation(f"c{c}-p{p}", c, float(c), float(p), 64.0, 1.05 * floor, None, None, None, None)
        for c in (1, 6)
        for p in (256, 4096)
    ]
    with pytest.raises(CalibrationError, match="not physical"):
        fit(base, obs)
    stand_in = dataclasses.replace(
        base, device=Device("ceilings", 10 * base.device.memory_bandwidth_bytes_per_s,
                            10 * base.device.dense_flops, ceilings_only=True)
    )  # fmt: skip
    fitted = fit(stand_in, obs)
    assert fitted.bandwidth_efficiency <= 1.0


def test_a_first_token_spread_comes_from_the_cells_ttft_and_its_longest_prompt() -> None:
    cell = {**CELL_1, **TTFT_1}
    spread = itl_spread.from_cells([cell], "ttft")
    assert sum(spread) / len(spread) == pytest.approx(1.0, abs=1e-6)
    for q, key in ((0.5, "median_ttft_ms"), (0.95, "p95_ttft_ms"), (0.99, "p99_ttft_ms")):
        assert itl_spread.at(spread, q) * 33.17 == pytest.approx(TTFT_1[key], rel=0.03)
    # Two concurrency-1 cells with as many tokens out: the longer prompt's first tokens.
    short = {**cell, "prompt_tokens": 128, "p95_ttft_ms": 40.0, "p99_ttft_ms": 41.0}
    assert itl_spread.from_cells([cell, short], "ttft") == spread
    assert itl_spread.from_cells([short, cell], "ttft") == spread
    assert itl_spread.from_cells([CELL_1], "ttft") == ()  # no first-token figures: none
    with pytest.raises(ValueError, match="metric must be one of itl, ttft"):
        itl_spread.from_cells([cell], "e2e")


def test_the_simulation_spreads_first_tokens_and_keeps_every_mean() -> None:
    """A request alone: its first token's percentiles are the spread's times its time alone;
    its answer ends as much later as its first token came (E2E moves with it); no mean moves,
    and the token gaps do not."""
    plain = _model()
    spread = itl_spread.from_cells([{**CELL_1, **TTFT_1}], "ttft")
    model = dataclasses.replace(plain, ttft_spread=spread)
    traffic = Traffic(plain.capacity_rps(W) * 1e-4, 512, 128)
    a = simulate(plain, traffic, requests=100)
    b = simulate(model, traffic, requests=100)
    alone = plain.single_stream(W).ttft_s * 1000
    for j, p in ((50, "p50"), (95, "p95"), (99, "p99")):
        # Between the spread's two points around the percentile (at (j - 0.5) / 100 and
        # (j + 0.5) / 100), times the first token alone.
        low, high = alone * spread[j - 1], alone * spread[j]
        assert low * (1 - 1e-9) <= b.latency_ms["ttft"][p] <= high * (1 + 1e-9), p
    assert b.latency_ms["ttft"]["p95"] > 1.7 * alone
    assert b.latency_ms["ttft"]["mean"] == pytest.approx(a.latency_ms["ttft"]["mean"], rel=1e-9)
    assert b.latency_ms["itl"] == a.latency_ms["itl"]
    assert b.latency_ms["e2e"]["mean"] == pytest.approx(a.latency_ms["e2e"]["mean"], rel=1e-9)
    for p in ("p50", "p95", "p99"):  # alone, E2E is its first token plus the same decode
        e2e_moved = b.latency_ms["e2e"][p] - a.latency_ms["e2e"][p]
        ttft_moved = b.latency_ms["ttft"][p] - a.latency_ms["ttft"][p]
        assert e2e_moved == pytest.approx(ttft_moved, abs=1e-6)
    assert b.error["ttft"]["p95"] > 0


def test_a_first_token_is_never_later_than_its_answers_end() -> None:
    """One-token answers: the first token is the answer, so TTFT and E2E are one figure, spread
    or not; with longer answers no TTFT percentile passes E2E's."""
    spread = itl_spread.from_cells([{**CELL_1, **TTFT_1}], "ttft")
    model = dataclasses.replace(_model(), ttft_spread=spread)
    cap = model.capacity_rps(W)
    for rate, output in ((0.01, 1), (0.5, 1), (0.01, 2), (0.7, 16)):
        run = simulate(model, Traffic(cap * rate, 512, output), requests=200)
        for p in ("p50", "p95", "p99", "mean"):
            if output == 1:
                assert run.latency_ms["ttft"][p] == pytest.approx(run.latency_ms["e2e"][p])
            assert run.latency_ms["ttft"][p] <= run.latency_ms["e2e"][p] * (1 + 1e-12)


def test_a_first_tokens_jitter_is_its_own_work_alone_never_the_queue() -> None:
    """What the spread moves of each first token: its time, but never more than its first
    token alone takes, which for a request whose shared prefix is cached is its API-server
    time and its uncached tokens' steps (what the simulation gives it alone), not the whole
    prompt's."""
    from serving.capacity import simulate as sim

    spread = itl_spread.from_cells([{**CELL_1, **TTFT_1}], "ttft")
    plain = _model()
    model = dataclasses.replace(plain, ttft_spread=spread)
    # Alone, as the simulation runs them: requests far apart, the prefix cached after the first.
    far = Traffic(plain.capacity_rps(Workload(2000, 128)) * 1e-4, 2000, 128,
                  shared_prefix_tokens=1900)  # fmt: skip
    cached_alone = simulate(plain, far, requests=20).latency_ms["ttft"]["p50"]
    full_alone = plain.single_stream(Workload(2000, 1)).ttft_s * 1000
    assert cached_alone < full_alone / 2
    reqs = [sim._Req(i, 0.0, 2000, 128) for i in range(4)]
    reqs[1].cached = reqs[2].cached = reqs[3].cached = 1900
    ttft = [5000.0, 5000.0, 100.0, cached_alone]  # queued (uncached, cached); quick; alone
    jitter = sim._Run._first_token_jitter(cast(Any, types.SimpleNamespace(m=model)), reqs, ttft)
    assert jitter[0] == pytest.approx(full_alone, rel=1e-9)
    assert jitter[1] == pytest.approx(cached_alone, rel=0.01)  # the step model's closed form
    assert jitter[2] == 100.0
    assert jitter[3] == pytest.approx(cached_alone, rel=0.01)


def _weighted_quantile(pairs: list[tuple[float, float]], q: float) -> float:
    """The first value (pairs sorted) whose cumulative weight reaches ``q`` of the total."""
    target, acc = q * sum(w for _, w in pairs), 0.0
    for value, weight in pairs:
        acc += weight
        if acc >= target:
            return value
    return pairs[-1][0]


@pytest.mark.parametrize("spread", [(1.0,), itl_spread.from_cells([CELL_1])])
def test_the_gaps_percentiles_are_the_weighted_quantiles_of_every_spread_gap(
    spread: tuple[float, ...],
) -> None:
    """The token gaps' figures (computed in NumPy), with a spread and without one, are the
    weighted quantiles, mean and evenly spread sample of every gap at every multiplier,
    written out in full."""
    from serving.capacity import simulate as sim

    rng = random.Random(7)
    gaps = [(rng.uniform(2.0, 40.0), rng.choice((1.0, 2.0, 5.5))) for _ in range(300)]
    gaps += [(10.0, 1.0)] * 20  # ties
    full, n = 12.0, 50
    latency, error = sim._gap_figures(gaps, spread, full, n)
    pairs = sorted((v + (f - 1.0) * min(v, full), w / len(spread)) for v, w in gaps for f in spread)
    total = sum(w for _, w in pairs)
    expanded = [_weighted_quantile(pairs, (j + 0.5) / n) for j in range(n)]
    for name, q in sim.PERCENTILES.items():
        assert latency[name] == pytest.approx(_weighted_quantile(pairs, q), rel=1e-12)
        assert error[name] == pytest.approx(sim._order_error(expanded, q, n), rel=1e-9)
    assert latency["mean"] == pytest.approx(sum(v * w for v, w in pairs) / total, rel=1e-12)


def test_a_first_token_that_queued_spreads_by_its_own_work_not_by_the_queue() -> None:
    """Past capacity first tokens wait seconds: each moves by at most what its first token
    alone spreads by, so a percentile moves by no more than that, not by a multiple of the
    wait."""
    plain = _model()
    spread = itl_spread.from_cells([{**CELL_1, **TTFT_1}], "ttft")
    model = dataclasses.replace(plain, ttft_spread=spread)
    traffic = Traffic(plain.capacity_rps(W) * 1.5, 512, 128)
    # A spread of ones: every first token at each of the 100 points, unmoved (the same
    # percentiles' definition over the same count of values).
    a = simulate(
        dataclasses.replace(plain, ttft_spread=(1.0,) * 100), traffic, requests=400, seed=3
    )
    b = simulate(model, traffic, requests=400, seed=3)
    assert a.saturated and a.latency_ms["ttft"]["p95"] > 20 * plain.single_stream(W).ttft_s * 1e3
    widest = (max(spread) - 1.0) * plain.single_stream(W).ttft_s * 1000
    for p in ("p50", "p95", "p99"):
        assert abs(b.latency_ms["ttft"][p] - a.latency_ms["ttft"][p]) <= widest * (1 + 1e-9)


def test_a_calibration_file_carries_its_first_token_spread() -> None:
    spread = itl_spread.from_cells([{**CELL_1, **TTFT_1}], "ttft")
    data = _calibration(ttft_spread=list(spread))
    assert Calibration.from_dict(data, "c.json").ttft_spread == spread
    old = {k: v for k, v in data.items() if k != "ttft_spread"}  # written before it existed
    assert Calibration.from_dict(old, "c.json").ttft_spread == ()
    for bad in ({"x": 1}, [1.0] * 3, [0.5] * 50 + [1.5] * 49 + [2.0]):
        with pytest.raises(CalibrationError, match=r"c\.json: ttft_spread"):
            Calibration.from_dict(_calibration(ttft_spread=bad), "c.json")
    with pytest.raises(ValueError, match="ttft_spread"):
        dataclasses.replace(_model(), ttft_spread=(1.0,) * 3)
