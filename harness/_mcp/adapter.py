"""An MCP server's tools and results as ours: names, schemas, descriptions, content blocks.

Pure functions on the JSON the server sent (the SDK's models dumped with their wire names), so
every bound on what a server may send sits in one place. A server is untrusted
(docs/security.md): whatever its tool list holds, a tool it offers is at most a tool named
``mcp__<server>__<tool>`` that the supervisor gates; whatever a result holds, it becomes
bounded text and image blocks.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import orjson
from attrs import frozen

from hooks import ImageContent, JSONValue, TextContent, UserContent
from repos import MAX_NESTING, nested_deeper

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_RESULT_CHARS",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_TEXT_CHARS",
    "MAX_SERVER_TOOL_BYTES",
    "MAX_TOOLS",
    "McpResult",
    "ToolInfo",
    "adapt_result",
    "adapt_tools",
    "mcp_tool_name",
]

PREFIX = "mcp__"
MAX_NAME = 64
"""Longest full tool name (``mcp__<server>__<tool>``): the tightest provider limit."""
MAX_TOOLS = 256
"""Tools taken from one server; the rest are left out and reported."""
MAX_DESCRIPTION_CHARS = 2048
"""A tool description is cut to this many characters (Claude Code cuts at the same length)."""
MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_TEXT_CHARS = 1024
"""A ``description`` or ``title`` inside an input schema is cut to this many characters, its
control characters made spaces: the model reads them as it reads the tool's description."""
MAX_SERVER_TOOL_BYTES = 256 * 1024
"""The tool definitions taken from one server (names, descriptions and input schemas as JSON)
hold at most this much in all: they go with every request. The tool that would pass it and
the ones after it are left out, with a note. About 64,000 tokens: Claude Code warns past 25,000
tokens of MCP tools in all, and 256 tools of 1 KB each fit."""
_DATA_KEYWORDS = frozenset({"const", "default", "enum", "examples"})
"""Schema keywords whose values are data, not schemas: their strings are left as they are."""
MAX_SCHEMA_NESTING = 32
MAX_SCHEMA_EXPANSION = 10_000
"""Nodes a schema may have with its local ``$ref``s written out; past it (or on a loop) the
``$ref``s are dropped before the harness validates a model's input against it."""
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
MAX_RESULT_CHARS = 100_000
"""Text of one result beyond this is cut, with a note saying how much was left out."""
MAX_BLOCKS = 64
MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Largest image kept (decoded size; the Anthropic API's own limit)."""
MAX_RESULT_IMAGE_BYTES = 2 * MAX_IMAGE_BYTES
"""Images of one result hold at most this much in all: the result is stored in the session
and sent with every later request (64 images of 5 MB would make each request too large)."""
_DETAILS_NESTING = MAX_NESTING - 5  # details.structuredContent sits at level 5 of its line
MAX_DETAILS_BYTES = 256 * 1024
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def mcp_tool_name(server: str, tool: str) -> str:
    """Our name for ``tool`` of ``server``: ``mcp__<server>__<tool>`` (Claude Code's), with
    every character but ``A-Z a-z 0-9 _ -`` of the tool's name made ``_``."""
    return f"{PREFIX}{server}__{_UNSAFE.sub('_', tool)}"


@frozen(kw_only=True)
class ToolInfo:
    """One tool a server offers, checked: ``name`` is ours, ``remote_name`` the server's,
    ``read_only`` its ``readOnlyHint``."""

    name: str
    remote_name: str
    description: str
    parameters: Mapping[str, JSONValue]
    read_only: bool
    destructive: bool | None
    annotations: Mapping[str, JSONValue]


def _clean(text: str) -> str:
    """``text`` with lone surrogates replaced, so it always encodes (and is stored) as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _schema_problem(schema: object) -> str | None:
    if not isinstance(schema, Mapping):
        return "its input schema is not an object"
    if schema.get("type", "object") != "object":
        return "its input schema's type is not 'object'"
    try:
        size = len(orjson.dumps(schema))
    except (TypeError, orjson.JSONEncodeError):
        return "its input schema is not JSON"
    if size > MAX_SCHEMA_BYTES:
        return f"its input schema is larger than {MAX_SCHEMA_BYTES} bytes"
    if nested_deeper(schema, MAX_SCHEMA_NESTING):
        return f"its input schema nests deeper than {MAX_SCHEMA_NESTING} levels"
    if _remote_ref(schema):
        return "its input schema refers to another document ($ref): nothing is fetched"
    import jsonschema  # here: `import harness` stays fast (issue 24)

    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.exceptions.SchemaError as exc:
        return f"its input schema is not a valid JSON Schema: {exc.message[:200]}"
    return None


def _cut_texts(value: Any) -> Any:
    """The schema with each ``description`` and ``title`` string cut to
    :data:`MAX_SCHEMA_TEXT_CHARS` characters and its control characters made spaces (values
    under ``const``, ``default``, ``enum`` and ``examples`` are data, kept as they are)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in ("description", "title") and isinstance(item, str):
                text = _CONTROL.sub(" ", _clean(item))
                if len(text) > MAX_SCHEMA_TEXT_CHARS:
                    text = text[: MAX_SCHEMA_TEXT_CHARS - 1] + "…"
                out[key] = text
            elif key in _DATA_KEYWORDS:
                out[key] = item
            else:
                out[key] = _cut_texts(item)
        return out
    if isinstance(value, list):
        return [_cut_texts(v) for v in value]
    return value


def _remote_ref(value: object) -> bool:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ("$ref", "$dynamicRef") and not (
                isinstance(item, str) and item.startswith("#")
            ):
                return True
            if _remote_ref(item):
                return True
    elif isinstance(value, list):
        return any(_remote_ref(v) for v in value)
    return False


def _without_patterns(value: Any) -> Any:
    """The schema without ``pattern``/``patternProperties``: they are regular expressions the
    server wrote, and validating a model's input against them could take exponential time.
    The server checks its own input; we check the rest."""
    if isinstance(value, Mapping):
        out = {k: _without_patterns(v) for k, v in value.items() if k != "pattern"}
        if "patternProperties" in out:
            del out["patternProperties"]
            out.pop("additionalProperties", None)  # those properties are allowed again
        return out
    if isinstance(value, list):
        return [_without_patterns(v) for v in value]
    return value


def _expands_too_far(schema: Mapping[str, Any]) -> bool:
    """Whether writing out the schema's ``$ref``s loops or passes :data:`MAX_SCHEMA_EXPANSION`
    nodes. Validation follows every ``$ref`` of every ``anyOf`` branch: 24 definitions of two
    ``$ref``s each to the next are 2**24 checks of one value, a 1.6 KB schema that would hold
    the event loop for hours; a loop of ``$ref``s can branch once per level of the value."""
    sizes: dict[str, int] = {}
    expanding: set[str] = set()

    def target(ref: object) -> object:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        node: object = schema
        for part in (p for p in ref[1:].split("/") if p) if ref != "#" else ():
            key = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return None
        return node

    def size(node: object) -> int:
        total = 1
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in _REFS:
                    total += ref_size(value)
                elif key not in ("$defs", "definitions"):  # counted where they are used
                    total += size(value)
                if total > MAX_SCHEMA_EXPANSION:
                    break
        elif isinstance(node, list):
            for value in node:
                total += size(value)
                if total > MAX_SCHEMA_EXPANSION:
                    break
        return total

    def ref_size(ref: object) -> int:
        key = str(ref)
        if key in expanding or len(expanding) > MAX_SCHEMA_NESTING:  # a loop, or a long chain
            return MAX_SCHEMA_EXPANSION + 1
        if key not in sizes:
            found = target(ref)
            if found is None:  # an anchor or a pointer to nothing: not followed here
                return MAX_SCHEMA_EXPANSION + 1
            expanding.add(key)
            sizes[key] = size(found)
            expanding.discard(key)
        return sizes[key]

    return size(schema) > MAX_SCHEMA_EXPANSION


def _without_refs(value: Any) -> Any:
    """The schema without ``$ref``s and the definitions they named: what is left is checked
    in time linear in its size (the server checks the rest of its own input)."""
    if isinstance(value, Mapping):
        return {
            k: _without_refs(v)
            for k, v in value.items()
            if k not in _REFS and k not in ("$defs", "definitions")
        }
    if isinstance(value, list):
        return [_without_refs(v) for v in value]
    return value


def adapt_tools(server: str, listed: list[Mapping[str, Any]]) -> tuple[list[ToolInfo], list[str]]:
    """The usable tools of a ``tools/list`` answer, and a note for each tool left out.

    A tool is left out when its name is empty, its full name is longer than 64 characters or
    repeats an earlier one, its input schema is not a JSON Schema object (or is larger than
    64 KB, nests deeper than 32 levels, or refers to another document), or the server offers
    more than 256 tools, or once the tool definitions taken pass 256 KB in all (names,
    descriptions and schemas as JSON: that tool and the rest, with one note). Descriptions
    lose control characters and are cut to 2,048 characters, a schema's ``description`` and
    ``title`` strings to 1,024. A schema whose ``$ref``s loop or expand past 10,000 nodes
    loses them (and a note says so): validating a model's input against it could take
    exponential time.
    """
    tools: list[ToolInfo] = []
    notes: list[str] = []
    seen: set[str] = set()
    budget = MAX_SERVER_TOOL_BYTES
    for index, raw in enumerate(listed):
        remote = raw.get("name")
        if not isinstance(remote, str) or not remote:
            notes.append("a tool without a name was left out")
            continue
        shown = repr(_clean(remote[:80]))
        if len(tools) >= MAX_TOOLS:
            notes.append(f"more than {MAX_TOOLS} tools: {shown} and the rest were left out")
            break
        name = mcp_tool_name(server, remote)
        if len(name) > MAX_NAME:
            notes.append(f"tool {shown} was left out: {name[:80]!r} is over {MAX_NAME} characters")
            continue
        if name.lower() in seen:  # rules compare names without case
            notes.append(f"tool {shown} was left out: its name {name!r} is taken")
            continue
        schema = raw.get("inputSchema")
        problem = _schema_problem(schema)
        if problem is not None:
            notes.append(f"tool {shown} was left out: {problem}")
            continue
        parameters = _cut_texts(_without_patterns(schema))
        if _expands_too_far(parameters):
            parameters = _without_refs(parameters)
            notes.append(
                f"tool {shown}: its input schema's $refs loop or expand past "
                f"{MAX_SCHEMA_EXPANSION} nodes; they were dropped (the server checks that "
                "input itself)"
            )
        description = raw.get("description")
        text = _CONTROL.sub(" ", _clean(description)) if isinstance(description, str) else ""
        if len(text) > MAX_DESCRIPTION_CHARS:
            text = text[: MAX_DESCRIPTION_CHARS - 1] + "…"
        text = text or f"Tool {remote!r} of the MCP server {server!r}."
        size = len(name) + len(text.encode()) + len(orjson.dumps(parameters))
        if size > budget:
            notes.append(
                f"{len(listed) - index} tools from {shown} on were left out: the server's tool "
                f"definitions would pass {MAX_SERVER_TOOL_BYTES} bytes in all (they go with "
                "every request)"
            )
            break
        budget -= size
        seen.add(name.lower())
        annotations = raw.get("annotations")
        hints = annotations if isinstance(annotations, Mapping) else {}
        destructive = hints.get("destructiveHint")
        tools.append(
            ToolInfo(
                name=name,
                remote_name=remote,
                description=text,
                parameters=parameters,
                read_only=hints.get("readOnlyHint") is True,
                destructive=destructive if isinstance(destructive, bool) else None,
                annotations={
                    k: v for k, v in hints.items() if isinstance(v, bool | str | int | float)
                },
            )
        )
    return tools, notes


@frozen(kw_only=True)
class McpResult:
    """A ``tools/call`` answer as ours: content blocks, ``details``, whether it failed."""

    content: tuple[UserContent, ...]
    details: JSONValue
    is_error: bool


def _image(block: Mapping[str, Any]) -> UserContent:
    mime = block.get("mimeType")
    data = block.get("data") if "data" in block else block.get("blob")
    if mime not in IMAGE_TYPES or not isinstance(data, str):
        return TextContent(text=f"[an image of type {str(mime)[:40]!r} was left out]")
    if len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        return TextContent(text=f"[an image over {MAX_IMAGE_BYTES} bytes was left out]")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return TextContent(text="[an image whose data is not base64 was left out]")
    return ImageContent(data=data, mime_type=str(mime))


def _block(block: object) -> UserContent:
    if not isinstance(block, Mapping):
        return TextContent(text="[a content block that is not an object was left out]")
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return TextContent(text=_clean(text) if isinstance(text, str) else "")
    if kind == "image":
        return _image(block)
    if kind == "resource":
        resource = block.get("resource")
        resource = resource if isinstance(resource, Mapping) else {}
        uri = _clean(str(resource.get("uri", "")))[:500]
        if isinstance(resource.get("text"), str):
            return TextContent(text=f"[resource {uri}]\n{_clean(resource['text'])}")
        if resource.get("mimeType") in IMAGE_TYPES:
            return _image(resource)
        mime = _clean(str(resource.get("mimeType", "unknown type")))[:80]
        return TextContent(text=f"[resource {uri}: binary data of {mime}, not shown]")
    if kind == "resource_link":
        uri = _clean(str(block.get("uri", "")))[:500]
        name = _clean(str(block.get("name", "")))[:200]
        return TextContent(text=f"[resource link {name}: {uri}]")
    if kind == "audio":
        return TextContent(text="[audio content, not shown]")
    return TextContent(text=f"[content of type {_clean(str(kind))[:40]!r}, not shown]")


def _bounded(blocks: list[UserContent]) -> list[UserContent]:
    """Texts cut to :data:`MAX_RESULT_CHARS` in total, with a note of what was left out;
    images past :data:`MAX_RESULT_IMAGE_BYTES` in all become a note."""
    left = MAX_RESULT_CHARS
    image_bytes = 0
    out: list[UserContent] = []
    dropped = 0
    for block in blocks:
        if isinstance(block, ImageContent):
            image_bytes += len(block.data) * 3 // 4
            if image_bytes > MAX_RESULT_IMAGE_BYTES:
                block = TextContent(
                    text=f"[an image was left out: the result's images are over "
                    f"{MAX_RESULT_IMAGE_BYTES} bytes in all]"
                )
        if isinstance(block, TextContent):
            if left <= 0:
                dropped += len(block.text)
                continue
            if len(block.text) > left:
                dropped += len(block.text) - left
                block = TextContent(text=block.text[:left])
            left -= len(block.text)
        out.append(block)
    if dropped:
        out.append(TextContent(text=f"[{dropped} more characters were cut]"))
    return out


def adapt_result(raw: Mapping[str, Any]) -> McpResult:
    """A ``CallToolResult`` (wire names) as content blocks.

    Text blocks stay text; images (PNG, JPEG, GIF, WebP, valid base64, at most 5 MB) become
    image blocks (10 MB in all); embedded resources become their text (or image); links, audio
    and unknown kinds become a one-line note. At most 64 blocks and 100,000 characters in all.
    ``isError`` makes an error result. ``structuredContent`` is kept in ``details`` (when it
    nests within what a session line holds and is at most 256 KB), else a note says why not.
    """
    content = raw.get("content")
    blocks = [_block(b) for b in content[:MAX_BLOCKS]] if isinstance(content, list) else []
    if isinstance(content, list) and len(content) > MAX_BLOCKS:
        blocks.append(TextContent(text=f"[{len(content) - MAX_BLOCKS} more blocks were cut]"))
    details: dict[str, JSONValue] | None = None
    structured = raw.get("structuredContent")
    if structured is not None:
        try:
            encoded = orjson.dumps(structured)
        except (TypeError, orjson.JSONEncodeError):  # lone surrogates, say
            encoded = None
        if encoded is None:
            details = {"structuredContentDropped": "not storable as JSON"}
        elif nested_deeper(structured, _DETAILS_NESTING):
            details = {"structuredContentDropped": "nested too deep to store"}
        elif len(encoded) > MAX_DETAILS_BYTES:
            details = {"structuredContentDropped": f"larger than {MAX_DETAILS_BYTES} bytes"}
        else:
            details = {"structuredContent": orjson.loads(encoded)}
        if not blocks and encoded is not None:  # the model sees it when nothing else is sent
            blocks = [TextContent(text=encoded.decode())]
    return McpResult(
        content=tuple(_bounded(blocks)), details=details, is_error=raw.get("isError") is True
    )
