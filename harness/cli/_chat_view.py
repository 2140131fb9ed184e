"""What ``harness chat`` shows while a turn runs: streamed text and thinking, tool calls as they
start, update and end (output collapsed to a few lines), approvals remembered, retries.

Everything is printed as the harness's events fire (receivers connected with
``AgentHarness.connect``). Session text goes through ``_escape.terminal`` first, so a reply or tool
output holding terminal control sequences cannot drive the user's terminal. Styles come from
rich and vanish when stdout is not a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.text import Text

from hooks import (
    AssistantMessage,
    JSONValue,
    MessageEndEvent,
    MessageUpdateEvent,
    PermissionDecisionEvent,
    RetryEvent,
    SessionCompactEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)

from .._harness import AgentHarness
from .._permissions import PermissionRequest
from ._common import APPROVAL_GUTTER, gutter_lines, one_line
from ._escape import json_line, terminal
from ._render import short

__all__ = [
    "APPROVAL_GUTTER",
    "APPROVAL_INPUT_CHARS",
    "OUTPUT_LINES",
    "ChatView",
    "approval_cut",
    "approval_lines",
]

OUTPUT_LINES = 3
"""Lines of a tool's output shown under its call; the rest is counted, not shown."""

_LINE_CHARS = 160
_THINKING = "dim italic"
_ARGS_CHARS = 120
APPROVAL_INPUT_CHARS = 65536
"""The most of a path-less call's input (as indented JSON) an approval question shows; past it
the question says the input is cut."""


def _call_text(name: str, input: Mapping[str, JSONValue]) -> str:
    """``bash echo hi``: the tool and its main argument (else all arguments), on one line,
    escaped and shortened."""
    main = next(
        (v for key in ("command", "path", "pattern") if isinstance(v := input.get(key), str)),
        " ".join(f"{k}={v!r}" for k, v in input.items()),
    )
    return short(f"{name} {main}".rstrip(), _ARGS_CHARS)


def _input_text(request: PermissionRequest) -> str:
    """A path-less call's whole input, as indented JSON (every argument, nested ones too;
    control characters in strings as JSON escapes)."""
    return json_line(dict(request.input), indent=True)


def _indented(line: str) -> str:
    """One line of indented JSON after the gutter: its indent (ours: JSON strings hold no
    newline) kept as blanks up to 32, the rest as :func:`gutter_lines` shows it."""
    rest = line.lstrip(" ")
    indent = len(line) - len(rest)
    if indent > 32:
        return gutter_lines(line)[0]
    return APPROVAL_GUTTER + " " * indent + gutter_lines(rest)[0][len(APPROVAL_GUTTER) :]


def approval_cut(request: PermissionRequest) -> bool:
    """The approval question about ``request`` shows only the first
    :data:`APPROVAL_INPUT_CHARS` of its input (a path-less call with a larger input)."""
    return request.target is None and len(_input_text(request)) > APPROVAL_INPUT_CHARS


def approval_lines(request: PermissionRequest) -> list[str]:
    """What the person approving ``request`` reads before answering: the tool, then the whole
    command (or path) it asks about, line by line, each after :data:`APPROVAL_GUTTER`, nothing
    shortened or joined (a second command after a newline is a line of its own, not a word of
    the first), control characters and tabs shown escaped (a CR, an escape sequence or a bidi
    override cannot redraw or reorder what is shown) and long runs of blanks counted; then the
    operation key an "always" remembers, when it is not the command itself.

    A call without a target (an MCP tool, a code tool without ``target``) shows its whole
    input instead, as indented JSON in the same gutter (review 10, finding 6: only the start
    line, cut at 120 characters, showed the arguments, so a payload hid past them); an input
    of more than :data:`APPROVAL_INPUT_CHARS` is cut there and a last line says so."""
    verb = "run" if request.kind == "execute" else "use"
    where = ", outside the working folder" if request.leaves_cwd else ""
    lines = [f"{request.tool_name} wants to {verb}{where}:"]
    if request.target is None:
        text = _input_text(request)
        lines += [_indented(line) for line in text[:APPROVAL_INPUT_CHARS].split("\n")]
        if len(text) > APPROVAL_INPUT_CHARS:
            lines.append(
                f"input CUT: only its first {APPROVAL_INPUT_CHARS} of {len(text)} characters "
                "are shown above; the rest is not (answer n unless you know what it holds)"
            )
        return lines
    lines += gutter_lines(request.target)
    if request.reaches is not None:
        lines.append(f"which is, through a symlink: {one_line(request.reaches)}")
    if request.operation_key != f"{request.tool_name}({request.target})":
        lines.append(f"always would approve: {one_line(request.operation_key)}")
    return lines


class ChatView:
    """Prints one chat's turns on ``console``.

    Args:
        console: where to print (rich decides whether it is a terminal).
        live: rewrite a status line in place for tool progress (only on a terminal).
    """

    def __init__(self, console: Console, *, live: bool) -> None:
        self.console = console
        self._live = live
        self._block: str | None = None  # the kind of streamed block whose line is open
        self._status = False  # a progress line is on screen (live only)
        self._progress: dict[str, str] = {}  # tool call id -> output so far

    # --- plain output, for the chat's own messages ------------------------------------------

    def line(self, text: str = "", style: str | None = None) -> None:
        """Print one line (the open streamed line, if any, is ended first). Control characters
        are escaped here, once for every caller: these lines quote session text (names,
        labels, template names, a checked-out message)."""
        self.end_line()
        self.console.print(Text(terminal(text), style=style or ""))

    def note(self, text: str) -> None:
        self.line(text, "dim")

    def error(self, text: str) -> None:
        self.line(text, "bold red")

    def approval(self, request: PermissionRequest) -> None:
        """Show what an approval question is about (:func:`approval_lines`), whole."""
        for text in approval_lines(request):
            self.line(text, "bold")

    def end_line(self) -> None:
        """End a streamed line and clear a progress line, so the next output starts a line."""
        self._clear_status()
        if self._block is not None:
            self.console.print()
            self._block = None

    # --- events -----------------------------------------------------------------------------

    def attach(self, harness: AgentHarness) -> None:
        """Connect the receivers to ``harness`` (``harness.shutdown()`` disconnects them)."""
        harness.connect(MessageUpdateEvent, self._on_update)
        harness.connect(MessageEndEvent, self._on_message_end)
        harness.connect(ToolExecutionStartEvent, self._on_tool_start)
        harness.connect(ToolExecutionUpdateEvent, self._on_tool_update)
        harness.connect(ToolExecutionEndEvent, self._on_tool_end)
        harness.connect(PermissionDecisionEvent, self._on_decision)
        harness.connect(RetryEvent, self._on_retry)
        harness.connect(SessionCompactEvent, self._on_compact)

    def _on_update(self, sender: object, event: MessageUpdateEvent) -> None:
        if event.kind == "toolcall":
            return  # shown when it starts to run
        self._clear_status()
        if event.kind != self._block:
            if self._block is not None:
                self.console.print()
            if event.kind == "thinking":
                self.console.print(Text("thinking: ", style=_THINKING), end="")
            self._block = event.kind
        style = _THINKING if event.kind == "thinking" else ""
        self.console.print(Text(terminal(event.delta), style=style), end="")

    def _on_message_end(self, sender: object, event: MessageEndEvent) -> None:
        message = event.message
        if not isinstance(message, AssistantMessage):
            return
        self.end_line()  # a failed request is reported by the chat, from its exception

    def _on_tool_start(self, sender: object, event: ToolExecutionStartEvent) -> None:
        self.line(f"-> {_call_text(event.tool_name, event.input)}", "cyan")

    def _on_tool_update(self, sender: object, event: ToolExecutionUpdateEvent) -> None:
        if not self._live or not isinstance(event.partial, str):
            return
        so_far = self._progress.get(event.tool_call_id, "") + event.partial
        self._progress[event.tool_call_id] = so_far
        last = next((ln for ln in reversed(so_far.splitlines()) if ln.strip()), "")
        width = max(self.console.width - 8, 20)
        self._clear_status()
        self.console.file.write(f"   ... {short(last, width)}")
        self.console.file.flush()
        self._status = True

    def _on_tool_end(self, sender: object, event: ToolExecutionEndEvent) -> None:
        self._progress.pop(event.tool_call_id, None)
        lines = event.result.text.rstrip("\n").splitlines() or ["(no output)"]
        style = "red" if event.is_error else "dim"
        for text in lines[:OUTPUT_LINES]:
            self.line(f"   | {short(text, _LINE_CHARS)}", style)
        if len(lines) > OUTPUT_LINES:
            more = len(lines) - OUTPUT_LINES
            self.line(f"   | ... (+{more} more line{'' if more == 1 else 's'})", style)

    def _on_decision(self, sender: object, event: PermissionDecisionEvent) -> None:
        if event.remembered is not None:
            where = "this session" if event.remembered == "session" else "this project"
            self.note(f"   approved always for {where}: {event.operation_key}")

    def _on_retry(self, sender: object, event: RetryEvent) -> None:
        self.note(
            f"retry {event.attempt}/{event.max_attempts} in {event.delay_s:.1f}s: "
            f"{one_line(event.error_message)}"
        )

    def _on_compact(self, sender: object, event: SessionCompactEvent) -> None:
        self.note(f"(context compacted: entry {event.entry_id})")

    def _clear_status(self) -> None:
        if self._status:
            self.console.file.write("\r\x1b[2K")
            self.console.file.flush()
            self._status = False
