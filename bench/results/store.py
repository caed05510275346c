"""The run directory: what a sweep writes, cell by cell, and how it is read back.

- ``run.json``: the run's metadata; rewritten when the run ends.
- ``cells.jsonl``: one record per finished cell, appended and fsynced as the cell ends, so an
  interrupted sweep keeps every finished cell and ``--resume`` runs only the rest. A torn last
  line is ignored when read and removed on resume (its cell runs again); a damaged line before
  it, or a record out of shape, is a :class:`StoreError` naming the line.
- ``.lock``: ``flock``-ed by the one writer; the kernel releases it however that process ends,
  so a lock file left behind is never stale.
- ``preflight.json``: why a run stopped before its first cell.
- ``requests/<cell id>.jsonl``: the cell's measured requests, one line each, in the order they
  were sent: ``start_s`` (from the cell's first send), ``ttft_s``, ``e2e_s``, the token counts,
  ``ok``, the HTTP ``status`` and ``error_kind``; a trace ``gemma4 plan search --trace`` reads.
  No prompt, answer or error text is kept (an error's text may hold what the server echoed).
  Written whole before the cell's record, so a finished cell always has it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from bench.results.record import RequestResult
from endpoint.limits import MAX_ECHO_CHARS
from endpoint.redact import redact
from serving.config.inputs import JsonInputError, parse_json

__all__ = [
    "MEASURED_STATUSES",
    "SCHEMA_VERSION",
    "CellKey",
    "RunData",
    "RunStore",
    "StoreError",
    "cell_order",
    "load_run",
]

SCHEMA_VERSION = 1
"""Bumped when a field changes meaning or disappears (new fields do not bump it)."""

MEASURED_STATUSES = ("ok", "failed", "short")
"""Statuses of a cell whose load ran (``skipped`` cells never ran)."""
IDENTITY_KEYS = ("url", "model", "grid", "options", "endpoint")
"""run.json fields a resumed run must match: one run directory is one experiment."""

RUN_FILE = "run.json"
LOCK_FILE = ".lock"
PREFLIGHT_FILE = "preflight.json"
CELLS_FILE = "cells.jsonl"
REQUESTS_DIR = "requests"
#: The fields of a measured request kept in ``requests/<cell id>.jsonl``.
REQUEST_FIELDS = (
    "ok", "start_s", "ttft_s", "e2e_s", "prompt_tokens", "output_tokens", "status", "error_kind",
)  # fmt: skip

STATS = ("mean", "median", "std", "p90", "p95", "p99")


def cell_order(record: dict[str, Any]) -> tuple[int, int, int, float]:
    """Sort key of a cell record (see :meth:`CellKey.order`)."""
    return CellKey.of(record).order()


def slices(cells: Iterable[dict[str, Any]]) -> list[tuple[int, float | None]]:
    """The (output tokens, request rate) pairs of ``cells``, closed loop first: a report's
    sections and a chart's files, one per pair."""
    keys = {(CellKey.of(c).output_tokens, CellKey.of(c).request_rate) for c in cells}
    return sorted(keys, key=lambda k: (k[0], -1.0 if k[1] is None else k[1]))


def slice_name(output_tokens: int, rate: float | None) -> str:
    """``o128`` (closed loop) or ``o128-r5``: a slice in a chart's file name."""
    return f"o{output_tokens}" + ("" if rate is None else f"-r{rate:g}")


class StoreError(Exception):
    """A run directory that cannot be used as asked (exists without --resume, wrong schema)."""


@dataclass(frozen=True)
class CellKey:
    """One point of the grid."""

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    request_rate: float | None = None
    """Poisson arrivals per second (open loop); None: closed loop at ``concurrency``."""

    @property
    def id(self) -> str:
        base = f"c{self.concurrency}-p{self.prompt_tokens}-o{self.output_tokens}"
        return base if self.request_rate is None else f"{base}-r{self.request_rate:g}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def order(self) -> tuple[int, int, int, float]:
        """Sort order: concurrency, prompt, output, rate (closed loop first)."""
        rate = -1.0 if self.request_rate is None else self.request_rate
        return (self.concurrency, self.prompt_tokens, self.output_tokens, rate)

    @classmethod
    def of(cls, record: dict[str, Any]) -> CellKey:
        rate = record.get("request_rate")
        return cls(
            int(record["concurrency"]),
            int(record["prompt_tokens"]),
            int(record["output_tokens"]),
            float(rate) if rate is not None else None,
        )


@dataclass
class RunData:
    """A run read back: its metadata and its finished cells, in the order they finished."""

    path: Path
    run: dict[str, Any]
    cells: list[dict[str, Any]]

    @property
    def label(self) -> str:
        return str(self.run.get("label") or self.path.name)

    def measured(self) -> list[dict[str, Any]]:
        """Cells whose load ran (``ok``, ``failed`` or ``short``)."""
        return [c for c in self.cells if c.get("status") in MEASURED_STATUSES]

    def expected_ids(self) -> list[str] | None:
        """The cell ids of the stored grid, or None when run.json has no grid."""
        grid = self.run.get("grid")
        if not isinstance(grid, dict):
            return None
        try:
            rates = grid.get("request_rates") or [None]
            return [
                CellKey(int(c), int(p), int(o), None if r is None else float(r)).id
                for r in rates
                for o in grid["output_tokens"]
                for p in grid["prompt_tokens"]
                for c in grid["concurrency"]
            ]
        except (KeyError, TypeError, ValueError):
            return None

    def missing_ids(self) -> list[str]:
        """Cells of the stored grid with no record (a run cut short)."""
        expected = self.expected_ids() or []
        have = {str(c.get("id")) for c in self.cells}
        return [i for i in expected if i not in have]

    def by_key(self) -> dict[CellKey, dict[str, Any]]:
        return {CellKey.of(c): c for c in self.cells}


TRUNCATED = "…[truncated]"
"""Ends a string cut at :data:`endpoint.limits.MAX_ECHO_CHARS` when a run is read back."""

Count = Annotated[int, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]
Figure = Annotated[float, Field(ge=0)]
_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class FailureSample(BaseModel):
    model_config = _STRICT
    kind: str | None
    status: int | None
    error: str


class _CellFields(BaseModel):
    """The fields of a cell record as the sweep writes them (``bench.load.sweep``); a stored
    record with another field, a field of another type or a figure out of its range is refused."""

    model_config = _STRICT
    id: str
    status: Literal["ok", "failed", "short", "skipped"]
    skip_reason: str | None = None
    concurrency: Count
    prompt_tokens: Count
    output_tokens: Count
    request_rate: Annotated[float, Field(gt=0)] | None = None
    started_at: str | None = None
    finished_at: str | None = None
    completed: Count | None = None
    failed: Count | None = None
    errors: dict[str, Count] | None = None
    failure_samples: list[FailureSample] | None = None
    failure_statuses: dict[str, Count] | None = None
    problems: list[str] | None = None
    warnings: list[str] | None = None
    success_rate: Fraction | None = None
    coalesced_share: Fraction | None = None
    spec_decode_acceptance_rate: Fraction | None = None
    total_input_tokens: Count | None = None
    total_output_tokens: Count | None = None
    short_requests: Count | None = None
    median_prompt_tokens: Count | None = None
    coalesced_tokens: Count | None = None
    loop_lag_samples: Count | None = None
    untimed_requests: Count | None = None
    workers: Count | None = None
    goodput_slo: dict[str, Figure] | None = None
    spec_decode: dict[str, Any] | None = None
    spec_decode_counters: dict[str, Any] | None = None
    prompt_tokens_method: str | None = None
    prompt_tokens_exact: bool | None = None
    client_limited: bool | None = None
    client_share_ttft: float | None = None
    client_share_itl: float | None = None
    client_share_e2el: float | None = None

    @model_validator(mode="after")
    def _id_matches_key(self) -> _CellFields:
        key = CellKey(self.concurrency, self.prompt_tokens, self.output_tokens, self.request_rate)
        if key.id != self.id:
            raise ValueError(f"id {redact(self.id, limit=60)!r} does not match its key")
        return self


_FIGURES = (
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "request_goodput",
    "achieved_request_rate",
    "mean_output_tokens",
    "spec_decode_acceptance_length",
    "server_in_flight",
    "mean_in_flight",
    "min_in_flight",
    "max_in_flight",
    "loop_lag_interval_ms",
    "ramp_s",
    "client_cpu_ms_per_request",
    *(f"{s}_loop_lag_ms" for s in ("mean", "median", "p99", "max")),
    *(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in STATS),
    *(f"{side}_mean_{m}_ms" for side in ("client", "server") for m in ("ttft", "itl", "e2el")),
    *(f"server_{m}_count" for m in ("ttft", "itl", "e2el")),
)
CellRecord = create_model(  # type: ignore[call-overload]
    "CellRecord", __base__=_CellFields, **{name: (Figure | None, None) for name in _FIGURES}
)
"""A cell record: :class:`_CellFields` and the non-negative figures :data:`_FIGURES`."""


class RunRecord(BaseModel):
    """``run.json``: the fields every reader relies on are typed; others (the target's
    identity, a recorded price) are kept as written and judged by their readers."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
    schema_version: Literal[1]
    model: str | None = None
    url: str | None = None
    label: str | None = None
    hardware: str | None = None
    created_at: str | None = None
    finished_at: str | None = None
    resumed: Count | None = None


def _refusal(where: str, exc: ValidationError) -> StoreError:
    """The first of pydantic's errors, in the store's words, naming the file, line and field."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"])
    if error["type"] == "missing":
        return StoreError(f"{where}: the record has no {field!r} field")
    if error["type"] == "extra_forbidden":
        return StoreError(f"{where}: unknown field {redact(field, limit=60)!r}")
    message = error["msg"].removeprefix("Value error, ")
    if not field:
        return StoreError(f"{where}: {message}")
    shown = redact(json.dumps(error["input"], default=str), limit=40)
    return StoreError(f"{where}: field {field!r}: {message[:1].lower()}{message[1:]}, got {shown}")


def cap_strings(value: Any, limit: int = MAX_ECHO_CHARS) -> Any:
    """``value`` with every string in it (keys too) cut to ``limit`` characters, marked with
    :data:`TRUNCATED`: what a run file holds is echoed by compare, gate and the MCP server. A
    string that is cut is redacted whole first, so a secret across the cut never shows in part."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        value = redact(value, limit=None)
        return value if len(value) <= limit else value[:limit] + TRUNCATED
    if isinstance(value, dict):
        return {cap_strings(k, limit): cap_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [cap_strings(v, limit) for v in value]
    return value


def _check_record(record: Any, where: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise StoreError(f"{where}: not a JSON object")
    try:
        CellRecord.model_validate(record)
    except ValidationError as exc:
        raise _refusal(where, exc) from None
    capped: dict[str, Any] = cap_strings(record)
    return capped


MAX_RUN_FILE_BYTES = 1 << 20
"""``run.json`` and ``preflight.json``: a run's description is a few KiB."""
MAX_CELLS_FILE_BYTES = 64 << 20
"""``cells.jsonl``: a cell's record is a few KiB; thousands of cells fit."""


def read_regular_file(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``; None when it
    does not exist. A symbolic link, a FIFO, a device (``/dev/zero``), a folder or a bigger
    file is a :class:`StoreError` naming it: nothing blocks, nothing unbounded is read."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if path.is_symlink():
            raise StoreError(f"{path} is a symbolic link; only regular files are read") from None
        raise StoreError(f"{path} cannot be read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path} is not a regular file (a FIFO, device or folder); refused")
        if info.st_size > max_bytes:
            raise StoreError(f"{path} is {info.st_size} bytes, over the cap of {max_bytes}")
        chunks = []
        size = 0
        while chunk := os.read(fd, min(1 << 20, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise StoreError(f"{path} grew past the cap of {max_bytes} bytes while read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _scan_cells(path: Path) -> tuple[list[dict[str, Any]], int | None]:
    """The records of ``cells.jsonl`` (the last record of a cell wins) and, when the last line
    is torn (no newline, or not JSON), the byte offset where it starts."""
    data = read_regular_file(path, MAX_CELLS_FILE_BYTES)
    if data is None:
        return [], None
    cells: dict[str, dict[str, Any]] = {}
    offset = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        is_last = number == len(lines)
        if is_last and not raw:
            break
        where = f"{path}, line {number}"
        try:
            record = parse_json(raw.decode("utf-8")) if raw.strip() else None
        except (JsonInputError, UnicodeDecodeError) as exc:
            if is_last or (number == len(lines) - 1 and not lines[-1]):
                return list(cells.values()), offset  # a line cut short by a crash
            why = (
                str(exc).removeprefix("not valid JSON: ")
                if isinstance(exc, JsonInputError)
                else "not UTF-8"
            )
            raise StoreError(f"{where}: not JSON ({why[:200]}); the run is damaged") from None
        if is_last:
            return list(cells.values()), offset  # complete JSON, but never terminated
        if record is not None:
            record = _check_record(record, where)
            cells[str(record["id"])] = record
        offset += len(raw) + 1
    return list(cells.values()), None


def load_run(path: str | Path) -> RunData:
    """Read a run directory. Raises :class:`StoreError` when it is not one."""
    root = Path(path)
    run_file = root / RUN_FILE
    data = read_regular_file(run_file, MAX_RUN_FILE_BYTES) if root.is_dir() else None
    if data is None:
        failure = _preflight_failure(root)
        if failure is not None:
            raise PreflightFailedError(failure)
        raise StoreError(f"{root} is not a benchmark run (no {RUN_FILE})")
    try:
        run = parse_json(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise StoreError(f"{run_file} is not JSON: not UTF-8 text") from None
    except JsonInputError as exc:
        raise StoreError(f"{run_file} is not JSON: {str(exc)[:200]}") from None
    if not isinstance(run, dict):
        raise StoreError(f"{run_file} is not a JSON object")
    version = run.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"{run_file} has schema_version {version!r}; this version reads {SCHEMA_VERSION}"
        )
    try:
        RunRecord.model_validate(run)
    except ValidationError as exc:
        raise _refusal(str(run_file), exc) from None
    return RunData(root, cap_strings(run), _scan_cells(root / CELLS_FILE)[0])


class PreflightFailedError(StoreError):
    """A run directory whose run stopped at its preflight (``preflight.json``): nothing was
    measured."""


def _preflight_failure(root: Path) -> str | None:
    """What ``preflight.json`` in ``root`` says, in one line; None when there is none."""
    path = root / PREFLIGHT_FILE
    try:
        data = read_regular_file(path, MAX_RUN_FILE_BYTES)
        if data is None:
            return None
        record = cap_strings(parse_json(data.decode("utf-8")))
    except (StoreError, ValueError):
        return f"{root}: the preflight failed; nothing was measured ({PREFLIGHT_FILE} unreadable)"
    if not isinstance(record, dict):
        record = {}
    status = record.get("status")
    http = f" (HTTP {status})" if isinstance(status, int) and not isinstance(status, bool) else ""
    return redact(
        f"{root}: the preflight failed at {record.get('at')}{http}; nothing was measured: "
        f"{record.get('reason')}"
    )


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` whole: a temporary file of its own (two writers never
    share one), fsync, then one rename; a failed write leaves the old file and no temporary."""
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class RunStore:
    """Writes one run directory (see the module docstring); holds its lock until :meth:`close`."""

    def __init__(
        self,
        path: Path,
        run: dict[str, Any],
        cells: list[dict[str, Any]],
        lock_fd: int | None = None,
    ) -> None:
        self.path = path
        self.run = run
        self.cells = cells
        self._lock_fd = lock_fd
        self.repaired = False
        """True when a torn last record was removed on opening."""

    @staticmethod
    def _lock(root: Path) -> int:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip()
            os.close(fd)
            who = f" (process {holder})" if holder.isdigit() else ""
            raise StoreError(
                f"another benchmark is writing to {root}{who}; wait for it to end or use "
                "another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd

    @classmethod
    def open(
        cls, path: str | Path, run: dict[str, Any], *, resume: bool, write: bool = True
    ) -> RunStore:
        """Start a run in ``path``, or continue the one there with ``resume`` (the same experiment:
        every :data:`IDENTITY_KEYS` field given must equal the stored one; a torn last record is
        removed); takes the lock. ``write=False`` defers run.json to :meth:`write_run` (after a
        preflight, so a failed start leaves no run behind)."""
        root = Path(path)
        fd = cls._lock(root)
        try:
            exists = (root / RUN_FILE).exists()
            if exists and not resume:
                raise StoreError(f"{root} already holds a run; pass --resume to continue it")
            if resume and not exists:
                raise StoreError(f"{root} holds no run to resume (no {RUN_FILE})")
            if resume:
                previous = load_run(root)
                differences = identity_differences(previous.run, run)
                if differences:
                    raise StoreError(
                        f"{root} holds another experiment; --resume continues it only with the "
                        "same settings: " + "; ".join(differences)
                    )
                cells, torn_at = _scan_cells(root / CELLS_FILE)
                merged = {**previous.run, **run, "created_at": previous.run.get("created_at")}
                merged["resumed"] = int(previous.run.get("resumed", 0) or 0) + 1
                merged.pop("finished_at", None)
                store = cls(root, merged, cells, fd)
                if torn_at is not None:
                    with (root / CELLS_FILE).open("r+b") as handle:
                        handle.truncate(torn_at)
                        handle.flush()
                        os.fsync(handle.fileno())
                    store.repaired = True
            else:
                with contextlib.suppress(FileNotFoundError):
                    (root / CELLS_FILE).unlink()  # left by a start that never wrote run.json
                store = cls(root, dict(run), [], fd)
            if write:
                store.write_run()
            return store
        except BaseException:
            os.close(fd)
            raise

    def close(self) -> None:
        """Release the lock (the kernel also releases it when the process ends)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def data(self) -> RunData:
        return RunData(self.path, self.run, self.cells)

    def finished_ids(self) -> set[str]:
        return {str(c["id"]) for c in self.cells}

    def write_preflight_failure(self, record: dict[str, Any]) -> None:
        """Keep why the run stopped before its first cell (``preflight.json``)."""
        text = json.dumps(
            {"schema_version": SCHEMA_VERSION, **record}, indent=2, sort_keys=True, default=str
        )
        write_atomic(self.path / PREFLIGHT_FILE, text + "\n")

    def clear_preflight_failure(self) -> None:
        """Remove the record of an earlier failed start once a preflight has passed."""
        with contextlib.suppress(FileNotFoundError):
            (self.path / PREFLIGHT_FILE).unlink()

    def write_run(self) -> None:
        self.run["schema_version"] = SCHEMA_VERSION
        write_atomic(self.path / RUN_FILE, json.dumps(self.run, indent=2, sort_keys=True) + "\n")

    def write_requests(self, cell_id: str, results: Iterable[RequestResult]) -> None:
        """Write a cell's measured requests (:data:`REQUEST_FIELDS`, ``start_s`` from its first
        send) to ``requests/<cell_id>.jsonl``, whole or not at all; nothing for no requests."""
        rows = sorted(results, key=lambda r: r.start_s)
        if not rows:
            return
        if not cell_id or "/" in cell_id or cell_id.startswith("."):
            raise StoreError(f"cell id {cell_id[:80]!r} cannot name a file")
        first = rows[0].start_s
        lines = []
        for r in rows:
            row = {name: getattr(r, name) for name in REQUEST_FIELDS}
            row["start_s"] = round(r.start_s - first, 6)
            lines.append(json.dumps(row, allow_nan=False))
        folder = self.path / REQUESTS_DIR
        folder.mkdir(exist_ok=True)
        write_atomic(folder / f"{cell_id}.jsonl", "\n".join(lines) + "\n")

    def append_cell(self, record: dict[str, Any]) -> None:
        """Append one finished cell to ``cells.jsonl`` and make it durable before returning."""
        line = json.dumps(record, sort_keys=True, allow_nan=False)
        with (self.path / CELLS_FILE).open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.cells = [c for c in self.cells if c.get("id") != record["id"]] + [record]


def _show(value: Any) -> str:
    """A stored or asked value for a message: redacted whole, then cut to 200 characters."""
    return redact(json.dumps(value, sort_keys=True, default=str), limit=200)


def identity_differences(stored: dict[str, Any], asked: dict[str, Any]) -> list[str]:
    """``field: stored X, asked Y`` for each :data:`IDENTITY_KEYS` field that differs (a field
    absent from ``asked``, or a nested key absent from the stored run, is not compared); nested
    dicts are compared key by key."""
    out: list[str] = []
    for name in IDENTITY_KEYS:
        if name not in asked:
            continue
        old, new = stored.get(name), asked[name]
        if isinstance(old, dict) and isinstance(new, dict):
            # A key the stored run never recorded (an older version wrote it) is not compared.
            for key in sorted(old):
                if old.get(key) != new.get(key):
                    out.append(
                        f"{name}.{key}: stored {_show(old.get(key))}, asked {_show(new.get(key))}"
                    )
        elif old != new:
            out.append(f"{name}: stored {_show(old)}, asked {_show(new)}")
    return out
