"""orjson <-> entries and messages. The only place that knows the on-disk (camelCase) keys.

Rules (DESIGN §2):
- every known field maps to an attribute; every other key goes to ``extra`` and is written back;
- an optional field absent from the line stays absent when written; one present as ``null`` is
  kept in ``extra`` so it is written back as ``null``;
- v1 lines have no ``id``/``parentId``: :func:`v1_entry_id` derives ids from the line number and
  bytes, so two opens of one file agree; ``firstKeptEntryIndex`` (0-based line index, header = 0)
  becomes ``firstKeptEntryId``; role ``hookMessage`` (v2) reads as ``custom``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import types
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import attrs
import orjson

from hooks import (
    AssistantContent,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    JSONValue,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UnknownMessage,
    Usage,
    UserContent,
    UserMessage,
)
from hooks._lazy import MessageSlot

from ._entries import (
    CURRENT_VERSION,
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
)

__all__ = [
    "MAX_NESTING",
    "CodecError",
    "FrozenDict",
    "FrozenList",
    "Slot",
    "block_kind",
    "content_blocks",
    "decode_entry",
    "decode_header",
    "decode_message",
    "dumps_line",
    "encode_appended",
    "encode_entry",
    "encode_header",
    "encode_message",
    "encode_new_message",
    "frozen_json",
    "loads_line",
    "nested_deeper",
    "parse_iso",
    "slot_of",
    "stored_slot",
    "v1_entry_id",
    "without_surrogates",
]

Obj = dict[str, Any]

MAX_NESTING = 64
"""The deepest nesting of objects and arrays a session line may hold, its own object being level
1 (so a tool call's ``arguments``, at level 5, may nest 59 levels more). A deeper line is a
damaged line: decoding it raises :class:`CodecError`, and no writer produces one. Real sessions
come nowhere near it (tool arguments and JSON schemas nest a few levels), and it keeps every
recursive consumer of a decoded entry (our codec, ``orjson.dumps`` and its 255 levels,
``json.dumps`` with ``indent``, the renderers) far from Python's recursion limit."""


class CodecError(ValueError):
    """A line is JSON but not a valid entry; the caller adds file and line number."""


def _too_deep() -> CodecError:
    return CodecError(f"nested deeper than {MAX_NESTING} levels of objects and arrays")


def nested_deeper(value: object, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` (JSON-like: mappings, lists and tuples of scalars) nests objects and
    arrays more than ``limit`` levels deep, ``value`` itself being level 1 when it is one.
    Iterative, so any depth is measured without recursion; stops at the first level past
    ``limit``."""
    stack: list[tuple[object, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, level = pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if level > limit:
            return True
        for child in children:
            if isinstance(child, Mapping | list | tuple):
                push((child, level + 1))
    return False


class FrozenDict(dict[str, Any]):
    """A JSON object read from a session: a ``dict`` (equal to one, serialised as one) whose
    mutators raise ``TypeError``, so a value returned by a read cannot change the session's
    copy. Copy it (``dict(value)``) to edit."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("session data is read-only; copy it first (dict(value))")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self


class FrozenList(list[Any]):
    """A JSON array read from a session: a ``list`` whose mutators raise ``TypeError``."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("session data is read-only; copy it first (list(value))")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self


def loads_line(raw: bytes | memoryview) -> Any:
    """``orjson.loads`` of a session line, also accepting what JavaScript's ``JSON.stringify``
    (pi) writes and orjson refuses: a lone surrogate escape such as ``"\\ud800"`` (a string
    cut between the two halves of a pair), read as U+FFFD. Nothing else orjson refuses is
    accepted (NaN and Infinity stay errors).

    The nesting of what it returns is not checked here (:func:`decode_entry` and
    :func:`decode_header` do), except on that second path, which walks the value.

    Raises:
        orjson.JSONDecodeError: the line is not JSON.
        CodecError: a line with a lone surrogate that nests deeper than :data:`MAX_NESTING`.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        data = bytes(raw)
        if b"\\u" not in data:
            raise
        try:
            # and no number orjson refuses: `1e400` (infinity) and integers past 64 bits,
            # which the decoder and the writers do not take (issue 24 attack, F1, F4, F5)
            obj = json.loads(
                data, parse_constant=_no_constant, parse_float=_finite, parse_int=_bounded
            )
        except (ValueError, RecursionError):
            raise exc from None
        if nested_deeper(obj):
            raise _too_deep() from None  # without_surrogates recurses
        return without_surrogates(obj)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is out of range")
    return value


def _bounded(text: str) -> int:
    value = int(text)
    if not -(2**63) <= value < 2**64:  # orjson's range
        raise ValueError(f"{text[:40]} is out of range")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(value: Any) -> Any:
    """``value`` (JSON: dicts, lists, scalars; any mapping or sequence taken as one) with every
    lone surrogate (U+D800 to U+DFFF, which UTF-8 cannot hold) replaced by U+FFFD. Recursive:
    call it on values nested at most :data:`MAX_NESTING` deep."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_surrogates(v) for v in value]
    return value


def frozen_json(value: Any, level: int = 1) -> Any:
    """``value`` (parsed JSON) with every object and array made read-only, recursively.

    Args:
        level: the nesting level ``value`` has in its line when it is an object or array (the
            line's own object is level 1).

    Raises:
        CodecError: an object or array nested deeper than :data:`MAX_NESTING`.
    """
    kind = type(value)
    if kind is dict or kind is FrozenDict:
        if level > MAX_NESTING:
            raise _too_deep()
        level += 1
        return FrozenDict(
            {k: frozen_json(v, level) if type(v) in _CONTAINERS else v for k, v in value.items()}
        )
    if kind is list or kind is FrozenList:
        if level > MAX_NESTING:
            raise _too_deep()
        level += 1
        return FrozenList([frozen_json(v, level) if type(v) in _CONTAINERS else v for v in value])
    return value


_CONTAINERS = frozenset({dict, list, FrozenDict, FrozenList})

T = TypeVar("T")


def _slot(cls: type, name: str) -> types.MemberDescriptorType | None:
    """The slot descriptor of ``name`` in ``cls`` or a base, None when it is not a slot."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            found = klass.__dict__[name]
            return found if isinstance(found, types.MemberDescriptorType) else None
    return None


def _builder(cls: type[T], *names: str) -> Callable[..., T]:
    """A constructor of the frozen attrs class ``cls`` taking its init fields positionally, in
    the order ``names``, that sets the slots directly. The decoder builds millions of values
    when a long session is read, and passes each field a value of its declared type already,
    so the generated ``__init__`` (keyword binding, converters, frozen ``__setattr__``) is
    pure overhead there. Fields outside ``__init__`` get their default.

    Raises:
        TypeError: ``cls`` is not a slotted attrs class without validators and post-init, or
            ``names`` are not exactly its init fields (checked once, at import).
    """
    fields = attrs.fields(cast(Any, cls))
    init = {f.name for f in fields if f.init}
    slots = {f.name: _slot(cls, f.name) for f in fields}
    if (
        set(names) != init
        or len(names) != len(init)
        or None in slots.values()
        or any(f.validator is not None for f in fields)
        or hasattr(cls, "__attrs_post_init__")
        or any(not f.init and isinstance(f.default, attrs.Factory) for f in fields)  # type: ignore[arg-type]
    ):
        raise TypeError(f"cannot build {cls.__name__} directly")
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    body = ["    o = new(cls)"]
    for f in fields:
        scope[f"set_{f.name}"] = cast(types.MemberDescriptorType, slots[f.name]).__set__
        if f.init:
            body.append(f"    set_{f.name}(o, {f.name})")
        else:
            scope[f"default_{f.name}"] = f.default
            body.append(f"    set_{f.name}(o, default_{f.name})")
    source = f"def build({', '.join(names)}):\n" + "\n".join(body) + "\n    return o\n"
    exec(source, scope)
    return cast(Callable[..., T], scope["build"])


# Always written by the encoder (null for a root), so a null here is no "null vs absent" case:
# keeping it in ``extra`` would make a root entry read back unequal to the one appended.
_ALWAYS_WRITTEN = frozenset({"parentId"})


_NO_EXTRA = FrozenDict()


def _extra(obj: Mapping[str, Any], known: frozenset[str], level: int) -> dict[str, Any]:
    """The keys of ``obj`` (an object at nesting ``level`` of its line) that are not fields."""
    # The common case, checked in C: only known keys, none of them null. Shared: it is read-only.
    if obj.keys() <= known and None not in obj.values():
        return _NO_EXTRA
    # Known keys holding null stay in extra so they round-trip as null.
    level += 1
    return FrozenDict(
        {
            k: frozen_json(v, level)
            for k, v in obj.items()
            if k not in known or (v is None and k not in _ALWAYS_WRITTEN)
        }
    )


def _put_extra(out: Obj, extra: Mapping[str, Any]) -> Obj:
    for k, v in extra.items():
        if k not in out:
            out[k] = v
    return out


def _scalar(value: Any, key: str) -> Any:
    """``value`` of a field holding a string, number or boolean, which the decoder coerces
    (``str()``, ``bool()``) as pi does. An object or array there is not coerced (its nesting
    would go unchecked, its text would be Python's): the line is damaged."""
    if type(value) is dict or type(value) is list:
        raise CodecError(f"field {key!r} must not be an object or array")
    return value


def _as_str(value: Any, key: str) -> str:
    """``str(value)`` of a field's scalar (callers test ``type(value) is str`` first)."""
    return value if type(value) is str else str(_scalar(value, key))


def _as_bool(value: Any, key: str) -> bool:
    return value if type(value) is bool else bool(_scalar(value, key))


def _float(obj: Mapping[str, Any], key: str) -> float:
    """A cost figure as ``float(value or 0)`` reads it, or why it cannot be one."""
    value = _scalar(obj.get(key), key)
    try:
        number = float(value or 0)
    except ValueError:
        raise CodecError(f"field {key!r} must be a number, got {value!r:.40}") from None
    if not math.isfinite(number):
        # JSON has no NaN or infinity; the strings "NaN", "inf" and "1e999" read as them, and
        # the encoder refuses them (review 16, finding 4)
        raise CodecError(f"field {key!r} must be a finite number, got {value!r:.40}")
    return number


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise CodecError(f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def _opt_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise CodecError(f"field {key!r} must be a string or absent")
    return value


# The integers a line can hold (orjson's range): a count read from a float beyond them could
# not be written back.
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def _whole(value: float, key: str) -> int:
    """``int(value)`` of a number, which must be in the range a line can hold."""
    whole = int(value)
    if not _INT_MIN <= whole <= _INT_MAX:
        raise CodecError(f"field {key!r} is out of range ({value:.3g})")
    return whole


def _int(obj: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"field {key!r} must be a number")
    return value if type(value) is int else _whole(value, key)


def _timestamp_ms(value: Any) -> int:
    """A message timestamp in Unix ms. pi writes a number; some writers an ISO-8601 string,
    which pi also accepts: read as ms (an unreadable string counts as 0, as pi's NaN does)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise CodecError("field 'timestamp' must be a number or an ISO-8601 string")
    if isinstance(value, int | float):
        return _whole(value, "timestamp") if math.isfinite(value) else 0
    if isinstance(value, str):
        parsed = parse_iso(value)
        return int(parsed.timestamp() * 1000) if parsed is not None else 0
    raise CodecError("field 'timestamp' must be a number or an ISO-8601 string")


def parse_iso(value: str) -> datetime | None:
    """An ISO-8601 time (``Z`` accepted; no zone means UTC), or None when it cannot be read."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# --- content blocks -------------------------------------------------------------------------

_TEXT_KEYS = frozenset({"type", "text"})
_IMAGE_KEYS = frozenset({"type", "data", "mimeType"})
_THINKING_KEYS = frozenset({"type", "thinking", "thinkingSignature", "redacted"})
_TOOLCALL_KEYS = frozenset({"type", "id", "name", "arguments"})


_text = _builder(TextContent, "text", "extra")
_image = _builder(ImageContent, "data", "mime_type", "extra")
_thinking = _builder(ThinkingContent, "thinking", "thinking_signature", "redacted", "extra")
_tool_call = _builder(ToolCall, "id", "name", "arguments", "extra")
_unknown_block = _builder(UnknownContent, "raw")


# Nesting levels in a line (its own object is 1): a message 2, its fields 3 (content, usage),
# a message's content block 4, a block's fields 5 (a tool call's arguments). A custom_message
# entry's blocks are at 3.
_BLOCK = 4


def _decode_block(
    obj: Any, level: int = _BLOCK
) -> TextContent | ImageContent | ThinkingContent | ToolCall | UnknownContent:
    """A content block, an object at nesting ``level`` of its line."""
    if not isinstance(obj, dict):
        raise CodecError("content block must be an object")
    kind = obj.get("type")
    if kind == "text":
        text = obj.get("text")
        if isinstance(text, str):
            # Two keys, both known and set: nothing extra (the common block, checked cheaply).
            return _text(text, _NO_EXTRA if len(obj) == 2 else _extra(obj, _TEXT_KEYS, level))
    elif kind == "toolCall":
        call_id, name, arguments = obj.get("id"), obj.get("name"), obj.get("arguments", {})
        if isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, dict):
            extra = (
                _NO_EXTRA
                if len(obj) == 4 and "arguments" in obj
                else _extra(obj, _TOOLCALL_KEYS, level)
            )
            return _tool_call(call_id, name, frozen_json(arguments, level + 1), extra)
    elif kind == "thinking":
        thinking = obj.get("thinking")
        if isinstance(thinking, str):
            return _thinking(
                thinking,
                _opt_str(obj, "thinkingSignature"),
                _as_bool(obj.get("redacted", False), "redacted"),
                _extra(obj, _THINKING_KEYS, level),
            )
    elif kind == "image":
        data, mime_type = obj.get("data"), obj.get("mimeType")
        if isinstance(data, str) and isinstance(mime_type, str):
            return _image(data, mime_type, _extra(obj, _IMAGE_KEYS, level))
    return _unknown_block(frozen_json(obj, level))


def _encode_block(
    block: TextContent | ImageContent | ThinkingContent | ToolCall | UnknownContent,
) -> Obj:
    if isinstance(block, TextContent):
        return _put_extra({"type": "text", "text": block.text}, block.extra)
    if isinstance(block, ImageContent):
        return _put_extra(
            {"type": "image", "data": block.data, "mimeType": block.mime_type}, block.extra
        )
    if isinstance(block, ThinkingContent):
        out: Obj = {"type": "thinking", "thinking": block.thinking}
        if block.thinking_signature is not None:
            out["thinkingSignature"] = block.thinking_signature
        if block.redacted:
            out["redacted"] = True
        return _put_extra(out, block.extra)
    if isinstance(block, ToolCall):
        return _put_extra(
            {
                "type": "toolCall",
                "id": block.id,
                "name": block.name,
                "arguments": dict(block.arguments),
            },
            block.extra,
        )
    return dict(block.raw)


def _decode_user_content(value: Any, level: int = _BLOCK - 1) -> str | tuple[UserContent, ...]:
    """User-side content: a string, or a list (at nesting ``level`` of its line) of blocks."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise CodecError("content must be a string or a list of blocks")
    blocks = [_decode_block(b, level + 1) for b in value]
    return tuple(
        b
        if type(b) is TextContent or type(b) is ImageContent or type(b) is UnknownContent
        else _unknown_block(_encode_block(b))
        for b in blocks
    )


def _encode_content(value: str | tuple[Any, ...]) -> str | list[Obj]:
    if isinstance(value, str):
        return value
    return [_encode_block(b) for b in value]


def _decode_assistant_content(value: Any) -> tuple[AssistantContent, ...]:
    if isinstance(value, str):
        # pi accepts a plain string here (older writers, other tools): one text block.
        return (_text(value, _NO_EXTRA),) if value else ()
    if not isinstance(value, list):
        raise CodecError("assistant content must be a list of blocks")
    blocks = [_decode_block(raw) for raw in value]
    for i, block in enumerate(blocks):
        if type(block) is ImageContent:
            # No images in replies: kept verbatim.
            blocks[i] = _unknown_block(frozen_json(value[i], _BLOCK))
    return cast(tuple[AssistantContent, ...], tuple(blocks))


# --- usage ----------------------------------------------------------------------------------

_COST_KEYS = frozenset({"input", "output", "cacheRead", "cacheWrite", "total"})
_USAGE_KEYS = frozenset({"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"})


_cost = _builder(Cost, "input", "output", "cache_read", "cache_write", "total", "extra")
_usage = _builder(
    Usage, "input", "output", "cache_read", "cache_write", "total_tokens", "cost", "extra"
)
_USAGE_KEYS_NO_COST = _USAGE_KEYS - {"cost"}


def _count(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key, 0)
    return value if type(value) is int else _int(obj, key)


_USAGE = 3  # the usage object's nesting level in a line


def _decode_usage(obj: Any) -> Usage:
    if not isinstance(obj, dict):
        if obj is None:
            return Usage()
        return Usage(extra=FrozenDict({"usage": frozen_json(obj, _USAGE)}))
    cost_raw = obj.get("cost")
    if isinstance(cost_raw, dict):
        cost_extra = _extra(cost_raw, _COST_KEYS, _USAGE + 1)
        try:
            figures = (
                float(cost_raw.get("input") or 0),
                float(cost_raw.get("output") or 0),
                float(cost_raw.get("cacheRead") or 0),
                float(cost_raw.get("cacheWrite") or 0),
                float(cost_raw.get("total") or 0),
            )
            if not all(map(math.isfinite, figures)):
                raise ValueError  # a string "NaN" or "inf": refused below, as the writer does
            cost = _cost(*figures, cost_extra)
        except (TypeError, ValueError):
            # Not finite numbers: this raises, saying which (an object or array, a string not
            # one, NaN or infinity).
            cost = _cost(*(_float(cost_raw, key) for key in _COST_NAMES), cost_extra)
        known = _USAGE_KEYS
    else:
        cost, known = Cost(), _USAGE_KEYS_NO_COST
    total = _scalar(obj.get("totalTokens"), "totalTokens")
    return _usage(
        _count(obj, "input"),
        _count(obj, "output"),
        _count(obj, "cacheRead"),
        _count(obj, "cacheWrite"),
        _whole(total, "totalTokens") if isinstance(total, int | float) else None,
        cost,
        _extra(obj, known, _USAGE),
    )


def _num(value: float) -> float | int:
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no NaN or infinity; int() of one would raise a bare ValueError/OverflowError.
        raise CodecError(f"a cost must be a finite number, not {value}")
    # Keep integral costs as ints (0, not 0.0) so pi-written zeros stay byte-identical; one
    # too large for a line's integers stays a float.
    whole = int(value)
    return whole if whole == value and _INT_MIN <= whole <= _INT_MAX else value


def _encode_usage(usage: Usage) -> Obj:
    out: Obj = {
        "input": usage.input,
        "output": usage.output,
        "cacheRead": usage.cache_read,
        "cacheWrite": usage.cache_write,
    }
    if usage.total_tokens is not None:
        out["totalTokens"] = usage.total_tokens
    c = usage.cost
    out["cost"] = _put_extra(
        {
            "input": _num(c.input),
            "output": _num(c.output),
            "cacheRead": _num(c.cache_read),
            "cacheWrite": _num(c.cache_write),
            "total": _num(c.total),
        },
        c.extra,
    )
    return _put_extra(out, usage.extra)


# --- messages -------------------------------------------------------------------------------

_USER_KEYS = frozenset({"role", "content", "timestamp"})
_ASSISTANT_KEYS = frozenset(
    {
        "role",
        "content",
        "api",
        "provider",
        "model",
        "usage",
        "stopReason",
        "errorMessage",
        "timestamp",
    }
)
_TOOLRESULT_KEYS = frozenset(
    {"role", "toolCallId", "toolName", "content", "details", "isError", "timestamp"}
)
_BASH_KEYS = frozenset(
    {
        "role",
        "command",
        "output",
        "exitCode",
        "cancelled",
        "truncated",
        "fullOutputPath",
        "excludeFromContext",
        "timestamp",
    }
)
_CUSTOM_KEYS = frozenset({"role", "customType", "content", "display", "details", "timestamp"})


_user = _builder(UserMessage, "content", "timestamp", "extra")
_assistant = _builder(
    AssistantMessage,
    "content",
    "api",
    "provider",
    "model",
    "usage",
    "stop_reason",
    "error_message",
    "timestamp",
    "extra",
)
_tool_result = _builder(
    ToolResultMessage,
    "tool_call_id",
    "tool_name",
    "content",
    "details",
    "is_error",
    "timestamp",
    "extra",
)


_MESSAGE = 2  # a message's nesting level in a line; its fields are at 3


def decode_message(obj: Any) -> Message:
    """Build a message value from its JSON object.

    Its nesting is counted as in a line (the message at level 2, see :data:`MAX_NESTING`), so
    any message decoded here fits in an entry.

    Raises:
        CodecError: a known role with fields of the wrong shape (an object or array where a
            string, number or boolean belongs), or nesting deeper than the cap.
    """
    if not isinstance(obj, dict):
        raise CodecError("message must be an object")
    role = obj.get("role")
    ts = obj.get("timestamp")
    if type(ts) is not int:
        ts = _timestamp_ms(ts)
    if role == "assistant":
        api, provider = obj.get("api", ""), obj.get("provider", "")
        model, stop = obj.get("model", ""), obj.get("stopReason", "stop")
        return _assistant(
            _decode_assistant_content(obj.get("content", [])),
            api if type(api) is str else _as_str(api, "api"),
            provider if type(provider) is str else _as_str(provider, "provider"),
            model if type(model) is str else _as_str(model, "model"),
            _decode_usage(obj.get("usage")),
            stop if type(stop) is str else _as_str(stop, "stopReason"),
            _opt_str(obj, "errorMessage"),
            ts,
            _extra(obj, _ASSISTANT_KEYS, _MESSAGE),
        )
    if role == "toolResult":
        content = _decode_user_content(obj.get("content", []))
        call_id = obj.get("toolCallId")
        if not isinstance(call_id, str):
            call_id = _str(obj, "toolCallId")
        extra = _extra(obj, _TOOLRESULT_KEYS, _MESSAGE)
        if isinstance(content, str):
            # pi accepts a plain string: one text block, and the string kept to write back.
            extra = FrozenDict({**extra, "content": content})
            content = (_text(content, _NO_EXTRA),)
        name, is_error = obj.get("toolName", ""), obj.get("isError", False)
        return _tool_result(
            call_id,
            name if type(name) is str else _as_str(name, "toolName"),
            content,
            frozen_json(obj.get("details"), _MESSAGE + 1),
            is_error if type(is_error) is bool else _as_bool(is_error, "isError"),
            ts,
            extra,
        )
    if role == "user":
        return _user(
            _decode_user_content(obj.get("content", "")), ts, _extra(obj, _USER_KEYS, _MESSAGE)
        )
    if role == "bashExecution":
        exit_code = _scalar(obj.get("exitCode"), "exitCode")
        return BashExecutionMessage(
            command=_as_str(obj.get("command", ""), "command"),
            output=_as_str(obj.get("output", ""), "output"),
            exit_code=int(exit_code) if isinstance(exit_code, int) else None,
            cancelled=_as_bool(obj.get("cancelled", False), "cancelled"),
            truncated=_as_bool(obj.get("truncated", False), "truncated"),
            full_output_path=_opt_str(obj, "fullOutputPath"),
            exclude_from_context=_as_bool(
                obj.get("excludeFromContext", False), "excludeFromContext"
            ),
            timestamp=ts,
            extra=_extra(obj, _BASH_KEYS, _MESSAGE),
        )
    if role in ("custom", "hookMessage"):
        return CustomMessage(
            custom_type=_as_str(obj.get("customType", ""), "customType"),
            content=_decode_user_content(obj.get("content", "")),
            display=_as_bool(obj.get("display", True), "display"),
            details=frozen_json(obj.get("details"), _MESSAGE + 1),
            timestamp=ts,
            extra=_extra(obj, _CUSTOM_KEYS, _MESSAGE),
        )
    return UnknownMessage(raw=frozen_json(obj, _MESSAGE))


class Slot(MessageSlot):
    """A message slot whose JSON is pi's message object, decoded and encoded here. Make one
    with :func:`slot_of` (a typed message) or :func:`stored_slot` (a checked body)."""

    __slots__ = ()

    def decode(self, json: dict[str, Any]) -> Message:
        return decode_message(json)

    def encode(self, value: Message) -> dict[str, Any]:
        return encode_message(value)


def slot_of(message: Message) -> Slot:
    """A slot holding a typed message (its JSON encoded when first asked for)."""
    return Slot(value=message)


def stored_slot(obj: Any) -> Slot | None:
    """The message of a ``message`` entry's line object (``obj``) as a slot holding its JSON,
    when :func:`decode_entry` is certain to accept the line: the shapes every writer of ours
    and pi's write (each field of its type, no unknown keys, nesting checked). None for any
    other line, which the caller decodes now, so a damaged body is still reported when it is
    read, never later when a hook reads the message."""
    if type(obj) is not dict or not obj.keys() <= _K_MESSAGE or obj.get("type") != "message":
        return None
    pid = obj.get("parentId")
    if (
        type(obj.get("id")) is not str
        or (pid is not None and type(pid) is not str)
        or type(obj.get("timestamp", "")) is not str
    ):
        return None
    message = obj.get("message")
    return Slot(message) if _plain_message(message) else None


# Nesting left below a tool call's arguments (level 5) and a result's details (level 3).
_ARGUMENTS_DEPTH = MAX_NESTING - _BLOCK
_DETAILS_DEPTH = MAX_NESTING - _MESSAGE


def _plain_message(m: Any) -> bool:
    """Whether :func:`decode_message` accepts ``m`` for certain (see :func:`stored_slot`)."""
    if type(m) is not dict or type(m.get("timestamp")) is not int:
        return False
    role = m.get("role")
    if role == "assistant":
        error, content = m.get("errorMessage"), m.get("content", [])
        return (
            m.keys() <= _ASSISTANT_KEYS
            and type(m.get("api", "")) is str
            and type(m.get("provider", "")) is str
            and type(m.get("model", "")) is str
            and type(m.get("stopReason", "")) is str
            and (error is None or type(error) is str)
            and _plain_usage(m.get("usage"))
            and type(content) is list
            and all(map(_plain_assistant_block, content))
        )
    if role == "toolResult":
        content, details = m.get("content", []), m.get("details")
        return (
            m.keys() <= _TOOLRESULT_KEYS
            and type(m.get("toolCallId")) is str
            and type(m.get("toolName", "")) is str
            and type(m.get("isError", False)) is bool
            and type(content) is list
            and all(map(_plain_user_block, content))
            and (type(details) not in _CONTAINERS or not nested_deeper(details, _DETAILS_DEPTH))
        )
    if role == "user":
        content = m.get("content", "")
        return m.keys() <= _USER_KEYS and (
            type(content) is str or (type(content) is list and all(map(_plain_user_block, content)))
        )
    return False


def _plain_user_block(b: Any) -> bool:
    if type(b) is not dict:
        return False
    kind = b.get("type")
    if kind == "text":
        return len(b) == 2 and type(b.get("text")) is str
    return (
        kind == "image"
        and b.keys() == _IMAGE_KEYS
        and type(b["data"]) is str
        and type(b["mimeType"]) is str
    )


def _plain_assistant_block(b: Any) -> bool:
    if type(b) is not dict:
        return False
    kind = b.get("type")
    if kind == "text":
        return len(b) == 2 and type(b.get("text")) is str
    if kind == "toolCall":
        arguments = b.get("arguments")
        return (
            b.keys() == _TOOLCALL_KEYS
            and type(b["id"]) is str
            and type(b["name"]) is str
            and type(arguments) is dict
            and (
                # Flat arguments, the usual ones, cannot nest too deep: not walked.
                all(type(v) not in _CONTAINERS for v in arguments.values())
                or not nested_deeper(arguments, _ARGUMENTS_DEPTH)
            )
        )
    if kind == "thinking":
        signature = b.get("thinkingSignature")
        return (
            b.keys() <= _THINKING_KEYS
            and type(b.get("thinking")) is str
            and (signature is None or type(signature) is str)
            and type(b.get("redacted", False)) is bool
        )
    return False


def _plain_usage(u: Any) -> bool:
    if u is None:
        return True
    if type(u) is not dict or not u.keys() <= _USAGE_KEYS:
        return False
    for key in ("input", "output", "cacheRead", "cacheWrite"):
        if type(u.get(key, 0)) is not int:
            return False
    total = u.get("totalTokens")
    if total is not None and type(total) is not int:
        return False
    if "cost" not in u:
        return True
    cost = u["cost"]
    return (
        type(cost) is dict
        and cost.keys() <= _COST_KEYS
        and all(type(v) is int or type(v) is float for v in cost.values())
    )


# --- reading a message's JSON as the decoder reads it ----------------------------------------
# Normalising, the request check and the providers' bodies read the JSON of a slot (a checked
# body, or the encoding of a typed message) instead of building the message: these say what the
# decoder would make of it.


def content_blocks(m: Mapping[str, Any]) -> list[Any]:
    """The content blocks of a message's JSON as the decoder reads them: a tool result's or a
    reply's string (pi accepts one) is one text block, an empty reply string none; a user
    message's string is not blocks (callers test ``type(content) is str`` first)."""
    content = m.get("content", _NO_BLOCKS)
    if type(content) is str:
        if not content and m.get("role") == "assistant":
            return []
        return [{"type": "text", "text": content}]
    return content  # type: ignore[no-any-return]


_NO_BLOCKS: list[Any] = []  # read only


def block_kind(block: Mapping[str, Any], *, reply: bool) -> str:
    """What the decoder makes of a content block of a message's JSON: ``"text"``, ``"image"``,
    ``"thinking"``, ``"toolCall"``, or ``"unknown"`` (kept verbatim). ``reply``: the block is
    in an assistant message, where images are unknown; in any other, thinking and calls are."""
    kind = block.get("type")
    if kind == "text":
        return "text" if isinstance(block.get("text"), str) else "unknown"
    if kind == "toolCall":
        return (
            "toolCall"
            if reply
            and isinstance(block.get("id"), str)
            and isinstance(block.get("name"), str)
            and isinstance(block.get("arguments", {}), dict)
            else "unknown"
        )
    if kind == "thinking":
        return "thinking" if reply and isinstance(block.get("thinking"), str) else "unknown"
    if kind == "image":
        return (
            "image"
            if not reply
            and isinstance(block.get("data"), str)
            and isinstance(block.get("mimeType"), str)
            else "unknown"
        )
    return "unknown"


def encode_message(msg: Message) -> Obj:
    """The JSON object of a message, camelCase keys, unknown fields written back."""
    if isinstance(msg, UserMessage):
        return _put_extra(
            {"role": "user", "content": _encode_content(msg.content), "timestamp": msg.timestamp},
            msg.extra,
        )
    if isinstance(msg, AssistantMessage):
        out: Obj = {
            "role": "assistant",
            "content": [_encode_block(b) for b in msg.content],
            "api": msg.api,
            "provider": msg.provider,
            "model": msg.model,
            "usage": _encode_usage(msg.usage),
            "stopReason": msg.stop_reason,
        }
        if msg.error_message is not None:
            out["errorMessage"] = msg.error_message
        out["timestamp"] = msg.timestamp
        return _put_extra(out, msg.extra)
    if isinstance(msg, ToolResultMessage):
        out = {
            "role": "toolResult",
            "toolCallId": msg.tool_call_id,
            "toolName": msg.tool_name,
            "content": [_encode_block(b) for b in msg.content],
        }
        if msg.details is not None:
            out["details"] = msg.details
        out["isError"] = msg.is_error
        out["timestamp"] = msg.timestamp
        kept = msg.extra.get("content")
        if isinstance(kept, str) and msg.content == (TextContent(text=kept),):
            return {**out, **msg.extra}  # pi's string content, written back as it was read
        # Not the string read (none, or the content changed since): the blocks are written.
        return _put_extra(out, msg.extra)
    if isinstance(msg, BashExecutionMessage):
        out = {
            "role": "bashExecution",
            "command": msg.command,
            "output": msg.output,
            "exitCode": msg.exit_code,
            "cancelled": msg.cancelled,
            "truncated": msg.truncated,
        }
        if msg.full_output_path is not None:
            out["fullOutputPath"] = msg.full_output_path
        if msg.exclude_from_context:
            out["excludeFromContext"] = True
        out["timestamp"] = msg.timestamp
        return _put_extra(out, msg.extra)
    if isinstance(msg, CustomMessage):
        out = {
            "role": "custom",
            "customType": msg.custom_type,
            "content": _encode_content(msg.content),
            "display": msg.display,
        }
        if msg.details is not None:
            out["details"] = msg.details
        out["timestamp"] = msg.timestamp
        return _put_extra(out, msg.extra)
    if isinstance(msg, BranchSummaryMessage):
        return {
            "role": "branchSummary",
            "summary": msg.summary,
            "fromId": msg.from_id,
            "timestamp": msg.timestamp,
        }
    if isinstance(msg, CompactionSummaryMessage):
        return {
            "role": "compactionSummary",
            "summary": msg.summary,
            "tokensBefore": msg.tokens_before,
            "timestamp": msg.timestamp,
        }
    return dict(msg.raw)


# --- header ---------------------------------------------------------------------------------

SUPPORTED_VERSIONS = frozenset({1, 2, CURRENT_VERSION})
_HEADER_KEYS = frozenset({"type", "version", "id", "timestamp", "cwd", "parentSession", "metadata"})


def decode_header(obj: Any) -> SessionHeader:
    """Build the header from line 1.

    Raises:
        CodecError: not an object with ``type: "session"`` and a string ``id``, or a
            ``version`` that is not the integer 1, 2 or 3 (missing means 1). Reading a file of
            an unknown version as v1 would give its entries made-up ids, and the first append
            would rewrite it. An object or array as ``timestamp`` or ``cwd``, or nesting deeper
            than :data:`MAX_NESTING`.
    """
    if (
        not isinstance(obj, dict)
        or obj.get("type") != "session"
        or not isinstance(obj.get("id"), str)
    ):
        raise CodecError('the first line is not a session header ({"type":"session","id":...})')
    version = obj.get("version", 1)
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        try:
            shown = orjson.dumps(version).decode()
        except orjson.JSONEncodeError:  # nested past orjson's 255 levels
            shown = f"(a JSON {type(version).__name__})"
        if len(shown) > 40:
            shown = shown[:40] + "..."
        raise CodecError(f"unsupported session version {shown} (supported: 1, 2, 3; none means 1)")
    metadata = frozen_json(obj.get("metadata"), 2)
    return SessionHeader(
        id=obj["id"],
        timestamp=_as_str(obj.get("timestamp", ""), "timestamp"),
        cwd=_as_str(obj.get("cwd", ""), "cwd"),
        version=version,
        parent_session=_opt_str(obj, "parentSession"),
        metadata=metadata if isinstance(metadata, dict) else None,
        extra=_extra(obj, _HEADER_KEYS, 1)
        | ({} if isinstance(metadata, dict) or metadata is None else {"metadata": metadata}),
    )


def encode_header(header: SessionHeader) -> Obj:
    """The header line's object; always written as the current version by writers."""
    out: Obj = {
        "type": "session",
        "version": header.version,
        "id": header.id,
        "timestamp": header.timestamp,
        "cwd": header.cwd,
    }
    if header.parent_session is not None:
        out["parentSession"] = header.parent_session
    if header.metadata is not None:
        out["metadata"] = dict(header.metadata)
    return _put_extra(out, header.extra)


# --- entries --------------------------------------------------------------------------------

_BASE_KEYS = frozenset({"type", "id", "parentId", "timestamp"})


def _keys(*names: str) -> frozenset[str]:
    return _BASE_KEYS | frozenset(names)


_K_MESSAGE = _keys("message")
_K_MODEL = _keys("provider", "modelId")
_K_THINKING = _keys("thinkingLevel")
_K_TOOLS = _keys("activeToolNames")
_K_COMPACTION = _keys("summary", "firstKeptEntryId", "tokensBefore", "details", "fromHook")
_K_BRANCH = _keys("fromId", "summary", "details", "fromHook")
_K_CUSTOM = _keys("customType", "data")
_K_CUSTOM_MSG = _keys("customType", "content", "display", "details")
_K_LABEL = _keys("targetId", "label")
_K_INFO = _keys("name")
_K_LEAF = _keys("targetId")


_message_entry = _builder(MessageEntry, "id", "parent_id", "timestamp", "extra", "message")


def decode_entry(
    obj: Any,
    *,
    entry_id: str | None = None,
    parent_id: str | None = None,
    line_id: Callable[[int], str | None] | None = None,
) -> Entry:
    """Build an entry from a line's object.

    Args:
        obj: the parsed line.
        entry_id, parent_id: ids to use instead of the line's own (v1 files, re-attached
            orphans); None keeps the line's.
        line_id: for v1 files, maps a 0-based file line index to the id given to that line, to
            turn ``firstKeptEntryIndex`` into ``firstKeptEntryId``.

    Raises:
        CodecError: the line is not an object, lacks an id, or a known type has bad fields
            (an object or array where a string, number or boolean belongs); or it nests
            deeper than :data:`MAX_NESTING`.
    """
    if not isinstance(obj, dict):
        raise CodecError(f"entry must be a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise CodecError("entry has no string 'type'")
    eid = entry_id if entry_id is not None else obj.get("id")
    if not isinstance(eid, str):
        raise CodecError("entry has no string 'id'")
    pid = parent_id if entry_id is not None or parent_id is not None else obj.get("parentId")
    if pid is not None and not isinstance(pid, str):
        raise CodecError("'parentId' must be a string or null")
    ts = obj.get("timestamp", "")
    if type(ts) is not str:
        ts = _as_str(ts, "timestamp")
    if kind == "message":
        return _message_entry(
            eid, pid, ts, _extra(obj, _K_MESSAGE, 1), decode_message(obj.get("message"))
        )
    base: dict[str, Any] = {"id": eid, "parent_id": pid, "timestamp": ts}
    if kind == "model_change":
        return ModelChangeEntry(
            **base,
            provider=_str(obj, "provider"),
            model_id=_str(obj, "modelId"),
            extra=_extra(obj, _K_MODEL, 1),
        )
    if kind == "thinking_level_change":
        return ThinkingLevelChangeEntry(
            **base, thinking_level=_str(obj, "thinkingLevel"), extra=_extra(obj, _K_THINKING, 1)
        )
    if kind == "active_tools_change":
        names = obj.get("activeToolNames")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CodecError("'activeToolNames' must be a list of strings")
        return ActiveToolsChangeEntry(
            **base, active_tool_names=tuple(names), extra=_extra(obj, _K_TOOLS, 1)
        )
    if kind == "compaction":
        extra = _extra(obj, _K_COMPACTION, 1)
        first_kept = obj.get("firstKeptEntryId")
        if (
            first_kept is None
            and isinstance(obj.get("firstKeptEntryIndex"), int)
            and line_id is not None
        ):
            first_kept = line_id(obj["firstKeptEntryIndex"]) or ""
            extra = FrozenDict({k: v for k, v in extra.items() if k != "firstKeptEntryIndex"})
        if not isinstance(first_kept, str):
            raise CodecError("compaction has no 'firstKeptEntryId'")
        from_hook = _scalar(obj.get("fromHook"), "fromHook")
        return CompactionEntry(
            **base,
            summary=_str(obj, "summary"),
            first_kept_entry_id=first_kept,
            tokens_before=_int(obj, "tokensBefore"),
            details=frozen_json(obj.get("details"), 2),
            from_hook=bool(from_hook) if from_hook is not None else None,
            extra=extra,
        )
    if kind == "branch_summary":
        from_hook = _scalar(obj.get("fromHook"), "fromHook")
        return BranchSummaryEntry(
            **base,
            from_id=_str(obj, "fromId"),
            summary=_str(obj, "summary"),
            details=frozen_json(obj.get("details"), 2),
            from_hook=bool(from_hook) if from_hook is not None else None,
            extra=_extra(obj, _K_BRANCH, 1),
        )
    if kind == "custom":
        return CustomEntry(
            **base,
            custom_type=_str(obj, "customType"),
            data=frozen_json(obj.get("data"), 2),
            extra=_extra(obj, _K_CUSTOM, 1),
        )
    if kind == "custom_message":
        return CustomMessageEntry(
            **base,
            custom_type=_str(obj, "customType"),
            content=_decode_user_content(obj.get("content", ""), 2),
            display=_as_bool(obj.get("display", True), "display"),
            details=frozen_json(obj.get("details"), 2),
            extra=_extra(obj, _K_CUSTOM_MSG, 1),
        )
    if kind == "label":
        return LabelEntry(
            **base,
            target_id=_str(obj, "targetId"),
            label=_opt_str(obj, "label"),
            extra=_extra(obj, _K_LABEL, 1),
        )
    if kind == "session_info":
        return SessionInfoEntry(**base, name=_opt_str(obj, "name"), extra=_extra(obj, _K_INFO, 1))
    if kind == "leaf":
        # targetId null is meaningful ("before the first entry"), so it is not an extra.
        leaf_extra = FrozenDict({k: frozen_json(v, 2) for k, v in obj.items() if k not in _K_LEAF})
        return LeafEntry(**base, target_id=_opt_str(obj, "targetId"), extra=leaf_extra)
    return UnknownEntry(**base, entry_type=kind, raw=frozen_json(obj, 1))


def encode_entry(entry: Entry) -> Obj:
    """The line object of an entry (camelCase, unknown fields written back)."""
    if isinstance(entry, UnknownEntry):
        out = dict(entry.raw)
        out["id"], out["parentId"] = entry.id, entry.parent_id
        return out
    out = {
        "type": entry.type,
        "id": entry.id,
        "parentId": entry.parent_id,
        "timestamp": entry.timestamp,
    }
    if isinstance(entry, MessageEntry):
        out["message"] = encode_message(entry.message)
    elif isinstance(entry, ModelChangeEntry):
        out["provider"], out["modelId"] = entry.provider, entry.model_id
    elif isinstance(entry, ThinkingLevelChangeEntry):
        out["thinkingLevel"] = entry.thinking_level
    elif isinstance(entry, ActiveToolsChangeEntry):
        out["activeToolNames"] = list(entry.active_tool_names)
    elif isinstance(entry, CompactionEntry):
        out["summary"], out["firstKeptEntryId"], out["tokensBefore"] = (
            entry.summary,
            entry.first_kept_entry_id,
            entry.tokens_before,
        )
        if entry.details is not None:
            out["details"] = entry.details
        if entry.from_hook is not None:
            out["fromHook"] = entry.from_hook
    elif isinstance(entry, BranchSummaryEntry):
        out["fromId"], out["summary"] = entry.from_id, entry.summary
        if entry.details is not None:
            out["details"] = entry.details
        if entry.from_hook is not None:
            out["fromHook"] = entry.from_hook
    elif isinstance(entry, CustomEntry):
        out["customType"] = entry.custom_type
        if entry.data is not None:
            out["data"] = entry.data
    elif isinstance(entry, CustomMessageEntry):
        out["customType"], out["content"], out["display"] = (
            entry.custom_type,
            _encode_content(entry.content),
            entry.display,
        )
        if entry.details is not None:
            out["details"] = entry.details
    elif isinstance(entry, LabelEntry):
        out["targetId"] = entry.target_id
        if entry.label is not None:
            out["label"] = entry.label
    elif isinstance(entry, SessionInfoEntry):
        if entry.name is not None:
            out["name"] = entry.name
    elif isinstance(entry, LeafEntry):
        out["targetId"] = entry.target_id
    return _put_extra(out, entry.extra)


def dumps_line(obj: Mapping[str, JSONValue]) -> bytes:
    """One JSONL line (orjson, newline-terminated).

    Raises:
        CodecError: a value JSON cannot hold: NaN or an infinity (orjson would write
            ``null``), a set, bytes, an object of another type, a cycle, a non-string key; or
            nesting deeper than :data:`MAX_NESTING` (no reader would accept the line).
    """
    try:
        line = orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError as exc:
        if "surrogates" not in str(exc):
            raise CodecError(f"not JSON: {exc}") from None
        # A lone surrogate (a model server's "\ud800" escape, a file name that is not UTF-8)
        # is stored as U+FFFD, as loads_line reads pi's: the line stays UTF-8 JSONL that pi
        # reads, and the session keeps what the line holds.
        if nested_deeper(obj):
            raise _too_deep() from None
        try:
            line = orjson.dumps(without_surrogates(obj), option=orjson.OPT_APPEND_NEWLINE)
        except orjson.JSONEncodeError as again:
            raise CodecError(f"not JSON: {again}") from None
    # Only a line with more opening brackets than the cap can nest past it.
    if line.count(b"{") + line.count(b"[") > MAX_NESTING and nested_deeper(obj):
        raise _too_deep()
    # orjson writes NaN and infinities as null: look for them only when a null is there at all
    # (most lines hold none but a root's parentId), so the common append pays nothing.
    if line.count(b"null") > (1 if obj.get("parentId", 0) is None else 0):
        where = _non_finite(obj, "$")
        if where is not None:
            raise CodecError(f"not JSON: {where} is NaN or infinite")
    return line


def _non_finite(value: Any, where: str) -> str | None:
    # Iterative: a deeply nested value must not hit the recursion limit here.
    stack = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return at
        elif isinstance(item, Mapping):
            stack.extend((v, f"{at}.{k}") for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))
    return None


# --- appends: one pass that encodes a new entry and copies it -------------------------------


class _General(Exception):
    """A value the append fast path leaves to the general encode-then-decode path."""


def encode_appended(entry: Entry) -> tuple[bytes, Entry]:
    """The line to append for ``entry`` (newline-terminated) and the entry as reading that line
    back gives it: equal to ``decode_entry(orjson.loads(line))``, of the same types all the way
    down, sharing no mutable value with ``entry`` (JSON objects and arrays come back read-only).

    A message entry whose fields hold the types the decoder produces (the common case) is
    encoded and copied in one pass; a value that is already exactly what the decoder would
    build (a frozen value with read-only containers, e.g. one read from a session) is shared,
    not copied. Anything else is encoded, then decoded from its line.

    Raises:
        CodecError: a value JSON cannot hold, or a field that would not read back (wrong type).
    """
    if type(entry) is MessageEntry:
        try:
            return _appended_message(
                entry.id, entry.parent_id, entry.timestamp, entry.extra, entry.message
            )
        except _General:
            pass
    line = dumps_line(encode_entry(entry))
    return line, decode_entry(orjson.loads(line))


def encode_new_message(
    entry_id: str, parent_id: str | None, timestamp: str, message: Message
) -> tuple[bytes, MessageEntry]:
    """:func:`encode_appended` of a message entry with these fields and no extra keys, without
    building that entry first (the append path of every message).

    Raises:
        CodecError: as :func:`encode_appended`.
    """
    try:
        return _appended_message(entry_id, parent_id, timestamp, _NO_EXTRA, message)
    except _General:
        pass
    line = dumps_line(
        encode_entry(
            MessageEntry(id=entry_id, parent_id=parent_id, timestamp=timestamp, message=message)
        )
    )
    return line, cast(MessageEntry, decode_entry(orjson.loads(line)))


# ``level`` below is the nesting level a container value has in its line (the line's own
# object is 1); past MAX_NESTING the general path reports the error (dumps_line).


def _frozen(value: Any, level: int) -> bool:
    """Whether ``value`` is already what decoding its JSON gives (read-only containers, string
    keys, finite floats all the way down, no deeper than the cap): then it can be shared
    instead of copied."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return bool(value - value == 0.0)  # False for NaN and the infinities
    if level > MAX_NESTING:
        return False
    if kind is FrozenDict:
        for k, v in value.items():
            if type(k) is not str or (type(v) is not str and not _frozen(v, level + 1)):
                return False
        return True
    if kind is FrozenList:
        return all(type(v) is str or _frozen(v, level + 1) for v in value)
    return False


def _plain(value: Any, level: int) -> Any:
    """``value`` as ``frozen_json(orjson.loads(orjson.dumps(value)), level)`` gives it, when it
    holds only JSON types (dict, list, tuple, str, int, finite float, bool, None; string keys)
    nested no deeper than the cap; the value itself, or its parts, where they are that
    already."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if value - value != 0.0:
            raise _General
        return value
    if level > MAX_NESTING:
        raise _General
    if (kind is FrozenDict or kind is FrozenList) and _frozen(value, level):
        return value
    inner = level + 1
    if kind is dict or kind is FrozenDict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _General
            out[k] = v if type(v) is str else _plain(v, inner)
        return FrozenDict(out)
    if kind is list or kind is FrozenList or kind is tuple:
        return FrozenList([v if type(v) is str else _plain(v, inner) for v in value])
    raise _General


def _plain_extra(extra: Mapping[str, Any], known: frozenset[str], level: int) -> FrozenDict:
    """``extra`` (of an object at nesting ``level``) as the decoder rebuilds it (itself when it
    is that already), when none of its keys is a known field's (those would be dropped or read
    back as the field: the general path handles them)."""
    if not extra:
        return extra if type(extra) is FrozenDict else _NO_EXTRA
    if not extra.keys().isdisjoint(known):
        raise _General
    return cast(FrozenDict, _plain(extra, level))


# ``extra is _NO_EXTRA`` (what the decoder gives a value without extra keys) is checked inline
# before calling _plain_extra: a call per value is a good part of an append's cost.


def _appended_blocks(blocks: Any, assistant: bool) -> tuple[list[Obj], tuple[Any, ...]]:
    """The blocks' JSON objects and the blocks as they read back (``blocks`` itself when every
    block does). One loop, no call per block: that call was a good part of an append's cost."""
    if type(blocks) is not tuple:
        raise _General
    out: list[Obj] = []
    copies: list[Any] | None = None  # made at the first block that does not read back as is
    copy: Any
    for block in blocks:
        kind = type(block)
        if kind is TextContent:
            text, extra = block.text, block.extra
            if type(text) is not str:
                raise _General
            if extra is _NO_EXTRA:
                out.append({"type": "text", "text": text})
                copy = block
            else:
                kept = _plain_extra(extra, _TEXT_KEYS, _BLOCK)
                out.append({"type": "text", "text": text, **kept})
                copy = block if kept is extra else _text(text, kept)
        elif kind is ToolCall and assistant:
            call_id, name, arguments, extra = block.id, block.name, block.arguments, block.extra
            if (
                type(call_id) is not str
                or type(name) is not str
                or (type(arguments) is not dict and type(arguments) is not FrozenDict)
            ):
                raise _General
            kept = extra if extra is _NO_EXTRA else _plain_extra(extra, _TOOLCALL_KEYS, _BLOCK)
            args = _plain(arguments, _BLOCK + 1)
            out.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args, **kept})
            same = kept is extra and args is arguments
            copy = block if same else _tool_call(call_id, name, args, kept)
        elif kind is ThinkingContent and assistant:
            thinking, signature, redacted = block.thinking, block.thinking_signature, block.redacted
            extra = block.extra
            if (
                type(thinking) is not str
                or (signature is not None and type(signature) is not str)
                or type(redacted) is not bool
            ):
                raise _General
            kept = extra if extra is _NO_EXTRA else _plain_extra(extra, _THINKING_KEYS, _BLOCK)
            obj: Obj = {"type": "thinking", "thinking": thinking}
            if signature is not None:
                obj["thinkingSignature"] = signature
            if redacted:
                obj["redacted"] = True
            if kept:
                obj.update(kept)
            out.append(obj)
            copy = block if kept is extra else _thinking(thinking, signature, redacted, kept)
        elif kind is ImageContent and not assistant:
            data, mime_type, extra = block.data, block.mime_type, block.extra
            if type(data) is not str or type(mime_type) is not str:
                raise _General
            kept = extra if extra is _NO_EXTRA else _plain_extra(extra, _IMAGE_KEYS, _BLOCK)
            out.append({"type": "image", "data": data, "mimeType": mime_type, **kept})
            copy = block if kept is extra else _image(data, mime_type, kept)
        else:
            raise _General  # unknown blocks, and blocks the decoder reads as unknown in this role
        if copies is not None:
            copies.append(copy)
        elif copy is not block:
            copies = [*blocks[: len(out) - 1], copy]
    return out, blocks if copies is None else tuple(copies)


def _appended_user_content(content: Any) -> tuple[str | list[Obj], Any]:
    if type(content) is str:
        return content, content
    return _appended_blocks(content, False)


_COST_NAMES = ("input", "output", "cacheRead", "cacheWrite", "total")


def _appended_cost(cost: Any) -> tuple[Obj, Cost]:
    if type(cost) is not Cost:
        raise _General
    extra = cost.extra
    kept_extra = extra if extra is _NO_EXTRA else _plain_extra(extra, _COST_KEYS, _USAGE + 1)
    i, o, r, w, t = cost.input, cost.output, cost.cache_read, cost.cache_write, cost.total
    if (
        type(i) is float
        and type(o) is float
        and type(r) is float
        and type(w) is float
        and type(t) is float
        and (i - i) + (o - o) + (r - r) + (w - w) + (t - t) == 0.0  # all finite
    ):
        # Integral costs are written as ints (pi's zeros stay byte-identical); they read back
        # as the same floats, but for -0.0 (written 0, read back 0.0).
        out = {
            "input": i if i % 1.0 else int(i),
            "output": o if o % 1.0 else int(o),
            "cacheRead": r if r % 1.0 else int(r),
            "cacheWrite": w if w % 1.0 else int(w),
            "total": t if t % 1.0 else int(t),
        }
        # -0.0 is written 0 and reads back 0.0: the only finite float that does not round-trip.
        same = kept_extra is extra and not (
            (not i and math.copysign(1.0, i) < 0)
            or (not o and math.copysign(1.0, o) < 0)
            or (not r and math.copysign(1.0, r) < 0)
            or (not w and math.copysign(1.0, w) < 0)
            or (not t and math.copysign(1.0, t) < 0)
        )
    else:
        same = False
        written: list[int | float] = []
        for value in (i, o, r, w, t):
            if type(value) is float and value - value == 0.0:
                written.append(value if value % 1.0 else int(value))
            elif type(value) is int and -(2**63) <= value < 2**64:
                # In orjson's range only (the general path reports a huge one).
                written.append(value)
            else:
                raise _General  # NaN, an infinity, another type: the general path says which
        out = dict(zip(_COST_NAMES, written, strict=True))
    if kept_extra:
        out.update(kept_extra)
    if same:
        return out, cost
    kept = _cost(
        float(out["input"]),
        float(out["output"]),
        float(out["cacheRead"]),
        float(out["cacheWrite"]),
        float(out["total"]),
        kept_extra,
    )
    return out, kept


def _appended_usage(usage: Any) -> tuple[Obj, Usage]:
    if type(usage) is not Usage:
        raise _General
    i, o, r, w, total = (
        usage.input,
        usage.output,
        usage.cache_read,
        usage.cache_write,
        usage.total_tokens,
    )
    if (
        type(i) is not int
        or type(o) is not int
        or type(r) is not int
        or type(w) is not int
        or (total is not None and type(total) is not int)
    ):
        raise _General
    extra = usage.extra
    kept = extra if extra is _NO_EXTRA else _plain_extra(extra, _USAGE_KEYS, _USAGE)
    out: Obj = {"input": i, "output": o, "cacheRead": r, "cacheWrite": w}
    if total is not None:
        out["totalTokens"] = total
    cost_out, cost = _appended_cost(usage.cost)
    out["cost"] = cost_out
    if kept:
        out.update(kept)
    if kept is extra and cost is usage.cost:
        return out, usage
    return out, _usage(i, o, r, w, total, cost, kept)


_custom_message = _builder(
    CustomMessage, "custom_type", "content", "display", "details", "timestamp", "extra"
)


def _appended_message(
    entry_id: str, parent_id: str | None, timestamp: str, entry_extra: Any, msg: Any
) -> tuple[bytes, MessageEntry]:
    if (
        type(entry_id) is not str
        or type(timestamp) is not str
        or (parent_id is not None and type(parent_id) is not str)
    ):
        raise _General
    kept_entry_extra = (
        entry_extra if entry_extra is _NO_EXTRA else _plain_extra(entry_extra, _K_MESSAGE, 1)
    )
    kind = type(msg)
    ts = msg.timestamp if kind is not UnknownMessage else None
    if type(ts) is not int:
        raise _General
    # ``message`` is ``msg`` itself when every part of it reads back as it is (shared: it is
    # frozen all the way down), else the copy built from the parts that read back.
    message: Message
    if kind is AssistantMessage:
        api, provider, model = msg.api, msg.provider, msg.model
        stop, error, extra = msg.stop_reason, msg.error_message, msg.extra
        if (
            type(api) is not str
            or type(provider) is not str
            or type(model) is not str
            or type(stop) is not str
            or (error is not None and type(error) is not str)
        ):
            raise _General
        kept = extra if extra is _NO_EXTRA else _plain_extra(extra, _ASSISTANT_KEYS, _MESSAGE)
        blocks_out, blocks = _appended_blocks(msg.content, True)
        usage_out, usage = _appended_usage(msg.usage)
        out: Obj = {
            "role": "assistant",
            "content": blocks_out,
            "api": api,
            "provider": provider,
            "model": model,
            "usage": usage_out,
            "stopReason": stop,
        }
        if error is not None:
            out["errorMessage"] = error
        out["timestamp"] = ts
        if kept:
            out.update(kept)
        if kept is extra and blocks is msg.content and usage is msg.usage:
            message = msg
        else:
            message = _assistant(blocks, api, provider, model, usage, stop, error, ts, kept)
    elif kind is ToolResultMessage:
        call_id, name, is_error = msg.tool_call_id, msg.tool_name, msg.is_error
        details, extra = msg.details, msg.extra
        if type(call_id) is not str or type(name) is not str or type(is_error) is not bool:
            raise _General
        kept = extra if extra is _NO_EXTRA else _plain_extra(extra, _TOOLRESULT_KEYS, _MESSAGE)
        blocks_out, blocks = _appended_blocks(msg.content, False)
        kept_details = None if details is None else _plain(details, _MESSAGE + 1)
        out = {"role": "toolResult", "toolCallId": call_id, "toolName": name}
        out["content"] = blocks_out
        if kept_details is not None:
            out["details"] = kept_details
        out["isError"], out["timestamp"] = is_error, ts
        if kept:
            out.update(kept)
        if kept is extra and blocks is msg.content and kept_details is details:
            message = msg
        else:
            message = _tool_result(call_id, name, blocks, kept_details, is_error, ts, kept)
    elif kind is UserMessage:
        extra = msg.extra
        kept = extra if extra is _NO_EXTRA else _plain_extra(extra, _USER_KEYS, _MESSAGE)
        content_out, content = _appended_user_content(msg.content)
        out = {"role": "user", "content": content_out, "timestamp": ts}
        if kept:
            out.update(kept)
        message = msg if kept is extra and content is msg.content else _user(content, ts, kept)
    elif kind is CustomMessage:
        custom_type, display, details, extra = msg.custom_type, msg.display, msg.details, msg.extra
        if type(custom_type) is not str or type(display) is not bool:
            raise _General
        kept = extra if extra is _NO_EXTRA else _plain_extra(extra, _CUSTOM_KEYS, _MESSAGE)
        content_out, content = _appended_user_content(msg.content)
        kept_details = None if details is None else _plain(details, _MESSAGE + 1)
        out = {"role": "custom", "customType": custom_type, "content": content_out}
        out["display"] = display
        if kept_details is not None:
            out["details"] = kept_details
        out["timestamp"] = ts
        if kept:
            out.update(kept)
        if kept is extra and content is msg.content and kept_details is details:
            message = msg
        else:
            message = _custom_message(custom_type, content, display, kept_details, ts, kept)
    else:
        raise _General  # bash executions, summaries, unknown roles
    line_obj = {
        "type": "message",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": timestamp,
        "message": out,
    }
    if kept_entry_extra:
        line_obj.update(kept_entry_extra)
    try:
        line = orjson.dumps(line_obj, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        raise _General from None  # e.g. a lone surrogate or a 65-bit integer: say which there
    return line, _message_entry(entry_id, parent_id, timestamp, kept_entry_extra, message)


def v1_entry_id(line_index: int, line: bytes, taken: set[str]) -> str:
    """Deterministic 8-hex id for a v1 line: same file, same ids, in any process.

    Derived from the line's 0-based index and bytes; a collision (vanishingly rare) is resolved
    by re-hashing with a counter, which is still deterministic because lines are visited in order.
    """
    counter = 0
    while True:
        digest = hashlib.blake2b(
            line, digest_size=8, person=f"{line_index}:{counter}".encode()[:16]
        )
        candidate = digest.hexdigest()[:8]
        if candidate not in taken:
            taken.add(candidate)
            return candidate
        counter += 1
