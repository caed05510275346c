"""Cold start, phase by phase: from a scale-out decision to the first token a new instance
serves (pure; reads one package data file).

Nothing here was timed on this project's stacks. ``serving/data/coldstart.json`` holds every
figure with its basis (measured, documented, derived or prior), its source and the conditions
it was taken under; a phase with no published figure is a prior that says its reasoning. The
phases run one after another, so the total is their sum. Each phase is lognormal: its value is
the median and its p90 is the median times the spread of its basis (a measurement narrower
than a prior). The total's p50 and p90 are read from :data:`DRAWS` draws of the sum with a
fixed seed, so a prediction never changes between runs. docs/cold-start.md explains each phase.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from serving.catalog.hardware import Platform
from serving.config.inputs import read_json
from serving.config.platforms import BucketSettings
from serving.config.settings import Settings

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "coldstart.json"
BASES = ("measured", "documented", "derived", "prior")
_FIELDS = {"value", "unit", "basis", "source", "conditions"}
#: Draws of the summed phases, and their seed.
DRAWS, SEED = 4000, 0
#: The standard normal's 90th percentile: a p90/p50 ratio r is a lognormal's exp(1.2816 sigma).
_Z90 = 1.2815515655446004


@dataclass(frozen=True)
class Figure:
    """One figure of the data file. ``spread`` (p90 / p50) widens its basis's own, never
    narrows it."""

    key: str
    value: float
    unit: str
    basis: str
    source: str
    conditions: str
    spread: float | None = None


def check_figures(data: Any) -> dict[str, Figure]:
    """The data file's figures; a ValueError naming the figure and the field otherwise."""
    if not isinstance(data, dict) or not isinstance(data.get("figures"), dict):
        raise ValueError("coldstart.json: an object with 'figures': {key: figure}")
    out = {}
    for key, entry in data["figures"].items():
        where = f"coldstart.json figure {key!r}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: an object with {sorted(_FIELDS)}")
        missing, extra = _FIELDS - set(entry), set(entry) - _FIELDS - {"spread"}
        if missing or extra:
            raise ValueError(
                f"{where}: missing {sorted(missing)}, unknown {sorted(extra)}; "
                f"a figure has {sorted(_FIELDS)} and may have 'spread'"
            )
        for name, least in (("value", 0.0), ("spread", 1.0)):
            number = entry.get(name, least + 1)
            if isinstance(number, bool) or not isinstance(number, (int, float)) or number <= least:
                raise ValueError(f"{where}: {name} is a number above {least:g}, not {number!r}")
        if entry["basis"] not in BASES:
            raise ValueError(f"{where}: basis {entry['basis']!r} is not one of {', '.join(BASES)}")
        for name in ("unit", "source", "conditions"):
            if not isinstance(entry[name], str) or not entry[name].strip():
                raise ValueError(f"{where}: {name} is a non-empty text")
        out[key] = Figure(key, **entry)
    for basis in BASES:
        if f"spread-{basis}" not in out:
            raise ValueError(
                f"coldstart.json: no figure 'spread-{basis}' (p90/p50 of a {basis} phase)"
            )
    return out


@cache
def figures() -> dict[str, Figure]:
    return check_figures(read_json(DATA_FILE))


def spread(f: Figure) -> float:
    """p90 / p50 of a phase taken from ``f``: its basis's, or its own when wider."""
    return max(figures()[f"spread-{f.basis}"].value, f.spread or 1.0)


@dataclass(frozen=True)
class StartPath:
    """What a new instance goes through, as figure keys of the data file (None: a phase this
    path does not have)."""

    capacity: str | None
    image: str | None
    engine_init: str
    #: The loader's throughput (GB/s) and the bandwidth ceilings its path cannot exceed.
    loader: str
    ceilings: tuple[str, ...]
    #: Compile, cold and with a cache hit, and the GPU-only phases after it.
    compile_cold: str
    compile_warm: str
    after_compile: tuple[str, ...]
    #: vLLM's registry inspecting the model's class in a subprocess, cold and with its answer
    #: kept (VLLM_CACHE_ROOT/modelinfos); timed only on the CPU engine, so only its path has it.
    class_inspection: tuple[str, str] | None = None
    #: The API server's imports, timed apart from engine init only on the CPU engine.
    imports: str | None = None
    #: The phases after compile with a cache hit, where they differ (None: as cold).
    after_compile_warm: tuple[str, ...] | None = None


#: Room left on the node beside the vLLM container, the sidecar and GKE's reservation, for the
#: node's own DaemonSets (logging, metrics, the TPU or GPU device plugin). A judgement.
DAEMONSET_ROOM_GIB = 2.0
#: The cache's size over the checkpoint: gcsfuse will not cache a file that does not fit what
#: is left of `max-size-mb` (gcsfuse 2.4.0 release notes).
CACHE_MARGIN = 1.1


@dataclass(frozen=True)
class FileCache:
    """gcsfuse's file cache with parallel downloads on a GKE Pod's model volume, held in the
    Pod's memory (docs/cold-start-evidence.md, "Levers not taken, and why").

    gcsfuse downloads each file with several workers into its cache directory and serves the
    reads from there (`file-cache:enable-parallel-downloads`); the GCS FUSE CSI driver puts
    that directory on the Pod's `gke-gcsfuse-cache` volume when the Pod declares one, here an
    `emptyDir` of medium `Memory`. Its pages are charged to the sidecar that writes them, so
    the sidecar asks for them (`gke-gcsfuse/memory-request` and `-limit`)."""

    #: gcsfuse's `file-cache:max-size-mb`: the threshold it evicts against, above the checkpoint.
    max_size_mib: int
    #: The `gke-gcsfuse-cache` volume's `sizeLimit` (GiB): above `max_size_mib`, so gcsfuse
    #: evicts before the tmpfs is full.
    volume_gib: int
    #: The sidecar's memory request and limit (GiB): the cache and gcsfuse's own 1 GiB.
    sidecar_memory_gib: int


def gke_reserved_memory_gib(memory_gib: float) -> float:
    """What GKE keeps of a node's memory for the kubelet and the system: 25 % of the first 4
    GiB, 20 % of the next 4, 10 % of the next 8, 6 % of the next 112 and 2 % above 128, and
    100 MiB for eviction (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes)."""
    tiers = ((4.0, 0.25), (4.0, 0.20), (8.0, 0.10), (112.0, 0.06), (math.inf, 0.02))
    left, kept = memory_gib, 0.1
    for size, share in tiers:
        kept += min(left, size) * share
        left -= min(left, size)
        if left <= 0:
            break
    return kept


def file_cache(settings: Settings) -> FileCache | None:
    """The model volume's file cache on GKE, where the node's memory holds it beside the vLLM
    container: the checkpoint with a tenth more in gcsfuse's `max-size-mb`, a GiB more in the
    volume, a GiB more for the sidecar, and the node's reservation and DaemonSets left over.
    None elsewhere: Cloud Run has no disk but the instance's memory, a TPU VM copies the
    weights to its disk, and a GKE node that cannot hold it would evict the Pod."""
    if settings.deploy_platform != "gke":
        return None
    shape = settings.gke_shape
    pod = shape.pod_memory
    if not pod.endswith("Gi") or not pod[:-2].isdigit():
        raise ValueError(
            f"hardware.json gke_shapes {shape.hardware}: pod_memory {pod!r} is not 'NGi'"
        )
    # MiB and GiB, as gcsfuse's `max-size-mb` and Kubernetes quantities count them.
    max_size_mib = math.ceil(checkpoint_bytes(settings) * CACHE_MARGIN / 2**20)
    volume_gib = math.ceil(max_size_mib / 1024) + 1
    sidecar_gib = volume_gib + 1
    left = shape.memory_gib - gke_reserved_memory_gib(shape.memory_gib) - int(pod[:-2])
    if left - sidecar_gib < DAEMONSET_ROOM_GIB:
        return None
    return FileCache(max_size_mib, volume_gib, sidecar_gib)


def start_path(settings: Settings) -> StartPath:
    """The path of a stack's new instance: its platform, hardware, and how the rendered command
    line loads the weights (serving.render.vllm: the bucket's FUSE mount on Cloud Run and GKE
    with ``--load-format`` and ``--safetensors-load-strategy``, through gcsfuse's file cache
    where a GKE node's memory holds it (:func:`file_cache`); a copy to local disk on a TPU
    VM)."""
    platform, hw, v = settings.deploy_platform, settings.hardware, settings.vllm
    tpu = settings.profile.platform is Platform.TPU
    # The TPU VM copies the bucket's folders to its disk; the others mount the bucket.
    fuse = platform != "tpu-vm"
    if not fuse:
        loader = "load-gcs-copy"
    elif file_cache(settings) is not None:
        loader = "load-fuse-parallel"
    elif v.load_format == "runai_streamer":
        loader = "load-runai-fuse"
    elif v.safetensors_load_strategy in ("prefetch", "eager"):
        loader = "load-fuse-prefetch"
    else:
        loader = "load-fuse-lazy"
    # The links the weights cross: the GPU's PCIe, a gcsfuse mount, a node's documented NIC.
    ceilings = [f"pcie-{hw}"] if f"pcie-{hw}" in figures() else []
    if fuse:
        ceilings.append("gcsfuse-max")
    if platform != "cloud-run":
        ceilings.append("nic-tpu-v6e-host" if tpu else "nic-g2")
    return StartPath(
        capacity={
            "cloud-run": "instance-start-l4" if hw == "l4" else "instance-start-other",
            "gke": "gke-node",
            "tpu-vm": "tpu-queued-resource",
        }[platform],
        image="image-streaming"
        if platform == "cloud-run"
        else f"image-pull-{'tpu' if tpu else 'cuda'}",
        engine_init="engine-init-streamed" if platform == "cloud-run" else "engine-init-pulled",
        loader=loader,
        ceilings=tuple(ceilings),
        compile_cold="xla-compile-cold" if tpu else "torch-compile-cold",
        compile_warm="xla-compile-warm" if tpu else "torch-compile-warm",
        after_compile=() if tpu else ("cuda-graphs", "kv-profiling"),
    )


#: The engine's phases after the weights: their names by figure.
ENGINE_PHASES = {
    "torch-compile-cold": "torch.compile",
    "torch-compile-warm": "torch.compile",
    "xla-compile-cold": "XLA compile",
    "xla-compile-warm": "XLA compile",
    "cuda-graphs": "CUDA graphs",
    "kv-profiling": "KV profiling",
    "cpu-torch-compile-cold": "torch.compile",
    "cpu-torch-compile-warm": "torch.compile",
    "cpu-after-compile-cold": "warm-up and server start",
    "cpu-after-compile-warm": "warm-up and server start",
}
#: The CPU engine's path's phases for vLLM's model class inspection and the API server's imports.
CLASS_INSPECTION = "model class inspection"
IMPORTS = "imports"


def cpu_path() -> StartPath:
    """The start scripts/cold-start-check times: vLLM's CPU engine on one core of this project's
    CI machine serving engine-check's tiny Gemma 4 from local disk. No instance, image, CUDA
    graphs or KV profiling (the CPU engine sizes its KV cache by ``--kv-cache-memory-bytes``);
    the model class inspection, which a kept VLLM_CACHE_ROOT skips, is a phase of its own."""
    return StartPath(
        capacity=None,
        image=None,
        engine_init="cpu-engine-init",
        loader="load-cpu-local",
        ceilings=(),
        compile_cold="cpu-torch-compile-cold",
        compile_warm="cpu-torch-compile-warm",
        after_compile=("cpu-after-compile-cold",),
        after_compile_warm=("cpu-after-compile-warm",),
        class_inspection=("cpu-class-inspection-cold", "cpu-class-inspection-warm"),
        imports="cpu-imports",
    )


@cache
def _draws(phases: tuple[tuple[float, float], ...]) -> tuple[float, ...]:
    """:data:`DRAWS` sorted draws of the sum of lognormal phases, each (median, p90 / p50);
    the same draws for every call, so a phase made shorter never makes a total longer."""
    rng = random.Random(SEED)
    sigmas = [(median, math.log(ratio) / _Z90) for median, ratio in phases]
    return tuple(
        sorted(
            sum(median * math.exp(sigma * rng.gauss()) for median, sigma in sigmas)
            for _ in range(DRAWS)
        )
    )


def _totals(phases: tuple[tuple[float, float], ...]) -> tuple[int, int]:
    """p50 and p90 of the sum of lognormal phases, each (median, p90 / p50)."""
    draws = _draws(phases)
    return round(draws[DRAWS // 2]), round(draws[int(DRAWS * 0.9)])


def totals(phases: list[dict[str, Any]]) -> tuple[int, int]:
    """p50 and p90 of the sum of some of :func:`predict`'s phases (drawn as it draws them)."""
    f = figures()
    return _totals(tuple((p["seconds"], spread(f[p["figure"]])) for p in phases))


def _steps(path: StartPath, weight_bytes: int, cache_hit: bool) -> list[tuple[str, Figure, float]]:
    """The phases of a start on ``path`` in order: (name, figure, p50 seconds)."""
    f = figures()
    keys = [("capacity", path.capacity), ("image", path.image), (IMPORTS, path.imports)]
    steps = [(name, f[key], f[key].value) for name, key in keys if key is not None]
    steps.append(("engine init", f[path.engine_init], f[path.engine_init].value))
    if path.class_inspection is not None:
        inspection = f[path.class_inspection[cache_hit]]
        steps.append((CLASS_INSPECTION, inspection, inspection.value))
    steps.append(("weights", f[path.loader], weight_bytes / 1e9 / f[path.loader].value))
    compile_key = path.compile_warm if cache_hit else path.compile_cold
    after = path.after_compile_warm if cache_hit and path.after_compile_warm else path.after_compile
    steps += [(ENGINE_PHASES[k], f[k], f[k].value) for k in (compile_key, *after)]
    return steps


def _spreads(steps: list[tuple[str, Figure, float]]) -> tuple[tuple[float, float], ...]:
    return tuple((seconds, spread(figure)) for _, figure, seconds in steps)


class Band(NamedTuple):
    """A phase's or a total's p10, p50 and p90 in seconds (a lognormal phase's p10 is its
    median divided by its spread, as its p90 is the median times it)."""

    name: str
    p10: float
    p50: float
    p90: float


def bands(
    path: StartPath, weight_bytes: int, cache_hit: bool = False, scale: float = 1.0
) -> list[Band]:
    """Each phase's band on ``path``, unrounded, then the total's (named "total"; from the
    draws :func:`predict` reads). ``scale`` multiplies every phase: a machine that runs the
    same work ``scale`` times as long as the one the figures were taken on (the CPU path's
    figures are one CPU's; scripts/cold-start-check reads another's from its imports)."""
    if not (isinstance(scale, float | int) and 0.1 <= scale <= 10):
        raise ValueError(f"scale: a number from 0.1 to 10, not {scale!r}")
    steps = [(n, f, s * scale) for n, f, s in _steps(path, weight_bytes, cache_hit)]
    out = [Band(name, s / spread(f), s, s * spread(f)) for name, f, s in steps]
    draws = _draws(_spreads(steps))
    return [*out, Band("total", *(draws[int(DRAWS * q)] for q in (0.1, 0.5, 0.9)))]


def predict(path: StartPath, weight_bytes: int, cache_hit: bool = False) -> dict[str, Any]:
    """The phases (name, p50 ``seconds``, ``p90_s``, basis, source, figure) and the total's
    ``p50_s`` and ``p90_s`` of a new instance on ``path`` loading ``weight_bytes``."""
    steps = _steps(path, weight_bytes, cache_hit)
    p50, p90 = _totals(_spreads(steps))
    return {
        "phases": [
            {
                "name": name,
                "seconds": round(seconds, 1),
                "p90_s": round(seconds * spread(figure), 1),
                "basis": figure.basis,
                "source": figure.source,
                "figure": figure.key,
            }
            for name, figure, seconds in steps
        ],
        "p50_s": p50,
        "p90_s": p90,
    }


def checkpoint_bytes(settings: Settings) -> int:
    """What a new instance reads: the checkpoint's weights and its drafter's (model catalog)."""
    drafter = settings.model.drafter_card
    return settings.model.card.weight_bytes + (drafter.weight_bytes if drafter else 0)


def has_model_bucket(settings: Settings) -> bool:
    """The stack's platform has a model bucket (every platform's settings include one): the
    weights come from it and the compile cache is kept in it under its key
    (serving/render/compile_cache.py; on a TPU VM copied to and from the node's disk)."""
    return isinstance(settings.platform_settings, BucketSettings)


def cold_start(settings: Settings) -> dict[str, Any]:
    """The ``cold_start`` block of `gemma4 plan --json` and of each `plan search` answer: the
    phases and totals of a scale-out as the stack makes it (with its kept compile cache, a
    hit: the first instance of a configuration compiled), and both totals beside them."""
    path, size = start_path(settings), checkpoint_bytes(settings)
    cold, warm = predict(path, size), predict(path, size, True)
    kept = has_model_bucket(settings)
    loader = figures()[path.loader]
    return {
        **(warm if kept else cold),
        "cache": "kept" if kept else "none",
        "cold": {"p50_s": cold["p50_s"], "p90_s": cold["p90_s"]},
        "cache_hit": {"p50_s": warm["p50_s"], "p90_s": warm["p90_s"]},
        "weight_bytes": size,
        "loader": loader.key,
        "loader_gb_per_s": loader.value,
        "path_ceiling_gb_per_s": min((figures()[k].value for k in path.ceilings), default=None),
        "method": f"phases in sequence, each lognormal (p90 = p50 x its basis's spread); the "
        f"total's p50 and p90 from {DRAWS:,} draws, seed {SEED}",
    }


BEGIN = "<!-- BEGIN GENERATED COLD START TABLE by scripts/perf_docs.py: do not edit by hand -->"
END = "<!-- END GENERATED COLD START TABLE -->"


def render_markdown(stacks: dict[str, Settings]) -> str:
    """docs/cold-start.md's table: each stack's predicted p50, p90 and longest phase."""
    rows = [
        "| stack | compile cache | p50 | p90 | longest phase (p50) | first start of a "
        "configuration (p50 / p90) |",
        "| --- | --- | ---: | ---: | --- | ---: |",
    ]
    for name, settings in stacks.items():
        block = cold_start(settings)
        longest = max(block["phases"], key=lambda p: p["seconds"])
        cold = block["cold"]
        rows.append(
            f"| `{name}` | {block['cache']} | {block['p50_s']:,} s | {block['p90_s']:,} s | "
            f"{longest['name']}, {longest['seconds']:,.0f} s ({longest['basis']}) | "
            f"{cold['p50_s']:,} / {cold['p90_s']:,} s |"
        )
    return "\n".join([BEGIN, *rows, END])


FIGURES_BEGIN = (
    "<!-- BEGIN GENERATED COLD START FIGURES by scripts/perf_docs.py: do not edit by hand -->"
)
FIGURES_END = "<!-- END GENERATED COLD START FIGURES -->"


def render_figures() -> str:
    """docs/cold-start.md's sources: every figure of the data file, its basis and source."""
    rows = ["| figure | value | basis | source |", "| --- | ---: | --- | --- |"]
    for f in figures().values():
        links = "; ".join(f"<{s}>" if s.startswith("https://") else s for s in f.source.split("; "))
        rows.append(f"| `{f.key}` | {f.value:g} {f.unit} | {f.basis} | {links} |")
    return "\n".join([FIGURES_BEGIN, *rows, FIGURES_END])


def savings(settings: Settings) -> list[tuple[str, int, int]]:
    """What each of the stack's start-up defaults saves at the median: (the default, the p50
    of a scale-out without it, with it). A default the stack does not set is not listed."""
    path, size = start_path(settings), checkpoint_bytes(settings)
    hit = has_model_bucket(settings)
    now = predict(path, size, hit)["p50_s"]
    out = []
    if hit:
        out.append(("compile cache kept in the bucket", predict(path, size)["p50_s"], now))
    if path.loader in _READ_AHEAD:
        plain = predict(replace(path, loader="load-fuse-lazy"), size, hit)["p50_s"]
        out.append((f"{_READ_AHEAD[path.loader]}, not vLLM's memory map", plain, now))
    if path.loader == "load-gcs-copy":
        hub = predict(replace(path, loader="load-hf-hub"), size, hit)["p50_s"]
        out.append(("weights copied from the bucket, not downloaded from the Hub", hub, now))
    return out


#: The loaders that read a FUSE mount ahead, as the rendered command line asks for them.
_READ_AHEAD = {
    "load-fuse-parallel": "gcsfuse's parallel file cache",
    "load-fuse-prefetch": "`--safetensors-load-strategy=prefetch`",
    "load-runai-fuse": "`--load-format=runai_streamer`",
}


SAVINGS_BEGIN = (
    "<!-- BEGIN GENERATED COLD START SAVINGS by scripts/perf_docs.py: do not edit by hand -->"
)
SAVINGS_END = "<!-- END GENERATED COLD START SAVINGS -->"


def render_savings(stacks: dict[str, Settings]) -> str:
    """docs/cold-start.md's table: each stack's default, the p50 without it and with it."""
    rows = [
        "| stack | default | p50 without | p50 with | saved |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, settings in stacks.items():
        for what, without, with_ in savings(settings):
            rows.append(
                f"| `{name}` | {what} | {without:,} s | {with_:,} s | {without - with_:,} s |"
            )
    return "\n".join([SAVINGS_BEGIN, *rows, SAVINGS_END])
