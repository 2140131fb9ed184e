"""Helpers of the conformance suite: messages to append, sessions closed at the end of a case,
and checks on values that must not be shared."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

from .._entries import Entry
from .._repo import ForkPosition, ForkScope, SessionRepo
from .._session import Session, TreeNode

__all__ = [
    "Tracked",
    "assistant",
    "cwd_for",
    "file_bytes",
    "mutate",
    "tool_call_reply",
    "tree_nodes",
    "user",
]


def cwd_for(case: str) -> str:
    """An absolute cwd no other case (and no session already in the repo) uses."""
    return f"/conformance/{case}-{uuid.uuid4().hex[:12]}"


def user(text: str, ts: int | None = None) -> UserMessage:
    return UserMessage(content=text) if ts is None else UserMessage(content=text, timestamp=ts)


def assistant(text: str, ts: int | None = None) -> AssistantMessage:
    blocks = [TextContent(text=text)]
    if ts is None:
        return AssistantMessage(content=blocks, api="test", provider="test", model="m")
    return AssistantMessage(content=blocks, api="test", provider="test", model="m", timestamp=ts)


def tool_call_reply(call_id: str, arguments: Mapping[str, Any]) -> AssistantMessage:
    return AssistantMessage(
        content=[
            TextContent(text="let me look"),
            ToolCall(id=call_id, name="read", arguments=arguments),
        ],
        api="test",
        provider="test",
        model="m",
        stop_reason="toolUse",
    )


def every_message() -> list[Any]:
    """One message of each role pi writes, with the optional fields filled in."""
    return [
        UserMessage(content="plain text"),
        UserMessage(
            content=(
                TextContent(text="look at this"),
                ImageContent(data="aGVsbG8=", mime_type="image/png"),
            )
        ),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="hmm", thinking_signature="sig"),
                TextContent(text="reading"),
                ToolCall(id="call-1", name="read", arguments={"path": "a.txt", "n": [1, 2]}),
            ],
            api="anthropic-messages",
            provider="anthropic",
            model="claude",
            usage=Usage(input=10, output=5, cache_read=2, cache_write=1, total_tokens=18),
            stop_reason="toolUse",
        ),
        ToolResultMessage(
            tool_call_id="call-1",
            tool_name="read",
            content=[TextContent(text="file body")],
            details={"lines": 3},
            is_error=False,
        ),
        AssistantMessage(
            content=[TextContent(text="cut")],
            provider="anthropic",
            model="claude",
            stop_reason="error",
            error_message="overloaded",
        ),
        BashExecutionMessage(command="ls", output="a.txt\n", exit_code=0, truncated=False),
        CustomMessage(custom_type="ext", content="from an extension", display=False, details=[1]),
    ]


def mutate(value: object) -> None:
    """Try to change a JSON value in place; a read-only value raising ``TypeError`` is fine."""
    try:
        if isinstance(value, dict):
            value["__conformance__"] = "changed"
        elif isinstance(value, list):
            value.append("changed")
    except TypeError:
        pass


def tree_nodes(roots: Sequence[TreeNode]) -> Iterator[TreeNode]:
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def file_bytes(session: Session) -> bytes | None:
    """The session file's bytes, or None for a session without a file."""
    path = session.path
    return path.read_bytes() if path is not None and path.exists() else None


def snapshot(session: Session) -> tuple[list[str], str | None, dict[str, str], str | None]:
    return session.entry_ids(), session.leaf_id, session.labels, session.name


def entries_by_id(session: Session) -> dict[str, Entry]:
    return {e.id: e for e in session.entries()}


class Tracked:
    """Creates, opens and forks sessions through a repo and closes them all at the end::

    async with Tracked(repo) as t:
        s = await t.create("/w")
    """

    def __init__(self, repo: SessionRepo) -> None:
        self.repo = repo
        self._sessions: list[Session] = []

    def keep(self, session: Session) -> Session:
        self._sessions.append(session)
        return session

    async def create(
        self,
        cwd: str,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        return self.keep(
            await self.repo.create(
                cwd, session_id=session_id, parent_session=parent_session, metadata=metadata
            )
        )

    async def open(self, ref: str | Path) -> Session:
        return self.keep(await self.repo.open(ref))

    async def reopen(self, session: Session) -> Session:
        """Close ``session`` and open it again by id."""
        session.close()
        return await self.open(session.id)

    async def fork(
        self,
        source: str | Path,
        *,
        entry_id: str | None = None,
        position: ForkPosition | None = None,
        scope: ForkScope = "branch",
        cwd: str | None = None,
        session_id: str | None = None,
    ) -> Session:
        return self.keep(
            await self.repo.fork(
                source,
                entry_id=entry_id,
                position=position,
                scope=scope,
                cwd=cwd,
                session_id=session_id,
            )
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        for session in self._sessions:
            session.close()
