"""The vLLM renderer: a real argument list, speculative config as one JSON argument."""

from __future__ import annotations

import json

from serving.config.settings import load_settings
from serving.render.vllm import CUDA_ENV, parse_args, render

BASE = {"hardware": "l4", "image": "vllm/vllm-openai:v0.27.1", "region": "us-east4"}
MTP = {
    "speculativeMethod": "mtp",
    "drafter": "google/gemma-4-12B-it-assistant",
    "numSpeculativeTokens": 4,
}


def args_for(**overrides: object) -> dict[str, object]:
    command = render(load_settings({**BASE, **overrides}), model_path="/m/t", port=8080)
    return parse_args(command.argv)


def test_speculative_config_is_one_argument_of_valid_json() -> None:
    command = render(
        load_settings({**BASE, **MTP}), model_path="/m/t", drafter_path="/m/d", port=8080
    )
    spec_args = [a for a in command.args if a.startswith("--speculative-config")]
    assert len(spec_args) == 1
    spec = json.loads(spec_args[0].split("=", 1)[1])
    assert spec == {"method": "mtp", "model": "/m/d", "num_speculative_tokens": 4}


def test_no_speculative_config_when_off() -> None:
    assert "speculative-config" not in args_for()


def test_settings_reach_the_arguments() -> None:
    args = args_for(
        maxModelLen=32768,
        gpuMemoryUtilization=0.95,
        kvCacheDtype="fp8",
        maxNumSeqs=8,
        maxNumBatchedTokens=8192,
        prefixCaching=False,
    )
    assert args["model"] == "/m/t"
    assert args["quantization"] == "compressed-tensors"
    assert args["max-model-len"] == "32768"
    assert args["gpu-memory-utilization"] == "0.95"
    assert args["kv-cache-dtype"] == "fp8"
    assert args["max-num-seqs"] == "8"
    assert args["max-num-batched-tokens"] == "8192"
    assert args["enable-prefix-caching"] is False
    assert args["disable-chunked-mm-input"] is True
    assert args["tool-call-parser"] == "gemma4" and args["enable-auto-tool-choice"] is True
    assert args["port"] == "8080"


def test_bf16_checkpoint_gets_no_quantization_flag() -> None:
    assert "quantization" not in args_for(model="google/gemma-4-12B-it")


def test_parsers_can_be_switched_off() -> None:
    args = args_for(toolCallParser="none", reasoningParser="none")
    assert "tool-call-parser" not in args and "enable-auto-tool-choice" not in args
    assert "reasoning-parser" not in args


def test_parse_args_reads_hand_written_forms() -> None:
    parsed = parse_args(
        [
            "vllm",
            "serve",
            "google/x",
            "--max-model-len",
            "4096",
            "--disable_chunked_mm_input",
            "--no-enable-prefix-caching",
        ]
    )
    assert parsed == {
        "model": "google/x",
        "max-model-len": "4096",
        "disable-chunked-mm-input": True,
        "enable-prefix-caching": False,
    }


def test_every_option_is_one_list_element() -> None:
    command = render(load_settings({**BASE, **MTP}), model_path="/m/t", port=8080)
    assert all(" " not in a for a in command.args if not a.startswith("--speculative-config"))
    assert command.command == ("vllm", "serve")
    assert command.command_line().startswith("vllm serve /m/t ")


def test_cuda_environment_from_the_reference() -> None:
    env = render(load_settings(BASE), model_path="/m/t", port=8080).env
    assert env == CUDA_ENV
    assert env["VLLM_USE_FLASHINFER_SAMPLER"] == "1"
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
