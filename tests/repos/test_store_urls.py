"""One string names a store (``repos.parse_store_url`` / ``open_store``): every scheme, the typos
that must never become folders, and the line view every kind of store has."""

from __future__ import annotations

from pathlib import Path

import pytest

from hooks import UserMessage
from repos import (
    InvalidStoreUrlError,
    JsonlSessionRepo,
    MemorySessionRepo,
    SqliteSessionRepo,
    StoreUrl,
    copy_sessions,
    line_store,
    open_store,
    parse_store_url,
    session_from_lines,
)


@pytest.mark.parametrize(
    ("spec", "scheme", "location"),
    [
        ("jsonl:/tmp/s", "jsonl", "/tmp/s"),
        ("/tmp/s", "jsonl", "/tmp/s"),
        ("sessions", "jsonl", "sessions"),
        ("./a:b", "jsonl", "./a:b"),
        ("sqlite:/tmp/s.db", "sqlite", "/tmp/s.db"),
        ("sqlite:rel/s.db", "sqlite", "rel/s.db"),
        ("postgresql://u@127.0.0.1:5432/db", "postgresql", "postgresql://u@127.0.0.1:5432/db"),
        ("postgres://h/db", "postgresql", "postgres://h/db"),
        ("memory:", "memory", ""),
    ],
)
def test_each_scheme_parses(spec: str, scheme: str, location: str) -> None:
    assert parse_store_url(spec) == StoreUrl(scheme, location)  # type: ignore[arg-type]


def test_a_password_is_never_in_the_message() -> None:
    for spec in ("postgresql:/u:s3cret@h/db", "postgresq://u:s3cret@h/db"):
        with pytest.raises(InvalidStoreUrlError) as caught:
            parse_store_url(spec)
        assert "s3cret" not in str(caught.value) and "u:***@h" in str(caught.value)


def test_a_path_object_is_always_a_folder() -> None:
    assert parse_store_url(Path("sqlite:x")) == StoreUrl("jsonl", "sqlite:x")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("sqlit:/tmp/s.db", "did you mean sqlite:"),
        ("http://example.com/s", "unknown scheme 'http'"),
        ("postgresql:/x", "starts postgresql://"),
        ("sqlite:", "needs a path"),
        ("memory:x", "nothing after the colon"),
        ("sqlite/tmp/s.db", "looks like a sqlite store URL with a typo"),
        ("postgresq//u@h/db", "looks like a postgresql store URL with a typo"),
        ("", "it is empty"),
    ],
)
def test_unknown_schemes_and_typos_are_refused(spec: str, says: str) -> None:
    with pytest.raises(InvalidStoreUrlError, match=says) as caught:
        parse_store_url(spec)
    assert caught.value.code == "invalid_store_url"


def test_an_existing_folder_is_a_folder_whatever_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sqlite").mkdir()
    (tmp_path / "x:y").mkdir()
    assert parse_store_url("sqlite/inner") == StoreUrl("jsonl", "sqlite/inner")
    assert parse_store_url("x:y") == StoreUrl("jsonl", "x:y")


async def test_open_store_gives_each_kind_and_never_a_folder_named_like_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_store(f"jsonl:{tmp_path / 'j'}"), JsonlSessionRepo)
    db = open_store("sqlite:s.db")
    assert isinstance(db, SqliteSessionRepo) and (tmp_path / "s.db").is_file()
    db.close()  # type: ignore[attr-defined]
    assert isinstance(open_store("memory:"), MemorySessionRepo)
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []  # no "sqlite:" folder


def test_the_env_variable_never_makes_a_folder_of_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_SESSIONS_DIR", f"sqlite:{tmp_path / 's.db'}")
    with pytest.raises(InvalidStoreUrlError, match="names a sqlite store"):
        JsonlSessionRepo()
    monkeypatch.setenv("HARNESS_SESSIONS_DIR", f"jsonl:{tmp_path / 'j'}")
    assert JsonlSessionRepo().root == tmp_path / "j"
    assert list(tmp_path.iterdir()) == []


async def test_every_store_has_a_line_view_and_copies_between_them(tmp_path: Path) -> None:
    files = JsonlSessionRepo(tmp_path / "j")
    session = await files.create("/p")
    session.append_message(UserMessage(content="hi"))
    session.close()
    memory = MemorySessionRepo()
    report = await copy_sessions(line_store(files), line_store(memory))
    assert report.copied == [session.id]
    again = await copy_sessions(line_store(files), line_store(memory))
    assert again.unchanged == [session.id]
    copied = await memory.open(session.id)
    assert copied.build_context().messages[0].text == "hi"  # type: ignore[union-attr]
    copied.close()


async def test_a_file_named_otherwise_is_reached_by_its_id(tmp_path: Path) -> None:
    files = JsonlSessionRepo(tmp_path / "j")
    session = await files.create("/p")
    path = session.path
    session.close()
    assert path is not None
    odd = path.with_name("renamed.jsonl")
    path.rename(odd)
    lines = await line_store(files).export_lines(session.id)
    assert b"".join(lines) == odd.read_bytes()


def test_session_from_lines_is_held_in_memory(tmp_path: Path) -> None:
    header = (
        b'{"type":"session","version":3,"id":"abc1","timestamp":"2025-01-01T00:00:00Z",'
        b'"cwd":"/p"}\n'
    )
    entry = (
        b'{"type":"message","id":"e1","parentId":null,"timestamp":"2025-01-01T00:00:01Z",'
        b'"message":{"role":"user","content":"hi","timestamp":1}}\n'
    )
    with session_from_lines([header, entry]) as session:
        assert session.path is None and session.id == "abc1"
        assert [e.id for e in session.get_branch()] == ["e1"]
    assert list(tmp_path.iterdir()) == []
