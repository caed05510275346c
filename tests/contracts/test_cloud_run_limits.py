"""Cloud Run services and jobs, and the hardware catalog's probes, within Cloud Run v2's limits.

Some limits live only in the prose of the Cloud Run v2 discovery document (google-api-python-
client's bundled `run.v2.json`). Each one is encoded below next to the sentence it comes from,
and `test_each_quote_is_still_in_the_document` holds the encoding to that text: if a new
document changes the sentence, the test fails and the limit must be re-read.

Where two of Google's sources disagree, both are named:
- `GoogleCloudRunV2Probe.periodSeconds` says "Must be greater or equal than timeout_seconds",
  `timeoutSeconds` says "Must be smaller than period_seconds": the stricter one (timeout <
  period) is enforced, which satisfies both.
- `GoogleCloudRunV2ResourceRequirements.limits` says "The only supported values for CPU are
  '1', '2', '4', and '8'", but Cloud Run's GPU page (cloud.google.com/run/docs/configuring/
  services/gpu) requires at least 20 CPU and 80 GiB with an RTX PRO 6000: the discovery text
  predates that GPU. The RTX PRO 6000 service keeps the GPU page's minimum (the hardware
  catalog's `min_cpu`); every other CPU value must be in the document's list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from serving.catalog.hardware import HARDWARE, Platform, Probe
from tests.contracts.variants import VARIANTS, rendered
from tests.support import discovery

RUN = discovery.load("run", "v2")
SERVICE = "gcp:cloudrunv2/service:Service"
JOB = "gcp:cloudrunv2/job:Job"

#: (schema, field, the document's own words). Methods' parameters use the method id.
QUOTES: list[tuple[str, str, str]] = [
    ("GoogleCloudRunV2Probe", "initialDelaySeconds",
     "Minimum value is 0. Maximum value for liveness probe is 3600. "
     "Maximum value for startup probe is 240."),
    ("GoogleCloudRunV2Probe", "periodSeconds",
     "Minimum value is 1. Maximum value for liveness probe is 3600. "
     "Maximum value for startup probe is 240. Must be greater or equal than timeout_seconds."),
    ("GoogleCloudRunV2Probe", "timeoutSeconds",
     "Minimum value is 1. Maximum value is 3600. Must be smaller than period_seconds."),
    ("GoogleCloudRunV2Probe", "failureThreshold", "Minimum value is 1."),
    ("GoogleCloudRunV2Probe", "httpGet",
     "Exactly one of httpGet, tcpSocket, or grpc must be specified."),
    ("GoogleCloudRunV2HTTPGetAction", "port", "Must be in the range 1 to 65535."),
    ("GoogleCloudRunV2ContainerPort", "containerPort",
     "This must be a valid TCP port number, 0 < container_port < 65536."),
    ("GoogleCloudRunV2ContainerPort", "name", 'Allowed values are "http1" and "h2c".'),
    ("GoogleCloudRunV2Container", "name", "Name of the container specified as a DNS_LABEL"),
    ("GoogleCloudRunV2Container", "ports", "Only a single port can be specified."),
    ("GoogleCloudRunV2ResourceRequirements", "limits",
     "Only `memory`, `cpu` and `nvidia.com/gpu` keys in the map are supported."),
    ("GoogleCloudRunV2ResourceRequirements", "limits",
     "The only supported values for CPU are '1', '2', '4', and '8'."),
    ("GoogleCloudRunV2ResourceRequirements", "limits",
     "The only supported 'nvidia.com/gpu' value is '1'."),
    ("GoogleCloudRunV2VolumeMount", "mountPath", "Must not contain ':'."),
    ("GoogleCloudRunV2VolumeMount", "name", "This must match the Name of a Volume."),
    ("GoogleCloudRunV2Service", "labels",
     "Cloud Run API v2 does not support labels with `run.googleapis.com`, "
     "`cloud.googleapis.com`, `serving.knative.dev`, or `autoscaling.knative.dev` namespaces"),
    ("run.projects.locations.services.create", "serviceId",
     "It must begin with letter, and cannot end with hyphen; must contain fewer than 50 "
     "characters."),
]  # fmt: skip

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
RESERVED_LABEL_PREFIXES = (
    "run.googleapis.com", "cloud.googleapis.com", "serving.knative.dev", "autoscaling.knative.dev",
)  # fmt: skip
DOCUMENT_CPUS = {"1", "2", "4", "8"}
#: Pulumi's auto-name: the logical name plus "-" and 7 random hex characters.
AUTONAME_SUFFIX = 8


def _description(schema: str, field: str) -> str:
    if schema in RUN["schemas"]:
        text = RUN["schemas"][schema]["properties"][field]["description"]
    else:
        text = discovery.find_method(RUN, schema)["parameters"][field]["description"]
    return " ".join(str(text).split())


@pytest.mark.parametrize(("schema", "field", "quote"), QUOTES)
def test_each_quote_is_still_in_the_document(schema: str, field: str, quote: str) -> None:
    assert quote in _description(schema, field)


def probe_errors(probe: dict[str, Any], kind: str) -> list[str]:
    """A probe (engine names) against the Probe limits; `kind` is startup or liveness."""
    errors = []
    top = 240 if kind == "startup" else 3600
    delay = probe.get("initialDelaySeconds", 0)
    period = probe.get("periodSeconds", 10)
    timeout = probe.get("timeoutSeconds", 1)
    failures = probe.get("failureThreshold", 3)
    if not 0 <= delay <= top:
        errors.append(f"{kind} initialDelaySeconds {delay} outside 0-{top}")
    if not 1 <= period <= top:
        errors.append(f"{kind} periodSeconds {period} outside 1-{top}")
    if not 1 <= timeout <= 3600:
        errors.append(f"{kind} timeoutSeconds {timeout} outside 1-3600")
    if not timeout < period:
        errors.append(f"{kind} timeoutSeconds {timeout} is not smaller than periodSeconds {period}")
    if failures < 1:
        errors.append(f"{kind} failureThreshold {failures} below 1")
    actions = [a for a in ("httpGet", "tcpSocket", "grpc") if a in probe]
    if len(actions) != 1:
        errors.append(f"{kind} probe has {actions or 'no action'}: exactly one is required")
    port = (probe.get(actions[0]) or {}).get("port") if actions else None
    if port is not None and not 1 <= port <= 65535:
        errors.append(f"{kind} probe port {port} outside 1-65535")
    return errors


def _as_dict(probe: Probe) -> dict[str, Any]:
    return {
        "initialDelaySeconds": probe.initial_delay_seconds,
        "periodSeconds": probe.period_seconds,
        "timeoutSeconds": probe.timeout_seconds,
        "failureThreshold": probe.failure_threshold,
        "httpGet": {"path": "/health"},
    }


@pytest.mark.parametrize("key", sorted(HARDWARE))
def test_every_hardware_probe_is_within_the_startup_probe_limits(key: str) -> None:
    """The catalog's probe sizing, for every hardware (TPU too: the same numbers drive its
    post-deploy wait, and a TPU profile moved to Cloud Run must not break the limits)."""
    assert probe_errors(_as_dict(HARDWARE[key].startup_probe), "startup") == []


def test_the_probe_check_refuses_the_reference_l4_probe() -> None:
    reference = {"initialDelaySeconds": 180, "periodSeconds": 60, "timeoutSeconds": 60,
                 "failureThreshold": 10, "tcpSocket": {"port": 8080}}  # fmt: skip
    assert probe_errors(reference, "startup") == [
        "startup timeoutSeconds 60 is not smaller than periodSeconds 60"
    ]
    assert probe_errors({**reference, "timeoutSeconds": 5, "periodSeconds": 241}, "startup")
    assert probe_errors({**reference, "timeoutSeconds": 5, "httpGet": {}}, "startup")


def cloud_run_containers() -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(variant, resource name, template, container) for every service and job container."""
    for variant in VARIANTS:
        r = rendered(variant)
        for service in r.of_type(SERVICE):
            template = service.inputs["template"]
            for c in template["containers"]:
                yield variant, service.name, template, c
        for job in r.of_type(JOB):
            template = job.inputs["template"]["template"]
            for c in template["containers"]:
                yield variant, job.name, template, c


def container_errors(variant: str, template: dict[str, Any], c: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    for kind in ("startup", "liveness"):
        probe = c.get(f"{kind}Probe")
        if probe is not None:
            errors += probe_errors(probe, kind)
    if "name" in c and not DNS_LABEL.match(c["name"]):
        errors.append(f"container name {c['name']!r} is not a DNS label")
    port = c.get("ports")
    if port is not None:
        if not 0 < port.get("containerPort", 8080) < 65536:
            errors.append(f"containerPort {port['containerPort']} outside 1-65535")
        if port.get("name", "http1") not in ("http1", "h2c"):
            errors.append(f"port name {port['name']!r} is not http1 or h2c")
    limits = (c.get("resources") or {}).get("limits") or {}
    unknown = set(limits) - {"memory", "cpu", "nvidia.com/gpu"}
    if unknown:
        errors.append(f"unsupported limits keys {sorted(unknown)}")
    if limits.get("nvidia.com/gpu", "1") != "1":
        errors.append(f"nvidia.com/gpu {limits['nvidia.com/gpu']!r} is not '1'")
    cpu = limits.get("cpu")
    if cpu is not None and cpu not in DOCUMENT_CPUS:
        accelerator = (template.get("nodeSelector") or {}).get("accelerator")
        gpu_minimums = {
            str(h.min_cpu)
            for h in HARDWARE.values()
            if h.platform is Platform.CLOUD_RUN and h.accelerator == accelerator
        }
        if cpu not in gpu_minimums or cpu in DOCUMENT_CPUS:
            errors.append(f"cpu {cpu!r} is neither in {sorted(DOCUMENT_CPUS)} nor a GPU minimum")
    volumes = {v["name"] for v in template.get("volumes") or []}
    for mount in c.get("volumeMounts") or []:
        if ":" in mount["mountPath"]:
            errors.append(f"mountPath {mount['mountPath']!r} contains ':'")
        if mount["name"] not in volumes:
            errors.append(f"volume mount {mount['name']!r} matches no volume")
    return errors


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_cloud_run_container_is_within_the_documents_limits(variant: str) -> None:
    problems = [
        f"{name}: {e}"
        for v, name, template, c in cloud_run_containers()
        if v == variant
        for e in container_errors(v, template, c)
    ]
    assert problems == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_service_and_job_names_and_labels(variant: str) -> None:
    for resource in [*rendered(variant).of_type(SERVICE), *rendered(variant).of_type(JOB)]:
        name = resource.inputs.get("name") or resource.name
        longest = len(name) + (0 if "name" in resource.inputs else AUTONAME_SUFFIX)
        assert name[:1].isalpha() and not name.endswith("-"), name
        assert longest < 50, f"{name}: {longest} characters with Pulumi's suffix"
        labels = {**resource.inputs.get("labels", {})}
        assert not [k for k in labels if k.startswith(RESERVED_LABEL_PREFIXES)]


def test_the_container_check_refuses_near_misses() -> None:
    _, _, template, c = next(cloud_run_containers())
    assert container_errors("l4", template, c) == []
    bad = {**c, "name": "vLLM_1", "ports": {"name": "http2", "containerPort": 70000},
           "resources": {"limits": {"cpu": "3", "nvidia.com/gpu": "2", "gpu": "1"}},
           "volumeMounts": [{"name": "weights", "mountPath": "/mnt:models"}]}  # fmt: skip
    errors = "\n".join(container_errors("l4", template, bad))
    for expected in ("DNS label", "70000", "'http2'", "'gpu'", "'2'", "cpu '3'", "':'",
                     "'weights' matches no volume"):  # fmt: skip
        assert expected in errors


def _ints(value: Any) -> Any:
    """Pulumi's mocks carry numbers as floats; the REST API's int32 fields take integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


#: Pulumi input objects whose shape is the REST schema's, field for field.
SAME_SHAPE = {
    "startupProbe": "GoogleCloudRunV2Probe",
    "livenessProbe": "GoogleCloudRunV2Probe",
    "resources": "GoogleCloudRunV2ResourceRequirements",
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_objects_shaped_like_the_rest_api_validate_against_it(variant: str) -> None:
    """Where pulumi-gcp's input object is the REST object (probes, resources, volume mounts,
    node selector, revision scaling, Cloud Storage volume), it must also pass the run v2
    schema: names, types and the "Required." fields."""
    problems: list[str] = []
    for _, name, template, c in cloud_run_containers():
        if _ != variant:
            continue
        checks = [(key, schema, c[key]) for key, schema in SAME_SHAPE.items() if key in c]
        checks += [
            ("volumeMounts", "GoogleCloudRunV2VolumeMount", m) for m in c.get("volumeMounts", [])
        ]
        checks += [
            ("gcs", "GoogleCloudRunV2GCSVolumeSource", v["gcs"])
            for v in template.get("volumes", [])
            if "gcs" in v
        ]
        if "nodeSelector" in template:
            checks.append(
                ("nodeSelector", "GoogleCloudRunV2NodeSelector", template["nodeSelector"])
            )
        if "scaling" in template and "minInstanceCount" in template["scaling"]:
            checks.append(("scaling", "GoogleCloudRunV2RevisionScaling", template["scaling"]))
        for key, schema, value in checks:
            problems += [
                f"{name} {key}: {e}" for e in discovery.schema_errors(RUN, schema, _ints(value))
            ]
    assert problems == []


def test_the_rest_shape_check_refuses_near_misses() -> None:
    probe = {"httpGet": {"path": "/health", "port": 8080}, "timeout": 10, "periodSeconds": "60"}
    errors = discovery.schema_errors(RUN, "GoogleCloudRunV2Probe", probe)
    assert any("unknown field 'timeout'" in e for e in errors)
    assert any("periodSeconds: expected an integer" in e for e in errors)
    mount = discovery.schema_errors(RUN, "GoogleCloudRunV2VolumeMount", {"mountPath": "/m"})
    assert mount == ["name: required field of GoogleCloudRunV2VolumeMount is missing"]
