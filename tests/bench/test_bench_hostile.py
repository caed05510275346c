"""``python -m bench`` against wrong, broken and hostile servers on 127.0.0.1: the exit status
tells the truth, failures are kept, nothing secret is printed or written, memory stays bounded."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from bench.cli import main
from bench.results.store import RunStore
from endpoint.limits import MAX_ECHO_CHARS
from tests.bench.conftest import MODEL, ServerFactory, quick_run
from tests.endpoint.test_error_line import TOKEN
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer
from tests.support.front_end import ERROR_ANSWERS, GOOGLE_503, front_end

KEY = "bench-hostile-key-5c2e91"
SMALL = quick_run(4)
ROOT = Path(__file__).resolve().parents[2]


def _grid(c: str = "1", p: str = "8", o: str = "2") -> list[str]:
    return ["--concurrency", c, "--prompt-tokens", p, "--output-tokens", o]


def _bench(capsys, *argv: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    code = main(list(argv))
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err, took


def _run(capsys, server_url: str, out: Path, *extra: str) -> tuple[int, str, str, float]:
    return _bench(capsys, "run", "--url", server_url, "--out", str(out), *SMALL, *extra)


def _files_text(out: Path) -> str:
    return "".join(
        p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.suffix != ".png"
    )


def test_wrong_model_fails_the_preflight_and_lists_the_served_ones(
    fake_vllm: ServerFactory, tmp_path: Path, capsys
) -> None:
    server = fake_vllm(output_tokens=2)
    out = tmp_path / "run"
    code, _, err, _ = _run(capsys, server.url, out, "--model", "google/gemma-4-31B-it", *_grid())
    assert code == 1
    assert "preflight failed" in err
    assert "'google/gemma-4-31B-it' is not served" in err and repr(MODEL) in err
    assert not (out / "run.json").exists()
    assert [q.path for q in server.requests].count("/v1/completions") == 1  # one request only


def test_rejected_key_says_which_credential_and_never_prints_it(
    fake_vllm: ServerFactory, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_vllm(
        api_key="the-right-key-xyz", auth_all_paths=False, reflect_authorization=True
    )
    monkeypatch.setenv("BENCH_TEST_KEY", KEY)
    out = tmp_path / "run"
    code, stdout, err, _ = _run(
        capsys, server.url, out, "--model", MODEL, "--api-key-env", "BENCH_TEST_KEY", *_grid()
    )
    assert code == 1
    assert "rejected the credentials (HTTP 401) sent as vLLM API key from $BENCH_TEST_KEY" in err
    assert KEY not in stdout + err
    assert not (out / "run.json").exists()


def test_failed_requests_fail_the_cell_and_are_kept(
    fake_vllm: ServerFactory, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The preflight is request 1 (passes); then every second request fails with a 503 whose body
    # reflects the key, as a misconfigured proxy would.
    server = fake_vllm(
        output_tokens=2,
        fail_every=2,
        fail_status=503,
        api_key=KEY,
        auth_all_paths=False,
        reflect_authorization=True,
    )
    monkeypatch.setenv("BENCH_TEST_KEY", KEY)
    out = tmp_path / "run"
    argv = ["--model", MODEL, "--api-key-env", "BENCH_TEST_KEY", *_grid()]
    code, stdout, err, _ = _run(capsys, server.url, out, *argv)
    assert code == 1
    assert "0 cells passed, 1 failed or short" in stdout
    assert "cell c1-p8-o2 failed: success rate 50.0% is under 100.0%" in err
    assert "  http_status: HTTP 503: injected failure (HTTP 503)" in err  # the status once
    (record,) = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    assert record["status"] == "failed"
    assert record["failure_statuses"] == {"503": 2}
    assert record["failure_samples"][0]["status"] == 503
    assert "injected failure" in record["failure_samples"][0]["error"]
    assert KEY not in stdout + err + _files_text(out)
    assert "FAILED" in (out / "report.md").read_text()
    # The same failures under a threshold they meet: the run passes.
    again = fake_vllm(output_tokens=2, fail_every=2, fail_status=503)
    lenient = ["--model", MODEL, *_grid(), "--min-success-rate", "0.4"]
    code, *_ = _run(capsys, again.url, tmp_path / "lenient", *lenient)
    assert code == 0


def test_short_outputs_are_flagged_and_never_shown_under_the_label(
    fake_vllm: ServerFactory, tmp_path: Path, capsys
) -> None:
    server = fake_vllm(output_tokens=16)
    out = tmp_path / "run"
    code, _, err, _ = _run(capsys, server.url, out, "--model", MODEL, *_grid(o="128"))
    assert code == 1
    assert "cell c1-p8-o128 short: 4 of 4 responses were shorter than 128" in err
    (record,) = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    assert (record["status"], record["short_requests"], record["mean_output_tokens"]) == (
        "short",
        4,
        16.0,
    )
    report = (out / "report.md").read_text()
    throughput = report.split("### Output token throughput (tokens/s)")[1].split("###")[0]
    assert "| 1 | short (16.0 tok) |" in throughput
    assert main(["gate", str(out), "-s", "l4", "--cwd", str(ROOT)]) == 1


def test_a_run_with_every_cell_skipped_is_not_a_success(
    fake_vllm: ServerFactory, tmp_path: Path, capsys
) -> None:
    server = fake_vllm(output_tokens=2, max_model_len=50)
    code, _, err, _ = _run(capsys, server.url, tmp_path / "r", "--model", MODEL, *_grid(p="100"))
    assert code == 1
    assert "no cell was measured" in err


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"tokenize_count": 10**12}, "not a plausible count"),
        ({"tokenize_count": -1}, "not a plausible count"),
        ({"tokenize_count": 1}, "counts only 1 tokens"),
        ({"tokenize_not_json": True}, "not JSON"),
    ],
)
def test_unusable_tokenize_exits_2_in_bounded_time(
    fake_vllm: ServerFactory, tmp_path: Path, capsys, knobs: dict[str, object], message: str
) -> None:
    server = fake_vllm(output_tokens=2, **knobs)
    code, _, err, took = _run(
        capsys, server.url, tmp_path / "r", "--model", MODEL, *_grid(p="4096")
    )
    assert code == 2
    assert message in err
    # Against a search for a prompt length that never ends, not a time the command must
    # beat: a loaded machine makes it seconds.
    assert took < 60


def test_a_huge_stream_line_fails_fast(fake_vllm: ServerFactory, tmp_path: Path, capsys) -> None:
    server = fake_vllm(huge_sse_line=16 << 20)
    code, _, err, took = _run(capsys, server.url, tmp_path / "r", "--model", MODEL, *_grid())
    assert code == 1
    assert "an SSE line is longer than" in err  # refused at the cap, not read to its end
    assert took < 60  # against a hang only: a loaded machine makes it seconds


def test_a_second_writer_is_refused(fake_vllm: ServerFactory, tmp_path: Path, capsys) -> None:
    server = fake_vllm(output_tokens=2)
    out = tmp_path / "run"
    holder = RunStore.open(out, {"model": MODEL}, resume=False, write=False)
    try:
        code, _, err, _ = _run(capsys, server.url, out, "--model", MODEL, *_grid())
        assert code == 2
        assert "another benchmark is writing to" in err
        assert server.requests == []  # refused before any request
    finally:
        holder.close()
    # The lock file left behind is not stale: the next writer takes it.
    code, *_ = _run(capsys, server.url, out, "--model", MODEL, *_grid())
    assert code == 0
    assert (out / ".lock").exists()


def test_gate_fails_a_run_killed_part_way(fake_vllm: ServerFactory, tmp_path: Path, capsys) -> None:
    server = fake_vllm(output_tokens=2)
    out = tmp_path / "run"
    code, *_ = _run(capsys, server.url, out, "--model", MODEL, *_grid(c="1,2", p="8,16"))
    assert code == 0
    assert main(["gate", str(out), "-s", "l4", "--cwd", str(ROOT), "--allow-other-target"]) == 0
    cells = out / "cells.jsonl"
    lines = cells.read_text().splitlines(keepends=True)
    cells.write_text(lines[0])  # killed after one of four cells
    capsys.readouterr()
    assert main(["gate", str(out), "-s", "l4", "--cwd", str(ROOT), "--allow-other-target"]) == 1
    assert "the run is incomplete: 3 of 4 cells" in capsys.readouterr().out
    cells.write_text(lines[0] + lines[1][:20])  # ... and torn mid-record
    assert (
        main(["gate", str(out), "-s", "l4", "--cwd", str(ROOT), "--json", "--allow-other-target"])
        == 1
    )
    assert json.loads(capsys.readouterr().out)["missing_cells"] == [
        "c2-p8-o2",
        "c1-p16-o2",
        "c2-p16-o2",
    ]


def test_resume_with_a_record_missing_fields_exits_2(
    fake_vllm: ServerFactory, tmp_path: Path, capsys
) -> None:
    server = fake_vllm(output_tokens=2)
    out = tmp_path / "run"
    assert _run(capsys, server.url, out, "--model", MODEL, *_grid(c="1,2"))[0] == 0
    lines = (out / "cells.jsonl").read_text().splitlines()
    broken = json.loads(lines[0])
    del broken["status"]
    (out / "cells.jsonl").write_text(json.dumps(broken) + "\n" + lines[1] + "\n")
    code, _, err, _ = _bench(
        capsys, "run", "--resume", "--out", str(out), "--no-progress", "--no-charts"
    )
    assert code == 2
    assert "line 1: the record has no 'status' field" in err
    assert main(["gate", str(out), "-s", "l4", "--cwd", str(ROOT)]) == 2


def test_preflight_honours_retry_after_within_its_deadline(
    fake_vllm: ServerFactory, tmp_path: Path, capsys
) -> None:
    server = fake_vllm(output_tokens=2, completions_throttle=2, retry_after="0.2")
    code, _, err, took = _run(capsys, server.url, tmp_path / "r", "--model", MODEL, *_grid())
    assert code == 0, err
    assert took >= 0.4
    slow = fake_vllm(output_tokens=2, completions_throttle=1, retry_after="3600")
    code, _, err, took = _run(capsys, slow.url, tmp_path / "s", "--model", MODEL, *_grid())
    assert code == 1
    assert "HTTP 429" in err and "rate limited" in err
    assert took < 30  # at once, not after the hour the server asked for


@pytest.mark.parametrize("price", ["l4=inf", "l4=nan", "l4=-1", "l4=", "=3"])
def test_compare_refuses_unusable_prices(tmp_path: Path, capsys, price: str) -> None:
    code, _, err, _ = _bench(capsys, "compare", str(tmp_path / "a"), "--price", price)
    assert code == 2
    assert "--price expects LABEL=USD" in err


def test_two_runs_into_one_directory_one_is_refused(
    fake_vllm: ServerFactory, tmp_path: Path
) -> None:
    import threading

    server = fake_vllm(output_tokens=2, ttft_s=0.05)
    out = tmp_path / "run"
    argv = ["run", "--url", server.url, "--model", MODEL, "--out", str(out), *SMALL, *_grid()]
    codes: list[int] = []
    threads = [threading.Thread(target=lambda: codes.append(main(argv))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    # One measured the run; the other was refused (by the lock while the first ran, or because
    # the directory then held a run): never a crash, never two writers.
    assert sorted(codes) == [0, 2]
    lines = (out / "cells.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["c1-p8-o2"]


def test_a_huge_served_model_id_is_not_echoed_whole(
    fake_vllm: ServerFactory, tmp_path: Path, capsys
) -> None:
    server = fake_vllm(output_tokens=2, served_model_name="m" * 200_000)
    code, out, err, _ = _run(capsys, server.url, tmp_path / "r", "--model", "other", *_grid())
    assert code == 1
    assert "'other' is not served" in err
    assert len(out + err) < 5_000


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished run against a fake server, the same for every test that damages a copy
    of it; its server is gone once it is written."""
    server = FakeVllmServer(FakeVllmConfig(output_tokens=2))
    server.start()
    out = tmp_path_factory.mktemp("finished") / "run"
    try:
        assert (
            main(
                ["run", "--url", server.url, "--out", str(out), *SMALL, "--model", MODEL, *_grid()]
            )
            == 0
        )
    finally:
        server.stop()
    return out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda run: [], "is not a JSON object"),
        (lambda run: {**run, "grid": {"concurrency": ["x"]}}, "damaged grid or options"),
        (lambda run: {**run, "grid": {**run["grid"], "concurrency": [0]}}, "positive integers"),
        (lambda run: {**run, "options": "nope", "grid": "nope"}, "another experiment"),
    ],
)
def test_a_damaged_run_json_is_one_message(
    finished_run: Path, tmp_path: Path, capsys, damage, message: str
) -> None:
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    run = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps(damage(run)))
    code, _, err, _ = _bench(
        capsys, "run", "--resume", "--out", str(out), "--no-progress", "--no-charts"
    )
    assert code == 2
    assert message in err
    assert "unexpected error" not in err
    assert main(["gate", str(out), "-s", "l4", "--cwd", str(ROOT)]) in (1, 2)


def test_preflight_gives_up_on_retry_after_zero_forever(
    fake_vllm: ServerFactory, tmp_path: Path, capsys
) -> None:
    server = fake_vllm(output_tokens=2, completions_throttle=10**6, retry_after="0")
    code, _, err, took = _run(capsys, server.url, tmp_path / "r", "--model", MODEL, *_grid())
    assert code == 1
    assert "HTTP 429" in err
    assert took < 60  # against retrying forever; the tries themselves are counted below
    assert [q.path for q in server.requests].count("/v1/completions") == 5


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('"label": "a"', '"label": "a", "label": "b"'), "'label' twice"),
        (lambda t: t.replace('"label": "a"', '"label": "a", "x": NaN'), "NaN"),
        (lambda t: t.replace('"label": "a"', '"label": "a", "x": 1e400'), "1e400"),
        (lambda t: "\ufeff" + t + "\n{}", "not valid JSON"),
    ],
)
def test_a_run_json_is_read_as_strict_json(tmp_path: Path, capsys, edit, message: str) -> None:
    from tests.bench._cells import cell, write_run

    write_run(tmp_path / "r", [cell(1, 8)], label="a", hardware="l4")
    path = tmp_path / "r" / "run.json"
    text = path.read_text()
    assert '"label": "a"' in text
    path.write_text(edit(text))
    for argv in (["compare", str(tmp_path / "r")], ["gate", str(tmp_path / "r"), "-s", "l4"]):
        code = main([*argv, "--cwd", str(ROOT)] if argv[0] == "gate" else argv)
        err = capsys.readouterr().err
        assert code == 2, err
        assert message in err and "Traceback" not in err


def test_a_cell_record_with_a_key_twice_is_refused(tmp_path: Path, capsys) -> None:
    from tests.bench._cells import cell, write_run

    write_run(tmp_path / "r", [cell(1, 8), cell(2, 8)], label="a", hardware="l4")
    path = tmp_path / "r" / "cells.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"status": "ok"', '"status": "ok", "status": "failed"', 1)
    path.write_text("".join(lines))
    code = main(["compare", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "'status' twice" in err, err


@pytest.mark.parametrize("answer", list(ERROR_ANSWERS))
def test_an_error_answer_to_the_preflight_is_one_line(answer: str, capsys, tmp_path: Path) -> None:
    """The preflight's failure against a front end's (or vLLM's) error answer: a multi-line
    HTML page, JSON, a reflected credential, megabytes. The status once and what the body says
    on one line, redacted and bounded, never the body."""
    status, body, content_type, said = ERROR_ANSWERS[answer]
    with front_end(status, body, content_type) as url:
        code, out, err, _ = _run(capsys, url, tmp_path / "r", "--model", MODEL, "--no-tokenize")
    assert code == 1
    (line,) = [line for line in err.splitlines() if "preflight failed" in line]
    assert f"failed (http_status): HTTP {status}: {said}" in line, line  # the status once
    assert len(line) < MAX_ECHO_CHARS + 120
    shown = out + err + _files_text(tmp_path / "r")
    assert "<" not in out + err and "an error." not in shown and TOKEN[3:] not in shown


def test_error_pages_of_failed_requests_are_one_line_each(
    fake_vllm: ServerFactory, tmp_path: Path, capsys
) -> None:
    """A cell's failure samples, as the console shows them, against a front end that answers
    every second request with its HTML 503 page: one line each, the status once."""
    server = fake_vllm(output_tokens=2, fail_every=2, fail_status=503, fail_page=GOOGLE_503)
    code, _, err, _ = _run(capsys, server.url, tmp_path / "r", "--model", MODEL, *_grid())
    assert code == 1
    samples = [line for line in err.splitlines() if line.startswith("  http_status")]
    assert samples == ["  http_status: HTTP 503: Error 503 (Server Error)!!1"] * 2
    assert "<" not in err


def test_a_run_file_is_replaced_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers (two `bench report` of one run) each write a temporary file of their own:
    another's half-written temporary is never renamed over the file; a failed write keeps the
    old file and leaves no temporary behind."""
    from bench.results import store

    target = tmp_path / "report.md"
    target.write_text("old\n")
    other = tmp_path / "report.md.tmp"  # another writer's half-written file, by the old name
    other.write_text("half")
    store.write_atomic(target, "new\n")
    assert target.read_text() == "new\n" and other.read_text() == "half"

    def fail(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("bench.results.store.os.fsync", fail)
    with pytest.raises(OSError):
        store.write_atomic(target, "newer\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "report.md.tmp"]
