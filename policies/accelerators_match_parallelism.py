"""accelerators-match-parallelism: every accelerator a resource asks for is one vLLM uses.

vLLM 0.27.1 uses tensor x pipeline x prefill-context parallel devices per data-parallel rank,
times its local ranks (`serving.launch.vllm_args.device_count`); the devices it is not told to
use stay idle and are billed all the same. Asking for more than the resource gives is refused
by `vllm-server-readable`; this policy refuses the other way round, with the count the
resource declares (`policies._devices`). A single-host TPU slice Pod takes every chip of its
node (GKE's "TPUs in GKE"), so it is held to its topology's chips.
"""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies import _k8s
from policies._config import resource_policy
from policies._server import read_workload, workload_of
from serving.launch.vllm_args import device_count

_ASKED = (
    "--tensor-parallel-size x --pipeline-parallel-size x --prefill-context-parallel-size x "
    "the local --data-parallel-size"
)


def _idle(available: int, used: int, source: str, where: str) -> str:
    return (
        f"{where}: vLLM is told to use {used} of the {available} accelerators the resource "
        f"asks for ({source}; {_ASKED} = {used}), so {available - used} stay idle and are "
        f"billed; ask for {used}, or set the parallel sizes so their product is {available}"
    )


def _tpu_topology_problems(args: ResourceValidationArgs) -> list[str]:
    selector = _k8s.node_selector(args.resource_type, args.props)
    topology = selector.get(_k8s.TPU_TOPOLOGY_LABEL)
    if not selector.get(_k8s.TPU_LABEL) or topology is None:
        return []
    chips = _k8s.tpu_chips(topology)
    workload = workload_of(args.resource_type, args.props)
    asked = [c.devices[0] for c in workload.containers if c.devices[0] is not None]
    total = sum(n for n in asked if n is not None)
    if chips is None or total == chips:
        return []
    return [
        f"the Pod selects a TPU slice of topology {topology} ({chips} chips per node) but its "
        f"containers ask for {total} google.com/tpu; a single-host slice's Pod asks for every "
        f"chip of its node (GKE's TPUs in GKE): ask for {chips}"
    ]


def validate_accelerators_match_parallelism(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    workload = workload_of(args.resource_type, args.props)
    reading = read_workload(workload)
    problems: list[str] = []
    for spec in workload.containers:
        where = f"container {spec.name!r}"
        servers = [s for s in reading.servers if s.where == where]
        counts = [device_count(s.args) for s in servers]
        if not servers or any(c is None for c in counts):
            continue
        available, source = spec.devices if spec.devices[0] is not None else workload.devices
        used = sum(c for c in counts if c is not None)
        if available is not None and used < available:
            problems.append(_idle(available, used, source, where))
    # The servers a machine's startup scripts start share the machine's devices.
    scripts = [s for s in reading.servers if s.where.startswith("startup script")]
    available, source = workload.devices
    script_counts = [device_count(s.args) for s in scripts]
    if scripts and available is not None and None not in script_counts:
        used = sum(c for c in script_counts if c is not None)
        if used < available:
            problems.append(_idle(available, used, source, scripts[0].where))
    if _k8s.is_kubernetes(args.resource_type) and reading.servers:
        problems += _tpu_topology_problems(args)
    for problem in problems:
        report_violation(f"{args.name}: {problem}.", None)


accelerators_match_parallelism = resource_policy(
    "accelerators-match-parallelism",
    "The accelerators a resource asks for equal the devices its vLLM servers are "
    "told to use (tensor x pipeline x context parallel x local data parallel), and a GKE TPU "
    "Pod asks for every chip of its slice's topology.",
    validate_accelerators_match_parallelism,
)
