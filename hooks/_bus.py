"""Dispatch: receiver order, sync and async receivers, result combination, handler_error.

The bus never calls blinker's ``send()``: blinker leaves receiver order undefined, stops at the
first receiver that raises, and cannot mix sync and async receivers. It uses blinker's registry
(``receivers_for``, ``has_receivers_for``, ``is_muted``) and does the calling itself.

Receiver convention (blinker's): ``receiver(sender, event=event)``, so write
``def r(sender, event): ...`` or ``async def r(sender, *, event): ...``. Order: higher ``priority``
first, then the order in which receivers were first connected to the signal, whether through
:func:`connect`, :func:`on` or blinker itself (``signal.connect``, ``signal.connected_to``).
"""

from __future__ import annotations

import inspect
import itertools
import logging
import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final, TypeAlias, TypeVar

from attrs import evolve
from blinker import ANY, NamedSignal, Signal

# make_id is the key blinker files receivers under; ordering by the same key keeps us in step.
from blinker._utilities import make_id, make_ref

from ._events import Event, HandlerErrorEvent, ObserverEvent, ToolCallEvent, ToolResultEvent
from ._results import UNSET, Block, PatchInput, PatchResult, ToolCallOutcome, ToolResultOutcome
from ._signals import EVENT_CLASSES, signal_for

__all__ = [
    "Receiver",
    "connect",
    "emit_tool_call",
    "emit_tool_result",
    "has_receivers",
    "notify",
    "on",
]

Receiver: TypeAlias = Callable[..., object]
"""``receiver(sender, event=event)``; may be sync or async; returns a result, None or anything
(observers' returns are ignored)."""

F = TypeVar("F", bound=Receiver)

_log = logging.getLogger(__name__)
_sequence = itertools.count()


class _Ledger:
    """What blinker does not record for one signal: connection order, priority, senders.

    Fed by the signal's ``receiver_connected``/``receiver_disconnected``, so receivers connected
    through blinker directly are ordered too. A receiver keeps its place until it is fully
    disconnected (or, if weakly connected, collected); reconnecting then puts it last.
    """

    def __init__(self, signal: Signal) -> None:
        self.order: dict[Hashable, int] = {}
        self.priority: dict[Hashable, int] = {}
        self.senders: dict[Hashable, set[Hashable]] = {}
        self._refs: dict[Hashable, weakref.ref[Any]] = {}
        signal.receiver_connected.connect(self._connected, weak=False)
        signal.receiver_disconnected.connect(self._disconnected, weak=False)

    def sort_key(self, receiver: Receiver) -> tuple[int, int]:
        rid = make_id(receiver)
        return -self.priority.get(rid, 0), self.order.get(rid, 0)

    def _connected(self, signal: Signal, *, receiver: Receiver, sender: Any, weak: bool) -> None:
        rid = make_id(receiver)
        self.order.setdefault(rid, next(_sequence))
        self.senders.setdefault(rid, set()).add(make_id(sender))
        # blinker drops a collected weak receiver without telling anyone; forget it too, or a new
        # receiver reusing its id() would inherit its place.
        if weak and rid not in self._refs:
            self._refs[rid] = make_ref(receiver, lambda _ref: self._forget(rid))

    def _disconnected(self, signal: Signal, *, receiver: Receiver, sender: Any) -> None:
        rid = make_id(receiver)
        if sender is ANY:  # blinker removed the receiver from every sender
            self._forget(rid)
        elif rid in self.senders:
            self.senders[rid].discard(make_id(sender))

    def _forget(self, rid: Hashable) -> None:
        for table in (self.order, self.priority, self.senders, self._refs):
            table.pop(rid, None)


_LEDGERS: Final[Mapping[str, _Ledger]] = {name: _Ledger(signal_for(name)) for name in EVENT_CLASSES}
_HOOK_EVENTS: Final = (ToolCallEvent, ToolResultEvent)
_OBSERVERS: Final[Mapping[type[Event], NamedSignal]] = {
    cls: signal_for(cls) for cls in EVENT_CLASSES.values() if cls not in _HOOK_EVENTS
}
_TOOL_CALL: Final = signal_for(ToolCallEvent)
_TOOL_RESULT: Final = signal_for(ToolResultEvent)
_HANDLER_ERROR: Final = signal_for(HandlerErrorEvent)


# --- subscribing ----------------------------------------------------------------------------


def connect(
    event: str | type[Event],
    receiver: Receiver,
    *,
    sender: object = ANY,
    priority: int = 0,
) -> Callable[[], None]:
    """Connect a receiver to an event's signal, strongly (it lives until disconnected).

    Args:
        event: signal name (``"tool_call"``) or event class (``ToolCallEvent``).
        receiver: ``receiver(sender, event=...)``, sync or async.
        sender: only events from this sender (e.g. one harness); :data:`blinker.ANY` for all.
        priority: higher runs first; ties run in connection order. It belongs to the receiver,
            not to one connection: connecting it again with another priority replaces it.

    Returns:
        A function that disconnects what this call connected: from ``sender`` only (dropping the
        receiver once it has no sender left), or, for ``ANY``, from every sender (blinker's rule).

    Raises:
        LookupError: unknown event.
    """
    signal = signal_for(event)
    signal.connect(receiver, sender=sender, weak=False)
    ledger = _LEDGERS[signal.name]
    rid = make_id(receiver)
    ledger.priority[rid] = priority

    def disconnect() -> None:
        signal.disconnect(receiver, sender=sender)
        # blinker keeps a receiver with no sender left (strongly): drop it so it can be freed.
        if sender is not ANY and not ledger.senders.get(rid):
            signal.disconnect(receiver)

    return disconnect


def on(event: str | type[Event], *, sender: object = ANY, priority: int = 0) -> Callable[[F], F]:
    """Decorator form of :func:`connect`; returns the function unchanged.

    Disconnect later with ``signal_for(event).disconnect(function)``.

    Raises:
        LookupError: unknown event (when decorating).
    """

    def decorator(function: F) -> F:
        connect(event, function, sender=sender, priority=priority)
        return function

    return decorator


def has_receivers(event: str | type[Event], sender: object) -> bool:
    """Whether sending ``event`` from ``sender`` may reach a receiver (False when muted).

    Cheap: check it before building an expensive event (``message_update``). It may answer True
    for a sender whose receivers all disconnected (blinker's ``has_receivers_for``), never False
    when a receiver would run.

    Raises:
        LookupError: unknown event.
    """
    signal = signal_for(event)
    return not signal.is_muted and signal.has_receivers_for(sender)


# --- dispatch -------------------------------------------------------------------------------


async def notify(sender: object, event: ObserverEvent) -> None:
    """Send an observer event to its receivers, in order, each isolated from the others.

    A receiver that raises is reported as ``handler_error`` (same sender) and the rest still run;
    with no ``handler_error`` receiver, or when one of those raises, the error is logged to the
    ``hooks._bus`` logger instead, so errors are never silent and never recurse. Return values
    are ignored. ``asyncio.CancelledError`` and other non-``Exception`` errors propagate.

    Raises:
        TypeError: ``event`` is a hook event; use :func:`emit_tool_call` / :func:`emit_tool_result`.
    """
    signal = _OBSERVERS.get(type(event))
    if signal is None:
        raise TypeError(
            f"notify() sends observer events; {type(event).__name__} is a hook event or not an "
            "event of this bus (use emit_tool_call / emit_tool_result for hooks)"
        )
    if signal.is_muted or not signal.has_receivers_for(sender):
        return
    await _observe(sender, event, _ordered(signal, sender))


async def emit_tool_call(sender: object, event: ToolCallEvent) -> ToolCallOutcome:
    """Ask the ``tool_call`` receivers whether and with what input a tool runs.

    Receivers run in order; each sees ``event.input`` as patched by the ones before it. A
    ``PatchInput`` replaces the input for the rest of the chain; the first ``Block`` wins and no
    later receiver runs. A receiver that raises, or returns anything but ``Block``,
    ``PatchInput`` or None, is reported as ``handler_error`` and blocks the call (fails closed),
    with a reason naming the receiver and the error.

    Returns:
        ``ToolCallOutcome``: not blocked with the original input when nobody listens.
    """
    if not _TOOL_CALL.is_muted and _TOOL_CALL.has_receivers_for(sender):
        for receiver in _ordered(_TOOL_CALL, sender):
            try:
                result = await _call(receiver, sender, event, (Block, PatchInput))
            except Exception as error:
                await _report(sender, event.name, receiver, error)
                reason = f"tool_call receiver {_name(receiver)} failed: {error!r}"
                return ToolCallOutcome(blocked=True, reason=reason, input=event.input)
            if isinstance(result, Block):
                return ToolCallOutcome(blocked=True, reason=result.reason, input=event.input)
            if isinstance(result, PatchInput):
                event = evolve(event, input=result.input)
    return ToolCallOutcome(blocked=False, reason=None, input=event.input)


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
    if not _TOOL_RESULT.is_muted and _TOOL_RESULT.has_receivers_for(sender):
        for receiver in _ordered(_TOOL_RESULT, sender):
            try:
                result = await _call(receiver, sender, event, (PatchResult,))
            except Exception as error:
                await _report(sender, event.name, receiver, error)
                continue
            if isinstance(result, PatchResult):
                event = _patched(event, result)
                if result.terminate is not UNSET:
                    terminate = result.terminate
    return ToolResultOutcome(
        content=event.content, details=event.details, is_error=event.is_error, terminate=terminate
    )


def _ordered(signal: NamedSignal, sender: object) -> list[Receiver]:
    receivers = list(signal.receivers_for(sender))
    if len(receivers) > 1:
        receivers.sort(key=_LEDGERS[signal.name].sort_key)
    return receivers


async def _call(
    receiver: Receiver,
    sender: object,
    event: Event,
    expected: tuple[type[object], ...] | None = None,
) -> object:
    """Call one receiver, awaiting its result if async; with ``expected``, check the result."""
    result = receiver(sender, event=event)
    if inspect.isawaitable(result):
        result = await result
    if expected is None or result is None or isinstance(result, expected):
        return result
    allowed = ", ".join(t.__name__ for t in expected)
    raise TypeError(
        f"{event.name} receiver returned {type(result).__name__}; expected {allowed} or None"
    )


async def _observe(sender: object, event: ObserverEvent, receivers: list[Receiver]) -> None:
    for receiver in receivers:
        try:
            await _call(receiver, sender, event)
        except Exception as error:
            await _report(sender, event.name, receiver, error)


async def _report(sender: object, event_name: str, receiver: Receiver, error: Exception) -> None:
    """Send ``handler_error`` for a failed receiver, or log it when that cannot or must not run."""
    name = _name(receiver)
    # A failing handler_error receiver is only logged: reporting it again could loop forever.
    receivers = (
        _ordered(_HANDLER_ERROR, sender)
        if event_name != HandlerErrorEvent.name and not _HANDLER_ERROR.is_muted
        else []
    )
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
