"""Turning the server's JSON into the package's dataclasses.

Every result class is a dataclass whose fields are named after the JSON
members (a field whose name is a Python keyword carries the member's name
in its metadata, ``field(metadata={"key": "pass"})``). :func:`from_json`
fills the fields it knows, converting nested objects and lists of objects
to their dataclasses, and keeps the whole member dictionary in the
instance's ``raw`` field, so members that a later server adds are never
lost. Standard library only.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any, Dict, Type, TypeVar

T = TypeVar("T")

_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        module = sys.modules[cls.__module__]
        h = typing.get_type_hints(cls, vars(module))
        _HINTS[cls] = h
    return h


def _convert(tp: Any, value: Any) -> Any:
    """Converts one JSON value to the annotated type tp (best effort)."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _convert(args[0], value)
        return value
    if origin in (list, typing.List):
        (arg,) = typing.get_args(tp) or (Any,)
        if not isinstance(value, list):
            return value
        return [_convert(arg, v) for v in value]
    if origin in (dict, typing.Dict):
        args = typing.get_args(tp)
        if len(args) == 2 and isinstance(value, dict):
            return {k: _convert(args[1], v) for k, v in value.items()}
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_json(tp, value) if isinstance(value, dict) else value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def from_json(cls: Type[T], data: Dict[str, Any]) -> T:
    """Builds dataclass cls from the JSON object data.

    Members without a field are kept in ``raw`` only; fields without a
    member take their default. The instance's ``raw`` is data itself.
    """
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
    hints = _hints(cls)
    kwargs: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name == "raw":
            kwargs["raw"] = data
            continue
        if not f.init:
            continue
        key = f.metadata.get("key", f.name)
        if key in data:
            kwargs[f.name] = _convert(hints.get(f.name, Any), data[key])
    return cls(**kwargs)  # type: ignore[call-arg]
