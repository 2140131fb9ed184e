"""Python types as JSON Schema, and JSON values back as those types, for structured output.

Covers what a final answer is made of: ``str``, ``int``, ``float``, ``bool``, ``None``,
``list[T]``, ``tuple[T, ...]`` and fixed tuples, ``dict[str, T]``, ``Literal[...]``, ``Enum``
classes, unions (``T | None``), ``Any``, and attrs classes, dataclasses and ``TypedDict``s
(nested freely, not recursive). An object's schema lists its fields as properties, those
without a default as ``required``, and allows no other property.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import attrs

from hooks import JSONValue

__all__ = ["check_schema", "convert", "schema_of"]

_PRIMITIVES: Mapping[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def check_schema(schema: Mapping[str, JSONValue]) -> None:
    """Raise ``ValueError`` when ``schema`` is not a valid JSON Schema (its own metaschema)."""
    import jsonschema  # here: `import harness` stays fast (issue 24)

    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise ValueError(f"output_schema is not a valid JSON Schema: {exc.message}") from None


def schema_of(tp: Any) -> dict[str, JSONValue]:
    """The JSON Schema of values of type ``tp`` (see the module docstring).

    Raises:
        TypeError: a type not covered (a set, a class that is no attrs class, dataclass or
            TypedDict, a recursive class), or a dict whose keys are not ``str``.
    """
    return _schema(tp, ())


def _schema(tp: Any, seen: tuple[Any, ...]) -> dict[str, JSONValue]:
    if tp is Any:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    if tp in _PRIMITIVES:
        return {"type": _PRIMITIVES[tp]}
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema(a, seen) for a in args]}
    if origin is list or tp is list:
        return {"type": "array", "items": _schema(args[0], seen) if args else {}}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema(args[0], seen)}
        return {
            "type": "array",
            "prefixItems": [_schema(a, seen) for a in args],
            "items": False,
            "minItems": len(args),
        }
    if origin is dict or tp is dict:
        if args and args[0] is not str:
            raise TypeError(f"output_schema: a dict's keys must be str (JSON), not {args[0]!r}")
        return {"type": "object", "additionalProperties": _schema(args[1], seen) if args else {}}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [member.value for member in tp]}
    fields = _fields(tp) if isinstance(tp, type) else None
    if fields is not None:
        if tp in seen:
            raise TypeError(f"output_schema: {tp.__name__} contains itself (recursive)")
        properties: dict[str, JSONValue] = {}
        required: list[JSONValue] = []
        for name, hint, has_default in fields:
            properties[name] = _schema(hint, (*seen, tp))
            if not has_default:
                required.append(name)
        return {
            "type": "object",
            "title": tp.__name__,
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
    raise TypeError(
        f"output_schema: {tp!r} is not a JSON type this converts (str, int, float, bool, None, "
        "list, tuple, dict[str, T], Literal, Enum, unions, attrs classes, dataclasses, "
        "TypedDict), nor a JSON Schema dict"
    )


def _fields(tp: type) -> list[tuple[str, Any, bool]] | None:
    """``(JSON name, type, has a default)`` of each field of an attrs class, dataclass or
    TypedDict; None for any other class."""
    if attrs.has(tp):
        hints = get_type_hints(tp)
        return [
            (f.alias, hints.get(f.name, Any), f.default is not attrs.NOTHING)
            for f in attrs.fields(tp)
            if f.init
        ]
    if dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp)
        return [
            (
                f.name,
                hints.get(f.name, Any),
                f.default is not dataclasses.MISSING
                or f.default_factory is not dataclasses.MISSING,
            )
            for f in dataclasses.fields(tp)
            if f.init
        ]
    if typing.is_typeddict(tp):
        hints = get_type_hints(tp)
        required_keys: frozenset[str] = getattr(tp, "__required_keys__", frozenset(hints))
        return [(name, hint, name not in required_keys) for name, hint in hints.items()]
    return None


def convert(value: Any, tp: Any) -> Any:
    """``value`` (JSON, already valid against :func:`schema_of` ``(tp)``) as a ``tp``:
    attrs classes and dataclasses built from their fields, enums from their values, tuples
    as tuples, a union's first member the value is valid for."""
    if tp is Any or tp is None or tp is type(None):
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in _PRIMITIVES:
        return value
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        return value
    if origin in (Union, types.UnionType):
        import jsonschema

        for member in args:
            validator = jsonschema.validators.validator_for({})(_schema(member, ()))
            if validator.is_valid(value):
                return convert(value, member)
        return value
    if origin is list or tp is list:
        return [convert(v, args[0]) for v in value] if args else list(value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(v, args[0]) for v in value)
        return tuple(convert(v, a) for v, a in zip(value, args, strict=True))
    if origin is dict or tp is dict:
        return {k: convert(v, args[1]) for k, v in value.items()} if args else dict(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    fields = _fields(tp) if isinstance(tp, type) else None
    if fields is not None:
        given = {name: convert(value[name], hint) for name, hint, _ in fields if name in value}
        if typing.is_typeddict(tp):
            return given
        return tp(**given)
    return value
