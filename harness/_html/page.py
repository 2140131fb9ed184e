"""A session as HTML: the page ``harness export --format html`` writes and ``harness serve``
shows.

The whole tree is drawn: the active branch is marked (class ``on-path``, the leaf ``leaf``);
every other branch is a closed ``<details class="branch">``. User and assistant text, custom
messages and summaries are Markdown (:mod:`.markdown`: no raw HTML, safe links only, code
highlighted); thinking and tool calls are closed ``<details>``; tool output shows its first
lines and folds the rest; an ``edit`` result shows its diff coloured; images are embedded. A
side panel draws the tree (user messages, compactions, branch summaries, labels, branch
points) with the active path marked; a search box finds entries; usage and cost are at the top;
every entry links to itself (``#entry-<id>``).

Every value read from the session is untrusted (docs/security.md): it is text or a quoted
attribute value (``_escape.html_text``), or Markdown rendered as :mod:`.markdown` allows; it
never names a class (entry types and roles map to our own tokens, ``unknown`` otherwise) and
never adds a script, a style, an event handler or a network request. The exported page carries
a Content-Security-Policy that allows only its own script and style (by hash) and ``data:``
images, so even a mistake in escaping could not run script or reach the network.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime

import attrs

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
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    MessageEntry,
    Session,
    TreeNode,
    UnknownEntry,
)

from .._providers.registry import ModelRegistry
from .._stats import UsageStats, session_stats
from ..cli._escape import html_text as _e
from ..cli._escape import html_token, image_src
from ..cli._render import entry_kind, entry_text, short, totals
from .assets import SCRIPT, STYLE
from .markdown import highlight_budget, markdown_html

__all__ = [
    "FOLD_LINES",
    "SessionParts",
    "csp_hash",
    "entries_drawn",
    "entry_html",
    "export_page",
    "session_parts",
    "usage_html",
]

FOLD_LINES = 8
"""Lines of tool output (and of a tool call's input) shown before the rest is folded."""
_FOLD_CHARS = 1500
_DIFF_LINES = 40


def _nothing(n: int) -> None:
    """The default ``advance``: no progress shown."""


def _json_text(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=_plain)


def _plain(value: object) -> JSONValue:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return str(value)


# Our class tokens for entry types and message roles (the CSS styles some of them).
_ENTRY_TOKENS = frozenset(
    {
        "message",
        "model_change",
        "thinking_level_change",
        "active_tools_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "leaf",
    }
)
_ROLE_TOKENS = frozenset(
    {
        "user",
        "assistant",
        "toolResult",
        "bashExecution",
        "custom",
        "branchSummary",
        "compactionSummary",
    }
)


def _entry_token(entry: Entry) -> str:
    return "unknown" if isinstance(entry, UnknownEntry) else html_token(entry.type, _ENTRY_TOKENS)


def _role_token(message: Message) -> str:
    return (
        "unknown" if isinstance(message, UnknownMessage) else html_token(message.role, _ROLE_TOKENS)
    )


def _details(cls: str, summary: str, body: str, *, open_: bool = False) -> str:
    flag = " open" if open_ else ""
    return f'<details class="{cls}"{flag}><summary>{summary}</summary>{body}</details>'


def _pre(text: str) -> str:
    return f"<pre>{_e(text)}</pre>"


def _folded(text: str, cls: str = "out") -> str:
    """``text`` preformatted, its first :data:`FOLD_LINES` lines (at most ~1,500 characters)
    shown and the rest in a closed ``<details class="more">``."""
    lines = text.split("\n")
    head = "\n".join(lines[:FOLD_LINES])
    if len(head) > _FOLD_CHARS:
        head = head[:_FOLD_CHARS]
    if len(head) >= len(text) - 1:
        return f'<pre class="{cls}">{_e(text)}</pre>'
    rest = text[len(head) :].removeprefix("\n")
    more = rest.count("\n") + 1
    return (
        f'<pre class="{cls}">{_e(head)}</pre><details class="more"><summary>'
        f"{more} more line{'s' if more != 1 else ''}</summary>"
        f'<pre class="{cls}">{_e(rest)}</pre></details>'
    )


def _diff_html(diff: str) -> str:
    """A unified diff with added, removed and hunk lines coloured (our classes), folded past
    :data:`_DIFF_LINES` lines."""

    def line_html(line: str) -> str:
        if line.startswith(("+++", "---")):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        elif line.startswith("@@"):
            cls = "hunk"
        else:
            return _e(line) + "\n"
        return f'<span class="{cls}">{_e(line)}</span>'

    lines = diff.rstrip("\n").split("\n")
    shown = "".join(line_html(line) for line in lines[:_DIFF_LINES])
    out = f'<pre class="diff">{shown}</pre>'
    if len(lines) > _DIFF_LINES:
        rest = "".join(line_html(line) for line in lines[_DIFF_LINES:])
        out += (
            f'<details class="more"><summary>{len(lines) - _DIFF_LINES} more lines</summary>'
            f'<pre class="diff">{rest}</pre></details>'
        )
    return out


def _image_html(block: ImageContent) -> str:
    src = image_src(block.mime_type, block.data)
    if src is None:  # not shown: an SVG or HTML "image" could run script
        return f'<div class="text">[image {_e(block.mime_type)}: not shown]</div>'
    return f'<img class="image" alt="image ({_e(block.mime_type)})" src="{src}">'


def _user_content_html(content: str | Iterable[UserContent], *, markdown: bool) -> str:
    def text_html(text: str) -> str:
        return markdown_html(text) if markdown else _folded(text)

    if isinstance(content, str):
        return text_html(content)
    parts = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(text_html(block.text))
        elif isinstance(block, ImageContent):
            parts.append(_image_html(block))
        else:
            parts.append(f'<div class="text">[{_e(block.type or "unknown")} block]</div>')
    return "".join(parts)


_PREVIEW_KEYS = ("command", "path", "pattern", "file_path", "url", "query", "name")


def _call_preview(call: ToolCall) -> str:
    """One line saying what a tool call does (its command, path or pattern), cut short."""
    for key in _PREVIEW_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value:
            return short(value, 80)
    return short(json.dumps(dict(call.arguments), ensure_ascii=False, default=str), 80)


def _tool_call_html(call: ToolCall) -> str:
    summary = (
        f"Tool call: <code>{_e(call.name)}</code> <code>{_e(_call_preview(call))}</code> "
        f"<code>{_e(call.id)}</code>"
    )
    return _details("tool-call", summary, _folded(_json_text(dict(call.arguments))))


def _tool_result_html(message: ToolResultMessage) -> str:
    flag = " (error)" if message.is_error else ""
    summary = f"Result of <code>{_e(message.tool_name)}</code>{flag}"
    body = _user_content_html(message.content, markdown=False)
    details = message.details
    if isinstance(details, Mapping) and isinstance(details.get("diff"), str) and details["diff"]:
        body += _diff_html(str(details["diff"]))
    return _details("tool-result", summary, body, open_=True)


def _message_html(message: Message) -> str:
    if isinstance(message, UserMessage):
        return _user_content_html(message.content, markdown=True)
    if isinstance(message, CustomMessage):
        return f"<div>({_e(message.custom_type)})</div>" + _user_content_html(
            message.content, markdown=True
        )
    if isinstance(message, AssistantMessage):
        parts = []
        for block in message.content:
            if isinstance(block, TextContent):
                parts.append(markdown_html(block.text))
            elif isinstance(block, ThinkingContent):
                body = "(redacted)" if block.redacted else block.thinking
                parts.append(_details("thinking", "Thinking", _pre(body)))
            elif isinstance(block, ToolCall):
                parts.append(_tool_call_html(block))
            else:
                parts.append(f'<div class="text">[{_e(block.type or "unknown")} block]</div>')
        if message.error_message:
            parts.append(f'<div class="error">Error: {_e(message.error_message)}</div>')
        return "".join(parts)
    if isinstance(message, ToolResultMessage):
        return _tool_result_html(message)
    if isinstance(message, BashExecutionMessage):
        status = "cancelled" if message.cancelled else f"exit {message.exit_code}"
        body = _folded(f"$ {message.command}\n{message.output}")
        return _details("tool-result", f"Shell command ({_e(status)})", body, open_=True)
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return _details("summary", "Summary", markdown_html(message.summary), open_=True)
    return _pre(_json_text(dict(message.raw)))


def entry_html(entry: Entry, *, on_path: bool, is_leaf: bool, label: str | None) -> str:
    """One entry as a ``<div class="entry ...">`` with ``id="entry-<id>"`` and
    ``data-entry-id``: its head (a link to itself, kind, model and usage, label) and body."""
    token = _entry_token(entry)
    classes = ["entry", token]
    minor = False
    if isinstance(entry, MessageEntry):
        token = _role_token(entry.message)
        classes.append(f"role-{token}")
        msg = entry.message
        if (isinstance(msg, ToolResultMessage) and msg.is_error) or (
            isinstance(msg, AssistantMessage) and msg.stop_reason == "error"
        ):
            classes.append("error")
        body = _message_html(msg)
    elif isinstance(entry, CompactionEntry):
        summary = f"Compaction: {_e(entry.tokens_before)} tokens before; first kept entry "
        summary += f"<code>{_e(entry.first_kept_entry_id or '-')}</code>"
        body = _details("compaction-summary", summary, markdown_html(entry.summary), open_=True)
    elif isinstance(entry, BranchSummaryEntry):
        summary = f"Branch summary (from <code>{_e(entry.from_id or '-')}</code>)"
        body = _details("branch-summary", summary, markdown_html(entry.summary), open_=True)
    elif isinstance(entry, CustomMessageEntry) and entry.display:
        body = _user_content_html(entry.content, markdown=True)
    else:
        minor = True
        classes.append("minor")
        body = ""
    if on_path:
        classes.append("on-path")
    if is_leaf:
        classes.append("leaf")
    head = f'<a class="eid" href="#entry-{_e(entry.id)}"><code>{_e(entry.id)}</code></a> '
    head += _e(entry_kind(entry))
    if minor:
        head += f" {_e(entry_text(entry))}"
    elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
        m = entry.message
        head += f" · {_e('/'.join(p for p in (m.provider, m.model) if p))}"
        head += f" · {_e(m.usage.input)}→{_e(m.usage.output)} tokens"
        if m.stop_reason not in ("stop", "toolUse"):
            head += f" · {_e(m.stop_reason)}"
    if label:
        head += f'<span class="label">{_e(label)}</span>'
    if is_leaf:
        head += ' <span class="label">leaf</span>'
    return (
        f'<div class="{" ".join(classes)}" id="entry-{_e(entry.id)}" '
        f'data-entry-id="{_e(entry.id)}" data-type="{token}" '
        f'data-on-path="{"true" if on_path else "false"}">'
        f'<div class="head">{head}</div>{body}</div>'
    )


# --- the tree: main column and side panel -----------------------------------------------------


def _sizes(roots: list[TreeNode]) -> dict[str, int]:
    """Entries in each node's subtree (itself included), without recursion."""
    order: list[TreeNode] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    sizes: dict[str, int] = {}
    for node in reversed(order):
        sizes[node.entry.id] = 1 + sum(sizes[c.entry.id] for c in node.children)
    return sizes


def _without_labels(nodes: Iterable[TreeNode]) -> list[TreeNode]:
    """``nodes`` with label entries replaced by their children: a label is shown on its
    target, not as an entry (nor as a branch of its own)."""
    out: list[TreeNode] = []
    pending = list(nodes)[::-1]
    while pending:
        node = pending.pop()
        if isinstance(node.entry, LabelEntry):
            pending.extend(reversed(node.children))
        else:
            out.append(node)
    return out


def _in_side_panel(node: TreeNode, is_leaf: bool) -> bool:
    entry = node.entry
    if isinstance(entry, MessageEntry):
        return isinstance(entry.message, UserMessage) or is_leaf or node.label is not None
    return (
        isinstance(entry, CompactionEntry | BranchSummaryEntry | CustomMessageEntry)
        or is_leaf
        or node.label is not None
    )


def _nav_html(node: TreeNode, *, on_path: bool, is_leaf: bool) -> str:
    entry = node.entry
    classes = "nav" + (" on-path" if on_path else "") + (" leaf" if is_leaf else "")
    what = short(entry_text(entry), 48) or entry_kind(entry)
    text = f"{entry_kind(entry)}: {what}" if entry_text(entry) else what
    if node.label:
        text += f" [{node.label}]"
    return f'<li><a class="{classes}" href="#entry-{_e(entry.id)}">{_e(text)}</a></li>'


def _tree(session: Session, advance: Callable[[int], None]) -> tuple[list[str], list[str]]:
    """The main column's HTML and the side panel's list items, in one walk."""
    leaf = session.leaf_id
    on_path = set(session.path_ids(leaf))
    roots = session.get_tree()
    sizes = _sizes(roots)
    main: list[str] = []
    side: list[str] = []
    # A linear path stays in one container; at a branch point each child starts a <details>
    # (open on the active branch). Items: a node to render, or (main, side) HTML as it is.
    stack: list[TreeNode | tuple[str, str]] = []

    def push(nodes: tuple[TreeNode, ...] | list[TreeNode]) -> None:
        children = _without_labels(nodes)
        if len(children) == 1:
            stack.append(children[0])
            return
        if not children:
            return
        stack.append(("</div>", "</ul></li>"))
        for child in reversed(children):
            entry_id = child.entry.id
            active = entry_id in on_path
            cls = "branch active-branch" if active else "branch"
            what = entry_text(child.entry) or entry_kind(child.entry)
            summary = (
                f"{'Active branch' if active else 'Branch'} at <code>{_e(entry_id)}</code>"
                f" ({_e(sizes[entry_id])} entries): {_e(what)}"
            )
            nav = (
                f'<li class="alt{" active" if active else ""}"><a href="#entry-{_e(entry_id)}">'
                f"{'Active branch' if active else 'Branch'} ({_e(sizes[entry_id])} entries): "
                f"{_e(short(what, 40))}</a><ul>"
            )
            stack.append(("</details>", "</ul></li>"))
            stack.append(child)
            stack.append(
                (
                    f'<details class="{cls}"{" open" if active else ""}>'
                    f"<summary>{summary}</summary>",
                    nav,
                )
            )
        stack.append(('<div class="branches">', '<li class="fork"><ul>'))

    push(roots)
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            main.append(item[0])
            side.append(item[1])
            continue
        entry = item.entry
        is_leaf = entry.id == leaf
        main.append(
            entry_html(entry, on_path=entry.id in on_path, is_leaf=is_leaf, label=item.label)
        )
        if _in_side_panel(item, is_leaf):
            side.append(_nav_html(item, on_path=entry.id in on_path, is_leaf=is_leaf))
        advance(1)
        push(item.children)
    return main, side


# --- usage ------------------------------------------------------------------------------------


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def usage_html(
    session: Session, registry: ModelRegistry | None, entries: list[Entry] | None = None
) -> str:
    """The usage block: totals of the whole tree and the active branch (tokens, cost, with
    the estimated part), turns, tool calls and their error rate, compactions, cache hit rate,
    and a row per model when there are several."""
    every = entries if entries is not None else list(session.entries())
    whole = totals(every, registry)
    branch = totals(session.get_branch(), registry)
    [stats] = session_stats(every, registry=registry).values() or [UsageStats()]
    by_model = session_stats(every, registry=registry, by="model")
    line = (
        f"{stats.turns} turns · {stats.tool_calls} tool calls, {stats.tool_errors} failed "
        f"({_rate(stats.tool_error_rate)}) · {stats.compactions} compactions · "
        f"cache hit rate {_rate(stats.cache_hit_rate)}"
    )
    parts = [
        '<div class="usage">',
        f'<p class="totals" id="totals-all">Whole tree: {_e(whole.line())}</p>',
        f'<p class="totals" id="totals-branch">Active branch: {_e(branch.line())}</p>',
        f'<p class="stats" id="stats">{_e(line)}</p>',
    ]
    if len(by_model) > 1:
        rows = "".join(
            f"<tr><td>{_e(model)}</td><td>{_e(s.turns)}</td><td>{_e(s.input)}</td>"
            f"<td>{_e(s.output)}</td><td>{_e(s.cache_read)}</td><td>{_e(s.cost_text())}</td></tr>"
            for model, s in sorted(by_model.items())
        )
        parts.append(
            "<table><thead><tr><th>model</th><th>turns</th><th>input</th><th>output</th>"
            f"<th>cache read</th><th>cost</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    parts.append("</div>")
    return "".join(parts)


# --- the page ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionParts:
    """The pieces of a session's page: ``title`` (text, unescaped), ``header`` (name, facts,
    usage), ``side`` (the tree panel) and ``main`` (every entry), as HTML."""

    title: str
    header: str
    side: str
    main: str


_CONTROLS = (
    '<div class="controls"><input id="search" type="search" placeholder="Search entries" '
    'aria-label="Search entries"><span id="search-count"></span>'
    '<button id="expand-all" type="button">Expand all</button>'
    '<button id="collapse-all" type="button">Collapse all</button>'
    '<button id="to-leaf" type="button">Go to the leaf</button></div><ol id="results"></ol>'
)


def session_parts(
    session: Session,
    *,
    registry: ModelRegistry | None = None,
    advance: Callable[[int], None] = _nothing,
) -> SessionParts:
    """Render ``session`` (see the module doc). ``advance(1)`` is called after each entry
    drawn (label entries are not drawn)."""
    title = session.name or f"Session {session.id}"
    header = session.header
    entries = list(session.entries())
    branch_len = len(session.path_ids(session.leaf_id))
    meta = [
        f"id <code>{_e(session.id)}</code>",
        f"cwd <code>{_e(header.cwd)}</code>",
        f"created {_e(header.timestamp)}",
        f"{_e(len(session))} entries, {_e(branch_len)} on the active branch",
    ]
    if header.parent_session:
        meta.append(f"forked from <code>{_e(header.parent_session)}</code>")
    top = (
        f'<h1 class="session-name">{_e(title)}</h1><p class="meta">{" · ".join(meta)}</p>'
        + usage_html(session, registry, entries)
        + _CONTROLS
    )
    with highlight_budget():  # the whole page's code blocks, together (review 12, finding 2)
        main, side = _tree(session, advance)
    return SessionParts(
        title=title,
        header=top,
        side='<nav class="side" id="side"><h2>Tree</h2><ul>' + "".join(side) + "</ul></nav>",
        main='<main id="tree">' + "".join(main) + "</main>",
    )


def csp_hash(source: str) -> str:
    """A Content-Security-Policy source for an inline script or style: ``'sha256-...'``."""
    digest = hashlib.sha256(source.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


_EXPORT_CSP = (
    f"default-src 'none'; img-src data:; style-src {csp_hash(STYLE)}; "
    f"script-src {csp_hash(SCRIPT)}; base-uri 'none'; form-action 'none'"
)


def export_page(
    session: Session,
    advance: Callable[[int], None] = _nothing,
    registry: ModelRegistry | None = None,
) -> str:
    """The whole session as one self-contained page (styles and script inline, images as
    ``data:`` URIs, nothing loaded from the network: its Content-Security-Policy forbids it).

    ``advance(1)`` is called after each entry drawn. Replies that recorded no cost are priced
    from their tokens at ``registry``'s prices (default the package's), and the totals say how
    much is estimated."""
    parts = session_parts(session, registry=registry, advance=advance)
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en"><head><meta charset="utf-8">',
                f'<meta http-equiv="Content-Security-Policy" content="{_EXPORT_CSP}">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                f"<title>{_e(parts.title)}</title><style>{STYLE}</style></head><body>",
                f'<header class="top">{parts.header}</header>',
                f'<div class="layout">{parts.side}{parts.main}</div>',
                f'<footer class="meta">Exported {datetime.now(UTC).isoformat(timespec="seconds")} '
                "by harness export.</footer>",
                f"<script>{SCRIPT}</script></body></html>",
            ]
        )
        + "\n"
    )


def entries_drawn(session: Session) -> int:
    """How many times :func:`export_page` calls ``advance``."""
    return sum(1 for i in session.entry_ids() if session.entry_type(i) not in ("label", "leaf"))
