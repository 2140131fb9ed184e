"""The bash tool's sandbox: a command approved without a person seeing it runs where the
protected paths are read-only and the stores and the approvals key empty, so a spelling the
supervisor's reading of the command misses still reaches nothing (issue 18: the protected-path
check read commands as text, and every review found another spelling).

Each hostile command below is first shown to be approved by the supervisor (the text check
misses it), then run through a real harness with real bubblewrap; the files are unchanged.
Skipped where bubblewrap is missing or cannot make namespaces (a fresh machine); CI installs
it and requires the ``sandbox`` group.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from permission_requests import request as make_request

from harness import (
    AgentHarness,
    Approve,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    PermissionRequest,
    SecuritySupervisor,
    TextContent,
    ToolCall,
    bash_tool,
    write_tool,
)
from harness._permissions.protected import sandbox_paths
from harness._tools.sandbox import sandbox_available, sandboxed
from hooks import connect

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(
        not sandbox_available(), reason="bubblewrap (bwrap) missing or unable to sandbox here"
    ),
]

BASH = bash_tool()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder with the harness's folders at their default places, a session in the
    store, the approvals key, and a git repository ``proj`` to work in."""
    home = tmp_path / "home"
    for name, sub in [
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_CONFIG_HOME", ".config"),
    ]:
        (home / sub).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(name, str(home / sub))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("HARNESS_SESSIONS_DIR", raising=False)
    monkeypatch.delenv("HARNESS_CACHE_DIR", raising=False)
    session = home / ".local/share/harness/sessions/--p--/s1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text('{"type":"session","id":"s1"} precious\n')
    key = home / ".config/harness/approvals.key"
    key.parent.mkdir(parents=True)
    key.write_text("secret-key-bytes")
    (home / ".config/harness/settings.json").write_text('{"permissions": {"deny": ["x"]}}')
    (home / ".gitconfig").write_text("[user]\n\tname = me\n\temail = me@example.com\n")
    proj = home / "proj"
    proj.mkdir()
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    (proj / "a.txt").write_text("a\n")
    return home


def snapshot(home: Path) -> dict[str, bytes]:
    """Every protected file's bytes (and the names in .git/hooks), to compare after."""
    paths = [
        ".local/share/harness/sessions/--p--/s1.jsonl",
        ".config/harness/approvals.key",
        ".config/harness/settings.json",
        ".gitconfig",
        "proj/.git/config",
    ]
    out = {p: (home / p).read_bytes() for p in paths}
    out["hooks"] = "\n".join(sorted(os.listdir(home / "proj/.git/hooks"))).encode()
    return out


# Commands whose protected target bash computes at run time: the text check approves them in
# bypass (asserted below), so only the sandbox stands between them and the files.
COMPUTED = [
    'd=.gi; echo "[core]\n\tfsmonitor = touch P" >> "${d}t/config"',
    'd=.gi; h="${d}t/hooks/pre-commit"; printf "#!/bin/sh\ntouch P\n" > "$h"; chmod +x "$h"',
    'd=.gi; mv "${d}t" moved && mkdir -p "${d}t"',
    'd=.gi; rm -rf "${d}t/hooks"',
    'h=harn; echo "{}" > "$HOME/.config/${h}ess/settings.json"',
    'h=harn; : > "$HOME/.config/${h}ess/approvals.key"',
    'h=harn; rm -rf "$HOME/.local/share/${h}ess"',
    'g=.gitcon; echo "[core] pager = touch P" >> "$HOME/${g}fig"',
]

# Reads of what is hidden: the output never holds the secret or the session.
COMPUTED_READS = [
    'h=harn; cat "$HOME/.config/${h}ess/approvals.key"',
    'h=harn; cat "$HOME"/.local/share/${h}ess/sessions/*/*.jsonl',
    'h=harn; grep -r precious "$HOME/.local/share/${h}ess"',
    'h=harn; tar cf - "$HOME/.local/share/${h}ess" | strings',
    'h=harn; ln "$HOME/.config/${h}ess/approvals.key" k2; cat k2',
]


async def run_commands(
    home: Path, commands: list[str], **supervisor: Any
) -> list[tuple[str, dict[str, Any]]]:
    """Run ``commands`` as one batch of bash calls through a real harness; each result's text
    and details."""
    calls = [FauxToolCall(name="bash", arguments={"command": c}) for c in commands]
    session = await MemorySessionRepo().create(str(home / "proj"))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[BASH],
        cwd=home / "proj",
        supervisor=SecuritySupervisor(setting_sources=(), **supervisor),
        resources=None,
    )
    await harness.prompt("go")
    return [
        (
            "".join(b.text for b in m.content if isinstance(b, TextContent)),
            dict(m.details) if isinstance(m.details, dict) else {},
        )
        for m in session.build_context().messages
        if m.role == "toolResult"
    ]


@pytest.mark.parametrize("command", COMPUTED)
async def test_a_computed_protected_name_is_approved_by_the_check_and_stopped_by_the_sandbox(
    home: Path, command: str
) -> None:
    decided = await SecuritySupervisor(mode="bypass", setting_sources=()).decide(
        make_request(home / "proj", BASH, command=command)
    )
    assert isinstance(decided, Approve)  # the text check misses it: the sandbox must hold
    before = snapshot(home)
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert snapshot(home) == before, text
    assert not (home / "proj" / "P").exists()


@pytest.mark.parametrize("command", COMPUTED_READS)
async def test_a_computed_read_of_the_key_or_a_session_finds_nothing(
    home: Path, command: str
) -> None:
    decided = await SecuritySupervisor(mode="bypass", setting_sources=()).decide(
        make_request(home / "proj", BASH, command=command)
    )
    assert isinstance(decided, Approve)
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert "secret-key-bytes" not in text and "precious" not in text, text
    assert not (home / "proj" / "k2").exists() or (home / "proj" / "k2").read_text() == ""


SH = "sh -c 'd=.gi; echo x >> ${d}t/config'"


@pytest.mark.parametrize(
    ("mode", "rules"),
    [
        ("bypass", None),
        ("accept_edits", {"allow": [f"bash({SH})"]}),
        ("dont_ask", {"allow": [f"bash({SH})"]}),
        ("default", {"allow": [f"bash({SH})"]}),
    ],
)
async def test_every_approval_without_a_person_is_sandboxed(
    home: Path, mode: str, rules: Any
) -> None:
    # An allow rule naming the command exactly approves it; what `sh -c` runs is computed, so
    # only the sandbox holds.
    before = snapshot(home)
    [(text, details)] = await run_commands(home, [SH], mode=mode, rules=rules)
    assert details["sandboxed"] is True, text
    assert snapshot(home) == before, text


class Yes:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, req: PermissionRequest) -> Approve:
        self.asked.append(req.operation_key)
        return Approve(reason="the user said yes")


async def test_a_command_a_person_approved_runs_unsandboxed(home: Path) -> None:
    yes = Yes()
    command = "d=.gi; echo '# mine' >> ${d}t/config"
    [(text, details)] = await run_commands(home, [command], approver=yes)
    assert yes.asked == [f"bash({command})"]
    assert details["sandboxed"] is False, text
    assert (home / "proj/.git/config").read_text().endswith("# mine\n")


async def test_asking_to_leave_the_sandbox_is_asked_even_in_bypass(home: Path) -> None:
    command = "d=.gi; echo '# mine' >> ${d}t/config"
    unsandboxed = {"command": command, "dangerouslyDisableSandbox": True}
    s = SecuritySupervisor(mode="bypass", setting_sources=())
    decided = await s.decide(make_request(home / "proj", BASH, **unsandboxed))
    assert isinstance(decided, Deny) and "outside the sandbox" in decided.reason
    s = SecuritySupervisor(mode="dont_ask", rules={"allow": ["bash"]}, setting_sources=())
    assert isinstance(await s.decide(make_request(home / "proj", BASH, **unsandboxed)), Deny)
    yes = Yes()
    calls = [FauxToolCall(name="bash", arguments=unsandboxed)]
    session = await MemorySessionRepo().create(str(home / "proj"))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[BASH],
        cwd=home / "proj",
        supervisor=SecuritySupervisor(mode="bypass", approver=yes, setting_sources=()),
        resources=None,
    )
    await harness.prompt("go")
    assert len(yes.asked) == 1
    assert (home / "proj/.git/config").read_text().endswith("# mine\n")


async def test_ordinary_work_runs_in_the_sandbox(home: Path, tmp_path: Path) -> None:
    """What a model does every day still works sandboxed: files in the folder, git add and
    commit (objects, index, refs), git's own reads of its config, a build writing into the
    temporary folder."""
    out = tmp_path / "build"
    commands = [
        "echo b > b.txt && mkdir -p src && echo c > src/c.txt",
        "git add -A && git commit -qm first && git log --oneline | wc -l",
        "git config --get user.name",
        f"mkdir -p {out} && echo built > {out}/artifact && cat {out}/artifact",
    ]
    results = await run_commands(home, commands, mode="bypass")
    assert [d["sandboxed"] for _t, d in results] == [True] * 4
    assert [d["exitCode"] for _t, d in results] == [0] * 4, results
    assert (home / "proj/b.txt").read_text() == "b\n"
    assert results[1][0].strip() == "1"
    assert results[2][0].strip() == "me"
    assert (out / "artifact").read_text() == "built\n"


async def test_a_sandboxed_command_cannot_undo_the_sandbox(home: Path) -> None:
    """Unmounting, remounting or going through another process's root leads nowhere: the
    command has no capabilities and sees only its own processes."""
    config = home / "proj/.git/config"
    computed = 'g=.gi; c="$PWD/${g}t/config"; '
    commands = [
        'umount "$c"; echo x >> "$c"',
        'mount -o remount,rw,bind "$c"; echo x >> "$c"',
        'for p in /proc/[0-9]*; do echo x >> "$p/root$c"; done',
        'nsenter -t 1 -m sh -c "echo x >> $c"',
        'cd "$PWD/${g}t" && echo x >> config',
    ]
    before = config.read_bytes()
    results = await run_commands(home, [computed + c for c in commands], mode="bypass")
    assert [d["sandboxed"] for _t, d in results] == [True] * len(commands), results
    assert config.read_bytes() == before


def test_without_bubblewrap_required_refuses_and_auto_runs_with_a_warning(
    home: Path, tmp_path: Path
) -> None:
    """Where bubblewrap is missing (another system): ``required`` refuses, ``auto`` runs the
    command unsandboxed and logs a warning; ``details["sandboxed"]`` says which. Run in a
    process whose PATH has bash and no bwrap (bwrap is looked up once per process)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    script = """
import asyncio, logging, sys
from pathlib import Path
from harness import SecuritySupervisor, ToolRun, bash_tool
from harness._permissions.protected import sandbox_paths

logging.basicConfig(stream=sys.stdout, format="LOG %(message)s")

async def main() -> None:
    async def no_update(partial: object) -> None:
        pass

    cwd = Path(sys.argv[1])
    run = ToolRun(tool_call_id="t", cwd=cwd, sandbox=sandbox_paths(cwd), on_update=no_update)
    try:
        await bash_tool(sandbox="required").execute({"command": "true"}, run)
    except Exception as exc:
        print("REFUSED", exc)
    result = await bash_tool().execute({"command": "echo ran"}, run)
    print("DETAILS", result.details)

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(home / "proj")],
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "REFUSED" in done.stdout and "bubblewrap" in done.stdout
    assert (
        "DETAILS {'exitCode': 0, 'truncated': False, 'timedOut': False, 'sandboxed': False}"
        in done.stdout
    )
    assert "LOG bash commands run unsandboxed" in done.stdout


@pytest.mark.parametrize(
    ("setup", "command", "name"),
    [
        # a first .git, with a hook, in a folder that had none
        (
            "plain",
            'd=.gi; git init -q && printf "#!/bin/sh\\ntouch P\\n" > "${d}t/hooks/pre-commit"',
            ".git",
        ),
        ("proj", 'h=.harn; mkdir "${h}ess" && echo "{}" > "${h}ess/settings.json"', ".harness"),
        ("proj", 'm=.mc; echo "{}" > "${m}p.json"', ".mcp.json"),
        ("link", 'm=.mc; rm "${m}p.json" && echo "{}" > "${m}p.json"', ".mcp.json"),
    ],
)
async def test_a_protected_name_the_command_makes_or_replaces_is_moved_aside(
    home: Path, setup: str, command: str, name: str
) -> None:
    """No mount can hold a name that does not exist yet, or a symlink: what the command
    leaves there is renamed aside (never deleted) and the result says so."""
    folder = home / "proj"
    if setup == "plain":
        folder = home / "plain"
        folder.mkdir()
    if setup == "link":
        (folder / "servers.json").write_text('{"mine": 1}')
        (folder / ".mcp.json").symlink_to("servers.json")
    decided = await SecuritySupervisor(mode="bypass", setting_sources=()).decide(
        make_request(folder, BASH, command=command)
    )
    assert isinstance(decided, Approve)
    calls = [FauxToolCall(name="bash", arguments={"command": command})]
    session = await MemorySessionRepo().create(str(folder))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[BASH],
        cwd=folder,
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        resources=None,
    )
    await harness.prompt("go")
    [result] = [m for m in session.build_context().messages if m.role == "toolResult"]
    assert result.is_error
    assert isinstance(result.details, dict)
    [[path, where]] = result.details["setAside"]
    assert path == str(folder / name)
    if setup == "link":  # the user's link is made again
        assert os.readlink(folder / name) == "servers.json"
    else:
        assert not os.path.lexists(folder / name)
    assert Path(where).parent == folder and Path(where).name.startswith(f"{name}.blocked-")
    assert "moved" in "".join(b.text for b in result.content if isinstance(b, TextContent))
    if setup == "link":
        assert (folder / "servers.json").read_text() == '{"mine": 1}'  # the target: read-only


async def test_a_persons_approval_never_reaches_a_later_call_after_an_abort(home: Path) -> None:
    """Review 7, finding 9: the run was aborted between a person's answer and the sandbox;
    the supervisor's note of that answer outlived the call, and a later call with the same id,
    approved by a rule, ran unsandboxed."""
    from harness._permissions.gate import Gate

    async def yes_then_abort(req: PermissionRequest) -> Approve:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # delivered at the gate's next await, after the answer
        return Approve()

    allowed = "echo allowed"
    supervisor = SecuritySupervisor(
        rules={"allow": [f"bash({allowed})"]}, approver=yes_then_abort, setting_sources=()
    )
    session = await MemorySessionRepo().create(str(home / "proj"))
    sender = object()

    async def suspends(sender: object, event: object) -> None:
        await asyncio.sleep(0)  # where the pending cancellation lands

    disconnect = connect("permission_decision", suspends, sender=sender)
    gate = Gate(
        supervisor=supervisor,
        sender=sender,
        session=session,
        cwd=home / "proj",
        depth=0,
        approvals=set(),
        write=lambda write: None,
    )
    call = ToolCall(id="same", name="bash", arguments={"command": "echo asked"})
    with pytest.raises(asyncio.CancelledError):
        await gate.check(call, BASH, {"command": "echo asked"})
    later = ToolCall(id="same", name="bash", arguments={"command": allowed})
    decided = await gate.check(later, BASH, {"command": allowed})
    disconnect()
    assert decided.denied is None
    assert decided.sandbox is not None


def _git(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["git", *map(str, args)], cwd=cwd, check=True, capture_output=True)


# Review 7: a folder above a protected path renamed away, a protected symlink replaced, a
# linked worktree's common git folder, an included git config, a new commondir, a nested
# submodule's git folder. (setup, command, the files that must stay as they were)
REVIEW_7 = [
    (
        "plain",
        'c=.con; mv "$HOME/${c}fig" "$HOME/cfg-old" && mkdir -p "$HOME/${c}fig/harness" '
        '&& echo "{}" > "$HOME/${c}fig/harness/settings.json"',
        [".config/harness/settings.json", ".config/harness/approvals.key"],
    ),
    (
        "plain",
        'l=.loc; mv "$HOME/${l}al/share" "$HOME/${l}al/sh-old"',
        [".local/share/harness/sessions/--p--/s1.jsonl"],
    ),
    (
        "gitconfig-link",
        'g=.gitcon; rm "$HOME/${g}fig" && printf "[core]\\n\\tpager = x\\n" > "$HOME/${g}fig"',
        [".gitconfig", "dotfiles/gitconfig"],
    ),
    (
        "config-link",
        'h=harn; rm "$HOME/.config/${h}ess" && mkdir "$HOME/.config/${h}ess" '
        '&& echo "{}" > "$HOME/.config/${h}ess/settings.json"',
        [".config/harness/settings.json"],
    ),
    (
        "worktree",
        'c=$(git rev-parse --git-common-dir); printf "[core]\\n\\tfsmonitor = touch P\\n" '
        '>> "$c/config"; printf "#!/bin/sh\\ntouch P\\n" > "$c/hooks/pre-commit"',
        ["proj/.git/config"],
    ),
    (
        "worktree-main",
        'd=.gi; echo /elsewhere > "${d}t/worktrees/wt/commondir"',
        ["proj/.git/worktrees/wt/commondir"],
    ),
    (
        "include",
        'g=.gitcon; printf "[core]\\n\\tfsmonitor = touch P\\n" >> "$HOME/${g}fig.local"',
        [".gitconfig.local"],
    ),
    ("plain", 'd=.gi; echo /elsewhere > "${d}t/commondir"', ["proj/.git/config"]),
    (
        "cwd-link",
        'c=$(git rev-parse --git-dir); printf "[core]\\n\\tfsmonitor = touch P\\n" >> "$c/config"',
        ["proj/.git/config"],
    ),
    (
        "nested-submodule",
        'd=.gi; echo "[core] fsmonitor = touch P" >> "${d}t/modules/b/modules/c/config"',
        ["proj/.git/modules/b/modules/c/config"],
    ),
]


@pytest.mark.parametrize(("setup", "command", "kept"), REVIEW_7)
async def test_review_7_ways_around_the_sandbox_change_nothing(
    home: Path, setup: str, command: str, kept: list[str]
) -> None:
    cwd = home / "proj"
    if setup == "gitconfig-link":
        (home / "dotfiles").mkdir()
        (home / ".gitconfig").rename(home / "dotfiles/gitconfig")
        (home / ".gitconfig").symlink_to(home / "dotfiles/gitconfig")
    if setup == "config-link":
        (home / ".config/harness").rename(home / "dotfiles-harness")
        (home / ".config/harness").symlink_to(home / "dotfiles-harness")
    if setup in ("worktree", "worktree-main"):
        _git(
            "-c",
            "user.name=me",
            "-c",
            "user.email=me@x",
            "commit",
            "-qm",
            "i",
            "--allow-empty",
            cwd=cwd,
        )
        _git("worktree", "add", "-q", home / "wt", cwd=cwd)
        if setup == "worktree":
            cwd = home / "wt"
    if setup == "cwd-link":  # the repository's folder, given through a link to a folder in it
        (cwd / "pkg").mkdir()
        (home / "pkglink").symlink_to(cwd / "pkg")
        cwd = home / "pkglink"
    if setup == "include":
        with (home / ".gitconfig").open("a") as f:
            f.write("[include]\n\tpath = ~/.gitconfig.local\n")
        (home / ".gitconfig.local").write_text("[user]\n\tname = me\n")
    if setup == "nested-submodule":
        for git in ("proj/.git/modules/b", "proj/.git/modules/b/modules/c"):
            (home / git).mkdir(parents=True)
            (home / git / "HEAD").write_text("ref: refs/heads/main\n")
            (home / git / "config").write_text("[core]\n\tbare = false\n")
    decided = await SecuritySupervisor(mode="bypass", setting_sources=()).decide(
        make_request(cwd, BASH, command=command)
    )
    assert isinstance(decided, Approve)  # the text check misses it
    before = {k: (home / k).read_bytes() for k in kept}
    hooks = sorted(os.listdir(home / "proj/.git/hooks"))
    session = await MemorySessionRepo().create(str(cwd))
    harness = AgentHarness(
        session=session,
        model=FauxModel(
            [
                FauxReply(tool_calls=[FauxToolCall(name="bash", arguments={"command": command})]),
                "ok",
            ]
        ),
        tools=[BASH],
        cwd=cwd,
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        resources=None,
    )
    await harness.prompt("go")
    assert {k: (home / k).read_bytes() for k in kept} == before
    assert sorted(os.listdir(home / "proj/.git/hooks")) == hooks
    assert not (home / "cfg-old").exists() and not (home / ".local/sh-old").exists()
    assert not (home / "proj/.git/commondir").exists()
    if setup == "gitconfig-link":
        assert (home / ".gitconfig").is_symlink()  # the user's link is made again
    if setup == "config-link":
        assert (home / ".config/harness").is_symlink()


def test_a_bwrap_a_command_could_plant_is_never_the_sandbox(tmp_path: Path) -> None:
    """Review 7, finding 11: a sandboxed command wrote a fake `bwrap` into `~/.local/bin`,
    first on PATH, and every later command ran unsandboxed."""
    planted = tmp_path / "bin"
    planted.mkdir()
    (planted / "bwrap").write_text('#!/bin/sh\nshift $(($# - 1)); exec sh -c "$1"\n')
    (planted / "bwrap").chmod(0o755)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from harness._tools.sandbox import _bwrap; print(_bwrap())",
        ],
        env={**os.environ, "PATH": f"{planted}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = done.stdout.strip()
    assert found != str(planted / "bwrap")
    assert found == os.path.realpath(shutil.which("bwrap") or "")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can write the kernel's settings")
async def test_root_in_the_sandbox_cannot_write_the_kernels_settings_or_the_system(
    home: Path,
) -> None:
    """Review 7, finding 12: root without capabilities still wrote
    /proc/sys/kernel/core_pattern (a program the kernel runs as root). Each write puts back
    the value already there, so a failure of the sandbox changes nothing."""
    commands = [
        'k=/proc/sys/kernel/core_pattern; v=$(cat "$k"); printf "%s\\n" "$v" > "$k"',
        'p=/sys/kernel/profiling; v=$(cat "$p"); printf "%s\\n" "$v" > "$p"',
        f"touch /etc/harness-sandbox-{os.getpid()}",
        f"touch /usr/bin/harness-sandbox-{os.getpid()}",
    ]
    results = await run_commands(home, commands, mode="bypass")
    for (text, details), command in zip(results, commands, strict=True):
        assert details["sandboxed"] is True
        assert details["exitCode"] != 0, command
        assert "Read-only file system" in text, (command, text)
    assert not os.path.exists(f"/etc/harness-sandbox-{os.getpid()}")
    assert not os.path.exists(f"/usr/bin/harness-sandbox-{os.getpid()}")


async def test_the_store_address_and_the_user_settings_are_not_the_commands(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 7, finding 13: a PostgreSQL store's URL, password included, was in the
    command's environment, and the user settings (which may name the store) were readable."""
    monkeypatch.setenv("HARNESS_SESSIONS_DIR", "postgresql://me:s3cretpw@127.0.0.1:1/harness")
    (home / ".config/harness/settings.json").write_text('{"store": "postgresql://me:s3cretpw@h/x"}')
    command = 'echo "[$HARNESS_SESSIONS_DIR]"; h=harn; cat "$HOME/.config/${h}ess/settings.json"'
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert "s3cretpw" not in text
    assert text.startswith("[]")


async def test_no_harness_variable_reaches_a_command(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 11, finding 1: `HARNESS_SERVE_TOKEN` reached sandboxed commands, which then read
    every session of every project through a running `harness serve`."""
    monkeypatch.setenv("HARNESS_SERVE_TOKEN", "t0ken-of-the-user-0123456789")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("HARNESS_SOMETHING_LATER", "x")
    monkeypatch.setenv("NOT_HARNESS_X", "kept")
    [(text, details)] = await run_commands(home, ["env | sort"], mode="bypass")
    assert details["sandboxed"] is True
    assert "t0ken-of-the-user" not in text
    assert not [line for line in text.splitlines() if line.startswith("HARNESS_")], text
    assert "NOT_HARNESS_X=kept" in text


async def test_an_aborted_command_has_its_protected_names_set_aside(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 8, finding 1: a command cancelled while it ran (the user's abort, a run's
    timeout) skipped the setting aside, so the `.mcp.json` it made stayed. (The look that
    stops such a command is put off here, so the cancellation comes first.)"""
    from harness import ToolRun
    from harness._permissions.protected import sandbox_paths

    monkeypatch.setattr("harness._tools.bash._WATCH_EVERY_S", 600.0)

    async def no_update(partial: object) -> None:
        pass

    proj = home / "proj"
    run = ToolRun(tool_call_id="t", cwd=proj, sandbox=sandbox_paths(proj), on_update=no_update)
    command = 'm=.mc; echo "{}" > "${m}p.json"; sleep 30'
    task = asyncio.ensure_future(BASH.execute({"command": command}, run))
    for _ in range(100):  # until the command has made it
        await asyncio.sleep(0.05)
        if os.path.lexists(proj / ".mcp.json"):
            break
    assert os.path.lexists(proj / ".mcp.json")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not os.path.lexists(proj / ".mcp.json")
    assert [p.name for p in proj.iterdir() if p.name.startswith(".mcp.json.blocked-")]


@pytest.mark.parametrize(
    "command",
    [
        'm=.mc; echo "{}" > "${m}p.json"; sleep 5; touch after',
        # made again after each removal: still stopped at the first
        'm=.mc; for i in $(seq 500); do echo "{}" > "${m}p.json"; rm -f "${m}p.json"; '
        "sleep 0.01; done; touch after",
    ],
)
async def test_a_command_that_makes_a_protected_name_is_stopped_at_once(
    home: Path, command: str
) -> None:
    """Review 11, finding 10: a name no mount can hold (a missing `.mcp.json`, a first `.git`
    in the home folder) was set aside only when the command ended, so for as long as it ran
    another program (a shell prompt's `git status`, another harness) saw it. The command is
    now stopped at the first look that finds it; what it would have done next never runs."""
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert details["stoppedFor"] == str(home / "proj/.mcp.json"), details
    assert "stopped the command" in text
    assert not (home / "proj/after").exists()
    assert not (home / "proj/.mcp.json").exists()


async def test_a_link_made_above_a_watched_name_is_moved_and_what_it_leads_to_is_not(
    home: Path,
) -> None:
    """Review 12, finding 4: a watched name as written (`.config/lefthook.yml` in the working
    folder, `~/.local/lib/python3.X/site-packages`) resolved through a folder the command
    made a link: `set_aside` then renamed the file the link led to (the harness's own site
    folder, so it no longer started). What is moved is the link the command made."""
    outside = home / "outside"
    outside.mkdir()
    (outside / "lefthook.yml").write_text("mine\n")
    command = 'ln -s "$HOME/outside" .config'
    [(_, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert (outside / "lefthook.yml").read_text() == "mine\n"
    assert sorted(p.name for p in outside.iterdir()) == ["lefthook.yml"]
    [[path, where]] = details["setAside"]
    assert path == str(home / "proj/.config")
    assert os.readlink(where) == str(outside)
    assert not os.path.lexists(home / "proj/.config")


async def test_the_interpreter_and_its_libpython_are_read_only(home: Path) -> None:
    """Review 12, finding 5: the interpreter a venv links to and the `libpython` it maps (a
    pyenv, uv or conda build in the home folder) were writable from the sandbox, and run
    unsandboxed at the next start. Opening them for appending (no byte written) fails."""
    from harness._permissions.protected import _loaded_libraries

    targets = [os.path.realpath(sys.executable)]
    targets += [f for f in _loaded_libraries() if "libpython" in os.path.basename(f)]
    for target in targets:
        half = len(target) // 2
        # computed, so the text check does not see the path: the sandbox must hold
        command = f"p='{target[:half]}'; : >> \"${{p}}{target[half:]}\" && echo OPENED"
        decided = await SecuritySupervisor(mode="bypass", setting_sources=()).decide(
            make_request(home / "proj", BASH, command=command)
        )
        assert isinstance(decided, Approve)
        [(text, details)] = await run_commands(home, [command], mode="bypass")
        assert details["sandboxed"] is True
        assert "OPENED" not in text and details["exitCode"] != 0, (target, text)


async def test_a_bytecode_cache_kept_apart_is_read_only(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `$PYTHONPYCACHEPREFIX` (`sys.pycache_prefix`), the harness's next start runs the
    `.pyc` files there that match its modules' sources: a command must not write them."""
    cache = home / "pycache"
    (cache / "x").mkdir(parents=True)
    monkeypatch.setattr(sys, "pycache_prefix", str(cache))
    command = 'p=pyca; echo planted > "$HOME/${p}che/x/mod.cpython-311.pyc"'
    decided = await SecuritySupervisor(mode="bypass", setting_sources=()).decide(
        make_request(home / "proj", BASH, command=command)
    )
    assert isinstance(decided, Approve)
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert not (cache / "x/mod.cpython-311.pyc").exists(), text


async def test_every_import_path_entry_is_held_missing_ones_watched(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 13, findings 6 and 12: an editable install's source folder (a `.pth` path entry)
    took a `sitecustomize.py`, and a missing `lib/python311.zip` (the first standard library
    entry) could be made with one inside: both ran, unsandboxed, at the next start."""
    # in the temporary folder, where a sandboxed command may write (the home folder is
    # read-only to it whole)
    outside = home.parent / "outside"
    source = outside / "src"
    source.mkdir(parents=True)
    zipped = outside / "py/lib/python311.zip"
    zipped.parent.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [sys.path[0], str(zipped), str(source), *sys.path[1:]])
    # computed (`printenv`), so the text check cannot see the paths: the sandbox must hold
    commands = [
        'd=$(dirname $(printenv HO""ME))/outside; s=sitecust; '
        'echo "import os" > "$d/src/${s}omize.py"',
        'd=$(dirname $(printenv HO""ME))/outside; z=python311; echo x > "$d/py/lib/${z}.zip"; '
        "sleep 5; touch after",
    ]
    # one after the other: run at once, the first to end sets aside what the other made, and
    # that one, finding the name as it was, is not stopped
    results = [(await run_commands(home, [c], mode="bypass"))[0] for c in commands]
    assert [d["sandboxed"] for _t, d in results] == [True, True]
    assert not (source / "sitecustomize.py").exists(), results[0][0]
    assert not zipped.exists() and not (home / "proj/after").exists(), results[1][0]
    assert results[1][1]["stoppedFor"] == str(zipped)


async def test_the_default_config_places_are_held_when_xdg_config_home_is_elsewhere(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 13, finding 14: with `$XDG_CONFIG_HOME` elsewhere, `~/.config/git/config` and
    `~/.config/harness/settings.json` (what a git or a harness started without it reads) were
    neither held nor watched."""
    elsewhere = home / "xdg"
    (elsewhere / "harness").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(elsewhere))
    commands = [
        'd=$(printenv HO""ME); g=gi; mkdir -p "$d/.config/${g}t" && '
        'echo "[core] pager = touch P" > "$d/.config/${g}t/config"',
        'd=$(printenv HO""ME); h=harnes; echo "{}" > "$d/.config/${h}s/settings.json"',
    ]
    results = await run_commands(home, commands, mode="bypass")
    assert [d["sandboxed"] for _t, d in results] == [True, True]
    assert not (home / ".config/git").exists(), results[0][0]
    # the default harness folder (the fixture's) is seen empty and read-only
    assert (home / ".config/harness/settings.json").read_text() == (
        '{"permissions": {"deny": ["x"]}}'
    ), results[1][0]


async def test_a_version_managers_launcher_is_held(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 13, finding 17: started through a pyenv shim, the shim and pyenv's own code
    (`libexec`, every `pyenv.d/exec/*.bash` hook it sources) run before the harness, and
    were writable from the sandbox."""
    root = home.parent / "pyenvroot"  # in the temporary folder: writable but for what is held
    for folder in ("shims", "libexec", "bin", "plugins"):
        (root / folder).mkdir(parents=True)
    (root / "shims/harness").write_text("#!/bin/sh\nexec pyenv exec harness\n")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    commands = [
        'r=$(printenv PYENV_RO""OT); mkdir -p "$r/pyenv.d/exec" && '
        'echo "touch P" > "$r/pyenv.d/exec/zz.bash"; sleep 5; touch after',
        'r=$(printenv PYENV_RO""OT); echo "touch P" > "$r/shims/harness"',
    ]
    results = [(await run_commands(home, [c], mode="bypass"))[0] for c in commands]
    assert [d["sandboxed"] for _t, d in results] == [True, True]
    assert not (root / "pyenv.d").exists() and not (home / "proj/after").exists(), results
    assert "exec pyenv" in (root / "shims/harness").read_text(), results[1][0]


async def test_pre_commits_cached_hook_code_is_read_only(home: Path) -> None:
    """Review 13, finding 18: pre-commit's cache holds the hook code its installed git hook
    runs at the next commit; `.pre-commit-config.yaml` was held, the code it runs was not."""
    cached = home / ".cache/pre-commit/repoabc/black/__main__.py"
    cached.parent.mkdir(parents=True)
    cached.write_text("print('black')\n")
    command = (
        'd=$(printenv HO""ME); echo "import os" >> "$d/.cache/pre-commit/repoabc/black/__main__.py"'
    )
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert cached.read_text() == "print('black')\n", text


async def test_the_users_git_template_folder_is_held(home: Path) -> None:
    """Review 7, finding 19: `init.templateDir` (pre-commit's init-templatedir) was writable;
    a planted template hook runs at the user's next `git clone` or `git init`."""
    template = home / ".git-template"
    (template / "hooks").mkdir(parents=True)
    with (home / ".gitconfig").open("a") as f:
        f.write("[init]\n\ttemplateDir = ~/.git-template\n")
    command = 't=.git-templ; printf "#!/bin/sh\\ntouch P\\n" > "$HOME/${t}ate/hooks/post-checkout"'
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert os.listdir(template / "hooks") == [], text


async def test_another_processs_kept_output_is_empty_in_the_sandbox(home: Path) -> None:
    """Review 8, finding 3: another harness process's kept bash output (part of its session)
    was readable by a computed name."""
    other = Path(tempfile.gettempdir()) / f"harness-bash-{os.getpid() + 100000}-x.log"
    other.write_text("other-session-output")
    try:
        command = f'n=harness-ba; cat "{other.parent}/${{n}}sh-{os.getpid() + 100000}-x.log"'
        [(text, details)] = await run_commands(home, [command], mode="bypass")
        assert details["sandboxed"] is True
        assert "other-session-output" not in text
    finally:
        other.unlink()


async def test_a_store_inside_the_data_folder_still_runs_commands(home: Path) -> None:
    """Review 8, finding 7: with the CLI's default store (a folder in the data folder, both
    hidden) bubblewrap failed every command: it cannot make a mount point in a hidden
    folder."""
    from harness import ToolRun
    from harness._permissions.protected import sandbox_paths

    async def no_update(partial: object) -> None:
        pass

    proj = home / "proj"
    store = home / ".local/share/harness/sessions"
    walls = sandbox_paths(proj, [store, store / ".checkpoints"])
    run = ToolRun(tool_call_id="t", cwd=proj, sandbox=walls, on_update=no_update)
    result = await BASH.execute({"command": "echo ran"}, run)
    assert not isinstance(result, str)
    assert result.details == {
        "exitCode": 0,
        "truncated": False,
        "timedOut": False,
        "sandboxed": True,
    }


async def test_hooks_an_included_config_names_and_a_dangling_links_target_are_held(
    home: Path,
) -> None:
    """Review 8, findings 4 and 6: the hooks folder a `core.hooksPath` in an included git
    config names was writable, and so was the missing target of a protected symlink
    (`.mcp.json -> servers.json` before servers.json exists)."""
    hooks = home / "my-hooks"
    hooks.mkdir()
    (home / ".gitconfig.local").write_text(f"[core]\n\thooksPath = {hooks}\n")
    with (home / ".gitconfig").open("a") as f:
        f.write("[include]\n\tpath = ~/.gitconfig.local\n")
    (home / "proj" / ".mcp.json").symlink_to("servers.json")
    commands = [
        'h=my-ho; printf "#!/bin/sh\\ntouch P\\n" > "$HOME/${h}oks/pre-commit"',
        's=serv; echo "{}" > "${s}ers.json"',
    ]
    results = await run_commands(home, commands, mode="bypass")
    assert [d["sandboxed"] for _t, d in results] == [True, True]
    assert os.listdir(hooks) == []
    assert not (home / "proj" / "servers.json").exists()
    assert os.readlink(home / "proj" / ".mcp.json") == "servers.json"


def test_the_harness_never_runs_a_git_a_command_could_plant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 7, finding 11: a sandboxed command can write `~/.local/bin` (first on PATH);
    a `git` planted there was what the harness's own checkpoint scan ran, outside the
    sandbox, at the next start."""
    from harness._fs import program_path

    planted = tmp_path / "bin"
    planted.mkdir()
    (planted / "git").write_text("#!/bin/sh\ntouch P\n")
    (planted / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{planted}:{os.environ['PATH']}")
    found = program_path("git")
    assert found != str(planted / "git")
    assert os.path.realpath(found).startswith(("/usr/", "/bin/"))


async def test_an_included_git_config_is_protected_for_the_write_tool(home: Path) -> None:
    """Review 7, finding 6: `~/.gitconfig.local`, included by `~/.gitconfig`, was written by
    `write` in accept_edits when the working folder is the home folder."""
    from harness import write_tool

    with (home / ".gitconfig").open("a") as f:
        f.write("[include]\n\tpath = ~/.gitconfig.local\n")
    (home / ".gitconfig.local").write_text("[user]\n\tname = me\n")
    s = SecuritySupervisor(mode="accept_edits", setting_sources=())
    decided = await s.decide(
        make_request(home, write_tool(), path=".gitconfig.local", content="[core]\n")
    )
    assert isinstance(decided, Deny) and "protected path" in decided.reason, decided


@pytest.mark.parametrize("kind", ["state", "cache", "data"])
async def test_a_missing_harness_folder_is_made_before_the_command_and_hidden(
    home: Path, kind: str
) -> None:
    """Review 9, finding 1: with the state folder missing (no chat ever ran), a sandboxed
    command made it and put ``chat_history -> notes.txt`` in it; every later prompt of every
    project was appended where the model reads it. The harness's folders are made (0700)
    before the command, so the command sees them empty and read-only."""
    folder = home / {"state": ".local/state", "cache": ".cache", "data": ".local/share"}[kind]
    shutil.rmtree(folder / "harness", ignore_errors=True)
    (home / "proj/notes.txt").write_text("my notes\n")
    command = (
        f'd="$(printenv HO""ME)/{folder.relative_to(home)}/harn""ess"; mkdir -p "$d"; '
        'ln -s "$PWD/notes.txt" "$d/chat_history"'
    )
    [(_, details)] = await run_commands(home, [command], mode="bypass")
    assert details.get("sandboxed") is True
    assert (folder / "harness").is_dir()
    assert (folder / "harness").stat().st_mode & 0o777 == 0o700
    assert not os.path.lexists(folder / "harness/chat_history")


@pytest.mark.parametrize("length", [200, 240, 250, 255])
async def test_a_watched_name_too_long_for_its_blocked_name_is_still_set_aside(
    home: Path, length: int
) -> None:
    """Review 9, finding 9: the missing target of a protected link, under a name near 255
    bytes, could not be renamed to ``NAME.blocked-PID-N`` (``ENAMETOOLONG``) and stayed, so
    the link led to what the command wrote. The blocked name is cut to fit."""
    name = "m" * length
    proj = home / "proj"
    (proj / "config").mkdir()
    (proj / ".mcp.json").symlink_to(f"config/{name}")
    command = f'n=$(printf "m%.0s" $(seq {length})); echo "{{\\"planted\\": 1}}" > "config/$n"'
    [(_text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert not (proj / "config" / name).exists()
    [[path, where]] = details["setAside"]
    assert path == str(proj / "config" / name)
    assert where and Path(where).read_text() == '{"planted": 1}\n'
    assert len(os.fsencode(Path(where).name)) <= 255
    assert os.readlink(proj / ".mcp.json") == f"config/{name}"


@pytest.fixture
def python_site(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The site folders of the Python the harness runs on: a venv's ``site-packages`` that
    exists, beside ``home`` (where a sandboxed command may write but for what is held), and a
    user site in ``home`` that does not exist yet (``site`` is the standard library's:
    pointed here so no test writes the real installation)."""
    import site

    venv_site = home.parent / "venv/lib/python3.11/site-packages"
    venv_site.mkdir(parents=True)
    user_site = home / ".local/lib/python3.11/site-packages"
    monkeypatch.setattr(site, "getsitepackages", lambda prefixes=None: [str(venv_site)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user_site))
    return venv_site, user_site


async def test_the_harness_pythons_site_folders_are_held(
    home: Path, python_site: tuple[Path, Path]
) -> None:
    """Review 9, finding 5: a `.pth` a sandboxed command dropped into the site folder of the
    Python the harness runs on ran, unsandboxed, at the harness's next start; the user site
    (`pip install --user`) too, even before it exists."""
    venv_site, _user_site = python_site
    commands = [
        f's=site-pack; echo "import os" > "{venv_site.parent}/${{s}}ages/zz.pth"',
        's=site-pack; mkdir -p "$HOME/.local/lib/python3.11/${s}ages" && '
        'echo "import os" > "$HOME/.local/lib/python3.11/${s}ages/zz.pth"',
    ]
    for command in commands:  # the text check misses the computed names: the sandbox holds
        decided = await SecuritySupervisor(mode="bypass", setting_sources=()).decide(
            make_request(home / "proj", BASH, command=command)
        )
        assert isinstance(decided, Approve)
    results = await run_commands(home, commands, mode="bypass")
    assert [d["sandboxed"] for _t, d in results] == [True, True]
    assert os.listdir(venv_site) == [], results[0][0]
    assert "Read-only file system" in results[0][0]
    # the home folder is read-only to the command whole: the user site is never made
    assert not (home / ".local/lib").exists(), results[1][0]
    assert "Read-only file system" in results[1][0]


async def test_the_harness_pythons_site_folders_are_protected_for_tools_and_named_commands(
    home: Path, python_site: tuple[Path, Path]
) -> None:
    """Review 9, finding 5: `write` and a command naming the site folder are asked in every
    mode (denied in bypass without a person), like `.git/hooks`."""
    from harness import write_tool

    venv_site, user_site = python_site
    s = SecuritySupervisor(mode="bypass", setting_sources=())
    for path in (venv_site / "zz.pth", user_site / "usercustomize.py"):
        decided = await s.decide(
            make_request(home / "proj", write_tool(), path=str(path), content="import os\n")
        )
        assert isinstance(decided, Deny) and "protected path" in decided.reason, decided
    for command in (
        f"echo 'import os' > {venv_site}/zz.pth",
        "cp x.pth ~/.local/lib/python3.11/site-packages/",
        f"cd {venv_site}/.. && echo 'import os' > site-packages/zz.pth",
    ):
        decided = await s.decide(make_request(home / "proj", BASH, command=command))
        assert isinstance(decided, Deny) and "protected path" in decided.reason, command


def test_a_venv_in_the_working_folder_is_held_and_the_harness_source_there_is_not(
    home: Path, python_site: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project whose `.venv` runs the harness: the venv stays held (installing there needs
    the unsandboxed run a person approves); the harness's own source in the working folder
    is the project being worked on, and is not."""
    import site

    import harness
    from harness._permissions.protected import python_folders, sandbox_paths

    venv_site = home / "proj/.venv/lib/python3.11/site-packages"
    venv_site.mkdir(parents=True)
    monkeypatch.setattr(site, "getsitepackages", lambda prefixes=None: [str(venv_site)])
    assert str(venv_site) in sandbox_paths(home / "proj").read_only
    source = Path(harness.__file__).resolve().parent
    assert str(source) in python_folders(home / "proj")
    assert str(source) not in python_folders(source.parent)


@pytest.mark.parametrize("where", ["worktree", "include", "worktree-include"])
async def test_hooks_and_includes_of_the_worktree_config_are_held_and_asked(
    home: Path, where: str
) -> None:
    """Review 9, finding 17: a ``core.hooksPath`` in ``.git/config.worktree`` (read with
    ``extensions.worktreeConfig``) and the files a repository's config includes were neither
    asked nor held: a literal ``echo … >> tools/hooks/pre-commit`` or ``>> tools/git.inc``
    ran unasked and the next commit or status ran it."""
    proj = home / "proj"
    (proj / "tools/hooks").mkdir(parents=True)
    hook = proj / "tools/hooks/pre-commit"
    hook.write_text("#!/bin/sh\necho original\n")
    include = proj / "tools/git.inc"
    include.write_text("[user]\n\tname = x\n")
    _git("config", "extensions.worktreeConfig", "true", cwd=proj)
    if where == "worktree":
        _git("config", "--worktree", "core.hooksPath", "tools/hooks", cwd=proj)
        target, command = hook, 'echo "touch P" >> tools/hooks/pre-commit'
    elif where == "include":
        _git("config", "include.path", "../tools/git.inc", cwd=proj)
        target = include
        command = 'printf "[core]\\n\\tfsmonitor = touch P\\n" >> tools/git.inc'
    else:
        _git("config", "--worktree", "include.path", "../tools/git.inc", cwd=proj)
        target = include
        command = 'printf "[core]\\n\\tfsmonitor = touch P\\n" >> tools/git.inc'
    before = target.read_text()
    s = SecuritySupervisor(mode="bypass", setting_sources=())
    decided = await s.decide(make_request(proj, BASH, command=command))
    assert isinstance(decided, Deny), decided  # the text check names it
    written = await s.decide(
        make_request(proj, write_tool(), path=str(target.relative_to(proj)), content="x")
    )
    assert isinstance(written, Deny), written
    # computed, so only the sandbox holds it
    computed = command.replace("tools/", '"$(printf too)ls/"')
    [(_text, details)] = await run_commands(home, [computed], mode="bypass")
    assert details["sandboxed"] is True
    assert target.read_text() == before


@pytest.mark.parametrize("folder", [".agents", ".harness"])
async def test_a_project_skill_a_command_makes_is_set_aside(home: Path, folder: str) -> None:
    """Review 10, finding 1: a sandboxed command wrote ``.agents/skills/helper/SKILL.md``,
    whose ``build`` a trusted project runs unsandboxed."""
    # computed, so the text check cannot read the name
    computed = '"${d}' + folder[-2:] + '"'
    command = (
        f"d={folder[:-2]}; mkdir -p {computed}/skills/helper && printf '%s\\n' --- "
        f"'name: helper' 'description: helps' 'build: touch P' --- "
        f"> {computed}/skills/helper/SKILL.md"
    )
    [(_text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert not (home / "proj" / folder / "skills" / "helper" / "SKILL.md").exists()
    assert details.get("setAside")


async def test_a_later_calls_sandbox_holds_what_an_earlier_call_of_the_reply_made(
    home: Path,
) -> None:
    """Review 10, finding 9: every call of a reply was decided, its sandbox found, before any
    ran; a person-approved ``git init`` made ``.git`` and the later unasked call (bypass)
    wrote ``.git/hooks/pre-commit`` through a sandbox that did not hold it."""
    work = home / "plain"
    work.mkdir()
    asked: list[str] = []

    async def person(request: PermissionRequest) -> Approve:
        asked.append(str(request.input.get("command")))
        return Approve()

    calls = [
        FauxToolCall(
            name="bash", arguments={"command": "git init -q", "dangerouslyDisableSandbox": True}
        ),
        FauxToolCall(name="write", arguments={"path": "hook.sh", "content": "#!/bin/sh\nid\n"}),
        FauxToolCall(
            name="bash",
            arguments={"command": "cp hook.sh $(printf .gi)t/hooks/pre-commit && echo copied"},
        ),
    ]
    session = await MemorySessionRepo().create(str(work))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[BASH, write_tool()],
        cwd=work,
        supervisor=SecuritySupervisor(mode="bypass", approver=person, setting_sources=()),
        resources=None,
    )
    await harness.prompt("go")
    assert asked == ["git init -q"]
    assert (work / ".git" / "HEAD").exists()
    assert not (work / ".git" / "hooks" / "pre-commit").exists()
    [*_, last] = [m for m in session.build_context().messages if m.role == "toolResult"]
    assert isinstance(last.details, dict) and last.details["sandboxed"] is True
    assert last.is_error


async def test_pythonpath_folders_outside_the_working_folder_are_held(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 10, finding 8: a sandboxed command planted ``sitecustomize.py`` in a
    ``$PYTHONPATH`` folder, which ran unsandboxed at the harness's next start. A
    ``$PYTHONPATH`` folder inside the working folder is the project's source and stays
    writable."""
    pylib = home / "pylib"
    pylib.mkdir()
    src = home / "proj" / "src"
    src.mkdir()
    monkeypatch.setenv("PYTHONPATH", f"{pylib}{os.pathsep}{src}")
    command = 'd=$(echo cHlsaWI= | base64 -d); echo "import os" > "$HOME/$d/sitecustomize.py"'
    results = await run_commands(home, [command, "echo x > src/mod.py"], mode="bypass")
    details = results[0][1]
    assert details["sandboxed"] is True
    assert not (pylib / "sitecustomize.py").exists()
    assert (src / "mod.py").read_text() == "x\n"
    s = SecuritySupervisor(mode="bypass", setting_sources=())
    written = await s.decide(
        make_request(home / "proj", write_tool(), path=str(pylib / "sitecustomize.py"), content="")
    )
    assert isinstance(written, Deny)


def test_a_sandboxed_command_cannot_reach_the_users_terminals(tmp_path: Path) -> None:
    """Review 10, finding 4: the sandbox bound the host's ``/dev``, so a command wrote an
    OSC 52 clipboard write and a screen clear straight to ``/dev/pts/N``, past every escaper."""
    import pty

    master, slave = pty.openpty()
    name = os.ttyname(slave)
    try:
        walls = sandbox_paths(tmp_path)
        argv = sandboxed(
            ["bash", "-c", f"printf '\\033]52;c;cHduZWQ=\\007' > {name}; echo $?; ls /dev/pts"],
            walls,
            str(tmp_path),
        )
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.stdout.splitlines()[0] != "0", (done.stdout, done.stderr)  # the write failed
        assert os.path.basename(name) not in done.stdout.split()[1:], (name, done.stdout)
        os.set_blocking(master, False)
        try:
            seen = os.read(master, 1024)
        except BlockingIOError:
            seen = b""
        assert b"\x1b]52" not in seen
    finally:
        os.close(master)
        os.close(slave)


async def test_the_harness_command_on_the_path_is_held(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Review 11, finding 8: pipx and `uv tool` put the `harness` the user types in
    ~/.local/bin (a link into the tool's venv); a bypass command replaced it, and the next
    `harness` ran what it wrote."""
    from harness._permissions.protected import python_folders

    tool_bin = tmp_path / "tool-venv" / "bin"
    tool_bin.mkdir(parents=True)
    (tool_bin / "harness").write_text("#!/bin/sh\necho real\n")
    (tool_bin / "harness").chmod(0o755)
    local_bin = home / ".local" / "bin"
    local_bin.mkdir(parents=True, exist_ok=True)
    (local_bin / "harness").symlink_to(tool_bin / "harness")
    monkeypatch.setenv("PATH", f"{local_bin}{os.pathsep}{os.environ['PATH']}")
    assert str(local_bin) in python_folders(home / "proj")
    command = 'b=.local; rm ~/$b/bin/harness; printf "#!/bin/sh\\necho P\\n" > ~/$b/bin/harness'
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert (local_bin / "harness").is_symlink(), text
    assert os.readlink(local_bin / "harness") == str(tool_bin / "harness")


async def test_another_processs_output_kept_while_a_command_runs_is_hidden_too(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 11, finding 2: the sandbox emptied only the logs present when its command
    started; a command that polled read another process's output kept later."""
    from harness._fs import bash_log_folder

    # a temporary folder of the test's own (not one an earlier test cached, nor the one other
    # test runs on this machine share)
    (tmp_path / "t").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "t"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    folder = bash_log_folder()
    assert folder is not None and (os.stat(folder).st_mode & 0o777) == 0o700
    later = Path(folder) / f"harness-bash-{os.getpid() + 100000}-later.log"
    command = (
        f"for i in $(seq 40); do cat {folder}/*.log 2>/dev/null | grep -a -o 'OTHER-SECRET'; "
        "sleep 0.1; done | sort -u; echo done"
    )

    async def write_later() -> None:
        await asyncio.sleep(0.5)
        later.write_text("OTHER-SECRET\n")

    try:
        writer = asyncio.ensure_future(write_later())
        [(text, details)] = await run_commands(home, [command], mode="bypass")
        await writer
    finally:
        later.unlink(missing_ok=True)
    assert details["sandboxed"] is True
    assert "done" in text and "OTHER-SECRET" not in text, text


def test_this_processs_kept_output_goes_to_the_private_log_folder(tmp_path: Path) -> None:
    from harness import ToolRun
    from harness._fs import bash_log_folder

    async def no_update(partial: object) -> None:
        pass

    run = ToolRun(tool_call_id="t", cwd=tmp_path, on_update=no_update)
    result = asyncio.run(BASH.execute({"command": "seq 1 200000"}, run))
    assert not isinstance(result, str)
    kept = result.details["fullOutputPath"]  # type: ignore[index]
    assert os.path.dirname(kept) == bash_log_folder()


@pytest.mark.parametrize(
    "command",
    [
        'echo "touch P" >> "$HOME/.bashrc"',
        'echo "node-options=--require=/x" > "$HOME/.npmrc"',
        'mkdir -p "$HOME/.config/fish" && echo x > "$HOME/.config/fish/config.fish"',
        'g=.gi; mkdir -p "$HOME/${g}t/hooks"',
        'mkdir -p "$HOME/elsewhere" && echo x > "$HOME/elsewhere/f"',
        'p=$(dirname "$PWD"); echo x > "$p/beside"',
    ],
)
async def test_a_sandboxed_command_writes_only_in_the_working_and_temporary_folders(
    home: Path, tmp_path: Path, command: str
) -> None:
    """Reviews 9 to 13 each found another place outside the working folder whose files run
    unsandboxed at a later start (a shell's rc file, `~/.npmrc`, a version manager's hook, a
    first `.git` in the home folder) and was writable from the sandbox. As in Claude Code's
    sandbox, a command now writes only in the working folder, the folders the user added and
    the temporary folder; the home folder is read-only whole, even inside the temporary
    folder (as here)."""
    before = snapshot(home)
    [(text, details)] = await run_commands(home, [command], mode="bypass")
    assert details["sandboxed"] is True
    assert "Read-only file system" in text, text
    assert snapshot(home) == before, text
    [(text, _)] = await run_commands(
        home,
        [
            f"echo x > x && echo y > {tmp_path}/y && "
            f"z={tempfile.gettempdir()}/harness-test-z-$$; echo z > $z && rm $z; cat x"
        ],
        mode="bypass",
    )
    assert text.strip() == "x" and (tmp_path / "y").read_text() == "y\n", text


async def test_the_users_allow_write_and_added_folders_are_writable_and_a_projects_are_not(
    home: Path,
) -> None:
    """Claude Code's `sandbox.filesystem.allowWrite` and `permissions.additionalDirectories`
    in the user's settings widen where a sandboxed command writes; an untrusted project's
    never do (it could name `~/.bashrc`'s folder)."""
    for name in ("built", "added", "project-said"):
        (home / name).mkdir()
    (home / ".config/harness/settings.json").write_text(
        '{"sandbox": {"filesystem": {"allowWrite": ["~/built"]}},'
        ' "permissions": {"additionalDirectories": ["../added"]}}'
    )
    (home / "proj/.harness").mkdir()
    (home / "proj/.harness/settings.json").write_text(
        '{"sandbox": {"filesystem": {"allowWrite": ["~/project-said", "~"]}}}'
    )
    calls = [
        f"echo x > {home}/built/f",
        f"echo x > {home}/added/f",
        f"echo x > {home}/project-said/f",
        'echo x >> "$HOME/.bashrc"',
    ]
    results = await run_commands_with_settings(home, calls)
    assert [d["exitCode"] for _t, d in results] == [0, 0, 1, 1], results
    assert (home / "built/f").read_text() == (home / "added/f").read_text() == "x\n"
    assert not (home / "project-said/f").exists() and not (home / ".bashrc").exists()


async def run_commands_with_settings(
    home: Path, commands: list[str]
) -> list[tuple[str, dict[str, Any]]]:
    """Run ``commands`` one after the other in ``bypass`` with the user's and the project's
    settings read; each result's text and details."""
    out = []
    for command in commands:
        session = await MemorySessionRepo().create(str(home / "proj"))
        harness = AgentHarness(
            session=session,
            model=FauxModel(
                [
                    FauxReply(
                        tool_calls=[FauxToolCall(name="bash", arguments={"command": command})]
                    ),
                    "ok",
                ]
            ),
            tools=[BASH],
            cwd=home / "proj",
            supervisor=SecuritySupervisor(mode="bypass"),
            resources=None,
        )
        await harness.prompt("go")
        [result] = [m for m in session.build_context().messages if m.role == "toolResult"]
        text = "".join(b.text for b in result.content if isinstance(b, TextContent))
        out.append((text, dict(result.details) if isinstance(result.details, dict) else {}))
    return out


async def test_the_protected_names_of_an_added_folder_are_held(home: Path) -> None:
    """Review 14, finding 1: a folder the user added (`additionalDirectories`, `allowWrite`)
    was writable whole: a bypass command planted its repository's `.git/hooks/pre-commit`,
    rewrote its `.harness/settings.json` and made a `.mcp.json`. It is guarded as the working
    folder is."""
    lib = home / "lib"
    lib.mkdir()
    subprocess.run(["git", "init", "-q", str(lib)], check=True)
    (lib / ".harness").mkdir()
    (lib / ".harness/settings.json").write_text("{}")
    (home / ".config/harness/settings.json").write_text(
        '{"permissions": {"additionalDirectories": ["../lib"]}}'
    )

    def held() -> dict[str, bytes]:
        files = [lib / ".git/config", lib / ".harness/settings.json"]
        files += sorted((lib / ".git/hooks").iterdir())
        return {str(f): f.read_bytes() for f in files}

    before = held()
    results = await run_commands_with_settings(
        home,
        [
            "echo ok > ../lib/plain.txt",
            'g=.gi; echo "id" > ../lib/${g}t/hooks/pre-commit',
            'h=.harnes; echo "{}" > ../lib/${h}s/settings.json',
            'g=.gi; printf "[core]\\nfsmonitor = id\\n" >> ../lib/${g}t/config',
            'm=.mcp.jso; echo "{}" > ../lib/${m}n',
        ],
    )
    assert results[0][1]["exitCode"] == 0 and (lib / "plain.txt").read_text() == "ok\n"
    assert [d["exitCode"] != 0 for _t, d in results[1:4]] == [True] * 3, results
    # a missing name no mount holds: watched, and what the command made is set aside
    assert "setAside" in results[4][1] or "stoppedFor" in results[4][1], results[4]
    assert held() == before
    assert not (lib / ".mcp.json").exists()


async def test_an_added_folder_a_command_links_elsewhere_is_not_writable(
    home: Path, tmp_path: Path
) -> None:
    """Review 14, finding 3: an added folder that did not exist, in the writable temporary
    folder, became whatever a sandboxed command linked there (`ln -s ~ /tmp/added`), and the
    next command wrote `~/.bashrc`. A folder whose name passes through a symlink is not
    added."""
    added = tmp_path / "added"
    (home / ".config/harness/settings.json").write_text(
        json.dumps({"sandbox": {"filesystem": {"allowWrite": [str(added)]}}})
    )
    results = await run_commands_with_settings(
        home,
        [
            f'ln -s "$(printenv HO""ME)" {added}',
            f'echo "echo PWNED" >> {added}/.bashrc',
            'echo "echo PWNED" >> "$HOME/.bashrc"',
        ],
    )
    assert results[0][1]["exitCode"] == 0, results
    assert [d["exitCode"] for _t, d in results[1:]] == [1, 1], results
    assert not (home / ".bashrc").exists()


async def test_a_missing_pre_commit_cache_in_an_allowed_folder_is_watched(home: Path) -> None:
    """Review 14, finding 2: with `~/.cache` in `allowWrite`, a command made pre-commit's
    missing cache with a planted hook repository, which the installed git hook would run
    unsandboxed at the next commit. The missing cache is watched: what is made there is set
    aside."""
    (home / ".config/harness/settings.json").write_text(
        '{"sandbox": {"filesystem": {"allowWrite": ["~/.cache"]}}}'
    )
    [(text, details)] = await run_commands_with_settings(
        home,
        [
            "c=$(printenv XDG_CACHE_HOME); echo x > $c/other && mkdir -p $c/pre-commit/r && "
            "echo planted > $c/pre-commit/r/hook.py"
        ],
    )
    assert (home / ".cache/other").read_text() == "x\n", text
    assert not (home / ".cache/pre-commit").exists(), (text, details)


def test_a_huge_modules_folder_is_listed_only_up_to_a_bound(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 14, finding 4: a sandboxed command made 300,000 folders in `.git/modules`, and
    every later command's sandbox listed them all (15 s a command, growing without bound).
    The listings of `modules/` and `worktrees/` share one bound of entries."""
    import harness._permissions.protected as protected

    modules = home / "proj/.git/modules"
    modules.mkdir()
    for i in range(6000):
        (modules / f"m{i}").mkdir()
    seen: list[str] = []
    real_scandir = os.scandir

    class Counting:
        """os.scandir, counting the entries read under `.git/modules`."""

        def __init__(self, path: Any) -> None:
            self.entries = real_scandir(path)

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.entries.close()

        def __iter__(self) -> Counting:
            return self

        def __next__(self) -> os.DirEntry[str]:
            entry = next(self.entries)
            if "/.git/modules/" in entry.path:
                seen.append(entry.path)
            return entry

    monkeypatch.setattr(protected.os, "scandir", Counting)
    walls = sandbox_paths(home / "proj")
    assert str(home / "proj/.git/config") in walls.read_only
    assert 0 < len(seen) <= 4096, len(seen)


async def test_a_launchers_package_cache_in_an_allowed_folder_is_read_only(home: Path) -> None:
    """Review 15, finding 8: with `~/.npm` in `allowWrite` (as the docs suggest for builds), a
    command patched a package in npx's cache, which the user's `npx`-launched MCP server ran
    unsandboxed at the next start. npx's, uv's and pipx's caches of what they launch are held
    as pre-commit's is."""
    package = home / ".npm/_npx/8ca6/node_modules/srv/index.js"
    package.parent.mkdir(parents=True)
    package.write_text("original\n")
    (home / ".config/harness/settings.json").write_text(
        '{"sandbox": {"filesystem": {"allowWrite": ["~/.npm"]}}}'
    )
    [(_, wrote), (text, patched)] = await run_commands_with_settings(
        home,
        [
            'echo x > "$HOME/.npm/other"',
            'for f in "$HOME"/.npm/_npx/*/node_modules/srv/index.js; do echo pwned > "$f"; done',
        ],
    )
    assert wrote["exitCode"] == 0 and (home / ".npm/other").read_text() == "x\n"
    assert patched["exitCode"] != 0 and "Read-only file system" in text, text
    assert package.read_text() == "original\n"
