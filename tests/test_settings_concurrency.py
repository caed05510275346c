"""A Cloud Run instance takes as many requests as vLLM schedules at once: ``concurrency`` equals
``maxNumSeqs`` (its default), checked in one place, the settings."""

from __future__ import annotations

import pytest

from serving.config.settings import SettingsError, load_settings
from tests.pulumi_harness import render, stack_config

L4 = stack_config("l4")
RTX = stack_config("rtx6000")
TPU = stack_config("tpu-v6e1")


@pytest.mark.parametrize("stack", ["l4", "rtx6000"])
def test_shipped_gpu_stacks_agree(stack: str) -> None:
    settings = load_settings(stack_config(stack))
    assert settings.cloud_run.concurrency == settings.vllm.max_num_seqs
    assert settings.instance_concurrency == settings.vllm.max_num_seqs


@pytest.mark.parametrize(
    ("concurrency", "seqs", "said"),
    [
        (4, 8, "its other sequences stay idle, and the requests past it wait in Cloud Run"),
        (16, 8, "the requests past maxNumSeqs wait in vLLM's queue"),
        (1, 2, "wait in Cloud Run's queue"),
        (9, 8, "wait in vLLM's queue"),
    ],
)
def test_a_concurrency_that_differs_is_refused(concurrency: int, seqs: int, said: str) -> None:
    base = {**L4, "maxNumSeqs": seqs, "concurrency": concurrency}
    with pytest.raises(SettingsError) as info:
        load_settings(base)
    message = str(info.value)
    assert f"config key 'concurrency' ({concurrency}) differs from 'maxNumSeqs' ({seqs})" in message
    assert said in message and f"Set concurrency to {seqs} or remove it" in message


def test_concurrency_defaults_to_max_num_seqs_and_reaches_cloud_run() -> None:
    base = {k: v for k, v in RTX.items() if k != "concurrency"}
    settings = load_settings({**base, "maxNumSeqs": 12, "maxNumBatchedTokens": 8192})
    assert settings.cloud_run.concurrency is None and settings.instance_concurrency == 12
    rendered = render({**base, "maxNumSeqs": 12}, "rtx6000")
    (service,) = [r for r in rendered.resources if r.type == "gcp:cloudrunv2/service:Service"]
    assert service.inputs["template"]["maxInstanceRequestConcurrency"] == 12


def test_tpu_stacks_have_no_cloud_run_concurrency_to_check() -> None:
    assert load_settings({**TPU, "maxNumSeqs": 32}).vllm.max_num_seqs == 32
