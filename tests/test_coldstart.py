"""The cold start prediction: every phase sourced, its totals ordered, monotone in what it
reads and in the compile cache, within the bandwidth its path has, refused data named,
carried by `gemma4 plan` for every shipped stack, and the weights levers the evidence page
says are off, off in every rendered stack."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gemma4.plan_cli import main
from serving.capacity import coldstart
from serving.capacity.coldstart import (
    BASES,
    DATA_FILE,
    check_figures,
    checkpoint_bytes,
    cold_start,
    figures,
    file_cache,
    gke_reserved_memory_gib,
    has_model_bucket,
    predict,
    savings,
    spread,
    start_path,
)
from serving.capacity.plan import ROOT, load_stack_settings, stack_names
from serving.capacity.start_budget import waits, waits_text
from serving.config.inputs import read_json
from serving.config.settings import load_settings
from serving.render.vllm import VLLM_GID, VLLM_UID
from tests.contracts.variants import rendered
from tests.pulumi_harness import stack_config

STACKS = stack_names(ROOT)
GB = 10**9


@pytest.mark.parametrize("stack", STACKS)
def test_every_phase_of_every_stack_has_a_basis_a_source_and_ordered_figures(stack: str) -> None:
    block = cold_start(load_stack_settings(stack))
    names = [p["name"] for p in block["phases"]]
    assert names[:4] == ["capacity", "image", "engine init", "weights"]
    for p in block["phases"]:
        assert p["basis"] in BASES and p["source"].strip(), p
        assert 0 < p["seconds"] <= p["p90_s"], p
    # Each phase's median is less than the total's; the total's p90 is no more than every
    # phase at its p90 at once (the phases are drawn independently).
    assert sum(p["seconds"] for p in block["phases"]) <= block["p50_s"] + 1
    assert block["p50_s"] <= block["p90_s"] <= sum(p["p90_s"] for p in block["phases"]) + 1


@pytest.mark.parametrize("stack", STACKS)
def test_a_bigger_checkpoint_never_loads_faster(stack: str) -> None:
    path = start_path(load_stack_settings(stack))
    runs = [predict(path, size) for size in (1 * GB, 8 * GB, 9 * GB, 24 * GB, 60 * GB)]
    weights = [next(p["seconds"] for p in r["phases"] if p["name"] == "weights") for r in runs]
    assert weights == sorted(weights) and weights[0] < weights[-1]
    for figure in ("p50_s", "p90_s"):
        totals = [r[figure] for r in runs]
        assert totals == sorted(totals), figure


@pytest.mark.parametrize("stack", STACKS)
def test_a_compile_cache_hit_is_never_slower_than_cold(stack: str) -> None:
    settings = load_stack_settings(stack)
    path, size = start_path(settings), checkpoint_bytes(settings)
    cold, warm = predict(path, size), predict(path, size, cache_hit=True)
    assert warm["p50_s"] < cold["p50_s"] and warm["p90_s"] <= cold["p90_s"]
    for before, after in zip(cold["phases"], warm["phases"], strict=True):
        assert after["name"] == before["name"] and after["seconds"] <= before["seconds"]
    block = cold_start(settings)
    assert block["cold"] == {"p50_s": cold["p50_s"], "p90_s": cold["p90_s"]}
    assert block["cache_hit"] == {"p50_s": warm["p50_s"], "p90_s": warm["p90_s"]}
    # Every stack keeps its compile cache in the model bucket (the TPU VM copies it to and
    # from the node's disk): a scale-out starts with a hit.
    assert block["cache"] == "kept"
    assert block["p50_s"] == warm["p50_s"]


@pytest.mark.parametrize("stack", STACKS)
def test_no_stack_loads_its_weights_faster_than_its_path_carries(stack: str) -> None:
    """Physics: the weights at the fast end of their phase (its p10, the median / the spread)
    cross every link of the path (PCIe, the node's NIC, a gcsfuse mount) within its sourced
    ceiling."""
    settings = load_stack_settings(stack)
    path, block = start_path(settings), cold_start(settings)
    assert path.ceilings, "every path has a sourced ceiling"
    weights = next(p for p in block["phases"] if p["name"] == "weights")
    fastest_gb_per_s = (
        block["weight_bytes"] / GB / (weights["seconds"] / spread(figures()[path.loader]))
    )
    for key in path.ceilings:
        ceiling = figures()[key]
        assert ceiling.unit == "GB/s"
        assert fastest_gb_per_s <= ceiling.value, (key, fastest_gb_per_s)
    assert block["path_ceiling_gb_per_s"] == min(figures()[k].value for k in path.ceilings)


def test_every_figure_the_prediction_uses_is_in_the_data_file_with_its_conditions() -> None:
    used: set[str] = set()
    for stack in STACKS:
        path = start_path(load_stack_settings(stack))
        keys = {path.capacity, path.image, path.engine_init, path.loader, *path.ceilings}
        keys |= {path.compile_cold, path.compile_warm, *path.after_compile}
        used |= {k for k in keys if k is not None}
    f = figures()
    assert used <= set(f)
    for key in used:
        assert f[key].conditions.strip() and f[key].unit in ("s", "GB/s"), key
        if f[key].basis == "prior":
            assert "NOT FOUND" in f[key].conditions or "Prior" in f[key].conditions, key


def _data() -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(read_json(DATA_FILE))
    return data


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda e: e.pop("source"), "figure 'cuda-graphs': missing ['source']"),
        (lambda e: e.update(source=" "), "figure 'cuda-graphs': source is a non-empty text"),
        (lambda e: e.update(value=-17.0), "figure 'cuda-graphs': value is a number above 0"),
        (lambda e: e.update(value="17"), "figure 'cuda-graphs': value is a number above 0"),
        (lambda e: e.update(spread=0.5), "figure 'cuda-graphs': spread is a number above 1"),
        (lambda e: e.update(basis="guessed"), "basis 'guessed' is not one of measured, docum"),
        (lambda e: e.update(sourse="x"), "figure 'cuda-graphs': missing [], unknown ['sourse']"),
    ],
)
def test_the_data_file_refuses_a_bad_figure_by_name(edit: Any, said: str) -> None:
    data = _data()
    edit(data["figures"]["cuda-graphs"])
    with pytest.raises(ValueError, match=said.replace("[", r"\[").replace("]", r"\]")):
        check_figures(data)


def test_the_data_file_refuses_a_missing_spread_and_a_bad_shape() -> None:
    data = _data()
    del data["figures"]["spread-prior"]
    with pytest.raises(ValueError, match="no figure 'spread-prior'"):
        check_figures(data)
    with pytest.raises(ValueError, match="an object with 'figures'"):
        check_figures({"figures": []})


@pytest.mark.parametrize("stack", STACKS)
def test_plan_carries_the_block_in_json_and_prints_it_within_100_columns(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["-s", stack, "--json"]) in (0, 1)
    block = json.loads(capsys.readouterr().out)["cold_start"]
    settings = load_stack_settings(stack)
    assert block == json.loads(json.dumps({**cold_start(settings), "waits": waits(settings)}))
    assert main(["-s", stack]) in (0, 1)
    out = capsys.readouterr().out
    text = out[out.index("Cold start: stack") :].splitlines()
    assert all(len(line) <= 100 for line in text), text
    for p in block["phases"]:
        assert any(
            line.split()[: len(p["name"].split())] == p["name"].split() and p["basis"] in line
            for line in text
        ), p
    assert f"p50 {block['p50_s']:,} s, p90 {block['p90_s']:,} s" in out
    assert waits_text(block["waits"]) in text


@pytest.mark.parametrize("stack", STACKS)
def test_each_default_saves_time_against_the_stack_without_it(stack: str) -> None:
    settings = load_stack_settings(stack)
    listed = savings(settings)
    assert all(with_ == cold_start(settings)["p50_s"] < without for _, without, with_ in listed)
    assert any("compile cache" in what for what, _, _ in listed) == has_model_bucket(settings)


def test_a_memory_mapped_read_is_no_default_to_credit() -> None:
    lazy = load_settings({**stack_config("l4"), "safetensorsLoadStrategy": "lazy"})
    assert [what for what, _, _ in savings(lazy)] == ["compile cache kept in the bucket"]


#: The levers docs/cold-start-evidence.md ("Levers not taken, and why") weighs, each by what
#: would show it in a rendered stack.
EVIDENCE = ROOT / "docs" / "cold-start-evidence.md"
LEVERS_SECTION = "## Levers not taken, and why"
OWNER = (f"uid={VLLM_UID}", f"gid={VLLM_GID}")


def _vllm_pod(stack: str) -> dict[str, Any]:
    (pod,) = [
        r.inputs["spec"]["template"]
        for r in rendered(stack).resources
        if r.type == "kubernetes:apps/v1:Deployment" and r.inputs["metadata"]["name"] == "vllm"
    ]
    return dict(pod)


def _model_volume(pod_spec: dict[str, Any]) -> dict[str, Any]:
    (models,) = [v for v in pod_spec["volumes"] if v["name"] == "models"]
    return dict(models)


def test_the_evidence_page_names_each_lever() -> None:
    text = EVIDENCE.read_text()
    assert LEVERS_SECTION in text
    levers = text.split(LEVERS_SECTION, 1)[1]
    for lever in ("file cache with parallel downloads", "buffered reads", "Direct VPC egress"):
        assert lever in levers


@pytest.mark.parametrize("stack", ["l4", "gke-l4"])
def test_the_levers_the_evidence_page_says_are_off_are_off(stack: str) -> None:
    """Where the evidence page leaves them off, the model volume carries the owner contract and
    nothing else (no file cache, no parallel downloads, no buffered reads), a GKE Pod declares
    no gcsfuse cache volume, a Cloud Run service keeps Cloud Run's own egress, and the
    prediction reads the weights with the loader the command line asks for."""
    if stack.startswith("gke-"):
        spec = _vllm_pod(stack)["spec"]
        models = _model_volume(spec)
        options = tuple(models["csi"]["volumeAttributes"]["mountOptions"].split(","))
        assert set(models["csi"]["volumeAttributes"]) == {"bucketName", "mountOptions"}
        assert "gke-gcsfuse-cache" not in {v["name"] for v in spec["volumes"]}
    else:
        (template,) = [
            r.inputs["template"]
            for r in rendered(stack).resources
            if r.type == "gcp:cloudrunv2/service:Service"
        ]
        (models,) = [v for v in template["volumes"] if v["name"] == "models"]
        options = tuple(models["gcs"]["mountOptions"])
        assert "vpcAccess" not in template
    assert options == OWNER
    settings = load_stack_settings(stack)
    assert file_cache(settings) is None
    assert start_path(settings).loader == "load-fuse-prefetch"


def test_gke_tpu_reads_the_weights_through_gcsfuses_file_cache_in_memory() -> None:
    """gke-tpu-v6e's node holds the checkpoint in memory beside vLLM: the model volume turns on
    gcsfuse's file cache with parallel downloads, its size explicit and above the checkpoint,
    on a memory-backed `gke-gcsfuse-cache` volume larger still, the sidecar asking for that
    memory; the volume stays read-only with the owner contract, and the prediction uses the
    loader figure of that path."""
    settings = load_stack_settings("gke-tpu-v6e")
    cache = file_cache(settings)
    assert cache is not None
    template = _vllm_pod("gke-tpu-v6e")
    spec = template["spec"]
    models = _model_volume(spec)
    assert models["csi"]["readOnly"] is True
    options = models["csi"]["volumeAttributes"]["mountOptions"].split(",")
    assert options == [
        *OWNER,
        f"file-cache:max-size-mb:{cache.max_size_mib}",
        "file-cache:enable-parallel-downloads:true",
        "file-cache:cache-file-for-range-read:true",
    ]
    assert cache.max_size_mib * 2**20 >= checkpoint_bytes(settings)
    (volume,) = [v for v in spec["volumes"] if v["name"] == "gke-gcsfuse-cache"]
    assert volume["emptyDir"]["medium"] == "Memory"
    size_gib = int(volume["emptyDir"]["sizeLimit"].removesuffix("Gi"))
    assert size_gib * 1024 > cache.max_size_mib
    annotations = template["metadata"]["annotations"]
    memory = annotations["gke-gcsfuse/memory-request"]
    assert annotations["gke-gcsfuse/memory-limit"] == memory
    assert int(memory.removesuffix("Gi")) > size_gib
    # The node holds the vLLM container, the sidecar and what GKE reserves.
    shape = settings.gke_shape
    (vllm,) = spec["containers"]
    taken = int(vllm["resources"]["requests"]["memory"].removesuffix("Gi"))
    taken += int(memory.removesuffix("Gi"))
    assert taken + gke_reserved_memory_gib(shape.memory_gib) < shape.memory_gib
    path = start_path(settings)
    assert path.loader == "load-fuse-parallel"
    assert figures()[path.loader].basis == "derived"
    assert any(what.startswith("gcsfuse's parallel file cache") for what, _, _ in savings(settings))


def test_gke_reserves_memory_as_its_node_sizing_page_says() -> None:
    # 25 % of 4, 20 % of 4, 10 % of 8, 6 % of 112, 2 % of the rest, and 100 MiB for eviction.
    assert gke_reserved_memory_gib(32) == pytest.approx(1 + 0.8 + 0.8 + 0.96 + 0.1)
    assert gke_reserved_memory_gib(176) == pytest.approx(1 + 0.8 + 0.8 + 6.72 + 0.96 + 0.1)
    assert gke_reserved_memory_gib(2) == pytest.approx(0.5 + 0.1)


def test_no_file_cache_where_the_node_cannot_hold_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is the checkpoint and more, in memory: a checkpoint as large as what the node
    has left beside vLLM gets none, and the memory map's loader is predicted again."""
    settings = load_stack_settings("gke-tpu-v6e")
    shape = settings.gke_shape
    room = shape.memory_gib - gke_reserved_memory_gib(shape.memory_gib)
    room -= int(shape.pod_memory.removesuffix("Gi"))
    monkeypatch.setattr(coldstart, "checkpoint_bytes", lambda _: int(room * 2**30))
    assert file_cache(settings) is None
    assert start_path(settings).loader == "load-fuse-lazy"
