"""The fields of azure-batch's request models, as REST names with their types, read from the models themselves.

The 15.1 models accept any key and send it (an unknown key goes out on the wire unnoticed), so checking
what a user writes into an override needs the models' own field list: each model class declares its fields
as ``rest_field`` descriptors, whose REST name and type annotation this module reads. It is the one place
that knows how azure-batch declares them; the tests pin what it finds.
"""

from __future__ import annotations

import datetime
import enum
import functools
import typing
from dataclasses import dataclass
from typing import Any

from azure.batch import models as batch_models

Kind = typing.Literal["model", "enum", "str", "int", "bool", "float", "duration", "datetime", "map", "any"]


@dataclass(frozen=True)
class SdkField:
    """One field of a request model: its REST name, what it holds, and whether it is a list of that."""

    rest_name: str
    python_name: str
    kind: Kind
    is_list: bool = False
    model: type | None = None
    enum_values: tuple[str, ...] = ()
    read_only: bool = False

    def describe(self) -> str:
        """``list of EnvironmentSetting``, ``one of: nonadmin, admin``: what the field takes, for messages."""
        what = {
            "model": self.model.__name__ if self.model is not None else "object",
            "enum": f"one of: {', '.join(self.enum_values)}",
            "str": "string",
            "int": "whole number",
            "bool": "true or false",
            "float": "number",
            "duration": "ISO 8601 duration (or timedelta)",
            "datetime": "ISO 8601 time",
            "map": "mapping of strings",
            "any": "value",
        }[self.kind]
        return f"list of {what}" if self.is_list else what


def _is_rest_field(value: Any) -> bool:
    return hasattr(value, "_rest_name_input") and hasattr(value, "_visibility")


def _evaluated(annotation: Any) -> Any:
    """The model a forward reference names. Python 3.10's get_type_hints leaves the SDK's ``list["_models.X"]``
    element a string (3.11 evaluates it): the name is looked up in ``azure.batch.models``, as the SDK means it."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return getattr(batch_models, annotation.rpartition(".")[2], Any)
    return annotation


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the element type, whether it is a list) of ``Optional[list[X]]``, ``Union[str, SomeEnum]``..."""
    is_list = False
    while True:
        annotation = _evaluated(annotation)
        origin = typing.get_origin(annotation)
        args = [_evaluated(arg) for arg in typing.get_args(annotation) if arg is not type(None)]
        if origin is typing.Union:
            # Union[str, SomeEnum] is how the SDK types an enum field: the enum is what it means.
            enums = [arg for arg in args if isinstance(arg, type) and issubclass(arg, enum.Enum)]
            inner = [arg for arg in args if arg is not str]
            annotation = enums[0] if enums else (inner[0] if len(inner) == 1 else args[0])
            continue
        if origin is list:
            is_list = True
            annotation = args[0]
            continue
        return annotation, is_list


def _kind(annotation: Any) -> tuple[Kind, type | None, tuple[str, ...]]:
    if typing.get_origin(annotation) is dict:
        return "map", None, ()
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return "enum", annotation, tuple(str(member.value) for member in annotation)
        # azure-batch keeps its models' base class private (mypy --strict: not exported)
        if issubclass(annotation, batch_models._models._Model):  # type: ignore[attr-defined, unused-ignore]
            return "model", annotation, ()
        simple: dict[type, Kind] = {
            bool: "bool",
            int: "int",
            float: "float",
            str: "str",
            datetime.timedelta: "duration",
            datetime.datetime: "datetime",
        }
        for python_type, kind in simple.items():
            if issubclass(annotation, python_type):
                return kind, None, ()
    return "any", None, ()


@functools.cache
def model_fields(model: type) -> dict[str, SdkField]:
    """Every field of ``model`` by REST name (``userIdentity``), read-only ones marked."""
    hints = typing.get_type_hints(model, localns={"_models": batch_models})
    fields: dict[str, SdkField] = {}
    for klass in reversed(model.__mro__):
        for python_name, descriptor in vars(klass).items():
            if python_name.startswith("_") or not _is_rest_field(descriptor):
                continue
            rest_name = descriptor._rest_name_input or python_name
            element, is_list = _unwrap(hints.get(python_name, Any))
            kind, model_type, values = _kind(element)
            fields[rest_name] = SdkField(
                rest_name=rest_name,
                python_name=python_name,
                kind=kind,
                is_list=is_list,
                model=model_type if kind == "model" else None,
                enum_values=values,
                read_only=descriptor._visibility == ["read"],
            )
    return fields


def is_sdk_model(value: Any) -> bool:
    return isinstance(value, batch_models._models._Model)  # type: ignore[attr-defined, unused-ignore]  # see _kind


def as_rest(value: Any) -> Any:
    """SDK models (anywhere inside mappings and lists) as their REST JSON dicts; everything else as it is."""
    if is_sdk_model(value):
        return value.as_dict()
    if isinstance(value, typing.Mapping):
        return {key: as_rest(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_rest(item) for item in value]
    return value
