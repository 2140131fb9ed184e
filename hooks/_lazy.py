"""Messages built when first read (issue 24, point 1).

A session's context is its message bodies as parsed JSON; most of a request's work (normalising,
checking, a provider's body) reads that JSON, and only code that reads a message's fields needs
the typed value. A :class:`MessageSlot` holds one message as its JSON object, its typed value,
or both, each made from the other the first time it is asked for and kept; a
:class:`LazyMessages` is an immutable sequence of slots that gives their typed values. The
typed values are the ordinary ones (equality, hashing, ``repr`` and pickling unchanged); the
sequence compares, hashes and pickles as the tuple of them.

This layer knows no JSON keys: the codec (``repos``) subclasses :class:`MessageSlot` with its
``decode``/``encode``, and a JSON object is only put in a slot once the codec checked that it
decodes (so a damaged body is reported where it is read, never later inside a hook).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast, overload

from ._messages import Message, UnknownMessage

__all__ = ["LazyMessages", "MessageSlot", "lazy_or_tuple"]

M_co = TypeVar("M_co", bound=Message, covariant=True)


class MessageSlot:
    """One message: its JSON object (pi's shape) and its typed value, built on first read.

    Given a typed value, the JSON is encoded at once (normalising reads every message's).
    Subclasses give :meth:`decode` and :meth:`encode`. Slots are shared between the contexts a
    session builds, so a message read by one request is not built again for the next.
    """

    __slots__ = ("_value", "json")

    json: dict[str, Any]
    """The message's JSON object: read it, never change it (it may be the stored body)."""

    def __init__(self, json: dict[str, Any] | None = None, value: Message | None = None) -> None:
        if json is None:
            if value is None:
                raise ValueError("a message slot needs its JSON or its value")
            json = self.encode(value)  # read by every context build: made once, now
        self.json = json
        self._value = value

    def decode(self, json: dict[str, Any]) -> Message:
        raise NotImplementedError

    def encode(self, value: Message) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def message(self) -> Message:
        """The typed message, built on first read."""
        value = self._value
        if value is None:
            value = self._value = self.decode(self.json)
        return value

    @property
    def role(self) -> str | None:
        """The message's role (``"user"``, ``"assistant"``, ``"toolResult"``, ...), read without
        building it; None for an :class:`~hooks.UnknownMessage`, which is never sent (one made
        by hand may name any role in its ``raw``)."""
        value = self._value
        if value is None:
            return self.json.get("role")  # a checked body: it decodes to the role it names
        return None if type(value) is UnknownMessage else value.role

    @property
    def built(self) -> bool:
        """Whether the typed value exists already (given, or read once)."""
        return self._value is not None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class LazyMessages(Sequence[M_co], Generic[M_co]):
    """An immutable sequence of messages, each built the first time it is read.

    ``M_co`` is what its slots hold (``LazyMessages[LlmMessage]``: user, assistant and
    tool-result messages only); whoever makes one vouches for that.

    Equal to (and hashing as) the tuple of its messages, and to another :class:`LazyMessages`
    of equal messages; ``+`` with a tuple gives a tuple; it pickles as a tuple.
    """

    __slots__ = ("_slots",)

    def __init__(self, slots: Iterable[MessageSlot] = ()) -> None:
        self._slots = tuple(slots)

    @property
    def slots(self) -> tuple[MessageSlot, ...]:
        return self._slots

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, index: int) -> M_co: ...

    @overload
    def __getitem__(self, index: slice) -> LazyMessages[M_co]: ...

    def __getitem__(self, index: int | slice) -> M_co | LazyMessages[M_co]:
        if isinstance(index, slice):
            return LazyMessages(self._slots[index])
        return cast(M_co, self._slots[index].message)

    def __iter__(self) -> Iterator[M_co]:
        for slot in self._slots:
            yield cast(M_co, slot.message)

    def __reversed__(self) -> Iterator[M_co]:
        for slot in reversed(self._slots):
            yield cast(M_co, slot.message)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyMessages):
            if len(other) != len(self):
                return False
            return all(
                a is b or a.message == b.message
                for a, b in zip(self._slots, other._slots, strict=True)
            )
        if isinstance(other, tuple):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __add__(self, other: object) -> tuple[Message, ...]:
        if isinstance(other, LazyMessages | tuple):
            return (*self, *other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[Message, ...]:
        if isinstance(other, tuple):
            return (*other, *self)
        return NotImplemented

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))

    def __copy__(self) -> LazyMessages[M_co]:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LazyMessages[M_co]:
        return self


def lazy_or_tuple(value: Iterable[Message]) -> Sequence[Message]:
    """A converter for fields holding messages: a :class:`LazyMessages` kept as it is
    (immutable already, and building it would defeat it), anything else made a tuple."""
    return value if isinstance(value, LazyMessages) else tuple(value)
