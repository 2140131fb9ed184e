"""The slash commands of ``harness chat``, and prompt templates as ``/name args``.

Each command prints through the chat's view (which escapes terminal controls) and leaves the
chat running; a mistake (an unknown command, a bad argument, an entry that does not exist) is
one ``error: ...`` line and changes nothing. The renderers are the ``sessions`` and ``export``
commands' own.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from harness import make_model, parse_model_spec
from hooks import HarnessError
from repos import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    Session,
)

from .._resources import split_command
from .._restore import THINKING_LEVELS
from ._common import one_line
from ._export import session_html, session_jsonl, session_markdown
from ._models import model_lines
from ._render import tree_view

if TYPE_CHECKING:
    from ._chat import Chat

__all__ = ["COMMANDS", "run_command"]


class CommandError(Exception):
    """A command used wrongly: its message is printed as ``error: ...``."""


@frozen
class Command:
    """``run(chat, args)``; None for ``/exit``, which ends the loop instead."""

    usage: str
    summary: str
    run: Callable[[Chat, str], Awaitable[None]] | None


async def _tree(chat: Chat, args: str) -> None:
    _no_args("/tree", args)
    for line in tree_view(chat.session).lines:
        chat.view.line(line)
    chat.view.note(f"active leaf: {chat.session.leaf_id or '(before the first entry)'}")


async def _fork(chat: Chat, args: str) -> None:
    if len(args.split()) > 1:
        raise CommandError("usage: /fork [ENTRY] (an entry id from /tree; default the leaf)")
    entry = args or None
    source = chat.session
    new = await chat.repo.fork(
        source.path or source.id, entry_id=entry, position="at" if entry else None
    )
    await chat.switch_to(new)
    where = f" at {entry}" if entry else ""
    chat.view.line(f"forked {source.id}{where} into {new.id} ({new.path}); the chat goes on there")


async def _checkout(chat: Chat, args: str) -> None:
    if not args or len(args.split()) != 1:
        raise CommandError("usage: /checkout ENTRY (an entry id from /tree)")
    result = await chat.harness.navigate_tree(args)
    if result.cancelled:
        chat.view.line("cancelled by a hook")
        return
    chat.view.line(f"leaf: {result.old_leaf_id} -> {result.new_leaf_id}")
    if result.editor_text is not None:  # offered at the next prompt, to edit and resend
        chat.edit_text = result.editor_text


_REWIND_USAGE = "usage: /rewind ENTRY [--files-only|--conversation-only|--both] [--force]"


async def _rewind(chat: Chat, args: str) -> None:
    words = args.split()
    entries = [w for w in words if not w.startswith("--")]
    flags = set(words) - set(entries)
    known = {"--files-only", "--conversation-only", "--both", "--force"}
    if len(entries) != 1 or flags - known or len(flags & (known - {"--force"})) > 1:
        raise CommandError(_REWIND_USAGE)
    force = "--force" in flags
    if "--conversation-only" in flags:
        result = await chat.harness.navigate_tree(entries[0])
        files = None
    elif "--files-only" in flags:
        result = None
        files = await chat.harness.rewind_files(entries[0], force=force)
    else:
        result = await chat.harness.navigate_tree(entries[0], with_files=True, force=force)
        files = result.files
    if result is not None:
        if result.cancelled:
            chat.view.line("cancelled by a hook")
            return
        chat.view.line(f"leaf: {result.old_leaf_id} -> {result.new_leaf_id}")
        if result.editor_text is not None:
            chat.edit_text = result.editor_text
    if files is not None:
        for path in files.restored:
            chat.view.line(f"restored {path}")
        for path in files.removed:
            chat.view.line(f"removed {path}")
        for skipped in files.skipped:
            chat.view.line(f"skipped {skipped.path}: {skipped.reason}", "yellow")
        if files.entry_id is None:
            chat.view.line("files: nothing to change")


async def _compact(chat: Chat, args: str) -> None:
    before = len(chat.session.build_context().messages)
    try:
        entry = await chat.harness.compact(args or None)
    finally:
        aborted = await chat.settle_abort()
    if aborted:
        chat.view.line("[interrupted: nothing was compacted]", "yellow")
        return
    if entry is None:
        chat.view.line("nothing to compact")
        return
    after = len(chat.session.build_context().messages)
    chat.view.line(f"compaction {entry.id}: {before} -> {after} messages in context")


async def _label(chat: Chat, args: str) -> None:
    first, _, rest = args.partition(" ")
    named = first if rest.strip() and first in chat.session.entry_ids() else None
    text = rest.strip() if named is not None else args
    if not text:
        raise CommandError("usage: /label [ENTRY] TEXT (ENTRY defaults to the last message)")
    target = named or _last_message_id(chat.session)
    if target is None:
        raise CommandError("the session has no message to label yet")
    leaf = chat.session.leaf_id
    chat.session.set_label(target, text)
    if leaf is not None:
        chat.session.move_to(leaf)  # a label entry must not become the active leaf
    chat.view.line(f"label: {target} = {text!r}")


def _last_message_id(session: Session) -> str | None:
    """The active branch's last message or summary (not a name, label or settings entry)."""
    kinds = (MessageEntry, CustomMessageEntry, CompactionEntry, BranchSummaryEntry)
    return next((e.id for e in reversed(session.get_branch()) if isinstance(e, kinds)), None)


async def _name(chat: Chat, args: str) -> None:
    if args:
        chat.session.set_name(args)
    chat.view.line(f"name: {chat.session.name or '(none)'}")


async def _model(chat: Chat, args: str) -> None:
    if args:
        if chat.offline or chat.choice is None:
            raise CommandError(
                "this chat runs on the scripted offline model; start it without --offline to "
                f"use {args}"
            )
        spec = parse_model_spec(args)
        await chat.harness.set_model(make_model(spec, registry=chat.choice.registry))
        if spec.thinking is not None:
            await chat.harness.set_thinking_level(
                THINKING_LEVELS[THINKING_LEVELS.index(spec.thinking)]
            )
    else:
        registry = chat.harness.registry
        for line in model_lines(registry, chat.harness.model):
            chat.view.line(line)
    model = chat.harness.model
    chat.view.line(f"model: {model.provider}/{model.id}")


async def _thinking(chat: Chat, args: str) -> None:
    if args:
        if args not in THINKING_LEVELS:
            raise CommandError(
                f"thinking level {args!r} is not one of {', '.join(THINKING_LEVELS)}"
            )
        await chat.harness.set_thinking_level(THINKING_LEVELS[THINKING_LEVELS.index(args)])
    chat.view.line(f"thinking: {chat.harness.thinking_level}")


async def _skills(chat: Chat, args: str) -> None:
    _no_args("/skills", args)
    listing = await chat.harness.get_skill_listing()
    for record in listing.records:
        state = "" if record.enabled else " (disabled)"
        chat.view.line(f"{record.name}  [{record.scope}]{state}  {one_line(record.description)}")
    if not listing.records:
        chat.view.line("no skills found")
    for diagnostic in listing.diagnostics:
        chat.view.note(f"{diagnostic.code}: {one_line(diagnostic.message)}")


async def _mcp(chat: Chat, args: str) -> None:
    _no_args("/mcp", args)
    servers = await chat.harness.start_mcp_servers()  # those not up yet are started to show
    if not servers:
        chat.view.line("no MCP servers (harness mcp add NAME -- COMMAND ARGS...)")
    for server in servers:
        tools = f"{len(server.tools)} tools" if server.tools else "no tools"
        chat.view.line(
            f"{server.name}: {server.state} ({server.transport} {server.target}); {tools}"
        )
        if server.error is not None:
            chat.view.note(f"last error: {one_line(server.error)}")
        for tool in server.tools:
            chat.view.line(f"  {tool}")


_EXPORTERS: dict[str, Callable[..., str | bytes]] = {
    "html": session_html,
    "md": session_markdown,
    "jsonl": session_jsonl,
}


async def _export(chat: Chat, args: str) -> None:
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise CommandError(f"usage: /export [html|md|jsonl] [FILE]: {exc}") from None
    fmt = words.pop(0) if words and words[0] in _EXPORTERS else "html"
    if len(words) > 1 or (words and words[0] in ("-h", "--help")):
        raise CommandError("usage: /export [html|md|jsonl] [FILE]")
    if words and not Path(words[0]).suffix and "/" not in words[0]:
        # `/export xml` is a format we lack, not a file to be named "xml".
        raise CommandError(
            f"unknown format {words[0]!r} (html, md or jsonl); a FILE needs a suffix"
        )
    path, size = _write_export(chat.session, fmt, words[0] if words else None)
    chat.view.line(f"wrote {path} ({fmt}, {size} bytes)")


def _write_export(session: Session, fmt: str, name: str | None) -> tuple[Path, int]:
    """Write ``session`` as ``fmt`` to ``name`` (default ``<id>.<fmt>`` in the current folder);
    the path and the bytes written. Raises ``OSError``."""
    path = Path(name).expanduser() if name else Path(f"{session.id}.{fmt}")
    data = _EXPORTERS[fmt](session)
    payload = data.encode() if isinstance(data, str) else data
    path.write_bytes(payload)
    return path, len(payload)


async def _help(chat: Chat, args: str) -> None:
    for command in COMMANDS.values():
        chat.view.line(f"{command.usage:<24} {command.summary}")
    chat.view.line(f"{'//TEXT':<24} send /TEXT as a prompt")
    for template in chat.harness.templates:
        hint = f" {template.argument_hint}" if template.argument_hint else ""
        usage = f"/{template.name}{hint}"
        chat.view.line(f"{usage:<24} template: {one_line(template.description)}")


def _no_args(name: str, args: str) -> None:
    if args:
        raise CommandError(f"{name} takes no arguments")


COMMANDS: dict[str, Command] = {
    "tree": Command("/tree", "show the session tree (* marks the active leaf)", _tree),
    "fork": Command(
        "/fork [ENTRY]", "copy the branch (up to ENTRY) into a new session; go on there", _fork
    ),
    "checkout": Command("/checkout ENTRY", "move the active leaf to ENTRY", _checkout),
    "rewind": Command(
        "/rewind ENTRY [--files-only|--conversation-only]",
        "put the files and the conversation back as at ENTRY (needs --checkpoints)",
        _rewind,
    ),
    "compact": Command(
        "/compact [INSTRUCTIONS]", "summarise the older messages into one entry", _compact
    ),
    "label": Command("/label [ENTRY] TEXT", "label ENTRY (default: the last message)", _label),
    "name": Command("/name [TEXT]", "show or set the session's name", _name),
    "model": Command(
        "/model [M]", "list the known models, or switch to M (provider/id[:thinking])", _model
    ),
    "thinking": Command(
        "/thinking [LEVEL]",
        f"show or set the thinking level ({', '.join(THINKING_LEVELS)})",
        _thinking,
    ),
    "skills": Command("/skills", "list the skills the agent is offered", _skills),
    "mcp": Command("/mcp", "the MCP servers: status, last error and tools", _mcp),
    "export": Command(
        "/export [FORMAT] [FILE]", "write the session as html (default), md or jsonl", _export
    ),
    "help": Command("/help", "this list, then the prompt templates", _help),
    "exit": Command("/exit", "end the chat (so do Ctrl-D, and Ctrl-C on an empty prompt)", None),
}


async def run_command(chat: Chat, text: str) -> bool:
    """Run one ``/command args`` line (a template name sends the expanded template); False
    when the chat should end."""
    parsed = split_command(text)
    name, args = parsed if parsed is not None else (text[1:].split(" ", 1)[0], "")
    command = COMMANDS.get(name) if parsed is not None else None
    if command is None:
        if parsed is not None and any(t.name == name for t in chat.harness.templates):
            await chat.turn(text)  # the harness expands the template
            return True
        chat.view.error(
            f"error: unknown command /{name}; /help lists the commands "
            "(//TEXT sends /TEXT as a prompt)"
        )
        return True
    if command.run is None:
        return False
    try:
        await command.run(chat, args)
    except CommandError as exc:
        chat.view.error(f"error: {exc}")
    except HarnessError as exc:
        chat.view.error(f"error[{exc.code}]: {one_line(str(exc))}")
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        chat.view.error(f"error: {where}{exc.strerror or exc}")
    return True
