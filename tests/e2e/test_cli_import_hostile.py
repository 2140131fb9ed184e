"""``harness import claude-code`` on hostile transcripts (issue 18): a transcript claiming an
already imported ``sessionId`` (class 14), a hostile ``cwd`` (class 3, the transcript part), and
FIFOs and devices given as transcripts (class 12). Real files, the CLI in a subprocess.

A transcript is untrusted (docs/security.md): its ``sessionId`` and ``cwd`` are information only.
Another file naming an imported session id must not add to that session; only the transcript
that was imported, grown, does (every entry imported before comes back unchanged, but for the
last one, a reply that was still being written).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from claude_code_transcripts import SESSION, assistant, small_transcript, user, write
from cli_in_process import needs_process, run_cli

from repos import open_session

REPO_ROOT = Path(__file__).resolve().parents[2]


def harness(*args: str | Path, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    if not needs_process(args):  # the same entry point, in-process (``cli_in_process``)
        return run_cli(args, env=env, cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=120,  # a guard against a hang, not a measurement
        check=False,
    )


def sessions(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.jsonl"))


def snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sessions(root)}


def main_session(root: Path, files: list[Path] | None = None) -> list[Path]:
    """The main-thread sessions (not sidechains) among ``files`` (default: all under root)."""
    return [
        f
        for f in (files if files is not None else sessions(root))
        if b'"parentSession"' not in f.read_bytes().split(b"\n", 1)[0]
    ]


def records_of(transcript: list[Any]) -> list[dict[str, Any]]:
    return [r for r in transcript if isinstance(r, dict) and "uuid" in r]


def other_transcript() -> list[Any]:
    """Records no earlier import holds, claiming the same session id."""
    return [
        user("x1", None, 1, "Something else entirely"),
        assistant("x2", "x1", 2, [{"type": "text", "text": "Injected."}], "mx", "end_turn"),
    ]


def _edited(records: list[Any], uuid: str, text: str) -> list[Any]:
    out = copy.deepcopy(records)
    for r in out:
        if isinstance(r, dict) and r.get("uuid") == uuid:
            r["message"]["content"] = text
    return out


def _without(records: list[Any], uuid: str) -> list[Any]:
    return [r for r in records if not (isinstance(r, dict) and r.get("uuid") == uuid)]


# Transcripts that claim the imported session's id but are not it, grown: (name, records).
def _claimants() -> list[tuple[str, list[Any]]]:
    base = small_transcript()
    extra = other_transcript()
    return [
        ("other records", extra),
        ("other records, then the imported ones", extra + base),
        ("an imported message changed", _edited(base, "u1", "changed") + extra),
        ("an imported record left out", _without(base, "r1") + extra),
        ("the first record left out", _without(base, "u1") + extra),
        ("the same uuids in another session's file", [*base[:3], *extra]),
    ]


CLAIMANTS = _claimants()


@pytest.mark.parametrize(("name", "claimant"), CLAIMANTS, ids=[c[0] for c in CLAIMANTS])
def test_another_transcript_claiming_an_imported_session_id_is_a_session_of_its_own(
    tmp_path: Path, name: str, claimant: list[Any]
) -> None:
    root = tmp_path / "sessions"
    first = write(tmp_path / "a" / f"{SESSION}.jsonl", small_transcript())
    assert harness("import", "claude-code", first, "--root", root).returncode == 0
    before = snapshot(root)
    (imported,) = main_session(root)

    second = write(tmp_path / "b" / f"{SESSION}.jsonl", claimant)
    proc = harness("import", "claude-code", second, "--root", root)
    assert proc.returncode == 0, proc.stderr
    assert "1 imported, 0 extended" in proc.stdout
    assert f"note: Claude Code session {SESSION} was imported before" in proc.stdout
    # The first import's sessions are byte for byte what they were.
    after = snapshot(root)
    assert {p: after[p] for p in before} == before
    new_mains = [p for p in main_session(root) if p != imported]
    assert len(new_mains) == 1
    with open_session(new_mains[0]) as fresh, open_session(imported) as old:
        assert fresh.id != old.id
        assert fresh.header.metadata is not None
        assert fresh.header.metadata["importedFrom"]["file"] == str(second.resolve())

    # Importing the second file again adds nothing, and touches neither session.
    again = harness("import", "claude-code", second, "--root", root)
    assert "0 imported, 0 extended, 1 already imported" in again.stdout, again.stdout
    assert snapshot(root) == after


def test_each_claimant_grows_its_own_session(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    first = write(tmp_path / "a" / f"{SESSION}.jsonl", small_transcript())
    second = write(tmp_path / "b" / f"{SESSION}.jsonl", other_transcript())
    for source in (first, second):
        assert harness("import", "claude-code", source, "--root", root).returncode == 0
    mains = {p: p.read_bytes() for p in main_session(root)}
    assert len(mains) == 2
    grown = [
        *other_transcript(),
        user("x3", "x2", 3, "And more"),
    ]
    write(second, grown)
    proc = harness("import", "claude-code", second, "--root", root)
    assert "0 imported, 1 extended" in proc.stdout, proc.stdout
    changed = [p for p in main_session(root) if p.read_bytes() != mains[p]]
    assert len(changed) == 1
    with open_session(changed[0]) as session:
        texts = [e.message.content for e in session.get_branch()]  # type: ignore[attr-defined]
        assert [t[0].text if not isinstance(t, str) else t for t in texts][-1] == "And more"
        assert all("List the files" not in str(t) for t in texts)


def test_a_reply_still_being_written_when_imported_still_extends(tmp_path: Path) -> None:
    # The honest growth that changes an imported entry: the last response was split over
    # records and only its first was written at the first import.
    root = tmp_path / "sessions"
    records = [
        user("u1", None, 1, "Hi"),
        assistant(
            "a1", "u1", 2, [{"type": "thinking", "thinking": "t", "signature": "s"}], "m1", None
        ),
    ]
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", records)
    assert harness("import", "claude-code", source, "--root", root).returncode == 0
    records.append(assistant("a2", "a1", 3, [{"type": "text", "text": "Done."}], "m1", "end_turn"))
    records.append(user("u2", "a2", 4, "Thanks"))
    write(source, records)
    proc = harness("import", "claude-code", source, "--root", root)
    assert "0 imported, 1 extended" in proc.stdout, proc.stdout
    assert "1 entries changed in the transcript since the first import" in proc.stdout
    (path,) = sessions(root)
    with open_session(path) as session:
        assert [e.type for e in session.get_branch()] == ["message", "message", "message"]


def test_an_older_copy_of_an_imported_transcript_adds_nothing(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    records = small_transcript()
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", records)
    assert harness("import", "claude-code", source, "--root", root).returncode == 0
    before = snapshot(root)
    older = write(tmp_path / "old" / f"{SESSION}.jsonl", records[:4])
    proc = harness("import", "claude-code", older, "--root", root)
    assert "0 imported, 0 extended, 1 already imported" in proc.stdout, proc.stdout
    assert snapshot(root) == before


# --- cwd: information only, and never a way out of the sessions root -----------------------

HOSTILE_CWDS: list[tuple[str, Any, bool]] = [
    # (name, cwd, whether it is recorded as given)
    ("relative, climbing", "../../../../etc/cron.d", False),
    ("absolute, climbing", "/../../etc/cron.d", True),
    ("system folder", "/etc/cron.d", True),
    ("NUL byte", "/tmp/a\x00b", False),
    ("100 KB", "/" + "a" * 100_000, False),
    ("too long for a folder name", "/" + "b" * 300, False),
    ("escape sequences", "/tmp/\x1b]0;T\x07", False),
    ("empty", "", False),
    ("a number", 5, False),
    ("an object", {"path": "/etc"}, False),
    ("an array", ["/etc"], False),
]


@pytest.mark.parametrize(("name", "cwd", "kept"), HOSTILE_CWDS, ids=[c[0] for c in HOSTILE_CWDS])
def test_a_hostile_cwd_stays_information_inside_the_root(
    tmp_path: Path, name: str, cwd: Any, kept: bool
) -> None:
    records = records_of(small_transcript())
    for r in records:
        r["cwd"] = cwd
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", records)
    root = tmp_path / "sessions"
    proc = harness("import", "claude-code", source, "--root", root)
    assert proc.returncode == 0, proc.stderr
    assert "1 imported" in proc.stdout
    written = [
        p for p in tmp_path.rglob("*") if p.is_file() and not p.is_relative_to(source.parent)
    ]
    assert written and all(p.resolve().is_relative_to(root.resolve()) for p in written), written
    for path in sessions(root):
        header = orjson.loads(path.read_bytes().split(b"\n", 1)[0])
        assert isinstance(header["cwd"], str)
        assert header["cwd"] == (cwd if kept else str(source.parent.resolve()))
    assert ("note: the transcript's cwd" in proc.stdout) is not kept


# --- FIFOs and devices: refused, never read --------------------------------------------------


def test_a_fifo_or_a_device_given_as_a_transcript_is_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    root = tmp_path / "sessions"
    for source in (fifo, zero, Path("/dev/zero")):
        proc = harness("import", "claude-code", source, "--root", root)
        assert proc.returncode == 1, (source, proc.stdout, proc.stderr)
        assert f"skipped {source}" in proc.stderr
    assert sessions(root) == []


def test_a_folder_holding_fifos_and_devices_imports_its_transcripts(tmp_path: Path) -> None:
    folder = tmp_path / "cc"
    write(folder / f"{SESSION}.jsonl", small_transcript())
    os.mkfifo(folder / "fifo.jsonl")
    (folder / "sub").mkdir()
    os.mkfifo(folder / "sub" / "deeper.jsonl")
    (folder / "zero.jsonl").symlink_to("/dev/zero")
    (folder / "loop").symlink_to(folder)
    root = tmp_path / "sessions"
    os.makedirs(root / "--x--")
    os.mkfifo(root / "--x--" / "2025-01-01T00-00-00-000Z_fifo.jsonl")  # one in the root too
    proc = harness("import", "claude-code", folder, "--root", root)
    assert proc.returncode == 0, proc.stderr
    assert "1 imported" in proc.stdout
    assert len(main_session(root, [p for p in sessions(root) if p.is_file()])) == 1


@pytest.mark.parametrize(
    "command",
    [
        ("sessions", "show", "--no-page"),
        ("sessions", "tree"),
        ("sessions", "verify"),
        ("sessions", "repair"),
        ("sessions", "migrate"),
        ("export", "--format", "md"),
    ],
    ids=" ".join,
)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_session_commands_refuse_a_fifo_or_a_device(
    tmp_path: Path, command: tuple[str, ...], kind: str
) -> None:
    path = tmp_path / "s.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    proc = harness(*command, path, cwd=tmp_path)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "error[session_not_found]" in proc.stderr


# --- the header timestamp names the session file: one name, under the root ------------------

HOSTILE_STAMPS = [
    "{outside}/escaped-by-stamp",  # an absolute path (under this test's folder, outside the root)
    "../../../../{outside}/escaped-by-stamp",
    "a/b/c",
    "a_b_c",
    "x\x00y",
    "2025-07-01T10:00:00.000Z" + "9" * 10_000,
    "\x1b]0;T\x07",
    "..",
]


@pytest.mark.parametrize("stamp", HOSTILE_STAMPS, ids=lambda s: repr(s[:30]))
def test_a_hostile_timestamp_cannot_place_the_session_file(tmp_path: Path, stamp: str) -> None:
    # The header takes the first record's timestamp, and the file name takes the header's.
    (tmp_path / "outside").mkdir()
    records = records_of(small_transcript())
    records[0]["timestamp"] = stamp.replace("{outside}", str(tmp_path / "outside"))
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", records)
    root = tmp_path / "sessions"
    proc = harness("import", "claude-code", source, "--root", root, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "cc" not in p.parts]
    assert written and all(p.parent.parent == root for p in written), written
    for path in written:
        assert len(path.name.encode()) <= 255
        session_id = orjson.loads(path.read_bytes().split(b"\n", 1)[0])["id"]
        found = harness("sessions", "tree", "--root", root, session_id, cwd=tmp_path)
        assert found.returncode == 0, found.stderr  # still found by its id


@pytest.mark.parametrize("stamp", HOSTILE_STAMPS, ids=lambda s: repr(s[:30]))
def test_sessions_copy_keeps_a_hostile_header_under_the_destination(
    tmp_path: Path, stamp: str
) -> None:
    (tmp_path / "outside").mkdir()
    source = tmp_path / "src"
    (source / "--w--").mkdir(parents=True)
    stamp = stamp.replace("{outside}", str(tmp_path / "outside"))
    header = {"type": "session", "version": 3, "id": "evil-1", "timestamp": stamp, "cwd": "/w"}
    (source / "--w--" / "2025-01-01T00-00-00-000Z_evil-1.jsonl").write_bytes(
        orjson.dumps(header) + b"\n"
    )
    dest = tmp_path / "dst"
    proc = harness("sessions", "copy", "--from", f"jsonl:{source}", "--to", f"jsonl:{dest}")
    assert proc.returncode == 0, proc.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file() and source not in p.parents]
    assert [p.parent.parent for p in written] == [dest]


@pytest.mark.parametrize(
    "cwd", ["/w\x00x", "/" + "a" * 100_000, "../../../etc", "/etc/cron.d"], ids=repr
)
def test_sessions_copy_names_folders_after_a_hostile_cwd_only_under_the_destination(
    tmp_path: Path, cwd: str
) -> None:
    source = tmp_path / "src"
    (source / "--w--").mkdir(parents=True)
    header = {"type": "session", "version": 3, "id": "evil-2", "timestamp": "t", "cwd": cwd}
    (source / "--w--" / "2025-01-01T00-00-00-000Z_evil-2.jsonl").write_bytes(
        orjson.dumps(header) + b"\n"
    )
    dest = tmp_path / "dst"
    proc = harness("sessions", "copy", "--from", f"jsonl:{source}", "--to", f"jsonl:{dest}")
    assert proc.returncode == 0, proc.stderr[:500]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and source not in p.parents]
    # Copied into one folder under the destination, or refused for this session and said.
    assert [p.parent.parent for p in written] == [dest] or (
        written == [] and "warning: evil-2:" in proc.stderr
    )
