"""How long a new serving instance took to start, measured after deploy (pure; no Pulumi).

The post-deploy hook reads when the new Cloud Run revision or TPU queued resource was created
(and, on Cloud Run, became ready) from the resource's own outputs, and when the first token
came from its own clock; :func:`start_block` turns them into the run record's ``start`` block
(docs/benchmark-reference.md, "Measured starts"). :func:`summary` pools the blocks of a stack's
runs into what a calibration file keeps, and :func:`check_summary` reads it back. A time in
another shape than Google's APIs write, in the future, or more than a day from the creation is
refused by name and never recorded: nothing is claimed measured that was not.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

#: A start longer than this is not a start (a resource left failing, a clock gone wrong).
MAX_START_S = 86_400.0
TIMES = ("created_at", "ready_at", "first_token_at")
#: Each figure: the seconds from ``created_at`` to its time.
FIGURES = {"ready_s": "ready_at", "first_token_s": "first_token_at"}
#: RFC 3339 as Google's APIs write it (protobuf's JSON Timestamp): UTC, "Z", and 0, 3, 6 or 9
#: fractional digits (Kubernetes writes none).
_GOOGLE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}|\d{6}|\d{9}))?Z", re.ASCII
)
_SHAPE = "YYYY-MM-DDTHH:MM:SS, then 0, 3, 6 or 9 fractional digits, then Z"


class StartError(ValueError):
    """A start time or figure that cannot be recorded or read, naming the field."""


def _shown(value: Any) -> str:
    """A value from a resource's outputs or a run record, bounded: a string of at most 40
    characters, else only a string's length or a value's type (an output can be anything, of
    any length; a secret output is no string but a wrapped value). Where a line leaves the
    process it is redacted too (bench/hook.py, `plan calibrate`)."""
    if not isinstance(value, str):
        return type(value).__name__
    return repr(value) if len(value) <= 40 else f"a string of {len(value):,} characters"


def _label(value: Any) -> str:
    """A name from a resource's outputs (a revision, a condition's type or state) as it is
    when it is one printable line of at most 63 characters (a DNS label's most) or None; else
    :func:`_shown`'s bounded form."""
    ok = isinstance(value, str) and value.isprintable() and len(value) <= 63
    return str(value) if ok or value is None else _shown(value)


def parse_time(value: Any, name: str) -> datetime:
    """``value`` as Google's APIs write a time, in UTC; StartError naming ``name`` otherwise."""
    match = _GOOGLE_TIME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise StartError(f"{name}: {_shown(value)} is not an RFC 3339 time in UTC ({_SHAPE})")
    *fields, fraction = match.groups()
    year, month, day, hour, minute, second = map(int, fields)
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
    except ValueError as exc:
        raise StartError(f"{name}: {_shown(value)} is not a calendar time ({exc})") from None


def google_time(moment: datetime) -> str:
    """``moment`` as Google's APIs write it (microseconds, UTC, Z; four-digit year, which
    ``strftime("%Y")`` does not write before the year 1000)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _path(outputs: Mapping[str, Any] | None, *keys: str | int) -> Any:
    value: Any = outputs or {}
    for key in keys:
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and len(value) > key else None
        else:
            value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _cloud_run(
    new: Mapping[str, Any], old: Mapping[str, Any] | None
) -> tuple[dict[str, tuple[Any, str]], dict[str, str]]:
    """A Cloud Run service's outputs (pulumi-gcp ``cloudrunv2.Service``): created at its
    ``createTime`` (a new service) or ``updateTime`` (an update that created a revision), ready
    at its terminal condition's ``lastTransitionTime`` once that revision serves."""
    found: dict[str, tuple[Any, str]] = {}
    missing: dict[str, str] = {}
    revision = new.get("latestCreatedRevision")
    name = _label(revision)
    if old is not None and revision == old.get("latestCreatedRevision"):
        why = f"the update created no new revision (latestCreatedRevision {name} unchanged)"
        return found, {"created_at": why, "ready_at": why}
    key = "createTime" if old is None else "updateTime"
    found["created_at"] = (new.get(key), f"the service's {key} (revision {name})")
    condition = _path(new, "terminalConditions", 0)
    state = (_path(condition, "type"), _path(condition, "state"))
    if new.get("latestReadyRevision") != revision:
        missing["ready_at"] = f"revision {name} is not the latest ready one"
    elif state != ("Ready", "CONDITION_SUCCEEDED"):
        missing["ready_at"] = (
            f"the terminal condition is {_label(state[0])} {_label(state[1])}, not Ready"
        )
    else:
        found["ready_at"] = (
            _path(condition, "lastTransitionTime"),
            "terminalConditions[0].lastTransitionTime (Ready)",
        )
    return found, missing


def observed_times(
    platform: str, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None
) -> tuple[dict[str, tuple[Any, str]], dict[str, str]]:
    """(time name -> (raw value, where it comes from), time name -> why it is not known) from
    the outputs of the resource the hooks are bound to; ``old`` None: it was just created."""
    if new is None:
        why = "the resource has no outputs (a preview)"
        return {}, {"created_at": why, "ready_at": why}
    if platform == "cloud-run":
        return _cloud_run(new, old)
    if platform == "tpu-vm" and old is not None:
        why = "the update changed no node (a TPU node is only ever replaced)"
        return {}, {"created_at": why, "ready_at": why}
    if platform == "tpu-vm":
        return {"created_at": (new.get("createTime"), "the queued resource's createTime")}, {
            "ready_at": "the TPU API records no time the node or vLLM became ready"
        }
    why = (
        "the hooks are bound to the endpoint ConfigMap, whose outputs hold no time of the "
        "serving Pods"
    )
    return {}, {"created_at": why, "ready_at": why}


def _figure(times: Mapping[str, datetime], figure: str, name: str) -> float:
    """``figure`` from ``times``: in [0, a day] from ``created_at``, and a first token no
    earlier than ``ready_at`` when both are known (before it, the hook's clock is behind the
    API's, or the block was edited: the figure would be too short)."""
    at = times[FIGURES[figure]]
    seconds = (at - times["created_at"]).total_seconds()
    if not 0 <= seconds <= MAX_START_S:
        raise StartError(
            f"{name}: {seconds:,.3f} s from created_at is outside [0, {MAX_START_S:,.0f}] s"
        )
    ready = times.get("ready_at")
    if figure == "first_token_s" and ready is not None and at < ready:
        raise StartError(
            f"{name}: first_token_at is {(ready - at).total_seconds():,.3f} s before ready_at "
            "(it must be at or after it)"
        )
    return round(seconds, 3)


def start_block(
    found: Mapping[str, tuple[Any, str]],
    missing: Mapping[str, str],
    first_token: tuple[datetime, str] | None,
    now: datetime,
) -> tuple[dict[str, Any], dict[str, str]]:
    """(the run record's ``start`` block, time or figure name -> why it is not recorded): each
    time parsed and no later than ``now``, each figure in [0, a day] from ``created_at``."""
    why = dict(missing)
    if first_token is None:
        why["first_token_at"] = "no streamed answer was timed"
    else:
        found = {**found, "first_token_at": (google_time(first_token[0]), first_token[1])}
    times: dict[str, datetime] = {}
    sources: dict[str, str] = {}
    for name in TIMES:
        if name not in found:
            continue
        raw, source = found[name]
        try:
            if raw is None:
                raise StartError(f"{name}: absent from the outputs ({source})")
            moment = parse_time(raw, name)
            if moment > now:
                raise StartError(f"{name}: {raw} is in the future (now {google_time(now)})")
        except StartError as exc:
            why[name] = str(exc)
            continue
        times[name], sources[name] = moment, source
    block: dict[str, Any] = {name: google_time(t) for name, t in times.items()}
    for figure, at in FIGURES.items():
        if "created_at" not in times or at not in times:
            continue
        try:
            block[figure] = _figure(times, figure, figure)
        except StartError as exc:
            why[figure] = str(exc)
    if block:
        block["sources"] = sources
    return block, why


def start_line(block: Mapping[str, Any], why: Mapping[str, str]) -> str:
    """The hook's one line: the figures recorded, and why each missing one is not."""
    shown = [f"{k[:-2].replace('_', ' ')} {block[k]:,.1f} s" for k in FIGURES if k in block]
    head = "start: " + (", ".join(shown) + " after creation" if shown else "no figure recorded")
    return head + "".join(f"; {name} not recorded: {reason}" for name, reason in why.items())


def check_block(raw: Any, where: str) -> dict[str, float]:
    """A run record's ``start`` figures, each equal to its times' difference (so an edited
    figure is refused) and held to the rules it was recorded by; StartError naming ``where``
    and the field otherwise."""
    if not isinstance(raw, Mapping):
        raise StartError(f"{where}: start must be an object")
    figures = [figure for figure in FIGURES if figure in raw]
    needed = {"created_at", *(FIGURES[figure] for figure in figures)} if figures else set()
    times = {
        name: parse_time(raw.get(name), f"{where}: start.{name}")
        for name in TIMES
        if name in raw or name in needed
    }
    out: dict[str, float] = {}
    for figure in figures:
        value = raw[figure]
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise StartError(f"{where}: start.{figure} must be a number of seconds")
        expected = _figure(times, figure, f"{where}: start.{figure}")
        # Compared as numbers only once in range: an integer of hundreds of digits is no float.
        if not (0 <= value <= MAX_START_S and math.isclose(value, expected, abs_tol=1e-3)):
            raise StartError(
                f"{where}: start.{figure} is {str(value)[:40]}, its times say {expected} (edited?)"
            )
        out[figure] = float(value)
    return out


def _p90(values: Sequence[float]) -> float:
    """The 90th percentile by linear interpolation between closest ranks (as the benchmark's)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def summary(
    stack: str, target: Mapping[str, str], figures: Mapping[str, Mapping[str, float]]
) -> dict[str, Any]:
    """What a calibration file keeps of its runs' starts (run id -> :func:`check_block`'s
    figures): per figure n, p50 and p90, with the stack, its ``target`` (what the stack ran:
    its image, checkpoint, hardware..., which a reader matches before showing them) and the
    run ids they measured."""
    out: dict[str, Any] = {"stack": stack, "target": dict(target), "runs": sorted(figures)}
    for figure in FIGURES:
        values = [f[figure] for f in figures.values() if figure in f]
        out[figure] = (
            {
                "n": len(values),
                "p50_s": round(statistics.median(values), 3),
                "p90_s": round(_p90(values), 3),
            }
            if values
            else None
        )
    return out


def check_summary(raw: Any) -> dict[str, Any] | None:
    """A calibration file's ``start`` (null, or :func:`summary`'s shape, exactly: no other key
    is kept or shown); TypeError naming the field otherwise (the caller names the file)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"stack", "target", "runs", *FIGURES}:
        raise TypeError(
            f"start must be null or an object of {sorted(['stack', 'target', 'runs', *FIGURES])}"
        )
    if not (isinstance(raw["stack"], str) and 0 < len(raw["stack"]) <= 300):
        raise TypeError("start.stack must be a string of 1 to 300 characters")
    target = raw["target"]
    if (
        not isinstance(target, dict)
        or not 0 < len(target) <= 16
        or not all(isinstance(v, str) and len(v) <= 300 for v in (*target, *target.values()))
    ):
        raise TypeError(
            "start.target must be an object of 1 to 16 names to strings of at most 300 characters"
        )
    runs = raw["runs"]
    if (
        not isinstance(runs, list)
        or not runs
        or not all(isinstance(r, str) and 0 < len(r) <= 255 for r in runs)
        or len(set(runs)) != len(runs)
    ):
        raise TypeError("start.runs must be a non-empty list of distinct run ids (1 to 255 chars)")
    shape = f"null or {{n: 1 to the runs' count, p50_s <= p90_s in [0, {MAX_START_S:.0f}]}}"
    for figure in FIGURES:
        block = raw[figure]
        if block is None:
            continue
        ok = isinstance(block, dict) and set(block) == {"n", "p50_s", "p90_s"}
        n = block["n"] if ok else None
        ok = ok and isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= len(runs)
        pair = [block.get(k) for k in ("p50_s", "p90_s")] if ok else []
        if (
            not ok
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= MAX_START_S
                for v in pair
            )
            or pair[0] > pair[1]
        ):
            raise TypeError(f"start.{figure} must be {shape}")
    if all(raw[figure] is None for figure in FIGURES):
        raise TypeError(f"start must hold at least one of {list(FIGURES)} (not all null)")
    return dict(raw)
