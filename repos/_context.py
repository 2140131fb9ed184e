"""What the model sees: messages built from the active path, plus derived state. Pure.

Follows pi's ``buildSessionContext`` (reference §3.4) with the tool-pair normalisation of
DESIGN §5, which pi gets wrong in #4570 and #6832.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from attrs import evolve, field, frozen

from hooks import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    TextContent,
    ToolResultMessage,
)
from hooks._lazy import LazyMessages, MessageSlot, lazy_or_tuple

from ._codec import Slot, block_kind, content_blocks, slot_of
from ._entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
)
from ._gc import LARGE_ENTRIES, bulk

__all__ = [
    "NO_RESULT_TEXT",
    "ContextCache",
    "ModelRef",
    "SessionContext",
    "build_context",
    "entry_message",
    "iso_ms",
    "normalize_messages",
    "normalized",
    "slots_of",
]

NO_RESULT_TEXT = "No result was recorded for this tool call (the turn was interrupted)."


@frozen(kw_only=True)
class ModelRef:
    """Which model a session was last using: provider name and model id."""

    provider: str
    model_id: str


@frozen(kw_only=True)
class SessionContext:
    """The model's view of a session at its leaf.

    ``messages`` are normalised (see :func:`normalize_messages`); a session's are built when
    first read (a :class:`~hooks.LazyMessages`, equal to the tuple of them);
    ``thinking_level`` defaults to ``"off"``; ``active_tool_names`` is None when the branch
    never set it.
    """

    messages: Sequence[Message] = field(converter=lazy_or_tuple)
    model: ModelRef | None = None
    thinking_level: str = "off"
    active_tool_names: tuple[str, ...] | None = None


def build_context(path: Sequence[Entry]) -> SessionContext:
    """Build the context from the root-to-leaf ``path``.

    The last compaction on the path contributes its summary first, then the path entries from its
    ``first_kept_entry_id`` up to it (none if that id is not on the path), then everything after
    it. Branch summaries and custom messages become context messages; other non-message entries
    only change derived state.
    """
    messages, model, thinking, tools = _raw_context(path)
    return SessionContext(
        messages=LazyMessages(_normalize([slot_of(m) for m in messages])[0]),
        model=model,
        thinking_level=thinking,
        active_tool_names=tools,
    )


_Derived = tuple[ModelRef | None, str, tuple[str, ...] | None]


def _raw_context(
    path: Sequence[Entry],
) -> tuple[list[Message], ModelRef | None, str, tuple[str, ...] | None]:
    """The context messages before normalisation, and the derived state."""
    model: ModelRef | None = None
    thinking = "off"
    tools: tuple[str, ...] | None = None
    last_compaction = -1
    compaction: CompactionEntry | None = None
    for i, entry in enumerate(path):
        model, thinking, tools = _derive(entry, (model, thinking, tools))
        if isinstance(entry, CompactionEntry):
            last_compaction, compaction = i, entry

    messages: list[Message] = []
    if compaction is not None:
        messages.append(
            CompactionSummaryMessage(
                summary=compaction.summary,
                tokens_before=compaction.tokens_before,
                timestamp=iso_ms(compaction.timestamp),
            )
        )
        kept_from = next(
            (i for i in range(last_compaction) if path[i].id == compaction.first_kept_entry_id),
            last_compaction,
        )
        selected = [*path[kept_from:last_compaction], *path[last_compaction + 1 :]]
    else:
        selected = list(path)
    for entry in selected:
        message = entry_message(entry)
        if message is not None:
            messages.append(message)
    return messages, model, thinking, tools


# Entry types that can put a message in the context (entry_message); others only derive state.
_MESSAGE_TYPES = frozenset({"message", "custom_message", "branch_summary"})


def _lazy_raw_context(
    path_ids: Sequence[str],
    kinds: Sequence[str],
    get: Callable[[str], Entry],
    get_bodies: Callable[[list[str]], list[Entry | Slot]] | None = None,
) -> tuple[list[MessageSlot], ModelRef | None, str, tuple[str, ...] | None]:
    """:func:`_raw_context` decoding only what it needs, given the entries' types (``kinds``,
    one per path id): the settings are the last of their kind on the path, and only the entries
    from the last compaction's kept window on are read for messages, as slots of their JSON
    where ``get_bodies`` gives them so. Equal to ``_raw_context``."""
    last = len(kinds) - 1
    backwards = kinds[::-1]  # list.index finds the last of a kind in C, not a Python loop

    def last_of(kind: str) -> int:
        try:
            return last - backwards.index(kind)
        except ValueError:
            return -1

    messages: list[MessageSlot] = []
    last_compaction = last_of("compaction")
    if last_compaction >= 0:
        compaction = get(path_ids[last_compaction])
        assert isinstance(compaction, CompactionEntry)
        messages.append(
            slot_of(
                CompactionSummaryMessage(
                    summary=compaction.summary,
                    tokens_before=compaction.tokens_before,
                    timestamp=iso_ms(compaction.timestamp),
                )
            )
        )
        kept_from = _kept_from(path_ids, compaction.first_kept_entry_id, last_compaction)
        window = [*range(kept_from, last_compaction), *range(last_compaction + 1, last + 1)]
    else:
        window = list(range(last + 1))
    wanted = [path_ids[i] for i in window if kinds[i] in _MESSAGE_TYPES]
    add = messages.append
    for item in get_bodies(wanted) if get_bodies is not None else map(get, wanted):
        if type(item) is Slot:  # nearly all of them: the JSON, checked
            add(item)
        elif type(item) is MessageEntry:
            add(slot_of(item.message))
        else:
            message = entry_message(item)  # type: ignore[arg-type]
            if message is not None:
                add(slot_of(message))

    thinking = "off"
    at = last_of("thinking_level_change")
    if at >= 0:
        entry = get(path_ids[at])
        assert isinstance(entry, ThinkingLevelChangeEntry)
        thinking = entry.thinking_level
    tools: tuple[str, ...] | None = None
    at = last_of("active_tools_change")
    if at >= 0:
        entry = get(path_ids[at])
        assert isinstance(entry, ActiveToolsChangeEntry)
        tools = entry.active_tool_names
    # The model: the last model change, or a later assistant reply naming its model (the
    # replies of the kept window are decoded already).
    model: ModelRef | None = None
    for i in range(last, -1, -1):
        if kinds[i] == "message" or kinds[i] == "model_change":
            model = _derive(get(path_ids[i]), (None, "off", None))[0]
            if model is not None:
                break
    return messages, model, thinking, tools


def _kept_from(path_ids: Sequence[str], first_kept: str, compaction_at: int) -> int:
    """Where the kept window before the compaction at ``compaction_at`` starts: the position
    of ``first_kept`` before it, else the compaction itself. Searched backwards, as the kept
    entries are the last ones before it (``list.index`` would compare, and so touch, every id
    from the root on)."""
    for i in range(compaction_at - 1, -1, -1):
        if path_ids[i] == first_kept:
            return i
    return compaction_at


def entry_message(entry: Entry) -> Message | None:
    """The context message an entry contributes: messages as they are, custom messages and
    non-empty branch summaries as their context messages; None for every other entry."""
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(
            custom_type=entry.custom_type,
            content=entry.content,
            display=entry.display,
            details=entry.details,
            timestamp=iso_ms(entry.timestamp),
        )
    if isinstance(entry, BranchSummaryEntry) and entry.summary:
        return BranchSummaryMessage(
            summary=entry.summary, from_id=entry.from_id, timestamp=iso_ms(entry.timestamp)
        )
    return None


def normalize_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Make a message list valid to send (DESIGN §5, step 4).

    - every tool result is moved directly after the assistant message that called it, in call
      order; a result whose call is not in the list, or a second result for one call, is dropped;
    - a call with no result gets a synthetic ``is_error`` result (:data:`NO_RESULT_TEXT`), except
      in a reply stopped at ``length``, where an unanswered call may be cut off: it is dropped;
    - empty text blocks, unsigned empty thinking blocks and then empty assistant and user
      messages are dropped (the Anthropic API rejects empty text blocks); a tool result left
      without content says "(no output)".
    """
    return tuple(normalized(messages))


def normalized(messages: Sequence[Message], reuse: Sequence[Message] = ()) -> LazyMessages[Message]:
    """:func:`normalize_messages`, building only the messages it changes or adds (those of a
    :class:`~hooks.LazyMessages` are read as JSON). ``reuse``: see :func:`slots_of`."""
    return LazyMessages(_normalize(slots_of(messages, reuse))[0])


def slots_of(messages: Sequence[Message], reuse: Sequence[Message] = ()) -> Sequence[MessageSlot]:
    """The slots of ``messages``: a lazy sequence's own, else one per typed message, taken
    from ``reuse`` (a lazy sequence) where one of its slots holds that very value (a context
    hook's list holds mostly the context's messages, whose JSON is not made again)."""
    if isinstance(messages, LazyMessages):
        return messages.slots
    known = (
        {id(s.message): s for s in reuse.slots if s.built}
        if isinstance(reuse, LazyMessages)
        else {}
    )
    return [known.get(id(m)) or slot_of(m) for m in messages]


# Normalising reads the messages' JSON (pi's shape; a typed message is encoded once, in its
# slot): most of a first context was never read as typed values, and need not be built. The
# JSON of a slot is the stored body the codec checked (``stored_slot``) or the codec's own
# encoding, so a block is what the decoder would make of it by these tests; a message that
# normalising changes is changed as a typed value (``evolve``), as few are.


def _empty_text(block: dict[str, Any]) -> bool:
    """A text block (in any message) holding only whitespace."""
    return block_kind(block, reply=False) == "text" and not block["text"].strip()


def _normalize(slots: Sequence[MessageSlot]) -> tuple[list[MessageSlot], set[str]]:
    """:func:`normalize_messages` of slots, and the tool-call ids the messages take part in (as
    :func:`_all_pair_ids` gives them), gathered in the same passes (a first context
    normalises every message of the kept window)."""
    results: dict[str, MessageSlot] = {}
    ids: set[str] = set()
    for s in slots:
        if s.role == "toolResult":
            call_id = s.json["toolCallId"]
            ids.add(call_id)
            if call_id not in results:
                results[call_id] = _nonempty_result(s)

    out: list[MessageSlot] = []
    add = out.append
    for s in slots:
        m, role = s.json, s.role
        if role == "toolResult":
            continue  # placed after their call below
        if role == "user":
            content = m.get("content", "")
            if type(content) is str:
                if content.strip():
                    add(s)
                continue
            kept = [i for i, b in enumerate(content) if not _empty_text(b)]
            if kept:
                add(s if len(kept) == len(content) else _keeping(s, kept))
            continue
        if role != "assistant":
            add(s)
            continue
        content = content_blocks(m)
        cut = m.get("stopReason") == "length"
        # One loop without calls per block, since nearly every reply keeps all its blocks.
        calls, dropped = [], False
        for b in content:
            kind = b.get("type")
            if kind == "text":
                text = b.get("text")
                if type(text) is str and not text.strip():
                    dropped = True
            elif kind == "toolCall":
                if block_kind(b, reply=True) == "toolCall":
                    calls.append(b)
                    ids.add(b["id"])
                    if cut and b["id"] not in results:
                        dropped = True
            elif kind == "thinking":
                thinking = b.get("thinking")
                if type(thinking) is str and not thinking and not b.get("thinkingSignature"):
                    dropped = True
        if dropped:
            kept = [i for i, b in enumerate(content) if not _dropped_block(b, cut, results)]
            if not kept:
                continue
            s = _keeping(s, kept)
            calls = [content[i] for i in kept if block_kind(content[i], reply=True) == "toolCall"]
        elif not content:
            continue
        add(s)
        for call in calls:
            result = results.pop(call["id"], None)
            add(
                result
                if result is not None
                else slot_of(
                    ToolResultMessage(
                        tool_call_id=call["id"],
                        tool_name=call["name"],
                        content=(TextContent(text=NO_RESULT_TEXT),),
                        is_error=True,
                        timestamp=m["timestamp"],
                    )
                )
            )
    return out, ids


def _keeping(slot: MessageSlot, kept: list[int]) -> MessageSlot:
    """The slot's message with only the content blocks at ``kept`` (indexes of its JSON's
    blocks, which the decoded content has one for one)."""
    message = slot.message
    content = message.content  # type: ignore[union-attr]
    return slot_of(evolve(message, content=tuple(content[i] for i in kept)))  # type: ignore[arg-type]


def _dropped_block(block: dict[str, Any], cut: bool, results: dict[str, MessageSlot]) -> bool:
    """An empty text block, an unsigned empty thinking block, or a call cut off at ``length``."""
    kind = block.get("type")
    if kind == "text":
        return _empty_text(block)
    if kind == "thinking":
        thinking = block.get("thinking")
        return type(thinking) is str and not thinking and not block.get("thinkingSignature")
    return cut and block_kind(block, reply=True) == "toolCall" and block["id"] not in results


def iso_ms(timestamp: str) -> int:
    """An entry's ISO-8601 ``timestamp`` as Unix milliseconds (0 when it cannot be read)."""
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


EMPTY_RESULT_TEXT = "(no output)"


def _nonempty_result(slot: MessageSlot) -> MessageSlot:
    """The result without empty text blocks; one with nothing left says "(no output)"."""
    content = content_blocks(slot.json)
    if content and not any(map(_empty_text, content)):
        return slot  # nearly every result: nothing to rebuild
    result = slot.message
    assert isinstance(result, ToolResultMessage)
    pairs = zip(result.content, content, strict=True)
    blocks = tuple(b for b, raw in pairs if not _empty_text(raw))
    return slot_of(evolve(result, content=blocks or (TextContent(text=EMPTY_RESULT_TEXT),)))


def _derive(entry: Entry, state: _Derived) -> _Derived:
    """Derived state after ``entry``: the model (a model change, or an assistant message's
    provider and model), the thinking level and the active tools."""
    model, thinking, tools = state
    if isinstance(entry, ModelChangeEntry):
        model = ModelRef(provider=entry.provider, model_id=entry.model_id)
    elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
        if entry.message.provider and entry.message.model:
            model = ModelRef(provider=entry.message.provider, model_id=entry.message.model)
    elif isinstance(entry, ThinkingLevelChangeEntry):
        thinking = entry.thinking_level
    elif isinstance(entry, ActiveToolsChangeEntry):
        tools = entry.active_tool_names
    return model, thinking, tools


def _pair_ids(slot: MessageSlot) -> set[str]:
    """The tool-call ids a message takes part in (its calls, or the call it answers)."""
    return _all_pair_ids((slot,))


def _all_pair_ids(slots: Iterable[MessageSlot]) -> set[str]:
    """:func:`_pair_ids` of many messages together (a rebuild looks at every message)."""
    ids: set[str] = set()
    add = ids.add
    for s in slots:
        role = s.role
        if role == "assistant":
            for block in content_blocks(s.json):
                if block_kind(block, reply=True) == "toolCall":
                    add(block["id"])
        elif role == "toolResult":
            add(s.json["toolCallId"])
    return ids


class ContextCache:
    """``build_context`` for a branch that mostly grows, without rebuilding it every time.

    Normalisation pairs tool calls and results by id; where the messages split into two parts
    that share no call id, normalising the whole equals normalising each part. The cache keeps
    the normalised part up to the last such split (before a message that is not a tool result)
    and renormalises only what follows. Anything else (a leaf move, a compaction, an id used on
    both sides) rebuilds from scratch, so the result always equals ``build_context(path)``
    (``tests/repos/test_context_cache.py`` checks this on random sessions).
    """

    def __init__(self) -> None:
        self._path_ids: list[str] = []
        self._raw: list[MessageSlot] = []
        self._derived: _Derived = (None, "off", None)
        self._done: list[MessageSlot] = []
        self._split = 0
        self._closed_ids: set[str] = set()

    def build(
        self,
        path_ids: list[str],
        get: Callable[[str], Entry],
        type_of: Callable[[str], str] | None = None,
    ) -> SessionContext:
        """The context of the branch ``path_ids`` (root first); ``get`` decodes an entry;
        ``type_of`` gives an entry's type without decoding it (then only what reaches the
        context, the last compaction and the entries deriving the settings are decoded)."""
        known = len(self._path_ids)
        if known and len(path_ids) >= known and path_ids[known - 1] == self._path_ids[-1]:
            extended = self._extend(path_ids[known:], get)
            if extended is not None:
                return extended
        ids = list(path_ids)  # extended in place by later builds
        return self._rebuild(ids, None if type_of is None else [type_of(i) for i in ids], get)

    def build_at(
        self,
        leaf_id: str | None,
        parent_of: Callable[[str], str | None],
        path: Callable[[], tuple[list[str], list[str]]],
        get: Callable[[str], Entry],
        get_bodies: Callable[[list[str]], list[Entry | Slot]] | None = None,
    ) -> SessionContext:
        """Like :meth:`build` for the branch ending at ``leaf_id``, walking up only to the last
        leaf when the new one descends from it (``path()`` gives the whole branch otherwise:
        its ids, root first, and their types)."""
        if self._path_ids and leaf_id is not None:
            last, walk = self._path_ids[-1], []
            current: str | None = leaf_id
            seen: set[str] = set()
            while current is not None and current != last and current not in seen:
                seen.add(current)
                walk.append(current)
                current = parent_of(current)
            if current == last:
                walk.reverse()
                extended = self._extend(walk, get)
                if extended is not None:
                    return extended
        path_ids, kinds = path()
        return self._rebuild(path_ids, kinds, get, get_bodies)

    def _extend(self, new_ids: list[str], get: Callable[[str], Entry]) -> SessionContext | None:
        """The context after appending ``new_ids`` to the known branch, or None when it must be
        rebuilt (a compaction, or a call id shared with the closed part)."""
        new_entries = [get(i) for i in new_ids]
        if any(isinstance(e, CompactionEntry) for e in new_entries):
            return None
        derived = self._derived
        new_messages: list[MessageSlot] = []
        for entry in new_entries:
            derived = _derive(entry, derived)
            message = entry_message(entry)
            if message is not None:
                new_messages.append(slot_of(message))
        if any(_pair_ids(m) & self._closed_ids for m in new_messages):
            return None
        self._path_ids.extend(new_ids)
        self._derived = derived
        self._raw.extend(new_messages)
        return self._finish()

    def _rebuild(
        self,
        path_ids: list[str],
        kinds: list[str] | None,
        get: Callable[[str], Entry],
        get_bodies: Callable[[list[str]], list[Entry | Slot]] | None = None,
    ) -> SessionContext:
        if kinds is None:
            messages, model, thinking, tools = _raw_context([get(i) for i in path_ids])
            self._set(path_ids, [slot_of(m) for m in messages], (model, thinking, tools))
            return self._finish()
        # Normalising is part of the bulk work: collections triggered by it would walk every
        # value just decoded.
        with bulk(len(path_ids) >= LARGE_ENTRIES):
            raw, model, thinking, tools = _lazy_raw_context(path_ids, kinds, get, get_bodies)
            self._set(path_ids, raw, (model, thinking, tools))
            return self._finish()

    def _set(self, path_ids: list[str], raw: list[MessageSlot], derived: _Derived) -> None:
        self._path_ids, self._raw, self._derived = path_ids, raw, derived
        self._done, self._split, self._closed_ids = [], 0, set()

    def _finish(self) -> SessionContext:
        self._close_segment()
        model, thinking, tools = self._derived
        return SessionContext(
            messages=LazyMessages((*self._done, *_normalize(self._raw[self._split :])[0])),
            model=model,
            thinking_level=thinking,
            active_tool_names=tools,
        )

    def _close_segment(self) -> None:
        """Move the split to the last message that is not a tool result, if no call id crosses
        it (so an agent's long tool loop after one prompt closes segments too)."""
        raw = self._raw
        boundary = next(
            (i for i in range(len(raw) - 1, self._split, -1) if raw[i].role != "toolResult"),
            None,
        )
        if boundary is None:
            return
        after = _all_pair_ids(raw[boundary:])
        # Normalised before the check, which needs the segment's ids, found in the same passes
        # (a first context has one segment: all of it); an id crossing the split is rare.
        done, segment = _normalize(raw[self._split : boundary])
        # The tail never shares an id with closed segments: build() rebuilds when it would.
        if after & segment:
            return
        self._done.extend(done)
        self._closed_ids |= segment
        self._split = boundary
