"""scripts/cold-start-check's parts that need no engine: the phases read from real timed logs
of vLLM 0.27.1's CPU engine (tests/data/cold-start-logs/), the exit rule, the JSON and table."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from enginecheck import coldstart
from serving.capacity import coldstart as model

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "cold-start-logs"
REQUIRED = [p.name for p in coldstart.PHASES if not p.optional]
#: The bytes of the checkpoint the kept logs' starts served: model.safetensors of the w4a16
#: tiny Gemma 4 that enginecheck/checkpoints.py writes (vLLM's log says only "0.00 GiB").
TINY_BYTES = 3_842_124


def _log(cache: str) -> list[coldstart.Timed]:
    return coldstart.read_timed((LOGS / f"l4-{cache}.timed.log").read_text())


def _stamp(lines: list[coldstart.Timed], text: str) -> float:
    return next(at for at, line in lines if text in line)


def _start(cache: str, compile_s: float | None = None, scale: float = 1.0) -> dict[str, Any]:
    """A start as the script records it, read from a kept log, beside the model scaled by
    ``scale``; ``compile_s`` replaces its torch.compile (and moves every later line by the
    difference, as a longer compile would)."""
    found, _ = coldstart.phases(_log(cache))
    if compile_s is not None:
        compiled = next(p for p in found if p["name"] == coldstart.COMPILE)
        shift = compile_s - compiled["seconds"]
        found = [
            {**p, "seconds": compile_s, "at_s": p["at_s"] + shift}
            if p is compiled
            else {**p, "at_s": p["at_s"] + shift}
            if p["at_s"] > compiled["at_s"]
            else p
            for p in found
        ]
    start = {"cache": cache, "phases": found, "health_s": 1.0, "first_token_s": 2.0}
    bands = model.bands(model.cpu_path(), TINY_BYTES, cache == "warm", scale)
    return {**start, "model": coldstart.against_model(start, bands)}


def _report(*starts: dict[str, Any]) -> dict[str, Any]:
    return coldstart.report("cpu line", "l4", starts, TINY_BYTES, 1.0)


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_every_phase_is_found_in_a_real_start(cache: str) -> None:
    found, missing = coldstart.phases(_log(cache))
    assert missing == []
    names = [p["name"] for p in found]
    assert [n for n in names if n in REQUIRED] == REQUIRED
    assert all(p["seconds"] >= 0 and p["at_s"] > 0 for p in found)


def test_only_the_kept_cache_is_looked_up() -> None:
    """The first start finds no compile cache and says nothing of it; the second finds the
    first's and says why vLLM could not load it (the CPU engine's artefact never loads)."""
    cold = [p["name"] for p in coldstart.phases(_log("cold"))[0]]
    (lookup,) = [
        p for p in coldstart.phases(_log("warm"))[0] if p["name"] == "compile cache lookup"
    ]
    assert "compile cache lookup" not in cold
    assert "Compiling model again due to a load failure" in lookup["line"]


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_vllms_own_seconds_are_read(cache: str) -> None:
    for p in coldstart.phases(_log(cache))[0]:
        if p["name"].endswith("(vLLM)"):
            printed = re.findall(r"(?:took|in) ([\d.]+) ?s", p["line"])
            assert p["seconds"] == pytest.approx(float(printed[-1])), p["name"]


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_a_gap_is_the_time_between_its_lines(cache: str) -> None:
    lines = _log(cache)
    phases = {p["name"]: p for p in coldstart.phases(lines)[0]}
    compiled = phases[coldstart.COMPILE]
    opened = _stamp(lines, "Warming up model for the compilation")
    assert compiled["at_s"] == pytest.approx(
        _stamp(lines, "saved AOT compiled function to"), abs=0.001
    )
    assert compiled["seconds"] == pytest.approx(compiled["at_s"] - opened, abs=0.001)
    first = phases["imports and arguments (API server)"]
    assert (
        first["seconds"]
        == first["at_s"]
        == pytest.approx(_stamp(lines, "non-default args"), abs=0.001)
    )


def test_lines_after_the_server_is_up_are_not_the_start() -> None:
    lines = _log("cold")
    later = lines[-1][0] + 5.0
    after = [
        *lines,
        (later, "(Worker pid=1) INFO [decorators.py:708] saved AOT compiled function to x"),
    ]
    assert coldstart.phases(after) == coldstart.phases(lines)


def test_a_missing_line_is_reported_by_its_phase() -> None:
    lines = [x for x in _log("cold") if "Loading weights took" not in x[1]]
    assert coldstart.phases(lines)[1] == ["of which weight loading (vLLM)"]
    cut = _stamp(lines, "Warming up model for the compilation")
    _, missing = coldstart.phases([x for x in lines if x[0] <= cut])
    assert coldstart.COMPILE in missing and "API server start" in missing


def test_warm_compile_must_be_clearly_shorter() -> None:
    """Both compiles within the model's bands (cold 23 to 36 s, warm 14 to 22 s): only the
    share decides."""
    share = coldstart.WARM_COMPILE_SHARE
    held = _report(_start("cold", 26.0), _start("warm", 26.0 * share))
    missed = _report(_start("cold", 26.0), _start("warm", 26.0 * share + 0.5))
    assert all(row["within"] for s in (*held["starts"], *missed["starts"]) for row in s["model"])
    assert coldstart.exit_status(held) == 0
    assert coldstart.exit_status(missed) == 1


def test_the_json_document() -> None:
    doc = json.loads(json.dumps(_report(_start("cold"), _start("warm"))))
    assert set(doc) == {"cpu", "stack", "weight_bytes", "speed", "starts"}
    assert [s["cache"] for s in doc["starts"]] == ["cold", "warm"]
    for start in doc["starts"]:
        assert set(start) == {"cache", "phases", "health_s", "first_token_s", "model"}
        assert all(set(p) == {"name", "seconds", "at_s", "line"} for p in start["phases"])
        assert [r["name"] for r in start["model"]] == [
            "imports",
            "engine init",
            "model class inspection",
            "weights",
            "torch.compile",
            "warm-up and server start",
            "total",
        ]
        assert all(
            set(r) == {"name", "measured", "p10", "p50", "p90", "within", "judged"}
            for r in start["model"]
        )


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_the_models_phases_partition_the_start(cache: str) -> None:
    """The model's CPU phases measured on a real start add up to the time to 'Application
    startup complete.': nothing is counted twice or left out."""
    measured = coldstart.model_phases(_start(cache))
    total = measured.pop("total")
    ready = _stamp(_log(cache), "Application startup complete.")
    assert total == pytest.approx(ready, abs=0.001)
    assert sum(measured.values()) == pytest.approx(total, abs=0.01)


def test_the_cpu_figures_are_what_the_kept_starts_measured() -> None:
    """Every figure of the model's CPU path is read from the kept logs its source names: the
    phase's seconds (the geometric middle of both starts where the cache does not decide it),
    the loader's throughput from the checkpoint's bytes and vLLM's seconds; every CPU figure
    is checked here."""
    f = model.figures()
    cold, warm = (coldstart.model_phases(_start(c)) for c in ("cold", "warm"))
    expected = {
        "cpu-imports": (cold["imports"] * warm["imports"]) ** 0.5,
        "cpu-engine-init": (cold["engine init"] * warm["engine init"]) ** 0.5,
        "cpu-class-inspection-cold": cold["model class inspection"],
        "cpu-class-inspection-warm": warm["model class inspection"],
        "cpu-torch-compile-cold": cold["torch.compile"],
        "cpu-torch-compile-warm": warm["torch.compile"],
        "cpu-after-compile-cold": cold["warm-up and server start"],
        "cpu-after-compile-warm": warm["warm-up and server start"],
        "load-cpu-local": TINY_BYTES / 1e9 / cold["weights"],
    }
    assert {k for k in f if k.startswith("cpu-")} | {"load-cpu-local"} == set(expected)
    for key, value in expected.items():
        assert f[key].basis == "measured" and "cold-start-logs" in f[key].source, key
        assert f[key].value == pytest.approx(value, rel=0.02), key


def test_a_start_outside_its_total_band_fails_the_check() -> None:
    """A warm start whose compile took as long as a cold one is outside the warm band, and the
    total with it: exit 1 although every other phase is within."""
    slow = _start("warm", 28.8)
    by_name = {r["name"]: r for r in slow["model"]}
    assert not by_name["torch.compile"]["within"] and not by_name["total"]["within"]
    assert by_name["engine init"]["within"]
    doc = _report(_start("cold"), slow)
    assert coldstart.outside(doc) == (["warm: torch.compile"], 7, ["warm: total"])
    assert coldstart.exit_status(doc) == 1


def test_phases_outside_their_bands_beyond_a_fifth_fail_the_check() -> None:
    """A p10 to p90 band leaves a fifth out: one of the seven judged phases outside passes,
    two fail, with the totals within. The weights and the warm class inspection, whose bands
    are finer than the log resolves, are not judged: they count neither way."""

    def moved(start: dict[str, Any], names: set[str]) -> dict[str, Any]:
        rows = [{**r, "within": r["within"] and r["name"] not in names} for r in start["model"]]
        return {**start, "model": rows}

    cold, warm = _start("cold"), _start("warm")
    judged = [f"{s['cache']}: {r['name']}" for s in (cold, warm) for r in s["model"] if r["judged"]]
    assert judged == [
        "cold: engine init",
        "cold: model class inspection",
        "cold: torch.compile",
        "cold: warm-up and server start",
        "warm: engine init",
        "warm: torch.compile",
        "warm: warm-up and server start",
    ]
    one = _report(moved(cold, {"engine init", "weights"}), moved(warm, {"weights"}))
    two = _report(moved(cold, {"engine init"}), moved(warm, {"torch.compile"}))
    assert coldstart.outside(one)[:2] == (["cold: engine init"], 7)
    assert coldstart.exit_status(one) == 0
    assert len(coldstart.outside(two)[0]) == 2 and coldstart.exit_status(two) == 1


def test_the_speed_probe_is_not_judged_and_scales_the_model() -> None:
    """The kept starts' imports give the reference machine's speed (1); bands scaled by 1.3 put
    the reference starts' totals too fast, and the imports row, outside its scaled band too,
    is never counted among the judged phases."""
    cold, warm = _start("cold"), _start("warm")
    assert coldstart.speed([cold, warm], model.figures()["cpu-imports"].value) == pytest.approx(
        1.0, abs=0.01
    )
    slow_machine = _report(_start("cold", scale=1.3), _start("warm", scale=1.3))
    phases, judged, totals = coldstart.outside(slow_machine)
    assert totals == ["cold: total", "warm: total"]
    imports = [r for s in slow_machine["starts"] for r in s["model"] if r["name"] == "imports"]
    assert [r["judged"] for r in imports] == [False, False]
    assert judged == 7 and not any("imports" in p for p in phases)
    with pytest.raises(ValueError, match=r"scale: a number from 0\.1 to 10"):
        model.bands(model.cpu_path(), TINY_BYTES, scale=0.0)


def test_the_model_and_a_start_must_name_the_same_phases() -> None:
    bands = model.bands(model.cpu_path(), TINY_BYTES)
    with pytest.raises(KeyError, match="not the measured"):
        coldstart.against_model(_start("cold"), bands[1:])


def test_a_start_missing_a_phase_is_named_not_a_traceback() -> None:
    """A start recorded without one of the phases the model or the speed probe reads (a JSON
    edited by hand, an older run) is a ValueError naming the start and the phase."""
    start = _start("warm")
    for name in ("of which weight loading (vLLM)", coldstart.IMPORTS, coldstart.COMPILE):
        lacking = {**start, "phases": [p for p in start["phases"] if p["name"] != name]}
        with pytest.raises(ValueError, match=rf"warm start: no '{re.escape(name)}' phase"):
            coldstart.model_phases(lacking)
    lacking = {**start, "phases": [p for p in start["phases"] if p["name"] != coldstart.IMPORTS]}
    with pytest.raises(ValueError, match="warm start: no 'imports"):
        coldstart.speed([lacking], 6.68)
    lacking = {**start, "phases": [p for p in start["phases"] if p["name"] != coldstart.COMPILE]}
    with pytest.raises(ValueError, match=r"warm start: no 'torch\.compile' phase"):
        coldstart.exit_status(_report(_start("cold"), lacking))


def test_a_phase_band_is_its_median_over_and_times_its_spread() -> None:
    for cache_hit in (False, True):
        rows = model.bands(model.cpu_path(), TINY_BYTES, cache_hit)
        for band in rows:
            assert band.p10 < band.p50 < band.p90, band
        *phases, total = rows
        for band in phases:
            assert band.p10 * band.p90 == pytest.approx(band.p50**2)
        assert total.p50 == pytest.approx(sum(b.p50 for b in phases), rel=0.05)


def test_a_timed_log_reads_back_and_a_bad_line_is_named() -> None:
    line = coldstart.timed_line(1.25, "shards:  0%\r100%")
    assert coldstart.read_timed(line) == [(1.25, "shards:  0% 100%")]
    with pytest.raises(ValueError, match="line 2: no seconds stamp"):
        coldstart.read_timed(line + "\nINFO no stamp")


def _script() -> Any:
    loader = importlib.machinery.SourceFileLoader(
        "cold_start_check", str(ROOT / "scripts" / "cold-start-check")
    )
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_table_and_the_stack_option() -> None:
    script = _script()
    doc = _report(_start("cold"), _start("warm"))
    text = script.table(doc)
    for phase in coldstart.PHASES:
        assert phase.name in text
    assert "the kept cache saved" in text and "load failure" in text
    with pytest.raises(SystemExit) as exit_:
        script.parse_args(["--stack", "nope"])
    assert exit_.value.code == 2
    sys.modules.pop("engine_check", None)
