"""Settings files as an attacker leaves them in a project (issue 18, classes 10 and 12): a
``.harness`` symlinked to the user's config folder, FIFOs, devices, huge files. Nothing
blocks, nothing is read without bound, nothing is written outside the project, and a file that
cannot be read denies every call (fail closed) instead of being skipped.

The blocking cases run in a subprocess with a timeout: a hang is the bug, so it must fail the
test instead of stalling the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
from permission_requests import request

from harness import (
    AgentHarness,
    ApproveAlways,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    PermissionRequest,
    SecuritySupervisor,
    bash_tool,
    user_settings_path,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _request(cwd: Path, command: str) -> PermissionRequest:
    return request(cwd, bash_tool(), command=command)


async def test_approve_always_for_the_project_never_writes_through_a_symlinked_harness_folder(
    tmp_path: Path,
) -> None:
    """The issue's reproduction: ``.harness`` is a symlink to the user config folder, so
    ``ApproveAlways(scope="project")`` used to add an allow rule to the user's trusted file."""
    user_file = user_settings_path()
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_bytes(orjson.dumps({"permissions": {"allow": []}}))
    project = tmp_path / "project"
    project.mkdir()
    (project / ".harness").symlink_to(user_file.parent)

    async def always(request: PermissionRequest) -> ApproveAlways:
        return ApproveAlways(scope="project")

    session = await MemorySessionRepo().create(str(project))
    calls = [FauxToolCall(name="bash", arguments={"command": "echo hi"})]
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[bash_tool()],
        cwd=project,
        supervisor=SecuritySupervisor(approver=always, setting_sources=("user",)),
    )
    decisions: list[str | None] = []
    harness.on("permission_decision")(lambda sender, event: decisions.append(event.remembered))
    await harness.prompt("go")
    assert orjson.loads(user_file.read_bytes()) == {"permissions": {"allow": []}}
    assert decisions == ["session"]  # remembered in the session only, and said so


@pytest.mark.parametrize(
    "make",
    [
        lambda harness_dir, elsewhere: harness_dir.symlink_to(elsewhere),  # the folder
        lambda harness_dir, elsewhere: (
            harness_dir.mkdir(),
            (harness_dir / "settings.json").symlink_to(elsewhere / "settings.json"),
        ),  # the file
        lambda harness_dir, elsewhere: (
            harness_dir.mkdir(),
            (harness_dir / "settings.json").symlink_to("../../elsewhere/settings.json"),
        ),  # relative, out
    ],
)
async def test_project_settings_behind_a_symlink_out_are_refused_and_deny(
    tmp_path: Path, make: object
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "settings.json").write_bytes(orjson.dumps({"permissions": {"allow": ["bash"]}}))
    project = tmp_path / "project"
    project.mkdir()
    make(project / ".harness", elsewhere)  # type: ignore[operator]
    s = SecuritySupervisor(setting_sources=("project",), trust_project=True)
    decided = await s.decide(_request(project, "ls"))
    assert isinstance(decided, Deny) and "settings are broken" in decided.reason
    assert "outside" in decided.reason


async def test_a_symlink_inside_the_project_is_fine(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "config").mkdir(parents=True)
    (project / "config" / "settings.json").write_bytes(
        orjson.dumps({"permissions": {"allow": ["bash(ls:*)"]}})
    )
    (project / ".harness").symlink_to("config")
    s = SecuritySupervisor(setting_sources=("project",), trust_project=True)
    assert not isinstance(await s.decide(_request(project, "ls")), Deny)


def _decide_in_subprocess(project: Path, *, user: Path | None = None) -> str:
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from harness import SecuritySupervisor, bash_tool, PermissionRequest
        from harness._permissions.keys import describe_call
        cwd = Path({str(project)!r})
        user = {str(user) if user else None!r}
        t = describe_call(bash_tool(), {{"command": "ls"}}, cwd)
        req = PermissionRequest(tool_call_id="c", tool_name="bash", input={{"command": "ls"}},
            kind="execute", controlled=True, operation_key=t.operation_key, target=t.target,
            paths=(), cwd=cwd, leaves_cwd=False, session_id="s")
        s = SecuritySupervisor(user_settings=Path(user) if user else None,
            setting_sources=("user",) if user else ("project",), trust_project=True)
        print(asyncio.run(s.decide(req)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,  # a hang is the bug
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


CASES = [
    *((where, kind) for where in ("project", "user") for kind in ("fifo", "directory", "huge")),
    # A device is reached through a symlink; from a project that is a symlink out, refused
    # before it is opened (above); the user's own file may be a symlink, so it is opened.
    ("user", "dev_zero"),
    ("user", "dev_urandom"),
]


@pytest.mark.parametrize(("where", "kind"), CASES)
def test_a_settings_file_that_is_no_regular_file_denies_without_blocking(
    tmp_path: Path, where: str, kind: str
) -> None:
    """A FIFO ``.harness/settings.json`` used to block the event loop for ever; one symlinked
    to ``/dev/zero`` was read until memory ran out."""
    project = tmp_path / "project"
    (project / ".harness").mkdir(parents=True)
    path = project / ".harness" / "settings.json" if where == "project" else tmp_path / "u.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        path.write_bytes(b'{"permissions": {"allow": [' + b'"bash",' * 400_000 + b'"bash"]}}')
    else:
        path.symlink_to(f"/dev/{kind.removeprefix('dev_')}")
    out = _decide_in_subprocess(project, user=path if where == "user" else None)
    assert out.startswith("Deny(") and "settings are broken" in out, out


async def test_path_rules_whose_patterns_expand_too_far_refuse_their_file(tmp_path: Path) -> None:
    """Review 12, finding 10: 1,000 rules of 256 brace alternatives of ~950 characters (each
    within every cap) took RE2 minutes and gigabytes to compile at the first decision. A
    pattern expands to at most 16,384 characters and one file's path rules to 262,144; past
    either, the file is refused as broken before anything is compiled."""
    from harness._globs import MAX_EXPANDED_CHARS, GlobError, compile_glob

    braces = "".join(f"{{a{i},b{i}}}" for i in range(8))  # 256 alternatives
    wide = f"**/{braces}{'x' * 900}*"
    with pytest.raises(GlobError, match="more than 16,384 characters"):
        compile_glob(wide)
    project = tmp_path / "project"
    (project / ".harness").mkdir(parents=True)
    settings = project / ".harness" / "settings.json"
    s = SecuritySupervisor(setting_sources=("project",))
    settings.write_bytes(orjson.dumps({"permissions": {"deny": [f"Read({wide})"]}}))
    decided = await s.decide(_request(project, "ls"))
    assert isinstance(decided, Deny) and "settings are broken" in decided.reason
    # under the per-pattern cap, but 40 of them pass the file's
    each = f"**/{braces[: len(braces) // 2]}{'y' * (MAX_EXPANDED_CHARS // 16 - 40)}*"
    assert compile_glob(each)  # one alone is fine
    settings.write_bytes(orjson.dumps({"permissions": {"deny": [f"Read({each})"] * 40}}))
    decided = await s.decide(_request(project, "ls"))
    assert isinstance(decided, Deny) and "more than 262,144 characters" in decided.reason
    settings.write_bytes(orjson.dumps({"permissions": {"deny": [f"Read({each})"] * 10}}))
    decided = await s.decide(_request(project, "ls"))
    assert "settings are broken" not in decided.reason


async def test_a_settings_file_with_too_many_rules_is_refused_and_denies(tmp_path: Path) -> None:
    """Review 11, finding 11: 20,000 deny rules in an untrusted project's settings (within the
    1 MB cap) made every read cost seconds and a grep or find walk files x rules."""
    from harness._permissions.rules import MAX_RULES

    project = tmp_path / "project"
    (project / ".harness").mkdir(parents=True)
    deny = [f"Read(**/n{i})" for i in range(MAX_RULES + 1)]
    settings = project / ".harness" / "settings.json"
    settings.write_bytes(orjson.dumps({"permissions": {"deny": deny}}))
    s = SecuritySupervisor(setting_sources=("project",))
    decided = await s.decide(_request(project, "ls"))
    assert isinstance(decided, Deny) and "settings are broken" in decided.reason
    assert f"at most {MAX_RULES:,}" in decided.reason
    settings.write_bytes(orjson.dumps({"permissions": {"deny": deny[:MAX_RULES]}}))
    at_most = await s.decide(_request(project, "ls"))
    assert isinstance(at_most, Deny) and "settings are broken" not in at_most.reason
