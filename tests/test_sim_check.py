"""The pure parts of scripts/sim-check (enginecheck/simcheck.py): no engine, no server."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from bench.load.hotload import arrival_gap
from bench.load.server_metrics import Histogram
from enginecheck import simcheck

FAMILY = "vllm:time_to_first_token_seconds"


def _metrics(ttft: dict[float, int], waiting: float = 0.0, model: str = "m") -> str:
    """A /metrics text with one TTFT histogram (cumulative counts per bound) and the gauge."""
    lines = [f"# TYPE {FAMILY} histogram"]
    for le, count in ttft.items():
        bound = "+Inf" if le == float("inf") else repr(le)
        lines.append(f'{FAMILY}_bucket{{le="{bound}",model_name="{model}"}} {count}')
    total = max(ttft.values())
    lines += [
        f'{FAMILY}_count{{model_name="{model}"}} {total}',
        f'{FAMILY}_sum{{model_name="{model}"}} {total * 0.05}',
        "# TYPE vllm:num_requests_waiting gauge",
        f'vllm:num_requests_waiting{{model_name="{model}"}} {waiting}',
    ]
    return "\n".join(lines) + "\n"


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    # 10 below 0.1 s, 30 more by 0.25 s, 60 more by 0.5 s.
    h = Histogram(0.0, 100.0, ((0.1, 10.0), (0.25, 40.0), (0.5, 100.0), (float("inf"), 100.0)))
    assert simcheck.histogram_quantile(h, 0.05) == pytest.approx(0.05)
    assert simcheck.histogram_quantile(h, 0.25) == pytest.approx(0.1 + 0.15 * 15 / 30)
    assert simcheck.histogram_quantile(h, 0.95) == pytest.approx(0.25 + 0.25 * 55 / 60)
    assert simcheck.histogram_quantile(Histogram(0.0, 0.0, ((1.0, 0.0),)), 0.5) is None


def test_histogram_quantile_in_the_inf_bucket_is_the_highest_bound() -> None:
    h = Histogram(0.0, 10.0, ((0.1, 5.0), (1.0, 8.0), (float("inf"), 10.0)))
    assert simcheck.histogram_quantile(h, 0.99) == 1.0


def test_server_percentiles_are_of_the_cell_alone() -> None:
    """Only what was served between the scrapes counts: the earlier requests (all under 10 ms
    here) are subtracted, so p50 lies in the cell's own bucket."""
    inf = float("inf")
    before = _metrics({0.01: 50, 0.1: 50, 1.0: 50, inf: 50})
    after = _metrics({0.01: 50, 0.1: 50, 1.0: 150, inf: 150})
    figures = simcheck.server_percentiles(before, after, "m")
    assert figures["ttft"]["p50"] == pytest.approx((0.1 + 0.9 * 0.5) * 1000)
    assert figures["ttft"]["p99"] == pytest.approx((0.1 + 0.9 * 0.99) * 1000)
    assert figures["itl"] == {"p50": None, "p95": None, "p99": None}  # not exported
    other = simcheck.server_percentiles(before, after, "another-model")
    assert other["ttft"]["p50"] is None


def test_measured_and_simulated_percentiles() -> None:
    cell = {"median_ttft_ms": 10.0, "p95_ttft_ms": 20.0, "p99_ttft_ms": 30.0,
            "median_itl_ms": 3.0, "p95_itl_ms": 4.0, "p99_itl_ms": None}  # fmt: skip
    assert simcheck.measured_percentiles(cell) == {
        "ttft": {"p50": 10.0, "p95": 20.0, "p99": 30.0},
        "itl": {"p50": 3.0, "p95": 4.0, "p99": None},
    }
    latency = {m: {"p50": 1.0, "p95": 2.0, "p99": 3.0, "mean": 1.5} for m in ("ttft", "itl", "e2e")}
    assert simcheck.simulated_percentiles(latency)["itl"] == {"p50": 1.0, "p95": 2.0, "p99": 3.0}


def test_waiting_gauge() -> None:
    assert simcheck.waiting(_metrics({1.0: 1}, waiting=7)) == 7.0
    assert simcheck.waiting("# nothing\n") == 0.0


@pytest.mark.parametrize(
    ("samples", "grew"),
    [
        ([0, 1, 0, 2, 1, 0, 1, 2, 0], False),  # fluctuates
        ([0, 2, 5, 9, 14, 18, 23, 27, 31], True),  # climbs through the cell
        ([30, 28, 25, 20, 15, 10, 5, 2, 0], False),  # drains
        ([0, 5], False),  # too short to tell
    ],
)
def test_queue_growth(samples: list[float], grew: bool) -> None:
    assert simcheck.queue_grew(samples, requests=200) is grew


def test_queue_samples_while_sending() -> None:
    """A saturated cell's queue climbs while it sends, then drains: only the climb counts."""
    start = dt.datetime(2026, 11, 29, 6, 0, 0, tzinfo=dt.UTC)
    cell = {"started_at": start.isoformat(), "finished_at": (start + dt.timedelta(seconds=40))
            .isoformat(), "achieved_request_rate": 10.0}  # fmt: skip
    t0 = start.timestamp()
    climb = [(t0 + 0.5 * i, float(i)) for i in range(40)]  # 20 s of sending (200 at 10/s)
    drain = [(t0 + 20 + 0.5 * i, float(40 - i)) for i in range(1, 40)]
    samples = [(t0 - 5, 0.0), *climb, *drain]
    queue = simcheck.while_sending(samples, cell, requests=200)
    assert queue == [w for _, w in climb] + [39.0]  # to the last send (19.9 s), 1 s of slack
    assert simcheck.queue_grew(queue, 200)
    assert not simcheck.queue_grew([w for _, w in samples], 200)  # the drain hides the climb
    unsent = {**cell, "achieved_request_rate": None}
    assert len(simcheck.while_sending(samples, unsent, requests=200)) == 40 + 39  # to the end


def test_scheduled_rate_is_the_benchmarks_schedule() -> None:
    rng = random.Random(5)
    due = list(itertools.accumulate(arrival_gap(rng, 4.0, 0.25) for _ in range(99)))
    assert simcheck.scheduled_rate(4.0, 0.25, 5, 100) == pytest.approx(99 / due[-1])


@pytest.mark.parametrize(
    ("achieved", "scheduled", "queue", "saturated"),
    [
        (9.6, 10.0, False, False),
        (9.4, 10.0, False, True),  # the client could not keep the schedule
        (10.0, 10.0, True, True),  # the server's queue grew
        (None, 10.0, False, True),  # no rate measured
    ],
)
def test_measured_saturation(
    achieved: float | None, scheduled: float, queue: bool, saturated: bool
) -> None:
    assert simcheck.measured_saturated(achieved, scheduled, queue) is saturated


@pytest.mark.parametrize("text", ["", "0", "-1,2", "1,x", "nan", "inf", "1,1001", ",,"])
def test_rates_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--rates"):
        simcheck.parse_rates(text)


def test_rates_parsed() -> None:
    assert simcheck.parse_rates("0.5, 2,10") == (0.5, 2.0, 10.0)


def _figures(ttft: float, itl: float) -> simcheck.Figures:
    return {
        "ttft": {"p50": ttft, "p95": 2 * ttft, "p99": 3 * ttft},
        "itl": {"p50": itl, "p95": 2 * itl, "p99": 3 * itl},
    }


def _row(rate: float, saturated: bool, sim_ttft: float, sim_saturated: bool = False) -> Any:
    measured = _figures(100.0, 4.0)
    row = {"rate": rate, "burstiness": 1.0, "saturated": saturated, "measured": measured,
           "server": _figures(110.0, 4.0), "simulated": _figures(sim_ttft, 4.0)}  # fmt: skip
    misses = simcheck.row_misses(row, sim_saturated)
    return {**row, "within_target": not misses}, misses


def test_row_targets() -> None:
    assert _row(1.0, False, 115.0)[1] == []  # p95 +15 %, p99 +15 %
    assert _row(1.0, False, 125.0)[1] == ["ttft p95 +25%"]  # p99 +25 % is within 30 %
    assert _row(1.0, False, 60.0)[1] == ["ttft p95 -40%", "ttft p99 -40%"]
    assert _row(1.0, False, 100.0, sim_saturated=True)[1] == [
        "the simulation saturated where the engine kept up"
    ]
    # Past saturation nothing is compared row by row: the saturation rate's target judges it.
    assert _row(3.0, True, 900.0, sim_saturated=True)[1] == []
    assert _row(3.0, True, 100.0)[1] == []


def test_report_shape_and_exit_status() -> None:
    rows = [_row(1.0, False, 110.0)[0], _row(2.0, False, 105.0)[0], _row(3.0, True, 900.0, True)[0]]
    bursty = {**_row(1.5, False, 100.0)[0], "burstiness": 0.25}
    doc = simcheck.report("AMD EPYC", [*rows, bursty], 2.1)
    assert set(doc) == {"cpu", "saturation_rps", "rates", "repeat", "repeat_not_run", "machine"}
    assert doc["repeat"] is None and doc["machine"] is None
    assert doc["saturation_rps"] == {"measured": 2.0, "simulated": 2.1}
    for r in doc["rates"]:
        assert set(r) == {"rate", "burstiness", "saturated", "measured", "server", "simulated",
                          "within_target"}  # fmt: skip
        for source in ("measured", "server", "simulated"):
            assert set(r[source]) == {"ttft", "itl"}
            assert set(r[source]["ttft"]) == {"p50", "p95", "p99"}
    assert simcheck.exit_status(doc) == 0
    # The simulation saturating 20 % past the first saturated rate misses the target.
    assert simcheck.exit_status(simcheck.report("cpu", rows, 3.7)) == 1
    # One rate missing its percentile target fails the run.
    assert (
        simcheck.exit_status(simcheck.report("cpu", [*rows, _row(0.5, False, 200.0)[0]], 2.1)) == 1
    )


@pytest.mark.parametrize(
    ("low", "high", "simulated", "ok"),
    [
        (2.0, 3.0, 2.5, True),
        (2.0, 3.0, 1.85, True),  # within 10 % below the highest rate kept up with
        (2.0, 3.0, 1.7, False),
        (2.0, 3.0, 3.25, True),
        (2.0, 3.0, 3.4, False),
        (2.0, None, 5.0, True),  # no rate saturated: only the lower side bounds it
        (None, 1.0, 1.05, True),
        (None, None, 1.0, False),
        (2.0, 3.0, None, False),
    ],
)
def test_saturation_within(
    low: float | None, high: float | None, simulated: float | None, ok: bool
) -> None:
    assert simcheck.saturation_within(low, high, simulated) is ok


def test_saturation_measured_takes_poisson_rates_only() -> None:
    rows = [
        {"rate": 1.0, "burstiness": 1.0, "saturated": False},
        {"rate": 2.0, "burstiness": 1.0, "saturated": False},
        {"rate": 2.5, "burstiness": 1.0, "saturated": True},
        {"rate": 3.0, "burstiness": 1.0, "saturated": True},
        {"rate": 1.5, "burstiness": 0.25, "saturated": True},
    ]
    assert simcheck.saturation_measured(rows) == (2.0, 2.5)
    assert simcheck.saturation_measured(rows[:2]) == (2.0, None)
    # The rate each schedule offered (what the engine was sent), not the one asked.
    sent = [{**r, "scheduled_rate": r["rate"] * 0.9} for r in rows]
    assert simcheck.saturation_measured(sent) == pytest.approx((1.8, 2.25))


def test_tiny_shape_reads_the_config() -> None:
    config = {"layer_types": ["sliding_attention"] * 5 + ["full_attention"],
              "num_key_value_heads": 2, "head_dim": 32, "num_global_key_value_heads": 1,
              "global_head_dim": 64, "attention_k_eq_v": True, "sliding_window": 1024}  # fmt: skip
    shape = simcheck.tiny_shape(config, 4e6, 2e6, kv_dtype_bytes=1)
    sliding, full = shape.kv_layers
    assert (sliding.layers, sliding.bytes_per_token, sliding.window) == (5, 128, 1024)
    assert (full.layers, full.bytes_per_token, full.window) == (1, 64, None)
    assert shape.kv_bytes_read(2048) == 5 * 128 * 1024 + 64 * 2048


def test_the_fits_far_sides_scale_every_step() -> None:
    from dataclasses import replace as _replace

    from serving.capacity.perf import Coefficients, Workload
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    base = model_for_settings(load_stack_settings("l4"), calibrations=None)[0]
    coefficients = Coefficients(0.03, 0.04, 0.0016, 0.09, 0.0024)
    model = _replace(base, coefficients=coefficients, front_end_s=0.0)  # as sim-check has it
    w = Workload(512, 128)
    for factor in (0.94, 1.06):
        side = simcheck.scaled(model, factor)
        for c in (1, 4, 6):
            assert side.at_concurrency(c, w).e2e_s == pytest.approx(
                factor * model.at_concurrency(c, w).e2e_s, rel=1e-9
            )
    for wrong in (0.3, 2.5, float("nan")):
        with pytest.raises(ValueError, match="speed factor"):
            simcheck.scaled(model, wrong)


def test_within_the_fits_band() -> None:
    measured = _figures(100.0, 4.0)
    # The fit's faster side under-predicts by 30 %, its slower side over-predicts by 10 %.
    assert simcheck.within_band(measured, _figures(70.0, 4.0), _figures(110.0, 4.0))
    # Both sides 40 % under the measured TTFT: beyond the 20 % target of either side.
    assert not simcheck.within_band(measured, _figures(55.0, 4.0), _figures(60.0, 4.0))
    assert not simcheck.within_band(measured, _figures(90.0, 2.0), _figures(110.0, 2.5))
    missing = {"ttft": {"p50": 1.0, "p95": None, "p99": 3.0}, "itl": measured["itl"]}
    assert not simcheck.within_band(missing, measured, measured)


def test_engine_steps_from_the_real_engines_counter() -> None:
    """The steps the engine ran over a cell: the count of vLLM's tokens-per-iteration histogram
    between two /metrics texts the real CPU engine served (tests/data/engine-metrics)."""
    data = Path(__file__).parent / "data" / "engine-metrics"
    before = (data / "iteration-tokens-before.txt").read_text()
    after = (data / "iteration-tokens-after.txt").read_text()
    served = "google/gemma-4-12B-it-qat-w4a16-ct"
    assert simcheck.engine_steps(before, after, served) == 23494 - 19138
    assert simcheck.engine_steps(before, after, "another-model") is None
    assert simcheck.engine_steps(after, before, served) is None  # a restarted server
    assert simcheck.engine_steps(_metrics({1.0: 1}), after, served) is None  # no histogram


def _cell(rate: float, saturated: bool, ttft_p95: float, seed: int = 4) -> dict[str, Any]:
    figures = {
        "ttft": {"p50": 40.0, "p95": ttft_p95, "p99": ttft_p95 * 1.2},
        "itl": {"p50": 4.0, "p95": 9.0, "p99": 20.0},
    }
    return {"rate": rate, "burstiness": 1.0, "seed": seed, "saturated": saturated,
            "measured": figures}  # fmt: skip


def test_the_repeated_rate_is_the_kept_up_poisson_rate_nearest_the_share_of_capacity() -> None:
    rows = [_cell(1.0, False, 50), _cell(5.0, False, 90), _cell(6.5, False, 300),
            {**_cell(5.2, False, 80), "burstiness": 0.25}, _cell(9.0, True, 4000)]  # fmt: skip
    # 0.85 x 8 = 6.8: the 6.5 row; the bursty 5.2 and the saturated 9.0 are never repeated.
    assert simcheck.repeat_choice(rows, 8.0) == 2
    assert simcheck.repeat_choice(rows, 6.0) == 1  # 5.1: the 5.0 row, not the bursty 5.2
    assert simcheck.repeat_choice(rows, 100.0) == 2  # the highest kept up with
    assert simcheck.repeat_choice([rows[3], rows[4]], 8.0) is None
    # Equally near in exact arithmetic (0.57 and 1.13 around 0.85): the lower, whatever the
    # floating point makes of the two distances.
    assert simcheck.repeat_choice([_cell(1.13, False, 90), _cell(0.57, False, 50)], 1.0) == 1


def test_the_engine_against_itself() -> None:
    first = _cell(6.5, False, 300.0)
    same = simcheck.repeat_report(first, _cell(6.5, False, 330.0))
    assert same["difference"]["ttft"]["p95"] == pytest.approx(0.10)
    assert same["difference"]["itl"] == {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    assert same["within_targets"] is True
    assert "within the targets" in simcheck.repeat_line(same)
    # The same arrivals, the first token's p95 half again as long: the engine missed the
    # target against itself, and the line says what that means for the simulation's misses.
    moved = simcheck.repeat_report(first, _cell(6.5, False, 450.0))
    assert moved["difference"]["ttft"]["p95"] == pytest.approx(0.5)
    assert moved["within_targets"] is False
    line = simcheck.repeat_line(moved)
    assert "TTFT p95 +50%" in line and "not the simulation's alone" in line
    # Saturated the second time: not within, said.
    again = simcheck.repeat_report(first, _cell(6.5, True, 330.0))
    assert again["within_targets"] is False and "saturated the second time" in (
        simcheck.repeat_line(again)
    )
    assert "not run (it kept up with no Poisson rate)" in simcheck.repeat_line(None)
    assert "not run (it failed: refused)" in simcheck.repeat_line(None, "it failed: refused")
    doc = simcheck.report("cpu", [first], 7.0, moved)
    assert doc["repeat"]["difference"]["ttft"]["p95"] == pytest.approx(0.5)
    assert doc["repeat_not_run"] is None
    refused = simcheck.report("cpu", [first], 7.0, None, "it failed: refused")
    assert refused["repeat"] is None and refused["repeat_not_run"] == "it failed: refused"
    # The line's percentages come from the unrounded difference: 462.79 to 2,857.70 ms is
    # +517 %, not the +518 % a difference rounded first to 5.175 prints.
    wide = simcheck.repeat_report(_cell(4.42, False, 462.7868), _cell(4.42, False, 2857.701))
    assert "TTFT p95 +517%" in simcheck.repeat_line(wide)
    # A figure the first run did not measure: not judged, and said so (never "NOT within").
    unmeasured = _cell(6.5, False, 300.0)
    unmeasured["measured"]["itl"]["p99"] = None
    blind = simcheck.repeat_report(unmeasured, _cell(6.5, False, 300.0))
    assert blind["within_targets"] is None
    assert "not judged" in simcheck.repeat_line(blind)
    assert "ITL p99 not measured" in simcheck.repeat_line(blind)
    # The engine's step counts of both runs are kept (an open cell's count, or None).
    steps = simcheck.repeat_report(
        {**first, "engine_steps": 3848}, {**_cell(6.5, False, 330.0), "engine_steps": None}
    )
    assert steps["engine_steps"] == {"first": 3848, "again": None}


def test_the_machine_probe_reads_what_its_code_prints() -> None:
    """The probe's own code, run here, prints what probe_ms reads: its median in ms."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", simcheck.PROBE_CODE], capture_output=True, text=True, check=True
    )
    values = json.loads(done.stdout)
    ms = simcheck.probe_ms(done.stdout)
    middle = sorted(values)[len(values) // 2 - 1 : len(values) // 2 + 1]  # 30: an even count
    assert len(values) == simcheck.PROBE_REPEATS
    assert ms == pytest.approx(sum(middle) / 2 * 1000, abs=1e-3)
    assert 0 < ms < simcheck.PROBE_MAX_S * 1000


@pytest.mark.parametrize(
    ("printed", "says"),
    [
        ("", "no JSON list"),
        ("Traceback (most recent call last):", "no JSON list"),
        (json.dumps([0.01] * 29 + ["0.01"]), "duration 29 is 0.01: expected seconds"),
        (json.dumps([0.01] * 29 + [True]), "duration 29 is True: expected"),
        (json.dumps([0.01] * 29 + [1]), "duration 29 is 1: expected"),
        (json.dumps([0.01] * 29 + [0.0]), "duration 29 is 0.0: expected"),
        (json.dumps([1e-7] * 30), "duration 0 is 1e-07: expected"),
        (json.dumps([0.01] * 29 + [-0.01]), "duration 29 is -0.01"),
        (json.dumps([0.01] * 29 + [11.0]), "duration 29 is 11.0"),
        (json.dumps([0.01] * 29 + [[0.01]]), "duration 29 is [0.01]"),
        ("[" + ", ".join(["0.01"] * 29 + ["NaN"]) + "]", "no JSON list (holds NaN"),
        ("[" + ", ".join(["0.01"] * 29 + ["Infinity"]) + "]", "no JSON list (holds Infinity"),
        ("[" + ", ".join(["0.01"] * 29 + ["1e400"]) + "]", "no JSON list (holds the number 1e400"),
        (json.dumps([0.01] * 30) + "\n" + json.dumps([0.01] * 30), "no JSON list (not valid"),
        ('{"a": 1}', "printed something else, not a list of 30 durations: '{\"a\": 1}'"),
        ("null", "printed something else, not a list of 30 durations: 'null'"),
        ("[0.01, 0.02]", "printed a list of 2, not a list of 30 durations: '[0.01, 0.02]'"),
        ("[" * 1500 + "]" * 1500, "characters"),
        ("[" * 50 + "]" * 50, "a list of 1, not"),  # nested: shallow enough for any json
        ("[" + "0.0" * 2000 + "]", "characters"),
    ],
)
def test_a_machine_probe_reading_of_another_shape_is_refused(printed: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        simcheck.probe_ms(printed)


def test_the_machine_report_says_how_far_the_machine_moved() -> None:
    readings = [("the closed loop", 16.5), ("rate 1, burstiness 1", None),
                ("rate 2, burstiness 1", 22.9), ("the end", 18.0)]  # fmt: skip
    machine = simcheck.machine_report(readings)
    assert machine["readings"][1] == {"before": "rate 1, burstiness 1", "ms": None}
    assert machine["slowest_over_fastest"] == pytest.approx(22.9 / 16.5, abs=1e-3)
    line = simcheck.machine_line(machine)
    assert "3 readings" in line and "16.5 to 22.9 ms" in line and "1.39 times" in line
    doc = simcheck.report("cpu", [], None, machine=machine)
    assert doc["machine"] == machine
    # One reading (or none, or no report) says nothing of movement.
    one = simcheck.machine_report([("the closed loop", 16.5), ("the end", None)])
    assert one["slowest_over_fastest"] is None
    for m in (one, simcheck.machine_report([]), None):
        assert simcheck.machine_line(m) == "the machine itself: fewer than two readings"
