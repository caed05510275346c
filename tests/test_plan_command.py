"""`gemma4 plan` (also `python -m gemma4.plan_cli`): the capacity planner command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gemma4.plan_cli import main
from tests.policies._fixtures import ALL_STACKS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_l4_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-s", "l4", "--json", "--requests-per-second", "20")
    assert code == 0
    r = json.loads(out)
    assert r["accelerator"] == "nvidia-l4"
    # vLLM's "Model loading took 8.28 GiB" for the checkpoint (serving/catalog/models.py's source).
    assert r["weight_bytes"] == int(8.28 * 2**30) and r["drafter_bytes"] == 0
    assert r["kv_bytes_per_token"] == (40 * 2 * 8 * 256 + 8 * 2 * 1 * 512) * 1  # fp8
    assert r["kv_bytes_per_token_past_window"] == 8 * 2 * 512
    assert r["fits"] and r["full_length_sequences"] > 4
    assert r["decode_ceiling_tokens_per_s"] == pytest.approx(300e9 / int(8.28 * 2**30))
    # 20 req/s is offered to the whole endpoint; each replica serves its share.
    assert r["requests_per_second"] == 20
    # Priced on the replicas the load needs, kept above the stack's one instance and said so.
    n = r["serving_replicas"]
    assert n == r["replicas"]["replicas_needed"] > 1
    assert "the stack runs at most 1" in r["serving_replicas_source"]
    assert r["usd_per_million_requests"] == pytest.approx(n * r["usd_per_hour"] / (20 * 3600) * 1e6)


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_stack_prints_a_table(capsys: pytest.CaptureFixture[str], stack: str) -> None:
    code, out, _ = run(capsys, "-s", stack)
    assert code == 0
    for row in (
        "weights",
        "drafter",
        "runtime reserve",
        "KV per token",
        "KV tokens available",
        "full-length sequences",
        "batch-1 decode ceiling",
        "cost per million requests",
    ):
        assert row in out


def test_rtx_stack_counts_the_drafter(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-s", "rtx6000", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["drafter"] == "google/gemma-4-12B-it-assistant"
    assert r["drafter_bytes"] == int(0.8 * 10**9)
    assert r["max_model_len"] == 131_072


def test_a_stack_that_does_not_fit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    text = (ROOT / "Pulumi.l4.yaml").read_text()
    bad = text.replace("google/gemma-4-12B-it-qat-w4a16-ct", "google/gemma-4-12B-it")
    (tmp_path / "Pulumi.bad.yaml").write_text(bad)
    code, out, _ = run(capsys, "-s", "bad", "--root", str(tmp_path))
    assert code == 1
    assert "DOES NOT FIT" in out


def test_errors_name_what_to_fix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "-s", "nope")
    assert code == 2
    assert "no Pulumi.nope.yaml in " in err
    listed = err.split("stacks there: ", 1)[1].split(" (or", 1)[0].split(", ")
    assert {"l4", "rtx6000", "tpu-v6e1", "gke-l4", "gke-tpu-v6e"} <= set(listed)
    for bad in ("0", "nan", "inf", "-1", "1e-320"):
        with pytest.raises(SystemExit) as exited:
            run(capsys, "-s", "l4", "-r", bad)
        err = capsys.readouterr().err
        assert exited.value.code == 2, bad
        assert "-r/--requests-per-second/--rate must be a number from 0.001" in err, bad
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.x.yaml").write_text("config:\n  gemma4-vllm:hardware: h100\n")
    code, _, err = run(capsys, "-s", "x", "--root", str(tmp_path))
    assert code == 2
    assert "Pulumi.x.yaml: invalid stack configuration" in err
    assert "unknown hardware 'h100'" in err


def test_a_stack_file_outside_the_repository(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    mine = tmp_path / "elsewhere" / "mine.yaml"
    mine.parent.mkdir()
    mine.write_text((ROOT / "Pulumi.l4.yaml").read_text())
    code, out, err = run(capsys, "--stack-file", str(mine), "--json")
    assert code == 0, err
    assert json.loads(out)["stack"] == "mine"
    assert err == ""  # the file was named on the command line: nothing to announce
    code, _, err = run(capsys, "--stack-file", str(tmp_path / "absent.yaml"))
    assert code == 2 and "--stack-file" in err and "no such file" in err
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2
    assert "gemma4 plan: error: give -s STACK or --stack-file PATH" in capsys.readouterr().err
