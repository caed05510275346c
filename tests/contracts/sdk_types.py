"""Check captured resource inputs against the Pulumi SDKs' own generated input types.

The oracle is the installed provider SDK (pulumi-gcp, pulumi-docker), generated from the same
schema as the provider: for a type token `gcp:cloudrunv2/service:Service` the resource's
`ServiceArgs` class, and for every nested object its `*Args` class in `_inputs.py`. From those
classes, not from this project's expectations, come:

- the engine's property names: `@pulumi.getter(name="camelCase")` on each property;
- nesting and JSON types: each getter's return annotation (`pulumi.Input['XArgs']`,
  `Sequence[...]`, `Mapping[str, ...]`, `int`, `str`, `bool`, `float`);
- required inputs: the `__init__` parameters without a default;
- enums: "Possible values are: `A`, `B`." in the property's docstring.

Numbers arrive from Pulumi's mocks as floats (protobuf `Struct`); an integer field accepts a
float with no fractional part.
"""

from __future__ import annotations

import collections.abc
import functools
import importlib
import inspect
import re
import typing
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any

#: Pulumi's marker for a secret value in serialized inputs (`pulumi.runtime.rpc`).
_SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")
_POSSIBLE = re.compile(r"Possible values are: ((?:`[^`]+`(?:, )?)+)\.")
_PROVIDERS = {"gcp": "pulumi_gcp", "docker": "pulumi_docker"}


@dataclass(frozen=True)
class Field:
    python_name: str
    engine_name: str
    shape: Any
    required: bool
    enum: tuple[str, ...] | None


@dataclass(frozen=True)
class ArgsType:
    name: str
    fields: dict[str, Field]  # by engine (camelCase) name


def args_class_for(type_token: str) -> type:
    """`gcp:cloudrunv2/service:Service` -> `pulumi_gcp.cloudrunv2.ServiceArgs`."""
    provider, module_path, resource = type_token.split(":")
    package = _PROVIDERS[provider]
    module_name = module_path.split("/")[0]
    module = importlib.import_module(
        package if module_name == "index" else f"{package}.{module_name}"
    )
    cls: type = getattr(module, f"{resource}Args")
    return cls


def _shape(annotation: Any, module: Any) -> Any:
    """Reduce a generated annotation to ('args', cls) | ('list', s) | ('map', s) | scalar type."""
    if isinstance(annotation, typing.ForwardRef):
        name = annotation.__forward_arg__
        if name.startswith("Output["):
            return None
        resolved = getattr(module, name, None)
        if resolved is None:
            resolved = getattr(importlib.import_module(f"{module.__name__}._inputs"), name)
        return ("args", resolved)
    if isinstance(annotation, str):
        return _shape(typing.ForwardRef(annotation), module)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, UnionType):
        for arg in typing.get_args(annotation):
            if arg is NoneType or typing.get_origin(arg) is collections.abc.Awaitable:
                continue
            shape = _shape(arg, module)
            if shape is not None:
                return shape
        return None
    if origin in (collections.abc.Sequence, list):
        return ("list", _shape(typing.get_args(annotation)[0], module))
    if origin in (collections.abc.Mapping, dict):
        return ("map", _shape(typing.get_args(annotation)[1], module))
    if annotation in (int, str, bool, float) or annotation is Any:
        return annotation
    if inspect.isclass(annotation) and annotation.__name__.endswith("Args"):
        return ("args", annotation)
    return Any  # e.g. pulumi.Asset / Archive: not checked further


@functools.cache
def describe(cls: type) -> ArgsType:
    """Read one generated `*Args` class."""
    module = importlib.import_module(cls.__module__)
    signature = inspect.signature(cls.__init__)  # type: ignore[misc]
    required = {
        name
        for name, param in signature.parameters.items()
        if param.kind is param.KEYWORD_ONLY and param.default is inspect.Parameter.empty
    }
    fields: dict[str, Field] = {}
    for python_name, attr in vars(cls).items():
        if not isinstance(attr, property) or attr.fget is None:
            continue
        engine = getattr(attr.fget, "_pulumi_name", None)
        if engine is None:
            continue
        annotation = attr.fget.__annotations__.get("return")
        doc = " ".join((attr.fget.__doc__ or "").split())
        possible = _POSSIBLE.search(doc)
        enum = tuple(re.findall(r"`([^`]+)`", possible[1])) if possible else None
        fields[engine] = Field(
            python_name, engine, _shape(annotation, module), python_name in required, enum
        )
    return ArgsType(cls.__name__, fields)


def input_errors(type_token: str, inputs: dict[str, Any]) -> list[str]:
    """Everything in one resource's captured inputs that its SDK's input types do not allow."""
    errors: list[str] = []
    _check(("args", args_class_for(type_token)), inputs, "", errors)
    return errors


def _check(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    label = path or "(inputs)"
    if isinstance(value, dict) and value.get(_SECRET_SIG[0]) == _SECRET_SIG[1]:
        value = value.get("value")  # a secret: check what it wraps
    if shape is Any or shape is None:
        return
    if isinstance(shape, tuple) and shape[0] == "args":
        described = describe(shape[1])
        if not isinstance(value, dict):
            errors.append(f"{label}: expected an object ({described.name}), got {value!r}")
            return
        for key, item in value.items():
            field = described.fields.get(key)
            if field is None:
                allowed = ", ".join(sorted(described.fields))
                errors.append(f"{path}.{key}".lstrip(".") + f": unknown input of "
                              f"{described.name} (allowed: {allowed})")  # fmt: skip
                continue
            where = f"{path}.{key}".lstrip(".")
            if field.enum is not None and isinstance(item, str) and item not in field.enum:
                errors.append(f"{where}: {item!r} is not one of {', '.join(field.enum)}")
            _check(field.shape, item, where, errors)
        for field in described.fields.values():
            if field.required and field.engine_name not in value:
                errors.append(
                    f"{path}.{field.engine_name}".lstrip(".")
                    + f": required input of {described.name} is missing"
                )
        return
    if isinstance(shape, tuple) and shape[0] == "list":
        if not isinstance(value, list):
            errors.append(f"{label}: expected a list, got {value!r}")
            return
        for index, item in enumerate(value):
            _check(shape[1], item, f"{path}[{index}]", errors)
        return
    if isinstance(shape, tuple) and shape[0] == "map":
        if not isinstance(value, dict):
            errors.append(f"{label}: expected a map, got {value!r}")
            return
        for key, item in value.items():
            _check(shape[1], item, f"{path}[{key!r}]", errors)
        return
    if shape is bool:
        ok = isinstance(value, bool)
    elif shape is int:
        ok = not isinstance(value, bool) and (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        )
    elif shape is float:
        ok = not isinstance(value, bool) and isinstance(value, (int, float))
    elif shape is str:
        ok = isinstance(value, str)
    else:
        ok = True
    if not ok:
        errors.append(f"{label}: expected {shape.__name__}, got {value!r}")
