"""Values that reach a script or argv carry no control characters or shell metacharacters."""

from __future__ import annotations

import json
from typing import Any

import pytest

from serving.config.checks import SCRIPT_KEYS, SettingsError
from serving.config.settings import config_keys, load_settings
from tests.pulumi_harness import stack_config

TPU = stack_config("tpu-v6e1")


def refused(**overrides: Any) -> str:
    with pytest.raises(SettingsError) as info:
        load_settings({**TPU, **overrides})
    return str(info.value)


CONTROL = ["\n", "\r", "\x00", "\x1b", "\x7f", "\x85", "\u2028", "\t", "\u200b", "\u202e", "\ufeff"]


@pytest.mark.parametrize("char", CONTROL)
@pytest.mark.parametrize("key", ["modelRevision", "servedModelName", "tpuRuntimeVersion", "image"])
def test_control_characters_are_refused(key: str, char: str) -> None:
    value = {"image": "vllm/vllm-tpu:v0.27.0"}.get(key, "main")
    message = refused(**{key: value + char + "x"})
    assert f"config key {key!r}" in message


@pytest.mark.parametrize(
    "value",
    ["main;reboot", "main && x", "$(id)", "`id`", "a b", "a|b", "a>b", "a'b", 'a"b', "a\\b",
     "*", "a#b", "{a,b}", "~root"],
)  # fmt: skip
def test_shell_metacharacters_are_refused_where_they_reach_a_script(value: str) -> None:
    message = refused(modelRevision=value)
    assert "config key 'modelRevision'" in message and "shell" in message


def test_control_characters_inside_json_lists_are_refused() -> None:
    message = refused(sourceRanges=json.dumps(["203.0.113.0/24\n0.0.0.0/0"]))
    assert "config key 'sourceRanges'" in message


def test_every_script_key_is_a_config_key() -> None:
    assert set(SCRIPT_KEYS) <= set(config_keys())


def test_ordinary_values_still_load() -> None:
    settings = load_settings({**TPU, "modelRevision": "0123abcd", "servedModelName": "gemma-4/it"})
    assert settings.model.model_revision == "0123abcd"
