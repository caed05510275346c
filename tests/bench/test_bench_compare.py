"""Runs side by side: deltas, cost per million requests, output files and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench import compare_runs, cost_per_million_requests, load_run
from bench.cli import main
from bench.reports.compare import priced
from bench.results.store import StoreError
from serving.catalog.hardware import HARDWARE
from tests.bench._cells import cell, write_run


def test_cost_per_million_requests_formula() -> None:
    assert cost_per_million_requests(3.6, 10.0) == pytest.approx(100.0)
    assert cost_per_million_requests(3.6, 0.0) is None


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    a = tmp_path / "l4"
    b = tmp_path / "rtx"
    write_run(
        a, [cell(1, 128), cell(8, 128), cell(8, 4096, status="skipped")], label="l4", hardware="l4"
    )
    write_run(
        b,
        [
            cell(1, 128, request_throughput=2.0),
            cell(8, 128, request_throughput=12.0),
            cell(8, 4096, request_throughput=6.0),
        ],
        label="rtx",
        hardware="rtx-pro-6000",
    )
    return a, b


def test_deltas_and_costs(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    # The catalog's L4 and RTX PRO 6000 prices are estimates (GPU rates not confirmed on
    # Google's page, counted at a named source's quote): costed, and the page says so.
    bare = compare_runs([load_run(a), load_run(b)])
    assert bare.prices == [
        HARDWARE["l4"].price.usd_per_hour,
        HARDWARE["rtx-pro-6000"].price.usd_per_hour,
    ]
    assert [r["price_status"] for r in bare.as_dict()["runs"]] == ["estimate", "estimate"]
    page = bare.markdown()
    assert f"~{bare.prices[0]:.2f}" in page and "~ : an ESTIMATE" in page
    assert "USD/hour n/a" not in page
    l4, rtx = 1.0, 2.5
    comparison = compare_runs([load_run(a), load_run(b)], prices={"l4": l4, "rtx-pro-6000": rtx})
    data = comparison.as_dict()
    cells = {c["id"]: c for c in data["cells"]}
    assert cells["c8-p128-o16"]["request_throughput"] == [8.0, 12.0]
    assert cells["c8-p128-o16"]["request_throughput_delta_percent"][1] == pytest.approx(50.0)
    assert cells["c1-p128-o16"]["request_throughput_delta_percent"][1] == pytest.approx(100.0)
    assert cells["c8-p4096-o16"]["request_throughput"] == ["skipped", 6.0]
    assert cells["c8-p4096-o16"]["request_throughput_delta_percent"] == [None, None]
    assert cells["c8-p128-o16"]["cost_per_million_requests"] == [
        pytest.approx(l4 / (3600 * 8) * 1e6),
        pytest.approx(rtx / (3600 * 12) * 1e6),
    ]
    runs = data["runs"]
    assert runs[0]["best_cell"] == "c8-p128-o16"
    assert runs[1]["cost_per_million_requests_at_best"] == pytest.approx(rtx / (3600 * 12) * 1e6)
    md = comparison.markdown()
    assert "| c8-p128-o16 | 8.00 | 12.00 (+50.0%) |" in md
    assert "| c8-p4096-o16 | skipped | 6.00 |" in md


def test_explicit_price_wins(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    comparison = compare_runs([load_run(a), load_run(b)], prices={"rtx": 3.6})
    assert comparison.prices[1] == 3.6


def test_compare_charts_only_measured(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    plans = {p.filename: p for p in compare_runs([load_run(a), load_run(b)]).chart_plans()}
    p4096 = plans["compare-request_throughput-p4096-o16.png"]
    assert [s.label for s in p4096.series] == ["rtx"]  # l4 skipped that context


def test_compare_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _two_runs(tmp_path)
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    assert "| c8-p128-o16 | 8.00 | 12.00 (+50.0%) |" in capsys.readouterr().out
    assert json.loads((out / "compare.json").read_text())["baseline"] == "l4"
    assert any(p.name.startswith("compare-") for p in (out / "charts").iterdir())
    assert main(["compare", str(a)]) == 2
    assert main(["compare", str(a), str(tmp_path / "missing")]) == 2
    assert main(["compare", str(a), str(b), "--price", "oops"]) == 2


def _run_recording(tmp_path: Path, name: str, recorded: object) -> Path:
    path = tmp_path / name
    write_run(path, [cell(8, 128)], label=name, hardware="l4")
    meta = json.loads((path / "run.json").read_text())
    meta["usd_per_hour"] = recorded
    (path / "run.json").write_text(json.dumps(meta))
    return path


def test_a_run_that_recorded_its_instance_price_is_costed_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GKE L4 replica bills its g2-standard-8 node, not a Cloud Run L4 instance: the
    post-deploy benchmark records the stack's price and compare uses it."""
    node = 0.85
    assert node != HARDWARE["l4"].price.usd_per_hour
    gke = load_run(_run_recording(tmp_path, "gke", node))
    assert priced(gke)[0] == node
    assert priced(gke, {"gke": 2.0})[0] == 2.0  # an explicit price wins
    # The catalog's L4 price is an estimate (its GPU rate counted at a quoted figure): used.
    estimate = HARDWARE["l4"].price
    assert estimate.is_estimate
    cloud_run = load_run(_run_recording(tmp_path, "cloud-run", None))
    assert compare_runs([cloud_run, gke]).prices == [estimate.usd_per_hour, node]
    assert priced(cloud_run) == (estimate.usd_per_hour, "estimate")
    # A recorded figure that is no price is ignored: the catalog's estimate is used.
    for i, bad in enumerate((True, -1, 0, 1e9, "0.85")):
        run = load_run(_run_recording(tmp_path, f"bad{i}", bad))
        assert priced(run)[0] == estimate.usd_per_hour
        assert priced(run, {"l4": 1.5}) == (1.5, "given")
    # A recorded lower bound (either spelling) is no price, and neither is the catalog's
    # lower bound: a run is not costed at one without --price.
    extras: list[dict[str, object]] = [
        {"usd_per_hour_is_lower_bound": True},
        {"usd_per_hour_status": "lower_bound"},
    ]
    for i, extra in enumerate(extras):
        bound = _run_recording(tmp_path, f"bound{i}", node)
        meta = json.loads((bound / "run.json").read_text())
        (bound / "run.json").write_text(json.dumps({**meta, **extra, "hardware": "tpu-v6e-1"}))
        tpu = HARDWARE["tpu-v6e-1"]
        assert tpu.spot_price is not None and tpu.spot_price.is_lower_bound
        monkeypatch.setitem(HARDWARE, "tpu-v6e-1", replace(tpu, price=tpu.spot_price))
        assert priced(load_run(bound)) == (None, "lower_bound")
        assert priced(load_run(bound), {"tpu-v6e-1": 2.0})[0] == 2.0
    recorded = _run_recording(tmp_path, "recorded-estimate", node)
    meta = json.loads((recorded / "run.json").read_text())
    (recorded / "run.json").write_text(json.dumps({**meta, "usd_per_hour_status": "estimate"}))
    assert priced(load_run(recorded)) == (node, "estimate")
    # NaN is no JSON number: the strict run reader refuses the file itself.
    with pytest.raises(StoreError, match="NaN"):
        load_run(_run_recording(tmp_path, "nan", float("nan")))


def test_the_post_deploy_benchmark_records_the_stacks_instance_price(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pulumi

    import components.stack as stack_module
    from endpoint.auth import NoAuth
    from serving.capacity.plan import load_stack_settings

    seen: list[dict[str, object]] = []
    monkeypatch.setattr(
        stack_module, "benchmark_hook", lambda name, config, **_: seen.append(dict(config.extra))
    )
    monkeypatch.setattr(pulumi, "get_stack", lambda: "gke-l4")
    monkeypatch.setattr(pulumi, "ResourceHookBinding", lambda **kw: kw)
    for stack in ("gke-l4", "tpu-v6e1"):
        settings = load_stack_settings(stack)
        stack_module.post_deploy_binding(settings, "gemma", NoAuth(), ("url",))
        assert seen[-1]["usd_per_hour"] == settings.price.usd_per_hour
        assert seen[-1]["usd_per_hour_is_lower_bound"] == settings.price.is_lower_bound
        assert seen[-1]["usd_per_hour_status"] == settings.price.status
        assert seen[-1]["platform"] == settings.deploy_platform
