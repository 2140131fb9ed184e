"""``harness export ID|PATH --format html|md|jsonl``: a session as one file to read or share.

* ``html``: one self-contained page (styles and script inline, no network; images as ``data:``
  URIs) with the whole tree. The active branch is marked (class ``on-path``, the leaf
  ``leaf``); every other branch is a closed ``<details class="branch">``. Thinking, tool calls
  and tool results are collapsed ``<details>``; compaction and branch summaries, labels, the
  session name and token/cost totals are shown. Every entry is an element with
  ``data-entry-id``. Opening the page with ``#expand-all`` opens every block.
* ``md``: the active branch as Markdown (thinking and tool output in ``<details>``).
* ``jsonl``: the session re-written in our format (v3), entries in file order: a v1/v2 pi file
  comes out migrated, with the same ids a read gives; the source is not modified.

Every value read from the session is untrusted (docs/security.md) and is escaped by
``_escape.py`` for the format: in HTML it is text or a quoted attribute value, never a tag, an
attribute or a class name (entry types and roles map to our own class tokens, ``unknown`` for
any other); images are embedded only as PNG, JPEG, GIF or WebP with valid base64. In Markdown
it cannot become raw HTML or a script link. No format lets a terminal control through.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import attrs
import click

from harness import PERMISSION_ENTRY, ModelRegistry, load_registry
from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
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
    Entry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    Session,
    SessionInfoEntry,
    TreeNode,
    UnknownEntry,
    dumps_line,
    encode_entry,
    encode_header,
)

from ._common import one_line, open_repo, progress, root_option
from ._escape import (
    echo,
    html_text,
    html_token,
    image_src,
    json_text,
    md_code,
    md_fence,
    md_text,
    terminal,
)
from ._escape import html_text as _e  # text and quoted attribute values of the page
from ._opening import opened
from ._render import entry_kind, entry_text, totals

__all__ = ["export", "session_html", "session_jsonl", "session_markdown"]


def _nothing(n: int) -> None:
    """The default ``advance``: no progress shown."""


def _json_text(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _content_text(content: str | Iterable[UserContent]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image {block.mime_type}]")
        else:
            parts.append(f"[{block.type or 'unknown'} block]")
    return "\n".join(parts)


# --- html -------------------------------------------------------------------------------------

_CSS = """
:root { --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --user: #ddf4ff; --asst: #f6f8fa;
  --tool: #fff8c5; --err: #ffebe9; --path: #1f883d; --sum: #fbefff; }
* { box-sizing: border-box; }
body { font: 14px/1.5 system-ui, sans-serif; color: var(--fg); margin: 0 auto; max-width: 60rem;
  padding: 1rem; }
header { border-bottom: 1px solid var(--line); margin-bottom: 1rem; }
header h1 { font-size: 1.4rem; margin: 0 0 .3rem; }
.meta, .totals { color: var(--muted); margin: .1rem 0; }
.controls button { margin: .5rem .5rem .5rem 0; }
.entry { border-left: 3px solid transparent; margin: .4rem 0; padding: .3rem .6rem;
  border-radius: 4px; }
.entry.on-path { border-left-color: var(--path); }
.entry.leaf { outline: 2px solid var(--path); }
.entry .head { font-size: 12px; color: var(--muted); }
.entry .head code { font-size: 11px; }
.role-user { background: var(--user); }
.role-assistant { background: var(--asst); }
.role-toolResult, .role-bashExecution { background: var(--tool); }
.error { background: var(--err); }
.compaction, .branch_summary, .role-compactionSummary, .role-branchSummary {
  background: var(--sum); }
.minor { padding: 0 .6rem; margin: 0; font-size: 12px; color: var(--muted); }
.label { background: var(--path); color: white; border-radius: 8px; padding: 0 .4rem;
  font-size: 11px; margin-left: .3rem; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: white; padding: .4rem;
  border: 1px solid var(--line); border-radius: 4px; margin: .3rem 0; }
details > summary { cursor: pointer; color: var(--muted); }
details.branch { border: 1px dashed var(--line); border-radius: 6px; padding: .2rem .6rem;
  margin: .5rem 0; }
details.branch.active-branch { border-color: var(--path); }
details.branch > summary { font-weight: 600; }
img { max-width: 100%; }
"""

_JS = """
function setAll(open) {
  document.querySelectorAll('details').forEach(function (d) { d.open = open; });
}
document.getElementById('expand-all').addEventListener('click', function () { setAll(true); });
document.getElementById('collapse-all').addEventListener('click', function () { setAll(false); });
document.getElementById('to-leaf').addEventListener('click', function () {
  var leaf = document.querySelector('.entry.leaf');
  if (leaf) { leaf.scrollIntoView({block: 'center'}); }
});
if (location.hash === '#expand-all') { setAll(true); }
"""


# Our class tokens for entry types and message roles (the CSS above styles some of them).
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


def _user_content_html(content: str | Iterable[UserContent]) -> str:
    if isinstance(content, str):
        return f'<div class="text">{_e(content)}</div>'
    parts = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(f'<div class="text">{_e(block.text)}</div>')
        elif isinstance(block, ImageContent):
            src = image_src(block.mime_type, block.data)
            if src is None:  # not shown: an SVG or HTML "image" could run script
                parts.append(f'<div class="text">[image {_e(block.mime_type)}: not shown]</div>')
            else:
                parts.append(f'<img class="image" alt="image ({_e(block.mime_type)})" src="{src}">')
        else:
            parts.append(f'<div class="text">[{_e(block.type or "unknown")} block]</div>')
    return "".join(parts)


def _message_html(message: Message) -> str:
    if isinstance(message, UserMessage):
        return _user_content_html(message.content)
    if isinstance(message, CustomMessage):
        return f"<div>({_e(message.custom_type)})</div>" + _user_content_html(message.content)
    if isinstance(message, AssistantMessage):
        parts = []
        for block in message.content:
            if isinstance(block, TextContent):
                parts.append(f'<div class="text">{_e(block.text)}</div>')
            elif isinstance(block, ThinkingContent):
                body = "(redacted)" if block.redacted else block.thinking
                parts.append(_details("thinking", "Thinking", _pre(body)))
            elif isinstance(block, ToolCall):
                summary = f"Tool call: <code>{_e(block.name)}</code> <code>{_e(block.id)}</code>"
                args = _pre(_json_text(dict(block.arguments)))
                parts.append(_details("tool-call", summary, args))
            else:
                parts.append(f'<div class="text">[{_e(block.type or "unknown")} block]</div>')
        if message.error_message:
            parts.append(f'<div class="error">Error: {_e(message.error_message)}</div>')
        return "".join(parts)
    if isinstance(message, ToolResultMessage):
        flag = " (error)" if message.is_error else ""
        summary = f"Result of <code>{_e(message.tool_name)}</code>{flag}"
        return _details("tool-result", summary, _user_content_html(message.content))
    if isinstance(message, BashExecutionMessage):
        status = "cancelled" if message.cancelled else f"exit {message.exit_code}"
        body = _pre(f"$ {message.command}\n{message.output}")
        return _details("tool-result", f"Shell command ({_e(status)})", body)
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return _details("summary", "Summary", _pre(message.summary), open_=True)
    return _pre(_json_text(dict(message.raw)))


def _entry_html(
    entry: Entry, *, on_path: bool, is_leaf: bool, label: str | None
) -> tuple[str, bool]:
    """The opening tag and body of one entry (the caller closes the ``div``), and whether it is
    a minor entry (settings, labels, leaf moves)."""
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
        body = _details("compaction-summary", summary, _pre(entry.summary), open_=True)
    elif isinstance(entry, BranchSummaryEntry):
        summary = f"Branch summary (from <code>{_e(entry.from_id or '-')}</code>)"
        body = _details("branch-summary", summary, _pre(entry.summary), open_=True)
    else:
        minor = True
        classes.append("minor")
        body = ""
    if on_path:
        classes.append("on-path")
    if is_leaf:
        classes.append("leaf")
    kind = entry_kind(entry)
    head = f"<code>{_e(entry.id)}</code> {_e(kind)}"
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
    opening = (
        f'<div class="{" ".join(classes)}" id="entry-{_e(entry.id)}" '
        f'data-entry-id="{_e(entry.id)}" data-type="{token}" '
        f'data-on-path="{"true" if on_path else "false"}">'
    )
    return f'{opening}<div class="head">{head}</div>{body}', minor


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


def _tree_html(session: Session, advance: Callable[[int], None]) -> Iterator[str]:
    leaf = session.leaf_id
    on_path = set(session.path_ids(leaf))
    roots = session.get_tree()
    sizes = _sizes(roots)
    # A linear path stays in one container; at a branch point each child starts a <details>
    # (open on the active branch). Items: a node to render, or HTML to emit as it is.
    stack: list[TreeNode | str] = []

    def push(nodes: tuple[TreeNode, ...] | list[TreeNode]) -> None:
        children = _without_labels(nodes)
        if len(children) == 1:
            stack.append(children[0])
            return
        if not children:
            return
        stack.append("</div>")
        for child in reversed(children):
            active = child.entry.id in on_path
            cls = "branch active-branch" if active else "branch"
            what = entry_text(child.entry) or entry_kind(child.entry)
            summary = (
                f"{'Active branch' if active else 'Branch'} at <code>{_e(child.entry.id)}</code>"
                f" ({_e(sizes[child.entry.id])} entries): {_e(what)}"
            )
            stack.append("</details>")
            stack.append(child)
            stack.append(
                f'<details class="{cls}"{" open" if active else ""}><summary>{summary}</summary>'
            )
        stack.append('<div class="branches">')

    push(roots)
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
            continue
        entry = item.entry
        opening, _ = _entry_html(
            entry, on_path=entry.id in on_path, is_leaf=entry.id == leaf, label=item.label
        )
        yield opening + "</div>"
        advance(1)
        push(item.children)


def session_html(
    session: Session,
    advance: Callable[[int], None] = _nothing,
    registry: ModelRegistry | None = None,
) -> str:
    """The whole session as one self-contained HTML page (see the module doc).

    ``advance(1)`` is called after each entry drawn (label entries are not drawn). Replies
    that recorded no cost are priced from their tokens at ``registry``'s prices (default the
    package's), and the totals say how much is estimated."""
    title = session.name or f"Session {session.id}"
    branch = session.get_branch()
    everything = totals(session.entries(), registry)
    on_branch = totals(branch, registry)
    header = session.header
    meta = [
        f"id <code>{_e(session.id)}</code>",
        f"cwd <code>{_e(header.cwd)}</code>",
        f"created {_e(header.timestamp)}",
        f"{_e(len(session))} entries, {_e(len(branch))} on the active branch",
    ]
    if header.parent_session:
        meta.append(f"forked from <code>{_e(header.parent_session)}</code>")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f'<header><h1 class="session-name">{_e(title)}</h1>',
        f'<p class="meta">{" · ".join(meta)}</p>',
        f'<p class="totals" id="totals-all">Whole tree: {_e(everything.line())}</p>',
        f'<p class="totals" id="totals-branch">Active branch: {_e(on_branch.line())}</p>',
        '<div class="controls"><button id="expand-all" type="button">Expand all</button>'
        '<button id="collapse-all" type="button">Collapse all</button>'
        '<button id="to-leaf" type="button">Go to the leaf</button></div></header>',
        '<main id="tree">',
        *_tree_html(session, advance),
        "</main>",
        f'<footer class="meta">Exported {datetime.now(UTC).isoformat(timespec="seconds")} '
        "by harness export.</footer>",
        f"<script>{_JS}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


# --- markdown ---------------------------------------------------------------------------------


def _md_details(summary: str, body: str) -> str:
    return f"<details><summary>{html_text(one_line(summary))}</summary>\n\n{body}\n\n</details>"


def _md_inline(text: str) -> str:
    """Session text inside one of our lines (a heading, an emphasis): one line, escaped."""
    return md_text(one_line(text))


def _message_md(message: Message) -> list[str]:
    if isinstance(message, UserMessage):
        return ["## User", md_text(_content_text(message.content))]
    if isinstance(message, CustomMessage):
        return [
            f"## Custom ({_md_inline(message.custom_type)})",
            md_text(_content_text(message.content)),
        ]
    if isinstance(message, AssistantMessage):
        source = "/".join(p for p in (message.provider, message.model) if p)
        out = [f"## Assistant ({_md_inline(source)})" if source else "## Assistant"]
        for block in message.content:
            if isinstance(block, TextContent):
                out.append(md_text(block.text))
            elif isinstance(block, ThinkingContent):
                body = "(redacted)" if block.redacted else block.thinking
                out.append(_md_details("Thinking", md_fence(body)))
            elif isinstance(block, ToolCall):
                args = md_fence(_json_text(dict(block.arguments)), "json")
                out.append(f"**Tool call** {md_code(block.name)} ({md_code(block.id)})\n\n{args}")
        if message.error_message:
            out.append(f"**Error:** {md_text(message.error_message)}")
        if message.stop_reason not in ("stop", "toolUse"):
            out.append(f"*Stopped: {_md_inline(message.stop_reason)}*")
        return out
    if isinstance(message, ToolResultMessage):
        flag = " (error)" if message.is_error else ""
        title = f"Result of {message.tool_name}{flag}"
        return [_md_details(title, md_fence(_content_text(message.content)))]
    if isinstance(message, BashExecutionMessage):
        return [_md_details("Shell command", md_fence(f"$ {message.command}\n{message.output}"))]
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return ["## Summary", md_text(message.summary)]
    return [md_fence(_json_text(dict(message.raw)), "json")]


def session_markdown(
    session: Session,
    advance: Callable[[int], None] = _nothing,
    registry: ModelRegistry | None = None,
) -> str:
    """The active branch as Markdown: every message, compaction and branch summary, in order.
    Session text keeps its own Markdown but no raw HTML (``_escape.md_text``); code and tool
    output are fenced; terminal controls are shown as ``\\x1b``-style escapes.

    ``advance(1)`` is called after each entry of the branch."""
    branch = session.get_branch()
    labels = session.labels
    out = [
        f"# {_md_inline(session.name or f'Session {session.id}')}",
        f"- id: {md_code(session.id)}\n- cwd: {md_code(session.cwd)}\n"
        f"- created: {_md_inline(session.header.timestamp)}\n"
        f"- active branch: {len(branch)} of {len(session)} entries, "
        f"leaf {md_code(str(session.leaf_id))}\n"
        f"- totals (active branch): {totals(branch, registry).line()}",
    ]
    for entry in branch:
        advance(1)
        if isinstance(entry, MessageEntry):
            part = _message_md(entry.message)
        elif isinstance(entry, CompactionEntry):
            part = [
                f"## Compaction ({entry.tokens_before} tokens before)",
                md_text(entry.summary),
            ]
        elif isinstance(entry, BranchSummaryEntry):
            part = ["## Branch summary", md_text(entry.summary)]
        elif isinstance(entry, SessionInfoEntry | LabelEntry | LeafEntry):
            continue
        else:
            text = entry_text(entry)
            part = [f"*{_md_inline(entry_kind(entry) + (': ' + text if text else ''))}*"]
        label = labels.get(entry.id)
        if label and part[0].startswith("## "):
            part[0] += f" [{_md_inline(label)}]"
        out.extend(part)
    # Markdown is for reading (in a terminal too); the exact values are what `jsonl` exports.
    return terminal("\n\n".join(out) + "\n")


# --- jsonl --------------------------------------------------------------------------------------


def session_jsonl(session: Session, advance: Callable[[int], None] = _nothing) -> bytes:
    """Our format (v3): the header, then every entry in file order (v1/v2 files migrated).
    Characters a terminal acts on are written as JSON escapes (``\\u009b``): the values read
    back are exactly the session's, but for approvals' signatures, which are left out.

    ``advance(1)`` is called after each entry."""
    header = attrs.evolve(session.header, version=3)
    lines = [_safe_line(encode_header(header))]
    for entry in session.entries():
        lines.append(_safe_line(_unsigned(encode_entry(entry))))
        advance(1)
    return b"".join(lines)


def _unsigned(obj: dict[str, object]) -> dict[str, object]:
    """An exported ``permission`` entry without its signature: an export is for sharing, and
    a signed approval in it could be replayed into a file with the same session id
    (docs/permissions.md); the approval itself stays readable."""
    data = obj.get("data")
    if obj.get("customType") == PERMISSION_ENTRY and isinstance(data, dict) and "signature" in data:
        return {**obj, "data": {k: v for k, v in data.items() if k != "signature"}}
    return obj


def _safe_line(obj: dict[str, object]) -> bytes:
    return json_text(dumps_line(obj).decode()).encode()


# --- the command ------------------------------------------------------------------------------


@click.command()
@root_option
@click.argument("ref", metavar="ID|PATH")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md", "jsonl"]),
    default=None,
    help="html: the whole tree, one page; md: the active branch; jsonl: our format (v3). "
    "Default: from the -o file's suffix (.html, .md, .jsonl), else html.",
)
@click.option(
    "-o",
    "--output",
    "output",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here (default: stdout; on a terminal, html and jsonl go to ID.FORMAT in the "
    "current folder).",
)
def export(root: str | None, ref: str, fmt: str | None, output: Path | None) -> None:
    """Export a session as an HTML page, Markdown or JSONL; the source is not modified.

    Without -o the export goes to stdout, but for html and jsonl on a terminal: they are
    written to ID.html (ID.jsonl) in the current folder, said on stderr. With a file and stdout
    a terminal, a progress bar counts the entries written.
    """
    by_suffix = _SUFFIX_FORMATS.get(output.suffix.lower()) if output is not None else None
    if fmt is not None and by_suffix is not None and fmt != by_suffix:
        raise click.BadParameter(
            f"--format {fmt} does not match the file name {output}", param_hint="-o"
        )
    fmt = fmt or by_suffix or "html"
    with opened(open_repo(root), ref) as session:
        if output is None and fmt != "md" and sys.stdout.isatty():
            # A page (or JSONL) is no reading for a terminal: it goes to a file, said so.
            output = Path(f"{session.id}.{fmt}")
        if output is None:
            sys.stdout.flush()
            sys.stdout.buffer.write(_render(session, fmt, _nothing))
            sys.stdout.buffer.flush()
            return
        with progress(f"exporting {fmt}", _entries_to_render(session, fmt)) as advance:
            data = _render(session, fmt, advance)
        output.write_bytes(data)
        echo(f"wrote {output} ({fmt}, {len(data)} bytes)", err=True)


_SUFFIX_FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".jsonl": "jsonl"}


def _render(session: Session, fmt: str, advance: Callable[[int], None]) -> bytes:
    if fmt == "html":
        return session_html(session, advance, load_registry().registry).encode()
    if fmt == "md":
        return session_markdown(session, advance, load_registry().registry).encode()
    return session_jsonl(session, advance)


def _entries_to_render(session: Session, fmt: str) -> int:
    """How many times the renderer of ``fmt`` calls ``advance``."""
    if fmt == "md":
        return len(session.path_ids(session.leaf_id))
    if fmt == "html":
        return sum(1 for i in session.entry_ids() if session.entry_type(i) not in ("label", "leaf"))
    return len(session)
