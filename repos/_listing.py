"""What a database repository keeps per session for ``list`` (DESIGN §4), folded line by line.

A database serves ``list`` from columns updated in each append's transaction, never by reading
entries. :class:`Summary` is those columns; :func:`line_facts` reads what one stored line
changes in them (parsing only message and ``session_info`` lines), so the append path, an
import and a migration all follow the rules ``JsonlSessionRepo.list`` follows: messages
counted, the first user message's text, the latest name (an empty one clears it), and the last
user/assistant message time as the activity.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import orjson
from attrs import define, frozen

from ._codec import CodecError, loads_line

__all__ = ["LineFacts", "Summary", "line_facts", "ms_of_iso", "summarize"]

_MESSAGE_HEAD = b'{"type":"message"'
_INFO_HEAD = b'{"type":"session_info"'
_ANY_HEAD = b'{"type":"'


@frozen
class LineFacts:
    """What one line changes in a :class:`Summary`."""

    message: bool = False
    first_text: str | None = None
    """The text of a user message (candidate first message)."""
    activity_ms: int | None = None
    """The timestamp of a user or assistant message."""
    name_set: bool = False
    name: str | None = None


_NOTHING = LineFacts()


@define
class Summary:
    """The ``list`` columns of one session."""

    message_count: int = 0
    first_message: str = ""
    name: str | None = None
    last_activity_ms: int | None = None

    def add(self, facts: LineFacts) -> None:
        if facts.message:
            self.message_count += 1
        if facts.first_text is not None and not self.first_message:
            self.first_message = facts.first_text
        if facts.activity_ms is not None:
            self.last_activity_ms = facts.activity_ms
        if facts.name_set:
            self.name = facts.name


def summarize(lines: Iterable[bytes]) -> Summary:
    """The summary of a session's entry lines (without the header), in file order."""
    summary = Summary()
    for raw in lines:
        facts = line_facts(raw)
        if facts is not _NOTHING:
            summary.add(facts)
    return summary


def line_facts(raw: bytes) -> LineFacts:
    """What the stored line ``raw`` (no newline) changes in the summary."""
    if raw.startswith(_ANY_HEAD) and not (
        raw.startswith(_MESSAGE_HEAD) or raw.startswith(_INFO_HEAD)
    ):
        return _NOTHING
    try:
        obj = loads_line(raw)
    except (orjson.JSONDecodeError, CodecError):
        return _NOTHING
    if not isinstance(obj, dict):
        return _NOTHING
    kind = obj.get("type")
    if kind == "session_info":
        name = obj.get("name")
        text = name.strip() or None if isinstance(name, str) else None
        return LineFacts(name_set=True, name=text)
    message = obj.get("message")
    if kind != "message" or not isinstance(message, dict):
        return _NOTHING
    role = message.get("role")
    if role not in ("user", "assistant"):
        return LineFacts(message=True)
    ts = message.get("timestamp")
    activity = int(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None
    text = _text_of(message.get("content")) if role == "user" else None
    return LineFacts(message=True, first_text=text, activity_ms=activity)


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def ms_of_iso(value: str) -> int:
    """Unix ms of an ISO-8601 timestamp (a header's); naive means UTC; unreadable means 0."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return round(parsed.timestamp() * 1000)
