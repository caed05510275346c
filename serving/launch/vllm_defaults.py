"""What vLLM uses for an option a launch leaves out: the one place the policies read it from.

Pure: no Pulumi import. Two kinds of default:

- a value in vLLM's parser (`--gpu-memory-utilization` 0.92, `--kv-cache-dtype` auto, ...):
  read from the contract snapshot of the image's vLLM release (`serving/data/`, written by
  scripts/vllm_contract.py from vLLM itself); an image that names no release is read as the
  reader reads its arguments, with vLLM 0.27.1's snapshot; a release without a snapshot has
  no known default (None);
- `--max-num-batched-tokens` and `--max-num-seqs`, which the parser leaves None and vLLM
  decides at start-up from the hardware (vLLM 0.27.1, `vllm/engine/arg_utils.py`:
  `EngineArgs.get_batch_defaults` and `_set_default_max_num_seqs_and_batched_tokens_args`,
  for `vllm serve`'s OPENAI_API_SERVER usage context): :func:`start_up_batch_defaults`
  reproduces that rule on a catalogue GPU (its memory and name are known); on a TPU the
  platform plugin (`tpu_inference`) reports the chip name and memory the rule reads, so the
  value is not known here (None), and the policies that need it fail closed or skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.catalog.hardware import GIB, HardwareProfile, Platform
from serving.launch.vllm_args import SNAPSHOT, human_int
from serving.launch.vllm_contract import UnknownVersion, image_release, load

#: Options vLLM's parser leaves None and vLLM decides at start-up.
START_UP_OPTIONS = frozenset({"max-num-batched-tokens", "max-num-seqs"})
#: vLLM 0.27.1 `get_batch_defaults`: devices with this much memory (and not an A100) get the
#: larger defaults (the OPENAI_API_SERVER usage context's values below).
LARGE_DEVICE_BYTES = 70 * GIB
LARGE_DEFAULTS = (8192, 1024)  # (max_num_batched_tokens, max_num_seqs)
SMALL_DEFAULTS = (2048, 256)
_READER_RELEASE = ("vllm", SNAPSHOT.stem.rpartition("-")[2])


def parser_default(option: str, image: str | None) -> Any:
    """vLLM's parser default for `option` (canonical name, `gpu-memory-utilization`) in the
    image's vLLM release; None when the option has none or the release has no snapshot."""
    release = image_release(image) if image else None
    try:
        snapshot = load(*(release or _READER_RELEASE))
    except UnknownVersion:
        return None
    spec = snapshot.options.get("--" + option)
    return None if spec is None else spec["default"]


def _given_int(options: Mapping[str, Any], option: str) -> tuple[bool, int | None]:
    if option not in options:
        return False, None
    return True, human_int(options[option])


def start_up_batch_defaults(
    hardware: HardwareProfile | None,
    options: Mapping[str, Any],
    *,
    max_model_len: int | None,
    max_tokens_per_mm_item: int | None,
) -> tuple[int | None, int | None]:
    """(max_num_batched_tokens, max_num_seqs) as vLLM 0.27.1 sets them at start-up for a
    `vllm serve` with these options (a given value is kept), or None where it cannot be
    known here: not a GPU of the catalogue, or a model whose context length is unknown. The
    rule is vLLM's `_set_default_max_num_seqs_and_batched_tokens_args`, step for step."""
    gave_batched, batched = _given_int(options, "max-num-batched-tokens")
    gave_seqs, seqs = _given_int(options, "max-num-seqs")
    if gave_batched and gave_seqs:
        return batched, seqs
    if hardware is None or hardware.platform is Platform.TPU or max_model_len is None:
        return (batched if gave_batched else None), (seqs if gave_seqs else None)
    # vLLM compares torch's device name; the catalogue's names carry the same model name.
    large = (
        hardware.memory_bytes >= LARGE_DEVICE_BYTES and "a100" not in hardware.display_name.lower()
    )
    default_batched, default_seqs = LARGE_DEFAULTS if large else SMALL_DEFAULTS
    throughput = options.get("performance-mode") == "throughput"
    if not gave_batched:
        batched = default_batched * (2 if throughput else 1)
    if not gave_seqs:
        seqs = default_seqs * (2 if throughput else 1)
    if batched is None or seqs is None:
        return (batched if gave_batched else None), (seqs if gave_seqs else None)
    if not gave_batched:
        if options.get("enable-chunked-prefill") is False:
            batched = max(max_model_len, batched)
        # `_get_min_mm_batched_tokens` asks the model for one item of every modality it
        # supports (`--language-model-only` included); the catalogue records Gemma 4's answer.
        if max_tokens_per_mm_item is not None and max_tokens_per_mm_item > batched:
            batched = max_tokens_per_mm_item
        batched = min(seqs * max_model_len, batched)
    if not gave_seqs:
        seqs = min(seqs, batched)
    return batched, seqs
