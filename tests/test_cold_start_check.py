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

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "cold-start-logs"
REQUIRED = [p.name for p in coldstart.PHASES if not p.optional]


def _log(cache: str) -> list[coldstart.Timed]:
    return coldstart.read_timed((LOGS / f"l4-{cache}.timed.log").read_text())


def _stamp(lines: list[coldstart.Timed], text: str) -> float:
    return next(at for at, line in lines if text in line)


def _start(cache: str, compile_s: float | None = None) -> dict[str, Any]:
    found, _ = coldstart.phases(_log(cache))
    if compile_s is not None:
        found = [
            {**p, "seconds": compile_s} if p["name"] == coldstart.COMPILE else p for p in found
        ]
    return {"cache": cache, "phases": found, "health_s": 1.0, "first_token_s": 2.0}


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
    share = coldstart.WARM_COMPILE_SHARE
    held = coldstart.report("cpu", "l4", [_start("cold", 40.0), _start("warm", 40.0 * share)])
    missed = coldstart.report(
        "cpu", "l4", [_start("cold", 40.0), _start("warm", 40.0 * share + 0.5)]
    )
    assert coldstart.exit_status(held) == 0
    assert coldstart.exit_status(missed) == 1


def test_the_json_document() -> None:
    doc = json.loads(
        json.dumps(coldstart.report("cpu line", "l4", [_start("cold"), _start("warm")]))
    )
    assert set(doc) == {"cpu", "stack", "starts"}
    assert [s["cache"] for s in doc["starts"]] == ["cold", "warm"]
    for start in doc["starts"]:
        assert set(start) == {"cache", "phases", "health_s", "first_token_s"}
        assert all(set(p) == {"name", "seconds", "at_s", "line"} for p in start["phases"])


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
    doc = coldstart.report("cpu line", "l4", [_start("cold"), _start("warm")])
    text = script.table(doc)
    for phase in coldstart.PHASES:
        assert phase.name in text
    assert "the kept cache saved" in text and "load failure" in text
    with pytest.raises(SystemExit) as exit_:
        script.parse_args(["--stack", "nope"])
    assert exit_.value.code == 2
    sys.modules.pop("engine_check", None)
