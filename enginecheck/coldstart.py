"""The pure parts of ``scripts/cold-start-check``: a vLLM start read phase by phase from its log
(docs/engine-check.md, "Cold start on the real engine").

The script stamps every line of the engine's log with the seconds since the process started
when the line appeared (:func:`timed_line`; vLLM's own timestamps have a resolution of one
second). A phase's seconds are vLLM's own figure where it prints one for that span ("Loading
weights took X seconds"), else the gap between the stamps of the line that opens it and the
line that closes it. The patterns are vLLM 0.27.1's CPU engine's lines, as a real start printed
them (tests/data/cold-start-logs/).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: (seconds since the process started, the line)
Timed = tuple[float, str]


@dataclass(frozen=True)
class Phase:
    name: str
    end: str
    """The pattern of the line that closes the phase, or that says its seconds (``took``)."""
    start: str | None = None
    """The pattern of the line that opens it; None: the process's start."""
    took: bool = False
    """Seconds from the line's own figure (its group ``s``), summed over every such line (the
    target and a drafter each print one)."""
    last: bool = False
    """Closed by the last line matching ``end`` (one per compiled model), not the first."""
    optional: bool = False
    """Not every start prints it (a compile cache is looked for only once one was saved)."""


_CONFIG = r"non-default args:"
#: After vLLM's registry inspected the model's class: in a subprocess, unless its answer is in
#: VLLM_CACHE_ROOT/modelinfos (vllm/model_executor/models/registry.py).
_RESOLVED = r"Resolved architecture: "
_ENGINE = r"Initializing a V1 LLM engine"
_LOAD = r"Starting to load model "
_WARMUP = r"Warming up model for the compilation\.\.\."
_WARMED = r"Warming up done\."
_INIT = r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) s"
#: The end of a start: the API server takes requests.
READY = r"Application startup complete\."
#: The compiled model read from the compile cache (vLLM 0.27.1's vllm/compilation/decorators.py;
#: never seen on the CPU engine, whose cached artefact does not load).
_LOADED = r"Directly load AOT compilation from path "
#: The compiled model's last line: saved to the compile cache, or read from it.
_COMPILED = r"saved AOT compiled function to |" + _LOADED
COMPILE = "torch.compile"

PHASES = (
    Phase("imports and arguments (API server)", _CONFIG),
    Phase("model class inspection", _RESOLVED, start=_CONFIG),
    Phase("engine core process", _ENGINE, start=_RESOLVED),
    Phase("worker process", _LOAD, start=_ENGINE),
    Phase("model loading", _WARMUP, start=_LOAD),
    Phase(
        "of which weight loading (vLLM)", r"Loading weights took (?P<s>[\d.]+) seconds", took=True
    ),
    Phase(
        "compile cache lookup",
        r"Compiling model again due to a load failure from |" + _LOADED,
        start=_WARMUP,
        optional=True,
    ),
    Phase(COMPILE, _COMPILED, start=_WARMUP, last=True),
    Phase("warm-up run (vLLM)", r"Initial profiling/warmup run took (?P<s>[\d.]+) s", took=True),
    Phase("KV cache", r"GPU KV cache size: [\d,]+ tokens", start=_WARMED),
    Phase("init engine: compile, warm-up, KV cache (vLLM)", _INIT, took=True),
    Phase("API server start", READY, start=_INIT),
    Phase(
        "of which multi-modal warm-up (vLLM)",
        r"(?<!Readonly )Multi-modal warmup completed in (?P<s>[\d.]+)s",
        took=True,
    ),
)
#: The warm start must spend at most this share of the cold start's compile time: a kept cache
#: that saves less than a quarter is no saving a reader could rely on (run-to-run noise on a
#: busy 2-core machine is a few seconds of a compile of tens).
WARM_COMPILE_SHARE = 0.75


def timed_line(seconds: float, line: str) -> str:
    """One line of a timed log: the stamp, a space, the line (carriage returns flattened)."""
    return f"{seconds:9.3f} {line.replace(chr(13), ' ')}"


def read_timed(text: str) -> list[Timed]:
    """A timed log's lines (:func:`timed_line`); ValueError naming the line otherwise."""
    out: list[Timed] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stamp, _, rest = line.strip(" ").partition(" ")
        try:
            out.append((float(stamp), rest))
        except ValueError:
            raise ValueError(f"timed log line {number}: no seconds stamp: {line[:80]!r}") from None
    return out


def _matches(lines: Sequence[Timed], pattern: str) -> list[tuple[float, str, re.Match[str]]]:
    found = []
    for at, line in lines:
        match = re.search(pattern, line)
        if match:
            found.append((at, line, match))
    return found


def phases(lines: Sequence[Timed]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every phase of one start found in its timed log up to :data:`READY` (later lines are
    requests), as ``{name, seconds, at_s, line}`` (``at_s``: when its closing line appeared),
    and the names of the phases whose lines are missing."""
    ready = _matches(lines, READY)
    if ready:
        lines = [x for x in lines if x[0] <= ready[0][0]]
    found: list[dict[str, Any]] = []
    missing: list[str] = []
    for phase in PHASES:
        ends = _matches(lines, phase.end)
        starts = _matches(lines, phase.start) if phase.start else [(0.0, "", None)]
        if not ends or not starts:
            if not phase.optional:
                missing.append(phase.name)
            continue
        at, line, _ = ends[-1] if phase.last or phase.took else ends[0]
        took = sum(float(m.group("s")) for _, _, m in ends) if phase.took else None
        seconds = at - starts[0][0] if took is None else took
        found.append(
            {"name": phase.name, "seconds": round(seconds, 3), "at_s": round(at, 3), "line": line}
        )
    return found, missing


def report(
    cpu: str, stack: str, starts: Sequence[Mapping[str, Any]], weight_bytes: int, speed: float
) -> dict[str, Any]:
    """The JSON document: ``{cpu, stack, weight_bytes, speed, starts: [{cache, phases,
    health_s, first_token_s, model}]}`` (``speed``: :func:`speed`; ``model``:
    :func:`against_model`'s rows, the model scaled by it)."""
    return {
        "cpu": cpu,
        "stack": stack,
        "weight_bytes": weight_bytes,
        "speed": round(speed, 3),
        "starts": [dict(s) for s in starts],
    }


def phase(start: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The phase ``name`` of one start; ValueError naming the start and the phase otherwise."""
    for found in start.get("phases") or ():
        if found.get("name") == name:
            return dict(found)
    raise ValueError(f"{start.get('cache', 'a')} start: no {name!r} phase in its log")


def compile_seconds(start: Mapping[str, Any]) -> float:
    return float(phase(start, COMPILE)["seconds"])


#: A p10 to p90 band leaves out a fifth of what happens: a model right about every phase still
#: sees that share of them outside their bands. More than that, or a whole start outside its
#: total's band, and the model does not describe this engine.
OUTSIDE_SHARE = 0.2


def outside(doc: Mapping[str, Any]) -> tuple[list[str], int, list[str]]:
    """The judged phases of both starts outside their band (``cache: name``; ``judged`` in
    :func:`against_model`), how many were judged, and the totals outside theirs."""
    phases, totals, judged = [], [], 0
    for start in doc["starts"]:
        for row in start["model"]:
            if row["name"] == "total":
                totals += [] if row["within"] else [f"{start['cache']}: total"]
            elif row["judged"]:
                judged += 1
                phases += [] if row["within"] else [f"{start['cache']}: {row['name']}"]
    return phases, judged, totals


def exit_status(doc: Mapping[str, Any]) -> int:
    """0 when the warm start's compile took at most :data:`WARM_COMPILE_SHARE` of the cold
    start's, both starts' totals are within the model's band, and at most
    :data:`OUTSIDE_SHARE` of their phases are outside theirs (:func:`against_model`);
    1 otherwise."""
    by_cache = {s["cache"]: compile_seconds(s) for s in doc["starts"]}
    saved = by_cache["warm"] <= WARM_COMPILE_SHARE * by_cache["cold"]
    phases, judged, totals = outside(doc)
    return 0 if saved and not totals and len(phases) <= OUTSIDE_SHARE * judged else 1


IMPORTS = "imports and arguments (API server)"


def speed(starts: Sequence[Mapping[str, Any]], reference_s: float) -> float:
    """How many times as long this machine takes as the one the model's CPU figures were
    taken on: the geometric middle of the starts' imports (:data:`IMPORTS`: single-threaded
    Python, the same work in every start, untouched by any cache) over ``reference_s``, the
    reference machine's (the ``cpu-imports`` figure)."""
    seconds = [float(phase(s, IMPORTS)["seconds"]) for s in starts]
    return float(math.prod(seconds) ** (1 / len(seconds)) / reference_s)


#: A phase's seconds are read to within two stamps of the log follower (it reads every 0.05 s)
#: or vLLM's own two-decimal figure: no band is judged more finely than this.
RESOLUTION_S = 0.1


def model_phases(start: Mapping[str, Any]) -> dict[str, float]:
    """One start's measured seconds in the cold-start model's phases (serving/capacity/
    coldstart.py, :func:`~serving.capacity.coldstart.cpu_path`), which partition the time from
    the process's start to :data:`READY`: the API server's imports, engine init (the engine
    core and worker processes, model loading less its weights), model class inspection, the
    weights, torch.compile, and the warm-up and server start after it (the compiled model's
    warm-up run, the KV cache, the API server)."""
    p = {
        name: phase(start, name)
        for name in (
            IMPORTS,
            "model class inspection",
            "engine core process",
            "worker process",
            "model loading",
            "of which weight loading (vLLM)",
            COMPILE,
            "API server start",
        )
    }
    weights = p["of which weight loading (vLLM)"]["seconds"]
    engine = sum(p[name]["seconds"] for name in ("engine core process", "worker process"))
    ready = p["API server start"]["at_s"]
    return {
        "imports": p[IMPORTS]["seconds"],
        "engine init": engine + p["model loading"]["seconds"] - weights,
        "model class inspection": p["model class inspection"]["seconds"],
        "weights": weights,
        COMPILE: p[COMPILE]["seconds"],
        "warm-up and server start": ready - p[COMPILE]["at_s"],
        "total": ready,
    }


def against_model(
    start: Mapping[str, Any], bands: Sequence[tuple[str, float, float, float]]
) -> list[dict[str, Any]]:
    """Each of the model's phases and its total (``bands``: name, p10, p50, p90, as
    :func:`serving.capacity.coldstart.bands` gives them) beside what ``start`` measured:
    ``{name, measured, p10, p50, p90, within, judged}``, within the band widened by
    :data:`RESOLUTION_S` each side. ``judged``: the row counts in :func:`outside`: not the
    speed probe (:data:`IMPORTS`' row: the model was scaled by it), not the total (judged on
    its own), and not a phase whose band is narrower than the log resolves (twice
    :data:`RESOLUTION_S`: the weights, a class inspection answered from the cache), which no
    measurement could fall outside. A start missing a log phase the mapping reads is a
    ValueError naming it (:func:`model_phases`); a model phase the mapping has no measure of,
    or a measured one the model lacks, a KeyError naming both lists: the two must partition
    the same time."""
    measured = model_phases(start)
    if {b[0] for b in bands} != set(measured):
        raise KeyError(
            f"the model's phases {sorted(b[0] for b in bands)} are not the measured "
            f"{sorted(measured)}"
        )
    return [
        {
            "name": name,
            "measured": round(measured[name], 2),
            "p10": round(p10, 2),
            "p50": round(p50, 2),
            "p90": round(p90, 2),
            "within": p10 - RESOLUTION_S <= measured[name] <= p90 + RESOLUTION_S,
            "judged": name not in ("imports", "total") and p90 - p10 >= 2 * RESOLUTION_S,
        }
        for name, p10, p50, p90 in bands
    ]
