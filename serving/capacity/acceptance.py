"""MTP acceptance a benchmark run measured: vLLM's spec-decode counters, cell by cell (pure).

The four ``vllm:spec_decode_*`` counters of vLLM 0.27.1 and the two figures derived from them
(acceptance rate = accepted / draft tokens; mean acceptance length = 1 + accepted / drafts)
are described in docs/performance-calibration.md. A benchmark cell stores the counters at the edges
of its window (``spec_decode_counters``), their deltas (``spec_decode``) and the two figures.
:func:`run_acceptance` derives the figures again from the counters, and refuses, naming the
cell and the counter, a cell whose counters cannot come from vLLM serving the stack: accepted
above drafted, a counter that went backwards (the server restarted in the window), drafts on a
stack without MTP, none on a stack with MTP, and stored figures that disagree with the counters
(the run was edited).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

#: The record's key for each counter, and vLLM's metric name.
COUNTERS = {
    "num_drafts": "vllm:spec_decode_num_drafts",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
#: Cells whose load ran (the benchmark store's measured statuses).
MEASURED = ("ok", "failed", "short")
#: Largest count a counter may hold (bounded input).
MAX_COUNT = 1e15
_TOL = 1e-9


class AcceptanceError(ValueError):
    """A run whose spec-decode counters are inconsistent, torn or edited."""


@dataclass(frozen=True)
class _Counts:
    drafts: int
    draft_tokens: int
    accepted: int

    @property
    def rate(self) -> float:
        """vLLM's acceptance rate: accepted / draft tokens."""
        return self.accepted / self.draft_tokens

    @property
    def mean_accepted_length(self) -> float:
        """vLLM's mean acceptance length: 1 + accepted / drafts."""
        return 1.0 + self.accepted / self.drafts


@dataclass(frozen=True)
class CellCounts(_Counts):
    """One cell's counter deltas over its measured window."""

    cell: str
    #: Drafts with position ``i`` accepted (empty when the server did not expose it).
    per_position: tuple[int, ...] = ()


@dataclass(frozen=True)
class MeasuredAcceptance(_Counts):
    """Acceptance pooled over a run's cells (counts summed, then divided: vLLM's figures)."""

    per_position: tuple[int, ...]
    cells: tuple[str, ...]
    num_speculative_tokens: int
    run: str = ""

    @property
    def per_draft_token(self) -> float:
        """The per-draft-token acceptance ``F`` (``--mtp-acceptance``) whose mean accepted
        length ``1 + F + ... + F^k`` is the measured one."""
        return equivalent_acceptance(self.mean_accepted_length, self.num_speculative_tokens)

    def source(self) -> str:
        where = f"run {self.run}" if self.run else "the run"
        return (
            f"measured in {where}: vLLM's spec-decode counters over {len(self.cells)} cell(s), "
            f"{self.accepted:,} of {self.draft_tokens:,} draft tokens accepted in "
            f"{self.drafts:,} drafts (mean accepted length {self.mean_accepted_length:.3f})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "acceptance": self.per_draft_token,
            "acceptance_rate": self.rate,
            "mean_accepted_length": self.mean_accepted_length,
            "num_drafts": self.drafts,
            "num_draft_tokens": self.draft_tokens,
            "num_accepted_tokens": self.accepted,
            "accepted_per_position": list(self.per_position),
            "num_speculative_tokens": self.num_speculative_tokens,
            "cells": list(self.cells),
            "source": self.source(),
        }


def equivalent_acceptance(length: float, k: int) -> float:
    """``F`` in [0, 1] with ``1 + F + F^2 + ... + F^k == length`` (bisection; ``length`` in
    [1, k + 1])."""
    if not 1 <= k <= 16:
        raise ValueError(f"num_speculative_tokens must be in [1, 16], got {k}")
    if not (math.isfinite(length) and 1.0 <= length <= k + 1.0):
        raise ValueError(f"mean accepted length must be in [1, {k + 1}], got {length!r}")
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2.0
        if 1.0 + sum(mid**i for i in range(1, k + 1)) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _where(cell: Mapping[str, Any]) -> str:
    return f"cell {str(cell.get('id', '?'))[:60]}"


def _count(value: Any, what: str, where: str) -> float:
    """A counter value: a finite, whole, bounded number (negative allowed: a delta)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AcceptanceError(f"{where}: {what} must be a whole number, got {str(value)[:40]!r}")
    if value != int(value) or abs(value) > MAX_COUNT:
        raise AcceptanceError(
            f"{where}: {what} must be a whole number up to {MAX_COUNT:g} (vLLM counts "
            f"tokens and drafts), got {value!r}"
        )
    return float(value)


def _snapshot(raw: Any, edge: str, where: str) -> tuple[dict[str, float], list[float]]:
    if not isinstance(raw, Mapping):
        raise AcceptanceError(f"{where}: spec_decode_counters.{edge} must be an object")
    values = {}
    for key, metric in COUNTERS.items():
        value = _count(raw.get(key), f"{metric} ({edge} the window)", where)
        if value < 0:
            raise AcceptanceError(f"{where}: {metric} ({edge} the window) is negative")
        values[key] = value
    per = raw.get("accepted_per_position", [])
    if not isinstance(per, list) or len(per) > 16:
        raise AcceptanceError(
            f"{where}: spec_decode_counters.{edge}.accepted_per_position must be a list of at "
            "most 16 counts"
        )
    return values, [_count(v, f"{PER_POSITION} ({edge} the window)", where) for v in per]


def cell_counts(cell: Mapping[str, Any], num_speculative_tokens: int | None) -> CellCounts | None:
    """The cell's counter deltas (None: no speculative decoding in the cell), checked against
    vLLM's semantics and the stack (``num_speculative_tokens`` None: no MTP)."""
    where = _where(cell)
    counters = cell.get("spec_decode_counters")
    stored = cell.get("spec_decode")
    rate = cell.get("spec_decode_acceptance_rate")
    length = cell.get("spec_decode_acceptance_length")
    if counters is None and stored is None:
        if rate is not None or length is not None:
            raise AcceptanceError(
                f"{where}: spec_decode_acceptance_rate/length are set but the cell holds no "
                f"spec-decode counters ({COUNTERS['num_drafts']}): the run was edited"
            )
        return None
    deltas: dict[str, float] | None = None
    per: list[float] = []
    if counters is not None:
        if not isinstance(counters, Mapping) or set(counters) != {"before", "after"}:
            raise AcceptanceError(
                f"{where}: spec_decode_counters must be an object with 'before' and 'after'"
            )
        before, per_before = _snapshot(counters["before"], "before", where)
        after, per_after = _snapshot(counters["after"], "after", where)
        deltas = {}
        for key, metric in COUNTERS.items():
            delta = after[key] - before[key]
            if delta < 0:
                raise AcceptanceError(
                    f"{where}: {metric} went backwards over the window ({before[key]:g} -> "
                    f"{after[key]:g}): the counter was reset (the server restarted), so the "
                    "cell did not measure one server"
                )
            deltas[key] = delta
        if per_after or per_before:
            if len(per_before) != len(per_after):
                raise AcceptanceError(
                    f"{where}: {PER_POSITION} has {len(per_before)} positions before the window "
                    f"and {len(per_after)} after"
                )
            per = [a - b for a, b in zip(per_after, per_before, strict=True)]
            if any(v < 0 for v in per):
                raise AcceptanceError(
                    f"{where}: {PER_POSITION} went backwards over the window: the counter was "
                    "reset (the server restarted)"
                )
    if stored is not None:
        if not isinstance(stored, Mapping):
            raise AcceptanceError(f"{where}: spec_decode must be an object of counter deltas")
        values = {
            key: _count(stored.get(key), f"spec_decode.{key} ({metric})", where)
            for key, metric in COUNTERS.items()
        }
        for key, metric in COUNTERS.items():
            if values[key] < 0:
                raise AcceptanceError(
                    f"{where}: spec_decode.{key} ({metric}) is negative: the counter was reset "
                    "(the server restarted) within the window"
                )
            if deltas is not None and values[key] != deltas[key]:
                raise AcceptanceError(
                    f"{where}: spec_decode.{key} is {values[key]:g} but {metric} moved "
                    f"{deltas[key]:g} over the window: the run was edited"
                )
        if deltas is None:
            deltas = values
    assert deltas is not None
    drafts = deltas["num_drafts"]
    if drafts == 0 and deltas["num_draft_tokens"] == 0 and deltas["num_accepted_tokens"] == 0:
        if stored is not None or rate is not None or length is not None:
            raise AcceptanceError(
                f"{where}: acceptance figures are stored but {COUNTERS['num_drafts']} did not "
                "move over the window: the run was edited"
            )
        return None
    k = num_speculative_tokens
    if k is None:
        raise AcceptanceError(
            f"{where}: {COUNTERS['num_drafts']} counted {drafts:g} drafts, but the stack runs "
            "no speculative decoding: a run of another configuration"
        )
    c = CellCounts(
        int(drafts),
        int(deltas["num_draft_tokens"]),
        int(deltas["num_accepted_tokens"]),
        str(cell.get("id", "")),
    )
    if c.drafts <= 0 or c.draft_tokens <= 0:
        raise AcceptanceError(
            f"{where}: {COUNTERS['num_drafts']} moved {c.drafts} and "
            f"{COUNTERS['num_draft_tokens']} {c.draft_tokens}: both must count at least one"
        )
    if c.accepted > c.draft_tokens:
        raise AcceptanceError(
            f"{where}: {COUNTERS['num_accepted_tokens']} ({c.accepted}) is more than "
            f"{COUNTERS['num_draft_tokens']} ({c.draft_tokens}): vLLM accepts only drafted tokens"
        )
    if c.draft_tokens > k * c.drafts:
        raise AcceptanceError(
            f"{where}: {COUNTERS['num_draft_tokens']} ({c.draft_tokens}) is more than "
            f"{k} (the stack's num_speculative_tokens) x {COUNTERS['num_drafts']} ({c.drafts}): "
            "a run of another speculative configuration"
        )
    if isinstance(stored, Mapping) and stored.get("acceptance_by_position"):
        fractions = stored["acceptance_by_position"]
        if not isinstance(fractions, list) or len(fractions) > 16:
            raise AcceptanceError(
                f"{where}: spec_decode.acceptance_by_position must be a list of at most 16"
            )
        from_counters, per = per, []
        for f in fractions:
            if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f):
                raise AcceptanceError(
                    f"{where}: spec_decode.acceptance_by_position must hold numbers"
                )
            n = f * c.drafts
            if abs(n - round(n)) > 1e-6 * max(1.0, c.drafts):
                raise AcceptanceError(
                    f"{where}: spec_decode.acceptance_by_position x {COUNTERS['num_drafts']} is "
                    "not a whole count: the run was edited"
                )
            per.append(float(round(n)))
        if from_counters and from_counters != per:
            raise AcceptanceError(
                f"{where}: spec_decode.acceptance_by_position x drafts is {per}, "
                f"{PER_POSITION} moved {from_counters}: the run was edited"
            )
    if per:
        _check_positions(c, per, k, where)
        c = replace(c, per_position=tuple(int(v) for v in per))
    _check_summary(cell, c, where)
    return c


def _check_positions(c: CellCounts, per: Sequence[float], k: int, where: str) -> None:
    if len(per) > k:
        raise AcceptanceError(
            f"{where}: {PER_POSITION} has {len(per)} positions; the stack drafts {k} "
            "(num_speculative_tokens): a run of another speculative configuration"
        )
    if any(v > c.drafts for v in per) or any(b > a for a, b in itertools.pairwise(per)):
        raise AcceptanceError(
            f"{where}: {PER_POSITION} must not exceed {COUNTERS['num_drafts']} ({c.drafts}) nor "
            "grow with the position (a token is accepted only after the ones before it)"
        )
    if sum(per) != c.accepted:
        raise AcceptanceError(
            f"{where}: {PER_POSITION} sums to {sum(per):g}, {COUNTERS['num_accepted_tokens']} "
            f"moved {c.accepted}: the counters disagree"
        )


def _check_summary(cell: Mapping[str, Any], c: CellCounts, where: str) -> None:
    """The stored figures must be the ones the counters give (else the run was edited)."""
    stored = cell.get("spec_decode")
    figures = [
        ("spec_decode_acceptance_rate", cell.get("spec_decode_acceptance_rate"), c.rate),
        (
            "spec_decode_acceptance_length",
            cell.get("spec_decode_acceptance_length"),
            c.mean_accepted_length,
        ),
    ]
    if isinstance(stored, Mapping):
        figures += [
            ("spec_decode.acceptance_rate", stored.get("acceptance_rate"), c.rate),
            (
                "spec_decode.mean_acceptance_length",
                stored.get("mean_acceptance_length"),
                c.mean_accepted_length,
            ),
        ]
    for name, value, expected in figures:
        ok = (
            not isinstance(value, bool)
            and isinstance(value, int | float)
            and math.isfinite(value)
            and math.isclose(float(value), expected, rel_tol=_TOL, abs_tol=1e-12)
        )
        if not ok:
            raise AcceptanceError(
                f"{where}: {name} is {str(value)[:40]}, the spec-decode counters give "
                f"{expected:.6g} (accepted {c.accepted} / draft tokens {c.draft_tokens}, "
                f"drafts {c.drafts}): the run was edited"
            )


def run_acceptance(
    cells: Iterable[Mapping[str, Any]],
    num_speculative_tokens: int | None,
    run: str = "",
) -> MeasuredAcceptance | None:
    """The acceptance pooled over the run's ``ok`` cells, after checking every measured cell's
    counters (:func:`cell_counts`). None without MTP. On a stack with MTP every ``ok`` cell
    whose requests produced more than one token (so decoded, and drafted) must hold counters."""
    counts: list[CellCounts] = []
    for cell in cells:
        if cell.get("status") not in MEASURED:
            continue
        c = cell_counts(cell, num_speculative_tokens)
        if cell.get("status") != "ok":
            continue
        if c is None:
            output = cell.get("mean_output_tokens", cell.get("output_tokens"))
            decoded = not (isinstance(output, int | float) and output <= 1)
            if num_speculative_tokens is not None and decoded:
                raise AcceptanceError(
                    f"{_where(cell)}: no spec-decode counters ({COUNTERS['num_drafts']} did not "
                    f"move, or /metrics was not read) though the stack drafts "
                    f"{num_speculative_tokens} tokens a step: the cell cannot say what was "
                    "accepted"
                )
            continue
        counts.append(c)
    if num_speculative_tokens is None or not counts:
        return None
    width = max(len(c.per_position) for c in counts)
    per: tuple[int, ...] = ()
    if all(len(c.per_position) == width for c in counts):
        per = tuple(sum(c.per_position[i] for c in counts) for i in range(width))
    return MeasuredAcceptance(
        drafts=sum(c.drafts for c in counts),
        draft_tokens=sum(c.draft_tokens for c in counts),
        accepted=sum(c.accepted for c in counts),
        per_position=per,
        cells=tuple(c.cell for c in counts),
        num_speculative_tokens=num_speculative_tokens,
        run=run,
    )
