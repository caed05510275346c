"""What the command line says is what it does: a subcommand after the stack options is refused,
never dropped; `--project-dir` names a Pulumi project folder for every command; one option name
has one meaning (and one metavar) across the commands; tables keep stack names whole at any
width. In-process (the parsers and the commands' mains), so it is fast."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from gemma4.cli import COMMANDS, build_parser, main, subcommand_parser
from preview.harness import ROOT
from serving.config.project import stack_names


def parsers() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command path and its parser (each command, each argparse subcommand, at any
    depth)."""
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
        found[path] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk((*path, name), child)

    for command in COMMANDS:
        walk((command.name,), subcommand_parser(command))
    return found


PARSERS = parsers()


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        o: a
        for a in parser._actions
        if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)
        for o in a.option_strings
    }


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "-s", "l4", "search", "--rate", "1", "--ttft-ms", "500"],
        ["plan", "--json", "search", "--rate", "1"],
        ["plan", "-s", "l4", "calibrate", "runs/x", "-s", "l4"],
    ],
)
def test_a_subcommand_after_the_stack_options_is_refused_not_dropped(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""  # not the plain plan
    sub = "search" if "search" in argv else "calibrate"
    assert f"'{sub}' comes first: `gemma4 plan {sub} ...`" in err


PROJECT_DIR_PATHS = sorted(p for p, parser in PARSERS.items() if "--project-dir" in options(parser))


def test_every_command_that_reads_stacks_takes_project_dir() -> None:
    assert {p[0] for p in PROJECT_DIR_PATHS} == {
        "preview",
        "plan",
        "health",
        "bench",
        "promote",
        "mcp",
    }


@pytest.mark.parametrize("path", PROJECT_DIR_PATHS, ids=" ".join)
@pytest.mark.parametrize("folder", ["no project", "empty string", "a file", "missing"])
def test_project_dir_without_a_pulumi_project_is_refused(
    path: tuple[str, ...], folder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = {
        "no project": str(tmp_path),
        "empty string": "",
        "a file": str(ROOT / "Pulumi.l4.yaml"),
        "missing": str(tmp_path / "nowhere"),
    }[folder]
    assert main([*path, "--project-dir", given]) == 2
    err = capsys.readouterr().err
    assert "argument --project-dir" in err, err
    expected = {
        "no project": "holds no Pulumi.yaml",
        "empty string": "an empty path",
        "a file": "is not a folder",
        "missing": "is not a folder",
    }[folder]
    assert expected in err


def test_a_huge_project_dir_gives_a_short_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-s", "l4", "--project-dir", "x" * 120_000]) == 2
    assert len(capsys.readouterr().err) < 2000


def _metavar(action: argparse.Action) -> str:
    shown = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return re.sub(r",\.\.\.$", "", shown)


def test_one_option_name_has_one_metavar_across_commands() -> None:
    seen: dict[str, dict[str, list[str]]] = {}
    for path, parser in PARSERS.items():
        for option, action in options(parser).items():
            if action.nargs == 0:
                continue
            seen.setdefault(option, {}).setdefault(_metavar(action), []).append(" ".join(path))
    mixed = {o: uses for o, uses in seen.items() if len(uses) > 1}
    assert not mixed, mixed


def test_the_rate_has_one_set_of_names_wherever_it_is_taken() -> None:
    names = {"-r", "--requests-per-second", "--rate"}
    for path, parser in PARSERS.items():
        taken = names & set(options(parser))
        assert taken in (set(), names), (path, taken)
        if taken:
            assert len({options(parser)[n].dest for n in names}) == 1


#: An option in backticks after another command's name is that command's (`pulumi preview
#: --policy-pack-config`, `gemma4 bench run --out`), not one this command takes; so is
#: `python -m`'s.
_ANOTHER_COMMANDS = re.compile(r"`(?:pulumi|gemma4|vllm|gcloud)\b[^`]*`|\bpython -m\b")


def test_help_names_only_options_of_its_own_command() -> None:
    """A help text (an option's, the command's description or epilog) that sends the reader to
    an option the command lacks is a lie on screen (and in the commands reference, generated
    from the same parsers)."""
    wrong = []
    for path, parser in {(): build_parser(), **parsers()}.items():
        own = {o for a in parser._actions for o in a.option_strings}
        texts = {"description": parser.description, "epilog": parser.epilog}
        texts |= {"/".join(a.option_strings) or a.dest: a.help for a in parser._actions}
        for where, text in texts.items():
            text = _ANOTHER_COMMANDS.sub("", text or "")
            for named in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z](?![\w-]))", text):
                if named not in own:
                    wrong.append(f"gemma4 {' '.join(path)} ({where}): {named}")
    assert wrong == []


def test_the_reference_shows_each_default_as_the_parser_reads_it() -> None:
    """The commands reference's default column (docs/reference/commands.md, held to the
    generator by tests/test_docs.py) tells the parser's truth: `-` for a flag and for no default
    (never an empty string), and any other value typed after its option parses back to the
    default (a path inside the repository is shown relative to it)."""
    from tests.test_docs import gen_docs

    shown_default = gen_docs()._default
    for path, parser in parsers().items():
        for action in options(parser).values():
            shown, where = shown_default(action), (path, action.option_strings)
            if action.required:
                assert shown == "required", where
            elif action.nargs == 0 or action.default in (None, "", [], ()):
                assert shown == "-", where
            else:
                typed = shown.removeprefix("`").removesuffix("`")
                value = action.type(typed) if callable(action.type) else typed
                if isinstance(action.default, Path):
                    value = ROOT / str(value)
                assert value == action.default, (where, typed)


def test_timeout_seconds_means_one_thing() -> None:
    """`--timeout-seconds` is health's overall deadline (its old name, hidden); bench run's
    per-request timeout is `--request-timeout-seconds`, as health's."""
    users = [p for p, parser in PARSERS.items() if "--timeout-seconds" in options(parser)]
    assert users == []  # shown nowhere: health's is --deadline-seconds
    assert main(["bench", "run", "--url", "http://x", "--model", "m", "--out", "o",
                 "--timeout-seconds", "5"]) == 2  # fmt: skip
    for path in (("health",), ("bench", "run")):
        assert "--request-timeout-seconds" in {
            o for a in PARSERS[path]._actions for o in a.option_strings
        }


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("previwe", "preview"),
        ("bnech", "bench"),
        ("mpc", "mcp"),
        ("PREVIEW", "preview"),
        ("Plan", "plan"),
        (" health", "health"),
        ("BNECH", "bench"),
    ],
)
def test_a_mistyped_command_gets_a_suggestion(
    typed: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([typed]) == 2
    assert f"unknown command '{typed}'; did you mean '{meant}'?" in capsys.readouterr().err


def test_a_refused_connection_is_told_in_words(
    capsys: pytest.CaptureFixture[str], closed_port: int
) -> None:
    """Not aiohttp's `ssl:default` (named even for plain HTTP). No grace: the first refusal
    ends the check, long before the deadline (an hour, never waited for)."""
    port = closed_port
    argv = ["health", "--url", f"http://127.0.0.1:{port}", "--model", "m", "--json"]
    assert main([*argv, "--refused-grace-seconds", "0", "--deadline-seconds", "3600"]) == 1
    out = capsys.readouterr().out
    assert f"cannot connect to 127.0.0.1:{port}" in out and "ssl:default" not in out


#: Every command that takes a stack by name: its words (the name's place marked `{}`), the
#: option that takes the name, and whether the command also takes --stack-file.
STACK_COMMANDS = [
    (["preview", "-s", "{}"], "-s", True),
    (["plan", "-s", "{}"], "-s", True),
    (["plan", "calibrate", "not-a-run", "-s", "{}"], "-s", False),
    (
        ["plan", "search", "--rate", "1", "--ttft-ms", "500", "--write-stack", "{}"],
        "--write-stack",
        False,
    ),
    (["health", "-s", "{}"], "-s", False),
    (["bench", "run", "--out", "never-written", "-s", "{}"], "-s", False),
    (["bench", "gate", "not-a-run", "-s", "{}"], "-s", False),
    (["bench", "compare", "not-a-run", "--predict", "{}"], "--predict", False),
    (["promote", "--to", "rtx6000", "--from", "{}"], "--from", False),
    (["promote", "--from", "l4", "--to", "{}"], "--to", False),
    (["mcp", "-s", "{}"], "-s", False),
]


def _meant(stack: str, option: str, stack_file: bool) -> str:
    """The one line a slip gets: the stack in lowercase, the stack a stack file names (or the
    file itself with --stack-file, where the command takes it)."""
    file = f" (or --stack-file {stack})" if stack_file else ""
    return {
        "L4": "no stack 'L4'; did you mean 'l4'?",
        "Gke-L4": "no stack 'Gke-L4'; did you mean 'gke-l4'?",
        "Pulumi.l4.yaml": f"'Pulumi.l4.yaml' names a file: did you mean {option} l4{file}?",
        "./Pulumi.gke-l4.yml": f"'./Pulumi.gke-l4.yml' names a file: did you mean {option} "
        f"gke-l4{file}?",
        "/x/Pulumi.L4.yaml": f"'/x/Pulumi.L4.yaml' names a file: did you mean {option} l4{file}?",
        "stacks/mine.yaml": "'stacks/mine.yaml' names a file: did you mean --stack-file "
        "stacks/mine.yaml?"
        if stack_file
        else f"'stacks/mine.yaml' names a file; {option} takes a stack's name "
        "(Pulumi.<stack>.yaml)",
    }[stack]


@pytest.mark.parametrize(
    ("command", "option", "stack_file"),
    STACK_COMMANDS,
    ids=[" ".join(c[:-2] if c[-2].startswith("-") else c) for c, _, _ in STACK_COMMANDS],
)
@pytest.mark.parametrize(
    "stack",
    [
        "L4",
        "Gke-L4",
        "Pulumi.l4.yaml",
        "./Pulumi.gke-l4.yml",
        "/x/Pulumi.L4.yaml",
        "stacks/mine.yaml",
    ],
)
def test_a_stack_name_that_is_a_file_or_in_capitals_gets_did_you_mean(
    command: list[str],
    option: str,
    stack_file: bool,
    stack: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One line, before anything is read or asked of the pulumi CLI (exit 2), saying which
    stack (or option) the user likely meant."""
    argv = [stack if word == "{}" else word for word in command]
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    prog = " ".join(word for word in command[:2] if not word.startswith("-") and word != "{}")
    assert (out, err) == (
        "",
        f"gemma4 {prog}: error: {option}: {_meant(stack, option, stack_file)}\n",
    )
    assert not Path("never-written").exists()


def test_a_name_no_fix_makes_valid_gets_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-s", "l4_x"]) == 2
    err = capsys.readouterr().err
    assert "cannot become resource names" in err and "did you mean" not in err


@pytest.mark.parametrize(
    "stack", ["A" * 100_000, "Pulumi." + "a" * 100_000 + ".yaml", "x/" * 50_000, " " * 100_000]
)
def test_a_huge_stack_name_gets_a_short_message(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "-s", stack]) == 2
    err = capsys.readouterr().err
    assert len(err) < 1000 and "characters)" in err


@pytest.mark.parametrize(
    ("command", "option", "stack_file"),
    STACK_COMMANDS,
    ids=[" ".join(c[:-2] if c[-2].startswith("-") else c) for c, _, _ in STACK_COMMANDS],
)
def test_capitals_of_no_stack_here_get_the_stacks_not_a_guess(
    command: list[str], option: str, stack_file: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """`FOO` lowercased is no stack of this project either: the line names the stacks there
    instead of offering one that does not exist (a stack to write, `--write-stack`, is new:
    its lowercase is the name offered)."""
    if option == "--write-stack":
        assert main([w if w != "{}" else "FOO" for w in command]) == 2
        assert "did you mean 'foo'?" in capsys.readouterr().err
        return
    argv = ["FOO" if word == "{}" else word for word in command]
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert "did you mean" not in err, err
    assert f"{option}: no stack 'FOO' (stack names are lowercase); stacks here: " in err, err
    assert ", ".join(stack_names(ROOT)) in err


#: Slips a newline, a paste or a shell variable make: blanks around a name, `_` for `-`, both
#: with capitals. Each is answered with the project's stack it meant.
_NEAR_NAMES = {" l4": "l4", "l4 ": "l4", "l4\n": "l4", "gke_l4": "gke-l4", "GKE_L4 ": "gke-l4"}


@pytest.mark.parametrize(
    ("command", "option", "stack_file"),
    [c for c in STACK_COMMANDS if c[1] != "--write-stack"],
    ids=[" ".join(c[:-2]) for c, o, _ in STACK_COMMANDS if o != "--write-stack"],
)
@pytest.mark.parametrize("typed", list(_NEAR_NAMES))
def test_a_stack_name_with_blanks_or_underscores_gets_did_you_mean(
    command: list[str], option: str, stack_file: bool, typed: str, capsys
) -> None:
    argv = [typed if word == "{}" else word for word in command]
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    assert out == ""
    assert err.endswith(
        f": error: {option}: no stack {typed!r}; did you mean {_NEAR_NAMES[typed]!r}?\n"
    ), err


@pytest.mark.parametrize(
    ("command", "option", "stack_file"),
    [c for c in STACK_COMMANDS if c[1] != "--write-stack"],
    ids=[" ".join(c[:-2]) for c, o, _ in STACK_COMMANDS if o != "--write-stack"],
)
@pytest.mark.parametrize("typed", ["Pulumi.nosuch.yaml", "./Pulumi.nosuch.yaml", " nosuch"])
def test_a_slip_naming_no_stack_here_offers_none(
    command: list[str], option: str, stack_file: bool, typed: str, capsys
) -> None:
    """A stack file's name, or a name with blanks, whose stack the project does not have is not
    offered as `-s nosuch`: the line lists the stacks there (or offers the file itself where the
    command takes --stack-file)."""
    argv = [typed if word == "{}" else word for word in command]
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert f"{option} nosuch" not in err and "'nosuch'" not in err, err
    if stack_file and typed.endswith(".yaml"):
        assert f"did you mean --stack-file {typed}?" in err, err
    else:
        assert f"stacks here: {', '.join(stack_names(ROOT))}\n" in err, err


@pytest.mark.parametrize(
    ("command", "option"),
    [(c, o) for c, o, _ in STACK_COMMANDS if c[0] not in ("preview", "plan") or len(c) > 3],
)
@pytest.mark.parametrize(("typed", "said"), [("", "is empty"), (" ", "' ' is blank")])
def test_an_empty_stack_name_is_said_to_be_empty(
    command: list[str], option: str, typed: str, said: str, capsys
) -> None:
    """`-s "$STACK"` with the variable unset: the name is empty, not a request for --url nor a
    lecture on resource names."""
    argv = [typed if word == "{}" else word for word in command]
    assert main(argv) == 2, argv
    assert capsys.readouterr().err.endswith(f": error: {option}: the stack name {said}\n")


@pytest.mark.parametrize("command", ["preview", "plan", "health"])
def test_a_stack_name_with_a_slash_is_refused_naming_the_option(command: str, capsys) -> None:
    assert main([command, "-s", "l4/"]) == 2
    err = capsys.readouterr().err
    assert f"gemma4 {command}: error: -s: stack name 'l4/' cannot become resource names" in err


@pytest.mark.parametrize("command", ["preview", "plan"])
@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("l4", "-s l4"),
        ("GKE_L4", "-s gke-l4"),
        ("Pulumi.L4.yaml", "--stack-file Pulumi.l4.yaml"),
        ("nosuch", None),
        ("stacks/Pulumi.l4.yaml", None),
    ],
)
def test_a_stack_file_that_is_not_there_gets_what_was_meant(
    command: str, typed: str, meant: str | None, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--stack-file l4` (a stack's name) or a file's name in the wrong case: the one line names
    the stack or the file that is there; a name that fits nothing gets no guess."""
    monkeypatch.chdir(ROOT)
    if (ROOT / typed).exists():
        pytest.skip("a file system that ignores case finds the file")
    assert main([command, "--stack-file", typed]) == 2
    err = capsys.readouterr().err
    hint = f"; did you mean {meant}?" if meant else ""
    assert err == f"gemma4 {command}: error: --stack-file {typed}: no such file{hint}\n"


@pytest.mark.parametrize("command", ["preview", "plan"])
@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("a" * 5000, "(5000 characters)': File name too long"),
        ("a/" * 3000, "(6000 characters)': File name too long"),
        ("", "an empty path; name a stack file"),
    ],
)
def test_a_stack_file_path_the_system_cannot_look_up_gets_a_short_line(
    command: str, typed: str, said: str, capsys
) -> None:
    assert main([command, "--stack-file", typed]) == 2
    line = capsys.readouterr().err.splitlines()[-1]  # after the usage lines
    assert line.startswith(f"gemma4 {command}: error: argument --stack-file: ") and said in line
    assert len(line) < 200, line


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["bench", "RUN"], "unknown subcommand 'RUN'; did you mean 'run'?"),
        (["bench", "comapre"], "unknown subcommand 'comapre'; did you mean 'compare'?"),
        (["bench", "xyz"], "unknown subcommand 'xyz' (subcommands: run, compare, gate)"),
        (["plan", "SEARCH"], "unknown subcommand 'SEARCH'; did you mean 'search'?"),
        (["plan", "calibrat", "x"], "unknown subcommand 'calibrat'; did you mean 'calibrate'?"),
        (["plan", "L4"], "unknown subcommand 'L4'; did you mean -s l4?"),
        (["plan", "xyz"], "unknown subcommand 'xyz' (subcommands: search, calibrate)"),
    ],
)
def test_a_mistyped_subcommand_gets_a_suggestion(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """As an unknown command: one line naming what was meant, not argparse's `invalid
    choice`; `plan l4` (the stack without -s) gets -s."""
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith(f"gemma4 {argv[0]}: error: {said}"), line


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["preview", "l4"], "unexpected 'l4'; did you mean -s l4?"),
        (["health", "GKE_L4"], "unexpected 'GKE_L4'; did you mean -s gke-l4?"),
        (["mcp", "L4"], "unexpected 'L4'; did you mean -s l4?"),
    ],
)
def test_a_stack_given_without_s_gets_s(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """A command that takes the stack as `-s STACK` and no operand, given the stack bare: one
    line naming `-s`, before anything is read or started."""
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"gemma4 {argv[0]}: error: {said}"


def test_a_bare_word_that_names_no_stack_is_left_to_the_command(
    capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["preview", "nope"]) == 2
    assert "unrecognized arguments: nope" in capsys.readouterr().err
