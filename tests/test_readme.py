"""README.md and docs/ tell the truth: their commands run (or at least parse), and the keys they
name exist.

Convention for the fenced shell blocks of README.md and every docs/**/*.md page (follow it when
you add commands):

- ```` ```bash ````: runs offline. This test runs every such block with
  `bash -euo pipefail` from the repository root (the venv's `bin` first on PATH, no cloud
  credentials) and expects exit status 0 within 120 s. Write commands as a user without an
  activated venv would: `.venv/bin/gemma4 ...`, `.venv/bin/python -m ...`, never a bare
  `python`, `pip` or `gemma4`. Send long output to `/dev/null` if it is not the point.
- ```` ```bash cloud ````: needs Google Cloud, the Pulumi CLI, credentials or a running endpoint;
  not run. Every `gemma4 ...` and `python -m ...` call in it is still parsed by the command's
  real argparse parser, so a wrong flag fails here.
- ```` ```bash heavy ````: a documented check too heavy for every run (it installs gigabytes or
  runs for minutes, e.g. the vLLM contract script); not run; its `gemma4`, `python -m` and
  `python scripts/NAME.py` calls are parsed like the cloud blocks'.
- ```` ```bash serve ````: starts a long-running server (the MCP server); not run; its calls are
  parsed like the cloud blocks'.
- ```` ```bash ci ````: the start (`scripts/machine`, `scripts/setup`, `scripts/check`,
  `scripts/engine-check`); not run here (it would run this test); it must be exactly what
  `.ci/run` runs.
- Any other info string (`text`, `json`, `python`, `mermaid`, none) is not a shell command.
  GitHub highlights by the first word only, so `bash cloud` renders as bash; the docs site
  drops the marker before rendering (scripts/mkdocs_hooks.py).

Keys: every stack key the README sets or names (`pulumi config set KEY`, `gemma4-vllm:KEY`,
the first column of a `| key |` or `| stack key |` table) exists in `serving/config/settings.py`,
and
no code span spells a key with the wrong case (`sloP95E2eMs` for `sloP95E2EMs`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gemma4.cli import BY_NAME
from preview.harness import ROOT
from serving.config.settings import config_keys

README = ROOT / "README.md"
#: Every page whose commands are held to the convention: the README and the documentation site.
DOCS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
KINDS = {
    "": "run",
    "cloud": "cloud",
    "ci": "ci",
    "heavy": "heavy",
    "serve": "serve",
}
#: `python -m MODULE` forms and the module holding each one's `build_parser()`.
PYTHON_M_PARSERS = {
    "gemma4": "gemma4.cli",
    "gemma4.preview": "gemma4.preview",
    "healthchecks": "healthchecks.cli",
    "bench": "bench.cli",
    "gemma4.promote_cli": "gemma4.promote_cli",
    "mcp_server": "mcp_server.cli",
    "gemma4.plan_cli": "gemma4.plan_cli",
}
#: `python -m` modules that are not user command lines with a parser to check.
PYTHON_M_OTHER = {"pip", "pytest", "tests.support.fake_vllm", "bench.fidelity"}
BARE = {"python", "python3", "pip", "pip3", "gemma4", "pytest", "ruff", "mypy"}
OPERATORS = {"|", "||", "&&", ";", "&"}


@dataclass(frozen=True)
class Block:
    line: int
    kind: str
    text: str
    path: Path = README

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)} line {self.line} (```bash {self.kind})"


def blocks(pages: list[Path] | None = None) -> list[Block]:
    """The fenced shell blocks of `pages` (default: the README and every docs page)."""
    found = []
    fence = re.compile(r"^```bash(?:[ \t]+(\S+))?[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
    for path in DOCS if pages is None else pages:
        text = path.read_text()
        for match in fence.finditer(text):
            marker = match.group(1) or ""
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)} line {line}"
            assert marker in KINDS, f"{where}: unknown block marker 'bash {marker}'"
            found.append(Block(line, KINDS[marker], match.group(2), path))
    return found


def commands(block: Block) -> list[list[str]]:
    """The simple commands of a block: continuation lines joined, comments dropped, split at
    `|`, `&&`, `;`; redirections and assignments `X=...` before a command are dropped."""
    found: list[list[str]] = []
    for line in block.text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        redirect = False
        for token in lexer:
            if redirect:  # the target of `> FILE`
                redirect = False
            elif token in OPERATORS:
                found.append(current)
                current = []
            elif token[0] in "<>" or token in ("&>", "&>>"):
                if current and current[-1].isdigit():  # 2>
                    current.pop()
                redirect = True
            else:
                current.append(token)
        found.append(current)
    cleaned = []
    for tokens in found:
        while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
            tokens = tokens[1:]
        if tokens and tokens[0] == "export":
            continue
        if tokens:
            cleaned.append(tokens)
    return cleaned


def all_commands() -> list[tuple[Block, list[str]]]:
    return [(b, c) for b in blocks() for c in commands(b)]


def test_the_readme_has_blocks_of_every_kind() -> None:
    kinds = {b.kind for b in blocks()}
    assert {"run", "cloud", "ci", "heavy", "serve"} <= kinds <= set(KINDS.values())
    first = blocks([README])
    # The start (set up and check), then the offline preview of l4, then the cloud.
    assert [b.kind for b in first[:3]] == ["ci", "run", "cloud"]
    assert "gemma4 preview -s l4" in first[1].text
    assert "pulumi up -s l4" in first[2].text


def test_every_docs_page_is_covered() -> None:
    """Shell blocks only with a known marker, and every page's blocks are found (a fence with
    another spelling, ```` ```sh ```` or ```` ```shell ````, would escape the tests)."""
    for path in DOCS:
        text = path.read_text()
        loose = re.findall(r"^```(sh|shell|console|zsh)\b", text, re.M)
        assert loose == [], f"{path.relative_to(ROOT)}: use ```bash (with a marker) for commands"
    assert any(b.path != README for b in blocks())


def test_no_command_needs_an_activated_venv() -> None:
    bare = [
        f"{block.where}: {' '.join(c)}"
        for block, c in all_commands()
        if c[0] in BARE and c[1:3] != ["-m", "venv"]  # making a venv needs a system Python
    ]
    assert bare == [], "use .venv/bin/... (the README never activates the venv)"


def _parse(argv: list[str], parser_module: str, where: str) -> None:
    module = importlib.import_module(parser_module)
    assert hasattr(module, "build_parser"), f"{where}: {parser_module} has no build_parser()"
    parser = module.build_parser()
    try:
        parser.parse_args(argv)
    except SystemExit as exc:  # --help exits 0; a bad flag exits 2
        assert exc.code == 0, f"{where}: {shlex.join(argv)} does not parse"


def test_every_cli_call_parses_with_the_real_parser(capsys: pytest.CaptureFixture[str]) -> None:
    checked = 0
    for block, c in all_commands():
        where = f"{block.where}: {shlex.join(c)}"
        if Path(c[0]).name == "gemma4":
            assert len(c) > 1, where
            if c[1] in ("-h", "--help", "--version"):
                continue
            assert c[1] in BY_NAME, f"{where}: unknown gemma4 command"
            module = BY_NAME[c[1]].module
            if block.kind == "run" and not hasattr(importlib.import_module(module), "build_parser"):
                continue  # it runs below
            _parse(c[2:], module, where)
            checked += 1
        elif Path(c[0]).name.startswith("python") and re.fullmatch(r"scripts/\w+\.py", c[1]):
            spec = importlib.util.spec_from_file_location(Path(c[1]).stem, ROOT / c[1])
            assert spec and spec.loader, f"{where}: no such script"
            script = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = script  # dataclasses look their module up there
            spec.loader.exec_module(script)
            assert hasattr(script, "build_parser"), f"{where}: {c[1]} has no build_parser()"
            try:
                script.build_parser().parse_args(c[2:])
            except SystemExit as exc:
                assert exc.code == 0, f"{where}: does not parse"
            checked += 1
        elif Path(c[0]).name.startswith("python") and c[1:2] == ["-m"]:
            name = c[2]
            if name in PYTHON_M_OTHER or name == "venv":
                continue
            assert name in PYTHON_M_PARSERS, f"{where}: add {name} to PYTHON_M_PARSERS"
            _parse(c[3:], PYTHON_M_PARSERS[name], where)
            checked += 1
    capsys.readouterr()
    assert checked >= 8


def test_ci_blocks_are_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    ci_commands = [
        line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))
    ]
    for block in blocks():
        if block.kind == "ci":
            assert [" ".join(c) for c in commands(block)] == ci_commands, block.where


OFFLINE = [b for b in blocks() if b.kind == "run"]
#: The README's first offline command and what the README shows it printing: a newcomer's
#: first command prints something, and the README shows exactly that.
_FIRST = README.read_text().split("## See it offline first", 1)[1]
FIRST_COMMAND = _FIRST.split("```bash\n", 1)[1].split("```", 1)[0]
FIRST_SHOWN = _FIRST.split("```text\n", 1)[1].split("```", 1)[0]


def test_there_are_offline_blocks_and_the_first_shows_its_output() -> None:
    assert len(OFFLINE) >= 3
    assert next(b.text for b in OFFLINE if b.path == README) == FIRST_COMMAND
    assert "/dev/null" not in FIRST_COMMAND


# One test per block, so that pytest-xdist spreads them over its workers.
@pytest.mark.long  # with every block, the module takes half a minute
@pytest.mark.parametrize(
    "block", OFFLINE, ids=[f"{b.path.relative_to(ROOT)}:{b.line}" for b in OFFLINE]
)
def test_every_offline_block_runs(block: Block, tmp_path: Path) -> None:
    """The offline block, in a shell of its own, must exit 0 within 120 s."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "COLUMNS": "200",
        # A block that writes a file writes it here (`${TMPDIR:-/tmp}`), never over a file of
        # another user or another checkout left in /tmp.
        "TMPDIR": str(tmp_path),
    }
    for var in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "PULUMI_CONFIG"):
        env.pop(var, None)
    # A block that runs tests of this suite (the contract tests) has them collected, not run a
    # second time: the suite runs them itself; what the block adds is that its command names
    # tests that exist and load.
    text = block.text.replace(" -m pytest ", " -m pytest --collect-only ")
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", text],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: still running after 120 s")
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stderr[-2000:]}"
    if block.path == README and block.text == FIRST_COMMAND:
        assert done.stdout == FIRST_SHOWN


# --- keys --------------------------------------------------------------------------------


KEYS = set(config_keys())


def test_keys_set_in_commands_exist() -> None:
    named = []
    for block, c in all_commands():
        if c[:3] != ["pulumi", "config", "set"]:
            continue
        args = [a for a in c[3:] if not a.startswith("-")]
        if "--path" in c:
            args = [a for a in c[3:] if a != "--path" and not a.startswith("-")]
        key = re.split(r"[\[.]", args[0], maxsplit=1)[0].removeprefix("gemma4-vllm:")
        if ":" in key:  # another namespace (gcp:project)
            continue
        named.append(key)
        assert key in KEYS, f"{block.where}: pulumi config set {key}: no such stack key"
    assert named


def test_namespaced_and_tabled_keys_exist() -> None:
    tabled = []
    for path in DOCS:
        tabled += _keys_named(path)
    assert "sloP95E2EMs" in tabled


def _keys_named(path: Path) -> list[str]:
    text = path.read_text()
    name = path.relative_to(ROOT)
    for key in re.findall(r"gemma4-vllm:([A-Za-z0-9]+)", text):
        assert key in KEYS, f"{name} names gemma4-vllm:{key}: no such stack key"
    tabled = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        header = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or header[0] not in ("key", "stack key"):
            continue
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            first = row.strip().strip("|").split("|")[0]
            for key in re.findall(r"`([A-Za-z0-9]+)`", first):
                tabled.append(key)
                assert key in KEYS, f"{name} table row {row!r}: {key} is no stack key"
    return tabled


def test_no_code_span_misspells_a_key() -> None:
    by_lower = {k.lower(): k for k in KEYS}
    wrong = [
        (str(path.relative_to(ROOT)), span, by_lower[span.lower()])
        for path in DOCS
        for span in re.findall(r"`([A-Za-z][A-Za-z0-9]*)(?::[^`]*)?`", path.read_text())
        if span.lower() in by_lower and span not in KEYS
    ]
    assert wrong == [], "spelled differently from serving/config/settings.py"
