"""Min instances priced against cold starts (serving/capacity/idle.py, `gemma4 plan --traffic`,
`gemma4 plan search --traffic`): the closed forms against cases derived by hand, their
monotonicity, the inputs refused by name, and what the commands print and write."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gemma4.plan_cli import main as plan_main
from gemma4.search_cli import search_main
from serving.capacity.coldstart import cold_start
from serving.capacity.costs import instance_price
from serving.capacity.idle import (
    CLOUD_RUN_IDLE_S,
    DAY_S,
    SHAPE_HELP,
    Shape,
    chosen,
    cold_share,
    for_stack,
    min_instances,
    needs,
    parse_shape,
    periods,
)
from serving.capacity.plan import ROOT, load_stack_settings

T = CLOUD_RUN_IDLE_S
SEARCH = ["--rate", "1", "--ttft-p95-ms", "9"]
START = {"p50_s": 60, "p90_s": 120}


def _share(shape: Shape, rate: float, warm: int, per_instance: float = 10.0) -> float:
    spans = periods(shape, rate, T)
    return cold_share(spans, needs(spans, per_instance, 1000), warm, START["p50_s"])


def _rows(shape: Shape, rate: float, targets: Any = (), replicas: int = 1) -> Any:
    block = min_instances(
        shape, rate, replicas, "cloud-run", START, (2.0, "confirmed"), targets, 50
    )
    return block["rows"]


def test_steady_traffic_at_a_high_rate_almost_never_meets_a_cold_start() -> None:
    assert _share(Shape("steady"), 5.0, 0) < 1e-12


def test_steady_poisson_traffic_scales_to_zero_at_the_idle_gaps() -> None:
    """One request per 30 minutes on average: a gap longer than 15 minutes has probability
    exp(-1800^-1 x 900); each starts an instance that this request and those arriving during
    its start (r x D) wait for."""
    r = 1 / 1800
    assert _share(Shape("steady"), r, 0) == pytest.approx(math.exp(-r * T) * (1 + r * 60))
    assert _share(Shape("steady"), r, 1) == 0


def test_a_request_every_30_minutes_is_always_cold_without_a_warm_instance() -> None:
    trace = Shape("trace").with_trace([i * 1800.0 for i in range(48)])
    rows = _rows(trace, 1 / 1800)
    assert [(r["min_instances"], r["cold_share"]) for r in rows] == [(0, 1.0), (1, 0.0)]
    # Every 10 minutes: within the idle period, only the trace's first start is cold (its
    # first request, and the 60 s / 600 s expected to arrive while it starts).
    often = Shape("trace").with_trace([i * 600.0 for i in range(48)])
    assert _rows(often, 1 / 600)[0]["cold_share"] == pytest.approx((1 + 60 / 600) / 48)
    # A burst well above the trace's mean rate needs no more instances than the sizing found
    # for the whole trace (the simulation replays the burst): one kept warm, none cold.
    times = [i / 10 for i in range(50)] + [5000.0 * i for i in range(1, 18)]
    burst = _rows(Shape("trace").with_trace(times), 66 / 85_000)
    assert [r["min_instances"] for r in burst] == [0, 1] and burst[1]["cold_share"] == 0


def test_a_trace_far_from_time_zero_is_priced_as_the_same_trace_at_zero() -> None:
    """Rescaling keeps the gaps of a trace whose times are near the 1e9 s the reader allows
    (a float's step there is 2^-23 s)."""
    step = 2.0**-23
    offsets = (0.0, step, 3 * step, 4 * step)
    at_zero, far = (
        _rows(Shape("trace").with_trace([start + x for x in offsets]), 0.01)
        for start in (0.0, 1e9 - 4 * step)
    )
    assert [r["cold_share"] for r in far] == [r["cold_share"] for r in at_zero]
    # 4 requests 100 s apart: the first is cold, and the 60 s x 0.01 req/s of its start.
    assert at_zero[0]["cold_share"] == pytest.approx((1 + 0.6) / 4)


def test_the_table_ends_where_no_request_meets_a_cold_start() -> None:
    """30 req/s all day on 10 instances never idles: more than none kept warm only costs."""
    rows = _rows(Shape("steady"), 30.0, replicas=10)
    assert [(r["min_instances"], r["cold_share"]) for r in rows] == [(0, 0.0)]
    idle = _rows(parse_shape("gaps:3600,4"), 30.0, replicas=10)
    assert len(idle) == 11 and [r["cold_share"] == 0 for r in idle].index(True) == 10


def test_idle_gaps_start_one_instance_each() -> None:
    """n gaps of an hour a day at r req/s while busy: each gap's end is cold for its first
    request and the r x D arriving during the start; within the busy stretches, exp(-r T)."""
    r, n, gap = 0.01, 8, 3600.0
    busy = r * (DAY_S - n * gap) / n
    expected = (1 + r * 60) / busy + math.exp(-r * T) * (1 + r * 60)
    assert _share(parse_shape(f"gaps:{gap:g},{n}"), r, 0) == pytest.approx(expected)
    assert _share(parse_shape(f"gaps:{gap:g},{n}"), r, 1) == 0


def test_a_gap_shorter_than_the_idle_period_adds_to_the_wait_around_it() -> None:
    """8 gaps of 600 s at 0.01 req/s: the first request after a gap waited the gap plus the
    busy time since the last request and since the stretch began, two exponential waits; it
    is cold when they outlast the other s = 900 - 600 s: probability exp(-r s) (1 + r s).
    The other requests of the stretch are cold with exp(-r T). Each brings r x D riders."""
    r, s = 0.01, 300.0
    per_stretch = r * (DAY_S - 8 * 600) / 8
    first = math.exp(-r * s) * (1 + r * s)
    expected = (first + (per_stretch - 1) * math.exp(-r * T)) / per_stretch * (1 + r * 60)
    assert _share(parse_shape("gaps:600,8"), r, 0) == pytest.approx(expected, rel=0.01)
    assert _share(parse_shape("gaps:600,8"), r, 1) == 0
    # One second short of the idle period is about as cold as a gap that outlasts it.
    shares = [_share(parse_shape(f"gaps:{gap},8"), r, 0) for gap in (899, 900)]
    assert shares[0] == pytest.approx(shares[1], rel=0.01)


def test_a_profile_scales_out_at_the_busy_hour() -> None:
    """12 hours at 1 req/s then 12 at 3, one instance serving 1 req/s: at the step 2 of the 3
    instances needed start, and 2/3 of the 3 x D requests of their start wait for them."""
    profile = parse_shape("profile:" + ",".join(["1"] * 12 + ["3"] * 12))
    total = (12 + 36) * 3600
    shares = [_share(profile, 3.0, m, per_instance=1.0) for m in range(4)]
    assert shares[1] == pytest.approx(2 * 60 / total)
    assert shares[2] == pytest.approx(60 / total)
    assert shares[3] == 0 and shares[0] >= shares[1]


def test_a_quiet_hour_is_about_as_cold_as_an_idle_one_before_a_busy_hour() -> None:
    """The first requests after 12 hours at 1e-9 req/s find no instance, as after 12 idle
    hours; and 24 equal hours are the steady rate (the wait into an hour is as likely to
    outlast the idle period as any other)."""
    quiet, idle = (
        _share(parse_shape("profile:" + ",".join([lo] * 12 + ["0.05"] * 12)), 0.05, 0)
        for lo in ("0.000000001", "0")
    )
    assert quiet == pytest.approx(idle, rel=0.01) and idle > 0
    flat = _share(parse_shape("profile:" + ",".join(["0.002"] * 24)), 0.002, 0)
    assert flat == pytest.approx(_share(Shape("steady"), 0.002, 0), rel=1e-9)


@pytest.mark.parametrize(
    ("shape", "rate"),
    [
        ("steady", 0.001),
        ("gaps:7200,4", 0.02),
        ("profile:" + ",".join(["0"] * 6 + ["0.5", "2", "4"] * 6), 4.0),
    ],
)
def test_more_min_instances_never_more_cold_starts_never_cheaper(shape: str, rate: float) -> None:
    rows = _rows(parse_shape(shape), rate, replicas=6)
    assert len(rows) >= 2
    for fewer, more in itertools.pairwise(rows):
        assert more["cold_share"] <= fewer["cold_share"]
        assert more["usd_per_month"] > fewer["usd_per_month"]
    assert rows[-1]["cold_share"] == 0


def test_a_percentile_breaks_when_the_cold_share_passes_its_tail() -> None:
    """3 % cold: p99's tail (1 %) holds cold requests, p95's (5 %) does not; a target the cold
    start itself meets holds."""
    r = 0.0031  # exp(-r T) (1 + r D) is about 7 %: p95 and p99 reached
    (row, _) = _rows(Shape("steady"), r, [("ttft", "p95", 2000), ("e2e", "p99", 120_000)])
    assert row["percentiles_reached"] == ["p95", "p99"]
    assert row["slo_broken"] == ["ttft_p95"] and row["slo_holds"] is False
    rows = _rows(Shape("steady"), 0.02, [("ttft", "p99", 2000)])
    assert 0.01 > rows[0]["cold_share"] > 0.0 and rows[0]["percentiles_reached"] == []
    assert chosen({"rows": rows}) == 0
    # A cold start waits before the first token: the gaps between tokens keep their target.
    (row, _) = _rows(Shape("steady"), r, [("itl", "p99", 50)])
    assert row["percentiles_reached"] == ["p95", "p99"] and row["slo_broken"] == []
    assert row["slo_holds"] is None


def test_an_unknown_price_stays_unknown() -> None:
    block = min_instances(Shape("steady"), 0.01, 1, "cloud-run", START, (None, "unknown"), (), 5)
    assert [r["usd_per_month"] for r in block["rows"]] == [None, None]
    assert {r["price_status"] for r in block["rows"]} == {"unknown"}


def test_a_tpu_vm_never_scales_to_zero_and_gke_keeps_one_replica() -> None:
    tpu = for_stack(load_stack_settings("tpu-v6e1"), Shape("steady"), 1.0, 1, (), 1)
    assert tpu["rows"] == [] and "never scale to zero" in tpu["note"]
    gke = for_stack(load_stack_settings("gke-l4"), Shape("steady"), 0.001, 1, (), 4)
    assert [r["min_instances"] for r in gke["rows"]] == [1]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("profile:1,2", "24 hourly rates"),
        ("profile:" + ",".join(["1"] * 23 + ["-1"]), "profile hour 23"),
        ("profile:" + ",".join(["0"] * 24), "at least one hour"),
        ("profile:" + ",".join(["nan"] * 24), "profile hour 0"),
        ("gaps:3600", "SECONDS,PER_DAY"),
        ("gaps:3600,2.5", "PER_DAY must be an integer"),
        ("gaps:3600,24", "leave some busy time"),
        ("gaps:0,4", "gaps SECONDS"),
        ("gaps:60,5000", "gaps PER_DAY"),
        ("steady:3", "--traffic takes"),
        ("bursty", "--traffic takes"),
        # An empty argument, spaces, and numbers float() reads but the docs never write.
        ("steady:", "--traffic takes"),
        ("trace:", "--traffic takes"),
        (" steady", "--traffic takes"),
        ("steady\n", "--traffic takes"),
        ("gaps: 3600,8", "gaps SECONDS must be a number in [1, 10800], got ' 3600'"),
        ("gaps:\u0663\u0666\u0660\u0660,8", "gaps SECONDS"),
        ("gaps:3_600,8", "gaps SECONDS"),
        ("gaps:3600,8.0", "PER_DAY must be an integer in [1, 1440]"),
        ("gaps:3600,8e0", "PER_DAY must be an integer"),
        ("profile:" + ",".join(["1"] * 23 + ["\u0661"]), "profile hour 23"),
        ("profile:" + ",".join(["1"] * 23 + ["+1"]), "profile hour 23"),
        ("profile:" + ",".join(["1"] * 23 + ["1e999"]), "profile hour 23"),
    ],
)
def test_a_bad_shape_is_refused_naming_the_option(text: str, said: str) -> None:
    with pytest.raises(ValueError, match="--traffic") as caught:
        parse_shape(text)
    assert said in str(caught.value)


def test_the_commands_refuse_a_bad_shape_with_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    profile = "profile:" + ",".join(["1"] * 24)
    assert plan_main(["-s", "l4", "--traffic", profile, "-r", "2"]) == 2
    assert "drop --rate" in capsys.readouterr().err
    assert plan_main(["-s", "l4", "--traffic", "trace"]) == 2
    assert "give --trace" in capsys.readouterr().err
    assert search_main(["--traffic", "gaps:1", "--rate", "1", "--ttft-p95-ms", "9"]) == 2
    assert "--traffic gaps takes" in capsys.readouterr().err
    # Two shapes are refused, not the last one taken, by both commands, in one line.
    twice = ["--traffic", "steady", "--traffic", "gaps:3600,8", "--json"]
    for main, argv in ((plan_main, ["-s", "l4", "-r", "1"]), (search_main, SEARCH)):
        assert main([*argv, *twice]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.splitlines()[-1].endswith(
            "error: --traffic is given 2 times: give one of " + SHAPE_HELP
        )
    big = tmp_path / "big.jsonl"
    big.write_text('{"start_s": 0, "prompt_tokens": 5, "output_tokens": 5}\n' * 100_001)
    assert plan_main(["-s", "l4", "--trace", str(big), "--traffic", "trace"]) == 2
    assert "more than 100000 requests" in capsys.readouterr().err


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert plan_main(["-s", "l4", *argv, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_the_plan_prints_the_rows_only_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _plan(capsys, "-r", "0.01")
    assert "min_instances" not in plain and "traffic_shape" not in plain
    doc = _plan(capsys, "-r", "0.01", "--traffic", "gaps:3600,8", "--ttft-p95-ms", "5000")
    settings = load_stack_settings("l4")
    expected = for_stack(
        settings, parse_shape("gaps:3600,8"), 0.01, 1, [("ttft", "p95", 5000.0)], 1
    )
    assert doc["min_instances"] == expected["rows"]
    assert doc["traffic_shape"]["shape"] == {
        "kind": "gaps",
        "requests_per_second": 0.01,
        "idle_gap_s": 3600,
        "gaps_per_day": 8,
    }
    assert doc["traffic_shape"]["cold_start_s"]["p50"] == cold_start(settings)["p50_s"]
    price, _ = instance_price(settings)
    assert price is not None
    assert doc["min_instances"][1]["usd_per_month"] == pytest.approx(price * 730)
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: False))
    assert plan_main(["-s", "l4", "-r", "0.01", "--traffic", "gaps:3600,8"]) == 0
    text = capsys.readouterr().out
    table = text[text.index("Min instances: stack l4") :].splitlines()
    assert len(table) == 6 and max(map(len, table)) <= 100
    assert "with 8 idle gap(s) of 3600 s a day" in table[0]
    assert table[2].split()[:1] == ["0"] and table[3].split()[:1] == ["1"]


def test_the_table_stays_within_100_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row breaking four targets, and a note, go on below rather than past 100 columns."""
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: False))
    targets = ["--ttft-p95-ms", "5000", "--ttft-p99-ms", "6000", "--e2e-p95-ms", "60000"]
    argv = ["-s", "l4", "-r", "0.001", "--traffic", "steady", *targets, "--e2e-p99-ms", "70000"]
    assert plan_main(argv) == 0
    out = capsys.readouterr().out
    table = out[out.index("Min instances: stack l4") :].splitlines()
    assert max(map(len, table)) <= 100 and len(table) == 7
    said = " ".join(" ".join(table).split())
    assert "breaks TTFT p95, TTFT p99, E2E p95, E2E p99" in said
    assert plan_main(["-s", "l4", "-r", "99999", "--traffic", "steady"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Min instances: stack l4") :].splitlines()
    assert max(map(len, table)) <= 100 and "more than 100 replicas" in table[1]


def test_a_profile_is_planned_at_its_busiest_hour(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _plan(capsys, "--traffic", "profile:" + ",".join(["0"] * 12 + ["0.02"] * 12))
    assert doc["requests_per_second"] == 0.02
    assert "busiest hour" in doc["requests_per_second_source"]
    assert doc["traffic_shape"]["shape"]["hourly_requests_per_second"][-1] == 0.02


def _search(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = search_main(
        ["--project-dir", str(ROOT), "--platforms", "cloud-run", "--requests", "200", *argv]
    )
    out = capsys.readouterr().out
    assert code == 0
    doc: dict[str, Any] = json.loads(out) if "--json" in argv else {"text": out}
    return doc


IDLE = ["--traffic", "gaps:3600,8", "--ttft-p95-ms", "5000"]


def test_search_keeps_one_instance_warm_when_cold_starts_break_p95(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """At 0.005 req/s between 8 idle hours a day, over 5 % of requests meet a cold start with
    none kept warm: p95 TTFT breaks, one instance keeps it, and the answer bills it."""
    doc = _search(capsys, "--rate", "0.005", *IDLE, "--json")
    for a in doc["answers"]:
        zero, one = a["min_instances_rows"]
        assert zero["slo_broken"] == ["ttft_p95"] and zero["cold_share"] > 0.05
        assert a["min_instances"] == 1 and one["slo_holds"] and one["cold_share"] == 0
        assert a["stack"]["minInstances"] == 1
        assert a["usd_per_month"] >= one["usd_per_month"]
    busier = _search(capsys, "--rate", "0.05", *IDLE, "--json")
    for a in busier["answers"]:
        assert a["min_instances"] == 0 and a["stack"]["minInstances"] == 0
        assert a["min_instances_rows"][0]["cold_share"] < 0.05
    plain = _search(capsys, "--rate", "0.005", "--ttft-p95-ms", "5000", "--json")
    assert all("min_instances" not in a for a in plain["answers"])
    text = _search(capsys, "--rate", "0.005", *IDLE)["text"]
    assert "#1 min instances 1 (" in text and "0: " in text and "breaks TTFT p95" in text


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("warm") / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".*", "docs", "tests", "site"))
    return project


def test_the_written_stack_keeps_the_chosen_min_instances(
    project_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--rate", "0.005", *IDLE, "--platforms", "cloud-run", "--requests", "200"]
    code = search_main(
        ["--project-dir", str(project_copy), *argv, "--write-stack", "idle", "--json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    best = json.loads(out)["answers"][0]
    text = (project_copy / "Pulumi.idle.yaml").read_text()
    assert "gemma4-vllm:minInstances: 1\n" in text
    assert "#   min instances 1: 0.00% of requests meet a cold start" in text
    # The preview accepts it, and a plan of it prices min instances as the search did.
    from preview.build import build_preview

    preview = build_preview("idle", project_copy / "Pulumi.idle.yaml", project_dir=project_copy)
    assert preview.ok and preview.mandatory_violations == 0
    plan = ["--project-dir", str(project_copy), "-s", "idle", "-r", "0.005", *IDLE, "--json"]
    assert plan_main(plan) == 0
    assert json.loads(capsys.readouterr().out)["min_instances"] == best["min_instances_rows"]


def test_the_pages_example_is_what_the_commands_print(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/min-instances.md shows each command's output: every line it shows is printed."""
    page = (ROOT / "docs" / "min-instances.md").read_text()
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: False))
    blocks = page.split("```text\n")[1:]
    assert len(blocks) == 2
    for block, run in zip(blocks, (_plan_text, _search_text), strict=True):
        command, *shown = [line for line in block.split("```", 1)[0].splitlines() if line]
        out = run(command.removeprefix("$ "), capsys)
        missing = [line for line in shown if line.strip() != "..." and line not in out]
        assert missing == [], command
    prose = " ".join(page.split())
    for rate in ("0.005", "0.05"):
        doc = _plan(capsys, "-r", rate, "--traffic", "gaps:3600,8", "--ttft-p95-ms", "5000")
        said = f"{doc['min_instances'][0]['cold_share'] * 100:.2f} % of requests"
        assert said in prose, said


def _plan_text(command: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert command.startswith("gemma4 plan -s ")
    assert plan_main(command.split()[2:]) == 0
    return [line.rstrip() for line in capsys.readouterr().out.splitlines()]


def _search_text(command: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert command.startswith("gemma4 plan search ")
    assert search_main(["--project-dir", str(ROOT), *command.split()[3:]]) == 0
    return [line.rstrip() for line in capsys.readouterr().out.splitlines()]
