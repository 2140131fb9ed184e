"""Bash permission rules matched on the parsed command (issue 18, classes 2, 4 and 5).

Every "it did not run" claim runs the real ``bash`` tool through an ``AgentHarness`` and looks
for the file the command would have made; every spelling is first shown to make that file
when bash runs it with no supervisor, so a spelling that is not really ``touch P`` cannot pass
by accident. ``test_the_parser_sees_every_command_bash_runs`` compares the parser with bash
itself on generated commands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from permission_requests import request as make_request

from harness import (
    AgentHarness,
    Approve,
    ApproveAlways,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MessageEntry,
    PermissionMode,
    PermissionRequest,
    SecuritySupervisor,
    ToolResultMessage,
    bash_tool,
)
from harness._permissions.rules import Rule
from harness._permissions.shell import (
    MAX_COMMAND_CHARS,
    MAX_COMMAND_OPERATORS,
    ParsedCommand,
    Word,
    command_key,
    compile_spec,
    parse_command,
)

BASH = shutil.which("bash") or "/bin/bash"
TOUCH = shutil.which("touch") or "/usr/bin/touch"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "permissions.md"


def request(cwd: Path, command: str, approvals: frozenset[str] = frozenset()) -> PermissionRequest:
    return make_request(cwd, bash_tool(), approvals, command=command)


def supervisor(mode: PermissionMode = "default", **kwargs: Any) -> SecuritySupervisor:
    return SecuritySupervisor(mode=mode, setting_sources=(), **kwargs)


class Recorder:
    """An approver answering from a list, recording what it was asked."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, req: PermissionRequest) -> Any:
        self.asked.append(str(req.target))
        return self.answers.pop(0)


async def run_bash(
    work: Path, commands: list[str], sup: SecuritySupervisor
) -> tuple[list[ToolResultMessage], list[str]]:
    """Run ``commands`` as one turn of bash calls in ``work``: the results and the decisions."""
    repo = JsonlSessionRepo(work.parent / f"{work.name}-sessions")
    session = await repo.create(str(work))
    calls = [FauxToolCall(name="bash", arguments={"command": c}) for c in commands]
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "done"]),
        tools=[bash_tool(timeout_s=20)],
        supervisor=sup,
        cwd=work,
    )
    decisions: list[str] = []
    harness.connect("permission_decision", lambda s, event: decisions.append(event.decision))
    await harness.prompt("go")
    results = [
        e.message
        for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]
    return results, decisions


def makes_file(command: str, name: str, cwd: Path) -> bool:
    """Whether bash itself, with no supervisor, creates ``cwd/name`` running ``command``."""
    subprocess.run(
        [BASH, "-c", command], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=20
    )
    made = (cwd / name).exists()
    if (cwd / name).is_dir():
        shutil.rmtree(cwd / name)  # a folder the command wrote (git format-patch -o P)
    elif made:
        (cwd / name).unlink()
    return made


# --- class 2: an allow rule must not become arbitrary execution ----------------------------


def _to_root(folder: Path) -> str:
    return "../" * len(folder.parts) + TOUCH.lstrip("/")


# (folder to create, rule, command with {up} for ../ enough to reach / from inside the folder)
ALLOW_ESCAPES = [
    # the reproduction
    ("git status x", "bash(git status:*)", '"git status x/{up}" P'),
    # the same folder, other quotings bash joins into one word
    ("git status x", "bash(git status:*)", "'git status x'/{up} P"),
    ("git status x", "bash(git status:*)", "git\\ status\\ x/{up} P"),
    ("git status x", "bash(git status:*)", 'git" status x"/{up} P'),
    ("git status x", "bash(git status:*)", "g'it status x/'{up} P"),
    ("git status x", "bash(git status:*)", "git' 'status' 'x/{up} P"),
    # blanks tree-sitter (or shlex) splits at and bash does not
    ("git\r", "bash(git:*)", "git\r/{up} P"),
    ("git\t", "bash(git:*)", "git\\\t/{up} P"),
    ("git\x0b", "bash(git:*)", "git\x0b/{up} P"),
    ("git\x0c", "bash(git:*)", "git\x0c/{up} P"),
    ("git\u3000", "bash(git:*)", "git\u3000/{up} P"),
    # a line continuation bash joins
    ("git", "bash(git:*)", "git\\\n/{up} P"),
    # a wildcard never stands for the command word
    ("gitx", "bash(git*)", "gitx/{up} P"),
    ("git status x", "bash(git *)", '"git status x/{up}" P'),
]


@pytest.mark.parametrize(("folder", "rule", "spelling"), ALLOW_ESCAPES)
async def test_an_allow_rule_never_approves_another_program(
    tmp_path: Path, folder: str, rule: str, spelling: str
) -> None:
    work = tmp_path / "work"
    (work / folder).mkdir(parents=True)
    command = spelling.replace("{up}", _to_root(work / folder))
    assert makes_file(command, "P", work), "the spelling must really run touch"
    results, decisions = await run_bash(
        work, [command], supervisor("dont_ask", rules={"allow": [rule]})
    )
    assert decisions == ["deny"] and results[0].is_error
    assert not (work / "P").exists()


async def test_an_allow_rule_still_approves_what_it_names(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    rules = {"allow": ["bash(echo:*)", "bash(git status:*)"]}
    commands = ["echo hi", "echo 'a b' && echo c", "git status --short 2>&1 | echo x", "echo >&2 x"]
    results, decisions = await run_bash(work, commands, supervisor("dont_ask", rules=rules))
    assert decisions == ["approve"] * len(commands)
    assert results[0].text.strip() == "hi"


async def test_with_an_approver_the_escape_is_asked_not_approved(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "git status x").mkdir(parents=True)
    command = f'"git status x/{_to_root(work / "git status x")}" P'
    approver = Recorder(Deny(reason="no"))
    s = supervisor(rules={"allow": ["bash(git status:*)"]}, approver=approver)
    decision = await s.decide(request(work, command))
    assert decision == Deny(reason="no") and approver.asked == [command]


# --- class 4: a deny rule sees every simple command, however it is spelled ------------------

DENIED_SPELLINGS = [
    # the 22 (17 got through)
    "touch P",
    "true && touch P",
    "false || touch P",
    "true; touch P",
    "echo x | touch P",
    "( touch P )",
    "{ touch P; }",
    "if true; then touch P; fi",
    "for i in 1; do touch P; done",
    "echo $(touch P)",
    "echo `touch P`",
    "X=1 touch P",
    f"{TOUCH} P",
    "command touch P",
    "exec touch P",
    "env touch P",
    "time touch P",
    "! touch P",
    "bash -c 'touch P'",
    "eval 'touch P'",
    "echo P | xargs touch",
    "t=touch; $t P",
    # more of the same class
    "'tou'ch P",
    "\\touch P",
    '"touch" P',
    "t\\ouch P",
    "tou\\\nch P",
    "touch\tP",
    f"{os.path.dirname(TOUCH)}/../{os.path.basename(os.path.dirname(TOUCH))}/touch P",
    "nice -n 5 touch P",
    "nohup touch P",
    "timeout 5 touch P",
    "env -i X=1 touch P",
    "command -p touch P",
    "builtin command touch P",
    "stdbuf -o0 touch P",
    "time -p touch P",
    "! ! touch P",
    'sh -c "touch P"',
    "bash -lc 'touch P'",
    "bash -c \"bash -c 'touch P'\"",
    "echo 'touch P' | sh",
    'eval "$(echo touch P)"',
    "f() { touch P; }; f",
    "while true; do touch P; break; done",
    "case x in x) touch P;; esac",
    "find . -maxdepth 0 -exec touch P \\;",
    "echo P | xargs -I{} touch {}",
    "cat <<EOF\n$(touch P)\nEOF",
    "x=$(touch P)",
    "cat <(touch P)",
    "export X=$(touch P)",
    "[[ -n $(touch P) ]]",
    't=touch; "$t" P',
    "t=touch; ${t} P",
    "$(echo touch) P",
    "$'touch' P",
    "$'\\x74ouch' P",
    "touch P & wait",
    "{ touch P; } 2>/dev/null",
    "echo ok >/dev/null; touch P",
    "env -S 'touch P'",
    "echo >&2 x; touch P",
]


async def test_a_deny_rule_catches_every_spelling_in_bypass_mode(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    names = [f"P{i}" for i in range(len(DENIED_SPELLINGS))]
    commands = [re.sub(r"\bP\b", n, s) for s, n in zip(DENIED_SPELLINGS, names, strict=True)]
    fake = [c for c, n in zip(commands, names, strict=True) if not makes_file(c, n, work)]
    assert fake == [], "each spelling must really run touch"
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, [*commands, "echo ran > control"], s)
    ran = [c for c, n in zip(commands, names, strict=True) if (work / n).exists()]
    assert ran == []
    assert decisions == ["deny"] * len(commands) + ["approve"]
    assert (work / "control").exists()  # bypass did run what no rule denies
    assert all(r.is_error for r in results[:-1])


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("touch P", "yes"),
        ("sudo -u x touch P", "yes"),
        ("xargs -0 -n1 touch", "yes"),
        ("uv run touch P", "yes"),
        ("watch 'touch P'", "maybe"),  # an argument that reads as a command
        ("$t P", "maybe"),
        ("echo P | $(which touch)", "maybe"),
        ('eval "$x"', "maybe"),
        ('bash -c "$x"', "maybe"),
        ("echo x | bash", "maybe"),
        ("source /dev/stdin", "maybe"),
        ("echo touch P", "no"),
        ("ls -la", "no"),
        ("bash script.sh", "no"),  # a script file is a program like any other
        ("bash --version", "no"),
        ("bash", "maybe"),  # it reads commands from its input
        ("python3 -c 'import os'", "no"),  # deny rules do not read other languages
        ("cat <<'EOF'\ntouch P\nEOF", "no"),  # a here-document is data
    ],
)
def test_what_a_deny_rule_finds(command: str, found: str) -> None:
    assert compile_spec("touch:*").finds(parse_command(command)) == found


async def test_a_possible_match_is_asked_with_the_rule_named(tmp_path: Path) -> None:
    approver = Recorder(Approve(), Approve())
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]}, approver=approver)
    assert isinstance(await s.decide(request(tmp_path, "touch P")), Deny)
    decision = await s.decide(request(tmp_path, "$t P"))
    assert isinstance(decision, Approve) and approver.asked == ["$t P"]
    no_one = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    denied = await no_one.decide(request(tmp_path, "$t P"))
    assert isinstance(denied, Deny) and "bash(touch:*)" in denied.reason
    assert isinstance(await no_one.decide(request(tmp_path, "ls $x")), Approve)


async def test_an_unparsable_or_huge_command_is_asked_under_any_deny_rule(tmp_path: Path) -> None:
    s = supervisor("bypass", rules={"deny": ["bash(rm:*)"], "allow": ["bash(echo:*)"]})
    # review 11, finding 15: 80 KB of `a|` took minutes to parse
    pipeline = "echo " + "a|" * (MAX_COMMAND_OPERATORS + 1) + "a"
    for command in ("echo 'unclosed", "echo (", "echo " + "x" * MAX_COMMAND_CHARS, pipeline):
        assert isinstance(await s.decide(request(tmp_path, command)), Deny)
        allowed = supervisor("dont_ask", rules={"allow": ["bash(echo:*)"]})
        assert isinstance(await allowed.decide(request(tmp_path, command)), Deny)


async def test_ask_rules_see_every_simple_command_too(tmp_path: Path) -> None:
    approver = Recorder(Deny(reason="no push"), Deny(reason="no push"))
    s = supervisor("bypass", rules={"ask": ["bash(git push:*)"]}, approver=approver)
    assert await s.decide(request(tmp_path, "(cd x && git push)")) == Deny(reason="no push")
    assert await s.decide(request(tmp_path, "git $sub")) == Deny(reason="no push")
    assert isinstance(await s.decide(request(tmp_path, "git status")), Approve)


# --- text bash evaluates as code where no command shows (adversarial review) ---------------

# Each runs touch although no simple command of the line is touch: prompt expansion, indirection
# and arithmetic evaluate a value (``$_`` holds the last word of the command before) as code, an
# array subscript in a literal word is expanded by the builtin given it, and trap, alias, env -S
# and BASH_ENV run strings.
EVALUATED_SPELLINGS = [
    "echo '$(touch P)'; echo ${_@P}",
    "echo '`touch P`'; echo \"${_@P}\"",
    "echo 'a[$(touch P)]'; echo ${!_}",
    "echo 'a[$(touch P)]'; echo ${@:_}",
    "echo 'a[$(touch P)]'; echo ${x[_]}",
    "echo 'a[$(touch P)]'; echo $((_))",
    "x='a[$(touch P)]'; echo $((x))",
    "test -v 'a[$(touch P)]'",
    "[[ -v 'a[$(touch P)]' ]]",
    "[[ 'a[$(touch P)]' -eq 1 ]]",
    "printf -v 'a[$(touch P)]' x",
    "declare 'a[$(touch P)]=1'",
    "let 'a[$(touch P)]'",
    "read 'a[$(touch P)]' <<< x",
    "declare -i x; x='a[$(touch P)]'",
    "declare -n r='a[$(touch P)]'; echo $r",
    "trap 'touch P' EXIT",
    "echo x; trap -- 'touch P' EXIT",
    "shopt -s expand_aliases\nalias e=touch\ne P",
    "env -S'touch P'",
    "env --split-string='touch P'",
    "echo touch P | BASH_ENV=/dev/stdin bash -c :",
    "env BASH_ENV=/dev/stdin bash -c 'echo x' <<< 'touch P'",
    f"hash -p {TOUCH} ls; ls P",
    # the subscript built at run time, from $_ and a literal with no "[" before its "$("
    "true '[$(touch P)]'; test -v \"a$_\"",
    "echo '$(touch P)]'; test -v \"a[$_\"",
    "echo '$(touch P)]'; printf -v \"a[$_\" x",
    "echo '$(touch P)]'; read \"a[$_\" <<< x",
    "echo '$(touch P)]'; let \"a[$_\"",
    "echo '$(touch P)]'; declare \"a[$_=1\"",
    "echo '$(touch P)]'; declare -n r=\"a[$_\"; echo $r",
    # the command hash and the aliases, set as variables
    f"BASH_CMDS[ls]={TOUCH}; ls P",
    f"BASH_CMDS+=([ls]={TOUCH}); ls P",
    f"declare -A BASH_CMDS=([ls]={TOUCH}); ls P",
    f"read 'BASH_CMDS[ls]' <<< {TOUCH}; ls P",
    "shopt -s expand_aliases\nBASH_ALIASES[e]=touch\ne P",
]
# allow rules a user may well hold: none of them names touch
EVALUATING_ALLOWED = [
    f"bash({name}:*)"
    for name in ("echo", "true", "ls", "test", "printf", "declare", "let", "read", "trap", "shopt")
]


async def test_code_bash_evaluates_is_seen_by_deny_rules_and_never_allowed(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    names = [f"P{i}" for i in range(len(EVALUATED_SPELLINGS))]
    commands = [
        re.sub(r"\bP\b(?!})", n, s)  # not the P of ${_@P}
        for s, n in zip(EVALUATED_SPELLINGS, names, strict=True)
    ]
    fake = [c for c, n in zip(commands, names, strict=True) if not makes_file(c, n, work)]
    assert fake == [], "each spelling must really run touch"
    allow = supervisor("dont_ask", rules={"allow": EVALUATING_ALLOWED})
    approved = [c for c in commands if isinstance(await allow.decide(request(work, c)), Approve)]
    assert approved == []
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, commands, s)
    assert [c for c, n in zip(commands, names, strict=True) if (work / n).exists()] == []
    assert decisions == ["deny"] * len(commands)
    assert all(r.is_error for r in results)


@pytest.mark.parametrize(
    "command",
    ["echo ${x:-y} ${#x} ${x[@]} ${x%.py} ${x//a/b} ${x:1:2} $((1 + 2))", "echo ${HOME}/x"],
)
def test_expansions_that_evaluate_nothing_stay_allowable(command: str) -> None:
    parsed = parse_command(command)
    assert not parsed.hidden and compile_spec("touch:*").finds(parsed) == "no"


# --- class 5: approve-always keys are exact unless they are a plain prefix -----------------

# (approved always, then a command the approval must not cover, the file that one would make)
LOOSE_KEYS = [
    ("echo touch P > /dev/null", "echo\ntouch P > /dev/null", "P"),
    ("echo a && echo touch P", "echo a && echo\ntouch P", "P"),
    ("bash -c 'echo hi'", "bash -c 'touch P'", "P"),
    ("python3 -c 'print(1)'", "python3 -c \"open('P', 'w')\"", "P"),
    ("sh -c 'echo hi'", "sh -c 'touch P'", "P"),
    ("perl -e 'print 1'", "perl -e 'open(F, \">P\")'", "P"),
    ("env X=1 echo hi", "env touch P", "P"),
    ("eval 'echo hi'", "eval touch P", "P"),
    ("nice -n 5 echo hi", "nice touch P", "P"),
    ("timeout 5 echo hi", "timeout 5 touch P", "P"),
    ("command -p echo hi", "command touch P", "P"),
    ("find . -name x", "find . -maxdepth 0 -exec touch P ';'", "P"),
]


@pytest.mark.parametrize(("approved", "other", "made"), LOOSE_KEYS)
async def test_approve_always_covers_only_what_was_approved(
    tmp_path: Path, approved: str, other: str, made: str
) -> None:
    if approved.startswith("perl") and shutil.which("perl") is None:
        pytest.skip("no perl here")
    work = tmp_path / "work"
    work.mkdir()
    assert makes_file(other, made, work), "the other command must really make the file"
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(work))
    approver = Recorder(ApproveAlways(), Deny(reason="not that one"))
    turns = [
        FauxReply(tool_calls=[FauxToolCall(name="bash", arguments={"command": approved})]),
        FauxReply(tool_calls=[FauxToolCall(name="bash", arguments={"command": other})]),
        "done",
    ]
    harness = AgentHarness(
        session=session,
        model=FauxModel(turns),
        tools=[bash_tool(timeout_s=20)],
        supervisor=supervisor(approver=approver),
        cwd=work,
    )
    await harness.prompt("go")
    assert approver.asked == [approved, other]  # the approval did not cover the other command
    assert not (work / made).exists()
    (key,) = harness.approvals
    assert key == "bash(" + approved.replace("\\", "\\\\").replace("*", "\\*") + ")"
    # as an allow rule (what ApproveAlways(scope="project") writes) it does not cover it either
    results, _ = await run_bash(work, [other], supervisor("dont_ask", rules={"allow": [key]}))
    assert results[0].is_error and not (work / made).exists()


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ("git status", "bash(git status:*)"),
        ("git  status --short", "bash(git status:*)"),
        ("ls -la", "bash(ls:*)"),  # ls reads and prints, whatever its arguments
        ("'ls' -R", "bash(ls:*)"),
        ("/bin/ls -la", "bash(/bin/ls -la)"),  # spelt as on the list only
        ("pwd", "bash(pwd:*)"),
        ("rm -f x1", "bash(rm -f x1)"),  # never bash(rm:*), which would cover rm -rf /
        ("rm x5", "bash(rm x5)"),
        ("cat a.txt", "bash(cat a.txt)"),
        ("echo 41", "bash(echo 41)"),
        # not on the list of prefixes that only read and print: exact
        ("npm test", "bash(npm test)"),
        ("cargo build --release", "bash(cargo build --release)"),
        ("git log --oneline", "bash(git log --oneline)"),  # git log --output=FILE writes
        ("git config user.name x", "bash(git config user.name x)"),
        ("make build", "bash(make build)"),
        ("node -e 1", "bash(node -e 1)"),
        ("env ls", "bash(env ls)"),
        ("sudo ls", "bash(sudo ls)"),
        ("xargs ls", "bash(xargs ls)"),
        ("git status\ntouch P", "bash(git status\ntouch P)"),
        ("ls -la; touch P", "bash(ls -la; touch P)"),
        ("ls $(touch P)", "bash(ls $(touch P))"),
        ("LS_COLORS=x ls", "bash(LS_COLORS=x ls)"),
        ("git -C x status", "bash(git -C x status)"),  # a flag is no subcommand
        ("npm test:unit", "bash(npm test:unit)"),
        ("echo touch P > /dev/null", "bash(echo touch P > /dev/null)"),
        ("git status\n", "bash(git status:*)"),
        ("bash -c 'echo hi'", "bash(bash -c 'echo hi')"),
        ("python3 -c 'print(1)'", "bash(python3 -c 'print(1)')"),
        ("/usr/bin/python3.11 x.py", "bash(/usr/bin/python3.11 x.py)"),
        ("rm *.tmp", "bash(rm \\*.tmp)"),
        ("echo a:*", "bash(echo a:\\*)"),
        ("echo 'a\\*' | cat", "bash(echo 'a\\\\\\*' | cat)"),
        ("", "bash('')"),
        ("(cd x && ls)", "bash((cd x && ls))"),
        ("X=1 make", "bash(X=1 make)"),
        ('"my tool" run', 'bash("my tool" run)'),
        ("uv run pytest", "bash(uv run pytest)"),
    ],
)
def test_operation_keys(command: str, key: str) -> None:
    assert command_key("bash", command) == key


ROUND_TRIPS = [
    # (command approved always, commands its key, as an allow rule, must not approve)
    ("git status", ["git status; touch P", "git statusx", "'git status x/../touch' P"]),
    ("echo touch P > /dev/null", ["echo\ntouch P > /dev/null", "echo touch P >  /dev/null"]),
    ("rm *.tmp", ["rm -rf / x.tmp", "rm a.tmp", "rm *.tmp; touch P"]),
    ("ls | grep a*b", ["ls | grep axb", "ls | grep a; touch b"]),
    ("echo a:*", ["echo a:x", "echo a: x"]),
    ("echo (", ["echo x", "echo ( "]),
    # ($USER: $HOME names the folder holding the approvals key, which is always asked)
    ("echo $USER", ["echo '$USER'", "echo $USER; touch P"]),
    ("bash -c 'echo hi'", ["bash -c 'touch P'", 'bash -c "echo hi"; touch P']),
    ("cat <<'EOF'\n*\nEOF", ["cat <<'EOF'\nx\nEOF", "cat <<'EOF'\n*\nEOF\ntouch P"]),
    ("echo \\\\*", ["echo \\*", "echo \\\\x"]),
    ("", ["touch P", " "]),
    # approving one spelling never approves another program, or the same one running code
    # (git config writes are protected: asked in every mode, test_protected_paths.py)
    ("git branch -a", ["git branch -D main", "git branch --set-upstream-to=x", "git branch"]),
    ("git log --oneline", ["git log --output=P", "git log -p"]),
    ("npm test", ["npm run x", "npm test; touch P", "npm install x"]),
    ("make build", ["make all", "make -f /tmp/x build"]),
    ("python3 -c 'print(1)'", ["python3 -c 'import os'", "python3 x.py"]),
    ("node -e 1", ["node -e 2", "node x.js", "node -e 1; touch P"]),
    ("env X=1 ls", ["env X=1 touch P", "env ls"]),
    ("xargs echo", ["xargs touch", "xargs echo; touch P"]),
    ("sudo ls", ["sudo touch P", "sudo ls; touch P"]),
    ("find . -name x", ["find . -name x -exec touch P ';'", "find . -delete"]),
    ("ls -la", ["ls; touch P", "ls $(touch P)", "ls > P", "/tmp/ls", "lsof"]),
    ("/bin/ls", ["/bin/ls -R", "/tmp/ls"]),
    ("git status", ["git -c core.fsmonitor=x status", "GIT_DIR=x git status"]),
]


@pytest.mark.parametrize(("approved", "others"), ROUND_TRIPS)
async def test_a_key_read_back_as_a_rule_approves_what_it_was_meant_for_and_nothing_more(
    tmp_path: Path, approved: str, others: list[str]
) -> None:
    key = command_key("bash", approved)
    rule = Rule.parse(key)
    assert rule.text == key.strip()
    s = supervisor("dont_ask", rules={"allow": [key]})
    if approved:  # the empty command is never approved by a rule: it is asked, then remembered
        assert isinstance(await s.decide(request(tmp_path, approved)), Approve), key
    for other in others:
        assert isinstance(await s.decide(request(tmp_path, other)), Deny), (key, other)


async def test_an_exact_key_approved_for_the_project_round_trips_through_the_settings_file(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.tmp").write_text("")
    approved = "ls *.tmp | wc -l"
    approver = Recorder(ApproveAlways(scope="project"))
    results, _ = await run_bash(work, [approved], supervisor(approver=approver))
    assert results[0].text.strip() == "1"
    allow = orjson.loads((work / ".harness" / "settings.json").read_bytes())["permissions"]
    assert allow == {"allow": ["bash(ls \\*.tmp | wc -l)"]}
    trusted = SecuritySupervisor(mode="dont_ask", setting_sources=("project",), trust_project=True)
    assert isinstance(await trusted.decide(request(work, approved)), Approve)
    for other in ("ls -la / x.tmp | wc -l", "ls *.tmp | wc -l; touch P", "ls x.tmp | wc -l"):
        assert isinstance(await trusted.decide(request(work, other)), Deny), other


# --- the parser ----------------------------------------------------------------------------


def argvs(parsed: ParsedCommand) -> list[list[str | None]]:
    return [[w.value for w in c.words] for c in parsed.commands]


@pytest.mark.parametrize(
    ("command", "commands"),
    [
        (
            "git status && git log | head; echo x",
            [["git", "status"], ["git", "log"], ["head"], ["echo", "x"]],
        ),
        ("(a) && { b; } || ! c", [["a"], ["b"], ["c"]]),
        ("if a; then b; elif c; then d; else e; fi", [["a"], ["b"], ["c"], ["d"], ["e"]]),
        ("while a; do b; done; until c; do d; done", [["a"], ["b"], ["c"], ["d"]]),
        ("case $x in a) b;; *) c;; esac", [["b"], ["c"]]),
        ("for i in a b; do c $i; done", [["c", None]]),
        ("f() { a; }; f", [["a"], ["f"]]),
        ("echo $(a $(b)) `c`", [["echo", None, None], ["a", None], ["b"], ["c"]]),
        ("cat <(a) >(b)", [["cat", None, None], ["a"], ["b"]]),
        ("X=1 Y=$(a) b c", [["X=1", None, "b", "c"], ["a"]]),
        ("export A=1 B; unset C", [["export", "A=1", "B"], ["unset", "C"]]),
        ("cat <<EOF\n$(a)\nEOF", [["cat"], ["a"]]),
        ("cat <<< $(a)", [["cat"], ["a"]]),
        ('echo \'a b\' "c $x" d\\ e "f\\"g" \'h\'"i"', [["echo", "a b", None, "d e", 'f"g', "hi"]]),
        ("echo *.py ~ a{b,c} {1..3} \\*", [["echo", None, None, None, None, "*"]]),
        ("echo >&2 message 2>/dev/null more", [["echo", "message", "more"]]),
        ("time -p a; ! ! b", [["a"], ["b"]]),
        ("a \\\n b\\\nc", [["a", "bc"]]),
        ("IFS=x - X=1 cmd", [["IFS=x", "-", "X=1", "cmd"]]),
        ("git commit -F - <<'EOF'\nmsg\nEOF", [["git", "commit", "-F", "-"]]),
        ("# just a comment", []),
        ("", []),
    ],
)
def test_the_parser_splits_into_simple_commands(
    command: str, commands: list[list[str | None]]
) -> None:
    assert argvs(parse_command(command)) == commands


@pytest.mark.parametrize(
    ("command", "construct"),
    [
        ("a $(b)", "a command substitution"),
        ("a `b`", "a command substitution"),
        ("a <(b)", "a process substitution"),
        ("a > out", "a redirection to or from a file"),
        ("a >> out", "a redirection to or from a file"),
        ("a < in", "a redirection to or from a file"),
        ("a &> out", "a redirection to or from a file"),
        ("a >& out", "a redirection to or from a file"),
        ("a &", "a background job"),
        ("coproc a", "a background job"),
        ("f() { a; }", "a function definition"),
        ("X=1", "a variable assignment"),
        ("X=1; a", "a variable assignment"),
        ("for PATH in .; do git status; done", "a for or select loop"),
        ("[ -f x ] && a", "a test expression"),
        ("(( x++ ))", "arithmetic"),
        ("echo $((1 + 2))", "arithmetic"),
        ("echo ${x:=PATH}", "an expansion that assigns"),
        ("printf -v PATH %s .; git status", "a builtin that changes the shell"),
        ("read PATH <<< .; git status", "a builtin that changes the shell"),
        ("echo 'unclosed", "it does not parse"),
        ("cat <<EOF\nx\nEOF \ntouch P", "a here-document whose end the harness cannot confirm"),
        # where tree-sitter and bash read words differently
        ("{touch P;}", "words the harness splits differently from bash"),
        ("cmd -x2>&1", "words the harness splits differently from bash"),
        ('cmd ""\\!x', "words the harness splits differently from bash"),
        ("@X=1 cmd", "words the harness splits differently from bash"),
        ("a && b >f c", "words the harness splits differently from bash"),
        ("cmd $\t-x", "syntax the harness does not read"),
    ],
)
def test_constructs_no_allow_rule_covers(command: str, construct: str) -> None:
    parsed = parse_command(command)
    assert not parsed.allowable
    assert any(c.startswith(construct) for c in parsed.constructs), parsed.constructs


@pytest.mark.parametrize(
    "command",
    [
        "git status > /dev/null 2>&1",
        "a 2>/dev/null </dev/null >&2 1>&- | b",
        "git commit -F - <<'EOF'\nSubject\n\n$body `x`\nEOF",
        "cat <<-EOF\n\tx $HOME\n\tEOF",
        "git log $x ~/y *.py",  # computed words after the command word: arguments still
        "if a; then b; fi; while c; do d; done; case $x in y) e;; esac",
        "time git status | grep x",
        "ls -la # a comment",
    ],
)
def test_what_allow_rules_may_approve_by_words(command: str) -> None:
    assert parse_command(command).allowable, parse_command(command).constructs


def test_words_are_compared_never_re_joined() -> None:
    spec = compile_spec("git status:*")
    one_word = parse_command('"git status x/../touch" P').commands[0]
    assert one_word.words[0] == Word("git status x/../touch")
    assert not spec.allows(one_word)
    assert spec.allows(parse_command("git 'status' x").commands[0])
    assert not compile_spec("git:*").allows(parse_command("$g status").commands[0])
    assert compile_spec("git add:*").allows(parse_command("git add $x").commands[0])
    # $x may be --output=~/.bashrc: a computed word where an option could run a program
    assert not compile_spec("git log:*").allows(parse_command("git log $x").commands[0])
    assert not compile_spec("npm test").allows(parse_command("npm $x").commands[0])
    assert not compile_spec("git status:*").allows(parse_command("X=1 git status").commands[0])
    assert compile_spec("X=1 git status:*").allows(parse_command("X=1 git status").commands[0])


async def test_a_command_is_parsed_once_however_many_rules_look(tmp_path: Path) -> None:
    rules = {"allow": [f"bash(tool{i}:*)" for i in range(50)], "deny": ["bash(rm:*)"] * 50}
    s = supervisor(rules=rules)
    command = "echo parsed-once-" + tmp_path.name
    before = parse_command.cache_info()
    await s.decide(request(tmp_path, command))
    after = parse_command.cache_info()
    assert after.misses - before.misses == 1
    assert after.hits - before.hits >= 50


# --- the documented table ------------------------------------------------------------------


def _doc_rows() -> list[tuple[str, str, str]]:
    text = DOCS.read_text()
    table = text[text.index("| command | deny `bash(touch:*)`") :].split("\n\n", 1)[0]
    rows = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        command = cells[0].strip("`").replace("\\|", "|").replace("⏎", "\n")
        rows.append((command, cells[1], cells[2]))
    return rows


async def test_the_documented_table_is_true(tmp_path: Path) -> None:
    rows = _doc_rows()
    assert len(rows) >= 25
    deny = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    allow = supervisor("dont_ask", rules={"allow": ["bash(git status:*)"]})
    for command, denied, approved in rows:
        d = await deny.decide(request(tmp_path, command))
        if isinstance(d, Approve):
            caught = "no"
        else:
            caught = "asked" if "needs approval" in d.reason else "denied"
        assert denied.startswith(caught), (command, d)
        a = await allow.decide(request(tmp_path, command))
        assert approved.startswith("yes" if isinstance(a, Approve) else "no"), (command, a)


# --- the parser against bash itself ----------------------------------------------------------

_PIECES = [
    "zq", "zx", " ", " ", "\t", "\\ ", "\\\t", "\r", "\x0b", "\x0c", "\\\n", "\n", ";", "&&",
    "||", "|", "'", '"', "\\", "#", "{ ", " }", "{", "}", "(", ")", "! ", "!", "~", "=",
    "X=1 ", "$", "`", "*", "-", "--", "2>&1", ">/dev/null", "<<", "EOF", "\nEOF\n", "time ",
    "if ", "then ", "fi", " do ", "done", "\u3000", "\xa0", "é", '""', "''", "\\#", "$'",
    "bash -c ", "eval ", "env ", "command ", "xargs ", "$(", "$x", "f() { ", "case ", " in ",
    "esac", ";;", "coproc ", ">&2 ", "<<<", "@",
]  # fmt: skip


@pytest.fixture(scope="module")
def logging_bash() -> Any:
    """``run(command) -> Counter of argv`` for every command bash looked up and did not find
    (``command_not_found_handle`` logs each; PATH is empty, so that is every program run)."""
    folder = Path(tempfile.mkdtemp(prefix="shell-rules-"))
    rc = folder / "rc.sh"
    rc.write_text(
        'command_not_found_handle() { printf "%s\\037" "$@" > "$LOG/$BASHPID.$RANDOM$RANDOM"; }\n'
    )

    def run(command: str) -> Counter[tuple[str, ...]]:
        log = Path(tempfile.mkdtemp(dir=folder))
        env = {"PATH": "/nonexistent", "BASH_ENV": str(rc), "LOG": str(log), "HOME": str(log)}
        subprocess.run(
            [BASH, "-c", command],
            env=env,
            cwd=log,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
        return Counter(
            tuple(os.fsdecode(p.read_bytes()).split("\x1f")[:-1])
            for p in log.iterdir()
            if p.is_file()
        )

    yield run
    shutil.rmtree(folder, ignore_errors=True)


def _covers(words: tuple[Word, ...], argv: tuple[str, ...]) -> bool:
    for i, word in enumerate(words):
        if word.splits:
            return True  # a deny rule finds "maybe" from here on
        if i >= len(argv) or (word.value is not None and word.value != argv[i]):
            return False
    return len(words) == len(argv)


@settings(max_examples=250, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=10).map("".join))
def test_the_parser_sees_every_command_bash_runs(logging_bash: Any, command: str) -> None:
    parsed = parse_command(command)
    ran = logging_bash(command)
    if parsed.allowable and all(w.value is not None for c in parsed.commands for w in c.words):
        # what an allow rule would approve is what bash runs, word for word (or what eval,
        # bash -c and the other wrappers that only an allow rule naming them covers, run)
        ours = Counter(
            tuple(w.value or "" for w in c.words[c.assignments :]) for c in parsed.commands
        )
        views = [c.words[s:] for c, s in parsed.views]
        extra = [argv for argv in ran - ours if not any(_covers(v, argv) for v in views)]
        assert not extra, (command, ran, ours)
    if not parsed.hidden:
        # what a deny rule would look at covers everything bash runs
        views = [c.words[s:] for c, s in parsed.views]
        for argv in ran:
            assert not argv or any(_covers(v, argv) for v in views), (command, argv)


# --- bounded matching --------------------------------------------------------------------------

# (rule, command): a backtracking matcher took minutes over each (rules come from settings
# files, an untrusted project's deny and ask rules too; the command from the model)
STALLING = [  # (rule, the command's start, a unit repeated, how many times)
    ("bash(*a*a*a*a*a*a*a*a*a*b)", "", "a", 20_000),
    ("bash(x *a*a*a*a*a*a*b:*)", "x ", "a", 20_000),
    ("bash(echo *a*a*a*a*a*a*a*a*b)", "echo ", "a ", 10_000),
    ("bash(echo)", "echo '", "[", 90_000),
    ("bash(echo)", "echo BASH_FUNC_", "[a", 45_000),
]


def test_a_wildcard_rule_never_stalls_a_decision(tmp_path: Path) -> None:
    code = f"""
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).parents[1] / "fixtures")!r})
from permission_requests import request
from harness import SecuritySupervisor, bash_tool
async def main():
    for rule, start, unit, times in {STALLING!r}:
        command = start + unit * times
        for key in ("deny", "ask", "allow"):
            s = SecuritySupervisor(mode="dont_ask", setting_sources=(), rules={{key: [rule]}})
            d = await s.decide(request(Path({str(tmp_path)!r}), bash_tool(), command=command))
            print(type(d).__name__)
asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Deny"] * 3 * len(STALLING)  # decided, none allowed


@pytest.mark.parametrize(
    ("spec", "command", "found"),
    [
        ("touch*", "touchx P", "yes"),
        ("*ouch P", "touch P", "yes"),
        ("tou\\*ch:*", "'tou*ch' P", "yes"),
        ("é*:*", "éa x", "yes"),
        ("a*b", "a\udcffb", "yes"),  # text bash gets from an undecodable byte still matches
    ],
)
def test_wildcards_still_match_on_re2(spec: str, command: str, found: str) -> None:
    assert compile_spec(spec).finds(parse_command(command)) == found


# --- review 3: wrappers, and options that run programs (findings 01 and 09) ----------------

# Programs that run the command in their arguments, missing from the wrapper list before; each
# runs touch here (as root in the test image, for su, runuser, sg and unshare).
WRAPPED_SPELLINGS = [
    "prlimit --nofile=100 touch P",
    "setpriv touch P",
    "setarch x86_64 touch P",
    "linux64 touch P",
    "linux32 touch P",
    "fakeroot touch P",
    "dbus-run-session -- touch P",
    "sg root -c 'touch P'",
    "gdb -batch -ex 'shell touch P'",
    "perf stat -o /dev/null touch P",
    "perf record -o /dev/null touch P",
    "unshare touch P",
    "chroot --skip-chdir / touch P",
    "runuser -u root -- touch P",
    "su -c 'touch P'",
    "ionice -c 3 touch P",
    "chrt --other 0 touch P",
    "stdbuf -oL touch P",
    "valgrind -q touch P",
    "strace -o /dev/null touch P",
    "script -qc 'touch P' /dev/null",
]


@pytest.mark.parametrize("command", WRAPPED_SPELLINGS)
async def test_a_deny_rule_sees_through_more_wrappers(tmp_path: Path, command: str) -> None:
    program = command.split()[0]
    if shutil.which(program) is None:
        pytest.skip(f"no {program} here")
    work = tmp_path / "work"
    work.mkdir()
    assert makes_file(command, "P", work), "the spelling must really run touch"
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, [command], s)
    assert decisions == ["deny"] and results[0].is_error
    assert not (work / "P").exists()


@pytest.mark.parametrize(
    "command",
    [  # wrappers not installed here: the parser's view only
        "doas touch P",
        "firejail --quiet touch P",
        "systemd-run --user touch P",
        "flatpak-spawn --host touch P",
        "torsocks touch P",
        "proxychains4 -q touch P",
        "catchsegv touch P",
        "ltrace -o /dev/null touch P",
        "su root -c 'touch P'",
        "flock lk -c 'touch P'",
        "runuser -u x --command='touch P'",
    ],
)
def test_a_deny_rule_finds_the_command_wrappers_run(command: str) -> None:
    assert compile_spec("touch:*").finds(parse_command(command)) == "yes"


# (allow rule for the wrapper, what it must not approve)
WRAPPER_ALLOWS = [
    ("bash(env:*)", "env touch P"),
    ("bash(timeout:*)", "timeout 5 touch P"),
    ("bash(nice:*)", "nice touch P"),
    ("bash(stdbuf:*)", "stdbuf -oL touch P"),
    ("bash(prlimit:*)", "prlimit --nofile=100 touch P"),
    ("bash(setarch:*)", "setarch x86_64 touch P"),
    ("bash(sg:*)", "sg root -c 'touch P'"),
    ("bash(gdb:*)", "gdb -batch -ex 'shell touch P'"),
    ("bash(bash:*)", "bash -c 'touch P'"),
    ("bash(xargs:*)", "xargs touch P </dev/null"),
]


@pytest.mark.parametrize(("rule", "command"), WRAPPER_ALLOWS)
async def test_an_allow_rule_for_a_wrapper_never_approves_what_it_wraps(
    tmp_path: Path, rule: str, command: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    assert makes_file(command, "P", work), "the command must really run touch"
    results, decisions = await run_bash(
        work, [command], supervisor("dont_ask", rules={"allow": [rule, "bash(true:*)"]})
    )
    assert decisions == ["deny"] and results[0].is_error
    assert not (work / "P").exists()


async def test_a_rule_naming_every_word_still_approves_a_wrapped_command(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    rules = {"allow": ["bash(timeout 5 echo hi)", "bash(env X=1 echo hi)"]}
    results, decisions = await run_bash(
        work,
        ["timeout 5 echo hi", "env X=1 echo hi", "timeout 5 echo ho"],
        supervisor("dont_ask", rules=rules),
    )
    assert decisions == ["approve", "approve", "deny"]
    assert results[0].text.strip() == "hi"


# (allow rule, command whose option runs a program or writes a file: P)
CODE_OPTIONS = [
    ("bash(git fetch:*)", "git fetch --upload-pack='touch P; git-upload-pack' ."),
    ("bash(git fetch:*)", "git fetch --upload-p='touch P; git-upload-pack' ."),  # abbreviated
    ("bash(git ls-remote:*)", "git ls-remote --upload-pack='touch P; git-upload-pack' ."),
    ("bash(git grep:*)", "git grep -O'touch P' xyz"),
    ("bash(git grep:*)", "git grep -nO'touch P' xyz"),
    ("bash(git grep:*)", "git grep --open-files-in-pager='touch P' xyz"),
    ("bash(git:*)", "git -c alias.x='!touch P' x"),
    ("bash(git log:*)", "git log --output=P"),
    ("bash(git diff:*)", "git diff HEAD --output=P"),
    ("bash(tar:*)", "tar -cf /dev/null f.txt --checkpoint=1 --checkpoint-action=exec='touch P'"),
    ("bash(tar:*)", "tar -cf x.tar -I 'sh -c \"touch P; gzip\"' f.txt"),
    ("bash(tar:*)", "tar -cf x.tar --use-compress-program='sh -c \"touch P; gzip\"' f.txt"),
    ("bash(tar:*)", "tar -xf t.tar --to-command='touch P'"),
    ("bash(tar:*)", "tar -xf t.tar --to-c='touch P'"),
    ("bash(zip:*)", "zip x.zip f.txt -T -TT 'sh -c \"touch P\"'"),
    ("bash(make:*)", "make --eval='$(shell touch P)'"),
    ("bash(make:*)", "make SHELL=/usr/bin/touch .SHELLFLAGS=P"),
    ("bash(make:*)", "make -f evil.mk"),
    ("bash(sort:*)", "sort -o P f.txt"),
    ("bash(find:*)", "find . -name f.txt -exec touch P \\;"),
    ("bash(find:*)", "find . -name f.txt -fprint P"),
    ("bash(ssh:*)", "ssh -o ProxyCommand='touch P' x"),
    ("bash(ssh:*)", "ssh -oProxyCommand='touch P' x"),
    # review 9, finding 4: options that name the file a git subcommand or tar writes
    ("bash(git archive:*)", "git archive -o P HEAD"),
    ("bash(git archive:*)", "git archive --output=P HEAD"),
    ("bash(git archive:*)", "git archive --output P HEAD"),
    ("bash(git archive:*)", "git archive -v -oP HEAD"),
    ("bash(git format-patch:*)", "git format-patch -o P --root HEAD"),
    ("bash(git format-patch:*)", "git format-patch -koP --root HEAD"),
    ("bash(git format-patch:*)", "git format-patch --output-directory=P --root HEAD"),
    ("bash(git checkout-index:*)", "git checkout-index -a --prefix=P/"),
    ("bash(tar:*)", "tar -c --index-file=P -v -f /dev/null f.txt"),
    ("bash(tar:*)", "tar -cg P -f /dev/null f.txt"),
    ("bash(tar:*)", "tar --listed-incr=P -cf /dev/null f.txt"),
]


def _project(work: Path) -> None:
    """A git repository with a file, a tar archive, a Makefile and a makefile that touches P."""
    work.mkdir()
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q", "."], cwd=work, check=True, timeout=20)
    (work / "f.txt").write_text("xyz\n")
    subprocess.run([*git, "add", "f.txt"], cwd=work, check=True, timeout=20)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=work, check=True, timeout=20)
    subprocess.run(["tar", "-cf", "t.tar", "f.txt"], cwd=work, check=True, timeout=20)
    (work / "Makefile").write_text("all:\n\t@true\n")
    (work / "evil.mk").write_text("all:\n\ttouch P\n")


@pytest.mark.parametrize(("rule", "command"), CODE_OPTIONS)
async def test_an_allow_rule_never_approves_an_option_that_runs_a_program(
    tmp_path: Path, rule: str, command: str
) -> None:
    program = command.split()[0]
    if shutil.which(program) is None:
        pytest.skip(f"no {program} here")
    work = tmp_path / "work"
    _project(work)
    assert makes_file(command, "P", work), "the option must really run touch (or write P)"
    results, decisions = await run_bash(
        work, [command], supervisor("dont_ask", rules={"allow": [rule]})
    )
    assert decisions == ["deny"] and results[0].is_error
    assert not (work / "P").exists()


@pytest.mark.parametrize(
    ("rule", "command"),
    [  # programs not installed here, or that need a terminal: the parser's view only
        ("rsync:*", "rsync -e 'sh -c \"touch P\"' a h:b"),
        ("rsync:*", "rsync -avze 'touch P' a h:b"),
        ("rsync:*", "rsync --rsh='touch P' a h:b"),
        ("less:*", "less -+E +'!touch P' f.txt"),
        ("sort:*", "sort --compress-program='touch P' f.txt"),
        ("git diff:*", "git diff --ext-diff"),
        ("git:*", "git --config-env=core.pager=X log"),
        ("git rebase:*", "git rebase -x 'touch P' HEAD~1"),
        ("git fetch:*", "git fetch $opts ."),  # $opts may be --upload-pack=…
        ("tar:*", "tar cIf 'touch P' x.tar f.txt"),  # old-style bundled options
        ("zip:*", "zip x.zip f.txt --unzip-command 'touch P'"),
        ("make:*", "make -sf evil.mk"),
        ("make:*", "make -C /tmp"),
        ("scp:*", "scp -S ./evil a h:b"),
        ("ssh:*", "ssh -F ./evil.conf h"),
        ("ssh:*", "ssh -o 'LocalCommand touch P' -o PermitLocalCommand=yes h"),
        ("man:*", "man -P 'touch P' ls"),
        ("find:*", "find . -delete"),
        ("wget:*", "wget --use-askpass='touch P' http://127.0.0.1:9/"),
        # review 6, findings 27-31
        ("ssh:*", "ssh -o PKCS11Provider=./evil.so h true"),
        ("ssh:*", "ssh -I ./evil.so git@example.invalid"),
        ("ssh:*", "ssh -o SecurityKeyProvider=./evil.so h"),
        ("scp:*", "scp -o PKCS11Provider=./evil.so x h:y"),
        ("sftp:*", "sftp -D \"sh -c 'touch P'\" x"),
        ("git clone:*", 'git clone -c core.sshCommand="touch P #" ssh://h/r.git d'),
        ("git clone:*", "git clone --config core.sshCommand=x ssh://h/r d"),
        ("git clone:*", "git clone --conf=core.sshCommand=x ssh://h/r d"),
        ("git clone:*", "git clone -ccore.sshCommand=x ssh://h/r d"),
        ("wget:*", "wget -q --config=./x.wgetrc http://127.0.0.1:1/"),
        ("wget:*", "wget -q -O /home/u/.bashrc http://127.0.0.1:1/"),
        ("wget:*", "wget --output-document=/home/u/.bashrc http://127.0.0.1:1/"),
        ("wget:*", "wget -P /home/u/.ssh http://127.0.0.1:1/authorized_keys"),
        ("less:*", "less --lesskey-src=k.src secret.txt"),
        ("less:*", "less -k k x"),
        ("less:*", "less --lesskey-file=k x"),
        ("man:*", "man -C man.conf ls"),
        ("man:*", "man --config-file=man.conf ls"),
        # review 9, finding 4: the review's reproductions
        ("git archive:*", "git archive --output=/tmp/r9/deny/out.tar HEAD"),
        ("git archive:*", "git archive -o /tmp/r9/deny/out.tar HEAD"),
        ("git instaweb:*", "git instaweb --httpd='touch P'"),
        ("tar:*", "tar -c --index-file=/tmp/r9/deny/idx -v -f /dev/null ."),
        ("git format-patch:*", "git format-patch -o /u/site-packages --suffix=.pth HEAD~1"),
        # and other spellings and subcommands
        ("git archive:*", "git archive --o=x.tar HEAD"),
        ("git archive:*", "git archive -lvo x.tar HEAD"),
        ("git format-patch:*", "git format-patch --suffix=.pth HEAD~1"),
        ("git format-patch:*", "git format-patch --suf .pth HEAD~1"),
        ("git format-patch:*", "git format-patch --output-directory=/u/s HEAD~1"),
        ("git format-patch:*", "git format-patch -nod HEAD~1"),
        ("git instaweb:*", "git instaweb --start"),
        ("git instaweb:*", "git instaweb -b 'touch P'"),
        ("git send-email:*", "git send-email --smtp-server=./evil x.patch"),
        ("git send-email:*", "git send-email --to-cmd='touch P' x.patch"),
        ("git send-email:*", "git send-email --sendmail-cmd='touch P' x.patch"),
        ("git filter-branch:*", "git filter-branch --tree-filter 'touch P' HEAD"),
        ("git daemon:*", "git daemon --access-hook=./evil ."),
        ("git shell:*", "git shell -c 'git-upload-pack x'"),
        ("git remote-ext:*", "git remote-ext x 'touch P'"),
        ("git svn:*", "git svn fetch --authors-prog=./evil"),
        ("git ls-remote:*", "git ls-remote 'ext::sh -c touch% P'"),
        ("git fetch:*", "git fetch EXT::x"),
        ("git clone:*", "git clone ext::x d"),
        ("git checkout-index:*", "git checkout-index -a --prefix=/u/.local/"),
        ("git bugreport:*", "git bugreport -s .pth -o /u/site-packages"),
        ("git diagnose:*", "git diagnose --output-directory=/u/s"),
        ("git submodule--helper:*", "git submodule--helper foreach 'touch P'"),
        ("git fast-export:*", "git fast-export --export-marks=/u/x HEAD"),
        ("git apply:*", "git apply --unsafe-paths x.patch"),
        ("git init:*", "git init --templ=./t d"),
        ("tar:*", "tar --listed-incremental=/u/x -cf x.tar ."),
        ("tar:*", "tar -cvg /u/x -f x.tar ."),
        ("tar:*", "tar --volno-file=/u/x -cf x.tar ."),
        # review 10, finding 12: git status -v prints every changed file's content
        ("git status:*", "git status -v"),
        ("git status:*", "git status -vv"),
        ("git status:*", "git status --verbose"),
        ("git status:*", "git status --verb"),
        ("git status:*", "git status -sv"),
        # review 12, finding 1: npm takes any --key=value as its configuration
        ("npm test:*", "npm test --node-options='--import=data:text/javascript,x'"),
        ("npm test:*", "npm test --userconfig=/dev/stdin"),
        ("npm test:*", "npm test --globalconfig=./x"),
        ("npm test:*", "npm test --prefix=/other/project"),
        ("npm test:*", "npm test -C /other/project"),
        ("npm test:*", "npm test --node-opt=x"),  # an abbreviation npm expands
        ("npm test:*", "npm test --script-shell=./evil"),
        ("npm test:*", "npm test $opt"),
        ("npm run test:*", "npm run test --onload-script=./x"),
        ("pnpm test:*", "pnpm test --config.node-options=x"),
        ("yarn test:*", "yarn test --use-yarnrc=./x"),
        # review 13, finding 1: a repository git is told to use may be one the model made
        ("git:*", "git --git-dir=x status"),
        ("git:*", "git --git-dir x status"),
        ("git:*", "git -C x --bare status"),
        ("git status:*", "git --git-dir=x status"),
        ("git:*", "git --work-tree=/u checkout-index -a"),
        ("git:*", "git credential fill"),
        ("rg:*", "rg --hostname-bin=./evil x"),
        # review 13, finding 2: pytest's --log-file with --log-file-format wrote ~/.bashrc;
        # after a prefix rule only its known safe options pass
        ("pytest:*", "pytest -q --log-file=/u/.bashrc '--log-file-format=touch P #%(message)s'"),
        ("pytest:*", "pytest --cov-report=html:/u/x"),
        ("pytest:*", "pytest --html=/u/report.html"),
        ("pytest:*", "pytest -qxp evil"),
        ("pytest:*", "pytest --basetemp=/u/important"),
        # review 13, finding 5: python -m pytest is pytest
        ("python -m pytest:*", "python -m pytest -q --basetemp=/u"),
        ("python3 -m pytest:*", "python3 -m pytest -p evil"),
        ("python3.11 -m pytest:*", "python3.11 -m pytest --log-file=/u/.bashrc"),
        # review 13, findings 8, 11: curl's outputs, ssh's -S/-M, rsync's log and daemon
        ("curl:*", "curl -s -o /u/.bashrc file:///dev/stdin"),
        ("curl:*", "curl -sSo /u/x https://example.com"),
        ("curl:*", "curl -K ./cfg https://example.com"),
        ("curl:*", "curl -w '%output{/u/x}' https://example.com"),
        ("ssh:*", "ssh -S /tmp/ctl host id"),
        ("ssh:*", "ssh -M host"),
        ("rsync:*", "rsync --log-file=/u/.bashrc a b"),
        ("rsync:*", "rsync --daemon --config=/tmp/x"),
        ("go env:*", "go env -w GOFLAGS=-toolexec=./evil"),
        ("npm:*", "npm explore left-pad -- touch P"),
        ("npm:*", "npm x touch P"),
        ("npm:*", "npm config set node-options=--import=x"),
        ("pytest:*", "pytest -p evil_plugin"),
        ("pytest:*", "pytest -qp evil_plugin"),
        ("pytest:*", "pytest -o cache_dir=/u/x"),
        ("pytest:*", "pytest -c /other/pytest.ini"),
        ("pytest:*", "pytest --junitxml=/u/.bashrc"),
        ("pytest:*", "pytest --confcut=/"),  # an abbreviation
        ("go test:*", "go test -exec=./evil ./..."),
        ("go test:*", "go test -toolexec ./evil ./..."),
        ("go test:*", "go test -ldflags=-extld=./evil ./..."),
        ("go test:*", "go test -overlay=o.json ./..."),
        ("go test:*", "go test -C /other ./..."),
        ("go test:*", "go test -coverprofile=/u/.bashrc ./..."),
        ("go build:*", "go build -o /u/.local/bin/harness ."),
        ("rg:*", "rg --pre sh -e . /proc/self/fd/0"),
        ("rg:*", "rg --pre=./evil x"),
        # review 15, finding 3: git's revision/diff parsers are shared by other subcommands
        ("git:*", "git reflog -1 --format=%B --output=Makefile"),
        ("git reflog:*", "git reflog --output=o1"),
        ("git rev-list:*", "git rev-list -1 --no-commit-header --format=%B --output=M HEAD"),
        ("git shortlog:*", "git shortlog --output=x"),
        ("git notes:*", "git notes show --output=x"),
        ("git reflog:*", "git reflog -p --ext-diff"),
        ("git cherry:*", "git cherry --textconv"),
        ("git rev-list:*", "git rev-list --outp=x HEAD"),
        # review 15, finding 4: wget options that name or choose the file it writes
        ("wget:*", "wget -q -N -nH --default-page=Makefile http://127.0.0.1:1/"),
        ("wget:*", "wget --save-cookies x.txt http://a"),
        ("wget:*", "wget --rejected-log=x.txt http://a"),
        ("wget:*", "wget --warc-file=x http://a"),
        ("wget:*", "wget --hsts-file=x http://a"),
        ("wget:*", "wget --content-disposition http://a"),
        ("wget:*", "wget --trust-server-names http://a"),
        ("wget:*", "wget -N http://a/Makefile"),
        ("curl:*", "curl -w @- https://example.com"),
        ("curl:*", "curl --write-out @fmt https://example.com"),
        ("curl:*", "curl -sw@fmt https://example.com"),
        ("curl:*", "curl --ssl-sessions s https://example.com"),
        # review 15, finding 10: the test binary's spellings of go's profile outputs
        ("go test:*", "go test -test.coverprofile=Makefile ./..."),
        ("go test:*", "go test ./... -args -test.cpuprofile=Makefile"),
        ("go test:*", "go test -test.testlogfile=Makefile ./..."),
        ("go vet:*", "go vet -vettool=/tmp/x ./..."),
        ("go test:*", "go test -vettool /tmp/x ./..."),
        ("go build:*", "go build -pkgdir /tmp/x"),
        ("go vet:*", "go vet --vettool=/tmp/x ./..."),
        # review 16, finding 8: a repository on this machine, which git push (send-pack,
        # archive --remote) runs the receiving side of: its config runs programs
        ("git push:*", "git push ./evil main"),
        ("git push:*", "git push ../x"),
        ("git push:*", "git push /abs/evil main"),
        ("git push:*", "git push file:///abs/evil main"),
        ("git push:*", "git push FILE:///abs/evil main"),
        ("git push:*", "git push sub/evil main"),
        ("git push:*", "git push . HEAD:refs/heads/x"),
        ("git push:*", "git push --repo=./evil"),
        ("git push:*", "git push --rep ./evil main"),
        ("git push:*", "git push -uo ci.skip ./evil main"),
        ("git push:*", "git push --recurse-submodules check ./evil main"),
        ("git push:*", "git push -f -- ./evil main"),
        ("git:*", "git -C . push ./evil"),
        ("git:*", "git push ./evil:x main"),
        ("git:*", "git send-pack ./evil main"),  # (already: plumbing, review 13, finding 7)
        ("git archive:*", "git archive --remote=./e HEAD"),
        ("git archive:*", "git archive --remote ./e HEAD"),
        ("git archive:*", "git archive --format=tgz --remote=file:///abs/e HEAD"),
        ("git:*", "git upload-archive ./e"),
    ],
)
def test_options_that_run_programs_are_not_allowed_by_a_prefix(rule: str, command: str) -> None:
    (simple,) = parse_command(command).commands
    assert simple.runs_other is not None
    assert not compile_spec(rule).allows(simple)


@pytest.mark.parametrize(
    ("rule", "command"),
    [
        ("git fetch:*", "git fetch origin"),
        ("git grep:*", "git grep -n xyz"),
        ("git add:*", "git add $x"),
        ("git log:*", "git log --oneline -n 3"),
        ("git reflog:*", "git reflog -5 --format=%h"),
        ("git rev-list:*", "git rev-list --count HEAD"),
        ("wget:*", "wget -q -nc http://127.0.0.1:1/x"),
        ("curl:*", "curl -s -w '%{http_code}' https://example.com"),
        ("tar:*", "tar -cf x.tar f.txt"),
        ("tar:*", "tar --checkpoint=1 -cf x.tar f.txt"),
        ("zip:*", "zip -r x.zip d -T"),
        ("make:*", "make -j4 test"),
        ("sort:*", "sort -u f.txt"),
        ("ssh:*", "ssh -o StrictHostKeyChecking=no h ls"),
        ("ssh:*", "ssh -oUserKnownHostsFile=/dev/null h ls"),  # a value, not -F
        ("find:*", "find . -name '*.py'"),
        ("less:*", "less -R f.txt"),
        ("git archive:*", "git archive --format=tar HEAD"),
        ("git format-patch:*", "git format-patch --stdout HEAD~1"),
        ("git format-patch:*", "git format-patch -Sfoo -v2 HEAD~1"),  # -S's value, not -o
        ("tar:*", "tar --level=0 -cf x.tar f.txt"),
        # a positional output is what the rule names (as `cp:*` copies anywhere)
        ("git bundle:*", "git bundle create x.bundle HEAD"),
        ("git worktree:*", "git worktree add ../wt"),
        # the grammar reads these as numbers; to bash they are plain words
        ("git log:*", "git log -3"),
        ("git log:*", "git log --oneline -20 HEAD"),
        ("tail:*", "tail -n -3 f.txt"),
        ("npm test:*", "npm test"),
        ("npm test:*", "npm test --silent -- --coverage --config=jest.ci.js"),  # the script's
        ("npm run test:*", "npm run test --if-present -w packages/api"),
        ("pnpm test:*", "pnpm test --filter api --reporter=append-only"),
        ("pytest:*", "pytest -q -x -k 'not slow' -m unit -rfE -n 4 -W error tests/"),
        ("pytest:*", "pytest --co -q"),
        ("pytest:*", "pytest -qx --lf --tb=short --maxfail=3 -nauto --durations=20 tests/a.py"),
        ("pytest:*", "pytest -vv --cov=src --timeout=60 -k test_x"),
        ("python -m pytest:*", "python -m pytest -q -x tests/"),
        ("curl:*", "curl -sSL -XPOST -H 'Accept: x' -w '%{http_code}' https://example.com"),
        ("ssh:*", "ssh -p 2222 host ls"),
        ("rsync:*", "rsync -av src/ dst/"),
        ("go test:*", "go test -race -run TestX -count=1 ./..."),
        # review 16, finding 8: another host's repository, or a remote's name
        ("git push:*", "git push"),
        ("git push:*", "git push origin main"),
        ("git push:*", "git push -u origin feature/x"),
        ("git push:*", "git push --force-with-lease origin HEAD:refs/heads/a/b"),
        ("git push:*", "git push -o ci.skip origin main"),
        ("git push:*", "git push --recurse-submodules=check origin main"),
        ("git push:*", "git push https://github.com/a/b main"),
        ("git push:*", "git push git@github.com:a/b.git main"),
        ("git push:*", "git push ssh://git@example.com/a/b.git main"),
        ("git archive:*", "git archive --remote=git@example.com:a/b.git HEAD"),
    ],
)
def test_prefix_rules_still_allow_plain_options(rule: str, command: str) -> None:
    (simple,) = parse_command(command).commands
    assert compile_spec(rule).allows(simple)


def _git(work: Path, *args: str) -> None:
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, *args], cwd=work, check=True, timeout=20, capture_output=True)


@pytest.mark.parametrize(
    "command",
    [
        "git push evil main",
        "git push evil.git main",
        "git push other main",  # other.git: git tries NAME.git too
        "git push -u evil main",
        "git push --repo=evil",
        "git send-pack evil main",  # (already: plumbing)
        "git archive --remote=evil HEAD",
        "git archive --remote evil HEAD",
        "git status && git push evil main",  # each command by its own rule
        "cd sub && git push evil main",  # git pushes from the repository's top
        "git -C sub push inner main",
        "cd $x && git push origin main",  # any folder
    ],
)
async def test_a_push_to_a_folder_named_as_a_remote_is_not_allowed_by_a_prefix(
    tmp_path: Path, command: str
) -> None:
    """Review 16, finding 8: a bare name is a remote's, or, when no remote has it, the folder
    (or `NAME.git`) git pushes into, whose config runs programs: where such a folder is there,
    only a rule naming every word approves the push."""
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    for folder in ("evil", "evil.git", "other.git", "sub/inner"):
        (work / folder).mkdir(parents=True)
    (tmp_path / "origin").mkdir()  # above the repository's top: never a push target
    rules = {"allow": ["bash(git push:*)", "bash(git archive:*)", "bash(git status:*)"]}
    rules["allow"] += ["bash(git:*)", "bash(cd:*)"]
    s = supervisor("dont_ask", rules=rules)
    assert isinstance(await s.decide(request(work, command)), Deny)
    full = supervisor("dont_ask", rules={"allow": [f"bash({command})"]})
    if "&&" not in command:
        assert isinstance(await full.decide(request(work, command)), Approve)
    for still in ("git push origin main", "git push -u origin feature", "cd sub && git push"):
        assert isinstance(await s.decide(request(work, still)), Approve), still


@pytest.mark.parametrize(
    ("config", "command"),
    [
        ("core.alternateRefsCommand", "git push evil HEAD"),
        ("core.alternateRefsCommand", "git push {work}/evil.git HEAD:refs/heads/x"),
        ("core.alternateRefsCommand", "git push file://{work}/evil.git HEAD:refs/heads/y"),
        ("tar.tgz.command", "git archive --remote=evil --format=tgz HEAD"),
        ("tar.tgz.command", "git archive --format=tgz --remote file://{work}/evil.git HEAD"),
    ],
)
async def test_an_allow_rule_never_approves_a_push_into_a_repository_the_model_made(
    tmp_path: Path, config: str, command: str
) -> None:
    """Review 16, finding 8, with real git: a bare repository made in the working folder whose
    config names a command (`core.alternateRefsCommand`, which receive-pack runs for a
    repository with alternates; `tar.tgz.command`, which upload-archive runs), pushed to or
    archived from under `bash(git:*)`: the command ran. Now the call is denied in dont_ask."""
    if shutil.which("git") is None:
        pytest.skip("no git here")
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    (work / "f.txt").write_text("x\n")
    _git(work, "add", "f.txt")
    _git(work, "commit", "-qm", "x")
    _git(work, "init", "-q", "--bare", "evil.git")
    _git(work, "push", "-q", "evil.git", "HEAD:refs/heads/main")  # a HEAD to archive
    (work / "evil.git/objects/info/alternates").write_text(f"{work}/.git/objects\n")
    # (the tar command filters the archive; the other's input is never closed)
    code = f"touch {work}/P; cat #" if config.startswith("tar.") else f"touch {work}/P #"
    _git(work, "config", "-f", "evil.git/config", config, code)
    command = command.format(work=work)
    assert makes_file(command, "P", work), "git must really run the repository's command"
    results, decisions = await run_bash(
        work, [command], supervisor("dont_ask", rules={"allow": ["bash(git:*)"]})
    )
    assert decisions == ["deny"] and results[0].is_error
    assert not (work / "P").exists()


@pytest.mark.parametrize(
    "command",
    [
        "docker run alpine true",
        "docker exec c ls",
        "podman run alpine true",
        "podman exec c ls",
        "kubectl exec p -- ls",
        "kubectl run x --image=alpine",
        "go run .",
        "cargo run",
        "dotnet run",
        "npm exec x",
        "npx x",
        # review 13, finding 10
        "npm explore left-pad -- touch P",
        "npm x touch",
        "npm config set node-options=--import=x",
        "pnpm config set x y",
        "pip config set global.index-url x",
        "mise x -- touch P",
        "pdm exec touch P",
        "uv tool run touch",
        "uv run pytest",
        "poetry run pytest",
        "pipx run x",
    ],
)
def test_runners_get_exact_keys(command: str) -> None:
    assert command_key("bash", command) == f"bash({command})"


# --- review 4: a deny rule's words written anywhere in the command make it ask -------------

# Each really runs touch, and no analysis of the parsed command saw it before the rule's words
# counted wherever they are written (a callback, a program's own option, `--` before code,
# an unnormalised /dev/stdin, a subscript evaluated later).
MENTIONED_SPELLINGS = [
    "mapfile -C 'touch P' -c 1 a <<< x",
    "readarray -C 'touch P' -c 1 a <<< x",
    "compgen -C 'touch P' x",
    "eval -- 'touch P'",
    "source -- /dev/stdin <<< 'touch P'",
    ". -- /dev/stdin <<< 'touch P'",
    "source /dev/./stdin <<< 'touch P'",
    "bash //dev/stdin <<< 'touch P'",
    "x=$(printf 'a\\x5b\\x24(touch P)]'); a[x]=1",
    "x=$(printf 'a\\x5b\\x24(touch P)]'); let y=x",
    "capsh -- -c 'touch P'",
]


@pytest.mark.parametrize("command", MENTIONED_SPELLINGS)
async def test_a_deny_rules_words_anywhere_in_the_command_make_it_ask(
    tmp_path: Path, command: str
) -> None:
    program = command.split()[0]
    builtins = {".", "source", "eval", "mapfile", "readarray", "compgen", "bash"}
    if "=" not in program and program not in builtins and shutil.which(program) is None:
        pytest.skip(f"no {program} here")
    work = tmp_path / "work"
    work.mkdir()
    assert makes_file(command, "P", work), "the spelling must really run touch"
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, [command], s)
    assert decisions == ["deny"] and results[0].is_error
    assert not (work / "P").exists()


@pytest.mark.parametrize(
    "command", ["git -C . push", "git -c x.y=z push origin", "git --no-pager push", "git -P push"]
)
async def test_a_subcommand_deny_rule_sees_past_the_programs_global_options(
    tmp_path: Path, command: str
) -> None:
    s = supervisor("bypass", rules={"deny": ["bash(git push:*)"]})
    assert isinstance(await s.decide(request(tmp_path, command)), Deny), command


# Review 5, finding 02: git takes an alias (which may be `push`) from --config-env or the
# GIT_CONFIG_* variables, and runs git-push as git push; the rule's words are not in order.
GIT_ALIAS_SPELLINGS = [
    "X=push git --config-env=alias.p=X p origin HEAD:main",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push git p origin main",
    "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push; git p origin",
    "GIT_CONFIG_PARAMETERS=\"'alias.p'='push'\" git p origin main",
    "/usr/lib/git-core/git-push origin HEAD:main",
    "git-push origin main",
    "X=push git --config-env alias.p=X p",
    "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push git p",
    "GIT_CONFIG_GLOBAL=./g git p",
    "GIT_EXEC_PATH=./bin git p",
    "git --exec-path=./bin p",
    "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push; bash -c 'git p'",
    # review 12, finding 9: an alias from the user's own ~/.gitconfig (`[alias] p = push`)
    "git p origin HEAD:main",
    # review 13, finding 7: git's push plumbing
    "git send-pack ../remote.git main",
    "git http-push https://example.com/r.git main",
    "git remote-https origin https://example.com/r.git",
    "git -C . p origin HEAD:main",
]


async def test_a_git_alias_from_the_users_config_never_passes_a_deny_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 12, finding 9: with `bash(git:*)` allowed and `bash(git push:*)` denied, the
    user's alias `p = push` pushed. A subcommand that is not one of git's own may be an
    alias: the deny rule applies. git's own commands stay allowed."""
    import subprocess

    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[alias]\n\tp = push\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    # git really takes `p` for push here
    done = subprocess.run(
        ["git", "p", "--dry-run", "nowhere"], cwd=work, capture_output=True, text=True
    )
    assert "nowhere" in done.stderr and "is not a git command" not in done.stderr
    s = supervisor("default", rules={"allow": ["bash(git:*)"], "deny": ["bash(git push:*)"]})
    assert isinstance(await s.decide(request(work, "git p origin HEAD:main")), Deny)
    assert isinstance(await s.decide(request(work, "git status")), Approve)
    assert isinstance(await s.decide(request(work, "git log --oneline")), Approve)


@pytest.mark.parametrize("command", GIT_ALIAS_SPELLINGS)
async def test_a_git_subcommand_deny_rule_sees_aliases_from_the_environment(
    tmp_path: Path, command: str
) -> None:
    s = supervisor("bypass", rules={"deny": ["bash(git push:*)"]})
    assert isinstance(await s.decide(request(tmp_path, command)), Deny), command


@pytest.mark.parametrize("command", ["echo hi", "git status", "ls -la", "git pull"])
async def test_commands_that_do_not_mention_the_rule_keep_bypass(
    tmp_path: Path, command: str
) -> None:
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)", "bash(git push:*)"]})
    assert isinstance(await s.decide(request(tmp_path, command)), Approve), command


# Review 4, finding 04: a subscript naming a variable evaluates its value (here built without
# the word the rule names, so only the analysis can see it).
SUBSCRIPT_SPELLINGS = [
    "x=$(printf 'a\\x5b\\x24(\\x74ouch P)]'); a[x]=1",
    "x=$(printf 'a\\x5b\\x24(\\x74ouch P)]'); a[x]+=1",
    "x=$(printf 'a\\x5b\\x24(\\x74ouch P)]'); declare a[x]=1",
    "x=$(printf 'a\\x5b\\x24(\\x74ouch P)]'); read \"a[x]\" <<< 1",
    "x=$(printf 'a\\x5b\\x24(\\x74ouch P)]'); printf -v \"a[x]\" 1",
    "x=$(printf 'a\\x5b\\x24(\\x74ouch P)]'); let y=x",
]


@pytest.mark.parametrize("command", SUBSCRIPT_SPELLINGS)
async def test_a_subscript_naming_a_variable_makes_deny_rules_ask(
    tmp_path: Path, command: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    assert makes_file(command, "P", work), "the spelling must really run touch"
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, [command], s)
    assert decisions == ["deny"] and results[0].is_error
    assert not (work / "P").exists()


@pytest.mark.parametrize("command", ["a[1]=2", "ls [a-z]*.py", "x=1; echo $x"])
async def test_literal_subscripts_and_globs_keep_bypass(tmp_path: Path, command: str) -> None:
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    assert isinstance(await s.decide(request(tmp_path, command)), Approve), command


# Review 4, finding 15: a code variable set by a builtin, with no `NAME=` (envf holds the code).
CODE_VARIABLE_SPELLINGS = [
    "read -r BASH_ENV <<< envf; export BASH_ENV; bash -c :",
    "printf -v BASH_ENV '%s' envf; export BASH_ENV; bash -c :",
    "read -r PS4 < ps4f; set -x; :",
    "mapfile -t PS4 < ps4f; set -x; :",
    'for PS4 in "$(cat ps4f)"; do set -x; :; done',
]


@pytest.mark.parametrize("command", CODE_VARIABLE_SPELLINGS)
async def test_a_code_variable_set_without_an_assignment_makes_deny_rules_ask(
    tmp_path: Path, command: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "envf").write_text("touch P\n")
    (work / "ps4f").write_text("$(touch P)\n")
    assert makes_file(command, "P", work), "the spelling must really run touch"
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, [command], s)
    assert decisions == ["deny"] and results[0].is_error
    assert not (work / "P").exists()


# Review 5, finding 06: the denied program run under another name, a copy made with a glob or
# a backslash in its path, or a symlink (a project can ship `bin/t -> /usr/bin/touch`).
RENAMED_SPELLINGS = [
    "cp /usr/bin/tou?h t3 && ./t3 P",
    "cp /usr/bin/touc\\h t3 && ./t3 P",
    "cp /usr/bin/to''uch t3 && ./t3 P",
    'cp /usr/bin/to"u"ch t3 && ./t3 P',
    "ln -s /usr/bin/to?ch t5 && ./t5 P",
    "cp /usr/bin/[t]ouch t6 && ./t6 P",
    'cd /usr/bin && cp t?uch "$OLDPWD/t7" && cd - && ./t7 P',
    "bin/t P",
    "./bin/t P",
    "env bin/t P",
    "nice -n 1 ./bin/t P",
    # review 15, finding 11: from a folder the line changes to, or through a PATH it sets
    "cd bin && ./t ../P",
    "(cd bin; ./t ../P)",
    "pushd bin >/dev/null; ./t ../P",
    "env -C bin ./t ../P",
    "env --chdir=bin ./t ../P",
    "cd bin; PATH=. t ../P",
    "env PATH=bin t P",
    'export PATH="$PWD/bin:$PATH"; t P',
    'PATH="$PWD/bin" t P',
    # review 16, finding 1: PATH set by a plain assignment or a builtin, in -c code too
    "PATH=bin:$PATH; t P",
    "PATH+=:bin; t P",
    "read PATH <<< bin; t P",
    "printf -v PATH bin; t P",
    "for PATH in bin; do t P; done",
    "eval PATH=bin; t P",
    "IFS=: read -r PATH x <<< bin:y; t P",
    "set -a; PATH=bin; t P",
    "v=PATH; read $v <<< bin; t P",
    "bash -c 'export PATH=bin; t P'",
    "P\\ATH=x; read P\\ATH <<< bin; t P",
    "hash -p bin/t ls; ls P",
    # review 16, finding 5: the folder options of env, unshare (bundled, abbreviated)
    "env -iC bin ./t ../P",
    "env -vC bin ./t ../P",
    "env --ch=bin ./t ../P",
    "env --chd bin ./t ../P",
    "env -S'-C bin ./t ../P'",
    "/usr/bin/env -S'-C bin ./t ../P'",
    "command env -S'-C bin ./t ../P'",
    "unshare --wd=bin ./t ../P",
    "unshare --wd bin ./t ../P",
    # folders the line does not spell
    "CDPATH=. cd bin >/dev/null && ./t ../P",
    "shopt -s cdable_vars; d=bin; cd d && ./t ../P",
    "echo cd bin > f; . ./f; ./t ../P",
    "find . -name t -execdir ./t ../P \\;",
]


@pytest.mark.parametrize("command", RENAMED_SPELLINGS)
async def test_a_deny_rule_sees_the_program_under_another_name(
    tmp_path: Path, command: str
) -> None:
    if shutil.which("touch") != "/usr/bin/touch":
        pytest.skip("touch is not /usr/bin/touch here")
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    (work / "bin" / "t").symlink_to("/usr/bin/touch")
    assert makes_file(command, "P", work), "the spelling must really run touch"
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, [command], s)
    assert decisions == ["deny"] and results[0].is_error, command
    assert not (work / "P").exists()


def test_the_renamed_program_check_is_bounded(tmp_path: Path) -> None:
    """Review 16, finding 6: every command word was looked up for a link in every folder the
    line may change to, without a bound, on the event loop (20,000 `./x` after six `cd`s took
    35 s; words through chains of links a project ships, 4.8 s per 600 characters). Past
    1,000 lookups a word may be anything: asked (denied in bypass), at once."""
    import asyncio
    import concurrent.futures

    cds = "".join(f"cd {c}; " for c in "abcdef")
    # six `cd`s: 64 folders the words may run in
    few = cds + "; ".join(f"./x{i}" for i in range(10))  # 640 lookups: no link, bypass
    many = cds + "; ".join(f"./x{i}" for i in range(40))  # 2,560: past the bound
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        for command, asked in [(few, False), (many, True)]:
            decided = pool.submit(asyncio.run, s.decide(request(tmp_path, command)))
            result = decided.result(timeout=60)
            assert isinstance(result, Deny if asked else Approve), (asked, type(result))


# Review 16, finding 2: a link to a shell or a wrapper (which a project can ship) runs code
# deny rules must see through, as they see through `bash -c` and `env`.
@pytest.mark.parametrize(
    "command",
    [
        "bin/s -c 'x=tou; ${x}ch P'",
        "bin/s -c '$(printf tou)ch P'",
        "bin/s -c 'a=(tou ch); ${a[0]}${a[1]} P'",
        "bin/e bash -c 'x=tou; ${x}ch P'",
        "./bin/s -c 'bash -c \"x=tou; \\${x}ch P\"'",
        "cd bin && ./e sh -c 'x=tou; ${x}ch ../P'",
    ],
)
async def test_a_deny_rule_sees_through_a_link_to_a_shell_or_a_wrapper(
    tmp_path: Path, command: str
) -> None:
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    (work / "bin" / "s").symlink_to(shutil.which("bash") or "/bin/bash")
    (work / "bin" / "e").symlink_to(shutil.which("env") or "/usr/bin/env")
    assert makes_file(command, "P", work), "the spelling must really run touch"
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, [command], s)
    assert decisions == ["deny"] and results[0].is_error, command
    assert not (work / "P").exists()


@pytest.mark.parametrize(
    "command", ["ls *.py", "cat bin/readme", "echo t?", "./run.sh", "cd bin && cat readme"]
)
async def test_globs_and_paths_that_cannot_name_the_program_keep_bypass(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "readme").write_text("x")
    (tmp_path / "run.sh").symlink_to("bin/readme")
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    assert isinstance(await s.decide(request(tmp_path, command)), Approve), command


# Review 5, findings 11 and 14: bash runs substitutions in an unquoted here-document's body;
# the parser did not show backticks there, nor `$(…)` in a <<- body.
HEREDOC_SUBSTITUTIONS = [
    "ls <<EOF\n`touch P`\nEOF",
    "ls <<-EOF\n\t$(touch P)\n\tEOF",
    "ls <<-EOF\n\t`touch P`\n\tEOF",
    "ls <<EOF\nx ${x:-`touch P`}\nEOF",
    "ls <<EOF <<EOG\nok\nEOF\n`touch P`\nEOG",
    "ls <<EOF\n$((`touch P`))\nEOF",
    "ls <<EOF\n`tou''ch P`\nEOF",
    "ls <<'EOF'\n`touch P`\nEOF",  # a quoted delimiter: the body is text, not run
]


@pytest.mark.parametrize("command", HEREDOC_SUBSTITUTIONS)
async def test_substitutions_in_a_here_document_are_never_allowed_and_deny_rules_see_them(
    tmp_path: Path, command: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    runs = makes_file(command, "P", work)
    assert runs == ("'EOF'" not in command), "bash runs the body's code unless quoted"
    allow = supervisor("default", rules={"allow": ["bash(ls:*)"]})
    _, decisions = await run_bash(work, [command], allow)
    assert decisions == (["deny"] if runs else ["approve"]), command
    assert not (work / "P").exists()
    if runs:
        deny = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
        assert isinstance(await deny.decide(request(work, command)), Deny), command


@pytest.mark.parametrize(
    "command",
    [
        "/proc/self/exe -c 'tou\"\"ch P'",
        "/proc/self/exe <<< 'tou\"\"ch P'",
        "/proc/thread-self/exe -c 'tou\"\"ch P'",
    ],
)
async def test_the_running_bash_under_proc_is_read_as_bash(tmp_path: Path, command: str) -> None:
    # Review 5, finding 10: /proc/self/exe is the bash the tool runs; its code was not read.
    work = tmp_path / "work"
    work.mkdir()
    assert makes_file(command, "P", work), "the spelling must really run touch"
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    results, decisions = await run_bash(work, [command], s)
    assert decisions == ["deny"] and results[0].is_error, command
    assert not (work / "P").exists()


async def test_a_bare_word_found_through_an_empty_path_entry_never_escapes_a_deny_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review 6, finding 34: with an empty PATH entry bash ran the working folder's `t` (a link
    # to touch) for the bare word `t`, which deny rules do not resolve.
    work = tmp_path / "work"
    work.mkdir()
    (work / "t").symlink_to(shutil.which("touch") or "/usr/bin/touch")
    monkeypatch.setenv("PATH", os.environ["PATH"] + os.pathsep)
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    _, decisions = await run_bash(work, ["t P || true"], s)
    assert decisions == ["approve"]
    assert not (work / "P").exists()  # the bash tool's PATH has only absolute entries


@pytest.mark.parametrize(
    "command",
    [
        "tmux new -d $'\\ttouch P'",
        "tmux new -d $'\\x74ouch P'",
        "tmux new -d $'tou\\x63h P'",
        "tmux new -d $'\\164ouch P'",
        "tmux new -d $'true\\ntouch P'",
        'tmux new -d "tou${x}ch P"',
        'tmux new -d "${x:-touch} P"',
        "git rebase -q --exec $'\\x74ouch Q' HEAD~1",
        "git submodule foreach $'\\x74ouch P'",
        "script -qctouch\\ P /dev/null",  # glued to a bundle of short options
        "git rebase -xtouch\\ P HEAD~1",
    ],
)
async def test_a_denied_name_spelt_with_bash_escapes_or_expansions_is_a_possible_match(
    command: str, tmp_path: Path
) -> None:
    """Review 7, finding 16: the token net under unknown wrappers read `$'…'` as written, did
    not look through expansions bash makes empty, nor into bundled short options, so
    `tmux new -d $'\\x74ouch P'` ran `touch` under deny `bash(touch:*)` in bypass."""
    s = supervisor("bypass", rules={"deny": ["bash(touch:*)"]})
    decided = await s.decide(request(tmp_path, command))
    assert isinstance(decided, Deny) and "bash(touch:*)" in decided.reason, decided
