"""Store URLs on every command (``--root``, ``$HARNESS_SESSIONS_DIR``, the user settings'
``store``): ``run``, ``chat``, ``sessions list/show/tree/fork/delete``, ``export`` and
``import`` on ``sqlite:`` and ``postgresql://`` stores, run for real in subprocesses; typos
that must never become folders; a PostgreSQL server that cannot be reached fails at once with
its own message; ``copy --id`` takes prefixes."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_in_process import needs_process, run_cli

from repos import SqliteSessionRepo

REPO_ROOT = Path(__file__).resolve().parents[2]

TRANSCRIPT = (
    '{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"cc-1","cwd":"/tmp",'
    '"timestamp":"2025-07-01T10:00:00Z","message":{"role":"user","content":"Hi"}}\n'
    '{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"cc-1","cwd":"/tmp",'
    '"timestamp":"2025-07-01T10:00:01Z","message":{"id":"m1","role":"assistant",'
    '"model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello!"}],'
    '"stop_reason":"end_turn"}}\n'
)


def harness(
    *args: str | Path,
    cwd: Path,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    base.update(
        PYTHONPATH=str(REPO_ROOT),
        PYTHONIOENCODING="utf-8",
        HARNESS_SESSIONS_DIR=str(cwd.parent / "default-root"),
        XDG_CONFIG_HOME=str(cwd.parent / "config"),
    )
    if not needs_process(args):  # the same entry point, in-process (``cli_in_process``)
        return run_cli(args, env={**base, **(env or {})}, cwd=cwd, input=input)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        timeout=120,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def as_json(*args: str | Path, cwd: Path, input: str | None = None) -> Any:
    return json.loads(ok(harness(*args, cwd=cwd, input=input)).stdout)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def _every_command(store: str, work: Path) -> set[str]:
    """run, chat, list, show, tree, fork, export, import and delete on one store; the ids of
    the two sessions left (the run's, the import's)."""
    first = json.loads(
        ok(
            harness("-p", "hello", "--offline", "--root", store, "--output", "json", cwd=work)
        ).stdout
    )
    sid = first["session_id"]
    chat = ok(harness("chat", "--offline", "--root", store, "-c", cwd=work, input="again\n/exit\n"))
    assert "(offline) You said: again" in chat.stdout
    listed = json.loads(ok(harness("sessions", "list", "--root", store, "--json", cwd=work)).stdout)
    assert [(r["id"], r["message_count"]) for r in listed] == [(sid, 4)]
    shown = ok(harness("sessions", "show", "--root", store, sid[:8], cwd=work)).stdout
    assert "(offline) You said: again" in shown
    tree = ok(harness("sessions", "tree", "--root", store, sid[:8], cwd=work)).stdout
    assert tree.startswith(f"session {sid[:8]}  (in the store)")
    fork = json.loads(
        ok(harness("sessions", "fork", "--root", store, sid, "--json", cwd=work)).stdout
    )
    assert fork["parent_session"] == sid and fork["path"] is None
    page = ok(harness("export", "--root", store, sid, "--format", "md", cwd=work)).stdout
    assert "You said: hello" in page
    transcript = work / "claude.jsonl"
    transcript.write_text(TRANSCRIPT)
    imported = ok(harness("import", "claude-code", transcript, "--root", store, cwd=work)).stdout
    assert "1 imported, 0 extended, 0 already imported" in imported
    again = ok(harness("import", "claude-code", transcript, "--root", store, cwd=work)).stdout
    assert "0 imported, 0 extended, 1 already imported" in again
    ok(harness("sessions", "delete", "--root", store, fork["id"], cwd=work))
    after = json.loads(ok(harness("sessions", "list", "--root", store, "--json", cwd=work)).stdout)
    assert len(after) == 2 and fork["id"] not in {r["id"] for r in after}
    assert sorted(p.name for p in work.iterdir()) == ["claude.jsonl"]  # no folder for the URL
    return {r["id"] for r in after}


def test_every_command_on_a_sqlite_store(work: Path, tmp_path: Path) -> None:
    left = _every_command(f"sqlite:{tmp_path / 'db' / 's.db'}", work)
    repo = SqliteSessionRepo(tmp_path / "db" / "s.db")  # the same database, read directly
    try:
        assert {info.id for info in asyncio.run(repo.list())} == left
    finally:
        repo.close()


@pytest.mark.postgres
def test_every_command_on_a_postgresql_store(work: Path, postgres_url: str) -> None:
    from repos.postgres import PostgresSessionRepo

    left = _every_command(postgres_url, work)
    repo = PostgresSessionRepo(postgres_url)  # the same database, read directly
    try:
        assert len(left) == 2 and {info.id for info in asyncio.run(repo.list())} == left
    finally:
        repo.close()


def test_a_relative_sqlite_root_never_makes_a_folder_named_sqlite(work: Path) -> None:
    ok(harness("run", "--root", "sqlite:s.db", "--offline", "-p", "hi", cwd=work))
    assert sorted(p.name for p in work.iterdir() if p.is_dir()) == []
    assert (work / "s.db").is_file()


@pytest.mark.parametrize(
    ("root", "says"),
    [
        ("sqlit:/tmp/x.db", "unknown scheme 'sqlit' (did you mean sqlite:?)"),
        ("sqlite/x.db", "looks like a sqlite store URL with a typo"),
        ("postgresql:/x", "a PostgreSQL URL starts postgresql://"),
    ],
)
def test_a_typo_is_a_usage_error_and_writes_nothing(work: Path, root: str, says: str) -> None:
    proc = harness("run", "--root", root, "--offline", "-p", "hi", cwd=work)
    assert proc.returncode == 2 and says in proc.stderr
    assert list(work.iterdir()) == []


def test_the_env_variable_and_the_user_setting_name_stores(work: Path, tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    env = {"HARNESS_SESSIONS_DIR": f"sqlite:{db}"}
    ok(harness("-p", "hi", "--offline", cwd=work, env=env))
    listed = json.loads(ok(harness("sessions", "list", "--json", cwd=work, env=env)).stdout)
    assert len(listed) == 1 and listed[0]["path"] is None
    config = tmp_path / "config" / "harness"
    config.mkdir(parents=True)
    (config / "settings.json").write_text(json.dumps({"store": f"sqlite:{tmp_path / 'set.db'}"}))
    no_env = {"HARNESS_SESSIONS_DIR": ""}
    ok(harness("-p", "hi", "--offline", cwd=work, env=no_env))
    assert (tmp_path / "set.db").is_file()
    # A project's settings never choose where sessions go (docs/security.md).
    (work / ".harness").mkdir()
    (work / ".harness" / "settings.json").write_text(json.dumps({"store": "sqlite:project.db"}))
    ok(harness("-p", "hi", "--offline", "--trust-project", cwd=work, env=no_env))
    assert not (work / "project.db").exists()
    sessions = json.loads(ok(harness("sessions", "list", "--json", cwd=work, env=no_env)).stdout)
    assert len(sessions) == 2


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


def _fails_fast(work: Path, url: str) -> str:
    started = time.monotonic()
    proc = harness("sessions", "list", "--root", url, cwd=work)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1
    assert elapsed < 60  # a bound against a hang; the 5 s claim is the connect timeout's
    assert "WARNING" not in proc.stderr and "pool" not in proc.stderr.lower()
    assert len(proc.stderr.strip().splitlines()) == 1
    return proc.stderr


@pytest.mark.postgres
def test_a_bad_postgresql_url_fails_with_the_servers_message(work: Path, postgres_url: str) -> None:
    refused = _fails_fast(work, f"postgresql://test@127.0.0.1:{_refused_port()}/x")
    assert refused.startswith("error[storage_error]: postgresql://127.0.0.1:")
    assert "Connection refused" in refused
    missing = postgres_url.rsplit("/", 1)[0] + "/no_such_database"
    assert 'database "no_such_database" does not exist' in _fails_fast(work, missing)


@pytest.mark.postgres
def test_opening_a_bad_postgresql_url_fails_within_the_connect_timeout(postgres_url: str) -> None:
    # Issue 22 asks for "under 5 s"; in-process (no interpreter start) the failure is one
    # connect attempt, measured here at about 0.1 s: the bound has a margin of some 40x.
    from repos import StorageError, open_store

    for url in (
        f"postgresql://test@127.0.0.1:{_refused_port()}/x",
        postgres_url.rsplit("/", 1)[0] + "/no_such_database",
    ):
        started = time.monotonic()
        with pytest.raises(StorageError):
            open_store(url)
        assert time.monotonic() - started < 5, url


def test_copy_takes_id_prefixes_and_fails_on_no_match(work: Path, tmp_path: Path) -> None:
    source = tmp_path / "src"
    ids = []
    for text in ("one", "two"):
        out = harness("-p", text, "--offline", "--root", source, "--output", "json", cwd=work)
        ids.append(json.loads(ok(out).stdout)["session_id"])
    target = f"sqlite:{tmp_path / 'copy.db'}"
    copied = ok(
        harness("sessions", "copy", "--from", source, "--to", target, "--id", ids[0][:8], cwd=work)
    )
    assert "1 copied" in copied.stdout
    listed = json.loads(
        ok(harness("sessions", "list", "--root", target, "--json", cwd=work)).stdout
    )
    assert [r["id"] for r in listed] == [ids[0]]
    missing = harness(
        "sessions", "copy", "--from", source, "--to", target, "--id", "zzzz", cwd=work
    )
    assert missing.returncode == 1 and "zzzz" in missing.stderr
