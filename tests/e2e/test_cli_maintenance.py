"""``harness sessions verify | repair | migrate`` run for real in a subprocess.

Files are written by hand under ``tmp_path``; assertions are on exit codes, error codes, the
files' bytes and what ``repos.open_session`` reads back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_in_process import needs_process, run_cli

from repos import open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
TS = "2025-01-01T00:00:00.000Z"

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    env = {
        **os.environ,
        "HARNESS_SESSIONS_DIR": str(tmp_path / "default-root"),
        "PYTHONIOENCODING": "utf-8",
    }

    def run(*args: str | Path, process: bool = False) -> subprocess.CompletedProcess[str]:
        """In-process (``cli_in_process``) unless ``process`` or the command needs one."""
        if not process and not needs_process(args):
            return run_cli(args, env=env, cwd=REPO_ROOT)
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *map(str, args)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env,
            cwd=REPO_ROOT,
            timeout=120,
            check=False,
        )

    return run


def entry(entry_id: str, parent: str | None, text: str = "hi") -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "message": {"role": "user", "content": text, "timestamp": 1735689600000},
    }


def dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


HEADER = dumps({"type": "session", "version": 3, "id": "abc", "timestamp": TS, "cwd": "/x"})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def clean(root: Path) -> Path:
    path = root / "--x--" / "2025-01-01T00-00-00-000Z_abc.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(x + b"\n" for x in [HEADER, dumps(entry("a1", None))]))
    return path


@pytest.fixture
def damaged(clean: Path) -> Path:
    with clean.open("ab") as f:
        f.write(b"not json\n")
        f.write(dumps(entry("a2", "gone0000")) + b"\n")
        f.write(dumps(entry("a2", "a1", "duplicate")) + b"\n")
        f.write(b'{"type":"message","id":"to')
    return clean


def test_verify_clean_by_id_and_path(cli: Cli, root: Path, clean: Path) -> None:
    by_id = cli("sessions", "verify", "abc", "--root", root)
    assert by_id.returncode == 0, by_id.stderr
    assert by_id.stdout.strip() == f"ok: {clean}: 1 entries, no problems"
    by_path = cli("sessions", "verify", clean)
    assert by_path.returncode == 0 and by_path.stdout.startswith("ok: ")


def test_verify_reports_problems_and_exits_1(cli: Cli, damaged: Path) -> None:
    before, mtime = damaged.read_bytes(), damaged.stat().st_mtime_ns
    proc = cli("sessions", "verify", damaged)
    assert proc.returncode == 1, proc.stderr
    assert f"{damaged}:3: problem: corrupt_line:" in proc.stdout
    assert f"{damaged}:4: problem: dangling_parent:" in proc.stdout
    assert f"{damaged}:5: problem: duplicate_id:" in proc.stdout
    assert f"{damaged}:6: problem: torn_tail:" in proc.stdout
    as_json = cli("sessions", "verify", damaged, "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    offsets = [len(HEADER) + 1 + len(dumps(entry("a1", None))) + 1]
    assert report["findings"][0] == {
        "code": "corrupt_line",
        "severity": "problem",
        "line": 3,
        "offset": offsets[0],
        "message": report["findings"][0]["message"],
        "fix": "removed",
    }
    assert [f["code"] for f in report["findings"]] == [
        "corrupt_line",
        "dangling_parent",
        "duplicate_id",
        "torn_tail",
    ]
    assert report["ok"] is False and report["problems"] == 4
    # verify never writes.
    assert damaged.read_bytes() == before and damaged.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in damaged.parent.iterdir()) == [damaged.name]


def test_usage_errors_exit_2(cli: Cli, clean: Path) -> None:
    for args in (
        ("sessions", "verify"),
        ("sessions", "verify", clean, "--bogus"),
        ("sessions", "repair"),
        ("sessions", "migrate", clean, "extra"),
    ):
        assert cli(*args).returncode == 2, args


def test_missing_session_is_error_1(cli: Cli, root: Path) -> None:
    for command in ("verify", "repair", "migrate"):
        proc = cli("sessions", command, "nope", "--root", root)
        assert proc.returncode == 1
        assert proc.stderr.startswith("error[session_not_found]: ")


def test_unreadable_header(cli: Cli, clean: Path) -> None:
    clean.write_bytes(b"garbage\n" + clean.read_bytes())
    proc = cli("sessions", "verify", clean)
    assert proc.returncode == 1 and "header_not_first" in proc.stdout
    proc = cli("sessions", "repair", clean)
    assert proc.returncode == 1 and proc.stderr.startswith("error[unrepairable]: ")


def test_repair(cli: Cli, damaged: Path) -> None:
    original = damaged.read_bytes()
    dry = cli("sessions", "repair", damaged, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "dry run" in dry.stdout and damaged.read_bytes() == original
    assert not damaged.with_name(damaged.name + ".bak").exists()

    proc = cli("sessions", "repair", damaged)
    assert proc.returncode == 0, proc.stderr
    for code in ("corrupt_line", "dangling_parent", "duplicate_id", "torn_tail"):
        assert code in proc.stdout
    backup = damaged.with_name(damaged.name + ".bak")
    assert backup.read_bytes() == original
    assert str(backup) in proc.stdout
    assert cli("sessions", "verify", damaged).returncode == 0
    with open_session(damaged, strict=True) as session:
        assert session.entry_ids() == ["a1", "a2"]
        assert session.get_entry("a2").parent_id == "a1"

    repaired = damaged.read_bytes()
    again = cli("sessions", "repair", damaged)
    assert again.returncode == 0 and again.stdout.startswith("nothing to repair")
    assert damaged.read_bytes() == repaired
    assert not damaged.with_name(damaged.name + ".bak.1").exists()


def test_repair_keeps_earlier_backups(cli: Cli, damaged: Path) -> None:
    backup = damaged.with_name(damaged.name + ".bak")
    backup.write_bytes(b"an older backup\n")
    assert cli("sessions", "repair", damaged).returncode == 0
    assert backup.read_bytes() == b"an older backup\n"
    assert damaged.with_name(damaged.name + ".bak.1").exists()


def write_v1(path: Path) -> None:
    lines: list[dict[str, Any]] = [
        {"type": "session", "id": "old", "timestamp": TS, "cwd": "/x"},
        {"type": "message", "timestamp": TS, "message": {"role": "user", "content": "one"}},
        {
            "type": "message",
            "timestamp": TS,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "two"}],
                "provider": "anthropic",
                "model": "claude",
                "stopReason": "stop",
            },
        },
        {"type": "message", "timestamp": TS, "message": {"role": "user", "content": "three"}},
    ]
    path.write_bytes(b"".join(dumps(x) + b"\n" for x in lines))


def test_migrate_v1(cli: Cli, root: Path) -> None:
    path = root / "--x--" / "2025-01-01T00-00-00-000Z_old.jsonl"
    path.parent.mkdir(parents=True)
    write_v1(path)
    original = path.read_bytes()
    with open_session(path) as before:
        ids = before.entry_ids()
        messages = before.build_context().messages
    proc = cli("sessions", "migrate", "old", "--root", root, process=True)  # a real process
    assert proc.returncode == 0, proc.stderr
    backup = path.with_name(path.name + ".v1.bak")
    assert backup.read_bytes() == original and str(backup) in proc.stdout
    with open_session(path, strict=True) as after:
        assert after.header.version == 3
        assert after.entry_ids() == ids
        assert after.build_context().messages == messages
    assert [json.loads(x).get("id") for x in path.read_bytes().splitlines()[1:]] == ids
    assert cli("sessions", "verify", path).returncode == 0

    migrated = path.read_bytes()
    again = cli("sessions", "migrate", path)
    assert again.returncode == 0 and again.stdout.startswith("already v3")
    assert path.read_bytes() == migrated
