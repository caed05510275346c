"""A Cloud Run instance takes as many requests as vLLM schedules at once: its concurrency is
``maxNumSeqs``, derived, never a key of its own; a stack that still sets one is told to remove
it."""

from __future__ import annotations

import pytest

from serving.config.checks import SettingsError
from serving.config.settings import load_settings
from tests.pulumi_harness import render, stack_config


@pytest.mark.parametrize("stack", ["l4", "rtx6000", "tpu-v6e1", "gke-l4"])
@pytest.mark.parametrize("value", [6, 7])
def test_a_concurrency_key_is_refused_on_every_platform(stack: str, value: int) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings({**stack_config(stack), "concurrency": value})
    assert str(info.value) == (
        "remove 'concurrency': Cloud Run's concurrency is maxNumSeqs, the sequences vLLM "
        "schedules at once"
    )


def test_cloud_run_concurrency_is_max_num_seqs() -> None:
    config = {**stack_config("rtx6000"), "maxNumSeqs": 12}
    assert load_settings(config).instance_concurrency == 12
    rendered = render(config, "rtx6000")
    (service,) = [r for r in rendered.resources if r.type == "gcp:cloudrunv2/service:Service"]
    assert service.inputs["template"]["maxInstanceRequestConcurrency"] == 12
