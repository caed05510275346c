"""Every shipped stack, and variants that switch on each optional resource, rendered once.

Shared by the contract tests: each rendering runs the real `__main__.py` under Pulumi's mocks
(tests/pulumi_harness.py) and keeps every resource input the program declared.
"""

from __future__ import annotations

import functools
from typing import Any

from tests.pulumi_harness import Rendered, render, stack_config

CLIENTS = ["203.0.113.0/24"]
MTP = {"speculativeMethod": "mtp", "drafter": "google/gemma-4-12B-it-assistant"}

#: name -> (stack file, overrides). Each optional resource is on in at least one variant.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "l4": ("l4", {}),
    "rtx6000": ("rtx6000", {}),
    "tpu-v6e1": ("tpu-v6e1", {}),
    # Firewall (sourceRanges) and replicas > 1 on TPU; MTP on TPU.
    "tpu-firewall-replicas": (
        "tpu-v6e1",
        # Replicas need a pinned commit (each node downloads the weights at boot).
        {
            "sourceRanges": CLIENTS,
            "replicas": 3,
            "modelRevision": "0123456789abcdef" * 2 + "01234567",
        },
    ),
    "tpu-mtp-spot": ("tpu-v6e1", {**MTP, "provisioning": "spot", "sourceRanges": CLIENTS}),
    # Invokers (and the health-check identity as one more invoker).
    "l4-invokers": (
        "l4",
        {
            "invokers": ["user:alice@example.com", "group:ml-team@example.com"],
            "healthCheckServiceAccount": "checker@test-project.iam.gserviceaccount.com",
            # Alert policies are declared only with a channel.
            "monitoringNotificationChannels": ["projects/test-project/notificationChannels/7"],
        },
    ),
    # Image mirror into Artifact Registry (pulumi-docker resources).
    "rtx6000-mirror": ("rtx6000", {"mirrorImage": True}),
    # MTP on L4 (a second download job for the drafter); more instances.
    "l4-mtp": (
        "l4",
        {**MTP, "maxNumSeqs": 4, "maxInstances": 3, "minInstances": 1},
    ),
}

#: GKE stacks (tests/contracts/test_gke_contracts.py): the cluster, node pools and Kubernetes
#: objects of both accelerator stacks; spot nodes and a public Gateway (with its client
#: ranges) on the L4 one.
GKE_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "gke-l4": ("gke-l4", {}),
    "gke-tpu-v6e": ("gke-tpu-v6e", {}),
    "gke-l4-public-spot": (
        "gke-l4",
        {
            "public": True,
            "sourceRanges": CLIENTS,
            "gatewayDomain": "llm.example.com",
            "nodeProvisioning": "spot",
        },
    ),
}


@functools.cache
def rendered(variant: str) -> Rendered:
    stack, overrides = {**VARIANTS, **GKE_VARIANTS}[variant]
    return render({**stack_config(stack), **overrides}, stack)
