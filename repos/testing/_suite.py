"""The conformance cases every :class:`~repos.SessionRepo` must pass (DESIGN §4, §5)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from hooks import AssistantMessage, TextContent, ToolCall, ToolResultMessage

from .._codec import MAX_NESTING
from .._context import ModelRef
from .._entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LeafEntry,
    MessageEntry,
)
from .._errors import (
    EntryNotFoundError,
    InvalidEntryError,
    InvalidForkTargetError,
    InvalidSessionIdError,
    SessionClosedError,
    SessionExistsError,
    SessionGoneError,
    SessionNotFoundError,
)
from .._repo import SessionInfo, SessionRepo
from .._session import Session
from ._helpers import (
    Tracked,
    assistant,
    cwd_for,
    entries_by_id,
    every_message,
    file_bytes,
    mutate,
    snapshot,
    tool_call_reply,
    tree_nodes,
    user,
)

__all__ = ["HOSTILE_SESSION_IDS", "NON_JSON_VALUES", "ConformanceSuite", "nested"]

HOSTILE_SESSION_IDS: tuple[str, ...] = (
    "../x",
    "a/b",
    "",
    ".hidden",
    "x" * 129,
    "x" * 4096,
    "..",
    "a\\b",
    "a b",
    "a\nb",
    "-dash-first",
)
"""Session ids every repo refuses with ``InvalidSessionIdError`` (the rule is
``^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$``)."""


def _cyclic() -> object:
    d: dict[str, object] = {}
    d["self"] = d
    return d


def nested(levels: int) -> Any:
    """A JSON value ``levels`` objects and arrays deep (in turn, an object outermost)."""
    value: Any = "leaf"
    for n in range(levels):
        value = {"k": value} if (levels - n) % 2 else [value]
    return value


NON_JSON_VALUES: dict[str, Callable[[], Any]] = {
    "nan": lambda: math.nan,
    "inf": lambda: math.inf,
    "-inf": lambda: -math.inf,
    "nested-nan": lambda: {"ok": [1, {"bad": math.nan}]},
    "set": lambda: {1, 2},
    "bytes": lambda: b"raw",
    "cyclic-dict": _cyclic,
    "object": object,
    # Inside any entry this is deeper than the cap (the line's own object is level 1).
    "nested-past-the-cap": lambda: nested(MAX_NESTING),
}
"""Values no session line can hold; each append given one raises ``InvalidEntryError``."""


# (fork keyword arguments, expected root-to-leaf path of the fork, expected leaf) over the
# source built by ``_fork_source``.
_FORK_CASES: list[tuple[dict[str, str], list[str], str | None]] = [
    ({}, ["u1", "a1", "u2", "a2"], "a2"),  # no entry: at the leaf
    ({"entry_id": "u2"}, ["u1", "a1"], "a1"),  # an entry given: before it by default
    ({"entry_id": "u2", "position": "before"}, ["u1", "a1"], "a1"),
    ({"entry_id": "u2", "position": "at"}, ["u1", "a1", "u2"], "u2"),
    ({"entry_id": "a3", "position": "at"}, ["u1", "a1", "u3", "a3"], "a3"),  # another branch
    ({"entry_id": "a3"}, ["u1", "a1", "u3"], "u3"),
    ({"entry_id": "u1"}, [], None),  # before the first entry
]


def _ms(info: SessionInfo) -> int:
    return round(info.modified.timestamp() * 1000)


async def _fork_source(t: Tracked, cwd: str) -> tuple[Session, dict[str, str]]:
    """::

        u1 - a1 - u2 - a2              (active branch, leaf a2; label "top" on u1)
               \\ u3 - a3               (label "side" on a3, set on this branch)

    plus the name "Source name", set on the side branch."""
    s = await t.create(cwd)
    ids: dict[str, str] = {}
    ids["u1"] = s.append_message(user("u1")).id
    s.set_label(ids["u1"], "top")
    ids["a1"] = s.append_message(assistant("a1")).id
    ids["u2"] = s.append_message(user("u2")).id
    ids["a2"] = s.append_message(assistant("a2")).id
    s.move_to(ids["a1"])
    ids["u3"] = s.append_message(user("u3")).id
    ids["a3"] = s.append_message(assistant("a3")).id
    s.set_label(ids["a3"], "side")
    s.set_name("Source name")
    s.move_to(ids["a2"])
    return s, ids


def _content_ids(session: Session) -> list[str]:
    """The leaf's root-to-leaf path without bookkeeping entries (labels, names, leaf moves)."""
    skip = ("label", "session_info", "leaf")
    return [e.id for e in session.get_branch() if e.type not in skip]


def _assert_self_contained(session: Session) -> None:
    """Every parent and leaf target the session holds, and every label in effect, is one of its
    entries (a copied label entry may target an entry left out of a branch fork)."""
    for entry in session.entries():
        assert entry.parent_id is None or entry.parent_id in session, (
            f"{entry.type} {entry.id}: parentId {entry.parent_id!r} not in the session"
        )
        if isinstance(entry, LeafEntry):
            assert entry.target_id is None or entry.target_id in session
    assert len(set(session.entry_ids())) == len(session)
    for target in session.labels:
        assert target in session


def _assert_links_to(fork: Session, source: Session) -> None:
    link = fork.header.parent_session
    allowed = {source.id}
    if source.path is not None:
        allowed |= {str(source.path), str(source.path.resolve())}
    assert link in allowed, f"fork header parentSession {link!r} names none of {allowed}"


@pytest.mark.asyncio
class ConformanceSuite:
    """Conformance cases for a :class:`~repos.SessionRepo`. Subclass it in a test module whose
    class name starts with ``Test`` and supply a ``session_repo`` fixture returning a fresh repo
    (see the package docstring). Capability flags, overridden on the subclass:

    - ``supports_paths``: sessions have a ``path`` (a file that exists) and ``open``, ``delete``
      and ``fork`` accept it as a ref. False: ``path`` is None everywhere.
    """

    supports_paths: ClassVar[bool] = True

    @pytest.fixture
    def session_repo(self) -> SessionRepo:
        """Override with a fixture returning the repo under test (fresh for each case)."""
        pytest.fail(
            f"{type(self).__name__} must define a `session_repo` fixture returning the "
            "SessionRepo under test"
        )

    # --- create, open, delete ------------------------------------------------------------------

    async def test_repo_satisfies_the_protocol(self, session_repo: SessionRepo) -> None:
        assert isinstance(session_repo, SessionRepo)

    async def test_create_returns_an_empty_session(self, session_repo: SessionRepo) -> None:
        cwd = cwd_for("create")
        async with Tracked(session_repo) as t:
            s = await t.create(cwd, session_id="conf-create-1", metadata={"k": ["v", 1]})
            assert (s.id, s.header.id, s.cwd, s.header.cwd) == (
                "conf-create-1",
                "conf-create-1",
                cwd,
                cwd,
            )
            assert len(s) == 0 and s.entry_ids() == [] and list(s.entries()) == []
            assert s.leaf_id is None and s.name is None and s.labels == {}
            assert s.get_branch() == [] and s.get_tree() == [] and s.get_children(None) == []
            assert s.build_context().messages == ()
            again = await t.reopen(s)
            assert again.id == "conf-create-1" and again.cwd == cwd and len(again) == 0
            assert again.header.metadata == {"k": ["v", 1]}

    async def test_create_without_an_id_gives_each_session_a_valid_new_id(
        self, session_repo: SessionRepo
    ) -> None:
        cwd = cwd_for("ids")
        async with Tracked(session_repo) as t:
            sessions = [await t.create(cwd) for _ in range(3)]
            ids = [s.id for s in sessions]
            assert len(set(ids)) == 3 and all(ids)
            for s in sessions:
                assert (await t.open(s.id)).id == s.id
            assert sorted(i.id for i in await session_repo.list(cwd)) == sorted(ids)

    async def test_create_refuses_a_taken_id(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("taken"), session_id="conf-taken")
            kept = s.append_message(user("keep me"))
            for cwd in (s.cwd, cwd_for("elsewhere")):
                with pytest.raises(SessionExistsError) as info:
                    await t.create(cwd, session_id="conf-taken")
                assert info.value.code == "session_exists"
            again = await t.open("conf-taken")
            assert again.entry_ids() == [kept.id]
            assert [i.id for i in await session_repo.list(s.cwd)] == ["conf-taken"]

    @pytest.mark.parametrize("bad", HOSTILE_SESSION_IDS)
    async def test_hostile_session_ids_are_refused(
        self, session_repo: SessionRepo, bad: str
    ) -> None:
        cwd = cwd_for("hostile")
        async with Tracked(session_repo) as t:
            canary = await t.create(cwd, session_id="conf-canary")
            canary.append_message(user("untouched"))
            before = file_bytes(canary)
            calls: list[Callable[[], Any]] = [
                lambda: session_repo.create(cwd, session_id=bad),
                lambda: session_repo.open(bad),
                lambda: session_repo.delete(bad),
                lambda: session_repo.fork(bad),
                lambda: session_repo.fork("conf-canary", session_id=bad),
            ]
            for call in calls:
                with pytest.raises(InvalidSessionIdError) as info:
                    result = await call()
                    if isinstance(result, Session):
                        result.close()
                assert info.value.code == "invalid_session_id"
            assert [i.id for i in await session_repo.list(cwd)] == ["conf-canary"]
            assert file_bytes(canary) == before
            assert len(await t.open("conf-canary")) == 1

    async def test_the_longest_valid_id_is_accepted(self, session_repo: SessionRepo) -> None:
        sid = "conf" + "b._-9" * 24 + "zzzz"
        assert len(sid) == 128
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("long"), session_id=sid)
            s.append_message(user("hi"))
            assert (await t.reopen(s)).id == sid

    async def test_ids_sharing_a_suffix_do_not_shadow_each_other(
        self, session_repo: SessionRepo
    ) -> None:
        cwd = cwd_for("suffix")
        async with Tracked(session_repo) as t:
            (await t.create(cwd, session_id="conf-z_conf-b")).append_message(user("in a_b"))
            await t.create(cwd, session_id="conf-b")
            assert len(await t.open("conf-b")) == 0
            assert len(await t.open("conf-z_conf-b")) == 1
            await session_repo.delete("conf-b")
            with pytest.raises(SessionNotFoundError):
                await t.open("conf-b")
            assert len(await t.open("conf-z_conf-b")) == 1

    async def test_open_of_an_unknown_session_raises_not_found(
        self, session_repo: SessionRepo
    ) -> None:
        with pytest.raises(SessionNotFoundError) as info:
            (await session_repo.open("conf-no-such-session")).close()
        assert info.value.code == "session_not_found"

    async def test_reopen_sees_every_append(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("reopen"))
            ids = [s.append_message(user(f"m{i}")).id for i in range(5)]
            again = await t.reopen(s)
            assert again.entry_ids() == ids and again.leaf_id == ids[-1]

    async def test_delete_is_idempotent_and_open_after_delete_raises_not_found(
        self, session_repo: SessionRepo
    ) -> None:
        cwd = cwd_for("delete")
        async with Tracked(session_repo) as t:
            s = await t.create(cwd, session_id="conf-doomed")
            s.append_message(user("bye"))
            keep = await t.create(cwd, session_id="conf-kept")
            s.close()
            await session_repo.delete("conf-never-existed")
            await session_repo.delete("conf-doomed")
            await session_repo.delete("conf-doomed")
            with pytest.raises(SessionNotFoundError) as info:
                await t.open("conf-doomed")
            assert info.value.code == "session_not_found"
            assert [i.id for i in await session_repo.list(cwd)] == [keep.id]
            with pytest.raises(SessionNotFoundError):
                await t.fork("conf-doomed")
            # The id is free again.
            fresh = await t.create(cwd, session_id="conf-doomed")
            assert len(fresh) == 0

    # --- list ----------------------------------------------------------------------------------

    async def test_list_reports_sessions_newest_activity_first(
        self, session_repo: SessionRepo
    ) -> None:
        cwd = cwd_for("list")
        async with Tracked(session_repo) as t:
            stamps = {"conf-mid": 1_100_000_000_000, "conf-old": 1_000_000_000_000}
            stamps["conf-new"] = 1_200_000_000_000
            for sid, ts in stamps.items():
                s = await t.create(cwd, session_id=sid)
                s.append_message(user(f"first of {sid}", ts=ts - 5000))
                s.append_message(assistant("answer", ts=ts))
                s.append_custom("state", {"x": 1})  # not a message
            empty = await t.create(cwd, session_id="conf-empty")  # activity = its creation
            named = await t.open("conf-old")
            named.set_name("Old one")
            infos = await session_repo.list(cwd)
            assert [i.id for i in infos] == ["conf-empty", "conf-new", "conf-mid", "conf-old"]
            by_id = {i.id: i for i in infos}
            for sid, ts in stamps.items():
                info = by_id[sid]
                assert info.cwd == cwd
                assert info.message_count == 2
                assert info.first_message == f"first of {sid}"
                assert _ms(info) == ts
                assert info.created.tzinfo is not None and info.modified.tzinfo is not None
                assert info.parent_session is None
            assert by_id["conf-old"].name == "Old one" and by_id["conf-new"].name is None
            e = by_id["conf-empty"]
            assert (e.message_count, e.first_message, e.name) == (0, "", None)
            assert e.modified == e.created
            # Activity moves a session up.
            named.append_message(user("again", ts=1_300_000_000_000))
            empty.append_message(user("late", ts=1_250_000_000_000))
            infos = await session_repo.list(cwd)
            assert [i.id for i in infos] == ["conf-old", "conf-empty", "conf-new", "conf-mid"]
            assert [i.modified for i in infos] == sorted((i.modified for i in infos), reverse=True)

    async def test_list_filters_on_the_exact_cwd(self, session_repo: SessionRepo) -> None:
        base = cwd_for("cwd")
        async with Tracked(session_repo) as t:
            await t.create(f"{base}/a/b-c", session_id="conf-one")
            await t.create(f"{base}/a-b/c", session_id="conf-two")  # pi's folder names collide
            await t.create(f"{base}/a/b-c/sub", session_id="conf-three")
            assert [i.id for i in await session_repo.list(f"{base}/a/b-c")] == ["conf-one"]
            assert [i.id for i in await session_repo.list(f"{base}/a-b/c")] == ["conf-two"]
            assert [i.id for i in await session_repo.list(f"{base}/a/b")] == []
            assert [i.id for i in await session_repo.list(f"{base}/a")] == []
            everything = {i.id for i in await session_repo.list()}
            assert {"conf-one", "conf-two", "conf-three"} <= everything

    # --- fork ----------------------------------------------------------------------------------

    @pytest.mark.parametrize(("kwargs", "path", "leaf"), _FORK_CASES)
    async def test_fork_branch_scope(
        self,
        session_repo: SessionRepo,
        kwargs: dict[str, str],
        path: list[str],
        leaf: str | None,
    ) -> None:
        async with Tracked(session_repo) as t:
            source, ids = await _fork_source(t, cwd_for("fork"))
            args: dict[str, Any] = dict(kwargs)
            if "entry_id" in args:
                args["entry_id"] = ids[args["entry_id"]]
            before, before_bytes = snapshot(source), file_bytes(source)
            before_entries = entries_by_id(source)
            want = [ids[k] for k in path]
            want_labels = {k: v for k, v in source.labels.items() if k in want}

            fork = await t.fork(source.id, **args)
            assert fork.id != source.id
            assert fork.cwd == source.cwd
            _assert_links_to(fork, source)
            assert fork.leaf_id == (ids[leaf] if leaf else None)
            assert _content_ids(fork) == want
            for entry_id in want:
                assert fork.get_entry(entry_id) == source.get_entry(entry_id)
            copied = set(ids.values()) & set(fork.entry_ids())
            assert copied == set(want), "a branch fork copies the root-to-target path only"
            assert fork.labels == want_labels
            assert fork.name == "Source name"
            _assert_self_contained(fork)
            # The source is unchanged, in this object and in storage.
            assert snapshot(source) == before and file_bytes(source) == before_bytes
            fresh_source = await t.open(source.id)
            assert snapshot(fresh_source) == before
            assert entries_by_id(fresh_source) == before_entries
            # The fork reopens the same, and appends go to the fork only.
            again = await t.reopen(fork)
            assert again.leaf_id == fork.leaf_id
            assert _content_ids(again) == want
            assert again.labels == want_labels and again.name == "Source name"
            added = again.append_message(user("continue in the fork"))
            assert added.parent_id == fork.leaf_id
            assert added.id not in await t.open(source.id)
            listed = {i.id: i for i in await session_repo.list(source.cwd)}
            assert listed[fork.id].parent_session == fork.header.parent_session
            assert listed[source.id].parent_session is None

    async def test_fork_keeps_labels_as_the_source_has_them(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("fork-labels"))
            u1 = s.append_message(user("u1"))
            s.set_label(u1.id, "on-path")  # a label entry on the copied path...
            a1 = s.append_message(assistant("a1"))
            s.move_to(u1.id)
            s.set_label(u1.id, None)  # ...cleared from another branch
            s.set_label(a1.id, "later")  # targets an entry the fork will not copy
            u2 = s.append_message(user("u2"))
            s.set_label(u2.id, "kept")
            assert s.labels == {a1.id: "later", u2.id: "kept"}
            fork = await t.fork(s.id)
            assert fork.leaf_id == s.leaf_id
            assert a1.id not in fork
            assert fork.labels == {u2.id: "kept"}
            _assert_self_contained(fork)
            again = await t.reopen(fork)
            assert again.labels == {u2.id: "kept"} and again.leaf_id == s.leaf_id

    async def test_fork_keeps_the_name_as_the_source_has_it(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("fork-name"))
            u1 = s.append_message(user("u1"))
            s.set_name("on the path")
            u2 = s.append_message(user("u2"))
            s.move_to(u1.id)
            s.set_name("from a side branch")  # the latest name wins, whatever its branch
            s.move_to(u2.id)
            assert s.name == "from a side branch"
            fork = await t.fork(s.id)
            assert fork.name == "from a side branch"
            assert (await t.reopen(fork)).name == "from a side branch"
            s.move_to(u1.id)
            s.set_name("")  # cleared from a side branch
            s.move_to(u2.id)
            assert s.name is None
            fork = await t.fork(s.id)
            assert fork.name is None, "the fork kept a name the source has cleared"
            assert (await t.reopen(fork)).name is None

    async def test_fork_tree_scope_copies_everything(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            source, _ids = await _fork_source(t, cwd_for("fork-tree"))
            before, before_bytes = snapshot(source), file_bytes(source)
            other = cwd_for("fork-tree-target")
            fork = await t.fork(source.id, scope="tree", cwd=other, session_id="conf-tree-fork")
            assert fork.id == "conf-tree-fork" and fork.cwd == other
            _assert_links_to(fork, source)
            assert fork.entry_ids() == source.entry_ids()
            assert entries_by_id(fork) == entries_by_id(source)
            assert fork.leaf_id == source.leaf_id
            assert (fork.labels, fork.name) == (source.labels, source.name)
            assert fork.build_context() == source.build_context()
            _assert_self_contained(fork)
            assert snapshot(source) == before and file_bytes(source) == before_bytes
            assert [i.id for i in await session_repo.list(other)] == ["conf-tree-fork"]
            again = await t.reopen(fork)
            assert again.entry_ids() == source.entry_ids() and again.leaf_id == source.leaf_id

    async def test_fork_of_an_empty_session_is_empty(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            empty = await t.create(cwd_for("fork-empty"))
            for kwargs in ({}, {"position": "at"}, {"position": "before"}, {"scope": "tree"}):
                fork = await t.fork(empty.id, **kwargs)  # type: ignore[arg-type]
                assert len(fork) == 0 and fork.leaf_id is None
                _assert_links_to(fork, empty)
                assert fork.append_message(user("hi")).parent_id is None
            assert len(await t.open(empty.id)) == 0

    async def test_fork_refuses_an_unknown_target_and_creates_nothing(
        self, session_repo: SessionRepo
    ) -> None:
        cwd = cwd_for("fork-bad")
        async with Tracked(session_repo) as t:
            source, ids = await _fork_source(t, cwd)
            empty = await t.create(cwd, session_id="conf-fork-empty")
            before = sorted(i.id for i in await session_repo.list(cwd))
            for ref, kwargs in (
                (source.id, {"entry_id": "deadbeef"}),
                (source.id, {"entry_id": "deadbeef", "position": "at"}),
                (source.id, {"entry_id": "deadbeef", "scope": "tree"}),
                (source.id, {"entry_id": ids["u2"], "scope": "tree"}),
                (empty.id, {"entry_id": "deadbeef"}),
                (empty.id, {"entry_id": ids["u1"], "position": "at"}),  # another session's id
            ):
                with pytest.raises(InvalidForkTargetError) as info:
                    await t.fork(ref, **kwargs)  # type: ignore[arg-type]
                assert info.value.code == "invalid_fork_target"
            assert sorted(i.id for i in await session_repo.list(cwd)) == before
            with pytest.raises(SessionNotFoundError):
                await t.fork("conf-no-such-source")
            with pytest.raises(SessionExistsError):
                await t.fork(source.id, session_id=empty.id)
            assert len(await t.open(empty.id)) == 0

    # --- labels and names ----------------------------------------------------------------------

    async def test_labels_set_clear_and_survive_reopen(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("labels"))
            a = s.append_message(user("a"))
            b = s.append_message(assistant("b"))
            c = s.append_message(user("c"))
            s.set_label(a.id, "first")
            s.set_label(a.id, "second")  # the latest wins
            s.set_label(b.id, "bee")
            s.set_label(c.id, "sea")
            assert s.labels == {a.id: "second", b.id: "bee", c.id: "sea"}
            s.set_label(b.id, "")
            s.set_label(c.id, None)
            assert s.labels == {a.id: "second"}
            assert s.get_label(a.id) == "second" and s.get_label(b.id) is None
            labels = {n.entry.id: n.label for n in tree_nodes(s.get_tree())}
            assert {k: labels[k] for k in (a.id, b.id, c.id)} == {
                a.id: "second",
                b.id: None,
                c.id: None,
            }
            texts = [getattr(m, "text", None) for m in s.build_context().messages]
            assert texts == ["a", "b", "c"], "labels never enter the context"
            s.labels[b.id] = "not through the API"
            assert s.labels == {a.id: "second"}
            again = await t.reopen(s)
            assert again.labels == {a.id: "second"}
            assert again.get_label(c.id) is None

    async def test_a_label_on_a_missing_target_is_refused(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("label-missing"))
            s.append_message(user("u"))
            before, before_bytes = snapshot(s), file_bytes(s)
            for label in ("x", "", None):
                with pytest.raises(EntryNotFoundError) as info:
                    s.set_label("deadbeef", label)
                assert info.value.code == "entry_not_found"
            assert snapshot(s) == before and file_bytes(s) == before_bytes
            assert len(await t.reopen(s)) == 1

    async def test_names_set_clear_and_survive_reopen(self, session_repo: SessionRepo) -> None:
        cwd = cwd_for("names")
        async with Tracked(session_repo) as t:
            s = await t.create(cwd)
            first = s.append_message(user("u"))
            assert s.name is None
            s.set_name("first")
            s.set_name("second")
            s.set_label(first.id, "mark")
            assert s.name == "second"
            again = await t.reopen(s)
            assert again.name == "second" and again.labels == {first.id: "mark"}
            again.set_name("")
            assert again.name is None
            third = await t.reopen(again)
            assert third.name is None and third.labels == {first.id: "mark"}
            third.set_name("back")
            assert (await t.reopen(third)).name == "back"

    async def test_list_reports_the_current_name(self, session_repo: SessionRepo) -> None:
        cwd = cwd_for("list-name")
        async with Tracked(session_repo) as t:
            s = await t.create(cwd)
            s.append_message(user("u"))
            assert [i.name for i in await session_repo.list(cwd)] == [None]
            s.set_name("first")
            s.set_name("second")
            assert [i.name for i in await session_repo.list(cwd)] == ["second"]
            s.set_name("")  # cleared: Session.name is None, and so is the listed name
            assert s.name is None
            assert [i.name for i in await session_repo.list(cwd)] == [None]

    # --- the leaf ------------------------------------------------------------------------------

    async def test_move_to_moves_the_leaf_and_survives_reopen(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("move"))
            u1 = s.append_message(user("u1"))
            a1 = s.append_message(assistant("a1"))
            s.append_message(user("u2"))
            moved = s.move_to(u1.id)
            assert isinstance(moved, LeafEntry) and moved.target_id == u1.id
            assert s.leaf_id == u1.id
            assert [e.id for e in s.get_branch()] == [u1.id]
            again = await t.reopen(s)
            assert again.leaf_id == u1.id
            side = again.append_message(assistant("other answer"))
            assert side.parent_id == u1.id
            assert {e.id for e in again.get_children(u1.id)} == {a1.id, side.id}
            assert [getattr(m, "text", None) for m in again.build_context().messages] == [
                "u1",
                "other answer",
            ]
            with pytest.raises(EntryNotFoundError):
                again.move_to("deadbeef")
            assert again.leaf_id == side.id

    async def test_move_to_none_puts_the_leaf_before_the_first_entry(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("move-none"))
            first = s.append_message(user("one"))
            s.append_message(assistant("two"))
            s.move_to(None)
            assert s.leaf_id is None and s.get_branch() == []
            assert s.build_context().messages == ()
            again = await t.reopen(s)
            assert again.leaf_id is None
            root = again.append_message(user("fresh start"))
            assert root.parent_id is None
            assert [e.id for e in again.get_children(None)] == [first.id, root.id]
            third = await t.reopen(again)
            assert third.leaf_id == root.id and third.get_entry(root.id).parent_id is None

    async def test_move_to_the_current_leaf_appends_nothing(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("move-same"))
            s.move_to(None)  # already before the first entry
            assert len(s) == 0 and file_bytes(s) == file_bytes(await t.open(s.id))
            assert len(await t.open(s.id)) == 0
            u1 = s.append_message(user("u1"))
            before, before_bytes = snapshot(s), file_bytes(s)
            s.move_to(u1.id)
            assert snapshot(s) == before and file_bytes(s) == before_bytes
            s.move_to(None)
            s.move_to(None)
            assert len(s) == 2
            s.move_to(u1.id)
            s.move_to(u1.id)
            assert len(s) == 3 and s.leaf_id == u1.id
            assert len(await t.reopen(s)) == 3

    async def test_references_to_missing_entries_are_refused(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("missing"))
            s.append_message(user("u"))
            before = snapshot(s)
            calls: list[Callable[[], object]] = [
                lambda: s.move_to("deadbeef"),
                lambda: s.append_compaction("s", "deadbeef", 1),
                lambda: s.append_branch_summary("deadbeef", "s"),
                lambda: s.get_entry("deadbeef"),
                lambda: s.get_branch("deadbeef"),
            ]
            for call in calls:
                with pytest.raises(EntryNotFoundError) as info:
                    call()
                assert info.value.code == "entry_not_found"
            assert snapshot(s) == before

    # --- entries -------------------------------------------------------------------------------

    async def test_every_append_chains_on_the_leaf(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("chain"))
            made: list[Entry] = []
            first = s.append_message(user("hello"))
            made.append(first)
            for append in (
                lambda: s.append_message(assistant("hi")),
                lambda: s.append_model_change("anthropic", "claude"),
                lambda: s.append_thinking_level_change("high"),
                lambda: s.append_active_tools_change(["read"]),
                lambda: s.append_compaction("summary", first.id, 10),
                lambda: s.append_branch_summary(first.id, "tried"),
                lambda: s.append_custom("state", {"n": 1}),
                lambda: s.append_custom_message("note", "remember"),
                lambda: s.set_label(first.id, "start"),
                lambda: s.set_name("Name"),
            ):
                entry: Entry = append()
                assert entry.parent_id == made[-1].id
                assert s.leaf_id == entry.id
                assert s.get_entry(entry.id) == entry
                made.append(entry)
            assert s.entry_ids() == [e.id for e in made]
            assert len({e.id for e in made}) == len(made) == len(s)
            assert all(e.id and e.timestamp for e in made)

    async def test_every_entry_type_round_trips_through_a_reopen(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("types"))
            made: list[Entry] = [s.append_message(m) for m in every_message()]
            first = made[0]
            made += [
                s.append_model_change("anthropic", "claude-opus"),
                s.append_thinking_level_change("medium"),
                s.append_active_tools_change(["read", "bash"]),
                s.append_active_tools_change([]),
                s.append_compaction(
                    "so far",
                    first.id,
                    1234,
                    details={"readFiles": ["a"], "modifiedFiles": []},
                    from_hook=True,
                ),
                s.append_branch_summary(first.id, "tried", details={"k": [1, None]}),
                s.append_custom("state", {"nested": {"list": [1, 2.5, "x", True, None]}}),
                s.append_custom("no-data"),
                s.append_custom_message(
                    "note", [TextContent(text="block")], display=False, details={"d": 1}
                ),
                s.append_custom_message("plain", "text"),
                s.set_label(first.id, "start"),
                s.set_name("My session"),
                s.move_to(made[2].id),
            ]
            types = {e.type for e in made}
            assert types == {
                "message",
                "model_change",
                "thinking_level_change",
                "active_tools_change",
                "compaction",
                "branch_summary",
                "custom",
                "custom_message",
                "label",
                "session_info",
                "leaf",
            }
            roles = [e.message.role for e in made if isinstance(e, MessageEntry)]
            assert set(roles) == {"user", "assistant", "toolResult", "bashExecution", "custom"}
            for entry in made:
                assert s.get_entry(entry.id) == entry
            again = await t.reopen(s)
            assert again.entry_ids() == [e.id for e in made]
            for entry in made:
                assert again.get_entry(entry.id) == entry, entry.type
            assert list(again.entries()) == made
            assert again.leaf_id == made[2].id
            assert again.labels == {first.id: "start"} and again.name == "My session"

    async def test_build_context_after_reopen_equals_before(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("context"))
            s.append_model_change("anthropic", "claude")
            s.append_thinking_level_change("low")
            s.append_active_tools_change(["read"])
            u1 = s.append_message(user("read a.txt"))
            s.append_message(tool_call_reply("c1", {"path": "a.txt"}))
            s.append_message(
                ToolResultMessage(
                    tool_call_id="c1", tool_name="read", content=[TextContent(text="body")]
                )
            )
            kept = s.append_message(assistant("it says body"))
            compaction = s.append_compaction("the user read a.txt", kept.id, 500)
            abandoned = s.append_message(user("try something"))
            s.move_to(compaction.id)
            s.append_branch_summary(abandoned.id, "we tried something")
            s.append_custom_message("hint", "an extension says hi")
            s.append_message(AssistantMessage(content=[ToolCall(id="c2", name="read")]))
            s.append_message(user("and now?"))
            before = s.build_context()
            assert before.model == ModelRef(provider="test", model_id="m")  # the last reply's
            assert before.thinking_level == "low" and before.active_tool_names == ("read",)
            assert len(before.messages) > 4
            roles = [m.role for m in before.messages]
            assert roles[0] == "compactionSummary" and "branchSummary" in roles
            again = await t.reopen(s)
            assert again.build_context() == before
            again.move_to(u1.id)
            moved = again.build_context()
            third = await t.reopen(again)
            assert third.build_context() == moved != before

    async def test_branches_children_and_tree(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("tree"))
            u1 = s.append_message(user("u1"))
            a1 = s.append_message(assistant("a1"))
            u2 = s.append_message(user("u2"))
            s.move_to(a1.id)
            u3 = s.append_message(user("u3"))
            s.move_to(None)
            r2 = s.append_message(user("r2"))
            for session in (s, await t.reopen(s)):
                assert [e.id for e in session.get_branch(u2.id)] == [u1.id, a1.id, u2.id]
                assert [e.id for e in session.get_branch(u3.id)] == [u1.id, a1.id, u3.id]
                assert [e.id for e in session.get_branch()] == [r2.id]
                assert [e.id for e in session.get_children(a1.id)] == [u2.id, u3.id]
                assert [e.id for e in session.get_children(None)] == [u1.id, r2.id]
                assert session.get_children(r2.id) == []

                def shape(nodes: Any) -> list[Any]:
                    return [(n.entry.id, shape(n.children)) for n in nodes]

                assert shape(session.get_tree()) == [
                    (u1.id, [(a1.id, [(u2.id, []), (u3.id, [])])]),
                    (r2.id, []),
                ]

    async def test_a_closed_session_refuses_appends(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("closed"))
            s.append_message(user("u"))
            s.close()
            assert s.closed
            with pytest.raises(SessionClosedError) as info:
                s.append_message(user("late"))
            assert info.value.code == "session_closed"
            assert len(await t.open(s.id)) == 1

    # --- values are not shared -----------------------------------------------------------------

    async def test_values_returned_by_reads_are_not_shared(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("reads"))
            custom = s.append_custom("state", {"n": 1, "list": [1, {"deep": True}]})
            call = s.append_message(tool_call_reply("c1", {"path": "a", "opts": {"x": [1]}}))
            compaction = s.append_compaction("s", custom.id, 1, details={"readFiles": ["a"]})
            want_data = {"n": 1, "list": [1, {"deep": True}]}
            want_args = {"path": "a", "opts": {"x": [1]}}

            def reads() -> list[Entry]:
                got: list[Entry] = [custom, call, compaction]
                got += [s.get_entry(custom.id), s.get_entry(call.id)]
                got += s.get_branch() + list(s.entries())
                got += [n.entry for n in tree_nodes(s.get_tree())]
                got += s.get_children(None)
                return got

            for entry in reads():
                if isinstance(entry, CustomEntry):
                    data: Any = entry.data
                    mutate(data)
                    mutate(data["list"])
                    mutate(data["list"][1])
                elif isinstance(entry, MessageEntry):
                    assert isinstance(entry.message, AssistantMessage)
                    block = entry.message.content[1]
                    assert isinstance(block, ToolCall)
                    arguments: Any = block.arguments
                    mutate(arguments)
                    mutate(arguments["opts"])
                    mutate(arguments["opts"]["x"])
                elif isinstance(entry, CompactionEntry):
                    details: Any = entry.details
                    mutate(details)
                    mutate(details["readFiles"])
            for session in (s, await t.open(s.id)):
                data_now = session.get_entry(custom.id)
                assert isinstance(data_now, CustomEntry) and data_now.data == want_data
                message = session.get_entry(call.id)
                assert isinstance(message, MessageEntry)
                assert isinstance(message.message, AssistantMessage)
                block = message.message.content[1]
                assert isinstance(block, ToolCall) and block.arguments == want_args
                comp = session.get_entry(compaction.id)
                assert isinstance(comp, CompactionEntry)
                assert comp.details == {"readFiles": ["a"]}
            labels = s.labels
            labels["x"] = "y"
            assert s.labels == {}

    async def test_values_passed_to_appends_are_not_shared(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("appends"))
            d: dict[str, Any] = {"n": 1, "list": [1]}
            e = s.append_custom("note", d)
            d["n"] = 2
            d["list"].append(2)
            details: dict[str, Any] = {"k": [1]}
            m = s.append_custom_message("note", "text", details=details)
            details["k"].append(2)
            names = ["read"]
            tools = s.append_active_tools_change(names)
            names.append("bash")
            arguments: dict[str, Any] = {"path": "a"}
            call = s.append_message(tool_call_reply("c1", arguments))
            arguments["path"] = "changed"
            summary_details: dict[str, Any] = {"modifiedFiles": ["x"]}
            summary = s.append_branch_summary(e.id, "s", details=summary_details)
            summary_details["modifiedFiles"].append("y")
            for session in (s, await t.open(s.id)):
                got = session.get_entry(e.id)
                assert isinstance(got, CustomEntry) and got.data == {"n": 1, "list": [1]}
                got_m = session.get_entry(m.id)
                assert isinstance(got_m, CustomMessageEntry) and got_m.details == {"k": [1]}
                got_t = session.get_entry(tools.id)
                assert isinstance(got_t, ActiveToolsChangeEntry)
                assert list(got_t.active_tool_names) == ["read"]
                got_c = session.get_entry(call.id)
                assert isinstance(got_c, MessageEntry)
                assert isinstance(got_c.message, AssistantMessage)
                block = got_c.message.content[1]
                assert isinstance(block, ToolCall) and block.arguments == {"path": "a"}
                got_s = session.get_entry(summary.id)
                assert isinstance(got_s, BranchSummaryEntry)
                assert got_s.details == {"modifiedFiles": ["x"]}
            # The entries the appends returned are the session's, not the caller's objects.
            assert isinstance(e, CustomEntry) and e.data == {"n": 1, "list": [1]}
            assert isinstance(call.message, AssistantMessage)
            returned = call.message.content[1]
            assert isinstance(returned, ToolCall) and returned.arguments == {"path": "a"}

    # --- refused values ------------------------------------------------------------------------

    @pytest.mark.parametrize("kind", list(NON_JSON_VALUES))
    async def test_non_json_payloads_are_refused_with_nothing_stored(
        self, session_repo: SessionRepo, kind: str
    ) -> None:
        make = NON_JSON_VALUES[kind]
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("non-json"))
            first = s.append_message(user("u"))
            before, before_bytes = snapshot(s), file_bytes(s)
            appends: list[Callable[[], object]] = [
                lambda: s.append_custom("bad", make()),
                lambda: s.append_custom("bad", {"inside": make()}),
                lambda: s.append_custom_message("bad", "text", details=make()),
                lambda: s.append_compaction("s", first.id, 1, details=make()),
                lambda: s.append_branch_summary(first.id, "s", details=make()),
                lambda: s.append_message(
                    ToolResultMessage(tool_call_id="c", tool_name="t", details=make())
                ),
                lambda: s.append_message(tool_call_reply("c", {"arg": make()})),
            ]
            for append in appends:
                with pytest.raises(InvalidEntryError) as info:
                    append()
                assert info.value.code == "invalid_entry"
                assert snapshot(s) == before, "a refused append changed the session"
                assert file_bytes(s) == before_bytes, "a refused append wrote to the file"
            again = await t.open(s.id)
            assert snapshot(again) == before
            # The session still works.
            ok = s.append_custom("fine", {"n": 1})
            assert ok.parent_id == first.id and len(s) == 2

    async def test_values_nested_to_the_cap_round_trip(self, session_repo: SessionRepo) -> None:
        # Each value sits where the line nests it deepest the cap allows (MAX_NESTING levels,
        # the line's own object being the first): stored, read back equal, and usable.
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("nesting"), metadata={"deep": nested(MAX_NESTING - 2)})
            first = s.append_message(user("u"))
            made: list[Entry] = [
                first,
                s.append_custom("deep", nested(MAX_NESTING - 1)),
                s.append_custom_message("deep", "text", details=nested(MAX_NESTING - 1)),
                s.append_compaction("s", first.id, 1, details=nested(MAX_NESTING - 1)),
                s.append_branch_summary(first.id, "s", details=nested(MAX_NESTING - 1)),
                s.append_message(tool_call_reply("c", {"a": nested(MAX_NESTING - 5)})),
                s.append_message(
                    ToolResultMessage(
                        tool_call_id="c", tool_name="read", details=nested(MAX_NESTING - 2)
                    )
                ),
            ]
            context = s.build_context()
            again = await t.reopen(s)
            assert again.header.metadata == {"deep": nested(MAX_NESTING - 2)}
            assert list(again.entries()) == made
            assert again.diagnostics == ()
            assert again.build_context() == context

    # --- several Session objects on one session ------------------------------------------------

    async def test_two_sessions_on_one_session_catch_up(self, session_repo: SessionRepo) -> None:
        async with Tracked(session_repo) as t:
            created = await t.create(cwd_for("two"))
            root = created.append_message(user("root"))
            a, b = await t.open(created.id), await t.open(created.id)
            e1 = a.append_message(assistant("from a"))
            assert e1.id not in b
            assert b.refresh() == 1
            assert e1.id in b and b.get_entry(e1.id) == e1
            assert b.leaf_id == e1.id  # refresh moves to where a fresh open would
            assert b.refresh() == 0
            e2 = a.append_message(user("a again"))
            e3 = b.append_custom("from-b", {"n": 3})  # catches up, keeps its own leaf
            assert e2.id in b and b.get_entry(e2.id) == e2
            assert e3.parent_id == e1.id
            e4 = a.append_message(assistant("a third"))
            assert e3.id in a and a.get_entry(e3.id) == e3
            assert e4.parent_id == e2.id
            assert {e.id for e in a.get_children(e1.id)} == {e2.id, e3.id}
            want = {root.id, e1.id, e2.id, e3.id, e4.id}
            fresh = await t.open(created.id)
            assert set(fresh.entry_ids()) == want
            assert created.refresh() == 4 and set(created.entry_ids()) == want
            for session in (a, b, created, fresh):
                _assert_self_contained(session)

    async def test_ids_never_collide_between_two_sessions_on_one_session(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            created = await t.create(cwd_for("collide"))
            a, b = await t.open(created.id), await t.open(created.id)
            ids: list[str] = []
            for i in range(150):
                ids.append(a.append_custom("a", i).id)
                ids.append(b.append_custom("b", i).id)
            assert len(set(ids)) == len(ids)
            fresh = await t.open(created.id)
            assert sorted(fresh.entry_ids()) == sorted(ids)
            for i, entry_id in enumerate(ids):
                entry = fresh.get_entry(entry_id)
                assert isinstance(entry, CustomEntry)
                assert (entry.custom_type, entry.data) == ("ab"[i % 2], i // 2)
            _assert_self_contained(fresh)

    async def test_a_session_deleted_while_open_refuses_appends(
        self, session_repo: SessionRepo
    ) -> None:
        cwd = cwd_for("gone")
        async with Tracked(session_repo) as t:
            s = await t.create(cwd)
            s.append_message(user("u"))
            other = await t.open(s.id)
            path = s.path
            await session_repo.delete(s.id)
            for session in (s, other):
                with pytest.raises(SessionGoneError) as info:
                    session.append_message(user("into the void"))
                assert info.value.code == "session_gone"
            with pytest.raises(SessionNotFoundError):
                await t.open(s.id)
            assert [i.id for i in await session_repo.list(cwd)] == []
            if path is not None:
                assert not path.exists(), "an append recreated the deleted file"

    async def test_refresh_of_a_deleted_session_raises_gone(
        self, session_repo: SessionRepo
    ) -> None:
        async with Tracked(session_repo) as t:
            s = await t.create(cwd_for("gone-refresh"))
            s.append_message(user("u"))
            await session_repo.delete(s.id)
            with pytest.raises(SessionGoneError):
                s.refresh()

    # --- paths ---------------------------------------------------------------------------------

    async def test_paths(self, session_repo: SessionRepo) -> None:
        """With ``supports_paths``: a session's file exists and is a ref for open, fork and
        delete. Without: ``path`` is None on sessions and in ``list``."""
        cwd = cwd_for("paths")
        async with Tracked(session_repo) as t:
            s = await t.create(cwd)
            entry = s.append_message(user("u"))
            [info] = await session_repo.list(cwd)
            if not self.supports_paths:
                assert s.path is None and info.path is None
                return
            path = s.path
            assert isinstance(path, Path) and path.is_file()
            assert info.path == path
            by_path = await t.open(path)
            assert by_path.id == s.id and by_path.entry_ids() == [entry.id]
            fork = await t.fork(path)
            assert fork.path is not None and fork.path != path and fork.path.is_file()
            _assert_links_to(fork, s)
            await session_repo.delete(path)
            assert not path.exists()
            await session_repo.delete(path)  # idempotent by path too
            with pytest.raises(SessionNotFoundError):
                await t.open(s.id)
