"""Plain-text and JSON renderings of sessions, contexts and trees. No I/O: every function returns
strings or JSON-ready values, and the commands print them.

Decorations are ASCII only (``...``, ``|-``, ``->``), so the output survives any pipe. Session
text is returned as stored: every sink escapes it for its output kind (``_escape.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import orjson

from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    JSONValue,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserContent,
    UserMessage,
)
from repos import (
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
    Session,
    SessionContext,
    SessionInfo,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    TreeNode,
    UnknownEntry,
    without_surrogates,
)

from ._common import one_line, short_id

if TYPE_CHECKING:
    from harness import ModelRegistry

# The names this module uses from `harness` itself (the agents, permissions and the model
# registry) are imported where they are used: `harness sessions list` needs none of them.

__all__ = [
    "DEFAULT_MAX_CHARS",
    "Totals",
    "TreeView",
    "context_lines",
    "cost_json",
    "entry_kind",
    "entry_text",
    "info_json",
    "parent_ref",
    "reply_totals",
    "session_table",
    "short",
    "totals",
    "tree_view",
]

DEFAULT_MAX_CHARS = 2000
"""Default cap on a tool result in ``show`` (0 disables it); tool-call arguments are cut at the
smaller of this and 500 characters."""

_THINKING_CHARS = 200
_ARGS_CHARS = 500  # tool-call arguments share a line with the call, so they get a smaller cap
_SHORT_CHARS = 60
_INDENT = "    "


# --- small helpers ----------------------------------------------------------------------------


def short(text: str, width: int = _SHORT_CHARS) -> str:
    """``text`` on one line, cut to ``width`` characters with ``...`` when longer."""
    flat = one_line(text)
    return flat if len(flat) <= width else flat[: max(width - 3, 0)] + "..."


def _capped(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` (0: no cap) with a note saying how much was left out."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    left = len(text) - max_chars
    return f"{text[:max_chars]}\n... [truncated: {left} more characters; --max-chars 0 shows all]"


def _capped_inline(text: str, max_chars: int) -> str:
    """Like :func:`_capped`, but the note stays on the same line (for tool-call arguments)."""
    limit = min(max_chars, _ARGS_CHARS) if max_chars > 0 else 0
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}... [truncated: {len(text) - limit} more characters]"


def _json(value: JSONValue) -> str:
    # Arguments are JSON read from a file; anything orjson cannot encode (a Mapping that is not a
    # dict) is converted rather than crashing the display.
    try:
        return orjson.dumps(value, default=_jsonable).decode()
    except orjson.JSONEncodeError:  # a lone surrogate: shown as U+FFFD
        return orjson.dumps(without_surrogates(value), default=_jsonable).decode()


def _jsonable(value: object) -> JSONValue:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def _indented(text: str) -> list[str]:
    # Split on newlines only: str.splitlines would also split on (so hide) controls such as
    # U+0085 or U+2028, which the terminal sink shows escaped.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [_INDENT + line if line else "" for line in lines] or [_INDENT + "(empty)"]


def _user_content_text(content: str | Iterable[UserContent]) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image {block.mime_type}, {len(block.data)} base64 chars]")
        else:
            parts.append(f"[{block.type or 'unknown'} block]")
    return "\n".join(parts)


# --- usage totals ---------------------------------------------------------------------------


def _agent_link(result: ToolResultMessage) -> str:
    """`` [agent NAME: session ID]`` for the result of a ``task`` call that links its child
    session (its ``details``; from the file, so shown escaped and cut)."""
    from harness import TASK_TOOL_NAME

    details = result.details
    if result.tool_name != TASK_TOOL_NAME or not isinstance(details, Mapping):
        return ""
    agent, child = details.get("agent"), details.get("sessionId")
    if not isinstance(agent, str) or not isinstance(child, str):
        return ""
    return f" [agent {short(agent, 40)}: session {short_id(one_line(child))}]"


def origin_note(session: Session) -> str:
    """How ``tree``'s first line says where a session comes from: ``(sub-agent NAME of
    PARENT, tool call ID)`` when its header's ``metadata`` names the agent and the parent's
    call (a ``task`` tool's child session), ``(fork of PARENT)`` for another child; "" for
    none. From the file: information only, shown escaped and cut."""
    parent = parent_ref(session.header.parent_session)
    if not parent:
        return ""
    metadata = session.header.metadata
    agent = metadata.get("agent") if isinstance(metadata, Mapping) else None
    call = metadata.get("parentToolCallId") if isinstance(metadata, Mapping) else None
    if isinstance(agent, str) and isinstance(call, str):
        return f"  (sub-agent {short(agent, 40)} of {parent}, tool call {short(call, 40)})"
    return f"  (fork of {parent})"


@attrs.frozen(kw_only=True)
class Totals:
    """Token usage (tokens) and cost (US dollars) summed over assistant messages.

    ``cost`` is what the replies recorded plus, for replies that recorded none (imported
    Claude Code sessions, older files), their token counts at the registry's prices:
    ``estimated`` is that part. ``unpriced`` counts replies with tokens but no known price.
    """

    replies: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0
    estimated: float = 0.0
    unpriced: int = 0

    @property
    def any(self) -> bool:
        """Whether any reply carried usage (imported or scripted replies may carry none)."""
        return bool(self.input or self.output or self.cache_read or self.cache_write or self.cost)

    def cost_text(self) -> str:
        """``$0.1234``, with how much of it is estimated and how many replies had no price."""
        text = f"${self.cost:.4f}"
        if self.estimated:
            text += f" (estimated from token counts: ${self.estimated:.4f})"
        if self.unpriced:
            text += f" (+ {self.unpriced} replies of unknown price)"
        return text

    def line(self) -> str:
        return (
            f"{self.replies} replies; tokens: {self.input} input, {self.output} output, "
            f"{self.cache_read} cache read, {self.cache_write} cache write; "
            f"cost {self.cost_text()}"
        )


def totals(entries: Iterable[Entry], registry: ModelRegistry | None = None) -> Totals:
    """The usage of the assistant messages among ``entries``; a reply that recorded no cost is
    priced from its tokens at ``registry``'s prices (default: the package's registry)."""
    return reply_totals((e.message for e in entries if isinstance(e, MessageEntry)), registry)


def reply_totals(messages: Iterable[Message], registry: ModelRegistry | None = None) -> Totals:
    """:func:`totals` of messages (the assistant ones count)."""
    from harness import ModelRegistry, cost_of

    registry = registry or ModelRegistry.builtin()
    sums = dict.fromkeys(("replies", "input", "output", "cache_read", "cache_write", "unpriced"), 0)
    cost = estimated = 0.0
    for m in messages:
        if isinstance(m, AssistantMessage):
            u = m.usage
            sums["replies"] += 1
            for name in ("input", "output", "cache_read", "cache_write"):
                sums[name] += getattr(u, name)
            if u.cost.total or not (u.input or u.output or u.cache_read or u.cache_write):
                cost += u.cost.total
                continue
            info = registry.find(m.model, m.provider or None)
            priced = cost_of(u, info.prices if info is not None else None)
            if priced is None:
                sums["unpriced"] += 1
            else:
                cost += priced.total
                estimated += priced.total
    return Totals(**sums, cost=cost, estimated=estimated)


# --- show: the model context ------------------------------------------------------------------


def context_lines(
    session: Session,
    context: SessionContext,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    registry: ModelRegistry | None = None,
) -> list[str]:
    """The human form of ``show``: derived state, message counts and usage totals, then one
    block per context message.

    Three counts, since they differ: message entries in the file (every branch: the number
    ``list`` prints), on the active branch, and in the context (after the last compaction,
    without orphaned tool results: what the model sees, numbered below).
    """
    model = context.model
    tools = context.active_tool_names
    lines = [
        f"session: {session.id}",
        f"file: {session.path}" if session.path is not None else "file: (in memory)",
        f"model: {model.provider}/{model.model_id}" if model is not None else "model: (none)",
        f"thinking level: {context.thinking_level}",
        "active tools: " + ("(not set)" if tools is None else ", ".join(tools) or "(none)"),
        f"leaf: {session.leaf_id or '(before the first entry)'}",
    ]
    from harness import remembered_approvals

    honoured = remembered_approvals(session)
    if honoured:  # approve-always decisions of the supervisor (docs/permissions.md)
        lines.append("approved always: " + ", ".join(sorted(honoured)))
    ignored = _recorded_approvals(session) - honoured
    if ignored:  # written by hand, edited, copied or another user's: they grant nothing
        lines.append("approvals not honoured (not signed by you): " + ", ".join(sorted(ignored)))
    ids = session.entry_ids()
    in_file = sum(1 for i in ids if session.entry_type(i) == "message")
    branch = session.get_branch()
    on_branch = sum(1 for e in branch if isinstance(e, MessageEntry))
    # `list` counts message lines by their first bytes, so a damaged one still counts there.
    damaged = sum(1 for d in session.diagnostics if d.code == "corrupt_line")
    where = (
        "as `sessions list` counts"
        if not damaged
        else f"readable; `sessions list` also counts the {damaged} damaged "
        f"{'line' if damaged == 1 else 'lines'} warned about if they are message lines"
    )
    lines.append(
        f"messages: {in_file} in the file ({where}), {on_branch} on the "
        f"active branch, {len(context.messages)} in the context (shown below)"
    )
    used = totals(branch, registry)
    if used.any:
        lines.append(f"usage (active branch): {used.line()}")
    whole = totals(session.entries(), registry) if on_branch != in_file else used
    if whole.any and whole != used:
        lines.append(f"usage (every branch): {whole.line()}")
    for index, message in enumerate(context.messages, start=1):
        lines.append("")
        lines.extend(_message_lines(index, message, max_chars))
    return lines


def _message_lines(index: int, message: Message, max_chars: int) -> list[str]:
    head = f"[{index}] {message.role}"
    if isinstance(message, CompactionSummaryMessage):
        return [
            f"{head} [compaction summary] tokensBefore={message.tokens_before}",
            *_indented(message.summary),
        ]
    if isinstance(message, BranchSummaryMessage):
        return [f"{head} [branch summary] from {message.from_id}", *_indented(message.summary)]
    if isinstance(message, UserMessage):
        return [head, *_indented(_user_content_text(message.content))]
    if isinstance(message, CustomMessage):
        return [
            f"{head} ({message.custom_type})",
            *_indented(_user_content_text(message.content)),
        ]
    if isinstance(message, AssistantMessage):
        return _assistant_lines(head, message, max_chars)
    if isinstance(message, ToolResultMessage):
        flags = " [error]" if message.is_error else ""
        body = _capped(_user_content_text(message.content), max_chars)
        return [f"{head} {message.tool_name} ({message.tool_call_id}){flags}", *_indented(body)]
    if isinstance(message, BashExecutionMessage):
        status = "cancelled" if message.cancelled else f"exit {message.exit_code}"
        body = _capped(message.output, max_chars)
        return [f"{head} ({status})", *_indented(f"$ {message.command}\n{body}")]
    return [head, *_indented(_capped(_json(dict(message.raw)), max_chars))]


def _assistant_lines(head: str, message: AssistantMessage, max_chars: int) -> list[str]:
    source = "/".join(p for p in (message.provider, message.model) if p)
    details = [source] if source else []
    details.append(f"stop={message.stop_reason}")
    if message.error_message:
        details.append(f"error={short(message.error_message)}")
    lines = [f"{head} ({', '.join(details)})"]
    for block in message.content:
        if isinstance(block, TextContent):
            lines.extend(_indented(block.text))
        elif isinstance(block, ThinkingContent):
            text = "redacted" if block.redacted else short(block.thinking, _THINKING_CHARS)
            lines.append(f"{_INDENT}[thinking] {text}")
        elif isinstance(block, ToolCall):
            args = _capped_inline(_json(dict(block.arguments)), max_chars)
            lines.append(f"{_INDENT}-> {block.name}({args})  [{block.id}]")
        else:
            lines.append(f"{_INDENT}[{block.type or 'unknown'} block]")
    return lines


# --- tree ---------------------------------------------------------------------------------------


def entry_kind(entry: Entry) -> str:
    """The type column of ``tree``: the message role for messages, else the entry type."""
    if isinstance(entry, MessageEntry):
        return entry.message.role
    return entry.type


def _recorded_approvals(session: Session) -> set[str]:
    """Every operation key a ``permission`` entry of ``session`` names, signed or not."""
    from harness import PERMISSION_ENTRY

    keys = set()
    for entry in session.entries():
        if isinstance(entry, CustomEntry) and entry.custom_type == PERMISSION_ENTRY:
            data = entry.data
            if isinstance(data, Mapping) and isinstance(data.get("operationKey"), str):
                keys.add(str(data["operationKey"]))
    return keys


def entry_text(entry: Entry) -> str:
    """A short one-line description of an entry, markers for compactions and summaries
    included."""
    if isinstance(entry, MessageEntry):
        return _message_text(entry.message)
    if isinstance(entry, CompactionEntry):
        return (
            f"[compaction] tokensBefore={entry.tokens_before} "
            f"firstKept={entry.first_kept_entry_id} {short(entry.summary, 40)}"
        )
    if isinstance(entry, BranchSummaryEntry):
        return f"[branch summary] from={entry.from_id} {short(entry.summary, 40)}"
    if isinstance(entry, ModelChangeEntry):
        return f"{entry.provider}/{entry.model_id}"
    if isinstance(entry, ThinkingLevelChangeEntry):
        return entry.thinking_level
    if isinstance(entry, ActiveToolsChangeEntry):
        return short(", ".join(entry.active_tool_names) or "(no tools)")
    if isinstance(entry, CustomMessageEntry):
        return f"{entry.custom_type}: {short(_user_content_text(entry.content))}"
    if isinstance(entry, CustomEntry):
        from harness import PERMISSION_ENTRY, RUN_STOP_TYPE

        data = entry.data
        if entry.custom_type == PERMISSION_ENTRY and isinstance(data, Mapping):
            return f"{entry.custom_type}: {data.get('decision')} {data.get('operationKey')}"
        if entry.custom_type == RUN_STOP_TYPE and isinstance(data, Mapping):
            return f"{entry.custom_type}: {short(str(data.get('stopReason')), 40)}"
        return entry.custom_type
    if isinstance(entry, LabelEntry):
        return (
            f"{entry.target_id} = {entry.label!r}" if entry.label else f"{entry.target_id} cleared"
        )
    if isinstance(entry, SessionInfoEntry):
        return f"name={entry.name!r}" if entry.name else ""
    if isinstance(entry, LeafEntry):
        return f"-> {entry.target_id or '(before the first entry)'}"
    if isinstance(entry, UnknownEntry):
        return "(unknown entry type)"
    return ""


def _message_text(message: Message) -> str:
    if isinstance(message, UserMessage | CustomMessage):
        return short(_user_content_text(message.content))
    if isinstance(message, AssistantMessage):
        parts: list[str] = []
        if message.text.strip():
            parts.append(message.text)
        if not parts and any(isinstance(b, ThinkingContent) for b in message.content):
            parts.append("[thinking]")
        calls = message.tool_calls
        if calls:
            parts.append("-> " + ", ".join(c.name for c in calls))
        text = short(" ".join(parts)) if parts else "(empty)"
        return (
            text
            if message.stop_reason in ("stop", "toolUse")
            else f"{text} ({message.stop_reason})"
        )
    if isinstance(message, ToolResultMessage):
        flag = " [error]" if message.is_error else ""
        return f"{message.tool_name}{flag}: {short(message.text, 40)}{_agent_link(message)}"
    if isinstance(message, BashExecutionMessage):
        return short(f"$ {message.command}")
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return short(message.summary)
    if isinstance(message, UnknownMessage):
        return "(unknown message role)"
    return ""


@attrs.frozen(kw_only=True)
class TreeView:
    """The lines of ``tree`` and what they left out.

    ``hidden_entries`` counts the entries not drawn: label and leaf entries (labels are shown on
    their targets instead) and names set off the active path with nothing after them.
    ``leaf_line`` is the entry drawn as the active leaf (the leaf itself, or its nearest drawn
    ancestor when the leaf is a hidden entry), None when nothing is.
    """

    lines: tuple[str, ...]
    shown: int
    hidden_entries: int
    leaf_line: str | None


def _is_bookkeeping(entry: Entry) -> bool:
    return isinstance(entry, LabelEntry | LeafEntry)


_GUTTER = 60
"""Widest branch gutter drawn (20 levels of ``|  ``); a deeper line starts with ``[+N]``, the
levels left out on its left, so a line's length, and the output's, stays linear in the
session (a comb-shaped session of 12,000 entries printed 430 MB: review 12, finding 8)."""


def tree_view(session: Session, *, show_all: bool = False) -> TreeView:
    """Every entry of ``session`` as one line, in depth-first file order.

    Indentation grows only at branch points (a node with several children), so a linear path of
    any length stays flat; branches are drawn with ``|-``/``` `- ``` connectors and a branch
    point ends with ``[N branches]``; past :data:`_GUTTER` characters of gutter the leftmost
    levels are counted in a ``[+N]`` instead of drawn. Labels are annotations
    (``[label: X]``) on their targets; ``label`` and ``leaf`` entries themselves are not drawn
    (their children take their place) unless ``show_all``. Lines start with a two-character
    marker: ``* `` the active leaf, ``> `` the rest of the active path, two spaces elsewhere.
    """
    # First: in recover mode, decoding drops entries whose body is damaged (the leaf among
    # them, which moves to the entry before it), and the path below must not name them.
    roots = session.get_tree(leaf_entries=show_all)
    leaf_id = session.leaf_id
    path = session.path_ids(leaf_id)
    # Leaf moves are not in the tree unless asked for; labels and names are skipped below.
    hidden = (
        0 if show_all else sum(1 for i in session.entry_ids() if session.entry_type(i) == "leaf")
    )

    def visible(children: Iterable[TreeNode]) -> list[TreeNode]:
        nonlocal hidden
        if show_all:
            return list(children)
        out: list[TreeNode] = []
        pending = list(children)[::-1]
        while pending:
            node = pending.pop()
            if _is_bookkeeping(node.entry):
                hidden += 1
                pending.extend(reversed(node.children))
            elif (
                isinstance(node.entry, SessionInfoEntry)
                and not node.children
                and node.entry.id not in on_path
            ):
                # A name set off the active path with nothing after it (a fork writes its
                # name that way): not a branch anyone made; the header line shows the name.
                hidden += 1
            else:
                out.append(node)
        return out

    if not show_all:
        # A label (or leaf) entry as the leaf: the context is its nearest drawn ancestor's.
        while path and _is_bookkeeping(session.get_entry(path[-1])):
            path.pop()
    on_path = set(path)
    shown_leaf = path[-1] if path else None

    lines: list[str] = []
    # Explicit stack instead of recursion: a linear session is thousands of levels deep.
    # Each item: node, the prefix of its own line, the prefix its descendants continue with,
    # and how many branch levels the prefixes leave out on their left.
    stack: list[tuple[TreeNode, str, str, int]] = []

    def push_children(children: list[TreeNode], prefix: str, cut: int) -> None:
        if len(children) == 1:
            stack.append((children[0], prefix, prefix, cut))
            return
        if len(prefix) >= _GUTTER:  # past the gutter's width: the leftmost level is counted
            prefix, cut = prefix[3:], cut + 1
        for i in reversed(range(len(children))):
            last = i == len(children) - 1
            stack.append(
                (
                    children[i],
                    prefix + ("`- " if last else "|- "),
                    prefix + ("   " if last else "|  "),
                    cut,
                )
            )

    leaf_line: str | None = None
    push_children(visible(roots), "", 0)
    while stack:
        node, own, rest, cut = stack.pop()
        if cut:
            own = f"[+{cut}] {own}"
        entry = node.entry
        children = visible(node.children)
        is_leaf = entry.id == shown_leaf
        marker = "* " if is_leaf else "> " if entry.id in on_path else "  "
        text = entry_text(entry)
        parts = [f"{marker}{own}{entry.id} {entry_kind(entry)}"]
        if text:
            parts.append(text)
        if node.label:
            parts.append(f"[label: {one_line(node.label)}]")
        if len(children) > 1:
            parts.append(f"[{len(children)} branches]")
        if is_leaf:
            parts.append("(leaf)")
        lines.append(" ".join(parts))
        if is_leaf:
            leaf_line = lines[-1]
        push_children(children, rest, cut)
    return TreeView(
        lines=tuple(lines), shown=len(lines), hidden_entries=hidden, leaf_line=leaf_line
    )


# --- list -----------------------------------------------------------------------------------


def _when(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M")


def _shared(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _unique_prefixes(ids: Iterable[str]) -> dict[str, str]:
    """For each id, its shortest prefix of at least 8 characters that no other id starts with
    (the whole id when it is shorter or shares a longer prefix)."""
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, sid in enumerate(ordered):
        # In sorted order the longest shared prefix is with a neighbour.
        neighbours = [o for o in ordered[max(i - 1, 0) : i + 2] if o != sid]
        common = max((_shared(sid, o) for o in neighbours), default=0)
        out[sid] = sid[: max(len(short_id(sid)), common + 1)]
    return out


def parent_ref(parent_session: str | None) -> str:
    """The id (or file name) of the session a fork came from, as its header's
    ``parentSession`` (a file path, as pi writes it) names it; "" for none."""
    if not parent_session:
        return ""
    name = Path(parent_session).name
    stem = name.removesuffix(".jsonl")
    # pi's file names are <timestamp>_<id>.jsonl
    ref = short_id(stem.partition("_")[2]) if name.endswith(".jsonl") and "_" in stem else name
    return one_line(ref)


def session_table(
    infos: Iterable[SessionInfo], costs: Mapping[str, Totals] | None = None
) -> list[str]:
    """The human form of ``list``: id (its first 8 characters, more when needed to tell it
    apart), modified (UTC), message entries in the file, the session it was forked from, name or
    first message, cwd; with ``costs`` (by session id), a COST column after MSGS (``~`` marks
    a cost estimated in part from token counts, ``?`` one with replies of unknown price)."""
    infos = list(infos)
    prefixes = _unique_prefixes(i.id for i in infos)
    rows = [
        (
            prefixes[info.id],
            _when(info.modified),
            str(info.message_count),
            *((_cost_cell(costs.get(info.id)),) if costs is not None else ()),
            parent_ref(info.parent_session) or "-",
            short(info.name or info.first_message or "(no messages)", 50),
            one_line(info.cwd),
        )
        for info in infos
    ]
    heads: tuple[str, ...] = ("ID", "MODIFIED (UTC)", "MSGS")
    if costs is not None:
        heads += ("COST",)
    heads += ("FORK OF", "NAME / FIRST MESSAGE", "CWD")
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(heads)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return [fmt(heads), *(fmt(r) for r in rows)]


def _cost_cell(total: Totals | None) -> str:
    if total is None:
        return "-"
    mark = ("~" if total.estimated else "") + ("?" if total.unpriced else "")
    return f"{mark}${total.cost:.4f}"


def cost_json(total: Totals) -> dict[str, JSONValue]:
    """A cost as JSON: ``usd`` (recorded plus estimated), ``estimated_usd`` (the part priced
    from token counts at the registry's prices) and ``unpriced_replies``."""
    return {
        "usd": total.cost,
        "estimated_usd": total.estimated,
        "unpriced_replies": total.unpriced,
    }


def info_json(info: SessionInfo) -> dict[str, JSONValue]:
    """Every field of a ``SessionInfo`` (attribute names as keys), datetimes as ISO-8601 and
    paths as strings."""
    out: dict[str, JSONValue] = {}
    for field in attrs.fields(SessionInfo):
        value = getattr(info, field.name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, Path):
            value = str(value)
        out[field.name] = value
    return out
