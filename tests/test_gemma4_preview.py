"""`gemma4 preview`: the offline preview of a stack, its verdicts and its exit status."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gemma4 import preview as pv
from policies.registry import ALL, BY_NAME
from preview import build as pb
from preview.harness import ROOT
from serving.catalog.hardware import HARDWARE
from serving.sizing.memory import monthly_cost

SHIPPED = ("l4", "rtx6000", "tpu-v6e1")


def stack_file(tmp_path: Path, name: str, base: Any = "l4", **changes: Any) -> Path:
    """A user-written stack file: a shipped one with `changes` (None drops the key)."""
    data = yaml.safe_load((ROOT / f"Pulumi.{base}.yaml").read_text())
    for key, value in changes.items():
        full = key if ":" in key else f"gemma4-vllm:{key}"
        if value is None:
            data["config"].pop(full, None)
        else:
            data["config"][full] = value
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = pv.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("stack", SHIPPED)
def test_every_shipped_stack_previews_and_passes(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "-s", stack, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ok"] is True and data["fits"] is True
    assert data["mandatory_violations"] == 0
    # Every policy of the pack has a verdict with its level from policies/config.json.
    config = json.loads((ROOT / "policies" / "config.json").read_text())
    assert {v["policy"]: v["enforcement_level"] for v in data["policies"]} == {
        name: entry["enforcementLevel"] for name, entry in config.items()
    }
    assert {v["verdict"] for v in data["policies"]} == {"pass"}
    # The resource tree: every custom resource has a parent component, inputs as declared.
    types = {r["type"] for r in data["resources"]}
    assert "gcp:projects/service:Service" in types
    assert all(r["parent"] for r in data["resources"] if r["custom"])
    assert data["vllm_command_line"].startswith("vllm serve ")
    assert data["plan"]["kv_tokens"] > 0 and data["plan"]["full_length_sequences"] >= 1
    hw = HARDWARE[data["hardware"]]
    # A month as billed: 730 h at the list price, or the flex-start TPU node's 4 h run at the
    # flex-start rate (then it is deleted).
    flex = stack == "tpu-v6e1"
    price = hw.flex_start_price if flex and hw.flex_start_price else hw.price
    assert data["cost"]["usd_per_hour"] == price.usd_per_hour
    assert data["cost"]["usd_per_month_per_instance"] == monthly_cost(
        price.usd_per_hour, hours=4.0 if flex else 730.0
    )
    # The text form carries the same sections.
    code, text, _ = run(capsys, "-s", stack)
    assert code == 0
    for heading in ("Resources (", "vllm serve command line:", "Policies", "Capacity plan:"):
        assert heading in text
    assert data["vllm_command_line"] in text
    assert "Verdict: OK" in text
    # Every cost in its four figures, none a bound (the GKE stacks: tests/test_gke_stacks.py).
    assert ">=$" not in text.replace(" ", "") and "at least $" not in text
    assert "/month, " in text and "per million requests, " in text
    assert "per million output tokens" in text


def test_l4_shows_the_inputs_that_matter() -> None:
    p = pb.build_preview("l4")
    (service,) = [r for r in p.resources if r.type == "gcp:cloudrunv2/service:Service"]
    assert service.parent == "gemma-l4-vllm"
    assert service.hooks  # the post-deploy health check and benchmark
    container = service.inputs["template"]["containers"][0]
    assert container["resources"]["cpuIdle"] is False
    assert service.inputs["template"]["nodeSelector"]["accelerator"] == "nvidia-l4"
    # The command line is the container's commands + args, exactly.
    assert p.vllm_command_line == " ".join([*container["commands"], *container["args"]])
    assert "--max-model-len=32768" in (p.vllm_command_line or "")
    text = "\n".join(pv.text_lines(p))
    assert "template.nodeSelector.accelerator = nvidia-l4" in text
    assert "template.containers[vllm].resources.cpuIdle = false" in text
    assert "__provider" not in json.dumps(p.model_dump(mode="json"))


def test_a_user_written_stack_file_previews_like_a_shipped_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_file(
        tmp_path,
        "mine",
        region="europe-west4",
        maxNumSeqs=4,
        sloMinRequestsPerSecond=5,
        **{"gcp:project": "my-project"},
    )
    code, out, err = run(capsys, "--stack-file", str(path), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["stack"] == "mine" and data["project"] == "my-project"
    names = {r["name"] for r in data["resources"]}
    assert "gemma-mine-vllm-service" in names  # the program's own naming, for this stack
    (service,) = [r for r in data["resources"] if r["type"] == "gcp:cloudrunv2/service:Service"]
    assert service["inputs"]["location"] == "europe-west4"
    assert "--max-num-seqs=4" in data["vllm_command_line"]
    # The stack's own SLO rate prices a million requests, on the replicas it needs (more than
    # the stack's one instance: kept and said so, as `gemma4 plan search` counts them).
    price = HARDWARE["l4"].price.usd_per_hour
    cost = data["cost"]
    n = cost["replicas"]
    assert cost["requests_per_second"] == 5
    assert n == data["plan"]["replicas"]["replicas_needed"] > 1
    assert "the stack runs at most 1" in cost["replicas_source"]
    assert cost["usd_per_million_requests"] == pytest.approx(n * price / (3600 * 5) * 1e6)


def test_a_mandatory_violation_exits_1_and_names_the_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_file(tmp_path, "hot", gpuMemoryUtilization=0.97)
    code, out, err = run(capsys, "--stack-file", str(path))
    assert code == 1, err
    assert "[FAIL] gpu-memory-utilization-range (mandatory)" in out
    assert "Verdict: BLOCKED, 1 mandatory policy violation(s)." in out
    # The same violation demoted by the pack config (as --policy-pack-config would) passes.
    config = json.loads((ROOT / "policies" / "config.json").read_text())
    config["gpu-memory-utilization-range"]["enforcementLevel"] = "advisory"
    demoted = tmp_path / "policy.json"
    demoted.write_text(json.dumps(config))
    code, out, _ = run(capsys, "--stack-file", str(path), "--policy-config", str(demoted))
    assert code == 0
    assert "[FAIL] gpu-memory-utilization-range (advisory)" in out
    assert "1 advisory finding(s)" in out


def test_an_advisory_finding_does_not_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_file(tmp_path, "warm", minInstances=1)
    code, out, _ = run(capsys, "--stack-file", str(path), "--json")
    assert code == 0
    data = json.loads(out)
    (verdict,) = [v for v in data["policies"] if v["policy"] == "min-instances-cost"]
    assert verdict["verdict"] == "fail" and verdict["enforcement_level"] == "advisory"
    assert data["cost"]["usd_per_month_idle"] == data["cost"]["usd_per_month_per_instance"]


def test_a_stack_that_does_not_fit_exits_1_even_with_its_policies_disabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_file(
        tmp_path, "big", gpuMemoryUtilization=0.5, maxModelLen=131072, kvCacheDtype="auto"
    )
    quiet = tmp_path / "policy.json"
    quiet.write_text(json.dumps({"gpu-memory-budget": "disabled", "max-model-len-cap": "disabled"}))
    code, out, err = run(capsys, "--stack-file", str(path), "--policy-config", str(quiet))
    assert code == 1, err
    assert "fits: NO" in out
    assert "[off ] gpu-memory-budget (disabled)" in out
    assert "Verdict: BLOCKED, the model does not fit." in out
    p = pb.build_preview("big", path, policy_config=quiet)
    assert not p.fits and p.plan["full_length_sequences"] < 1 and p.mandatory_violations == 0


BAD_INPUT = {
    "unknown stack": (["-s", "nope"], "unknown stack 'nope'"),
    "missing file": (["--stack-file", "/nonexistent/Pulumi.x.yaml"], "no such file"),
    "no stack": ([], "give -s STACK or --stack-file PATH"),
    "stack name with a path": (["-s", "../etc"], "-s: stack name '../etc' cannot become"),
}


@pytest.mark.parametrize("case", BAD_INPUT, ids=list(BAD_INPUT))
def test_bad_arguments_exit_2_with_one_message(
    case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, expected = BAD_INPUT[case]
    try:
        code = pv.main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    _, err = capsys.readouterr()
    assert code == 2
    assert expected in err and "Traceback" not in err


BAD_FILES = {
    "invalid yaml": ("config: [unclosed\n", "not valid YAML"),
    "not a mapping": ("- a\n- b\n", "expected a mapping"),
    "unknown key": ("config:\n  gemma4-vllm:hardwre: l4\n", "hardwre"),
    # The CLI reads a key without a namespace as the project's (loaders.go): hardware is read.
    "no namespace": ("config:\n  hardware: l4\n", "config key 'image': is required"),
    "bad value": (
        "config:\n  gemma4-vllm:hardware: h100\n  gemma4-vllm:image: vllm/vllm-openai:v0.27.1\n",
        "unknown hardware 'h100'",
    ),
    "floating image": (
        "config:\n  gemma4-vllm:hardware: l4\n  gemma4-vllm:image: vllm/vllm-openai:latest\n",
        "image",
    ),
}


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
def test_bad_stack_files_exit_2_naming_the_problem(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BAD_FILES[case]
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text)
    code, out, err = run(capsys, "--stack-file", str(path))
    assert code == 2
    assert out == ""
    assert expected in err and str(path) in err and "Traceback" not in err
    assert err.startswith("gemma4 preview: error: ") and err.count("error:") == 1


def test_a_bad_policy_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for text, expected in (
        ("{", "not valid JSON"),
        ('{"no-such-policy": "advisory"}', "unknown policy 'no-such-policy'"),
        ('{"pinned-image": "sometimes"}', "enforcementLevel 'sometimes'"),
    ):
        path = tmp_path / "policy.json"
        path.write_text(text)
        code, _, err = run(capsys, "-s", "l4", "--policy-config", str(path))
        assert code == 2 and expected in err, err


def test_markdown_diff_against_the_base_preview(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps(pb.build_preview("l4").model_dump(mode="json")))
    head = stack_file(tmp_path, "l4", gpuMemoryUtilization=0.97, maxNumSeqs=4)
    code, out, _ = run(capsys, "--stack-file", str(head), "--markdown", "--diff-against", str(base))
    assert code == 1
    assert out.startswith("### `gemma4 preview -s l4`: BLOCKED")
    diff = out.split("```diff\n", 1)[1].split("```", 1)[0]
    assert "~ policy gpu-memory-utilization-range: pass (mandatory) -> fail (mandatory)" in diff
    assert "--max-num-seqs=6" in diff and "--max-num-seqs=4" in diff
    assert "~ plan max_num_seqs: 6 -> 4" in diff
    assert "template.maxInstanceRequestConcurrency: 6 -> 4" in diff
    assert "template.timeout" not in diff  # unchanged inputs stay out
    # An unchanged stack diffs to nothing; a base from an older format is read tolerantly.
    assert pv.diff_lines(json.loads(base.read_text()), json.loads(base.read_text())) == []
    assert pv.diff_lines({"something": "else"}, {"resources": []}) == []


def test_every_policy_is_judged() -> None:
    p = pb.build_preview("rtx6000")
    assert [v.policy for v in p.policies] == [policy.name for policy in ALL]
    assert set(BY_NAME) == {v.policy for v in p.policies}


def test_the_console_script_and_python_m_forms_run() -> None:
    gemma4 = Path(sys.executable).parent / "gemma4"
    result = subprocess.run(
        [str(gemma4), "preview", "-s", "l4", "--json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "l4"
    assert result.stderr == f"gemma4 preview: reading {ROOT / 'Pulumi.l4.yaml'}\n"
    result = subprocess.run(
        [sys.executable, "-m", "gemma4", "preview", "-s", "nope"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("gemma4 preview: error: unknown stack 'nope'")


@pytest.mark.long
def test_s_reads_the_pulumi_project_of_the_current_directory_as_pulumi_does(
    tmp_path: Path,
) -> None:
    """`pulumi -s` reads Pulumi.<stack>.yaml beside the Pulumi.yaml of the current directory or
    its nearest parent; so does every gemma4 command, not the checkout it was installed from."""
    other = tmp_path / "other-project"
    (other / "deep" / "er").mkdir(parents=True)
    (other / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    text = (ROOT / "Pulumi.l4.yaml").read_text()
    shipped = re.search(r"gemma4-vllm:maxNumSeqs: (\d+)", text)
    assert shipped is not None
    other_value = int(shipped.group(1)) - 1
    (other / "Pulumi.l4.yaml").write_text(
        text.replace(shipped.group(0), f"gemma4-vllm:maxNumSeqs: {other_value}")
    )
    gemma4 = Path(sys.executable).parent / "gemma4"
    for cwd in (other, other / "deep" / "er"):
        result = subprocess.run(
            [str(gemma4), "preview", "-s", "l4", "--json"],
            capture_output=True,
            text=True,
            check=False,
            cwd=cwd,
        )
        assert result.returncode == 0, result.stderr
        assert f"--max-num-seqs={other_value}" in json.loads(result.stdout)["vllm_command_line"]
        assert result.stderr == f"gemma4 preview: reading {other.resolve() / 'Pulumi.l4.yaml'}\n"
        plan = subprocess.run(
            [str(gemma4), "plan", "-s", "l4", "--json"],
            capture_output=True,
            text=True,
            check=False,
            cwd=cwd,
        )
        assert plan.returncode == 0, plan.stderr
        assert json.loads(plan.stdout)["max_num_seqs"] == other_value
    # Outside any project: refused, saying what was looked for (not the installed checkout's).
    outside = tmp_path / "nowhere"
    outside.mkdir()
    for sub in ("preview", "plan"):
        result = subprocess.run(
            [str(gemma4), sub, "-s", "l4"], capture_output=True, text=True, check=False, cwd=outside
        )
        assert result.returncode == 2
        assert f"gemma4 {sub}: error: no Pulumi project (Pulumi.yaml) in " in result.stderr
        assert "Traceback" not in result.stderr


def test_a_project_that_moves_its_stack_files_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: gemma4-vllm\nstackConfigDir: stacks\n")
    code, out, err = run(capsys, "-s", "l4", "--project-dir", str(tmp_path))
    assert code == 2 and out == ""
    assert "'stackConfigDir'" in err and "--stack-file" in err


def test_old_option_names_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    for option in ("--project-dir", "--root", "--cwd"):
        code, out, _ = run(capsys, "-s", "l4", option, str(ROOT), "--json")
        assert code == 0 and json.loads(out)["stack"] == "l4"


def test_the_program_refusing_a_stack_exits_2_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import components.stack
    from serving.config.checks import SettingsError

    def refuse(*_: object, **__: object) -> None:
        raise SettingsError("config key 'gcp:project' is not set")

    monkeypatch.setattr(components.stack, "build", refuse)
    code, out, err = run(capsys, "-s", "l4")
    assert code == 2 and out == ""
    assert "the program refused the stack: config key 'gcp:project' is not set" in err
    assert "Traceback" not in err


def test_secure_values_are_never_needed_nor_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_file(tmp_path, "sec", **{"gcp:accessToken": {"secure": "v1:c2VjcmV0"}})
    code, out, err = run(capsys, "--stack-file", str(path), "--json")
    assert code == 0, err
    assert "c2VjcmV0" not in out


def test_previews_in_one_process_do_not_leak_into_each_other() -> None:
    tpu = pb.build_preview("tpu-v6e1")
    l4 = pb.build_preview("l4")
    assert "endpoint_urls" in tpu.outputs and "endpoint_urls" not in l4.outputs
    assert not any(r.name.startswith("gemma-tpu") for r in l4.resources)


def test_a_checkout_is_needed(tmp_path: Path) -> None:
    with pytest.raises(pb.PreviewError, match="no Pulumi project"):
        pb.build_preview("l4", root=tmp_path)


def test_the_preview_shows_predicted_performance_beside_the_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from serving.capacity.perf import Workload
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    code, out, _ = run(capsys, "-s", "rtx6000", "--json", "--requests-per-second", "2")
    assert code == 0
    perf = json.loads(out)["performance"]
    settings = load_stack_settings("rtx6000")
    model, _ = model_for_settings(settings)
    assert perf["measured"] is False and perf["band"] == model.band
    w = Workload(
        settings.benchmark.benchmark_prompt_tokens, settings.benchmark.benchmark_output_tokens
    )
    assert perf["at_rate"]["requests_per_second"] == 2
    assert perf["at_rate"]["ttft_ms"] == pytest.approx(model.at_rate(2.0, w).ttft_s * 1000)
    busy = perf["at_concurrency"]
    assert busy["concurrency"] == settings.instance_concurrency
    assert busy["itl_ms"] == pytest.approx(
        model.at_concurrency(busy["concurrency"], w).itl_s * 1000
    )
    code, text, _ = run(capsys, "-s", "rtx6000", "--requests-per-second", "2")
    assert "Predicted performance (PREDICTED means, not measured" in text
    assert "at 2 req/s per replica (2 req/s to the stack over 1 replica(s)): TTFT" in text
    # A rate no replica count serves (above the platform's most) says so instead of figures.
    code, text, _ = run(capsys, "-s", "l4", "--requests-per-second", "100000")
    assert "at the offered rate: no replica count serves it (see the replica plan)" in text
    assert "serving 100000 req/s to the stack (--requests-per-second): " in text
    assert "needed" in text and "maxInstances allows at most 100" in " ".join(text.split())


@pytest.mark.parametrize("rate", [2.0, 5.0, 9.0])
def test_the_rate_is_the_whole_endpoints_load_in_every_figure(
    capsys: pytest.CaptureFixture[str], rate: float
) -> None:
    """--requests-per-second is one figure, the load offered to the whole endpoint: the
    replicas are planned for it and every per-instance figure is its share over them."""
    from serving.capacity.perf import Workload
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import load_stack_settings

    settings = load_stack_settings("rtx6000")
    model, _ = model_for_settings(settings)
    w = Workload(
        settings.benchmark.benchmark_prompt_tokens, settings.benchmark.benchmark_output_tokens
    )
    price = settings.price.usd_per_hour
    seen = []
    for r in (rate, 2 * rate):
        code, out, err = run(capsys, "-s", "rtx6000", "--json", "--requests-per-second", str(r))
        assert code == 0, err
        data = json.loads(out)
        cost, plan, at_rate = data["cost"], data["plan"], data["performance"]["at_rate"]
        n = cost["replicas"]
        assert cost["requests_per_second"] == r
        assert plan["replicas"]["requests_per_second"] == r
        assert n == max(plan["replicas"]["replicas_needed"], plan["replicas"]["stack_min_replicas"])
        assert cost["requests_per_second_per_replica"] == pytest.approx(r / n)
        assert plan["requests_per_second"] == r and plan["serving_replicas"] == n
        assert plan["requests_per_second_per_replica"] == pytest.approx(r / n)
        assert at_rate["requests_per_second"] == pytest.approx(r / n)
        assert at_rate["stack_requests_per_second"] == r and at_rate["replicas"] == n
        assert at_rate["ttft_ms"] == pytest.approx(model.at_rate(r / n, w).ttft_s * 1000)
        # n replicas at the hourly price serve r req/s: the price of a million requests.
        assert cost["usd_per_million_requests"] == pytest.approx(n * price / (3600 * r) * 1e6)
        assert plan["usd_per_million_requests"] == pytest.approx(cost["usd_per_million_requests"])
        code, text, _ = run(capsys, "-s", "rtx6000", "--requests-per-second", str(r))
        share = f"{r / n:,.2f}".rstrip("0").rstrip(".")
        assert (
            f"at {share} req/s per replica ({r:g} req/s to the stack over {n} replica(s))" in text
        )
        assert (
            f"serving {r:g} req/s to the stack (--requests-per-second) over {n} replica(s)" in text
        )
        capacity = data["performance"]["capacity_requests_per_s"]
        assert f"{n * capacity:,.2f} req/s over {n} replica(s)" in text
        assert f"replicas serve {r:g} req/s" in text or f"{r:g} req/s needs" in text
        seen.append(n)
    assert seen[1] >= seen[0]  # twice the load never needs fewer replicas


def test_the_preview_takes_the_mtp_acceptance(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-s", "rtx6000", "--json", "--mtp-acceptance", "0.1")
    assert code == 0
    perf = json.loads(out)["performance"]
    assert perf["mean_accepted_length"] == pytest.approx(1.111)
    try:
        code = pv.main(["-s", "rtx6000", "--mtp-acceptance", "1.5"])
    except SystemExit as exc:
        code = int(str(exc.code))
    assert code == 2 and "--mtp-acceptance must be a number from 0 to 1" in capsys.readouterr().err
