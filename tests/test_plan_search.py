"""`gemma4 plan search`: the cheapest configuration that meets a workload's percentile SLO,
no dearer than any shipped stack file sized the same way, written as a stack file the offline
preview accepts; its JSON contract; its refusals of bad input, traces and the impossible."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gemma4.search_cli import search_main
from serving.capacity.coldstart import cold_start
from serving.capacity.configsearch import (
    Candidate,
    Goal,
    Target,
    sized_stack,
)
from serving.capacity.costs import HOURS_PER_MONTH
from serving.capacity.perf import Workload
from serving.capacity.plan import ROOT, raw_stack_settings, stack_names
from serving.capacity.simulate import Traffic
from serving.capacity.start_budget import waits
from serving.config.settings import load_settings

STACKS = stack_names(ROOT)
#: The issue's goal: a chat service of 20 req/s, 1,000-token prompts, 200-token answers.
GOAL = [
    "--rate",
    "20",
    "--prompt-tokens",
    "1000",
    "--output-tokens",
    "200",
    "--ttft-p95-ms",
    "2000",
]


def sized_stack_file(name: str, raw: dict[str, Any], goal: Goal) -> Candidate:
    """A stack file's flat settings sized as the search sizes its answers."""
    from serving.config.settings import load_settings

    return sized_stack(name, load_settings(raw), goal, raw)


def _search(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = search_main(["--project-dir", str(ROOT), *argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


@pytest.fixture(scope="module")
def answered() -> dict[str, Any]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert search_main(["--project-dir", str(ROOT), *GOAL, "--json"]) == 0
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def _shipped_cheapest(goal: Goal) -> float:
    costs = []
    for name in STACKS:
        c = sized_stack_file(name, raw_stack_settings(name), goal)
        if c.sizing is not None and c.sizing.meets and c.screen_usd_per_hour is not None:
            costs.append(c.screen_usd_per_hour)
    assert costs, "some shipped stack meets the target"
    return min(costs)


def test_the_answer_is_no_dearer_than_any_shipped_stack_meeting_the_same_p95(
    answered: dict[str, Any],
) -> None:
    best = answered["answers"][0]
    goal = Goal(Traffic(20, 1000, 200), (Target("ttft", "p95", 2000),))
    assert best["usd_per_hour"] is not None
    assert best["usd_per_hour"] <= _shipped_cheapest(goal) + 1e-9
    assert best["meets_slo"] and best["latency_ms"]["ttft"]["p95"] <= 2000
    # Cheapest first among priced answers; an unknown price is null, ranked last, never 0.
    priced = [a["usd_per_hour"] for a in answered["answers"] if a["usd_per_hour"] is not None]
    assert priced == sorted(priced)
    seen_unknown = False
    for a in answered["answers"]:
        if a["usd_per_hour"] is None:
            seen_unknown = True
            assert a["price_status"] == "unknown"
            assert a["usd_per_month"] is a["usd_per_million_output_tokens"] is None
        else:
            assert not seen_unknown
            assert a["usd_per_month"] == pytest.approx(a["usd_per_hour"] * HOURS_PER_MONTH)
            assert a["usd_per_million_requests"] == pytest.approx(
                a["usd_per_hour"] / (20 * 3600) * 1e6
            )
            assert a["usd_per_million_output_tokens"] == pytest.approx(
                a["usd_per_hour"] / (20 * 200 * 3600) * 1e6
            )


def test_each_answer_carries_the_contract_fields(answered: dict[str, Any]) -> None:
    for a in answered["answers"]:
        for key in (
            "stack",
            "platform",
            "hardware",
            "replicas",
            "usd_per_hour",
            "usd_per_month",
            "latency_ms",
            "limits",
            "band",
            "meets_slo",
        ):
            assert key in a, key
        assert set(a["latency_ms"]) == {"ttft", "itl", "e2e"}
        for figures in a["latency_ms"].values():
            assert figures["p50"] <= figures["p95"] <= figures["p99"]
        assert set(a["limits"]) == {"slo", "ceiling", "quota"}
        assert a["stack"]["maxModelLen"] >= 1200  # fitted to the longest request
        assert a["measured"] is False
        # The cold start of the configuration answered, not of the template it started from.
        settings = load_settings(a["stack"])
        block = {**cold_start(settings), "waits": waits(settings)}
        assert a["cold_start"] == json.loads(json.dumps(block))
    assert answered["written"] is None and answered["considered"] > 50


def test_the_answer_is_written_and_the_preview_accepts_it_with_the_same_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".*", "docs", "tests", "site"))
    code = search_main(["--project-dir", str(project), *GOAL, "--write-stack", "chat", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["written"] == str(project / "Pulumi.chat.yaml")
    text = (project / "Pulumi.chat.yaml").read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("workload: 20 req/s, 1000 prompt + 200 output tokens" in h for h in header)
    assert any("SLO: TTFT p95 <= 2000 ms" in h for h in header)
    assert any("why this one" in h for h in header)
    from preview.build import build_preview

    preview = build_preview("chat", project / "Pulumi.chat.yaml", root=ROOT, project_dir=project)
    assert preview.ok and preview.mandatory_violations == 0
    best = doc["answers"][0]
    # The preview sizes the written stack as the search did: the same figures.
    assert preview.plan["answer"]["replicas"] == best["replicas"]
    for metric in ("ttft", "itl", "e2e"):
        assert preview.plan["answer"]["latency_ms"][metric] == pytest.approx(
            best["latency_ms"][metric]
        )
    assert preview.cost.replicas == best["replicas"]
    assert preview.cost.usd_per_hour_at_rate == pytest.approx(best["usd_per_hour"])
    # The written stack, sized as a shipped stack is: the same replicas and cost.
    again = sized_stack_file("chat", raw_stack_settings("chat", project), _goal_of(doc))
    assert again.sizing is not None and again.sizing.replicas == best["replicas"]
    assert again.screen_usd_per_hour == pytest.approx(best["usd_per_hour"])
    # Workload options on the preview default to the written stack's own lengths (1000 + 200),
    # not the settings' defaults (512 + 128).
    from gemma4 import preview as preview_cli

    argv = ["--project-dir", str(project), "-s", "chat", "--burstiness", "0.5", "--json"]
    assert preview_cli.main(argv) == 0
    bursty = json.loads(capsys.readouterr().out)
    assert bursty["performance"]["prompt_tokens"] == 1000
    assert bursty["plan"]["answer"]["replicas"] >= best["replicas"]
    # A second write of the same name is refused, and leaves the first alone.
    code = search_main(["--project-dir", str(project), *GOAL, "--write-stack", "chat"])
    assert code == 2 and "exists" in capsys.readouterr().err
    assert (project / "Pulumi.chat.yaml").read_text() == text


def _goal_of(doc: dict[str, Any]) -> Goal:
    return Goal(
        Traffic(doc["rate"], 1000, 200),
        tuple(Target(t["metric"], t["stat"], t["ms"]) for t in doc["targets"]),
    )


@pytest.mark.parametrize(
    ("argv", "platforms"),
    [
        (
            [
                "--rate",
                "0.1",
                "--prompt-tokens",
                "64",
                "--output-tokens",
                "64",
                "--e2e-p99-ms",
                "9000",
            ],
            None,
        ),
        (
            [
                "--rate",
                "200",
                "--prompt-tokens",
                "300",
                "--output-tokens",
                "100",
                "--ttft-p95-ms",
                "1500",
            ],
            None,
        ),
        (
            [
                "--rate",
                "2",
                "--prompt-tokens",
                "16000",
                "--output-tokens",
                "500",
                "--prompt-p95",
                "30000",
                "--ttft-p99-ms",
                "20000",
            ],
            "cloud-run,gke",
        ),
    ],
)
def test_other_workloads_are_answered_no_dearer_than_the_shipped_stacks(
    capsys: pytest.CaptureFixture[str], argv: list[str], platforms: str | None
) -> None:
    extra = ["--platforms", platforms] if platforms else []
    code, doc, err = _search(capsys, *argv, *extra)
    assert code == 0, err
    best = doc["answers"][0]
    assert best["meets_slo"]
    values = dict(zip(argv[::2], argv[1::2], strict=True))
    target = next(k for k in values if k.endswith("-ms"))
    metric, stat = target.removeprefix("--").removesuffix("-ms").split("-")
    assert best["latency_ms"][metric][stat] <= float(values[target])
    traffic = Traffic(
        float(values["--rate"]),
        int(values["--prompt-tokens"]),
        int(values["--output-tokens"]),
        prompt_p95=int(values["--prompt-p95"]) if "--prompt-p95" in values else None,
    )
    goal = Goal(traffic, (Target(metric, stat, float(values[target])),))
    shipped: list[tuple[str, float]] = []
    for name in STACKS:
        raw = raw_stack_settings(name)
        try:
            c = sized_stack_file(name, raw, goal)
        except ValueError:
            continue  # the workload is longer than the stack's max-model-len
        if c.sizing and c.sizing.meets and c.screen_usd_per_hour is not None:
            shipped.append((c.platform, c.screen_usd_per_hour))
    shipped = [(p, usd) for p, usd in shipped if platforms is None or p in platforms]
    if best["usd_per_hour"] is not None and shipped:
        assert best["usd_per_hour"] <= min(usd for _, usd in shipped) + 1e-9


def test_an_slo_nothing_meets_exits_1_naming_the_closest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc, err = _search(capsys, "--rate", "5", "--ttft-p95-ms", "1")
    assert code == 1 and doc["answers"] == []
    assert "no configuration meets TTFT p95 <= 1 ms at 5 req/s" in err
    assert doc["closest"] is not None or "nothing to size" in err


def test_a_platform_limit_says_a_quota_increase_is_needed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """TPU VM stacks run at most 16 nodes: 200 req/s of long answers within a tight ITL tail
    needs more, and the answer says so."""
    code, doc, err = _search(
        capsys,
        "--rate",
        "200",
        "--prompt-tokens",
        "2000",
        "--output-tokens",
        "1000",
        "--itl-p99-ms",
        "60",
        "--platforms",
        "tpu-vm",
        "--capacity",
        "on-demand",
    )
    assert code == 1, err
    assert "quota increase" in err
    assert doc["closest"]["quota_increase_needed"] is True


def test_a_trace_of_benchmark_records_is_a_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "requests.jsonl"
    lines = [
        {
            "ok": True,
            "start_s": i * 0.1,
            "e2e_s": 1.0,
            "prompt_tokens": 200 + 7 * (i % 9),
            "output_tokens": 50 + i % 13,
            "itls_s": [],
        }
        for i in range(300)
    ]
    failed = {
        "ok": False,
        "start_s": 5.0,
        "e2e_s": 0.1,
        "prompt_tokens": None,
        "output_tokens": None,
        "error_kind": "timeout",
    }
    trace.write_text("\n".join(json.dumps(x) for x in [*lines, failed]) + "\n")
    code, doc, err = _search(capsys, "--trace", str(trace), "--ttft-p95-ms", "3000")
    assert code == 0, err
    assert doc["rate"] == pytest.approx(299 / 29.9)
    assert doc["workload"].startswith("a trace of 300 requests")
    assert doc["answers"][0]["stack"]["maxModelLen"] >= 200 + 7 * 8 + 62


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"start_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n'
            '{"start_s": 1, "prompt_tokens": 10}\n',
            "line 2: output_tokens must be an integer",
        ),
        ('{"start_s": 0, "prompt_tokens": 10, "output_tokens": 5}\nnot json\n', "line 2: not JSON"),
        (
            '{"start_s": 0, "prompt_tokens": 10, "output_tokens": 5, "evil": 1}\n'
            '{"start_s": 1, "prompt_tokens": 1, "output_tokens": 1}\n',
            "line 1: unknown key 'evil'",
        ),
        ('{"start_s": NaN, "prompt_tokens": 10, "output_tokens": 5}\n', "line 1: not JSON"),
        ('{"start_s": -1, "prompt_tokens": 10, "output_tokens": 5}\n', "line 1: start_s must be"),
        ("[1, 2]\n", "line 1: a JSON object is expected"),
        ('{"start_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n', "needs at least 2 requests"),
        ("x" * 5000 + "\n", "line 1: longer than 4096 characters"),
        ("[" * 3000 + "\n", "line 1: not JSON"),
    ],
)
def test_a_bad_trace_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(content)
    code = search_main(["--project-dir", str(ROOT), "--trace", str(trace), "--ttft-p95-ms", "9"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


def test_an_oversized_trace_and_a_folder_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate((32 << 20) + 1)
    for path, message in ((big, "larger than 32 MiB"), (tmp_path, "not a regular file")):
        code = search_main(["--project-dir", str(ROOT), "--trace", str(path), "--ttft-p95-ms", "9"])
        err = capsys.readouterr().err
        assert code == 2 and message in err, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rate", "nan", "--ttft-p95-ms", "100"], "--rate must be a number from 0.001 to 100000"),
        (["--rate", "100001", "--ttft-ms", "100"], "--rate must be a number from 0.001"),
        (["--rate", "1", "--ttft-ms", "0"], "--ttft-ms must be a number"),
        (["--rate", "1", "--itl-p99-ms", "inf"], "--itl-p99-ms must be a number"),
        (["--rate", "1"], "give at least one latency target, e.g. --ttft-p95-ms"),
        (["--ttft-p95-ms", "9"], "give --rate (or a --trace"),
        (["--rate", "1", "--e2e-ms", "9", "--prompt-tokens", "0"], "--prompt-tokens must be"),
        (
            ["--rate", "1", "--e2e-ms", "9", "--prompt-p95", "10"],
            "--prompt-p95 (10) must be at least the mean",
        ),
        (
            ["--rate", "1", "--e2e-ms", "9", "--output-p95", "9000"],
            "--output-p95 (9000) is more than",
        ),
        (
            ["--rate", "1", "--e2e-ms", "9", "--platforms", "k8s"],
            "--platforms: 'k8s' is not one of cloud-run, gke, tpu-vm",
        ),
        (
            ["--rate", "1", "--e2e-ms", "9", "--capacity", "reserved"],
            "--capacity: 'reserved' is not one of on-demand, spot, flex-start",
        ),
        (
            ["--rate", "1", "--e2e-ms", "9", "--platforms", "gke,Cloud-Run"],
            "argument --platforms: 'Cloud-Run' is not one of cloud-run, gke, tpu-vm; did you "
            "mean 'cloud-run'?",
        ),
        (
            ["--rate", "1", "--e2e-ms", "9", "--capacity", "on_demand"],
            "argument --capacity: 'on_demand' is not one of on-demand, spot, flex-start; did you "
            "mean 'on-demand'?",
        ),
        (
            ["--rate", "1", "--e2e-ms", "9", "--burstiness", "0"],
            "--burstiness must be a number from 0.01 to 100",
        ),
        (["--rate", "1", "--e2e-ms", "9", "--write-stack", "Pulumi.l4.yaml"], "--write-stack"),
        (["--rate", "1", "--e2e-ms", "9", "--write-stack", "l4"], "exists; choose another name"),
        (
            ["--rate", "1", "--e2e-ms", "9", "--max-replicas", "0"],
            "--max-replicas must be an integer from 1",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_option(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    try:
        code = search_main(["--project-dir", str(ROOT), *argv])
    except SystemExit as exc:  # argparse refuses the value before the command runs
        code = int(str(exc.code))
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize("columns", [80, 200])
def test_the_tables_fit_100_columns_with_the_price_sources_in_footnotes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], columns: int
) -> None:
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: False))
    monkeypatch.setenv("COLUMNS", str(columns))
    assert search_main(["--project-dir", str(ROOT), *GOAL]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert re.search(r"\[1\] .*https://cloud\.google\.com/", " ".join(out.split()))
    # A price nobody publishes is "unknown", never $0.00 or a lower bound.
    assert "unknown" in out and not re.search(r"\$0\.00(?![0-9])", out) and ">=" not in out
    assert "$/month" in out and "$/M tok" in out


def test_the_closed_form_screen_agrees_with_the_answer(answered: dict[str, Any]) -> None:
    """Each answer's engine, as the closed forms see it at its replicas, is below capacity:
    the simulation did not answer what the step model calls unstable."""
    from serving.capacity.perf_stack import model_for_settings
    from serving.config.settings import load_settings

    for a in answered["answers"]:
        settings = load_settings(a["stack"])
        model, _ = model_for_settings(settings)
        point = model.at_rate(20 / a["replicas"], Workload(1000, 200))
        assert point.stable


def test_a_second_writer_of_the_same_name_never_replaces_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The name is taken between the check and the write (another `--write-stack` of the same
    name): the search fails to place its file and leaves the other writer's whole."""
    import gemma4.search_cli as cli

    project = tmp_path / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".*", "docs", "tests", "site"))
    theirs = "# the other writer's\nconfig: {}\n"
    real = cli.stack_file_text  # type: ignore[attr-defined]

    def racing(*args: Any, **kwargs: Any) -> str:
        (project / "Pulumi.chat.yaml").write_text(theirs)
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "stack_file_text", racing)
    code = search_main(["--project-dir", str(project), *GOAL, "--write-stack", "chat"])
    err = capsys.readouterr().err
    assert code == 1 and "no answer was written" in err and "File exists" in err
    assert (project / "Pulumi.chat.yaml").read_text() == theirs
    assert not list(project.glob(".Pulumi.chat.yaml.*.tmp"))


def test_a_budget_holds_only_priced_answers_and_says_the_cheapest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc, err = _search(capsys, "--rate", "5", "--ttft-p95-ms", "2000", "--budget", "0.5")
    assert code == 1 and doc["answers"] == []
    assert "nothing within --budget $0.5/h: the cheapest the screen finds is" in err
    code, doc, _ = _search(capsys, "--rate", "5", "--ttft-p95-ms", "2000", "--budget", "100")
    assert code == 0 and all(0 < a["usd_per_hour"] <= 100 for a in doc["answers"])


def test_a_capacity_type_a_platform_does_not_offer_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _doc, err = _search(
        capsys,
        "--rate",
        "1",
        "--ttft-p95-ms",
        "2000",
        "--capacity",
        "flex-start",
        "--platforms",
        "cloud-run",
    )
    assert code == 1 and "cloud-run: offers on-demand, not flex-start" in err
    assert "screening 0 configurations" in err


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("search") / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".*", "docs", "tests", "site"))
    return project


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        (
            "batch",
            [
                "--rate",
                "2",
                "--prompt-tokens",
                "6000",
                "--output-tokens",
                "800",
                "--e2e-p95-ms",
                "120000",
                "--platforms",
                "cloud-run,tpu-vm",
            ],
        ),
        (
            "chat",
            [
                "--rate",
                "40",
                "--prompt-tokens",
                "300",
                "--output-tokens",
                "150",
                "--ttft-p95-ms",
                "1000",
                "--e2e-p95-ms",
                "15000",
                "--capacity",
                "on-demand",
            ],
        ),
    ],
)
def test_the_top_answers_of_other_workloads_preview_ok_with_the_same_figures(
    project_copy: Path, capsys: pytest.CaptureFixture[str], name: str, argv: list[str]
) -> None:
    from preview.build import build_preview

    code = search_main(["--project-dir", str(project_copy), *argv, "--write-stack", name, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["written"] == str(project_copy / f"Pulumi.{name}.yaml")
    # The answers before the written one were refused by the preview, each said so.
    written = doc["answers"][len(doc["write_refusals"])]
    preview = build_preview(name, Path(doc["written"]), root=ROOT, project_dir=project_copy)
    assert preview.ok and written["meets_slo"]
    assert preview.plan["answer"]["replicas"] == written["replicas"]
    assert preview.plan["answer"]["latency_ms"]["e2e"] == pytest.approx(
        written["latency_ms"]["e2e"]
    )


def test_the_pages_example_and_claims_are_what_the_command_says(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/plan-search.md shows the search's output for the issue's goal and what the
    shipped stacks need for it: both as the code computes them today (the search is seeded)."""
    page = (ROOT / "docs" / "plan-search.md").read_text()
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: False))
    assert search_main(["--project-dir", str(ROOT), *GOAL]) == 0
    out = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    block = page.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    shown = [line for line in block if line.strip() and " ..." not in line]
    assert shown and all(line in out for line in shown), set(shown) - set(out)
    goal = Goal(Traffic(20, 1000, 200), (Target("ttft", "p95", 2000),))
    prose = " ".join(page.split())
    for stack in ("rtx6000", "l4"):
        c = sized_stack_file(stack, raw_stack_settings(stack), goal)
        assert c.sizing is not None and c.screen_usd_per_hour is not None
        n, usd = c.sizing.replicas, c.screen_usd_per_hour
        said = f"`{stack}` needs {n}" if stack == "rtx6000" else f"`{stack}` {n} (~${usd:,.2f}/h)"
        assert said in prose, said


def test_the_attacks_that_once_walked_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Near variants found by attacking the search: a shared prefix longer than some prompts,
    a target nothing meets given without a rate, a trace at one instant, a trace with lengths
    given beside it, a duplicated key, a U+2028 inside a record, an unreadable stack file, a
    project stack file that cannot start the platform's candidates."""
    from gemma4.plan_cli import main as plan_main
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    # 1. Prompts shorter than the shared prefix compute their last token: never faster than
    # a request alone.
    code = plan_main(
        [
            "-s",
            "rtx6000",
            "-r",
            "20",
            "--prompt-tokens",
            "1000",
            "--output-tokens",
            "100",
            "--prompt-p95",
            "3800",
            "--shared-prefix-tokens",
            "1000",
            "--ttft-p95-ms",
            "1000",
            "--json",
        ]
    )
    answer = json.loads(capsys.readouterr().out)["answer"]
    model, _ = model_for_settings(load_stack_settings("rtx6000"))
    alone = model.single_stream(Workload(1, 100))
    assert code == 0 and answer["latency_ms"]["ttft"]["p50"] >= alone.ttft_s * 1000
    # 2. A target nothing meets, no rate: said, not a crash about a rate of 0.
    assert plan_main(["-s", "rtx6000", "--ttft-p95-ms", "100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["answer"] is None and "miss" in doc["replicas"]["verdict"]
    # 3-5. Traces.
    instant = tmp_path / "instant.jsonl"
    instant.write_text('{"start_s": 1, "prompt_tokens": 5, "output_tokens": 5}\n' * 3)
    code = search_main(["--trace", str(instant), "--rate", "5", "--ttft-p95-ms", "9"])
    assert code == 2 and "at one instant" in capsys.readouterr().err
    spread = tmp_path / "spread.jsonl"
    spread.write_text(
        '{"start_s": 0, "prompt_tokens": 5, "output_tokens": 5}\n'
        '{"start_s": 1, "prompt_tokens": 5, "output_tokens": 5}\n'
    )
    code = search_main(["--trace", str(spread), "--prompt-tokens", "900", "--ttft-p95-ms", "9"])
    assert code == 2 and "drop --prompt-tokens" in capsys.readouterr().err
    twice = tmp_path / "twice.jsonl"
    twice.write_text('{"start_s": 0, "start_s": 1, "prompt_tokens": 5, "output_tokens": 5}\n')
    code = search_main(["--trace", str(twice), "--ttft-p95-ms", "9"])
    assert code == 2 and "'start_s' is given twice" in capsys.readouterr().err
    odd = tmp_path / "odd.jsonl"
    odd.write_text(
        '{"start_s": 0, "prompt_tokens": 5, "output_tokens": 5, "error": "a\u2028b"}\n'
        '{"start_s": 1, "prompt_tokens": 5, "output_tokens": 5}\n',
        encoding="utf-8",
    )
    code = search_main(["--project-dir", str(ROOT), "--trace", str(odd), "--ttft-p95-ms", "900"])
    capsys.readouterr()
    assert code in (0, 1)  # read as the JSON it is
    # 6-7. A project with an unreadable stack file and one that cannot start Cloud Run's RTX.
    project = tmp_path / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".*", "docs", "tests", "site"))
    (project / "Pulumi.dang.yaml").symlink_to(project / "nowhere")
    rtx = (project / "Pulumi.rtx6000.yaml").read_text()
    (project / "Pulumi.a-rtx.yaml").write_text(
        rtx.replace("gemma4-vllm:minInstances: 0", "gemma4-vllm:minInstances: 3")
    )
    code = search_main(["--project-dir", str(project), *GOAL, "--platforms", "cloud-run", "--json"])
    captured = capsys.readouterr()
    assert code == 0 and "skipping Pulumi.dang.yaml" in captured.err
    answers = json.loads(captured.out)["answers"]
    assert {a["template"] for a in answers} <= {"l4", "rtx6000"}
    assert any(a["hardware"] == "rtx-pro-6000" for a in answers)
