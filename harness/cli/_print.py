"""Claude Code's print mode records for ``harness run``: ``--output-format json`` and
``stream-json`` (and ``--input-format stream-json``).

The records are those of Claude Code's headless mode and its Agent SDK (``SDKMessage``): a
first ``{"type": "system", "subtype": "init", ...}`` naming the session, working folder, model,
tools and permission mode; an ``assistant`` record for each reply (``message`` in the Anthropic
Messages API's shape: ``content`` blocks ``text``/``thinking``/``tool_use``, ``stop_reason``,
``usage``) and a ``user`` record for each tool result (a ``tool_result`` block); and after each
prompt a ``{"type": "result", "subtype": "success" | "error_max_turns" |
"error_during_execution", "is_error", "result", "session_id", "num_turns", "duration_ms",
"duration_api_ms", "total_cost_usd", "usage", ...}``. ``--verbose`` adds our own events (the
shape of ``harness.EventEncoder``, docs/events.md) between them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from harness import (
    EVENT_CLASSES,
    AgentHarness,
    AssistantMessage,
    Event,
    EventEncoder,
    HarnessError,
    Message,
    MessageEndEvent,
    ModelRegistry,
    PermissionDecisionEvent,
    PermissionRequestEvent,
    ProviderError,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserContent,
    encode_message,
)

from .._permissions.claude_code import claude_code_mode
from ._render import cost_json, reply_totals

__all__ = ["PrintRun", "anthropic_message"]

Record = dict[str, Any]

_STOP = {"stop": "end_turn", "toolUse": "tool_use", "length": "max_tokens"}
"""Our (pi's) stop reasons as the Messages API's; ``error``/``aborted`` have none (null)."""


def _usage(message: AssistantMessage) -> Record:
    u = message.usage
    return {
        "input_tokens": u.input,
        "output_tokens": u.output,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cache_read,
    }


def anthropic_message(message: AssistantMessage, message_id: str) -> Record:
    """A reply as the Messages API's ``message`` object (what Claude Code's ``assistant``
    records carry)."""
    content: list[Record] = []
    for block in message.content:
        if isinstance(block, TextContent):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            content.append(
                {
                    "type": "thinking",
                    "thinking": block.thinking,
                    "signature": block.thinking_signature or "",
                }
            )
        elif isinstance(block, ToolCall):
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
            )
        elif isinstance(block, UnknownContent):
            content.append(dict(block.raw))
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": message.model,
        "content": content,
        "stop_reason": _STOP.get(message.stop_reason),
        "stop_sequence": None,
        "usage": _usage(message),
    }


def _tool_result(message: ToolResultMessage) -> Record:
    return {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": encode_message(message)["content"],
        "is_error": message.is_error,
    }


class PrintRun:
    """One ``harness run``'s records (see the module docstring), written through ``emit``.

    Attach it before the first prompt; :meth:`init` is the first record, :meth:`prompt` runs
    one prompt and returns its ``result`` record (also emitted when streaming).
    """

    def __init__(
        self,
        harness: AgentHarness,
        registry: ModelRegistry,
        *,
        emit: Callable[[Record], None] | None,
        verbose: bool,
        max_turns: int | None = None,
    ) -> None:
        self.harness = harness
        self._max_turns = max_turns
        self._registry = registry
        self._emit = emit
        self._added: list[Message] = []
        self._turns = 0
        self._api_s = 0.0
        self._request_at: float | None = None
        self._denials: list[Record] = []
        self._inputs: dict[str, Any] = {}
        # A sub-agent's harness is linked to this one (its events reach our receivers too):
        # the records are this run's own, so events from another sender are left out.
        own = self._own
        harness.connect("message_start", own(self._message_start))
        harness.connect("message_end", own(self._message_end))
        harness.connect("turn_end", own(self._turn_end))
        harness.connect("permission_request", own(self._permission_request))
        harness.connect("permission_decision", own(self._permission_decision))
        if verbose and emit is not None:
            encoder = EventEncoder()

            def forward(sender: object, event: Event) -> None:
                if sender is harness:
                    emit(encoder.encode(event, sender))

            for name in EVENT_CLASSES:
                harness.connect(name, forward, priority=-100)

    def _own(self, receiver: Callable[[object, Any], None]) -> Callable[..., None]:
        def only_mine(sender: object, event: Any) -> None:
            if sender is self.harness:
                receiver(sender, event)

        return only_mine

    @property
    def session_id(self) -> str:
        return self.harness.session.id

    def init(self, mcp: Sequence[Record] = ()) -> Record:
        """Claude Code's ``system``/``init`` record: the session, folder, model, tools, MCP
        servers, permission mode and slash commands (prompt templates)."""
        h = self.harness
        tools = list(h.active_tools)
        tools += [t for s in h.mcp_servers for t in s.tools]
        return {
            "type": "system",
            "subtype": "init",
            "uuid": str(uuid.uuid4()),
            "session_id": self.session_id,
            "cwd": str(h.cwd),
            "tools": tools,
            "mcp_servers": list(mcp),
            "model": f"{h.model.provider}/{h.model.id}",
            "permissionMode": self._mode(),
            "slash_commands": [t.name for t in h.templates],
            "apiKeySource": "none",
            "output_style": "default",
        }

    def _mode(self) -> str:
        mode_for = getattr(self.harness.supervisor, "mode_for", None)
        if mode_for is None:
            return "default"
        try:
            return str(claude_code_mode(mode_for(self.harness.cwd)))
        except ValueError:  # a settings file names no mode we know: every call is denied
            return "default"

    # --- events ----------------------------------------------------------------------------

    def _message_start(self, sender: object, event: Event) -> None:
        if isinstance(getattr(event, "message", None), AssistantMessage):
            self._request_at = time.monotonic()

    def _message_end(self, sender: object, event: MessageEndEvent) -> None:
        message = event.message
        if isinstance(message, AssistantMessage) and self._request_at is not None:
            self._api_s += time.monotonic() - self._request_at
            self._request_at = None
        if event.entry_id is None:
            return  # a failed attempt that was retried: not stored, not shown
        if isinstance(message, AssistantMessage):
            self._added.append(message)
            self.put(
                {
                    "type": "assistant",
                    "message": anthropic_message(message, f"msg_{event.entry_id}"),
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": event.entry_id,
                }
            )
        elif isinstance(message, ToolResultMessage):
            self.put(
                {
                    "type": "user",
                    "message": {"role": "user", "content": [_tool_result(message)]},
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": event.entry_id,
                }
            )

    def _turn_end(self, sender: object, event: Event) -> None:
        self._turns += 1

    def _permission_request(self, sender: object, event: PermissionRequestEvent) -> None:
        self._inputs[event.tool_call_id] = dict(event.input)

    def _permission_decision(self, sender: object, event: PermissionDecisionEvent) -> None:
        tool_input = self._inputs.pop(event.tool_call_id, {})
        if event.decision == "deny":
            self._denials.append(
                {
                    "tool_name": event.tool_name,
                    "tool_use_id": event.tool_call_id,
                    "tool_input": tool_input,
                }
            )

    def put(self, record: Record) -> None:
        """Emit ``record`` (when streaming)."""
        if self._emit is not None:
            self._emit(record)

    # --- one prompt --------------------------------------------------------------------------

    async def prompt(
        self, content: str | Sequence[UserContent]
    ) -> tuple[Record, AssistantMessage | None, HarnessError | None]:
        """Run one prompt; its ``result`` record (emitted too), the reply (None when the run
        failed before one) and the error that ended it (None: it ran to its end)."""
        self._added, self._turns, self._api_s = [], 0, 0.0
        self._denials = []
        started = time.monotonic()
        reply: AssistantMessage | None = None
        error: HarnessError | None = None
        try:
            reply = await self.harness.prompt(content, max_turns=self._max_turns)
        except ProviderError as exc:
            error, reply = exc, exc.reply
        except HarnessError as exc:
            error = exc
        totals = reply_totals(self._added, self._registry)
        if error is not None:
            subtype = "error_during_execution"
        elif getattr(reply, "stop_reason", None) == "max_turns":
            subtype = "error_max_turns"
        else:
            subtype = "success"
        record: Record = {
            "type": "result",
            "subtype": subtype,
            "is_error": subtype != "success",
            "duration_ms": round((time.monotonic() - started) * 1000),
            "duration_api_ms": round(self._api_s * 1000),
            "num_turns": self._turns,
            "result": reply.text if reply is not None else "",
            "session_id": self.session_id,
            "total_cost_usd": totals.cost,
            "usage": {
                "input_tokens": totals.input,
                "output_tokens": totals.output,
                "cache_creation_input_tokens": totals.cache_write,
                "cache_read_input_tokens": totals.cache_read,
            },
            "permission_denials": self._denials,
            "uuid": str(uuid.uuid4()),
            # Ours: how much of the cost is estimated from token counts at the registry's
            # prices (a reply that recorded none), and how many replies had no price.
            "cost": cost_json(totals),
        }
        if error is not None:
            record["errors"] = [f"error[{error.code}]: {error}"]
        if reply is not None:
            record["stop_reason"] = reply.stop_reason
        self.put(record)
        return record, reply, error
