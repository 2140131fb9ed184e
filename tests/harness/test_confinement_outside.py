"""Approved access outside the working folder opens what was approved, through no symlink.

The supervisor resolves a path once (``realpath``) and matches its rules against that; the
tool is handed the result as ``ToolRun.approved_path`` and opens exactly it, with the kernel
refusing any symlink on the way (``openat2`` ``RESOLVE_NO_SYMLINKS``). Before, the tool opened
``cwd/path`` the ordinary way, and under allow ``read(<dir>/**)`` 37-48 of 600 reads returned a
file the rule does not cover through a symlink swapped in after the check.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness import (
    TextContent,
    ToolError,
    ToolResult,
    ToolRun,
    edit_tool,
    find_tool,
    grep_tool,
    ls_tool,
    read_tool,
    write_tool,
)
from harness._fs import FileRefusedError, read_regular_file
from hooks import JSONValue

TRIES = 2000
HOLD_S = 0.0002  # how long the swapper keeps each state (pacing only; nothing is timed)


def make_run(cwd: Path, *, approved_path: str | None = None) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        pass

    return ToolRun(
        tool_call_id="t1", cwd=cwd, confined=False, approved_path=approved_path, on_update=on_update
    )


def text(result: ToolResult | str) -> str:
    assert isinstance(result, ToolResult)
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path, Path]:
    """``work`` (the cwd), ``allowed`` (outside it, approved) and ``secret`` (not approved)."""
    work, allowed, secret = tmp_path / "work", tmp_path / "allowed", tmp_path / "secret"
    work.mkdir()
    (allowed / "d").mkdir(parents=True)
    secret.mkdir()
    (allowed / "d" / "f.txt").write_text("allowed\n")
    (secret / "f.txt").write_text("SECRET\n")
    return work, allowed, secret


@contextmanager
def swapping(folder: Path, elsewhere: Path) -> Iterator[None]:
    """A thread that keeps replacing ``folder`` with a symlink to ``elsewhere`` and back."""
    stop = threading.Event()
    real = folder.with_name(folder.name + ".real")

    def swap() -> None:
        while not stop.is_set():
            time.sleep(HOLD_S)  # each state lasts a little, so reads meet both
            os.rename(folder, real)
            with contextlib.suppress(FileExistsError):
                os.symlink(elsewhere, folder)
            time.sleep(HOLD_S)
            while True:
                try:
                    os.rename(real, folder)
                    break
                except OSError:
                    with contextlib.suppress(OSError):
                        if folder.is_symlink():
                            folder.unlink()
                        else:
                            shutil.rmtree(folder)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# --- races: zero escapes ---------------------------------------------------------------------


@pytest.mark.parametrize("approved", [True, False], ids=["approved_path", "lexical"])
async def test_no_approved_read_outside_escapes_while_a_folder_is_swapped(
    places: tuple[Path, Path, Path], approved: bool
) -> None:
    work, allowed, secret = places
    target = str(allowed / "d" / "f.txt")
    run = make_run(work, approved_path=os.path.realpath(target) if approved else None)
    read = read_tool()
    escapes = inside = 0
    with swapping(allowed / "d", secret):
        for _ in range(TRIES):
            try:
                result = await read.execute({"path": target}, run)
            except ToolError:
                continue
            escapes += "SECRET" in text(result)
            inside += "allowed" in text(result)
    assert escapes == 0
    assert inside > 0


@pytest.mark.parametrize(
    ("tool", "input"),
    [
        (grep_tool(), {"pattern": "."}),
        (ls_tool(), {}),
        (find_tool(), {"pattern": "*"}),
    ],
    ids=["grep", "ls", "find"],
)
async def test_no_approved_folder_listing_outside_escapes_while_it_is_swapped(
    places: tuple[Path, Path, Path], tool: object, input: dict[str, JSONValue]
) -> None:
    work, allowed, secret = places
    (secret / "only-in-secret.txt").write_text("SECRET\n")
    folder = str(allowed / "d")
    run = make_run(work, approved_path=os.path.realpath(folder))
    escapes = seen = 0
    with swapping(allowed / "d", secret):
        for _ in range(TRIES // 4):
            try:
                result = await tool.execute({**input, "path": folder}, run)  # type: ignore[attr-defined]
            except ToolError:
                continue
            escapes += "SECRET" in text(result) or "only-in-secret" in text(result)
            seen += "f.txt" in text(result) or "allowed" in text(result)
    assert escapes == 0
    assert seen > 0


async def test_no_approved_write_outside_lands_elsewhere_while_a_folder_is_swapped(
    places: tuple[Path, Path, Path],
) -> None:
    work, allowed, secret = places
    write, written = write_tool(), 0
    with swapping(allowed / "d", secret):
        for i in range(TRIES):
            path = str(allowed / "d" / f"w{i}.txt")
            try:
                await write.execute(
                    {"path": path, "content": "x"}, make_run(work, approved_path=path)
                )
                written += 1
            except ToolError:
                continue
    assert sorted(os.listdir(secret)) == ["f.txt"]
    assert written > 0
    await asyncio.sleep(0)


# --- outside the cwd, no symlink is followed ----------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "final-link",  # the file itself is a symlink to the secret
        "folder-link",  # a folder on the path is
        "absolute-link",  # an absolute symlink
        "relative-up-link",  # a relative one climbing out
        "link-to-link",  # a chain
        "dotdot-after-link",  # "link/../f.txt": the kernel would resolve the link first
    ],
)
@pytest.mark.parametrize("approved", [True, False], ids=["approved_path", "lexical"])
async def test_a_symlink_on_an_approved_outside_path_is_refused(
    places: tuple[Path, Path, Path], spelling: str, approved: bool
) -> None:
    work, allowed, secret = places
    a = allowed
    if spelling == "final-link":
        (a / "x.txt").symlink_to(secret / "f.txt")
        path = a / "x.txt"
    elif spelling == "folder-link":
        (a / "s").symlink_to(secret)
        path = a / "s" / "f.txt"
    elif spelling == "absolute-link":
        (a / "abs").symlink_to(str(secret / "f.txt"))
        path = a / "abs"
    elif spelling == "relative-up-link":
        (a / "d" / "up").symlink_to("../../secret/f.txt")
        path = a / "d" / "up"
    elif spelling == "link-to-link":
        (a / "one").symlink_to(secret / "f.txt")
        (a / "two").symlink_to(a / "one")
        path = a / "two"
    else:
        (a / "s").symlink_to(secret / "sub-does-not-matter")
        (secret / "sub-does-not-matter").mkdir()
        path = a / "s" / ".." / "f.txt"
    # Approved as spelled (the symlink appeared after a decision that saw none).
    run = make_run(work, approved_path=os.path.normpath(path) if approved else None)
    for tool, input in (
        (read_tool(), {"path": str(path)}),
        (grep_tool(), {"pattern": ".", "path": str(path)}),
        (edit_tool(), {"path": str(path), "oldText": "SECRET", "newText": "owned"}),
    ):
        try:
            result = await tool.execute(input, run)
        except ToolError:
            continue
        assert "SECRET" not in text(result)
    assert (secret / "f.txt").read_text() == "SECRET\n"


async def test_the_tool_opens_the_approved_path_not_the_input(
    places: tuple[Path, Path, Path],
) -> None:
    work, allowed, _ = places
    # The input spells the file through a symlink the supervisor already resolved.
    (work.parent / "alias").symlink_to(allowed / "d")
    run = make_run(work, approved_path=str(allowed / "d" / "f.txt"))
    result = await read_tool().execute({"path": "../alias/f.txt"}, run)
    assert text(result) == "allowed"


async def test_an_approved_new_file_outside_gets_its_folders_made_without_links(
    places: tuple[Path, Path, Path],
) -> None:
    work, allowed, secret = places
    new = allowed / "n1" / "n2" / "f.txt"
    await write_tool().execute(
        {"path": str(new), "content": "hi"}, make_run(work, approved_path=str(new))
    )
    assert new.read_text() == "hi"
    (allowed / "link").symlink_to(secret)
    through = allowed / "link" / "made" / "f.txt"
    with pytest.raises(ToolError):
        await write_tool().execute(
            {"path": str(through), "content": "x"}, make_run(work, approved_path=str(through))
        )
    assert sorted(os.listdir(secret)) == ["f.txt"]


# --- read_regular_file: what settings are read through --------------------------------------


def test_read_regular_file_reads_returns_none_when_missing_and_refuses_the_rest(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / ".harness").mkdir(parents=True)
    settings = project / ".harness" / "settings.json"
    assert read_regular_file(settings, max_bytes=1000, root=project) is None
    assert read_regular_file(tmp_path / "no" / "such", max_bytes=1000) is None
    settings.write_text("{}")
    assert read_regular_file(settings, max_bytes=1000, root=project) == b"{}"
    (tmp_path / "user.json").write_text("[]")
    (tmp_path / "linked.json").symlink_to(tmp_path / "user.json")  # the user's own: followed
    assert read_regular_file(tmp_path / "linked.json", max_bytes=1000) == b"[]"
    settings.unlink()
    settings.symlink_to(tmp_path / "user.json")  # a project's link out: refused
    with pytest.raises(FileRefusedError):
        read_regular_file(settings, max_bytes=1000, root=project)


@pytest.mark.parametrize(
    "kind", ["fifo", "dev-zero", "dev-null", "folder", "sparse-huge", "socket"]
)
@pytest.mark.parametrize("rooted", [True, False])
def test_read_regular_file_refuses_hostile_files_without_blocking(
    tmp_path: Path, kind: str, rooted: bool
) -> None:
    path = tmp_path / "settings.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dev-null":
        path.symlink_to("/dev/null")
    elif kind == "folder":
        path.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()  # the socket file stays
    else:
        with path.open("wb") as f:
            f.truncate(1 << 40)  # a terabyte of holes
    box: dict[str, BaseException | bytes | None] = {}

    def target() -> None:
        try:
            box["value"] = read_regular_file(
                path, max_bytes=1_000_000, root=tmp_path if rooted else None
            )
        except BaseException as exc:
            box["value"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "read_regular_file hangs"
    assert isinstance(box["value"], FileRefusedError)
    assert str(path) in str(box["value"])  # the message names the file


async def test_through_the_gate_an_allowed_outside_read_never_returns_what_the_rule_misses(
    places: tuple[Path, Path, Path],
) -> None:
    """The issue's setup end to end: allow ``read(<allowed>/**)`` in ``dont_ask`` mode, the
    model reads ``<allowed>/d/f.txt`` again and again while a thread swaps ``d`` for a symlink
    to the secret folder. The gate resolves once and hands the tool what it approved."""
    from harness import (
        AgentHarness,
        FauxModel,
        FauxReply,
        FauxToolCall,
        MemorySessionRepo,
        SecuritySupervisor,
        ToolResultMessage,
    )

    work, allowed, secret = places
    rounds, per_round = 20, 30
    calls = [
        FauxToolCall(name="read", arguments={"path": str(allowed / "d" / "f.txt")})
        for _ in range(per_round)
    ]
    session = await MemorySessionRepo().create(str(work))
    harness = AgentHarness(
        session=session,
        model=FauxModel([*(FauxReply(tool_calls=calls) for _ in range(rounds)), "done"]),
        tools=[read_tool()],
        cwd=work,
        supervisor=SecuritySupervisor(
            mode="dont_ask", setting_sources=(), rules={"allow": [f"read({allowed}/**)"]}
        ),
        resources=None,
    )
    with swapping(allowed / "d", secret):
        await harness.prompt("read it")
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert len(results) == rounds * per_round
    assert not any("SECRET" in r.text for r in results)
    assert any(r.text.startswith("allowed") for r in results)  # the reads did happen
