"""A new instance's start, measured after deploy: read from the serving resource's outputs and
the hook's clock into the run record, refused by name when a time is not one, pooled by `plan
calibrate` for that stack only, and shown by `plan` beside the prediction."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pulumi
import pytest

from bench.results.gate import target_identity
from bench.results.store import RunStore, load_run
from components.stack import post_deploy_binding
from endpoint.auth import NoAuth
from gemma4.plan_cli import main, start_figures
from preview.harness import PROJECT, RecordingMocks, stack_config
from serving.capacity.calibration import Calibration, CalibrationError, load_calibration
from serving.capacity.perf import Coefficients
from serving.capacity.plan import load_stack_settings
from serving.capacity.start_records import (
    StartError,
    check_block,
    check_summary,
    google_time,
    observed_times,
    parse_time,
    start_block,
    start_line,
    summary,
)
from serving.config.settings import load_settings
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer
from tests.test_plan_perf import TRUTH, _cells, _write_run

SERVICE = "gcp:cloudrunv2/service:Service"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def service_outputs(
    created: datetime, ready: datetime, revision: str = "svc-00001"
) -> dict[str, Any]:
    """A Cloud Run service's outputs as pulumi-gcp's cloudrunv2.Service gives them."""
    return {
        "createTime": google_time(created),
        "updateTime": google_time(created),
        "latestCreatedRevision": revision,
        "latestReadyRevision": revision,
        "terminalConditions": [
            {
                "type": "Ready",
                "state": "CONDITION_SUCCEEDED",
                "lastTransitionTime": google_time(ready),
            }
        ],
    }


@pytest.mark.parametrize(
    ("text", "micro"),
    [
        ("2026-11-29T12:00:00Z", 0),
        ("2026-11-29T12:00:00.250Z", 250_000),
        ("2026-11-29T12:00:00.123456Z", 123_456),
        ("2026-11-29T12:00:00.123456789Z", 123_456),
    ],
)
def test_times_are_read_as_google_writes_them(text: str, micro: int) -> None:
    assert parse_time(text, "t") == NOW.replace(microsecond=micro)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("2026-11-29T12:00:00+00:00", "not an RFC 3339 time in UTC"),
        ("2026-11-29 12:00:00Z", "not an RFC 3339 time in UTC"),
        ("2026-11-29T12:00:00.12Z", "not an RFC 3339 time in UTC"),
        ("2026-11-29T12:00:00z", "not an RFC 3339 time in UTC"),
        (1764417600, "int is not an RFC 3339 time"),
        ("2026-02-30T12:00:00Z", "not a calendar time"),
        ("2026-11-29T12:00:00+05:30", "not an RFC 3339 time in UTC"),
        ("2026-12-31T23:59:60Z", "not a calendar time"),
        # Other scripts' digits are \d to a regular expression and digits to int().
        ("\uff12\uff10\uff12\uff16-11-29T12:00:00Z", "not an RFC 3339 time in UTC"),
        ("2026-11-29T12:00:00.\u0661\u0662\u0663Z", "not an RFC 3339 time in UTC"),
        ("9" * 100_000, "a string of 100,000 characters is not an RFC 3339"),
    ],
)
def test_other_shapes_are_refused_by_name(value: Any, why: str) -> None:
    with pytest.raises(StartError, match=rf"^createTime: .*{why}"):
        parse_time(value, "createTime")


def test_a_new_service_gives_its_figures_from_its_outputs() -> None:
    created = NOW - timedelta(seconds=300)
    found, missing = observed_times(
        "cloud-run", service_outputs(created, created + timedelta(seconds=95.5)), None
    )
    token = (created + timedelta(seconds=101.25), "the hook's clock")
    block, why = start_block(found, missing, token, NOW)
    assert why == {}
    assert block["ready_s"] == 95.5 and block["first_token_s"] == 101.25
    assert block["created_at"] == "2026-11-29T11:55:00.000000Z"
    assert block["sources"]["created_at"] == "the service's createTime (revision svc-00001)"
    assert block["sources"]["first_token_at"] == "the hook's clock"
    assert check_block(block, "run") == {"ready_s": 95.5, "first_token_s": 101.25}
    assert start_line(block, why).startswith("start: ready 95.5 s, first token 101.")


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        ({"createTime": None}, "created_at", "absent from the outputs"),
        ({"createTime": "yesterday"}, "created_at", "not an RFC 3339 time"),
        ({"createTime": google_time(NOW + timedelta(seconds=5))}, "created_at", "in the future"),
        ({"createTime": google_time(NOW - timedelta(days=2))}, "ready_s", "outside [0, 86,400]"),
        ({"createTime": google_time(NOW - timedelta(seconds=10))}, "ready_s", "-50.000 s"),
    ],
)
def test_a_time_that_is_not_one_is_never_recorded(
    change: dict[str, Any], field: str, why: str
) -> None:
    outputs = {**service_outputs(NOW - timedelta(seconds=200), NOW - timedelta(seconds=60))}
    found, missing = observed_times("cloud-run", {**outputs, **change}, None)
    block, reasons = start_block(found, missing, None, NOW)
    assert why in reasons[field]
    assert field not in block and "ready_s" not in block


def test_an_update_without_a_new_revision_records_no_start() -> None:
    outputs = service_outputs(NOW - timedelta(seconds=200), NOW - timedelta(seconds=60))
    found, missing = observed_times("cloud-run", outputs, dict(outputs))
    block, why = start_block(found, missing, (NOW, "clock"), NOW)
    assert set(block) == {"first_token_at", "sources"}
    assert "no new revision" in why["created_at"] and "no new revision" in why["ready_at"]
    # A revision that is not yet the ready one has no ready time.
    pending = {**outputs, "latestCreatedRevision": "svc-00002"}
    _, missing = observed_times("cloud-run", pending, outputs)
    assert missing == {"ready_at": "revision svc-00002 is not the latest ready one"}


def test_tpu_and_gke_say_what_their_outputs_lack() -> None:
    created = google_time(NOW - timedelta(seconds=600))
    found, missing = observed_times("tpu-vm", {"createTime": created}, None)
    assert found["created_at"][0] == created and "ready_at" in missing
    assert "no node" in observed_times("tpu-vm", {}, {})[1]["created_at"]
    assert "ConfigMap" in observed_times("gke", {}, None)[1]["created_at"]


def _run_binding(
    settings_config: dict[str, Any], outputs: dict[str, Any], old: dict[str, Any] | None
) -> None:
    """Build the stack's post-deploy hooks as the program does and call each in turn, as the
    engine does after the service is created (``old`` None) or updated."""
    settings = load_settings(settings_config)
    pulumi.runtime.set_mocks(RecordingMocks(), project=PROJECT, stack="l4")

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def run() -> Any:
        binding = post_deploy_binding(settings, "gemma-l4", NoAuth(), url_keys=("uri",))
        assert binding is not None
        args = pulumi.ResourceHookArgs(
            urn=f"urn:pulumi:l4::{PROJECT}::{SERVICE}::svc",
            id="svc-id",
            name="svc",
            type=SERVICE,
            new_inputs={},
            new_outputs=outputs,
            old_outputs=old,
        )

        async def call() -> None:
            for hook in binding.after_create or []:
                await hook(args)  # type: ignore[misc]

        return asyncio.ensure_future(call())

    run()


@pytest.fixture
def fake() -> Any:
    config = FakeVllmConfig(served_model_name="google/gemma-4-12B-it-qat-w4a16-ct")
    with FakeVllmServer(config) as server:
        yield server


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **more: Any) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)  # the results folder is relative to the project
    return {
        **stack_config("l4"),
        "healthCheckDeadlineSeconds": 30,
        "benchmarkConcurrency": [1],
        "benchmarkPromptTokens": 16,
        "benchmarkOutputTokens": 4,
        "benchmarkResultsDir": "runs",
        **more,
    }


@pytest.mark.parametrize("health", [True, False])
def test_the_hooks_record_the_start_in_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeVllmServer, health: bool
) -> None:
    before = datetime.now(UTC)
    created = before - timedelta(seconds=180)
    outputs = {"uri": fake.url, **service_outputs(created, created + timedelta(seconds=120))}
    _run_binding(_config(tmp_path, monkeypatch, healthCheck=health), outputs, None)
    after = datetime.now(UTC)
    (run_dir,) = (tmp_path / "runs" / "l4").iterdir()
    start = load_run(run_dir).run["start"]
    assert start["created_at"] == google_time(created)
    assert start["ready_s"] == 120.0
    first = parse_time(start["first_token_at"], "first_token_at")
    assert before <= first <= after
    assert start["first_token_s"] == round((first - created).total_seconds(), 3)
    source = "the health check's streamed chat" if health else "the benchmark's first streamed"
    assert start["sources"]["first_token_at"].startswith(source)
    assert start["sources"]["ready_at"] == "terminalConditions[0].lastTransitionTime (Ready)"


def test_an_update_that_made_no_revision_says_why_in_its_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeVllmServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    created = datetime.now(UTC) - timedelta(seconds=600)
    outputs = {"uri": fake.url, **service_outputs(created, created + timedelta(seconds=60))}
    with caplog.at_level(logging.INFO):
        _run_binding(_config(tmp_path, monkeypatch), outputs, dict(outputs))
    (line,) = [r.message for r in caplog.records if "start:" in r.message]
    assert "no figure recorded; created_at not recorded: the update created no new revision" in line
    (run_dir,) = (tmp_path / "runs" / "l4").iterdir()
    assert set(load_run(run_dir).run["start"]) == {"first_token_at", "sources"}


def _start_run(
    path: Path, stack: str, ready_s: float, first_token_s: float, hours_ago: int = 1
) -> Path:
    """A post-deploy run of ``stack`` (l4's model, hardware, engine and image) with a start:
    the instance created ``hours_ago`` hours before NOW (one start, one creation time)."""
    settings = load_stack_settings("l4")
    created = NOW - timedelta(hours=hours_ago)
    meta = {
        "model": settings.model.served_name,
        "hardware": "l4",
        "engine_version": "0.27.1",
        "label": f"{stack} post-deploy",
        "stack": stack,
        "target": target_identity(settings),
        "start": {
            "created_at": google_time(created),
            "ready_at": google_time(created + timedelta(seconds=ready_s)),
            "first_token_at": google_time(created + timedelta(seconds=first_token_s)),
            "ready_s": ready_s,
            "first_token_s": first_token_s,
            "sources": {},
        },
    }
    RunStore.open(path, meta, resume=False).close()
    return path


@pytest.mark.long
def test_calibrate_keeps_the_stack_s_starts_and_plan_shows_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from serving.capacity.perf_stack import model_for_settings

    settings = load_stack_settings("l4")
    prior, _ = model_for_settings(settings, calibrations=None)
    run_dir = _write_run(
        tmp_path / "run", _cells(replace(prior, coefficients=TRUTH)), settings.model.model, "l4"
    )
    starts = [
        _start_run(tmp_path / f"s{i}", "l4", 60.0 + i, 80.0 + 10 * i, hours_ago=1 + i)
        for i in range(3)
    ]
    other = _start_run(tmp_path / "other", "rtx6000", 1.0, 2.0)
    out = tmp_path / "calibrations"
    argv = ["calibrate", str(run_dir), "-s", "l4", "--out", str(out)]
    # A run of another stack says nothing of this one, and an edited figure is not a
    # measurement: each refused, naming it.
    edited = _start_run(tmp_path / "edited", "l4", 60.0, 80.0)
    record = json.loads((edited / "run.json").read_text())
    record["start"]["first_token_s"] = 8.0
    (edited / "run.json").write_text(json.dumps(record))
    for bad, why in ((other, "not made against stack 'l4'"), (edited, "its times say 80.0")):
        assert main([*argv, "--start-run", str(bad)]) == 2
        assert f"--start-run {bad}: " in (err := capsys.readouterr().err) and why in err
    extra = [arg for s in starts for arg in ("--start-run", str(s))]
    assert main([*argv, *extra]) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    # The fitted run itself records no start: said, not counted.
    assert "the run run's start is not used: it records no start figure" in text
    (path,) = out.glob("*.json")
    start = load_calibration(path).start
    assert start is not None and start["runs"] == ["s0", "s1", "s2"]
    assert start["first_token_s"] == {"n": 3, "p50_s": 90.0, "p90_s": 98.0}
    assert start["ready_s"] == {"n": 3, "p50_s": 61.0, "p90_s": 61.8}
    identity = start["target"]
    assert identity["image"] == settings.image and identity["hardware"] == "l4"
    # Another stack's calibration in the same folder never changes l4's figures, nor does a
    # same-named stack's elsewhere (the same image on other hardware).
    for name, stack, kept_target in (
        ("a-gke-l4.json", "gke-l4", identity),
        ("a-elsewhere.json", "l4", {**identity, "hardware": "rtx-pro-6000"}),
    ):
        kept = summary(stack, kept_target, {"g": {"first_token_s": 500.0}})
        (out / name).write_text(json.dumps(replace(load_calibration(path), start=kept).as_dict()))
    monkeypatch.setattr("gemma4.plan_cli.CALIBRATIONS_DIR", out)
    assert main(["-s", "l4", "--json"]) == 0
    measured = json.loads(capsys.readouterr().out)["cold_start"]["measured"]
    assert measured == {"n": 3, "p50_s": 90.0, "p90_s": 98.0, "source": f"calibration {path.name}"}
    for stack in ("rtx6000", "tpu-v6e1"):
        main(["-s", stack, "--json"])
        assert "measured" not in json.loads(capsys.readouterr().out)["cold_start"]
    main(["-s", "l4"])
    assert "MEASURED after deploy: p50 90 s, p90 98 s to first token over 3 starts" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("start", "why"),
    [
        ({"stack": "l4"}, "start must be null or an object"),
        (
            {
                "stack": "l4",
                "target": {"image": "i"},
                "runs": [],
                "ready_s": None,
                "first_token_s": None,
            },
            "start.runs must be a non-empty list",
        ),
        (
            {
                "stack": "l4",
                "target": {"image": "i"},
                "runs": ["a"],
                "ready_s": None,
                "first_token_s": {"n": 2, "p50_s": 1, "p90_s": 2},
            },
            "start.first_token_s must be null or",
        ),
    ],
)
def test_a_calibration_s_start_is_read_strictly(start: dict[str, Any], why: str) -> None:
    with pytest.raises(TypeError, match=why):
        check_summary(start)


def test_an_edited_figure_is_refused() -> None:
    block = {
        "created_at": "2026-11-29T11:00:00Z",
        "ready_at": "2026-11-29T11:01:00Z",
        "ready_s": 30.0,
    }
    with pytest.raises(StartError, match=r"start.ready_s is 30.0, its times say 60.0"):
        check_block(block, "s0")


def test_a_time_before_the_year_1000_is_written_as_it_is_read() -> None:
    # strftime("%Y") writes year 1 as "1": the record held a time its own reader refused.
    outputs = {"createTime": "0001-01-01T00:00:00Z"}
    found, missing = observed_times("tpu-vm", outputs, None)
    block, _ = start_block(found, missing, None, NOW)
    assert block["created_at"] == "0001-01-01T00:00:00.000000Z"
    assert parse_time(block["created_at"], "created_at") == datetime(1, 1, 1, tzinfo=UTC)


def test_outputs_of_any_shape_or_length_give_a_bounded_line() -> None:
    revision = "r" * 100_000
    outputs = {
        "createTime": google_time(NOW - timedelta(seconds=60)),
        "latestCreatedRevision": revision,
        "latestReadyRevision": revision,
        "terminalConditions": [{"type": ["x" * 100_000], "state": {"s": "y\nforged line"}}],
    }
    found, missing = observed_times("cloud-run", outputs, None)
    block, why = start_block(found, missing, None, NOW)
    line = start_line(block, why)
    assert len(line) < 400 and "\n" not in line and "r" * 41 not in line
    assert "the terminal condition is list dict, not Ready" in line
    assert len(block["sources"]["created_at"]) < 100
    _, why = observed_times("cloud-run", outputs, dict(outputs))
    assert len(why["created_at"]) < 120


def test_a_first_token_before_ready_is_neither_recorded_nor_read() -> None:
    created = NOW - timedelta(seconds=300)
    outputs = service_outputs(created, created + timedelta(seconds=120))
    found, missing = observed_times("cloud-run", outputs, None)
    token = (created + timedelta(seconds=100), "the hook's clock")
    block, why = start_block(found, missing, token, NOW)
    assert "first_token_s" not in block and block["ready_s"] == 120.0
    assert why["first_token_s"] == (
        "first_token_s: first_token_at is 20.000 s before ready_at (it must be at or after it)"
    )
    edited = {**block, "first_token_s": 100.0}
    with pytest.raises(StartError, match=r"^s0: start.first_token_s: first_token_at is 20.000"):
        check_block(edited, "s0")


@pytest.mark.parametrize("value", [10**400, -(10**400), 86_401.0, "60", True])
def test_a_figure_of_any_size_or_type_is_refused_by_name(value: Any) -> None:
    block = {"created_at": "2026-11-29T11:00:00Z", "ready_at": "2026-11-29T11:01:00Z"}
    with pytest.raises(StartError, match=r"^s0: start.ready_s (is|must be)"):
        check_block({**block, "ready_s": value}, "s0")


def test_a_calibration_s_start_keeps_no_other_key() -> None:
    good = summary("l4", {"image": "img"}, {"a": {"first_token_s": 90.0}})
    assert check_summary(json.loads(json.dumps(good))) == good
    block = {"n": 1, "p50_s": 90.0, "p90_s": 90.0}
    for bad, why in (
        ({"first_token_s": {**block, "note": "x" * 1000}}, "start.first_token_s must be null or"),
        ({"runs": ["a", "a"]}, "start.runs must be a non-empty list of distinct run ids"),
        ({"runs": ["a" * 256]}, "start.runs must be a non-empty list of distinct run ids"),
        ({"first_token_s": None}, "start must hold at least one of"),
        ({"target": "img"}, "start.target must be an object of 1 to 16 names"),
        ({"target": {"image": ["img"]}}, "start.target must be an object of 1 to 16 names"),
        ({"first_token_s": {**block, "p50_s": 10**400}}, "start.first_token_s must be null or"),
    ):
        with pytest.raises(TypeError, match=why):
            check_summary({**good, **bad})


@pytest.mark.parametrize(
    ("field", "why"),
    [
        (("coefficients", "bandwidth_efficiency"), "coefficients must be numbers"),
        (("held_out_error", "ttft"), "held_out_error values must be numbers"),
        (("mean_accepted_length",), "mean_accepted_length must be a number"),
    ],
)
def test_a_calibration_with_a_number_no_float_holds_is_refused_by_name(
    tmp_path: Path, field: tuple[str, ...], why: str
) -> None:
    data = Calibration(
        "l4", "m", "v", Coefficients(), {"ttft": 0.1}, {}, 2.0, None, (), None
    ).as_dict()
    *parents, key = field
    target = data
    for parent in parents:
        target = target[parent]
    target[key] = 10**400  # strict JSON still allows it; float() overflows
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=rf"^c.json: {why}"):
        load_calibration(path)


@pytest.fixture(scope="module")
def fitted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A benchmark run of l4 that `plan calibrate` fits (once per module: the fit is cached)."""
    from serving.capacity.perf_stack import model_for_settings

    settings = load_stack_settings("l4")
    prior, _ = model_for_settings(settings, calibrations=None)
    cells = _cells(replace(prior, coefficients=TRUTH))
    return _write_run(tmp_path_factory.mktemp("fit") / "run", cells, settings.model.model, "l4")


@pytest.mark.long
def test_one_start_counts_once_however_its_folder_is_given(
    tmp_path: Path, fitted_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s0 = _start_run(tmp_path / "s0", "l4", 60.0, 80.0)
    (tmp_path / "link").symlink_to(s0)
    shutil.copytree(s0, tmp_path / "copy")
    argv = ["calibrate", str(fitted_run), "-s", "l4", "--out", str(tmp_path / "out")]
    for again in ("link", "copy"):
        assert main([*argv, "--start-run", str(s0), "--start-run", str(tmp_path / again)]) == 2
        err = capsys.readouterr().err
        assert f"--start-run {tmp_path / again}: its start (created_at " in err
        assert "is run s0's, counted once" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.long
def test_a_calibration_is_written_whole_or_not_at_all(
    tmp_path: Path,
    fitted_run: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "out"
    starts = [_start_run(tmp_path / f"s{i}", "l4", 60.0, 80.0, hours_ago=1 + i) for i in range(3)]
    argv = ["calibrate", str(fitted_run), "-s", "l4", "--out", str(out)]
    assert main([*argv, "--start-run", str(starts[0])]) == 0
    (path,) = out.iterdir()
    before = path.read_bytes()
    extra = [arg for s in starts for arg in ("--start-run", str(s))]

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    # The disk fills during the write: the previous calibration stays, whole.
    monkeypatch.setattr("os.fsync", full)
    assert main([*argv, *extra]) == 2
    assert "cannot write (No space left on device)" in capsys.readouterr().err
    monkeypatch.undo()
    assert list(out.iterdir()) == [path] and path.read_bytes() == before
    # A file its reader would refuse for its size is never written.
    monkeypatch.setattr("gemma4.plan_cli.MAX_FILE_BYTES", len(before) + 10)
    assert main([*argv, *extra]) == 2
    assert "KiB a calibration is read at (start.runs lists 3 runs" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_a_start_run_of_another_stack_is_refused_in_a_bounded_line(tmp_path: Path) -> None:
    base = _start_run(tmp_path / "base", "l4", 60.0, 80.0, hours_ago=2)
    other = _start_run(tmp_path / "other", "l4", 60.0, 80.0)
    record = json.loads((other / "run.json").read_text())
    record["stack"] = ["l4"] * 10_000
    (other / "run.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"not made against stack 'l4' \(its `stack`: \['l4'") as e:
        start_figures(load_run(base), [other], "l4", load_stack_settings("l4"))
    assert len(str(e.value)) < 300


def test_a_run_folder_given_as_dot_is_named_by_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _start_run(tmp_path / "base", "l4", 60.0, 80.0, hours_ago=2)
    s0 = _start_run(tmp_path / "s0", "l4", 61.0, 81.0)
    monkeypatch.chdir(s0)  # `--start-run .` from inside the run folder
    figures, _ = start_figures(load_run(base), [Path(".")], "l4", load_stack_settings("l4"))
    assert sorted(figures) == ["base", "s0"]
    # An empty run id would make a file that every stack's plan refuses.
    assert check_summary(summary("l4", {"image": "i"}, figures)) is not None


def test_a_token_where_a_time_belongs_is_never_printed(
    tmp_path: Path, fitted_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _start_run(tmp_path / "s0", "l4", 60.0, 80.0)
    record = json.loads((run / "run.json").read_text())
    token = "hf_" + "aB3x" * 9
    record["start"]["created_at"] = token
    (run / "run.json").write_text(json.dumps(record))
    argv = ["calibrate", str(fitted_run), "-s", "l4", "--out", str(tmp_path / "out")]
    assert main([*argv, "--start-run", str(run)]) == 2
    err = capsys.readouterr().err
    assert "s0: start.created_at: '[REDACTED]' is not an RFC 3339 time" in err
    assert token not in err
