"""pinned-image: containers run a fixed image version from an allowed registry.

Every container (init containers and sidecars too) and the vLLM image of a TPU launch. An image
is judged by its registry host (the policy's `registries`) and its pin (a version tag or a
sha256 digest), never by its name; one unknown at preview fails closed.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_strings
from policies._k8s import POD_TEMPLATES
from policies._props import get, read_field, read_list, read_path
from policies._resources import CLOUD_RUN_WORKLOADS, JOB, containers
from policies._server import vllm_servers
from serving.config.checks import check_pinned_image, image_registry

CONFIG = schema(
    {
        "registries": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["docker.io", "*-docker.pkg.dev", "ghcr.io", "gcr.io", "registry.k8s.io"],
            "description": "Registry hosts images may come from (`*` wildcards): Docker Hub "
            "(the official vLLM images), Artifact Registry (the stack's mirror, the "
            "monitoring collector), GitHub's registry (llm-d's endpoint picker) and Google's "
            "gcr.io (GKE's custom metrics adapter) and registry.k8s.io (Kubernetes' own).",
        },
    }
)


def _registry_problem(image: str, registries: list[str]) -> str | None:
    host = image_registry(image)
    if any(fnmatch.fnmatchcase(host, pattern) for pattern in registries):
        return None
    return (
        f"image {image!r} comes from {host}, not an allowed registry "
        f"({', '.join(registries) or 'none'}; the policy's 'registries')"
    )


def _unknown_containers(resource_type: str, props: Any) -> str | None:
    """What of the container list is unknown at preview (the list, or an element), or None."""
    if resource_type.startswith("kubernetes:"):
        return None  # the Kubernetes reader fails closed on unknown Pod templates itself
    template = ("template", "template") if resource_type == JOB else ("template",)
    value, unknown = read_path(props, *template, "containers")
    if unknown:
        return "its containers are"
    return "a container is" if read_list(value)[1] else None


def validate_pinned_image(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    registries = setting_strings(args, CONFIG, "registries")
    for server in vllm_servers(args.resource_type, args.props):
        if not server.where.startswith("startup script") or server.image is None:
            continue  # containers are checked below
        try:
            check_pinned_image(server.image)
        except ValueError as exc:
            report_violation(
                f"{args.name}: {server.where} runs vLLM in `docker run` {exc}, so a reboot "
                "cannot silently change vLLM (stack config key 'image').",
                None,
            )
        problem = _registry_problem(server.image, registries)
        if problem is not None:
            report_violation(f"{args.name}: {server.where} runs vLLM in {problem}.", None)
    if args.resource_type not in CLOUD_RUN_WORKLOADS and args.resource_type not in POD_TEMPLATES:
        return
    unknown = _unknown_containers(args.resource_type, args.props)
    if unknown is not None:
        report_violation(
            f"{args.name}: {unknown} not known at preview (an output of another resource), so "
            "where their images come from and their pins cannot be checked; give the "
            "containers and their images as literal values (stack config key 'image').",
            None,
        )
    for index, container in enumerate(containers(args.resource_type, args.props)):
        image, image_unknown = read_field(container, "image")
        name = get(container, "name") or f"#{index}"
        if image_unknown:
            # Fail closed, as the launch reader does for values unknown at preview: an image
            # not known yet may come from any registry, pinned or not.
            report_violation(
                f"{args.name}: container {name!r}: its image is not known at preview (an "
                "output of another resource), so where it comes from and its pin cannot be "
                "checked; give the image as a literal pinned reference from an allowed "
                f"registry ({', '.join(registries) or 'none'}; stack config key 'image').",
                None,
            )
            continue
        if get(container, "baseImageUri"):
            # Cloud Run's automatic base image updates replace the image's base layers with
            # a newer base under the same reference: what runs is not the pinned image.
            report_violation(
                f"{args.name}: container {name!r} sets baseImageUri, which enrolls it in "
                "Cloud Run's automatic base image updates: its base layers change under the "
                "pinned reference; remove baseImageUri.",
                None,
            )
        if not isinstance(image, str):
            continue
        problem = _registry_problem(image, registries)
        if problem is not None:
            report_violation(f"{args.name}: container {name!r}: {problem}.", None)
        try:
            check_pinned_image(image)
        except ValueError as exc:
            report_violation(
                f"{args.name}: container {name!r}: {exc} (stack config key 'image'), so a "
                "redeploy cannot silently change vLLM.",
                None,
            )


pinned_image = resource_policy(
    "pinned-image",
    "Cloud Run containers, Kubernetes Pod templates' containers and the vLLM "
    "containers of startup scripts use a pinned image (version tag or sha256 digest) from an "
    "allowed registry; an image not known at preview fails closed.",
    validate_pinned_image,
    config=CONFIG,
)
