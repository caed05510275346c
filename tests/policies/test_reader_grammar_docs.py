"""docs/reader-grammar.md tells the truth: its example scripts are read or refused as it says,
and the lists it gives are the reader's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from policies._server import read_servers
from serving.launch.vllm_argv import (
    CHECKPOINT_OPTIONS,
    CHOICE_OPTIONS,
    CODE_OPTIONS,
    DOCKER_OPTIONS,
    DTYPES,
    HARMLESS_OPTIONS,
    INT_OPTIONS,
    JUDGED_OPTIONS,
    LOAD_FORMATS,
    NO_HTTP_OPTIONS,
    REFUSED_OPTIONS,
    SPECULATIVE_FIELDS,
)
from serving.launch.vllm_env import ALLOWED_OTHER, ALLOWED_VLLM, REFUSED_FAMILIES, REFUSED_OTHER

DOC = (Path(__file__).resolve().parents[2] / "docs" / "reader-grammar.md").read_text()
BLOCKS = re.findall(r"```bash (script(?:-refused)?)\n(.*?)```", DOC, re.S)


def test_the_page_has_examples_of_both_kinds() -> None:
    assert {kind for kind, _ in BLOCKS} == {"script", "script-refused"}


@pytest.mark.parametrize(("kind", "script"), BLOCKS)
def test_example_scripts_are_read_or_refused_as_the_page_says(kind: str, script: str) -> None:
    props = {"acceleratorType": "v6e-1", "metadata": {"startup-script": script}}
    reading = read_servers("gcp:tpu/v2Vm:V2Vm", props)
    if kind == "script":
        assert reading.problems == [] and reading.servers
    else:
        assert reading.problems


def test_the_listed_variables_and_options_are_the_readers() -> None:
    section = DOC.split("## Environment variables", 1)[1].split("## ", 1)[0]
    accepted = section.split("accepted `VLLM_*` variables:", 1)[1].split(";\n- every", 1)[0]
    assert set(re.findall(r"`(VLLM_[A-Z_]+)`", accepted)) == ALLOWED_VLLM
    families = section.split("these families are refused", 1)[1].split(";\n- except", 1)[0]
    assert tuple(re.findall(r"`([A-Z0-9_]+)\*`", families)) == REFUSED_FAMILIES
    members = section.split("members of the families", 1)[1].split(";\n- refused", 1)[0]
    assert set(re.findall(r"`([A-Z_]+)`", members)) == ALLOWED_OTHER
    refused = section.split("- refused as well:", 1)[1]
    assert set(re.findall(r"`([A-Z_][A-Z0-9_]*)`", refused)) == set(REFUSED_OTHER)
    options = DOC.split("Refused options,", 1)[1].split("An option vLLM", 1)[0]
    named = set(re.findall(r"`--([a-z0-9-]+)`", options))
    assert named == set(CODE_OPTIONS) | {"load-format", "dtype"}
    dtypes, load_formats = options.split("other than", 2)[1:]
    assert set(re.findall(r"`([a-z_0-9]+)`", dtypes.split("(", 1)[0])) == DTYPES
    assert set(re.findall(r"`([a-z_]+)`", load_formats)) == LOAD_FORMATS


def _table(after: str) -> dict[str, str]:
    """The first Markdown table after `after`: its first column's option -> second column."""
    text = DOC.split(after, 1)[1]
    rows = re.findall(
        r"^\| `--([a-z0-9-]+)` \| (.*) \|$", text.split("\n\n|", 1)[1].split("\n\n", 1)[0], re.M
    )
    return dict(rows)


def test_every_decided_option_is_listed_with_its_decision() -> None:
    assert set(_table("Refused options, because")) == set(CODE_OPTIONS)
    assert set(_table("Refused because the server then serves no")) == set(NO_HTTP_OPTIONS)
    choices = _table("Judged by value")
    assert set(choices) == set(CHOICE_OPTIONS)
    for name, accepted in CHOICE_OPTIONS.items():
        assert set(re.findall(r"`([a-z0-9_]+)`", choices[name])) == accepted
    refused = _table("Flags and numbers refused when set")
    assert refused == {name: f"it {why}" for name, why in REFUSED_OPTIONS.items()}
    ranges = _table("Whole numbers judged by the reader")
    assert set(ranges) == set(INT_OPTIONS)
    for name, (lowest, highest) in INT_OPTIONS.items():
        assert ranges[name] == (str(lowest) if lowest == highest else f"{lowest} to {highest}")
    assert set(_table("Judged by a policy or by vLLM's start-up defaults")) == set(JUDGED_OPTIONS)
    assert set(_table("Judged against the served checkpoint")) == set(CHECKPOINT_OPTIONS)
    assert set(_table("Harmless: they name nothing")) == set(HARMLESS_OPTIONS)
    fields = DOC.split("`--speculative-config` fields other than", 1)[1].split("(the", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", fields)) == SPECULATIVE_FIELDS


def test_the_listed_docker_options_are_the_readers() -> None:
    listed = DOC.split("`docker run` options accepted:", 1)[1].split(";", 1)[0]
    assert set(re.findall(r"`(-[-a-z]+)`", listed)) == DOCKER_OPTIONS
