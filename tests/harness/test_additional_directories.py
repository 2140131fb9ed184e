"""Claude Code's ``permissions.additionalDirectories``: folders decided as the working folder is,
widened only from the user's settings or a trusted project's (an untrusted project's are
ignored), and never through a symlink that leads out of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    SecuritySupervisor,
    ToolResultMessage,
    read_tool,
    write_tool,
)


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path, Path]:
    """``work`` (the cwd), ``extra`` (an additional directory) and ``user.json``."""
    work, extra = tmp_path / "work", tmp_path / "extra"
    work.mkdir()
    extra.mkdir()
    (extra / "notes.txt").write_text("from the extra folder\n")
    (tmp_path / "secret.txt").write_text("SECRET\n")
    (extra / "leak.txt").symlink_to(tmp_path / "secret.txt")
    return work, extra, tmp_path / "user.json"


async def results(
    work: Path, user: Path, calls: list[tuple[str, dict[str, Any]]], **supervisor: Any
) -> list[ToolResultMessage]:
    session = await JsonlSessionRepo(work.parent / "sessions").create(str(work))
    harness = AgentHarness(
        session=session,
        model=FauxModel(
            [FauxReply(tool_calls=[FauxToolCall(name=n, arguments=a) for n, a in calls]), "ok"]
        ),
        tools=[read_tool(), write_tool()],
        supervisor=SecuritySupervisor(user_settings=user, **supervisor),  # no approver: deny
        cwd=work,
        resources=None,
    )
    await harness.prompt("go")
    return [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]


def text(result: ToolResultMessage) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


async def test_the_users_additional_directory_is_read_and_edited_as_the_working_folder(
    places: tuple[Path, Path, Path],
) -> None:
    work, extra, user = places
    user.write_text(
        json.dumps({"permissions": {"additionalDirectories": [str(extra)], "mode": "acceptEdits"}})
    )
    read, write, leak = await results(
        work,
        user,
        [
            ("read", {"path": str(extra / "notes.txt")}),
            ("write", {"path": str(extra / "new.txt"), "content": "written\n"}),
            ("read", {"path": str(extra / "leak.txt")}),  # a symlink leading out of it
        ],
        setting_sources=("user",),
    )
    assert not read.is_error and "from the extra folder" in text(read)
    assert not write.is_error and (extra / "new.txt").read_text() == "written\n"
    assert leak.is_error and "SECRET" not in text(leak)


async def test_without_it_a_read_outside_is_asked_and_denied(
    places: tuple[Path, Path, Path],
) -> None:
    work, extra, user = places
    [read] = await results(
        work, user, [("read", {"path": str(extra / "notes.txt")})], setting_sources=("user",)
    )
    assert read.is_error and "from the extra folder" not in text(read)


@pytest.mark.parametrize("trusted", [False, True])
async def test_a_projects_additional_directories_count_only_when_it_is_trusted(
    places: tuple[Path, Path, Path], trusted: bool
) -> None:
    work, _extra, user = places
    (work / ".harness").mkdir()
    (work / ".harness" / "settings.json").write_text(
        json.dumps({"permissions": {"additionalDirectories": ["../extra"]}})
    )
    [read] = await results(
        work, user, [("read", {"path": "../extra/notes.txt"})], trust_project=trusted
    )
    assert read.is_error is (not trusted)
    assert ("from the extra folder" in text(read)) is trusted


async def test_an_added_folder_reached_through_a_projects_symlink_is_not_added(
    tmp_path: Path,
) -> None:
    """Review 14, finding 3: the user's relative `../shared`, from a working folder inside a
    cloned project that ships `shared -> ~`, made the home folder count as added: a read of a
    private key there was approved unasked. A folder whose name passes through a symlink
    (other than the working folder's own path) is not added; the read is asked (denied here:
    no approver)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh/id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    clone = tmp_path / "clone"
    (clone / "sub").mkdir(parents=True)
    (clone / "shared").symlink_to(home)
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"permissions": {"additionalDirectories": ["../shared"]}}))
    [through, direct] = await results(
        clone / "sub",
        user,
        [
            ("read", {"path": "../shared/.ssh/id_ed25519"}),
            ("read", {"path": str(home / ".ssh/id_ed25519")}),
        ],
    )
    assert through.is_error and direct.is_error, (text(through), text(direct))
    assert "PRIVATE" not in text(through) + text(direct)
    assert "leaves the working folder" in text(direct)
