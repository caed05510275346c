"""The validation against published figures follows its rules: each cell is run as its client
ran it, derived terms come from fit rows only, the band is derived from the error, and no
prediction needs more than the chip has."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from serving.capacity import perf_validation as pv
from serving.capacity.evidence import evidence
from serving.capacity.perf import Workload

_CACHED = (
    pv.derived_front_end,
    pv.derived_in_flight_cap,
    pv.fit_client_terms,
    pv.check_rows,
    pv.derived_band,
)


def _clear() -> None:
    for fn in _CACHED:
        fn.cache_clear()


@pytest.fixture
def edited(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[Callable[[dict[str, Any]], None]], None]]:
    """Run the validation over an edited copy of the evidence file's validation part."""

    def edit(change: Callable[[dict[str, Any]], None]) -> None:
        data = copy.deepcopy(evidence()["validation"])
        change(data)
        monkeypatch.setattr(pv, "_validation", lambda: data)
        _clear()

    yield edit
    monkeypatch.undo()
    _clear()


def _derived() -> tuple[float | None, float | None, int | None, pv.ClientTerms, pv.ClientTerms]:
    return (
        pv.derived_front_end("tpu-vm"),
        pv.derived_front_end("cloud-run"),
        pv.derived_in_flight_cap("tpu"),
        pv.fit_client_terms("sweep"),
        pv.fit_client_terms("grid"),
    )


def test_the_stored_client_terms_are_the_fit() -> None:
    """The evidence file records what the joint fit gives (a plan reads it, not the search):
    change a fit row and this fails until the file is brought back to the fit."""
    for client in evidence()["validation"]["derived_terms"]:
        assert pv.derived_client_terms(client) == pv.fit_client_terms(client), client


def test_a_setups_derived_step_is_its_rows_alone() -> None:
    """The extra step of the setup whose server settings were not recorded lengthens its own
    rows only: the other setups of the same client and this project's stacks keep the priors."""
    from serving.capacity.perf import Coefficients
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    terms = pv.derived_client_terms("sweep")
    assert terms.setup == "l4" and 0.0 < terms.step_extra_s < pv.MAX_STEP_EXTRA_S
    prior = Coefficients().step_overhead_s
    assert pv.model_for_config("l4").coefficients.step_overhead_s == pytest.approx(
        prior + terms.step_extra_s
    )
    assert pv.model_for_config("rtx").coefficients.step_overhead_s == prior
    assert pv.model_for_config("tpu").coefficients.step_overhead_s == prior
    for stack in ("l4", "gke-l4"):
        model, _ = model_for_settings(load_stack_settings(stack))
        assert model.coefficients.step_overhead_s == prior, stack


def test_holdout_rows_set_nothing(
    edited: Callable[[Callable[[dict[str, Any]], None]], None],
) -> None:
    before = _derived()

    def scramble(data: dict[str, Any]) -> None:
        for row in data["rows"]:
            if row["holdout"]:
                row["latency_s"] *= 7.0
                row["requests_per_s"] /= 3.0

    edited(scramble)
    assert _derived() == before


def test_the_derived_terms_follow_the_fit_rows(
    edited: Callable[[Callable[[dict[str, Any]], None]], None],
) -> None:
    cap_before = pv.derived_in_flight_cap("tpu")
    before = pv.fit_client_terms("sweep")
    assert cap_before is not None

    def slower(data: dict[str, Any]) -> None:
        for row in data["rows"]:
            if not row["holdout"] and row["config"] in ("tpu", "rtx", "l4"):
                row["requests_per_s"] /= 2.0

    edited(slower)
    # Half the rate at the same latency: half as many requests in flight.
    cap_after = pv.derived_in_flight_cap("tpu")
    assert cap_after is not None and abs(cap_after - cap_before / 2.0) <= 1.0
    # Cells that took longer on the wall: the client's time per request or the L4 setup's
    # time per step grows, neither shrinks.
    after = pv.fit_client_terms("sweep")
    assert after.send_gap_s >= before.send_gap_s
    assert after.step_extra_s >= before.step_extra_s
    assert after != before


def test_a_derived_front_end_is_labelled_and_used_by_the_product() -> None:
    seconds, measured, source = pv.front_end("tpu-vm")
    assert not measured and "DERIVED" in source
    assert seconds == pv.derived_front_end("tpu-vm")
    assert seconds >= 0.0


def test_cloud_runs_front_end_is_its_one_user_fit_cells(
    edited: Callable[[Callable[[dict[str, Any]], None]], None],
) -> None:
    """Cloud Run's front end is DERIVED from the fit cells with one request in flight (the
    recorded FP8 grid's), the product uses it, and it moves with those cells alone."""
    seconds, measured, source = pv.front_end("cloud-run")
    assert not measured and source.startswith("DERIVED")
    one_user = [
        r
        for r in evidence()["validation"]["rows"]
        if not r["holdout"] and r["concurrency"] == 1 and r["config"].startswith(("rtx", "l4"))
    ]
    assert len(one_user) >= 3
    # Published one-user latency minus a short engine time: within the cells' own range.
    assert (
        min(r["latency_s"] for r in one_user) - 0.05
        < seconds
        < max(r["latency_s"] for r in one_user)
    )

    def later(data: dict[str, Any]) -> None:
        for row in data["rows"]:
            if not row["holdout"] and row["concurrency"] == 1 and row["config"] == "rtx-fp8":
                row["latency_s"] += 0.1

    # The product adds the same figure to a Cloud Run stack's latencies.
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    model, _ = model_for_settings(load_stack_settings("l4"), calibrations=None)
    assert model.front_end_s == seconds

    edited(later)
    assert pv.front_end("cloud-run")[0] == pytest.approx(seconds + 0.1)


def test_gkes_front_end_stands_in_from_cloud_runs(
    edited: Callable[[Callable[[dict[str, Any]], None]], None],
) -> None:
    """One default: GKE's stand-in is Cloud Run's front end plus the endpoint picker's time,
    so a change to Cloud Run's evidence reaches it."""
    entry = evidence()["front_end"]["gke"]
    seconds, measured, source = pv.front_end("gke")
    assert not measured and "stand-in" in source.lower()
    assert seconds == pytest.approx(pv.front_end("cloud-run")[0] + float(entry["plus_seconds"]))

    def later(data: dict[str, Any]) -> None:
        for row in data["rows"]:
            if not row["holdout"] and row["concurrency"] == 1 and row["config"] == "rtx-fp8":
                row["latency_s"] += 0.05

    edited(later)
    assert pv.front_end("gke")[0] == pytest.approx(seconds + 0.05)


def test_a_setup_served_in_another_weight_format_uses_its_own_bytes() -> None:
    """The FP8 setup's vLLM quantised a bf16 checkpoint as it loaded it: its model reads the
    setup's weight bytes, not the catalogue's bf16 24 GB, and its kernel path (fp8 on
    Blackwell) has no published prior, so the generic one stands in."""
    from serving.capacity.evidence import efficiency_prior
    from serving.catalog.hardware import HARDWARE
    from serving.catalog.models import MODELS

    cfg = evidence()["validation"]["configs"]["rtx-fp8"]
    model = pv.model_for_config("rtx-fp8")
    catalogue = MODELS[cfg["checkpoint"]]
    assert model.shape.weight_bytes == pytest.approx(cfg["weights"]["bytes"])
    assert catalogue.weight_bytes > 1.5 * cfg["weights"]["bytes"]
    efficiency, measured, source = efficiency_prior(catalogue, HARDWARE["rtx-pro-6000"], "fp8")
    assert not measured and "fp8" in source
    assert model.coefficients.bandwidth_efficiency == efficiency


def test_each_row_sends_what_its_client_script_sends() -> None:
    for check in pv.check_rows():
        row = check.row
        client = evidence()["validation"]["configs"][row["config"]]["client"]
        c = int(row["concurrency"])
        assert row["output_tokens"] == client["output_tokens"]
        if client["name"] == "grid":  # min(max(c, 5), 100) requests through Semaphore(c)
            assert row["requests"] == min(max(c, 5), 100)
        else:  # c requests at once
            assert row["requests"] == c
        assert client["script"] and row["source"]


def test_the_band_is_the_narrowest_that_covers_80_percent() -> None:
    for s in pv.summary():
        band = s["band"]
        assert s["all"]["coverage"] >= pv.COVERAGE
        ratios = [r for c in pv.check_rows() if c.hardware == s["hardware"] for r in c.ratios()]
        narrower = band * (1 - 1e-6) - 1e-9
        inside = [1 / (1 + narrower) <= r <= 1 + narrower for r in ratios]
        assert sum(inside) / len(inside) < pv.COVERAGE


def test_no_predicted_cell_computes_faster_than_the_chip() -> None:
    """Every token the engine computes in a cell (the uncached prompt, each output token) at
    2 FLOPs a parameter, over the predicted wall time, stays within the dense peak."""
    for check in pv.check_rows():
        row = check.row
        model = pv.model_for_config(row["config"])
        # At least the uncached prompt and every output token are computed.
        computed = row["prompt_tokens"] - row.get("cached_prompt_tokens", 0) + row["output_tokens"]
        flops = row["requests"] * 2.0 * model.shape.params * computed
        wall = row["requests"] / check.predicted_requests_per_s
        assert flops / wall <= model.device.dense_flops


def test_a_client_with_one_slot_sends_one_request_after_another() -> None:
    model = pv.model_for_config("rtx")
    w = Workload(128, 4)
    alone, _ = model.burst(1, w)
    mean, last = model.burst(5, w, client_slots=1, return_gap_s=0.05)
    # Each is timed from when its slot freed (the caller adds the front end): alone.
    assert mean == pytest.approx(alone)
    assert last == pytest.approx(5 * alone + 4 * 0.05)


def test_a_serial_client_makes_each_request_wait_its_turn() -> None:
    model = pv.model_for_config("rtx")
    w = Workload(128, 4)
    alone, _ = model.burst(1, w)
    gap = 10.0  # long enough that each request is alone in the engine
    mean, last = model.burst(4, w, send_gap_s=gap)
    assert mean == pytest.approx(alone + gap * 3 / 2)
    assert last == pytest.approx(alone + 3 * gap)
    assert math.isfinite(mean)


def test_the_api_servers_time_is_the_measured_one_never_fitted(
    edited: Callable[[Callable[[dict[str, Any]], None]], None],
) -> None:
    """The plan's API-server time per request comes from this project's measurement of the
    real vLLM server (scripts/api-server-cost), the same in the validation; the published rows
    it is checked against cannot move it."""
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    entry = evidence()["api_server"]
    assert "scripts/api-server-cost" in entry["source"]
    per_request, per_token = entry["seconds_per_request"], entry["seconds_per_prompt_token"]
    # A millisecond or two a request and microseconds a token: what the measurement printed.
    assert 0.0005 < per_request < 0.01 and 1e-7 < per_token < 1e-4
    for stack in ("l4", "rtx6000", "tpu-v6e1"):
        model, _ = model_for_settings(load_stack_settings(stack), calibrations=None)
        assert (model.server_request_s, model.server_prompt_token_s) == (per_request, per_token)
    assert pv.model_for_config("tpu").server_time_s(Workload(1000, 1)) == pytest.approx(
        per_request + 1000 * per_token
    )

    def slower(data: dict[str, Any]) -> None:
        for row in data["rows"]:
            row["requests_per_s"] /= 2.0

    edited(slower)
    assert pv.model_for_config("tpu").server_request_s == per_request


def test_the_api_server_caps_a_replica_by_its_prompts() -> None:
    """One process tokenises every prompt: with enough time per prompt token it, not the
    engine, sets the rate, and the curve point says so."""
    from dataclasses import replace

    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    model, _ = model_for_settings(load_stack_settings("l4"), calibrations=None)
    w = Workload(1000, 1)
    engine = replace(model, server_request_s=0.0, server_prompt_token_s=0.0).capacity_rps(w)
    slow = replace(model, server_request_s=0.001, server_prompt_token_s=1e-3)  # 1 s at 1000
    cap = 1.0 / slow.server_time_s(w)
    assert cap < engine
    assert slow.capacity_rps(w) <= cap
    point = slow.at_rate(0.9 * cap, w)
    assert point.ceiling == "api-server"
    assert point.ttft_s > model.at_rate(0.9 * cap, w).ttft_s + 1.0  # its own second at least


def test_a_band_from_one_token_rows_is_widened_for_decode(
    edited: Callable[[Callable[[dict[str, Any]], None]], None],
) -> None:
    """Rows of one output token never time a decode step: a stack whose hardware has only
    such rows gets its band widened (as for an unmeasured kernel path), and loses the
    widening once a published row of that hardware decodes."""
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    widen = float(evidence()["unmeasured_band_widening"])
    assert not pv.decode_validated("l4") and pv.decode_validated("tpu-v6e-1")
    l4, _ = model_for_settings(load_stack_settings("l4"))
    published = pv.derived_band("l4")
    assert published is not None
    widened = l4.band - published  # the decode widening, and any other (kernel path, ...)
    assert widened >= widen - 1e-12

    def decodes(data: dict[str, Any]) -> None:
        for row in data["rows"]:
            if row["config"] == "l4" and row["holdout"]:
                row["output_tokens"] = 16
                break

    edited(decodes)
    assert pv.decode_validated("l4")
    l4_after, _ = model_for_settings(load_stack_settings("l4"))
    band_after = pv.derived_band("l4")
    assert band_after is not None
    assert widened - (l4_after.band - band_after) == pytest.approx(widen)


def test_a_stacks_band_is_never_narrower_than_its_closest_setups() -> None:
    """A hardware's band pools its setups; a stack served like one of them (same weight
    format, MTP or not) takes that setup's own band where it is wider, and the plan uses it."""
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    setups = {b["setup"]: b for b in pv.by_setup()}
    for name, b in setups.items():
        weights, speculative = pv.setup_kernel(name)
        band = pv.stack_band(b["hardware"], weights, speculative)
        hardware_band = pv.derived_band(b["hardware"])
        assert band is not None and hardware_band is not None
        assert band >= hardware_band and band >= b["own_band"]
    # The rtx6000 stack (QAT w4a16 + MTP) is served like the `rtx` setup, whose own figures
    # are further off than the hardware's pooled band: the plan's band starts from them.
    rtx = setups["rtx"]
    assert pv.setup_kernel("rtx") == ("w4a16", True)
    assert rtx["own_band"] > pv.derived_band("rtx-pro-6000")
    model, _ = model_for_settings(load_stack_settings("rtx6000"), calibrations=None)
    assert model.band >= rtx["own_band"]
    # A stack nobody published anything like keeps the hardware's band.
    assert pv.stack_band("rtx-pro-6000", "bf16", False) == pv.derived_band("rtx-pro-6000")


def test_time_in_the_api_server_holds_no_engine_slot() -> None:
    """A request being tokenised holds none of the engine's sequence slots: an API server
    with room to spare leaves the engine's capacity as it was, and only adds its own time."""
    from dataclasses import replace

    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    model, _ = model_for_settings(load_stack_settings("l4"), calibrations=None)
    w = Workload(1000, 64)
    engine = replace(model, server_request_s=0.0, server_prompt_token_s=0.0)
    capacity = engine.capacity_rps(w)
    roomy = replace(engine, server_prompt_token_s=1.0 / (2.0 * capacity) / w.prompt_tokens)
    assert roomy.capacity_rps(w) == pytest.approx(capacity, rel=1e-6)
    rate = 0.9 * capacity
    served, bare = roomy.at_rate(rate, w), engine.at_rate(rate, w)
    api = roomy.api_server_s(rate, w)
    assert served.ttft_s == pytest.approx(bare.ttft_s + api, rel=1e-6)
    assert served.batch == pytest.approx(bare.batch, rel=1e-6)


def test_a_burst_passes_the_api_server_one_request_after_another() -> None:
    """The client's sends and the API server's hand-over are two serial stages: one request
    waits its own server time, and n requests sent at once reach the engine a server time
    apart."""
    from dataclasses import replace

    model = replace(pv.model_for_config("rtx"), server_request_s=0.0, server_prompt_token_s=0.0)
    w = Workload(128, 1)
    slow = replace(model, server_request_s=0.5)  # far above any step
    one_bare, _ = model.burst(1, w)
    one_slow, _ = slow.burst(1, w)
    assert one_slow == pytest.approx(one_bare + 0.5)
    mean, last = slow.burst(4, w)
    assert last >= 4 * 0.5
    assert mean == pytest.approx(one_bare + 0.5 * (1 + 2 + 3 + 4) / 4, rel=0.02)
    # A client slower than the server: its sends set the pace, the server adds its time once.
    paced, _ = slow.burst(4, w, send_gap_s=2.0)
    assert paced == pytest.approx(one_bare + 0.5 + 2.0 * 3 / 2, rel=0.02)
