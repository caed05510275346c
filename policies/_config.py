"""Policy thresholds: each policy declares them in its config schema, with defaults.

The Pulumi CLI checks a pack config against the schema and applies its defaults; a validator
called directly (tests, `Configure` without that key) falls back to the same default in
:func:`setting`. Values are of the schema's type: the readers do not coerce strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ResourceValidation,
    ResourceValidationPolicy,
    StackValidation,
    StackValidationPolicy,
)


def schema(properties: Mapping[str, Mapping[str, Any]]) -> PolicyConfigSchema:
    """A config schema whose every property carries a `default` and a `description`."""
    for key, spec in properties.items():
        if "default" not in spec or "description" not in spec:
            raise ValueError(f"policy config property {key!r} needs a default and a description")
    return PolicyConfigSchema(properties={k: dict(v) for k, v in properties.items()})


def setting(args: Any, config_schema: PolicyConfigSchema, key: str) -> Any:
    """The configured value of `key`, or the schema's default."""
    config: Mapping[str, Any] = args.get_config() or {}
    if key in config and config[key] is not None:
        return config[key]
    return config_schema.properties[key]["default"]


def setting_float(args: Any, config_schema: PolicyConfigSchema, key: str) -> float:
    return float(setting(args, config_schema, key))


def setting_int(args: Any, config_schema: PolicyConfigSchema, key: str) -> int:
    return int(setting(args, config_schema, key))


def setting_bool(args: Any, config_schema: PolicyConfigSchema, key: str) -> bool:
    return bool(setting(args, config_schema, key))


def setting_strings(args: Any, config_schema: PolicyConfigSchema, key: str) -> list[str]:
    return [str(v) for v in setting(args, config_schema, key)]


def resource_policy(
    name: str,
    description: str,
    validate: ResourceValidation,
    *,
    advisory: bool = False,
    config: PolicyConfigSchema | None = None,
) -> ResourceValidationPolicy:
    """A policy of the pack: mandatory unless ``advisory`` (a cost hint, never a refusal)."""
    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=_level(advisory),
        config_schema=config,
    )


def stack_policy(
    name: str,
    description: str,
    validate: StackValidation,
    *,
    advisory: bool = False,
    config: PolicyConfigSchema | None = None,
) -> StackValidationPolicy:
    """A policy of the pack that judges the whole stack (see :func:`resource_policy`)."""
    return StackValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=_level(advisory),
        config_schema=config,
    )


def _level(advisory: bool) -> EnforcementLevel:
    return EnforcementLevel.ADVISORY if advisory else EnforcementLevel.MANDATORY
