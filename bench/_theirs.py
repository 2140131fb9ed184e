"""The competitors of ``bench/bench_repos.py``: OpenAI Agents' ``SQLiteSession`` and LangGraph's
``SqliteSaver`` / ``PostgresSaver``, driven the way their users keep a message history.

Imported only inside the benchmark's own virtualenv (``~/.cache/jsonl-harness-bench/
venv-compare``), where ``openai-agents`` and the LangGraph packages are installed; the project
never depends on them. Each store has the methods ``bench_repos.Store`` names; an operation a
store does not have raises ``bench_repos.Unsupported`` with what it lacks.

* OpenAI Agents: one ``SQLiteSession(session_id, db_path)`` per session, one
  ``add_items([item])`` per message (one transaction each), the history is ``get_items()``. The
  items are the workload's message dicts as they are: ``SQLiteSession`` stores any
  JSON-serialisable item (``json.dumps``) without validating it, so it writes the same bytes.
* LangGraph: a compiled ``StateGraph(MessagesState)`` (one no-op node) with the saver as its
  checkpointer; one ``graph.update_state(config, {"messages": [message]})`` per message, which
  runs the ``add_messages`` reducer and writes one checkpoint holding the whole message list
  (what a step of a ``MessagesState`` graph stores); the history is
  ``graph.get_state(config).values["messages"]``. Messages are converted once, before any
  timing, to LangChain's ``HumanMessage`` / ``AIMessage`` (text and thinking blocks as content,
  tool calls as ``tool_calls``) / ``ToolMessage``.
"""

from __future__ import annotations

import importlib
import sqlite3
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from importlib import metadata
from pathlib import Path
from typing import Any


def versions() -> dict[str, str]:
    """The installed competitor packages and their versions; raises ImportError if missing."""
    for module in ("agents.memory", "langgraph.graph", "langgraph.checkpoint.sqlite"):
        importlib.import_module(module)

    names = (
        "openai-agents",
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
    )
    return {name: metadata.version(name) for name in names}


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1e3


# --- OpenAI Agents -------------------------------------------------------------------------------


class OpenAIStore:
    """``agents.memory.SQLiteSession`` on one database file (WAL, ``synchronous`` FULL: the
    sqlite3 default, which it keeps)."""

    key = "openai"

    def __init__(self, db: Path, raw: list[dict[str, Any]], unsupported: type[Exception]):
        from agents.memory import SQLiteSession

        self._cls = SQLiteSession
        self._db = db
        self._raw = raw
        self._unsupported = unsupported
        self.source: str | None = None
        self.source_len = 0

    def _session(self, sid: str) -> Any:
        return self._cls(sid, self._db)

    async def append_run(self, n: int) -> tuple[float, str]:
        sid = uuid.uuid4().hex
        session = self._session(sid)
        raw = self._raw
        try:
            start = time.perf_counter()
            for i in range(n):
                await session.add_items([raw[i % len(raw)]])
            took = _ms(start)
            got = len(await session.get_items())
        finally:
            session.close()
        if got != n:
            raise RuntimeError(f"SQLiteSession holds {got} items after {n} appends")
        return took, sid

    async def drop(self, sid: str) -> None:
        session = self._session(sid)
        try:
            await session.clear_session()
        finally:
            session.close()

    async def open_ms(self) -> float:
        assert self.source is not None
        start = time.perf_counter()
        session = self._session(self.source)
        took = _ms(start)
        session.close()
        return took

    async def context_ms(self) -> float:
        assert self.source is not None
        session = self._session(self.source)
        try:
            start = time.perf_counter()
            items = await session.get_items()
            took = _ms(start)
        finally:
            session.close()
        if len(items) != self.source_len:
            raise RuntimeError(f"get_items gave {len(items)} items, expected {self.source_len}")
        return took

    async def resume_ms(self) -> float:
        assert self.source is not None
        start = time.perf_counter()
        session = self._session(self.source)
        try:
            items = await session.get_items()
            took = _ms(start)
        finally:
            session.close()
        if len(items) != self.source_len:
            raise RuntimeError(f"get_items gave {len(items)} items, expected {self.source_len}")
        return took

    async def fork_ms(self, keep: int) -> tuple[float, str]:
        """No fork: a new session given the first ``keep`` items of the source's history."""
        assert self.source is not None
        sid = uuid.uuid4().hex
        start = time.perf_counter()
        source = self._session(self.source)
        fork = self._session(sid)
        try:
            items = await source.get_items()
            await fork.add_items(items[:keep])
            took = _ms(start)
        finally:
            source.close()
            fork.close()
        return took, sid

    async def append_at(self, count: int) -> list[float]:
        assert self.source is not None
        session = self._session(self.source)
        times = []
        try:
            for i in range(count):
                start = time.perf_counter()
                await session.add_items([self._raw[i % len(self._raw)]])
                times.append(_ms(start))
        finally:
            session.close()
        self.source_len += count
        return times

    async def seed_list(self, sessions: list[tuple[str, list[dict[str, Any]]]]) -> None:
        raise self._unsupported("no list of sessions")

    async def list_ms(self, cwd: str) -> float:
        raise self._unsupported("no list of sessions")

    async def close(self) -> None:
        pass


# --- LangGraph -----------------------------------------------------------------------------------


def to_langchain(raw: list[dict[str, Any]]) -> list[Any]:
    """The workload's pi messages as LangChain messages (what ``MessagesState`` holds)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for m in raw:
        role = m["role"]
        if role == "user":
            out.append(HumanMessage(content=m["content"]))
        elif role == "assistant":
            blocks = [b for b in m["content"] if b["type"] != "toolCall"]
            calls = [
                {"name": b["name"], "args": b["arguments"], "id": b["id"], "type": "tool_call"}
                for b in m["content"]
                if b["type"] == "toolCall"
            ]
            meta = {k: m[k] for k in ("api", "provider", "model", "usage", "stopReason")}
            out.append(AIMessage(content=blocks, tool_calls=calls, response_metadata=meta))
        elif role == "toolResult":
            out.append(
                ToolMessage(
                    content=m["content"],
                    tool_call_id=m["toolCallId"],
                    name=m["toolName"],
                    status="error" if m.get("isError") else "success",
                    artifact=m.get("details"),
                )
            )
        else:
            raise ValueError(f"no LangChain message for role {role!r}")
    return out


def _graph(saver: Any) -> Any:
    from langgraph.graph import START, MessagesState, StateGraph

    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {})
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


class LangGraphStore:
    """A ``StateGraph(MessagesState)`` checkpointed by ``SqliteSaver`` (``kind`` "sqlite": one
    database file, WAL, ``synchronous`` FULL as the saver leaves it) or ``PostgresSaver``
    (``kind`` "postgres": one psycopg connection, autocommit, as ``from_conn_string`` makes it).
    The saver's synchronous API runs in this thread (the graph's sync methods)."""

    def __init__(
        self,
        kind: str,
        where: str,
        raw: list[dict[str, Any]],
        cwd: str,
        unsupported: type[Exception],
    ) -> None:
        self.key = f"langgraph_{kind}"
        self._cm: AbstractContextManager[Any]
        if kind == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            self._conn = sqlite3.connect(where, check_same_thread=False)
            self._saver: Any = SqliteSaver(self._conn)
        else:
            from langgraph.checkpoint.postgres import PostgresSaver

            self._cm = PostgresSaver.from_conn_string(where)
            self._saver = self._cm.__enter__()
        self._saver.setup()
        self._kind = kind
        self._graph = _graph(self._saver)
        self._messages = to_langchain(raw)
        self._cwd = cwd
        self._unsupported = unsupported
        self.source: str | None = None
        self.source_len = 0
        self._listed: set[str] = set()

    def _config(self, thread: str, cwd: str | None = None) -> dict[str, Any]:
        config: dict[str, Any] = {"configurable": {"thread_id": thread}}
        config["metadata"] = {"cwd": cwd or self._cwd}
        return config

    def _update(self, thread: str, messages: list[Any], cwd: str | None = None) -> None:
        self._graph.update_state(self._config(thread, cwd), {"messages": messages})

    def _history(self, thread: str) -> list[Any]:
        messages: list[Any] = self._graph.get_state(self._config(thread)).values["messages"]
        return messages

    def _cycle(self, n: int) -> list[Any]:
        """``n`` messages of the workload, each with an id of its own (``add_messages`` merges
        messages that share an id, and the workload repeats its messages past its length)."""
        msgs = self._messages
        return [msgs[i % len(msgs)].model_copy(update={"id": uuid.uuid4().hex}) for i in range(n)]

    async def append_run(self, n: int) -> tuple[float, str]:
        thread = uuid.uuid4().hex
        batch = self._cycle(n)
        update = self._update
        start = time.perf_counter()
        for message in batch:
            update(thread, [message])
        took = _ms(start)
        got = len(self._history(thread))
        if got != n:
            raise RuntimeError(f"the thread holds {got} messages after {n} updates")
        return took, thread

    async def build_source(self, n: int) -> str:
        """A thread of ``n`` messages written by one update (one checkpoint), untimed."""
        thread = uuid.uuid4().hex
        self._update(thread, self._cycle(n))
        return thread

    async def drop(self, thread: str) -> None:
        self._saver.delete_thread(thread)

    async def open_ms(self) -> float:
        raise self._unsupported("no open: get_state reads it all")

    async def context_ms(self) -> float:
        raise self._unsupported("get_state: see resume")

    async def resume_ms(self) -> float:
        assert self.source is not None
        start = time.perf_counter()
        messages = self._history(self.source)
        took = _ms(start)
        if len(messages) != self.source_len:
            raise RuntimeError(f"get_state gave {len(messages)} messages, not {self.source_len}")
        return took

    async def fork_ms(self, keep: int) -> tuple[float, str]:
        """No fork to a new thread: a new thread given the first ``keep`` messages of the
        source's state (one ``get_state`` + one ``update_state``)."""
        assert self.source is not None
        thread = uuid.uuid4().hex
        start = time.perf_counter()
        messages = self._history(self.source)
        self._update(thread, messages[:keep])
        return _ms(start), thread

    async def append_at(self, count: int) -> list[float]:
        assert self.source is not None
        times = []
        for message in self._cycle(count):
            start = time.perf_counter()
            self._update(self.source, [message])
            times.append(_ms(start))
        self.source_len += count
        return times

    async def seed_list(self, sessions: list[tuple[str, list[dict[str, Any]]]]) -> None:
        """One thread per session, written by one update holding its messages (so one
        checkpoint each: the fewest ``list`` can meet), with the session's cwd as metadata."""
        for cwd, raw in sessions:
            thread = uuid.uuid4().hex
            self._update(thread, to_langchain(raw), cwd)
            self._listed.add(thread)

    async def list_ms(self, cwd: str) -> float:
        """No list of threads: ``saver.list(None, filter={"cwd": ...})``, the checkpoints whose
        metadata matches (each one deserialised, messages included)."""
        start = time.perf_counter()
        found = list(self._saver.list(None, filter={"cwd": cwd}))
        took = _ms(start)
        threads = {t.config["configurable"]["thread_id"] for t in found}
        if threads != self._listed:
            raise RuntimeError(f"list found {len(threads)} threads, expected {len(self._listed)}")
        return took

    async def close(self) -> None:
        if self._kind == "sqlite":
            self._conn.close()
        else:
            self._cm.__exit__(None, None, None)


def make_stores(
    work: Path,
    postgres_url: Callable[[], str] | None,
    raw: list[dict[str, Any]],
    cwd: str,
    unsupported: type[Exception],
) -> list[Any]:
    """The competitor stores (PostgresSaver only when ``postgres_url`` gives a database)."""
    stores: list[Any] = [
        OpenAIStore(work / "openai.db", raw, unsupported),
        LangGraphStore("sqlite", str(work / "langgraph.db"), raw, cwd, unsupported),
    ]
    if postgres_url is not None:
        stores.append(LangGraphStore("postgres", postgres_url(), raw, cwd, unsupported))
    return stores
