"""A symlink swapped in *inside* the working folder after the supervisor decided cannot
redirect the call it approved (adversarial review 4, finding 09).

Reproduction: in ``accept_edits`` with ``deny read(secret/**)``, a process swapping ``pub``
between a folder and a symlink to ``secret`` made 59-81 of 300 ``read pub/k.txt`` calls return
the denied file; an approved ``write d/config`` landed in ``.git/config`` while ``d`` was
swapped for a symlink to ``.git``. Here the swap happens deterministically between the decision
and the tool (a ``permission_decision`` receiver), the widest the window can be.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    SecuritySupervisor,
    ToolResultMessage,
    read_tool,
    write_tool,
)


async def _run_one(cwd: Path, call: FauxToolCall, swap: Any, **supervisor: Any) -> str:
    session = await MemorySessionRepo().create(str(cwd))
    harness = AgentHarness(
        session=session,
        cwd=cwd,
        model=FauxModel([FauxReply(tool_calls=[call]), "done"]),
        tools=[read_tool(), write_tool()],
        supervisor=SecuritySupervisor(setting_sources=(), **supervisor),
        resources=None,
    )
    harness.connect("permission_decision", lambda sender, event: swap())
    await harness.prompt("go")
    (result,) = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    return result.text


def _swap_for_link(folder: Path, target: str) -> None:
    shutil.rmtree(folder)
    os.symlink(target, folder)


async def test_a_read_decided_on_a_folder_never_follows_a_link_swapped_in(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "k.txt").write_text("TOP-SECRET")
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "k.txt").write_text("decoy")
    text = await _run_one(
        tmp_path,
        FauxToolCall(name="read", arguments={"path": "pub/k.txt"}),
        lambda: _swap_for_link(tmp_path / "pub", "secret"),
        mode="accept_edits",
        rules={"deny": ["read(secret/**)"]},
    )
    assert "TOP-SECRET" not in text


async def test_a_write_decided_on_a_folder_never_lands_in_git(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / "d").mkdir()
    text = await _run_one(
        tmp_path,
        FauxToolCall(
            name="write", arguments={"path": "d/config", "content": "[core]\nfsmonitor = x\n"}
        ),
        lambda: _swap_for_link(tmp_path / "d", ".git"),
        mode="accept_edits",
    )
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n", text


async def test_a_symlink_inside_present_when_deciding_is_still_followed(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("through the link")
    os.symlink("src", tmp_path / "link")
    text = await _run_one(
        tmp_path,
        FauxToolCall(name="read", arguments={"path": "link/a.txt"}),
        lambda: None,
        mode="accept_edits",
    )
    assert "through the link" in text
