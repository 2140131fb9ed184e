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
from typing import Protocol

from attrs import frozen

from harness import (
    AgentHarness,
    PermissionRules,
    SessionRepo,
    UserMessage,
    context_size,
    make_model,
    parse_model_spec,
    user_settings_path,
)
from hooks import HarnessError
from repos import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    ForkPosition,
    MessageEntry,
    Session,
)

from .._checkpoints import NoCheckpointsError, has_records
from .._permissions.rules import load_settings
from .._permissions.supervisor import PROJECT_SETTINGS
from .._resources import split_command
from .._restore import THINKING_LEVELS
from ._agent import Agents
from ._chat_input import LineReader
from ._chat_view import ChatView
from ._common import (
    MIN_PREFIX,
    cli_text,
    describe_store,
    file_name,
    find_ref,
    one_line,
    open_ref,
    resolve_entry,
    shown_leaf,
)
from ._export import (
    default_export_path,
    session_html,
    session_jsonl,
    session_markdown,
    write_export,
)
from ._models import ModelChoice, model_lines
from ._render import totals, tree_view

__all__ = ["COMMANDS", "ChatHost", "run_command"]


class ChatHost(Protocol):
    """What the commands use of a chat (``_chat.Chat`` is one): its store, session, harness,
    view and reader, the text offered at the next prompt, and how to switch sessions."""

    repo: SessionRepo
    session: Session
    harness: AgentHarness
    agents: Agents
    view: ChatView
    reader: LineReader
    edit_text: str
    offline: bool
    choice: ModelChoice | None
    cwd: Path

    async def switch_to(self, session: Session) -> None: ...

    async def turn(self, text: str) -> None: ...

    async def settle_abort(self) -> bool: ...


class CommandError(Exception):
    """A command used wrongly: its message is printed as ``error: ...``."""


@frozen
class Command:
    """``run(chat, args)``; None for ``/exit``, which ends the loop instead."""

    usage: str
    summary: str
    run: Callable[[ChatHost, str], Awaitable[None]] | None


async def _tree(chat: ChatHost, args: str) -> None:
    _no_args("/tree", args)
    for line in tree_view(chat.session).lines:
        chat.view.line(line)
    chat.view.note(f"active leaf: {shown_leaf(chat.session.leaf_id)}")


async def _fork(chat: ChatHost, args: str) -> None:
    words = args.split()
    at = "--at" in words
    entries = [w for w in words if w != "--at"]
    if len(entries) > 1 or (at and not entries) or len(words) - len(entries) > 1:
        raise CommandError(
            "usage: /fork [ENTRY [--at]] (an entry id from /tree or a unique prefix of at least "
            f"{MIN_PREFIX} characters; default: the whole branch)"
        )
    entry = _entry(chat, entries[0]) if entries else None
    source = chat.session
    message = _user_message(source, entry) if entry is not None and not at else None
    # pi's /fork: from a user message, the fork ends before it and its text comes back to edit;
    # any other entry (or --at) is kept in the fork.
    position: ForkPosition | None = (
        "before" if message is not None else "at" if entry is not None else None
    )
    new = await chat.repo.fork(source.path or source.id, entry_id=entry, position=position)
    await chat.switch_to(new)
    where = f" {'before' if position == 'before' else 'at'} {entry}" if entry else ""
    stored = new.path or describe_store(chat.repo)
    chat.view.line(f"forked {source.id}{where} into {new.id} ({stored}); the chat goes on there")
    if message is not None:
        chat.edit_text = message.text


def _user_message(session: Session, entry_id: str) -> UserMessage | None:
    """The user message entry ``entry_id`` holds, if it is one."""
    try:
        entry = session.get_entry(entry_id)
    except HarnessError:
        return None  # the fork says what is wrong with the id
    if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
        return entry.message
    return None


async def _new(chat: ChatHost, args: str) -> None:
    _no_args("/new", args)
    new = await chat.repo.create(str(chat.cwd))
    old = chat.session.id
    await chat.switch_to(new)
    chat.view.line(f"new session {new.id} (the last one, {old}, is kept)")


async def _resume(chat: ChatHost, args: str) -> None:
    if len(args.split()) > 1:
        raise CommandError("usage: /resume [ID] (no ID: pick from this folder's sessions)")
    ref = args or await _pick(chat)
    if ref is None:
        return
    session = await open_ref(chat.repo, await find_ref(chat.repo, ref))
    if session.id == chat.session.id:
        session.close()
        chat.view.line(f"already in session {session.id}")
        return
    await chat.switch_to(session)
    count = len(session.build_context().messages)
    chat.view.line(f"resumed session {session.id} ({count} messages in context)")


async def _pick(chat: ChatHost) -> str | None:
    """The recent sessions of the chat's folder, numbered; the one the user picks."""
    infos = [i for i in await chat.repo.list(str(chat.cwd)) if i.id != chat.session.id][:20]
    if not infos:
        chat.view.line(f"no other session of {chat.cwd} in {describe_store(chat.repo)}")
        return None
    for n, info in enumerate(infos, start=1):
        first = " ".join(info.first_message.split())[:60] or "(no message)"
        when = info.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        chat.view.line(f"{n:>3}. {when}  {info.id[:8]}  {first}")
    answer = (await chat.reader.answer(f"resume which (1-{len(infos)}, Enter: none)? ")).strip()
    if not answer:
        return None
    if not answer.isdigit() or not 1 <= int(answer) <= len(infos):
        raise CommandError(f"{answer!r} is not a number from 1 to {len(infos)}")
    picked = infos[int(answer) - 1]
    return str(picked.path) if picked.path is not None else picked.id


async def _cost(chat: ChatHost, args: str) -> None:
    _no_args("/cost", args)
    total = totals(chat.session.entries(), chat.harness.registry)
    chat.view.line(f"session {chat.session.id}: {total.line()}")


async def _status(chat: ChatHost, args: str) -> None:
    _no_args("/status", args)
    h, s = chat.harness, chat.session
    try:
        mode: str = chat.agents.supervisor.mode_for(h.cwd)
    except ValueError as exc:
        mode = f"unknown ({one_line(str(exc))})"
    context = s.build_context().messages
    used = context_size(context).tokens
    window = h.context_window
    lines = [
        f"session: {s.id}" + (f" ({one_line(s.name)})" if s.name else ""),
        f"stored: {s.path or describe_store(chat.repo)}",
        f"working folder: {h.cwd}",
        f"model: {h.model.provider}/{h.model.id}; thinking: {h.thinking_level}",
        f"permission mode: {mode}",
        f"context: {len(context)} messages, about {used:,} of {window:,} tokens "
        f"({100 * used // max(window, 1)}%)",
        f"tools: {', '.join(h.active_tools) or 'none'}",
        f"checkpoints: {'on' if h.checkpoints is not None else 'off'}",
    ]
    for line in lines:
        chat.view.line(line)


async def _permissions(chat: ChatHost, args: str) -> None:
    verb, _, key = args.strip().partition(" ")
    key = key.strip()  # an operation key may hold spaces: bash(echo 41)
    if verb and (verb != "revoke" or not key):
        raise CommandError("usage: /permissions [revoke KEY] (KEY: an approval listed here)")
    if verb:
        if not chat.harness.revoke_approval(key):
            raise CommandError(f"{key!r} is not approved always in this session")
        chat.view.line(f"revoked {key}: it is asked again")
        return
    h = chat.harness
    try:
        chat.view.line(f"mode: {chat.agents.supervisor.mode_for(h.cwd)}")
    except ValueError as exc:
        chat.view.line(f"mode: unknown, every call is denied ({one_line(str(exc))})")
    trusted = chat.agents.opts.trusts(h.cwd)
    sources: list[tuple[str, PermissionRules, bool]] = [
        ("command line", chat.agents.supervisor.rules, True),
        (str(user_settings_path()), load_settings(user_settings_path()).rules, True),
    ]
    project = h.cwd / PROJECT_SETTINGS
    try:
        sources.append((str(project), load_settings(project, root=h.cwd).rules, trusted))
    except ValueError as exc:
        chat.view.note(f"{one_line(str(exc))}")
    for where, rules, allows in sources:
        for kind in ("deny", "ask", "allow"):
            for rule in getattr(rules, kind):
                ignored = "" if allows or kind != "allow" else "  (ignored: not trusted)"
                chat.view.line(f"{kind:<5} {rule.text}  [{where}]{ignored}")
    approvals = sorted(h.approvals)
    for key in approvals:
        chat.view.line(f"always {key}  [this session; /permissions revoke {key}]")
    if not approvals:
        chat.view.line("no call approved always in this session")


def _entry(chat: ChatHost, ref: str) -> str:
    """:func:`resolve_entry`, its errors naming the chat's ``/tree``."""
    return resolve_entry(
        chat.session,
        ref,
        listed="/tree prints the entry ids; `harness checkpoints list "
        f"{shlex.quote(chat.session.id)}` those that changed files",
    )


async def _checkout(chat: ChatHost, args: str) -> None:
    if not args or len(args.split()) != 1:
        raise CommandError(
            "usage: /checkout ENTRY (an entry id from /tree, or a unique prefix of at least "
            f"{MIN_PREFIX} characters)"
        )
    result = await chat.harness.navigate_tree(_entry(chat, args.strip()))
    if result.cancelled:
        chat.view.line("cancelled by a hook")
        return
    chat.view.line(f"leaf: {shown_leaf(result.old_leaf_id)} -> {shown_leaf(result.new_leaf_id)}")
    if result.editor_text is not None:  # offered at the next prompt, to edit and resend
        chat.edit_text = result.editor_text


_REWIND_USAGE = (
    "usage: /rewind ENTRY [--files-only|--conversation-only|--both] [--force]: put the files "
    "and the conversation back as they were at ENTRY, an entry id from /tree (a unique prefix "
    "of at least 4 characters will do; `harness checkpoints list` shows which entries changed "
    "files: the files after that change). --both (the default) moves both, --files-only only "
    "the files, --conversation-only only the conversation; --force overwrites files changed "
    "outside the session. Files need checkpoints (harness chat --checkpoints); it ends with the "
    "/rewind that undoes it"
)


async def _rewind(chat: ChatHost, args: str) -> None:
    words = args.split()
    entries = [w for w in words if not w.startswith("--")]
    flags = set(words) - set(entries)
    known = {"--files-only", "--conversation-only", "--both", "--force"}
    if not words:  # `/rewind` alone explains it: help, not an error
        chat.view.line(_REWIND_USAGE)
        return
    if len(entries) != 1 or flags - known or len(flags & (known - {"--force"})) > 1:
        raise CommandError(_REWIND_USAGE)
    entry = _entry(chat, entries[0])
    files_too = "--conversation-only" not in flags
    if files_too and chat.harness.checkpoints is not None and not has_records(chat.session):
        # Recorded without checkpoints: say so, not "nothing to change".
        raise NoCheckpointsError(conversation=f"/rewind {entry} --conversation-only")
    force = "--force" in flags
    if "--conversation-only" in flags:
        result = await chat.harness.navigate_tree(entry)
        files = None
    elif "--files-only" in flags:
        result = None
        files = await chat.harness.rewind_files(entry, force=force)
    else:
        result = await chat.harness.navigate_tree(entry, with_files=True, force=force)
        files = result.files
    if result is not None:
        if result.cancelled:
            chat.view.line("cancelled by a hook")
            return
        moved = f"{shown_leaf(result.old_leaf_id)} -> {shown_leaf(result.new_leaf_id)}"
        chat.view.line(f"leaf: {moved}")
        if result.editor_text is not None:
            chat.edit_text = result.editor_text
    if files is not None:
        for path in files.restored:
            chat.view.line(f"restored {file_name(path)}")
        for path in files.removed:
            chat.view.line(f"removed {file_name(path)}")
        for skipped in files.skipped:
            chat.view.line(f"skipped {file_name(skipped.path)}: {skipped.reason}", "yellow")
        for missed in files.missed:
            line = (
                f"not restored {file_name(missed.path)}: its change was not recorded "
                f"({missed.reason})"
            )
            chat.view.line(line, "yellow")
        if files.entry_id is None:
            chat.view.line(
                "files: nothing recorded to change; what was not recorded cannot be restored"
                if files.missed
                else "files: nothing to change"
            )
    # The old leaf (or, files only, the leaf the rewind started from) was written before it.
    if result is not None and result.old_leaf_id is not None:
        flag = " --conversation-only" if files is None else ""
        chat.view.line(f"to undo: /rewind {result.old_leaf_id}{flag}")
    elif files is not None and files.undo_id is not None:
        chat.view.line(f"to undo: /rewind {files.undo_id} --files-only")


async def _compact(chat: ChatHost, args: str) -> None:
    before = len(chat.session.build_context().messages)
    try:
        # Asked for, so forced: below the threshold too, keeping only the last message.
        entry = await chat.harness.compact(args or None, force=True)
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


async def _label(chat: ChatHost, args: str) -> None:
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


async def _name(chat: ChatHost, args: str) -> None:
    if args:
        chat.session.set_name(args)
    chat.view.line(f"name: {chat.session.name or '(none)'}")


async def _model(chat: ChatHost, args: str) -> None:
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


async def _thinking(chat: ChatHost, args: str) -> None:
    if args:
        if args not in THINKING_LEVELS:
            raise CommandError(
                f"thinking level {args!r} is not one of {', '.join(THINKING_LEVELS)}"
            )
        await chat.harness.set_thinking_level(THINKING_LEVELS[THINKING_LEVELS.index(args)])
    chat.view.line(f"thinking: {chat.harness.thinking_level}")


async def _skills(chat: ChatHost, args: str) -> None:
    _no_args("/skills", args)
    listing = await chat.harness.get_skill_listing()
    for record in listing.records:
        state = "" if record.enabled else " (disabled)"
        chat.view.line(f"{record.name}  [{record.scope}]{state}  {one_line(record.description)}")
    if not listing.records:
        chat.view.line("no skills found")
    for diagnostic in listing.diagnostics:
        chat.view.note(f"{diagnostic.code}: {one_line(diagnostic.message)}")


async def _mcp(chat: ChatHost, args: str) -> None:
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


async def _export(chat: ChatHost, args: str) -> None:
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
    path = Path(name).expanduser() if name else default_export_path(session, fmt)
    data = _EXPORTERS[fmt](session)
    payload = data.encode() if isinstance(data, str) else data
    return write_export(path, payload, new=not name), len(payload)


async def _help(chat: ChatHost, args: str) -> None:
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
    "new": Command("/new", "start a new session in this folder (the last one is kept)", _new),
    "clear": Command("/clear", "the same as /new", _new),
    "resume": Command(
        "/resume [ID]", "go on in another session (no ID: pick from this folder's)", _resume
    ),
    "fork": Command(
        "/fork [ENTRY [--at]]",
        "copy the branch into a new session and go on there; from a user message, fork "
        "before it and offer its text again (--at: keep it)",
        _fork,
    ),
    "checkout": Command("/checkout ENTRY", "move the active leaf to ENTRY", _checkout),
    "rewind": Command(
        "/rewind ENTRY [--files-only|--conversation-only|--both] [--force]",
        "put the files and the conversation back as at ENTRY (files: needs --checkpoints; "
        "/rewind alone explains)",
        _rewind,
    ),
    "compact": Command(
        "/compact [INSTRUCTIONS]",
        "summarise all but the last message into one entry, now",
        _compact,
    ),
    "cost": Command("/cost", "tokens and cost of the session so far", _cost),
    "status": Command("/status", "session, store, model, mode, context use", _status),
    "permissions": Command(
        "/permissions [revoke KEY]",
        "rules in force and calls approved always; revoke one",
        _permissions,
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


async def run_command(chat: ChatHost, text: str) -> bool:
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
        chat.view.error(f"error[{exc.code}]: {one_line(cli_text(exc))}")
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        chat.view.error(f"error: {where}{exc.strerror or exc}")
    return True
