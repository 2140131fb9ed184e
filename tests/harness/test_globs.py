"""Path globs (``harness._globs``): permission rules' paths and the find and grep tools'
patterns match in time linear in the path (RE2), braces expand to a bounded number of
alternatives, and a pattern matches exactly what docs/permissions.md says.

Hostile patterns run in a child process with a timeout: before, wcmatch's backtracking
expression for ``**/a*/**/a*/…/b`` against a deep path did not finish for minutes (a project's
deny rule, or a model's ``find`` pattern, stalled every call)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from permission_requests import request

from harness import (
    AgentHarness,
    Approve,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    SecuritySupervisor,
    read_tool,
    write_tool,
)
from harness._globs import GlobError, compile_glob
from harness._permissions.rules import Rule, load_settings

# (pattern, path that may make a backtracking matcher explode)
HOSTILE = [
    ("**/a*/" * 14 + "b", "a/" * 60 + "c"),
    ("*a" * 30 + "b", "a" * 200),
    ("**/" + "*a" * 20 + "/b", "aaaa/" * 40),
    ("a**" * 25 + "b", "a" * 300),
    ("[a-z]*" * 20 + "!", "a" * 200),
    ("**/" * 40 + "x", "y/" * 100 + "z"),
]


def _in_child(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter; a stall fails the test at the timeout."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_hostile_rules_and_paths_never_stall_a_decision(tmp_path: Path) -> None:
    code = f"""
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).parents[1] / "fixtures")!r})
from permission_requests import request
from harness import SecuritySupervisor, read_tool
cases = {HOSTILE!r}
work = Path({str(tmp_path)!r})
async def main():
    for pattern, path in cases:
        s = SecuritySupervisor(
            mode="default", setting_sources=(), rules={{"deny": [f"read({{pattern}})"]}}
        )
        d = await s.decide(request(work, read_tool(), path=path))
        print(type(d).__name__)
asyncio.run(main())
"""
    done = _in_child(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Approve"] * len(HOSTILE)  # none matches; each decided


def test_a_hostile_find_pattern_never_stalls_the_tool(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*(["a"] * 30))
    deep.mkdir(parents=True)
    (deep / "c").write_text("")
    pattern = "**/a*/" * 14 + "b"
    code = f"""
import asyncio
from pathlib import Path
from harness import AgentHarness, FauxModel, FauxReply, FauxToolCall, JsonlSessionRepo, find_tool
from harness import MessageEntry, ToolResultMessage
async def main():
    work = Path({str(tmp_path)!r})
    session = await JsonlSessionRepo(work / ".sessions").create(str(work))
    call = FauxToolCall(name="find", arguments={{"pattern": {pattern!r}}})
    h = AgentHarness(session=session, model=FauxModel([FauxReply(tool_calls=[call]), "ok"]),
                     tools=[find_tool()], cwd=work)
    await h.prompt("go")
    (result,) = [e.message for e in session.entries() if isinstance(e, MessageEntry)
                 and isinstance(e.message, ToolResultMessage)]
    print(result.is_error, result.text.splitlines()[0])
asyncio.run(main())
"""
    done = _in_child(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("False No files found")


@pytest.mark.parametrize(("pattern", "path", "matched"), [(p, q, False) for p, q in HOSTILE])
def test_hostile_patterns_match_as_globs(pattern: str, path: str, matched: bool) -> None:
    assert compile_glob(pattern).matches(path) is matched


# (pattern, path, whether it matches): what docs/permissions.md says a rule's glob matches
SEMANTICS = [
    ("src/**", "src/a.py", True),
    ("src/**", "src/a/b/c.py", True),
    ("src/**", "src", False),  # beneath src, not src itself
    ("src/**", "srcx/a", False),
    ("**/.env", ".env", True),
    ("**/.env", "a/b/.env", True),
    ("**/.env", "a/b/.envrc", False),
    ("*.py", "a.py", True),
    ("*.py", "a/b.py", False),  # "*" never crosses a "/"
    ("**/*.py", "a/b/c.py", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/**/b", "a/xb", False),
    ("*", ".env", True),  # hidden files match
    ("*", ".", False),  # "." and ".." only when written out
    ("**", "..", False),
    ("src/*.{js,ts}", "src/a.ts", True),
    ("src/*.{js,ts}", "src/a.jsx", False),
    ("{1..3}.txt", "2.txt", True),
    ("{1..3}.txt", "4.txt", False),
    ("a?c", "abc", True),
    ("a?c", "a/c", False),
    ("[!a]x", "bx", True),
    ("[!a]x", "ax", False),
    ("[!a]x", "/x", False),
    ("a[.-0]x", "a/x", False),  # a range never stands for "/"
    ("a[.-0]x", "a0x", True),
    ("[[:punct:]]x", "/x", False),
    ("[[:alpha:]]x", "bx", True),
    ("a\\*b", "a*b", True),
    ("a\\*b", "axb", False),
    ("a\\{b,c\\}", "a{b,c}", True),
    ("a\\{b,c\\}", "ab", False),
    ("a**b", "axxb", True),
    ("a**b", "ax/b", False),
    ("[a", "[a", True),
    ("~/x", "~/x", True),  # a "~" in a pattern is a character; rules expand it, not globs
    ("x", "x\ny", False),
    ("*", "x\ny", True),
    # a file name that is no UTF-8 (a lone surrogate once decoded) is matched by wildcards
    ("**/secret*", os.fsdecode(b"a/secret\xff"), True),
    ("a/?", os.fsdecode(b"a/\xff"), True),
    ("a/[!x]", os.fsdecode(b"a/\xff"), True),
    ("a/b", os.fsdecode(b"a/\xff"), False),
]


@pytest.mark.parametrize(("pattern", "path", "matched"), SEMANTICS)
def test_what_a_glob_matches(pattern: str, path: str, matched: bool) -> None:
    assert compile_glob(pattern).matches(path) is matched


def test_braces_expand_to_a_bounded_number_of_alternatives(tmp_path: Path) -> None:
    bomb = "{a,b}" * 12  # 4,096 alternatives
    with pytest.raises(GlobError, match="more than 256 alternatives"):
        compile_glob(bomb)
    with pytest.raises(GlobError, match="longer than"):
        compile_glob("a" * 5000)
    with pytest.raises(ValueError, match="more than 256 alternatives"):
        Rule.parse(f"read({bomb})")
    (tmp_path / ".harness").mkdir()
    settings = tmp_path / ".harness" / "settings.json"
    settings.write_bytes(orjson.dumps({"permissions": {"deny": ["read(x)", f"read({bomb})"]}}))
    with pytest.raises(ValueError, match=r"permissions.deny\[1\]"):
        load_settings(settings)
    # a rule built directly, past parsing, fails closed: it denies and never allows
    rule = Rule("read", bomb, f"read({bomb})")
    assert rule.matches_path("anything", how="any")
    assert not rule.matches_path("anything", how="all")


async def test_a_project_brace_bomb_denies_with_the_file_named(tmp_path: Path) -> None:
    (tmp_path / ".harness").mkdir()
    (tmp_path / ".harness" / "settings.json").write_bytes(
        orjson.dumps({"permissions": {"deny": ["read(" + "{a,b}" * 12 + ")"]}})
    )
    s = SecuritySupervisor(mode="bypass", setting_sources=("project",))
    decision = await s.decide(request(tmp_path, read_tool(), path="a.txt"))
    assert isinstance(decision, Deny) and "settings.json" in decision.reason


async def test_allow_rules_match_no_more_than_their_glob(tmp_path: Path) -> None:
    s = SecuritySupervisor(
        mode="dont_ask", setting_sources=(), rules={"allow": ["write(src/*.py)"]}
    )
    assert isinstance(await s.decide(request(tmp_path, write_tool(), path="src/a.py")), Approve)
    for path in ("src/sub/a.py", "src/a.pyc", "a.py", "src/.py/x"):
        assert isinstance(await s.decide(request(tmp_path, write_tool(), path=path)), Deny), path


# --- ~ ----------------------------------------------------------------------------------------


async def _write(work: Path, path: str, rule: str, tmp_path: Path) -> bool:
    """Whether the write tool, asked to write ``path`` in ``dont_ask`` mode under the allow rule
    ``rule``, was approved (and so wrote)."""
    repo = JsonlSessionRepo(tmp_path / f"sessions-{len(list(tmp_path.iterdir()))}")
    session = await repo.create(str(work))
    call = FauxToolCall(name="write", arguments={"path": path, "content": "x"})
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[call]), "done"]),
        tools=[write_tool()],
        supervisor=SecuritySupervisor(mode="dont_ask", setting_sources=(), rules={"allow": [rule]}),
        cwd=work,
    )
    decisions: list[str] = []
    harness.connect("permission_decision", lambda s, event: decisions.append(event.decision))
    await harness.prompt("go")
    return decisions == ["approve"]


async def test_the_write_tool_writes_where_the_rule_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(work))  # the user works in their home folder
    # the rule saw notes.txt, so the tool writes notes.txt: never a "~" folder's file
    assert await _write(work, "~/notes.txt", "write(notes.txt)", tmp_path)
    assert (work / "notes.txt").exists() and not (work / "~").exists()


async def test_a_tilde_path_is_the_folder_named_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    (work / "~").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    # a rule for ~/x (the home folder) is never satisfied by the workspace's "~" folder...
    assert not await _write(work, "./~/x", "write(~/x)", tmp_path)
    assert not (work / "~" / "x").exists()
    assert await _write(work, "~/x", "write(~/x)", tmp_path)
    assert (home / "x").read_text() == "x" and not (work / "~" / "x").exists()
    (home / "x").unlink()
    # ...and a rule for that folder never by the home folder
    assert not await _write(work, "~/x", "write(./~/x)", tmp_path)
    assert not await _write(work, "~/x", "write(\\~/x)", tmp_path)
    assert not (home / "x").exists()
    assert await _write(work, "./~/x", "write(./~/x)", tmp_path)
    assert (work / "~" / "x").exists() and not (home / "x").exists()
    # rules see the path as the tool opens it
    assert request(work, read_tool(), path="~/.ssh/id").paths[-1] == str(home / ".ssh" / "id")
    assert request(work, read_tool(), path="./~/.ssh/id").paths == ("~/.ssh/id",)
    assert request(work, read_tool(), path="~user/x").paths == ("~user/x",)


# (rule, path, denied by a deny rule, approved by the same rule as an allow rule in dont_ask)
FLOATING = [
    ("write(.env)", ".env", True, True),
    ("write(.env)", "sub/.env", True, False),  # gitignore: a name without "/" at any depth
    ("write(*.key)", "a/b/c.key", True, False),
    ("write(./.env)", "sub/.env", False, False),  # "./" anchors it at the working folder
    ("write(src/*.py)", "lib/src/a.py", False, False),  # a "/" anchors it too
    ("write(*.py)", "a.py", True, True),
]


@pytest.mark.parametrize(("rule", "path", "denied", "approved"), FLOATING)
async def test_a_name_without_a_slash_is_denied_at_any_depth_and_allowed_only_at_the_top(
    tmp_path: Path, rule: str, path: str, denied: bool, approved: bool
) -> None:
    deny = SecuritySupervisor(mode="bypass", setting_sources=(), rules={"deny": [rule]})
    allow = SecuritySupervisor(mode="dont_ask", setting_sources=(), rules={"allow": [rule]})
    req = request(tmp_path, write_tool(), path=path, content="x")
    assert isinstance(await deny.decide(req), Deny) is denied
    assert isinstance(await allow.decide(req), Approve) is approved


def test_braces_nested_past_the_cap_are_a_pattern_error_not_a_crash() -> None:
    # Review 6, finding 23: a rule of 300 nested braces raised RecursionError in bracex.
    with pytest.raises(GlobError, match="nest deeper"):
        compile_glob("{" * 300 + "a" + "}" * 300)
    assert compile_glob("{a,{b,{c,d}}}").pattern == "{a,{b,{c,d}}}"
