"""JSON round trip for the frozen model classes (query model, pattern IR, expressions).

Every node class is registered under a ``"type"`` discriminator with :func:`node`. Encoding walks
dataclass fields; decoding is driven by the field annotations, so tuples, enums, optional fields
and nested nodes come back as the same frozen objects (``from_json(to_json(x)) == x``).
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import json
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from dfs_cer.errors import DfsCerError

T = TypeVar("T")

_REGISTRY: dict[str, type[Any]] = {}
_HINTS: dict[type[Any], dict[str, Any]] = {}


class SerdeError(DfsCerError):
    """A JSON document does not describe a valid model object."""


def node(type_name: str) -> Callable[[type[T]], type[T]]:
    """Register a frozen dataclass under ``type_name`` for JSON round trips."""

    def register(cls: type[T]) -> type[T]:
        if type_name in _REGISTRY and _REGISTRY[type_name] is not cls:
            raise ValueError(f"duplicate serde type name: {type_name}")
        _REGISTRY[type_name] = cls
        cls.__serde_type__ = type_name  # type: ignore[attr-defined]
        return cls

    return register


def _hints(cls: type[Any]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def encode(value: Any) -> Any:
    """Encode a model object (or a value inside one) as JSON-compatible data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = getattr(type(value), "__serde_type__", None)
        if name is None:
            raise SerdeError(f"{type(value).__name__} is not a registered model class")
        out: dict[str, Any] = {"type": name}
        for f in dataclasses.fields(value):
            out[f.name] = encode(getattr(value, f.name))
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal):  # exact: as text, never through a double
        return {"type": "decimal", "value": str(value)}
    raise SerdeError(f"cannot encode {type(value).__name__} value {value!r}")


def decode(data: Any, annotation: Any = Any) -> Any:
    """Decode JSON data into model objects, guided by ``annotation``."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = get_args(annotation)
        if data is None and type(None) in options:
            return None
        non_none = [o for o in options if o is not type(None)]
        if len(non_none) == 1:
            return decode(data, non_none[0])
        return decode(data, Any)
    if origin is tuple:
        if not isinstance(data, list):
            raise SerdeError(f"expected a list, got {data!r}")
        args = get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(v, args[0]) for v in data)
        if len(args) != len(data):
            raise SerdeError(f"expected {len(args)} items, got {len(data)}")
        return tuple(decode(v, a) for v, a in zip(data, args, strict=True))
    if origin is typing.Literal:
        if data not in get_args(annotation):
            raise SerdeError(f"expected one of {get_args(annotation)}, got {data!r}")
        return data
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        try:
            return annotation(data)
        except ValueError:
            raise SerdeError(f"{data!r} is not a valid {annotation.__name__}") from None
    if isinstance(data, dict) and data.get("type") == "decimal":
        try:
            return decimal.Decimal(str(data.get("value")))
        except decimal.InvalidOperation:
            raise SerdeError(f"not a decimal: {data!r}") from None
    if isinstance(data, dict):
        if "type" not in data:
            raise SerdeError(f"object without a 'type' discriminator: {data!r}")
        cls = _REGISTRY.get(data["type"])
        if cls is None:
            raise SerdeError(f"unknown model type {data['type']!r}")
        hints = _hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                if f.default is not dataclasses.MISSING:
                    continue
                if f.default_factory is not dataclasses.MISSING:
                    continue
                raise SerdeError(f"{data['type']} is missing field {f.name!r}")
            kwargs[f.name] = decode(data[f.name], hints[f.name])
        return cls(**kwargs)
    if isinstance(data, list):
        return tuple(decode(v, Any) for v in data)
    return data


def to_json(value: Any, *, indent: int | None = None) -> str:
    """Serialize a model object as JSON text (keys in field order)."""
    return json.dumps(encode(value), indent=indent, ensure_ascii=False)


#: the deepest JSON document accepted (a query model is far shallower; deeper input is refused
#: before the recursive parser sees it)
MAX_JSON_DEPTH = 600


def _json_depth(text: str) -> int:
    """Nesting depth of ``[``/``{`` outside strings, without recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def from_json(text: str | bytes) -> Any:
    """Parse JSON text produced by :func:`to_json` back into model objects."""
    raw = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    if _json_depth(raw) > MAX_JSON_DEPTH:
        raise SerdeError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SerdeError(f"not valid JSON: {exc}") from exc
    try:
        return decode(data, Any)
    except RecursionError:
        raise SerdeError("JSON nested too deeply") from None
