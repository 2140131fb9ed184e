"""``SqliteSessionRepo`` beyond the conformance suite: list filters and pagination served from
the sessions table, server-side forks, lines stored verbatim, and moving sessions between
stores (``repos.copy_sessions``) byte for byte, idempotently and resumably."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import orjson

from hooks import AssistantMessage, TextContent, UserMessage
from repos import (
    JsonlSessionRepo,
    SqliteSessionRepo,
    copy_sessions,
    open_line_store,
    open_session,
)


def _user(text: str, ts: int | None = None) -> UserMessage:
    return UserMessage(content=text) if ts is None else UserMessage(content=text, timestamp=ts)


def _assistant(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=text)], api="t", provider="t", model="m")


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


async def _jsonl_sessions(root: Path) -> None:
    """A few sessions with branches, labels, names, a fork and an empty one."""
    repo = JsonlSessionRepo(root)
    s = await repo.create("/proj/a", session_id="alpha", metadata={"k": [1, "é"]})
    u = s.append_message(_user("hello ✓"))
    a = s.append_message(_assistant("hi"))
    s.set_label(u.id, "start")
    s.move_to(u.id)
    s.append_message(_user("other way"))
    s.set_name("Alpha")
    s.move_to(a.id)
    fork = await repo.fork("alpha", entry_id=a.id, position="at", session_id="alpha-fork")
    fork.close()
    s.close()
    (await repo.create("/proj/b", session_id="empty")).close()


async def test_list_filters_and_pages_from_the_table(tmp_path: Path) -> None:
    repo = SqliteSessionRepo(tmp_path / "s.db")
    for n in range(5):
        s = await repo.create("/p" if n % 2 else "/q", session_id=f"s{n}")
        s.append_message(_user(f"first {n}", ts=1_000_000_000_000 + n * 1000))
        if n == 3:
            s.set_name("The Third")
        s.close()
    assert [i.id for i in await repo.list()] == ["s4", "s3", "s2", "s1", "s0"]
    assert [i.id for i in await repo.list("/p")] == ["s3", "s1"]
    assert [i.id for i in await repo.list(limit=2, offset=1)] == ["s3", "s2"]
    assert [i.id for i in await repo.list(name="third")] == ["s3"]
    since = datetime.fromtimestamp(1_000_000_002, UTC)
    assert [i.id for i in await repo.list(updated_since=since)] == ["s4", "s3", "s2"]
    [info] = await repo.list(name="third")
    assert (info.message_count, info.first_message, info.name) == (1, "first 3", "The Third")
    repo.close()


async def test_lines_are_stored_verbatim_and_forks_copied_in_the_database(tmp_path: Path) -> None:
    repo = SqliteSessionRepo(tmp_path / "s.db")
    s = await repo.create("/p", session_id="src")
    for i in range(20):
        s.append_message(_user(f"m{i}"))
    fork = await repo.fork("src", scope="tree", session_id="copy")
    assert fork.entry_ids() == s.entry_ids()
    assert [fork.raw_line(i) for i in fork.entry_ids()] == [s.raw_line(i) for i in s.entry_ids()]
    conn = sqlite3.connect(tmp_path / "s.db")
    rows = conn.execute("SELECT seq, id, line FROM entries WHERE session_id = 'src'").fetchall()
    conn.close()
    for seq, entry_id, line in rows:
        assert orjson.loads(line)["id"] == entry_id and s.raw_line(entry_id) == line + b"\n"
        assert seq >= 2
    [info] = await repo.list("/p", name=None, limit=1)
    assert info.id in {"src", "copy"} and info.message_count == 20
    s.close()
    fork.close()
    repo.close()


async def test_jsonl_to_sqlite_and_back_is_byte_identical(tmp_path: Path) -> None:
    src_root, back_root = tmp_path / "jsonl", tmp_path / "back"
    await _jsonl_sessions(src_root)
    # A line pi's reader would skip, and a blank line: still copied verbatim.
    alpha = next(src_root.rglob("*_alpha.jsonl"))
    with alpha.open("ab") as f:
        f.write(b"not json\n\n")
    db = open_line_store(f"sqlite:{tmp_path / 's.db'}")
    first = await copy_sessions(open_line_store(f"jsonl:{src_root}"), db)
    assert sorted(first.copied) == ["alpha", "alpha-fork", "empty"] and not first.conflicts
    back = await copy_sessions(db, open_line_store(f"jsonl:{back_root}"))
    assert sorted(back.copied) == ["alpha", "alpha-fork", "empty"]
    assert _files(back_root) == _files(src_root)
    # The copies open to the same tree, in the database too.
    sqlite_repo = SqliteSessionRepo(tmp_path / "s.db")
    from_db = await sqlite_repo.open("alpha")
    from_file = open_session(alpha)
    assert from_db.entry_ids() == from_file.entry_ids()
    assert from_db.leaf_id == from_file.leaf_id and from_db.labels == from_file.labels
    assert [d.code for d in from_db.diagnostics] == [d.code for d in from_file.diagnostics]
    infos = {i.id: i for i in await sqlite_repo.list()}
    assert infos["alpha"].name == "Alpha" and infos["alpha"].first_message == "hello ✓"
    from_db.close()
    from_file.close()
    sqlite_repo.close()


async def test_copy_is_idempotent_and_resumable(tmp_path: Path) -> None:
    src_root = tmp_path / "jsonl"
    await _jsonl_sessions(src_root)
    src = open_line_store(f"jsonl:{src_root}")
    dst = open_line_store(f"sqlite:{tmp_path / 's.db'}")
    await copy_sessions(src, dst)
    again = await copy_sessions(src, dst)
    assert again.lines == 0 and sorted(again.unchanged) == ["alpha", "alpha-fork", "empty"]
    # The source grew: the next copy adds only the new lines.
    s = await JsonlSessionRepo(src_root).open("alpha")
    s.append_message(_user("later"))
    s.close()
    resumed = await copy_sessions(src, dst)
    assert resumed.resumed == ["alpha"] and resumed.lines == 1
    # The destination diverged: reported, left alone.
    repo = SqliteSessionRepo(tmp_path / "s.db")
    d = await repo.open("empty")
    d.append_message(_user("only in the database"))
    d.close()
    s2 = await JsonlSessionRepo(src_root).open("empty")
    s2.append_message(_user("only in the file"))
    s2.close()
    conflict = await copy_sessions(src, dst)
    assert conflict.conflicts == ["empty"]
    back_root = tmp_path / "back"
    await copy_sessions(dst, open_line_store(f"jsonl:{back_root}"), ids=["alpha"])
    assert _files(back_root) == {
        k: v for k, v in _files(src_root).items() if k.endswith("_alpha.jsonl")
    }
    # ...and back into the files: resumable in that direction too.
    d = await repo.open("alpha")
    d.append_message(_user("from the database"))
    d.close()
    into_files = await copy_sessions(dst, open_line_store(f"jsonl:{back_root}"), ids=["alpha"])
    assert into_files.resumed == ["alpha"] and into_files.lines == 1
    reopened = open_session(next(back_root.rglob("*_alpha.jsonl")))
    assert reopened.get_branch()[-1].message.content == "from the database"  # type: ignore[attr-defined]
    reopened.close()
    repo.close()


async def test_resume_reads_each_line_once(tmp_path: Path) -> None:
    """The open reads the header and every line in one statement; the first context is built
    from those lines without reading them again; after it, reads go to the database."""
    repo = SqliteSessionRepo(tmp_path / "s.db")
    s = await repo.create("/p", session_id="r")
    for n in range(40):
        s.append_message(_user(f"question {n}"))
        s.append_message(_assistant(f"answer {n}"))
    expected = s.build_context().messages
    s.close()
    resumed = await repo.open("r")
    statements: list[str] = []
    resumed._store._conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]
    assert resumed.build_context().messages == expected
    assert [q for q in statements if "entries" in q] == []
    resumed._tree.cache.clear()  # decoded again: now from the database
    assert tuple(e.message for e in resumed.get_branch()) == expected  # type: ignore[attr-defined]
    assert [q for q in statements if "entries" in q] != []
    resumed.close()
    repo.close()
