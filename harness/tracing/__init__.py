"""OpenTelemetry traces of harness runs (the ``otel`` extra).

:func:`instrument` subscribes to the event bus and turns events into spans, following the
OpenTelemetry GenAI semantic conventions (``gen_ai.*``) where they have a name for a thing:

=================================  ======================================  ===================
span (name)                        from ... to                             parent
=================================  ======================================  ===================
``invoke_agent harness`` (run)     ``agent_start`` .. ``agent_end``        the caller's span;
                                                                           for a sub-run, the
                                                                           tool call it runs in
``turn {index}``                   ``turn_start`` .. ``turn_end``          run
``chat {model}`` (model request)   ``before_provider_request`` (or         turn
                                   ``retry``) .. the reply's
                                   ``message_end``
``execute_tool {name}``            ``tool_execution_start`` ..             turn
                                   ``tool_execution_end``
``compaction``                     ``session_before_compact`` ..           turn (or run, or
                                   ``session_compact``                     none)
=================================  ======================================  ===================

Attributes: ``gen_ai.operation.name`` (``invoke_agent``, ``chat``, ``execute_tool``),
``gen_ai.system`` and ``gen_ai.provider.name`` (the provider), ``gen_ai.request.model``,
``gen_ai.response.model``, ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens``
(all input tokens, cached ones included), ``gen_ai.usage.output_tokens``,
``gen_ai.usage.cache_read.input_tokens``, ``gen_ai.usage.cache_creation.input_tokens``,
``gen_ai.conversation.id`` (the session id), ``gen_ai.tool.name``, ``gen_ai.tool.call.id``;
and ours, ``harness.*``: the run's ``depth`` and ``parent_session``, a turn's ``index``, a
request's ``retry.attempt`` and ``cost_usd``, a tool call's ``permission.decision``,
``permission.reason`` and ``permission.operation_key``, a compaction's ``trigger``,
``tokens_before``, ``entry_id`` and ``outcome``. A failed request or tool call has status
ERROR and ``error.type``.

**Sub-runs.** A harness at ``depth`` > 0 whose run starts inside a tool call of a traced harness
(``run_skill`` from a tool, a sub-agent tool) gets its run span under that tool call's span;
one started elsewhere with a session whose ``parentSession`` is a traced harness's session
hangs under that harness's innermost open span, or, when it is idle, starts a trace of its own
with a link to the parent's last run.

**Contents** (prompts, replies, tool arguments and results) are recorded only when asked:
``capture_content=True`` or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; then
``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.tool.call.arguments`` and
``gen_ai.tool.call.result`` hold them as JSON (messages as in session files).

When nothing is instrumented no receiver is connected: the harness pays nothing
(``bench/bench_tracing.py``).
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import MissingExtraError

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer
except ImportError as exc:  # pragma: no cover - exercised by the install tests
    raise MissingExtraError("harness.tracing", "otel") from exc

from hooks import (
    AgentEndEvent,
    AgentStartEvent,
    AssistantMessage,
    BeforeProviderRequestEvent,
    ContextEvent,
    Event,
    MessageEndEvent,
    PermissionDecisionEvent,
    RetryEvent,
    SessionBeforeCompactEvent,
    SessionCompactEvent,
    SettledEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
    TurnStartEvent,
    connect,
)
from repos import encode_message

from .._loop import current_tool_call

__all__ = ["CAPTURE_CONTENT_ENV", "Instrumentation", "configure_from_env", "instrument"]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable OpenTelemetry's GenAI instrumentations read to record contents."""

_SCOPE = "harness.tracing"


def _capture_default() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class _State:
    """The open spans of one harness."""

    def __init__(self, parent: Context | None, links: Sequence[Link]) -> None:
        self.parent = parent  # the context the run span starts in (None: the caller's)
        self.links = list(links)
        self.run: Span | None = None
        self.last_run: Span | None = None
        self.turn: Span | None = None
        self.chat: Span | None = None
        self.chat_model: tuple[str, str] = ("", "")
        self.attempt = 1
        self.input_messages: str | None = None
        self.tools: dict[str, Span] = {}
        self.compaction: Span | None = None

    def innermost(self) -> Span | None:
        return self.compaction or self.turn or self.run


class Instrumentation:
    """The receivers :func:`instrument` connected; :meth:`uninstrument` (or leaving the
    ``with`` block) disconnects them and ends the spans still open."""

    def __init__(
        self,
        harness: object | None,
        tracer: Tracer,
        capture_content: bool,
    ) -> None:
        self._roots: weakref.WeakSet[object] | None = (
            None if harness is None else weakref.WeakSet([harness])
        )
        self._tracer = tracer
        self._capture = capture_content
        self._states: weakref.WeakKeyDictionary[object, _State] = weakref.WeakKeyDictionary()
        self._disconnects: list[Callable[[], None]] = []
        handlers: dict[type[Event], Callable[[object, Any], None]] = {
            AgentStartEvent: self._agent_start,
            AgentEndEvent: self._agent_end,
            SettledEvent: self._settled,
            TurnStartEvent: self._turn_start,
            TurnEndEvent: self._turn_end,
            BeforeProviderRequestEvent: self._request,
            RetryEvent: self._retry,
            MessageEndEvent: self._message_end,
            ToolExecutionStartEvent: self._tool_start,
            PermissionDecisionEvent: self._permission,
            ToolExecutionEndEvent: self._tool_end,
            SessionBeforeCompactEvent: self._compact_start,
            SessionCompactEvent: self._compact_end,
        }
        if capture_content:
            handlers[ContextEvent] = self._context
        for cls, handler in handlers.items():
            self._disconnects.append(connect(cls, self._receiver(handler), priority=-1000))

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstrument()

    def uninstrument(self) -> None:
        """Disconnect every receiver and end the spans still open (marked unfinished)."""
        for disconnect in self._disconnects:
            disconnect()
        self._disconnects.clear()
        for state in list(self._states.values()):
            spans = [*state.tools.values(), state.compaction, state.chat, state.turn, state.run]
            for span in spans:
                if span is not None and span.is_recording():
                    span.set_attribute("harness.unfinished", True)
                    span.end()
        self._states = weakref.WeakKeyDictionary()

    # --- which harnesses are traced ---------------------------------------------------------

    def _receiver(self, handler: Callable[[object, Any], None]) -> Callable[..., None]:
        def receive(sender: object, event: Any) -> None:
            handler(sender, event)

        receive.__qualname__ = f"harness.tracing.{handler.__name__.lstrip('_')}"
        return receive

    def _state(self, sender: object) -> _State | None:
        return self._states.get(sender)

    def _adopt(self, sender: object) -> _State | None:
        """The state of a harness starting a run, made now if it is traced: a root given to
        :func:`instrument` (or any harness, for a global switch), or a sub-run of one."""
        known = self._states.get(sender)
        if known is not None:
            return known
        state: _State | None = None
        running_in = current_tool_call()
        if running_in is not None and running_in.harness is not sender:
            parent = self._states.get(running_in.harness)
            span = parent.tools.get(running_in.tool_call_id) if parent is not None else None
            if span is not None:
                state = _State(trace.set_span_in_context(span), ())
        if state is None:
            parent_state = self._parent_by_session(sender)
            if parent_state is not None:
                inner = parent_state.innermost()
                if inner is not None:
                    state = _State(trace.set_span_in_context(inner), ())
                else:
                    last = parent_state.last_run
                    links = [Link(last.get_span_context())] if last is not None else []
                    state = _State(trace.set_span_in_context(trace.INVALID_SPAN), links)
        if state is None and (self._roots is None or sender in self._roots):
            state = _State(None, ())
        if state is not None:
            self._states[sender] = state
        return state

    def _parent_by_session(self, sender: object) -> _State | None:
        if not getattr(sender, "depth", 0):
            return None
        session = getattr(sender, "session", None)
        parent_ref = getattr(getattr(session, "header", None), "parent_session", None)
        if not parent_ref:
            return None
        for harness, state in list(self._states.items()):
            other = getattr(harness, "session", None)
            if other is not None and parent_ref in (other.id, str(other.path)):
                return state
        return None

    # --- spans ----------------------------------------------------------------------------------

    def _start(
        self,
        name: str,
        parent: Span | None,
        attributes: Mapping[str, Any],
        *,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self._tracer.start_span(name, context=context, kind=kind, attributes=attributes)

    def _agent_start(self, sender: object, event: AgentStartEvent) -> None:
        state = self._adopt(sender)
        if state is None:
            return
        session = getattr(sender, "session", None)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "harness",
            "harness.depth": int(getattr(sender, "depth", 0)),
        }
        if session is not None:
            attributes["gen_ai.conversation.id"] = session.id
            if session.header.parent_session:
                attributes["harness.parent_session"] = session.header.parent_session
        state.run = self._tracer.start_span(
            "invoke_agent harness",
            context=state.parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=state.links,
        )

    def _end_run(self, state: _State, *, error: str | None = None) -> None:
        for span in (*state.tools.values(), state.compaction, state.chat, state.turn):
            if span is not None:
                span.set_attribute("harness.unfinished", True)
                span.end()
        state.tools.clear()
        state.compaction = state.chat = state.turn = None
        if state.run is not None:
            if error is not None:
                state.run.set_status(Status(StatusCode.ERROR, error))
            state.run.end()
            state.last_run, state.run = state.run, None

    def _agent_end(self, sender: object, event: AgentEndEvent) -> None:
        state = self._state(sender)
        if state is not None:
            self._end_run(state)

    def _settled(self, sender: object, event: SettledEvent) -> None:
        state = self._state(sender)
        if state is not None and state.run is not None:  # the run ended without agent_end
            self._end_run(state, error="the run ended with an error")

    def _turn_start(self, sender: object, event: TurnStartEvent) -> None:
        state = self._state(sender)
        if state is not None and state.run is not None:
            state.turn = self._start(
                f"turn {event.turn_index}", state.run, {"harness.turn.index": event.turn_index}
            )

    def _turn_end(self, sender: object, event: TurnEndEvent) -> None:
        state = self._state(sender)
        if state is None or state.turn is None:
            return
        self._end_compaction(state, "skipped")
        state.turn.end()
        state.turn = None

    def _chat_span(self, state: _State, provider: str, model: str) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": provider,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
        }
        if state.attempt > 1:
            attributes["harness.retry.attempt"] = state.attempt
        if self._capture and state.input_messages is not None:
            attributes["gen_ai.input.messages"] = state.input_messages
        state.chat = self._start(
            f"chat {model}", state.turn or state.run, attributes, kind=SpanKind.CLIENT
        )
        state.chat_model = (provider, model)

    def _context(self, sender: object, event: ContextEvent) -> None:
        state = self._state(sender)
        if state is not None:
            state.input_messages = _json([encode_message(m) for m in event.messages])

    def _request(self, sender: object, event: BeforeProviderRequestEvent) -> None:
        state = self._state(sender)
        if state is None or state.run is None:
            return
        self._end_compaction(state, "skipped")
        state.attempt = 1
        self._chat_span(state, event.provider, event.model_id)

    def _retry(self, sender: object, event: RetryEvent) -> None:
        state = self._state(sender)
        if state is None or state.run is None:
            return
        state.attempt = event.attempt + 1
        self._chat_span(state, *state.chat_model)

    def _message_end(self, sender: object, event: MessageEndEvent) -> None:
        state = self._state(sender)
        message = event.message
        if state is None or state.chat is None or not isinstance(message, AssistantMessage):
            return
        span, state.chat = state.chat, None
        usage = message.usage
        span.set_attributes(
            {
                "gen_ai.response.model": message.model,
                "gen_ai.response.finish_reasons": [message.stop_reason],
                "gen_ai.usage.input_tokens": usage.input + usage.cache_read + usage.cache_write,
                "gen_ai.usage.output_tokens": usage.output,
                "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
                "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
                "harness.cost_usd": usage.cost.total,
            }
        )
        if self._capture:
            span.set_attribute("gen_ai.output.messages", _json([encode_message(message)]))
        if message.stop_reason in ("error", "aborted") or event.entry_id is None:
            span.set_attribute("error.type", message.stop_reason)
            span.set_status(Status(StatusCode.ERROR, message.error_message or None))
        span.end()

    def _tool_start(self, sender: object, event: ToolExecutionStartEvent) -> None:
        state = self._state(sender)
        if state is None or state.run is None:
            return
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.tool_call_id,
        }
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = _json(dict(event.input))
        state.tools[event.tool_call_id] = self._start(
            f"execute_tool {event.tool_name}", state.turn or state.run, attributes
        )

    def _permission(self, sender: object, event: PermissionDecisionEvent) -> None:
        state = self._state(sender)
        span = state.tools.get(event.tool_call_id) if state is not None else None
        if span is not None:
            span.set_attributes(
                {
                    "harness.permission.decision": event.decision,
                    "harness.permission.reason": event.reason or "",
                    "harness.permission.operation_key": event.operation_key,
                }
            )

    def _tool_end(self, sender: object, event: ToolExecutionEndEvent) -> None:
        state = self._state(sender)
        span = state.tools.pop(event.tool_call_id, None) if state is not None else None
        if span is None:
            return
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", _json(encode_message(event.result)))
        if event.is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def _compact_start(self, sender: object, event: SessionBeforeCompactEvent) -> None:
        state = self._adopt(sender) if self._state(sender) is None else self._state(sender)
        if state is None:
            return
        self._end_compaction(state, "cancelled")
        state.compaction = self._start(
            "compaction",
            state.turn or state.run,
            {
                "harness.compaction.trigger": event.trigger,
                "harness.compaction.tokens_before": event.tokens_before,
                "gen_ai.conversation.id": event.session_id,
            },
        )

    def _compact_end(self, sender: object, event: SessionCompactEvent) -> None:
        state = self._state(sender)
        if state is None or state.compaction is None:
            return
        state.compaction.set_attribute("harness.compaction.entry_id", event.entry_id)
        self._end_compaction(state, "compacted")

    def _end_compaction(self, state: _State, outcome: str) -> None:
        if state.compaction is not None:
            state.compaction.set_attribute("harness.compaction.outcome", outcome)
            state.compaction.end()
            state.compaction = None


def instrument(
    harness: object | None = None,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    capture_content: bool | None = None,
) -> Instrumentation:
    """Emit OpenTelemetry spans for ``harness``'s runs and their sub-runs (see the module doc),
    or for every harness when ``harness`` is None (a global switch).

    Args:
        tracer_provider: where spans go (default: the global one, ``trace.set_tracer_provider``).
        capture_content: record messages, tool arguments and results (default: the
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment variable, else
            off).

    Returns:
        The :class:`Instrumentation`; ``uninstrument()`` it (or use it as a context manager).
    """
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    tracer = provider.get_tracer(_SCOPE)
    capture = _capture_default() if capture_content is None else capture_content
    return Instrumentation(harness, tracer, capture)


def configure_from_env() -> trace.TracerProvider:
    """A tracer provider set up from the standard ``OTEL_*`` environment variables, for the
    CLI's ``--otel``: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (the resource;
    service name ``jsonl-harness`` unless set), ``OTEL_TRACES_EXPORTER`` (``otlp``, the
    default: OTLP over HTTP/protobuf configured by ``OTEL_EXPORTER_OTLP_*``; ``console``;
    ``none``), ``OTEL_SDK_DISABLED`` and the batch processor's ``OTEL_BSP_*``. Call
    ``shutdown()`` on it before exiting, to send what is buffered.

    Raises:
        MissingExtraError: the SDK or the OTLP exporter is not installed.
        ValueError: an exporter other than ``otlp``, ``console`` or ``none``.
    """
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError as exc:
        raise MissingExtraError("--otel", "otel") from exc
    defaults = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "jsonl-harness"}
    provider = TracerProvider(resource=Resource.create(defaults))
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return provider
    names = [
        n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()
    ]
    for name in names:
        exporter: SpanExporter
        if name == "none":
            continue
        if name == "console":
            exporter = ConsoleSpanExporter()
        elif name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError as exc:
                raise MissingExtraError("--otel", "otel") from exc
            exporter = OTLPSpanExporter()
        else:
            raise ValueError(
                f"OTEL_TRACES_EXPORTER={name!r} is not supported: use otlp, console or none"
            )
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
