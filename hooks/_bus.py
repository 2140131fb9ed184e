"""Dispatch: receiver order, sync and async receivers, result combination, handler_error.

The bus never calls blinker's ``send()``: blinker leaves receiver order undefined, stops at the
first receiver that raises, and cannot mix sync and async receivers. It uses blinker's registry
(``receivers_for``, ``has_receivers_for``, ``is_muted``) and does the calling itself.

Every signal is walked by one :class:`_Chain`; each ``emit_*`` function only says what the results
of its hook mean (combination rules: DESIGN §6, ``docs/events.md``).

Receiver convention (blinker's): ``receiver(sender, event=event)``, so write
``def r(sender, event): ...`` or ``async def r(sender, *, event): ...``. Order: higher ``priority``
first, then the order in which receivers were first connected to the signal, whether through
:func:`connect`, :func:`on` or blinker itself (``signal.connect``, ``signal.connected_to``).

Each async receiver gets at most ``timeout_s`` (default :data:`DEFAULT_HOOK_TIMEOUT_S`) to return;
one that does not is cancelled and treated as a receiver that raised :class:`HookTimeoutError`.
A sync receiver cannot be interrupted: it blocks the event loop until it returns, and costs no
timer. A signal's receivers are sorted when one connects or disconnects, not per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Final, Generic, TypeAlias, TypeVar, get_args

from attrs import evolve
from blinker import ANY, NamedSignal, Signal

from ._errors import HookTimeoutError
from ._events import (
    BeforeAgentStartEvent,
    BeforeProviderPayloadEvent,
    BeforeProviderRequestEvent,
    ContextEvent,
    Event,
    HandlerErrorEvent,
    HookEvent,
    ObserverEvent,
    SessionBeforeCompactEvent,
    SessionBeforeForkEvent,
    SessionBeforeRewindEvent,
    SessionBeforeTreeEvent,
    SessionStartEvent,
    StopEvent,
    SubagentStopEvent,
    ToolCallEvent,
    ToolResultEvent,
    UserPromptSubmitEvent,
)
from ._messages import JSONValue, Message
from ._options import StreamOptions, StreamOptionsPatch
from ._results import (
    UNSET,
    AddContext,
    AgentStartOutcome,
    AgentStartPatch,
    Allow,
    Ask,
    BeforeCompactOutcome,
    BeforeForkOutcome,
    BeforeRewindOutcome,
    BeforeTreeOutcome,
    Block,
    Cancel,
    Continue,
    PatchInput,
    PatchResult,
    ReplaceMessages,
    ReplacePayload,
    StopOutcome,
    SupplyCompaction,
    SupplySummary,
    ToolCallOutcome,
    ToolResultOutcome,
    TreeOptions,
    UserPromptOutcome,
)
from ._signals import EVENT_CLASSES, signal_for

__all__ = [
    "DEFAULT_HOOK_TIMEOUT_S",
    "Receiver",
    "connect",
    "emit_before_agent_start",
    "emit_before_provider_payload",
    "emit_before_provider_request",
    "emit_context",
    "emit_session_before_compact",
    "emit_session_before_fork",
    "emit_session_before_rewind",
    "emit_session_before_tree",
    "emit_session_start",
    "emit_stop",
    "emit_tool_call",
    "emit_tool_result",
    "emit_user_prompt_submit",
    "has_receivers",
    "link_sender",
    "notify",
    "on",
]

Receiver: TypeAlias = Callable[..., object]
"""``receiver(sender, event=event)``; may be sync or async; returns a result, None or anything
(observers' returns are ignored)."""

F = TypeVar("F", bound=Receiver)
E = TypeVar("E", bound=Event)
R = TypeVar("R")

DEFAULT_HOOK_TIMEOUT_S: Final = 30.0
"""Seconds an async receiver may take unless connected with another ``timeout_s``: long enough
for a network call or a human glance, short enough that a hung hook cannot stall a run for ever."""

_log = logging.getLogger(__name__)
_sequence = itertools.count()


def _key(obj: object) -> Hashable:
    """A receiver's or sender's identity for the ledger: a bound method is made anew at each
    attribute access, so it is known by its function and instance (as blinker files it)."""
    if inspect.ismethod(obj):
        return id(obj.__func__), id(obj.__self__)
    if isinstance(obj, str | int):  # equal values are one sender, whatever their id()
        return obj
    return id(obj)


def _weak(obj: Any, callback: Callable[[Any], None]) -> weakref.ref[Any]:
    if inspect.ismethod(obj):
        return weakref.WeakMethod(obj, callback)
    return weakref.ref(obj, callback)


_Cached: TypeAlias = tuple["weakref.ref[Any] | None", list[Receiver]]
"""A sender's sorted receivers, and a weak reference that says the sender is still the same
object (None: a sender that is its own identity, such as ``ANY`` or a string)."""


class _Ledger:
    """What blinker does not record for one signal: connection order, priority, senders.

    Fed by the signal's ``receiver_connected``/``receiver_disconnected``, so receivers connected
    through blinker directly are ordered too. A receiver keeps its place until it is fully
    disconnected (or, if weakly connected, collected); reconnecting then puts it last.
    """

    def __init__(self, signal: Signal) -> None:
        self.signal = signal
        self.order: dict[Hashable, int] = {}
        self.priority: dict[Hashable, int] = {}
        self.timeout_s: dict[Hashable, float | None] = {}
        self.senders: dict[Hashable, set[Hashable]] = {}
        self._refs: dict[Hashable, weakref.ref[Any]] = {}
        # Sorted receivers by sender, for strongly connected receivers only: a cached weak
        # receiver would be kept alive by the cache. Cleared by every (dis)connection.
        self._sorted: dict[Hashable, _Cached] = {}
        signal.receiver_connected.connect(self._connected, weak=False)
        signal.receiver_disconnected.connect(self._disconnected, weak=False)

    def sort_key(self, receiver: Receiver) -> tuple[int, int]:
        rid = _key(receiver)
        return -self.priority.get(rid, 0), self.order.get(rid, 0)

    def timeout_for(self, receiver: Receiver) -> float | None:
        return self.timeout_s.get(_key(receiver), DEFAULT_HOOK_TIMEOUT_S)

    def receivers(self, sender: object) -> list[Receiver]:
        """The receivers an event from ``sender`` reaches, in order (a list not to change)."""
        key = _key(sender)
        cached = self._sorted.get(key)
        if cached is not None:
            alive, receivers = cached
            # The same id() may now name another object: the cache holds only for the sender
            # it was made for.
            if alive is None or alive() is sender:
                return receivers
        signal = self.signal
        receivers = list(signal.receivers_for(sender))
        if len(receivers) > 1:
            receivers.sort(key=self.sort_key)
        if all(not isinstance(signal.receivers.get(_key(r)), weakref.ref) for r in receivers):
            if isinstance(sender, str | int) or sender is ANY:
                self._sorted[key] = (None, receivers)
            else:
                # A sender that cannot be weakly referenced is not cached.
                with contextlib.suppress(TypeError):
                    alive = _weak(sender, lambda _ref: self._uncache(key))
                    self._sorted[key] = (alive, receivers)
        return receivers

    def invalidate(self) -> None:
        self._sorted.clear()

    def _uncache(self, key: Hashable) -> None:
        self._sorted.pop(key, None)

    def _connected(self, signal: Signal, *, receiver: Receiver, sender: Any, weak: bool) -> None:
        self._sorted.clear()
        rid = _key(receiver)
        self.order.setdefault(rid, next(_sequence))
        self.senders.setdefault(rid, set()).add(_key(sender))
        # blinker drops a collected weak receiver without telling anyone; forget it too, or a new
        # receiver reusing its id() would inherit its place.
        if weak and rid not in self._refs:
            self._refs[rid] = _weak(receiver, lambda _ref: self._forget(rid))

    def _disconnected(self, signal: Signal, *, receiver: Receiver, sender: Any) -> None:
        self._sorted.clear()
        rid = _key(receiver)
        if sender is ANY:  # blinker removed the receiver from every sender
            self._forget(rid)
        elif rid in self.senders:
            self.senders[rid].discard(_key(sender))

    def _forget(self, rid: Hashable) -> None:
        self._sorted.clear()
        for table in (self.order, self.priority, self.timeout_s, self.senders, self._refs):
            table.pop(rid, None)


_LEDGERS: Final[Mapping[str, _Ledger]] = {name: _Ledger(signal_for(name)) for name in EVENT_CLASSES}
_HOOK_EVENTS: Final[frozenset[type[Event]]] = frozenset(get_args(HookEvent))
_OBSERVERS: Final[Mapping[type[Event], NamedSignal]] = {
    cls: signal_for(cls) for cls in EVENT_CLASSES.values() if cls not in _HOOK_EVENTS
}
_HANDLER_ERROR: Final = signal_for(HandlerErrorEvent)


# --- subscribing ----------------------------------------------------------------------------


def connect(
    event: str | type[Event],
    receiver: Receiver,
    *,
    sender: object = ANY,
    priority: int = 0,
    timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
) -> Callable[[], None]:
    """Connect a receiver to an event's signal, strongly (it lives until disconnected).

    Args:
        event: signal name (``"tool_call"``) or event class (``ToolCallEvent``).
        receiver: ``receiver(sender, event=...)``, sync or async.
        sender: only events from this sender (e.g. one harness); :data:`blinker.ANY` for all.
        priority: higher runs first; ties run in connection order. It belongs to the receiver,
            not to one connection: connecting it again with another priority replaces it.
        timeout_s: seconds an async receiver may run before it is cancelled and reported as
            ``handler_error`` (:class:`HookTimeoutError`; a ``tool_call`` receiver then blocks
            the call). None: no limit. Like ``priority``, it belongs to the receiver.

    Returns:
        A function that disconnects what this call connected: from ``sender`` only (dropping the
        receiver once it has no sender left), or, for ``ANY``, from every sender (blinker's rule).

    Raises:
        LookupError: unknown event.
        TypeError: ``receiver`` cannot be called as ``receiver(sender, event=...)`` (its second
            parameter must be named ``event``, or it takes ``**kwargs``).
    """
    signal = signal_for(event)
    _check_signature(receiver)
    ledger = _LEDGERS[signal.name]
    rid = _key(receiver)
    signal.connect(receiver, sender=sender, weak=False)
    ledger.priority[rid] = priority
    ledger.timeout_s[rid] = timeout_s
    ledger.invalidate()  # the order may have changed with the priority

    def disconnect() -> None:
        signal.disconnect(receiver, sender=sender)
        # blinker keeps a receiver with no sender left (strongly): drop it so it can be freed.
        if sender is not ANY and not ledger.senders.get(rid):
            signal.disconnect(receiver)

    return disconnect


def on(
    event: str | type[Event],
    *,
    sender: object = ANY,
    priority: int = 0,
    timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
) -> Callable[[F], F]:
    """Decorator form of :func:`connect`; returns the function unchanged.

    Disconnect later with ``signal_for(event).disconnect(function)``.

    Raises:
        LookupError: unknown event (when decorating).
    """

    def decorator(function: F) -> F:
        connect(event, function, sender=sender, priority=priority, timeout_s=timeout_s)
        return function

    return decorator


def has_receivers(event: str | type[Event], sender: object) -> bool:
    """Whether sending ``event`` from ``sender`` may reach a receiver (False when muted),
    counting the receivers of the senders it is linked to (:func:`link_sender`).

    Cheap: check it before building an expensive event (``message_update``). It may answer True
    for a sender whose receivers all disconnected (blinker's ``has_receivers_for``), never False
    when a receiver would run.

    Raises:
        LookupError: unknown event.
    """
    signal = signal_for(event)
    return not signal.is_muted and any(signal.has_receivers_for(s) for s in _chain_of(sender))


_PARENTS: Final[weakref.WeakKeyDictionary[object, object]] = weakref.WeakKeyDictionary()
"""Sender -> the sender whose receivers also get its events (:func:`link_sender`)."""


def link_sender(child: object, parent: object) -> Callable[[], None]:
    """Let the events ``child`` sends reach the receivers connected to ``parent`` as well (and
    those of ``parent``'s own parent, up the chain). A sub-agent's harness is linked to the
    harness whose ``task`` tool started it, so hooks connected to the parent see the child's
    events; they get the child as ``sender`` (its ``depth``, its session).

    Each receiver runs once per event, even when connected to several senders of the chain;
    the order is the usual one (priority, then connection order). A child has one parent: a
    new link replaces the old. The link holds ``parent`` only while ``child`` lives.

    Returns:
        A function that removes the link (harmless if it was replaced or removed already).

    Raises:
        ValueError: ``parent`` is ``child`` or linked beneath it (a cycle).
        TypeError: ``child`` cannot be weakly referenced (a str, an int).
    """
    if any(s is child for s in _chain_of(parent)):
        raise ValueError("link_sender: the parent is the child or linked beneath it (a cycle)")
    _PARENTS[child] = parent

    def unlink() -> None:
        if _PARENTS.get(child) is parent:
            del _PARENTS[child]

    return unlink


def _chain_of(sender: object) -> list[object]:
    """``sender``, then the senders it is linked to, nearest first."""
    chain = [sender]
    if not _PARENTS:
        return chain
    while True:
        try:
            parent = _PARENTS.get(chain[-1])
        except TypeError:  # not weakly referenceable (or unhashable): never linked
            return chain
        if parent is None:
            return chain
        chain.append(parent)


# --- dispatch -------------------------------------------------------------------------------


class _Chain(Generic[E, R]):
    """One walk through a signal's receivers, in order; the only loop that calls receivers.

    Iterating yields each receiver's result that is not None. The combiner iterating decides
    what a result means: it may replace :attr:`event` (the receivers after see the new one) or
    stop iterating (they do not run). A receiver that raises, or returns something that is not
    None nor an instance of ``expected``, is reported as ``handler_error`` and skipped; with
    ``fail_closed`` the walk ends there instead and :attr:`failure` says why.
    An async receiver slower than its timeout counts as one that raised
    :class:`HookTimeoutError`. ``asyncio.CancelledError`` and other non-``Exception`` errors
    propagate.
    """

    def __init__(
        self,
        sender: object,
        event: E,
        receivers: Iterable[Receiver],
        expected: tuple[type[R], ...],
        *,
        fail_closed: bool = False,
    ) -> None:
        self.sender = sender
        self.event = event
        self.failure: str | None = None
        self._receivers = iter(receivers)
        self._expected = expected
        self._fail_closed = fail_closed
        self._ledger = _LEDGERS[event.name]

    def __aiter__(self) -> _Chain[E, R]:
        return self

    async def __anext__(self) -> R:
        for receiver in self._receivers:
            try:
                result = receiver(self.sender, event=self.event)
                if result is None:  # the common case: no await, no timer
                    continue
                if inspect.isawaitable(result):
                    result = await self._awaited(receiver, result)
                    if result is None:
                        continue
                if not isinstance(result, self._expected):
                    allowed = ", ".join(t.__name__ for t in self._expected)
                    raise TypeError(
                        f"{self.event.name} receiver returned {type(result).__name__}; "
                        f"expected {allowed} or None"
                    )
            except Exception as error:
                await _report(self.sender, self.event.name, receiver, error)
                if self._fail_closed:
                    self.failure = f"{self.event.name} receiver {_name(receiver)} failed: {error!r}"
                    self._receivers = iter(())
                    break
                continue
            return result
        raise StopAsyncIteration

    async def _awaited(self, receiver: Receiver, pending: Awaitable[Any]) -> Any:
        """An async receiver's result, within its timeout (only async receivers get a timer)."""
        timeout_s = self._ledger.timeout_for(receiver)
        if timeout_s is None:
            return await pending
        limit = asyncio.timeout(timeout_s)
        try:
            async with limit:
                result = await pending
        except TimeoutError:
            if not limit.expired():  # the receiver's own TimeoutError, reported as it is
                raise
            raise HookTimeoutError(self.event.name, _name(receiver), timeout_s) from None
        if limit.expired():
            # The receiver swallowed its cancellation and answered late: a timed-out hook's
            # answer never counts (a late "allow" must not fail a tool_call hook open).
            raise HookTimeoutError(self.event.name, _name(receiver), timeout_s)
        return result


def _hook(
    sender: object, event: E, expected: tuple[type[R], ...], *, fail_closed: bool = False
) -> _Chain[E, R]:
    """The chain of a hook event's receivers for ``sender`` (empty when muted or unheard)."""
    receivers = _receivers(signal_for(event.name), sender)
    return _Chain(sender, event, receivers, expected, fail_closed=fail_closed)


async def notify(sender: object, event: ObserverEvent) -> None:
    """Send an observer event to its receivers, in order, each isolated from the others.

    A receiver that raises is reported as ``handler_error`` (same sender) and the rest still run;
    with no ``handler_error`` receiver, or when one of those raises, the error is logged to the
    ``hooks._bus`` logger instead, so errors are never silent and never recurse. Return values
    are ignored. ``asyncio.CancelledError`` and other non-``Exception`` errors propagate.

    Raises:
        TypeError: ``event`` is a hook event (send it with its ``emit_*`` function) or not an
            event of this bus.
    """
    signal = _OBSERVERS.get(type(event))
    if signal is None:
        raise TypeError(
            f"notify() sends observer events; {type(event).__name__} is a hook event or not an "
            "event of this bus (send hook events with their emit_* function, e.g. emit_tool_call)"
        )
    await _observe(sender, event, _receivers(signal, sender))


async def emit_before_agent_start(
    sender: object, event: BeforeAgentStartEvent
) -> AgentStartOutcome:
    """Ask the ``before_agent_start`` receivers for messages to add and the system prompt.

    Receivers run in order. The ``messages`` of every ``AgentStartPatch`` are collected, in
    receiver order; a set ``system_prompt`` replaces the prompt for the rest of the chain (each
    receiver sees ``event.system_prompt`` as patched so far). A receiver that raises, or returns
    anything but ``AgentStartPatch`` or None, is reported as ``handler_error``; the chain goes on.

    Returns:
        ``AgentStartOutcome``: no messages and the event's system prompt when nobody listens.
    """
    messages: list[Message] = []
    chain = _hook(sender, event, (AgentStartPatch,))
    async for patch in chain:
        messages.extend(patch.messages)
        if patch.system_prompt is not UNSET:
            chain.event = evolve(chain.event, system_prompt=patch.system_prompt)
    return AgentStartOutcome(messages=messages, system_prompt=chain.event.system_prompt)


async def emit_context(sender: object, event: ContextEvent) -> Sequence[Message]:
    """Let the ``context`` receivers replace the messages of one model request.

    Receivers run in order; each sees ``event.messages`` as replaced by the ones before it, and
    a ``ReplaceMessages`` replaces them for the rest of the chain. A receiver that raises, or
    returns anything but ``ReplaceMessages`` or None, is reported as ``handler_error`` and the
    chain goes on.

    Returns:
        The messages to send: the event's own when nobody replaces them.
    """
    chain = _hook(sender, event, (ReplaceMessages,))
    async for result in chain:
        chain.event = evolve(chain.event, messages=result.messages)
    return chain.event.messages


async def emit_before_provider_request(
    sender: object, event: BeforeProviderRequestEvent
) -> StreamOptions:
    """Let the ``before_provider_request`` receivers patch the options of one model request.

    Receivers run in order; each sees ``event.options`` as patched by the ones before it
    (:meth:`StreamOptions.patched`: scalars replaced, ``headers``/``metadata`` merged per key). A
    receiver that raises, or returns anything but ``StreamOptionsPatch`` or None, is reported as
    ``handler_error`` and the chain goes on.

    Returns:
        The final options: the event's own when nobody patches them.
    """
    chain = _hook(sender, event, (StreamOptionsPatch,))
    async for patch in chain:
        chain.event = evolve(chain.event, options=chain.event.options.patched(patch))
    return chain.event.options


async def emit_before_provider_payload(
    sender: object, event: BeforeProviderPayloadEvent
) -> Mapping[str, JSONValue]:
    """Let the ``before_provider_payload`` receivers replace the request body.

    Receivers run in order; each sees ``event.payload`` as replaced by the ones before it. A
    receiver that raises, or returns anything but ``ReplacePayload`` or None, is reported as
    ``handler_error`` and the chain goes on.

    Returns:
        The body to send: the event's own when nobody replaces it.
    """
    chain = _hook(sender, event, (ReplacePayload,))
    async for result in chain:
        chain.event = evolve(chain.event, payload=result.payload)
    return chain.event.payload


async def emit_tool_call(sender: object, event: ToolCallEvent) -> ToolCallOutcome:
    """Ask the ``tool_call`` receivers whether and with what input a tool runs.

    Receivers run in order; each sees ``event.input`` as patched by the ones before it. A
    ``PatchInput`` replaces the input for the rest of the chain; the first ``Block`` wins and no
    later receiver runs. A receiver that raises, or returns anything but ``Block``,
    ``PatchInput``, ``Allow``, ``Ask`` or None, is reported as ``handler_error`` and blocks the
    call (fails closed), with a reason naming the receiver and the error. ``Allow`` and ``Ask``
    (their ``input`` patches like ``PatchInput``) tell the supervisor what the hooks want:
    ``ask`` wins over ``allow``, and a later ``Block`` over both.

    Returns:
        ``ToolCallOutcome``: not blocked with the original input when nobody listens.
    """
    permission: Allow | Ask | None = None
    chain = _hook(sender, event, (Block, PatchInput, Allow, Ask), fail_closed=True)
    async for result in chain:
        if isinstance(result, Block):
            return ToolCallOutcome(blocked=True, reason=result.reason, input=chain.event.input)
        if isinstance(result, PatchInput):
            chain.event = evolve(chain.event, input=result.input)
        elif isinstance(result, Allow | Ask):
            if result.input is not UNSET:
                chain.event = evolve(chain.event, input=result.input)
            # Claude Code's precedence: ask over allow; the first of the kind keeps its reason.
            if permission is None or (isinstance(result, Ask) and isinstance(permission, Allow)):
                permission = result
    blocked = chain.failure is not None
    return ToolCallOutcome(
        blocked=blocked,
        reason=chain.failure,
        input=chain.event.input,
        permission=None
        if blocked or permission is None
        else ("ask" if isinstance(permission, Ask) else "allow"),
        permission_reason=None if blocked or permission is None else permission.reason,
    )


async def emit_user_prompt_submit(
    sender: object, event: UserPromptSubmitEvent
) -> UserPromptOutcome:
    """Ask the ``user_prompt_submit`` receivers whether a prompt may enter the session.

    Receivers run in order. The first ``Block`` wins and no later receiver runs; the texts of
    every ``AddContext`` are collected, in order. A receiver that raises, or returns anything
    but ``Block``, ``AddContext`` or None, is reported as ``handler_error`` and refuses the
    prompt (fails closed, as ``tool_call`` does), with a reason naming it.

    Returns:
        ``UserPromptOutcome``: not blocked and no context when nobody listens.
    """
    context: list[str] = []
    chain = _hook(sender, event, (Block, AddContext), fail_closed=True)
    async for result in chain:
        if isinstance(result, Block):
            return UserPromptOutcome(blocked=True, reason=result.reason, context=())
        if isinstance(result, AddContext):
            context.append(result.text)
    if chain.failure is not None:
        return UserPromptOutcome(blocked=True, reason=chain.failure, context=())
    return UserPromptOutcome(blocked=False, reason=None, context=tuple(context))


async def emit_stop(sender: object, event: StopEvent | SubagentStopEvent) -> StopOutcome:
    """Ask the ``stop`` (or ``subagent_stop``) receivers whether the run may end.

    Receivers run in order; the first ``Continue`` wins and no later receiver runs. A receiver
    that raises, or returns anything but ``Continue`` or None, is reported as
    ``handler_error`` and the chain goes on (a failing hook lets the run end).

    Returns:
        ``StopOutcome``: no reason (the run ends) when nobody listens.
    """
    async for result in _hook(sender, event, (Continue,)):
        return StopOutcome(reason=result.reason)
    return StopOutcome(reason=None)


async def emit_session_start(sender: object, event: SessionStartEvent) -> tuple[str, ...]:
    """Collect the ``AddContext`` texts of the ``session_start`` receivers, in order.

    A receiver that raises, or returns anything but ``AddContext`` or None, is reported as
    ``handler_error`` and the chain goes on.

    Returns:
        The texts (empty when nobody listens).
    """
    return tuple([result.text async for result in _hook(sender, event, (AddContext,))])


async def emit_tool_result(sender: object, event: ToolResultEvent) -> ToolResultOutcome:
    """Let the ``tool_result`` receivers patch a tool's result.

    Receivers run in order; each sees the event as patched by the ones before it. Each set field
    of a ``PatchResult`` replaces that field (``details=None`` included); ``terminate`` is False
    unless set, and the last receiver to set it decides. A receiver that raises, or returns
    anything but ``PatchResult`` or None, is reported as ``handler_error`` and the chain goes on.

    Returns:
        ``ToolResultOutcome``: the event's own values when nobody listens.
    """
    terminate = False
    chain = _hook(sender, event, (PatchResult,))
    async for patch in chain:
        chain.event = _patched(chain.event, patch)
        if patch.terminate is not UNSET:
            terminate = patch.terminate
    event = chain.event
    return ToolResultOutcome(
        content=event.content, details=event.details, is_error=event.is_error, terminate=terminate
    )


async def emit_session_before_compact(
    sender: object, event: SessionBeforeCompactEvent
) -> BeforeCompactOutcome:
    """Ask the ``session_before_compact`` receivers whether and how to compact.

    Receivers run in order. The first ``Cancel`` wins and no later receiver runs. The first
    ``SupplyCompaction`` wins, but the chain goes on: a later receiver can still cancel, and a
    later ``SupplyCompaction`` is ignored. A receiver that raises, or returns anything but
    ``Cancel``, ``SupplyCompaction`` or None, is reported as ``handler_error`` and the chain goes
    on (only ``tool_call`` fails closed).

    Returns:
        ``BeforeCompactOutcome``: not cancelled and nothing supplied when nobody listens.
    """
    supplied: SupplyCompaction | None = None
    chain = _hook(sender, event, (Cancel, SupplyCompaction))
    async for result in chain:
        if isinstance(result, Cancel):
            return BeforeCompactOutcome(cancelled=True, reason=result.reason, supplied=None)
        if isinstance(result, SupplyCompaction) and supplied is None:
            supplied = result
    return BeforeCompactOutcome(cancelled=False, reason=None, supplied=supplied)


async def emit_session_before_tree(
    sender: object, event: SessionBeforeTreeEvent
) -> BeforeTreeOutcome:
    """Ask the ``session_before_tree`` receivers whether and how to move the leaf.

    Receivers run in order. The first ``Cancel`` wins and no later receiver runs. The first
    ``SupplySummary`` wins, but the chain goes on (a later one is ignored). Each set field of a
    ``TreeOptions`` replaces ``custom_instructions`` or ``label`` for the rest of the chain, so
    each receiver sees them as changed so far. A receiver that raises, or returns anything else
    but None, is reported as ``handler_error`` and the chain goes on.

    Returns:
        ``BeforeTreeOutcome``: the event's own instructions and label, not cancelled and no
        summary, when nobody listens.
    """
    summary: SupplySummary | None = None
    chain = _hook(sender, event, (Cancel, SupplySummary, TreeOptions))
    async for result in chain:
        if isinstance(result, Cancel):
            return _tree_outcome(chain.event, result, None)
        if isinstance(result, SupplySummary):
            if summary is None:
                summary = result
        elif isinstance(result, TreeOptions):
            chain.event = _tree_patched(chain.event, result)
    return _tree_outcome(chain.event, None, summary)


async def emit_session_before_fork(
    sender: object, event: SessionBeforeForkEvent
) -> BeforeForkOutcome:
    """Ask the ``session_before_fork`` receivers whether to fork.

    Receivers run in order; the first ``Cancel`` wins and no later receiver runs. A receiver
    that raises, or returns anything but ``Cancel`` or None, is reported as ``handler_error`` and
    the chain goes on.

    Returns:
        ``BeforeForkOutcome``: not cancelled when nobody listens.
    """
    async for cancel in _hook(sender, event, (Cancel,)):
        return BeforeForkOutcome(cancelled=True, reason=cancel.reason)  # the first one wins
    return BeforeForkOutcome(cancelled=False, reason=None)


async def emit_session_before_rewind(
    sender: object, event: SessionBeforeRewindEvent
) -> BeforeRewindOutcome:
    """Ask the ``session_before_rewind`` receivers whether to rewind the files.

    Receivers run in order; the first ``Cancel`` wins and no later receiver runs. A receiver
    that raises, or returns anything but ``Cancel`` or None, is reported as ``handler_error`` and
    the chain goes on.

    Returns:
        ``BeforeRewindOutcome``: not cancelled when nobody listens.
    """
    async for cancel in _hook(sender, event, (Cancel,)):
        return BeforeRewindOutcome(cancelled=True, reason=cancel.reason)  # the first one wins
    return BeforeRewindOutcome(cancelled=False, reason=None)


def _receivers(signal: NamedSignal, sender: object) -> list[Receiver]:
    """The receivers ``sender``'s event reaches (its own and those of the senders it is
    linked to, each once), in order; none when the signal is muted."""
    if signal.is_muted or not signal.receivers:
        return []
    chain = _chain_of(sender)
    if len(chain) == 1:
        return _LEDGERS[signal.name].receivers(sender)
    unique: dict[Hashable, Receiver] = {}
    for s in chain:
        for receiver in signal.receivers_for(s):
            unique.setdefault(_key(receiver), receiver)
    receivers = list(unique.values())
    if len(receivers) > 1:
        receivers.sort(key=_LEDGERS[signal.name].sort_key)
    return receivers


def _check_signature(receiver: Receiver) -> None:
    """Refuse, at connection, a receiver the bus could not call: a mistake found here costs a
    traceback; found at dispatch it is a ``handler_error`` per event (and a blocked tool call)."""
    try:
        signature = inspect.signature(receiver)
    except (TypeError, ValueError):  # a builtin or C callable: nothing to check
        return
    try:
        signature.bind(None, event=None)
    except TypeError:
        raise TypeError(
            f"receivers are called as receiver(sender, event=...); {_name(receiver)}"
            f"{signature} cannot be (name its second parameter `event`)"
        ) from None


async def _observe(sender: object, event: ObserverEvent, receivers: list[Receiver]) -> None:
    async for _ in _Chain(sender, event, receivers, (object,)):
        pass  # observers' returns are ignored


async def _report(sender: object, event_name: str, receiver: Receiver, error: Exception) -> None:
    """Send ``handler_error`` for a failed receiver, or log it when that cannot or must not run."""
    name = _name(receiver)
    # A failing handler_error receiver is only logged: reporting it again could loop forever.
    receivers = _receivers(_HANDLER_ERROR, sender) if event_name != HandlerErrorEvent.name else []
    if not receivers:
        _log.error("%s receiver %s raised", event_name, name, exc_info=error)
        return
    failure = HandlerErrorEvent(event_name=event_name, receiver=name, error=error)
    await _observe(sender, failure, receivers)


def _name(receiver: Receiver) -> str:
    qualname = getattr(receiver, "__qualname__", None)
    if qualname is None:  # e.g. functools.partial, or an instance with __call__
        return repr(receiver)
    module = getattr(receiver, "__module__", None)
    return f"{module}.{qualname}" if module else str(qualname)


def _patched(event: ToolResultEvent, patch: PatchResult) -> ToolResultEvent:
    if patch.content is not UNSET:
        event = evolve(event, content=patch.content)
    if patch.details is not UNSET:
        event = evolve(event, details=patch.details)
    if patch.is_error is not UNSET:
        event = evolve(event, is_error=patch.is_error)
    return event


def _tree_patched(event: SessionBeforeTreeEvent, options: TreeOptions) -> SessionBeforeTreeEvent:
    if options.custom_instructions is not UNSET:
        event = evolve(event, custom_instructions=options.custom_instructions)
    if options.label is not UNSET:
        event = evolve(event, label=options.label)
    return event


def _tree_outcome(
    event: SessionBeforeTreeEvent, cancel: Cancel | None, summary: SupplySummary | None
) -> BeforeTreeOutcome:
    return BeforeTreeOutcome(
        cancelled=cancel is not None,
        reason=None if cancel is None else cancel.reason,
        summary=summary,
        custom_instructions=event.custom_instructions,
        label=event.label,
    )
