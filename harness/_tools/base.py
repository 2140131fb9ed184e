"""What a tool is, what it returns, and what it is given when it runs."""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

from attrs import field, frozen

from hooks import JSONValue, TextContent, UserContent

from .._errors import ToolError
from .sandbox import Sandbox

__all__ = [
    "Tool",
    "ToolExecute",
    "ToolKind",
    "ToolResult",
    "ToolRun",
    "resolve_in_cwd",
    "safe_text",
    "tool",
    "validate_input",
]


def _blocks(value: Sequence[UserContent] | str) -> tuple[UserContent, ...]:
    if isinstance(value, str):
        return (TextContent(text=value),)
    return tuple(value)


@frozen(kw_only=True)
class ToolResult:
    """What a tool returns: ``content`` for the model (text or text/image blocks), ``details``
    for applications (persisted, never sent to the model), and whether it failed."""

    content: tuple[UserContent, ...] = field(converter=_blocks)
    details: JSONValue = None
    is_error: bool = False


ToolKind: TypeAlias = Literal["read", "edit", "execute", "other"]
"""What a tool does, for the supervisor's modes: ``plan`` denies ``edit`` and ``execute`` tools,
``accept_edits`` approves ``edit`` tools inside the working folder."""


@frozen(kw_only=True)
class ToolRun:
    """What a running tool is given besides its input.

    Attributes:
        tool_call_id: the model's id for this call.
        cwd: the working directory; built-in tools refuse paths outside it.
        context: the harness's ``tool_context`` for this turn (application state), or None.
        confined: True unless the supervisor approved this call going outside ``cwd``; the
            built-in file tools then refuse any path that resolves outside it.
        approved_path: the absolute path (symlinks resolved when the supervisor decided) the
            decision covers, inside ``cwd`` or (approved) outside it. The built-in file tools
            then open exactly that path and follow no symlink on it, so a symlink swapped in
            after the decision cannot redirect them; with ``confined`` False and
            no ``approved_path``, they open the given path made absolute and normalised
            lexically, again through no symlink.
        hidden: for a call that walks a folder (``grep``, ``find``, ``ls``), whether a path
            beneath it (relative to the folder walked, ``/``-separated) is one the supervisor
            keeps from being read (a deny or ask ``read`` rule matches it); the built-in tools
            leave such files out and say how many. None: nothing is hidden.
        sandbox: for a command, what it may not change or read (the ``bash`` tool runs it in
            a bubblewrap mount namespace built from it); None: a person approved this call,
            or the supervisor gives none.
    """

    tool_call_id: str
    cwd: Path
    context: Any = None
    confined: bool = True
    approved_path: str | None = None
    hidden: Callable[[str], bool] | None = None
    sandbox: Sandbox | None = None
    _on_update: Callable[[JSONValue], Awaitable[None]] = field(alias="on_update")

    async def update(self, partial: JSONValue) -> None:
        """Report progress; observers see it as a ``tool_execution_update`` event."""
        await self._on_update(partial)


ToolExecute: TypeAlias = Callable[[Mapping[str, JSONValue], ToolRun], Awaitable[ToolResult | str]]
"""``async def execute(input, run) -> ToolResult | str``; a plain string is a text result.
Raising makes an ``is_error`` result from the exception's message."""


@frozen(kw_only=True)
class Tool:
    """A tool the model can call.

    Attributes:
        name: unique among the harness's tools; what the model calls.
        description: what the model is told the tool does.
        parameters: JSON Schema of the input object; input is validated against it before
            ``tool_call`` hooks run, and a mismatch becomes an error result the model can fix.
        execute: the implementation (see :data:`ToolExecute`).
        sequential: run this tool alone, never alongside other calls of the same turn.
        kind: what the tool does (:data:`ToolKind`), for the supervisor's permission modes.
        controlled: every call needs the supervisor's approval (``bash``, ``write``, ``edit``);
            an uncontrolled call needs it only when a path of it leaves the working folder.
        target: name of the input property saying what a call touches, for operation keys and
            rules: a path (relative to the working folder) or, for ``execute`` tools, a command.
            None: the tool name alone is the operation key.
    """

    name: str
    description: str
    parameters: Mapping[str, JSONValue] = field(factory=lambda: {"type": "object"})
    execute: ToolExecute
    sequential: bool = False
    kind: ToolKind = "other"
    controlled: bool = False
    target: str | None = None


def tool(
    name: str,
    description: str,
    parameters: Mapping[str, JSONValue] | None = None,
    *,
    sequential: bool = False,
    kind: ToolKind = "other",
    controlled: bool = False,
    target: str | None = None,
) -> Callable[[ToolExecute], Tool]:
    """Decorator sugar: turn ``async def f(input, run)`` into a :class:`Tool` (the keyword
    arguments are :class:`Tool`'s)."""

    def wrap(fn: ToolExecute) -> Tool:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {name!r}: execute must be an async function")
        return Tool(
            name=name,
            description=description,
            parameters=parameters if parameters is not None else {"type": "object"},
            execute=fn,
            sequential=sequential,
            kind=kind,
            controlled=controlled,
            target=target,
        )

    return wrap


def validate_input(t: Tool, value: Mapping[str, JSONValue]) -> str | None:
    """None if ``value`` matches the tool's schema, else a short message for the model."""
    import jsonschema  # here, not at the top: `import harness` stays fast (issue 24)

    validator_cls = jsonschema.validators.validator_for(t.parameters)
    error = jsonschema.exceptions.best_match(validator_cls(t.parameters).iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "input"
    return f"invalid arguments for {t.name}: {where}: {error.message}"


def safe_text(value: str | os.PathLike[str]) -> str:
    """``value`` as text that always encodes as UTF-8 (and so as JSON in a session file).

    File names and paths need not be UTF-8: Python shows their undecodable bytes as lone
    surrogates (``"bad\\udcffname"``), which JSON encoders refuse. Those bytes become
    backslash escapes (``"bad\\xffname"``); any other lone surrogate becomes ``\\udXXX``.
    """
    text = os.fspath(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return os.fsencode(text).decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that is no escaped byte
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def resolve_in_cwd(cwd: Path, path: str) -> Path:
    """Resolve ``path`` (relative to ``cwd`` or absolute) and refuse anything outside ``cwd``.

    Symlinks are resolved first, so a link pointing outside is refused too. This is a check
    only: a folder on the path can be swapped for a symlink before the caller opens it. The
    built-in tools therefore open beneath the working directory instead (``openat2`` with
    ``RESOLVE_BENEATH``), which leaves no such window. The returned path may hold undecodable
    bytes; pass it through :func:`safe_text` before putting it in a result.

    Raises:
        ToolError: the path leaves the working directory (its message is UTF-8 safe).
    """
    root = cwd.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"{safe_text(path)!r} is outside the working directory {safe_text(root)}")
    return target
