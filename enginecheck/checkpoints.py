"""Tiny Gemma 4 checkpoints made here, with no download, for the real engine on a CPU; what each
folder under ``OUT_DIR`` holds is docs/engine-check.md's table ("The model"). Run inside the
engine's environment (torch, transformers, tokenizers, compressed-tensors)::

    ENGINE_PYTHON -m enginecheck.cli checkpoints OUT_DIR

The target's final norm is zero (the agreeing drafter's too): every logit is equal, so greedy
decoding picks token 0 (``<pad>``, kept as plain text) at every step, and every request
produces exactly the tokens asked, each with text, whatever the random weights; every layer
still runs (attention, MLP, KV cache), so the engine's work is real.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: Tokens in the trained vocabulary: 2.4 tokens per word of the benchmark's prompts (the
#: common English words of bench/load/prompts.py), as measured on this corpus.
VOCAB_SIZE = 2048
#: Gemma's fixed ids first, then Gemma 4's markers, in this order (ids 0, 1, 2, ...).
SPECIAL_TOKENS = (
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<mask>",
    "<|turn>",
    "<turn|>",
    "<|channel>",
    "<channel|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|tool_response>",
    "<tool_response|>",
    '<|"|>',
    "<|image>",
    "<image|>",
    "<|image|>",
    "<|audio>",
    "<audio|>",
    "<|audio|>",
    "<|video|>",
)
#: Tokens that are text, not control: ``<pad>`` decodes to its text (the constant-output
#: model generates it), so every generated token carries content.
PLAIN_TOKENS = frozenset({"<pad>"})

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|turn>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] == 'image' or part['type'] == 'image_url' %}<|image|>{% endif %}"
    "{% endfor %}{% endif %}<turn|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)

#: The 12B's shape (serving.catalog.models.GEMMA4_12B: 40 sliding layers of 8 KV heads x 256 and a
#: window of 1024, 8 full layers of 1 KV head x 512 with K = V, 131072 positions), shrunk.
SHAPE: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 6,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "num_global_key_value_heads": 1,
    "global_head_dim": 64,
    "attention_k_eq_v": True,
    "sliding_window": 1024,
    "max_position_embeddings": 131_072,
    "final_logit_softcapping": 30.0,
    "hidden_size_per_layer_input": 0,
    "vocab_size_per_layer_input": 0,
    "tie_word_embeddings": True,
}
VISION: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 32,
}
#: The MTP assistant: the target's text shape with one sliding and one full layer.
DRAFTER: dict[str, Any] = {
    **SHAPE,
    "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
}
#: Soft tokens per image (transformers' Gemma4Processor default `image_seq_length`).
IMAGE_SOFT_TOKENS = 280
SEED = 20261126
ROOT = Path(__file__).resolve().parent.parent


def corpus() -> list[str]:
    """This repository's Markdown, one line a sample (local text, no download)."""
    lines: list[str] = []
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        lines += [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines


def make_tokenizer(out: Path) -> dict[str, int]:
    """Train and save the tokenizer; the ids of the special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    if [ids[t] for t in SPECIAL_TOKENS[:3]] != [0, 1, 2]:
        raise SystemExit(f"tokenizer ids are not Gemma's: {ids}")
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", ids["<bos>"])]
    )
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    data = json.loads((out / "tokenizer.json").read_text())
    for added in data["added_tokens"]:
        if added["content"] in PLAIN_TOKENS:
            added["special"] = False
    (out / "tokenizer.json").write_text(json.dumps(data))
    config = {
        "tokenizer_class": "GemmaTokenizer",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "unk_token": "<unk>",
        # Not "<pad>": GemmaTokenizer would make it special, and the constant-output model's
        # token 0 would decode to nothing.
        "pad_token": "<mask>",
        "add_bos_token": True,
        "add_eos_token": False,
        "model_max_length": SHAPE["max_position_embeddings"],
        "chat_template": CHAT_TEMPLATE,
        "extra_special_tokens": {
            "image_token": "<|image|>",
            "boi_token": "<|image>",
            "eoi_token": "<image|>",
            "audio_token": "<|audio|>",
            "boa_token": "<|audio>",
            "eoa_token": "<audio|>",
        },
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return ids


def _text_config(shape: dict[str, Any], vocab: int, ids: dict[str, int]) -> dict[str, Any]:
    return {**shape, "vocab_size": vocab, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2}


def _zero_final_norm(model: Any) -> None:
    import torch

    norms = [(n, m) for n, m in model.named_modules() if n.endswith("model.norm") or n == "norm"]
    if not norms:
        norms = [
            (n, m)
            for n, m in model.named_modules()
            if n.endswith(".norm") and "vision" not in n and "layers" not in n
        ]
    if not norms:
        raise SystemExit("no final norm found to zero")
    with torch.no_grad():
        for _, module in norms:
            module.weight.zero_()


def _copy_files(src: Path, dst: Path) -> None:
    for path in src.iterdir():
        if path.is_file():
            (dst / path.name).write_bytes(path.read_bytes())


def make_target(out: Path, tokenizer_dir: Path, ids: dict[str, int]) -> Any:
    import torch
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration

    torch.manual_seed(SEED)
    vocab = VOCAB_SIZE
    config = Gemma4Config(
        text_config=_text_config(SHAPE, vocab, ids),
        vision_config=VISION,
        audio_config=None,
        boi_token_id=ids["<|image>"],
        eoi_token_id=ids["<image|>"],
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        boa_token_id=ids["<|audio>"],
        eoa_token_index=ids["<audio|>"],
        audio_token_id=ids["<|audio|>"],
        tie_word_embeddings=True,
    )
    config.architectures = ["Gemma4ForConditionalGeneration"]
    model = Gemma4ForConditionalGeneration(config).to(torch.bfloat16)
    _zero_final_norm(model)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    # Soft tokens per image, which vLLM's Gemma 4 reads from the vision config (the real
    # checkpoints carry it; this transformers release's config class does not).
    config_file = out / "config.json"
    data = json.loads(config_file.read_text())
    data["vision_config"]["default_output_length"] = IMAGE_SOFT_TOKENS
    config_file.write_text(json.dumps(data, indent=2))
    _copy_files(tokenizer_dir, out)
    _processor_files(out)
    return model


def _processor_files(out: Path) -> None:
    """The image processor's and the processor's configs, as transformers writes them."""
    from transformers import (
        AutoTokenizer,
        Gemma4AudioFeatureExtractor,
        Gemma4ImageProcessor,
        Gemma4Processor,
        Gemma4VideoProcessor,
    )

    processor = Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(),
        image_processor=Gemma4ImageProcessor(),
        tokenizer=AutoTokenizer.from_pretrained(out),
        video_processor=Gemma4VideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out)


def make_drafter(out: Path, tokenizer_dir: Path, ids: dict[str, int], *, agree: bool) -> None:
    import torch
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

    torch.manual_seed(SEED + (1 if agree else 2))
    config = Gemma4AssistantConfig(
        text_config=_text_config(DRAFTER, VOCAB_SIZE, ids),
        backbone_hidden_size=SHAPE["hidden_size"],
        use_ordered_embeddings=False,
        tie_word_embeddings=True,
    )
    config.architectures = ["Gemma4AssistantForCausalLM"]
    model = Gemma4AssistantForCausalLM(config).to(torch.bfloat16)
    if agree:
        _zero_final_norm(model)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    _copy_files(tokenizer_dir, out)


def make_w4a16(bf16_dir: Path, out: Path) -> None:
    """The bf16 target in compressed-tensors' pack-quantized w4a16 (groups of 128)."""
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationArgs,
        QuantizationConfig,
        QuantizationScheme,
        QuantizationStatus,
        apply_quantization_config,
    )
    from transformers import Gemma4ForConditionalGeneration

    model = Gemma4ForConditionalGeneration.from_pretrained(bf16_dir, dtype=torch.bfloat16)
    scheme = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(
            num_bits=4, type="int", symmetric=True, strategy="group", group_size=128
        ),
    )
    qconfig = QuantizationConfig(
        config_groups={"group_0": scheme},
        ignore=["lm_head", "re:.*vision.*", "re:.*embed_vision.*", "re:.*audio.*"],
        format="pack-quantized",
        quantization_status=QuantizationStatus.INITIALIZED,
    )
    apply_quantization_config(model, qconfig)
    with torch.no_grad():
        for _, module in model.named_modules():
            if not hasattr(module, "weight_scale"):
                continue
            weight = module.weight.float()
            rows, cols = weight.shape
            groups = weight.reshape(rows, cols // 128, 128)
            scale = groups.abs().amax(dim=-1).clamp(min=1e-8) / 7.0
            module.weight_scale.data = scale.to(module.weight_scale.dtype)
            if hasattr(module, "weight_zero_point"):
                module.weight_zero_point.data.zero_()
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format="pack-quantized")
    compressor.compress_model(model)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    compressor.update_config(str(out))
    for path in bf16_dir.iterdir():
        if path.is_file() and not path.name.endswith(".safetensors") and path.name != "config.json":
            (out / path.name).write_bytes(path.read_bytes())


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m enginecheck.cli checkpoints OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    tokenizer_dir = out / "tokenizer"
    ids = make_tokenizer(tokenizer_dir)
    make_target(out / "bf16", tokenizer_dir, ids)
    make_w4a16(out / "bf16", out / "w4a16")
    make_drafter(out / "mtp", tokenizer_dir, ids, agree=False)
    make_drafter(out / "mtp-agree", tokenizer_dir, ids, agree=True)
    print(f"checkpoints written under {out}")
    return 0
