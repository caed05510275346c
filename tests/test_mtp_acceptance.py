"""MTP acceptance measured by a run: vLLM's spec-decode counters, checked cell by cell, feed the
calibration and `gemma4 plan --calibration-run`; a torn, foreign or edited run is refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bench.results.store import RunStore
from gemma4.plan_cli import main
from serving.capacity.acceptance import (
    AcceptanceError,
    cell_counts,
    equivalent_acceptance,
    run_acceptance,
)
from serving.capacity.evidence import accepted_length

K = 3
RTX_MODEL = "google/gemma-4-12B-it-qat-w4a16-ct"


def spec_cell(
    cell_id: str = "c1-p128-o64",
    before: tuple[int, int, int, list[int]] = (1000, 3000, 1500, [700, 500, 300]),
    delta: tuple[int, int, int, list[int]] = (100, 300, 160, [70, 55, 35]),
) -> dict[str, Any]:
    """A cell as `gemma4 bench run` stores it: the counters at the window's edges, their
    deltas and the figures vLLM's definitions give (160 of 300 accepted in 100 drafts)."""
    d, t, a, per = delta
    after = tuple(x + y for x, y in zip(before[:3], delta[:3], strict=True))

    def snap(v: tuple[Any, ...], p: list[int]) -> dict[str, Any]:
        return {
            "num_drafts": float(v[0]),
            "num_draft_tokens": float(v[1]),
            "num_accepted_tokens": float(v[2]),
            "accepted_per_position": [float(x) for x in p],
        }

    per_after = [x + y for x, y in zip(before[3], per, strict=True)]
    return {
        "id": cell_id,
        "status": "ok",
        "mean_output_tokens": 64.0,
        "spec_decode_acceptance_rate": a / t,
        "spec_decode_acceptance_length": 1 + a / d,
        "spec_decode": {
            "num_drafts": float(d),
            "num_draft_tokens": float(t),
            "num_accepted_tokens": float(a),
            "acceptance_rate": a / t,
            "mean_acceptance_length": 1 + a / d,
            "acceptance_by_position": [x / d for x in per],
        },
        "spec_decode_counters": {
            "before": snap(before, before[3]),
            "after": snap(after, per_after),
        },
    }


def test_the_counters_give_vllms_figures() -> None:
    c = cell_counts(spec_cell(), K)
    assert c is not None
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_position) == (100, 300, 160, (70, 55, 35))
    assert c.rate == pytest.approx(160 / 300)
    assert c.mean_accepted_length == pytest.approx(2.6)


def test_a_run_pools_its_cells_counts_not_their_figures() -> None:
    cells = [spec_cell("a"), spec_cell("b", delta=(300, 900, 120, [80, 30, 10]))]
    m = run_acceptance(cells, K, "r1")
    assert m is not None
    assert (m.drafts, m.draft_tokens, m.accepted) == (400, 1200, 280)
    assert m.rate == pytest.approx(280 / 1200)
    assert m.mean_accepted_length == pytest.approx(1 + 280 / 400)
    assert m.per_position == (150, 85, 45)
    # The per-draft-token figure `--mtp-acceptance` takes gives back the measured length.
    assert accepted_length(m.per_draft_token, K) == pytest.approx(m.mean_accepted_length)
    assert "run r1" in m.source() and "280 of 1,200 draft tokens" in m.source()


def test_an_older_run_with_only_the_deltas_is_read() -> None:
    cell = spec_cell()
    del cell["spec_decode_counters"]
    c = cell_counts(cell, K)
    assert c is not None and c.per_position == (70, 55, 35) and c.accepted == 160


@pytest.mark.parametrize(
    ("length", "k"), [(1.0, 3), (4.0, 3), (2.6, 3), (1.5, 1), (9.0, 8), (1.0001, 16)]
)
def test_the_equivalent_acceptance_inverts_the_accepted_length(length: float, k: int) -> None:
    assert accepted_length(equivalent_acceptance(length, k), k) == pytest.approx(length)


@pytest.mark.parametrize(("length", "k"), [(0.99, 3), (4.01, 3), (2.0, 0), (2.0, 17)])
def test_the_equivalent_acceptance_refuses_what_no_acceptance_gives(length: float, k: int) -> None:
    with pytest.raises(ValueError, match="must be in"):
        equivalent_acceptance(length, k)


def _edit(cell: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(cell)
    *parents, last = path.split(".")
    target = out
    for p in parents:
        target = target[p]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return out


_DELETE = object()
_GOOD = spec_cell()
REFUSED: list[tuple[dict[str, Any], int | None, str]] = [
    # A counter that went backwards: the server restarted within the window.
    *(
        (
            _edit(_GOOD, f"spec_decode_counters.after.{key}", 0.0),
            K,
            f"vllm:spec_decode_{key} went backwards",
        )
        for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
    ),
    (
        _edit(_GOOD, "spec_decode_counters.after.accepted_per_position", [0.0, 0.0, 0.0]),
        K,
        "num_accepted_tokens_per_pos went backwards",
    ),
    (
        _edit(
            _edit(_GOOD, "spec_decode_counters", _DELETE), "spec_decode.num_accepted_tokens", -3.0
        ),
        K,
        "spec_decode.num_accepted_tokens (vllm:spec_decode_num_accepted_tokens) is negative",
    ),
    # Accepted more than drafted (in the counters, and one token over in the deltas only).
    (
        spec_cell(delta=(100, 300, 301, [100, 100, 101])),
        K,
        "vllm:spec_decode_num_accepted_tokens (301) is more than vllm:spec_decode_num_draft_tokens",
    ),
    (
        spec_cell(delta=(100, 100, 101, [100, 1, 0])),
        K,
        "(101) is more than vllm:spec_decode_num_draft_tokens (100)",
    ),
    # More draft tokens than the stack's drafts allow: another speculative configuration.
    (spec_cell(delta=(100, 301, 160, [70, 55, 35])), K, "more than 3 (the stack's"),
    (
        spec_cell(
            before=(1000, 3000, 1500, [700, 500, 300, 0]), delta=(100, 300, 160, [70, 55, 35, 0])
        ),
        K,
        "positions; the stack drafts 3",
    ),
    # Drafts on a stack without MTP.
    (_GOOD, None, "counted 100 drafts, but the stack runs no speculative decoding"),
    (
        _edit(_GOOD, "spec_decode_counters", _DELETE),
        None,
        "counted 100 drafts, but the stack runs no speculative decoding",
    ),
    # Per-position counts that vLLM cannot produce.
    (spec_cell(delta=(100, 300, 160, [50, 60, 50])), K, "grow with the position"),
    (spec_cell(delta=(100, 300, 160, [101, 59, 0])), K, "must not exceed"),
    (spec_cell(delta=(100, 300, 160, [70, 55, 30])), K, "sums to 155"),
    # Edited: stored figures or deltas that disagree with the counters.
    (
        _edit(_GOOD, "spec_decode_acceptance_rate", 0.6),
        K,
        "spec_decode_acceptance_rate is 0.6, the spec-decode counters give 0.533333",
    ),
    (_edit(_GOOD, "spec_decode_acceptance_length", 2.61), K, "spec_decode_acceptance_length is"),
    (_edit(_GOOD, "spec_decode_acceptance_length", None), K, "spec_decode_acceptance_length is"),
    (_edit(_GOOD, "spec_decode.acceptance_rate", 0.5), K, "spec_decode.acceptance_rate is 0.5"),
    (_edit(_GOOD, "spec_decode.mean_acceptance_length", 3), K, "mean_acceptance_length is 3"),
    (
        _edit(_GOOD, "spec_decode.num_accepted_tokens", 161.0),
        K,
        "spec_decode.num_accepted_tokens is 161 but vllm:spec_decode_num_accepted_tokens moved 160",
    ),
    (
        _edit(_edit(_GOOD, "spec_decode_counters", _DELETE), "spec_decode", _DELETE),
        K,
        "are set but the cell holds no spec-decode counters",
    ),
    (
        _edit(_GOOD, "spec_decode.acceptance_by_position", [0.705, 0.55, 0.35]),
        K,
        "not a whole count",
    ),
    (
        _edit(_GOOD, "spec_decode.acceptance_by_position", [0.71, 0.54, 0.35]),
        K,
        "spec_decode.acceptance_by_position x drafts is [71.0, 54.0, 35.0]",
    ),
    # Torn or foreign counters.
    (_edit(_GOOD, "spec_decode_counters.after", None), K, "spec_decode_counters.after must be"),
    (_edit(_GOOD, "spec_decode_counters.before", _DELETE), K, "with 'before' and 'after'"),
    (
        _edit(_GOOD, "spec_decode_counters.after.num_drafts", 100.5),
        K,
        "vllm:spec_decode_num_drafts (after the window) must be a whole number",
    ),
    (
        _edit(_GOOD, "spec_decode_counters.after.num_drafts", "1100"),
        K,
        "vllm:spec_decode_num_drafts (after the window) must be a whole number",
    ),
    (
        _edit(_GOOD, "spec_decode_counters.after.num_drafts", True),
        K,
        "must be a whole number",
    ),
    (
        _edit(_GOOD, "spec_decode_counters.before.num_draft_tokens", -1.0),
        K,
        "(before the window) is negative",
    ),
    (
        _edit(_GOOD, "spec_decode_counters.after.accepted_per_position", [1.0, 2.0]),
        K,
        "has 3 positions before the window and 2 after",
    ),
    (
        _edit(_GOOD, "spec_decode_counters.after", _GOOD["spec_decode_counters"]["before"]),
        K,
        "spec_decode.num_drafts is 100 but vllm:spec_decode_num_drafts moved 0",
    ),
    (
        _edit(
            _edit(_GOOD, "spec_decode", _DELETE),
            "spec_decode_counters.after",
            _GOOD["spec_decode_counters"]["before"],
        ),
        K,
        "did not move over the window: the run was edited",
    ),
]


@pytest.mark.parametrize(("cell", "k", "message"), REFUSED)
def test_inconsistent_counters_are_refused_naming_the_cell_and_counter(
    cell: dict[str, Any], k: int | None, message: str
) -> None:
    with pytest.raises(AcceptanceError) as info:
        run_acceptance([cell], k)
    assert message in str(info.value), str(info.value)
    assert str(info.value).startswith("cell c1-p128-o64: ")


def test_a_cell_of_an_mtp_stack_without_counters_is_refused_unless_it_never_decoded() -> None:
    plain = {"id": "c4-p128-o64", "status": "ok", "mean_output_tokens": 64.0}
    with pytest.raises(AcceptanceError, match="cell c4-p128-o64: no spec-decode counters"):
        run_acceptance([spec_cell(), plain], K)
    # One output token: the prefill brings it, nothing is drafted.
    assert run_acceptance([{**plain, "mean_output_tokens": 1.0}], K) is None
    # A plain stack's plain run: nothing measured, nothing refused.
    assert run_acceptance([plain], None) is None
    # A cell whose load did not run is not read; a failed cell's counters are still checked.
    assert run_acceptance([spec_cell(), {**plain, "status": "skipped"}], K) is not None
    bad = {**_edit(_GOOD, "spec_decode_acceptance_rate", 0.9), "status": "failed"}
    with pytest.raises(AcceptanceError, match="was edited"):
        run_acceptance([spec_cell("x"), bad], K)


# --- the commands ---------------------------------------------------------------------------


def _run_dir(path: Path, cells: list[dict[str, Any]], model: str = RTX_MODEL) -> Path:
    meta = {
        "model": model,
        "url": "http://x",
        "label": "rtx-run",
        "hardware": "rtx-pro-6000",
        "engine_version": "0.27.1",
    }
    grid = {
        "concurrency": [1],
        "prompt_tokens": [128],
        "output_tokens": [64],
        "request_rates": [None],
    }
    store = RunStore.open(path, {**meta, "grid": grid}, resume=False)
    for cell in cells:
        store.append_cell(
            {
                "concurrency": 1,
                "prompt_tokens": 128,
                "output_tokens": 64,
                "request_rate": None,
                **cell,
            }
        )
    store.close()
    return path


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_with_a_run_uses_the_acceptance_it_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path / "r", [spec_cell()])
    code, out, err = plan(
        capsys, "-s", "rtx6000", "--json", "--concurrency", "1", "--calibration-run", str(run)
    )
    assert code in (0, 1), err
    perf = json.loads(out)["performance"]
    assert perf["mean_accepted_length"] == pytest.approx(2.6)
    assert perf["mtp"]["acceptance"] == pytest.approx(equivalent_acceptance(2.6, K))
    assert perf["mtp"]["acceptance_source"].startswith("measured in run rtx-run")
    # The table says it too.
    code, out, _ = plan(
        capsys, "-s", "rtx6000", "--concurrency", "1", "--calibration-run", str(run)
    )
    assert "mean accepted length 2.60 (measured in run rtx-run" in " ".join(out.split())
    # An explicit flag wins, and says what the run measured.
    code, out, _ = plan(
        capsys,
        "-s",
        "rtx6000",
        "--json",
        "--concurrency",
        "1",
        "--calibration-run",
        str(run),
        "--mtp-acceptance",
        "0.3",
    )
    mtp = json.loads(out)["performance"]["mtp"]
    assert mtp["acceptance"] == 0.3
    assert mtp["acceptance_source"].startswith("--mtp-acceptance (the run measured 0.")
    assert json.loads(out)["performance"]["mean_accepted_length"] == pytest.approx(1.417)


@pytest.mark.parametrize(
    ("stack", "cells", "model", "message"),
    [
        (
            "rtx6000",
            [_edit(_GOOD, "spec_decode.num_accepted_tokens", 200.0)],
            RTX_MODEL,
            "cell c1-p128-o64: spec_decode.num_accepted_tokens is 200",
        ),
        (
            "rtx6000",
            [spec_cell(delta=(100, 301, 160, [70, 55, 35]))],
            RTX_MODEL,
            "vllm:spec_decode_num_draft_tokens (301) is more than 3",
        ),
        (
            "rtx6000",
            [{"id": "c1-p128-o64", "status": "ok", "mean_output_tokens": 64.0}],
            RTX_MODEL,
            "no spec-decode counters",
        ),
        ("l4", [spec_cell()], RTX_MODEL, "the stack runs no speculative decoding"),
        ("rtx6000", [spec_cell()], "google/gemma-4-12B-it", "the run measured model"),
    ],
)
def test_plan_refuses_a_torn_foreign_or_edited_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stack: str,
    cells: list[dict[str, Any]],
    model: str,
    message: str,
) -> None:
    run = _run_dir(tmp_path / "r", cells, model)
    code, out, err = plan(capsys, "-s", stack, "--json", "--calibration-run", str(run))
    assert code == 2 and out == ""
    assert f"--calibration-run {run}: " in err and message in err, err
    assert "Traceback" not in err and err.count("error:") == 1


def test_calibrate_refuses_an_edited_mtp_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = [_edit(spec_cell(), "spec_decode_acceptance_length", 3.2)]
    run = _run_dir(tmp_path / "r", cells)
    code, _, err = plan(capsys, "calibrate", str(run), "-s", "rtx6000", "--out", str(tmp_path))
    assert code == 2 and "cell c1-p128-o64: spec_decode_acceptance_length is 3.2" in err
    assert "Traceback" not in err
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("acceptance", 1.2, "mtp_acceptance.acceptance must be a number in [0, 1]"),
        ("acceptance", "0.5", "mtp_acceptance.acceptance must be a number in [0, 1]"),
        ("acceptance_rate", -0.1, "mtp_acceptance.acceptance_rate must be a number in [0, 1]"),
        ("mean_accepted_length", 2.5, "must equal mean_accepted_length"),
        ("num_speculative_tokens", 0, "num_speculative_tokens must be a number in [1, 16]"),
        ("source", "", "mtp_acceptance.source must be a string"),
    ],
)
def test_a_calibration_files_measured_acceptance_is_read_strictly(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    from serving.capacity.calibration import CalibrationError, load_calibration
    from serving.capacity.perf import Coefficients

    measured = run_acceptance([spec_cell()], K, "r")
    assert measured is not None
    good: dict[str, Any] = {
        "schema": 1,
        "hardware": "rtx-pro-6000",
        "checkpoint": RTX_MODEL,
        "vllm": "vllm 0.27.1",
        "coefficients": Coefficients().as_dict(),
        "held_out_error": {"itl": 0.1},
        "provenance": {"run": "r"},
        "mean_accepted_length": 2.6,
        "mtp_acceptance": measured.as_dict(),
    }
    path = tmp_path / "c.json"
    path.write_text(json.dumps(good))
    assert load_calibration(path).mtp_acceptance == measured.as_dict()
    good["mtp_acceptance"][field] = value
    path.write_text(json.dumps(good))
    with pytest.raises(CalibrationError) as info:
        load_calibration(path)
    assert message in str(info.value)


def test_a_plain_stacks_plain_run_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = {"id": "c1-p128-o64", "status": "ok", "mean_output_tokens": 64.0}
    run = _run_dir(tmp_path / "r", [plain], "google/gemma-4-12B-it-qat-w4a16-ct")
    code, out, err = plan(capsys, "-s", "l4", "--json", "--calibration-run", str(run))
    assert code in (0, 1), err
    with_run = json.loads(out)["performance"]
    code, out, _ = plan(capsys, "-s", "l4", "--json")
    assert with_run == json.loads(out)["performance"] and with_run["mtp"] is None
