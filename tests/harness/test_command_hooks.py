"""Command hooks from settings, run for real: small bash and Python scripts written here, in
Claude Code's shape (issue 21, part 1 and its "Done when" list)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness import (
    AgentEndEvent,
    AgentHarness,
    Block,
    CommandHookError,
    CommandHooks,
    FauxModel,
    FauxReply,
    FauxToolCall,
    HandlerErrorEvent,
    HookSettingsError,
    JsonlSessionRepo,
    PromptBlockedError,
    SecuritySupervisor,
    Session,
    SystemMessageEvent,
    ToolResultMessage,
    bash_tool,
    find_tool,
    read_tool,
    write_tool,
)

PY = shlex.quote(sys.executable)


def script(folder: Path, name: str, body: str) -> str:
    """Write a hook script into ``folder/hooks`` and return the command that runs it."""
    path = folder / "hooks" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    runner = PY if name.endswith(".py") else "bash"
    return f"{runner} {shlex.quote(str(path))}"


def hooks(event: str, *commands: str, matcher: str | None = None, timeout: float = 10) -> Any:
    group: dict[str, Any] = {
        "hooks": [{"type": "command", "command": c, "timeout": timeout} for c in commands]
    }
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}}


class Run:
    """One harness with command hooks, a scripted model, the built-in tools and a supervisor
    in ``bypass`` mode (so what a hook does is all that decides)."""

    def __init__(
        self,
        session: Session,
        cwd: Path,
        settings: Any,
        replies: Sequence[FauxReply | str],
        supervisor: SecuritySupervisor | None = None,
        **options: Any,
    ) -> None:
        self.session = session
        self.model = FauxModel(list(replies))
        self.harness = AgentHarness(
            session=session,
            model=self.model,
            tools=[bash_tool(), read_tool(), write_tool(), find_tool()],
            supervisor=supervisor or SecuritySupervisor(mode="bypass", setting_sources=()),
            cwd=cwd,
            resources=None,
            command_hooks=CommandHooks.from_settings(settings),
            **options,
        )
        self.errors: list[HandlerErrorEvent] = []
        self.ends: list[AgentEndEvent] = []
        self.told: list[SystemMessageEvent] = []
        self.harness.on("handler_error")(lambda s, event: self.errors.append(event))
        self.harness.on("agent_end")(lambda s, event: self.ends.append(event))
        self.harness.on("system_message")(lambda s, event: self.told.append(event))

    def results(self) -> list[ToolResultMessage]:
        return [
            m for m in self.session.build_context().messages if isinstance(m, ToolResultMessage)
        ]


def calls(*arguments: tuple[str, dict[str, Any]]) -> list[FauxReply | str]:
    return [
        FauxReply(tool_calls=[FauxToolCall(name=n, arguments=a) for n, a in arguments]),
        "done",
    ]


@pytest.fixture
async def session(tmp_path: Path) -> Session:
    return await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that still runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# --- PreToolUse -------------------------------------------------------------------------------

GUARD_SH = """#!/bin/bash
# Claude Code's classic guard: read tool_input.command, refuse rm -rf with exit code 2.
command=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tool_input"]["command"])')
case "$command" in
  *"rm -rf"*) echo "refusing '$command': rm -rf is not allowed in this project" >&2; exit 2;;
esac
exit 0
"""


async def test_a_bash_guard_exiting_2_blocks_and_the_model_sees_its_stderr(
    session: Session, tmp_path: Path
) -> None:
    (tmp_path / "keep").mkdir()
    guard = script(tmp_path, "guard.sh", GUARD_SH)
    run = Run(
        session,
        tmp_path,
        hooks("PreToolUse", guard, matcher="Bash"),
        calls(("bash", {"command": "rm -rf keep"}), ("bash", {"command": "echo fine"})),
    )
    await run.harness.prompt("clean up")

    blocked, fine = run.results()
    assert blocked.is_error
    assert blocked.text == "refusing 'rm -rf keep': rm -rf is not allowed in this project"
    assert (tmp_path / "keep").is_dir()
    assert not fine.is_error and fine.text.strip() == "fine"
    # The model's next request carries the hook's words.
    assert "rm -rf is not allowed" in str(run.model.requests[1].messages[-2].text)
    assert run.errors == []


async def test_a_python_hook_denies_with_permission_decision(
    session: Session, tmp_path: Path
) -> None:
    deny = script(
        tmp_path,
        "deny.py",
        """import json, sys
event = json.load(sys.stdin)
if event["tool_input"]["file_path"].endswith(".env"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "secrets stay unread"}}))
""",
    )
    (tmp_path / ".env").write_text("KEY=1")
    (tmp_path / "a.txt").write_text("hello")
    run = Run(
        session,
        tmp_path,
        hooks("PreToolUse", deny, matcher="Read"),
        calls(("read", {"path": ".env"}), ("read", {"path": "a.txt"})),
    )
    await run.harness.prompt("look")
    secret, fine = run.results()
    assert secret.is_error and secret.text == "secrets stay unread"
    assert not fine.is_error and "hello" in fine.text


async def test_updated_input_is_validated_and_runs_in_either_spelling(
    session: Session, tmp_path: Path
) -> None:
    rewrite = script(
        tmp_path,
        "rewrite.py",
        """import json, sys
event = json.load(sys.stdin)
tool_input = event["tool_input"]
if event["tool_name"] == "Bash":
    tool_input["command"] = tool_input["command"].replace("npm test", "echo patched")
elif event["tool_name"] == "Write":
    tool_input["file_path"] = tool_input["file_path"] + ".bak"  # Claude Code's field
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "allow", "updatedInput": tool_input}}))
""",
    )
    broken = script(
        tmp_path,
        "broken.py",
        """import json
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "updatedInput": {"command": 42}}}))
""",
    )
    run = Run(
        session,
        tmp_path,
        {
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Bash|Write", "hooks": [{"type": "command", "command": rewrite}]},
                    {"matcher": "Read", "hooks": [{"type": "command", "command": broken}]},
                ]
            }
        },
        calls(
            ("bash", {"command": "npm test"}),
            ("write", {"path": "notes.md", "content": "x"}),
            ("read", {"path": "notes.md"}),
        ),
    )
    await run.harness.prompt("go")
    bash, write, read = run.results()
    assert not bash.is_error and bash.text.strip() == "patched"
    assert bash.extra["effectiveInput"] == {"command": "echo patched"}
    assert (tmp_path / "notes.md.bak").read_text() == "x" and not (tmp_path / "notes.md").exists()
    assert write.extra["effectiveInput"]["path"] == str(tmp_path / "notes.md.bak")
    assert "file_path" not in write.extra["effectiveInput"]
    assert read.is_error and "invalid arguments" in read.text  # validated like PatchInput


async def test_a_hook_past_its_timeout_is_killed_with_its_children_and_blocks(
    session: Session, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    slow = script(
        tmp_path,
        "slow.sh",
        f"""#!/bin/bash
sleep 300 &
echo "$$ $!" > {shlex.quote(str(pids))}
sleep 300
""",
    )
    run = Run(
        session,
        tmp_path,
        hooks("PreToolUse", slow, timeout=0.5),
        calls(("bash", {"command": "echo never"})),
    )
    await run.harness.prompt("go")

    [result] = run.results()
    assert result.is_error and "timed out" in result.text and "fails closed" in result.text
    assert [type(e.error) for e in run.errors] == [CommandHookError]
    assert run.errors[0].event_name == "tool_call" and "slow.sh" in run.errors[0].receiver
    shell, child = map(int, pids.read_text().split())
    assert not alive(shell) and not alive(child)


@pytest.mark.parametrize(
    "output",
    [
        "not json {",
        "{not json",
        "[1, 2]",
        '{"decison": "block"}',  # a misspelt key must not let the call through
        '{"decision": "allow"}',
        '{"hookSpecificOutput": {"permissionDecision": "maybe"}}',
        '{"hookSpecificOutput": {"hookEventName": "PostToolUse"}}',
        '{"continue": "no"}',
    ],
)
async def test_a_hook_printing_garbage_blocks_with_a_handler_error(
    session: Session, tmp_path: Path, output: str
) -> None:
    garbage = script(tmp_path, "garbage.py", f"print({output!r})\n")
    run = Run(session, tmp_path, hooks("PreToolUse", garbage), calls(("bash", {"command": "true"})))
    await run.harness.prompt("go")
    [result] = run.results()
    assert result.is_error and "fails closed" in result.text
    assert [e.error.code for e in run.errors] == ["command_hook_failed"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("body", ["exit 1", "echo oops >&2; exit 3", "kill -9 $$"])
async def test_another_exit_is_a_handler_error_and_blocks(
    session: Session, tmp_path: Path, body: str
) -> None:
    failing = script(tmp_path, "failing.sh", body + "\n")
    run = Run(session, tmp_path, hooks("PreToolUse", failing), calls(("bash", {"command": "true"})))
    await run.harness.prompt("go")
    [result] = run.results()
    assert result.is_error and "failing.sh" in result.text
    assert len(run.errors) == 1


async def test_hooks_of_one_event_run_in_parallel_and_any_block_wins(
    session: Session, tmp_path: Path
) -> None:
    # Each waits for the other's marker: run one after the other, the first would time out.
    def waiter(me: str, other: str, answer: str) -> str:
        return script(
            tmp_path,
            f"{me}.py",
            f"""import json, os, sys, time
sys.stdin.read()
open(os.path.join({str(tmp_path)!r}, {me!r}), "w").close()
deadline = time.time() + 20
while not os.path.exists(os.path.join({str(tmp_path)!r}, {other!r})):
    if time.time() > deadline:
        sys.exit(1)
    time.sleep(0.01)
print(json.dumps({answer}))
""",
        )

    allow = waiter("a", "b", '{"hookSpecificOutput": {"permissionDecision": "allow"}}')
    block = waiter("b", "a", '{"decision": "block", "reason": "b says no"}')
    run = Run(
        session, tmp_path, hooks("PreToolUse", allow, block), calls(("bash", {"command": "true"}))
    )
    await run.harness.prompt("go")
    [result] = run.results()
    assert result.is_error and result.text == "b says no"
    assert run.errors == []


async def test_patches_chain_in_settings_order(session: Session, tmp_path: Path) -> None:
    def patcher(name: str, change: str) -> str:
        return script(
            tmp_path,
            name,
            f"""import json, sys
tool_input = json.load(sys.stdin)["tool_input"]
{change}
print(json.dumps({{"hookSpecificOutput": {{"updatedInput": tool_input}}}}))
""",
        )

    first = patcher("first.py", 'tool_input["command"] = "echo first"')
    timeout = patcher("timeout.py", 'tool_input["timeout"] = 5')
    second = patcher("second.py", 'tool_input["command"] = "echo second"')
    run = Run(
        session,
        tmp_path,
        hooks("PreToolUse", first, timeout, second),
        calls(("bash", {"command": "echo model"})),
    )
    await run.harness.prompt("go")
    [result] = run.results()
    assert result.extra["effectiveInput"] == {"command": "echo second", "timeout": 5}
    assert result.text.strip() == "second"


async def test_stdin_holds_claude_codes_fields_and_the_environment_names_the_project(
    session: Session, tmp_path: Path
) -> None:
    dump = tmp_path / "seen.json"
    recorder = script(
        tmp_path,
        "record.py",
        f"""import json, os, sys
event = json.load(sys.stdin)
event["env"] = {{k: os.environ.get(k) for k in ("HARNESS_PROJECT_DIR", "CLAUDE_PROJECT_DIR")}}
event["pwd"] = os.getcwd()
with open({str(dump)!r}, "a") as f:
    f.write(json.dumps(event) + "\\n")
""",
    )
    run = Run(
        session,
        tmp_path,
        hooks("PreToolUse", recorder, matcher="Glob"),
        calls(("find", {"pattern": "*.md"}), ("bash", {"command": "true"})),
    )
    await run.harness.prompt("go")
    [seen] = [orjson.loads(line) for line in dump.read_text().splitlines()]
    assert seen == {
        "session_id": session.id,
        "transcript_path": str(session.path),
        "cwd": str(tmp_path),
        "permission_mode": "bypassPermissions",
        "hook_event_name": "PreToolUse",
        "harness_event_name": "tool_call",
        "tool_name": "Glob",
        "harness_tool_name": "find",
        "tool_input": {"pattern": "*.md"},
        "tool_use_id": seen["tool_use_id"],
        "env": {"HARNESS_PROJECT_DIR": str(tmp_path), "CLAUDE_PROJECT_DIR": str(tmp_path)},
        "pwd": str(tmp_path),
    }


async def test_hostile_tool_input_reaches_the_hook_on_stdin_only(
    session: Session, tmp_path: Path
) -> None:
    """Model output lands in the hook's stdin, never in its command line: no quoting of it
    can make the hook's shell run anything."""
    dump = tmp_path / "stdin.json"
    recorder = script(tmp_path, "cat.sh", f"cat > {shlex.quote(str(dump))}\n")
    nasty = "$(touch pwned1); `touch pwned2`; \"'; touch pwned3; '\"\n"
    run = Run(
        session,
        tmp_path,
        hooks("PreToolUse", recorder, matcher="Write"),
        calls(("write", {"path": "x'; touch pwned4; '.txt", "content": nasty})),
    )
    await run.harness.prompt("go")
    seen = orjson.loads(dump.read_bytes())
    assert seen["tool_input"]["content"] == nasty
    assert not any(tmp_path.glob("pwned*"))


async def test_a_hook_leaves_nothing_running_when_it_exits(
    session: Session, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    quick = script(
        tmp_path,
        "quick.sh",
        f"""#!/bin/bash
sleep 300 &
echo $! > {shlex.quote(str(pids))}
exit 0
""",
    )
    run = Run(
        session, tmp_path, hooks("PreToolUse", quick), calls(("bash", {"command": "echo ok"}))
    )
    await run.harness.prompt("go")
    [result] = run.results()
    assert not result.is_error and result.text.strip() == "ok"
    assert not alive(int(pids.read_text()))


async def test_more_than_a_mebibyte_of_output_is_a_failure(
    session: Session, tmp_path: Path
) -> None:
    flood = script(tmp_path, "flood.py", "import sys\nsys.stdout.write('x' * 3_000_000)\n")
    run = Run(session, tmp_path, hooks("PreToolUse", flood), calls(("bash", {"command": "true"})))
    await run.harness.prompt("go")
    [result] = run.results()
    assert result.is_error and "more than 1 MiB" in result.text


async def test_an_identical_command_runs_once(session: Session, tmp_path: Path) -> None:
    count = tmp_path / "count"
    counter = script(
        tmp_path, "count.sh", f"cat > /dev/null; echo x >> {shlex.quote(str(count))}\n"
    )
    settings = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": counter}]},
                {"matcher": "bash", "hooks": [{"type": "command", "command": counter}]},
            ]
        }
    }
    run = Run(session, tmp_path, settings, calls(("bash", {"command": "true"})))
    await run.harness.prompt("go")
    assert count.read_text() == "x\n"


async def test_a_python_block_with_priority_stops_before_command_hooks_run(
    session: Session, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    touch = script(tmp_path, "touch.sh", f"touch {shlex.quote(str(marker))}\n")
    run = Run(session, tmp_path, hooks("PreToolUse", touch), calls(("bash", {"command": "true"})))
    run.harness.on("tool_call", priority=10)(lambda s, event: Block(reason="python says no"))
    await run.harness.prompt("go")
    assert run.results()[0].text == "python says no"
    assert not marker.exists()  # one bus, one chain: the first Block wins


# --- PostToolUse, UserPromptSubmit, Stop, SessionStart --------------------------------------


async def test_a_post_tool_use_formatter_sees_the_tool_response(
    session: Session, tmp_path: Path
) -> None:
    seen = tmp_path / "post.json"
    formatter = script(
        tmp_path,
        "format.sh",
        f"""#!/bin/bash
input=$(cat)
echo "$input" > {shlex.quote(str(seen))}
file=$(echo "$input" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["tool_input"]["file_path"])')
tr a-z A-Z < "$file" > "$file.tmp" && mv "$file.tmp" "$file"
echo '{{"hookSpecificOutput": {{"hookEventName": "PostToolUse",' \
  '"additionalContext": "formatted"}}}}'
""",
    )
    run = Run(
        session,
        tmp_path,
        hooks("PostToolUse", formatter, matcher="Edit|Write"),
        calls(("write", {"path": "a.txt", "content": "shout"})),
    )
    await run.harness.prompt("go")
    event = orjson.loads(seen.read_bytes())
    assert event["hook_event_name"] == "PostToolUse"
    assert event["tool_input"] == {
        "path": "a.txt",
        "file_path": str(tmp_path / "a.txt"),
        "content": "shout",
    }
    assert event["tool_response"]["is_error"] is False
    assert "a.txt" in event["tool_response"]["content"]
    assert (tmp_path / "a.txt").read_text() == "SHOUT"
    [result] = run.results()
    assert result.text.endswith("PostToolUse hook: formatted")


async def test_a_post_tool_use_block_is_feedback_for_the_model(
    session: Session, tmp_path: Path
) -> None:
    lint = script(
        tmp_path, "lint.sh", "cat > /dev/null\necho 'line 1: missing docstring' >&2\nexit 2\n"
    )
    run = Run(session, tmp_path, hooks("PostToolUse", lint), calls(("bash", {"command": "echo x"})))
    await run.harness.prompt("go")
    [result] = run.results()
    assert result.text.endswith("PostToolUse hook: line 1: missing docstring")
    assert not result.is_error  # the tool ran; the hook only adds what the model should know


async def test_post_tool_use_runs_only_for_calls_that_ran_and_failure_for_those_that_failed(
    session: Session, tmp_path: Path
) -> None:
    # Claude Code's rule: PostToolUse after a success, PostToolUseFailure after a failure,
    # neither for a call a hook blocked, permissions denied or whose input was invalid.
    def recorder(name: str) -> str:
        log = tmp_path / f"{name}.jsonl"
        return script(
            tmp_path, f"{name}.sh", f"cat >> {shlex.quote(str(log))}; echo >> /dev/null\n"
        )

    guard = script(tmp_path, "guard.sh", GUARD_SH)
    settings = hooks("PreToolUse", guard)
    settings["hooks"]["PostToolUse"] = hooks("PostToolUse", recorder("post"))["hooks"][
        "PostToolUse"
    ]
    settings["hooks"]["PostToolUseFailure"] = hooks("PostToolUseFailure", recorder("failure"))[
        "hooks"
    ]["PostToolUseFailure"]
    run = Run(
        session,
        tmp_path,
        settings,
        calls(
            ("bash", {"command": "echo ran"}),
            ("bash", {"command": "rm -rf build"}),  # blocked by the PreToolUse hook
            ("bash", {"command": "git push"}),  # denied by a permission rule
            ("bash", {"command": "echo failed; exit 3"}),  # ran, and failed
            ("bash", {"wrong": 1}),  # invalid input: never ran
        ),
        supervisor=SecuritySupervisor(
            mode="bypass", rules={"deny": ["bash(git push:*)"]}, setting_sources=()
        ),
    )
    await run.harness.prompt("go")

    def seen(name: str) -> list[dict[str, Any]]:
        path = tmp_path / f"{name}.jsonl"
        return (
            [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []
        )

    [post] = seen("post")
    assert post["hook_event_name"] == "PostToolUse"
    assert post["tool_input"]["command"] == "echo ran"
    [failure] = seen("failure")
    assert failure["hook_event_name"] == "PostToolUseFailure"
    assert failure["tool_input"]["command"] == "echo failed; exit 3"
    assert failure["tool_response"]["is_error"] is True and "failed" in failure["error"]
    assert [r.is_error for r in run.results()] == [False, True, True, True, True]


async def test_a_post_tool_use_failure_hook_adds_context_for_the_model(
    session: Session, tmp_path: Path
) -> None:
    hint = script(
        tmp_path,
        "hint.sh",
        'cat > /dev/null\necho \'{"hookSpecificOutput": {"hookEventName": '
        '"PostToolUseFailure", "additionalContext": "try make clean"}}\'\n',
    )
    run = Run(
        session,
        tmp_path,
        hooks("PostToolUseFailure", hint, matcher="Bash"),
        calls(("bash", {"command": "exit 1"}), ("bash", {"command": "true"})),
    )
    await run.harness.prompt("go")
    failed, ok = run.results()
    assert failed.text.endswith("PostToolUseFailure hook: try make clean")
    assert "hook" not in ok.text


async def test_a_user_prompt_submit_script_refuses_a_prompt_and_nothing_is_written(
    session: Session, tmp_path: Path
) -> None:
    refuse = script(
        tmp_path,
        "refuse.py",
        """import json, sys
prompt = json.load(sys.stdin)["prompt"]
if "password" in prompt:
    print("prompts must not hold passwords", file=sys.stderr)
    sys.exit(2)
print("Current branch: main")  # plain stdout is context, as in Claude Code
""",
    )
    run = Run(session, tmp_path, hooks("UserPromptSubmit", refuse), ["fine"])
    assert session.path is not None
    before = session.path.read_bytes()
    with pytest.raises(PromptBlockedError) as raised:
        await run.harness.prompt("my password is hunter2")
    assert raised.value.reason == "prompts must not hold passwords"
    assert session.path.read_bytes() == before and list(session.entries()) == []

    await run.harness.prompt("what branch?")
    assert [str(getattr(m, "text", "")) for m in run.model.requests[0].messages] == [
        "what branch?",
        "Current branch: main",
    ]


async def test_a_stop_script_that_continues_twice_gives_exactly_two_extra_turns(
    session: Session, tmp_path: Path
) -> None:
    count = tmp_path / "stops"
    twice = script(
        tmp_path,
        "twice.py",
        f"""import json, os, sys
event = json.load(sys.stdin)
n = int(open({str(count)!r}).read()) if os.path.exists({str(count)!r}) else 0
open({str(count)!r}, "w").write(str(n + 1))
if n < 2:
    reason = f"continue ({{event['stop_hook_active']}})"
    print(json.dumps({{"decision": "block", "reason": reason}}))
""",
    )
    run = Run(session, tmp_path, hooks("Stop", twice), ["one", "two", "three"])
    reply = await run.harness.prompt("work")
    assert reply.text == "three" and run.model.remaining == 0 and count.read_text() == "3"
    sent = [str(getattr(m, "text", "")) for m in run.model.requests[2].messages]
    assert sent == ["work", "one", "continue (False)", "two", "continue (True)"]
    assert run.ends[0].end_reason is None


async def test_a_stop_script_that_never_lets_go_stops_at_the_cap(
    session: Session, tmp_path: Path
) -> None:
    never = script(tmp_path, "never.sh", "cat > /dev/null\necho 'tests still fail' >&2\nexit 2\n")
    run = Run(session, tmp_path, hooks("Stop", never), ["a", "b", "c"], max_stop_continues=2)
    reply = await run.harness.prompt("work")
    assert reply.text == "c" and run.model.remaining == 0
    end_reason = run.ends[0].end_reason
    assert end_reason is not None and "max_stop_continues=2" in end_reason
    assert "tests still fail" in end_reason


async def test_continue_false_ends_the_run_with_its_stop_reason(
    session: Session, tmp_path: Path
) -> None:
    halt = script(
        tmp_path,
        "halt.py",
        'import json\nprint(json.dumps({"continue": False, "stopReason": "budget spent", '
        '"systemMessage": "stopping: budget"}))\n',
    )
    run = Run(
        session,
        tmp_path,
        hooks("PostToolUse", halt),
        [FauxReply(tool_calls=[FauxToolCall(name="bash", arguments={"command": "echo a"})]), "x"],
    )
    await run.harness.prompt("go")
    assert run.model.remaining == 1  # no request after the tool batch
    assert run.ends[0].end_reason == "budget spent"
    assert [t.message for t in run.told] == ["stopping: budget"]


async def test_session_start_context_reaches_the_first_request(
    session: Session, tmp_path: Path
) -> None:
    start = script(
        tmp_path,
        "start.sh",
        """#!/bin/bash
source=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["source"])')
printf '{"hookSpecificOutput": {"hookEventName": "SessionStart", %s}}\\n' \\
  "\\"additionalContext\\": \\"started by $source\\""
""",
    )
    run = Run(session, tmp_path, hooks("SessionStart", start, matcher="startup|resume"), ["hi"])
    await run.harness.prompt("hello")
    assert [str(getattr(m, "text", "")) for m in run.model.requests[0].messages] == [
        "started by startup",
        "hello",
    ]


# --- trust and settings ---------------------------------------------------------------------


async def test_an_untrusted_projects_hooks_do_not_run(session: Session, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    touch = f"touch {shlex.quote(str(marker))}"
    project = tmp_path / ".harness" / "settings.json"
    project.parent.mkdir()
    project.write_bytes(orjson.dumps(hooks("PreToolUse", touch)))
    user = tmp_path / "user.json"  # the user's own settings: none

    untrusted = CommandHooks.load(tmp_path, user_settings=user)
    assert untrusted.hooks == () and [h.command for h in untrusted.ignored] == [touch]
    assert untrusted.project_trusted is False
    h = AgentHarness(
        session=session,
        model=FauxModel(calls(("bash", {"command": "true"}))),
        tools=[bash_tool()],
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        cwd=tmp_path,
        resources=None,
        command_hooks=untrusted,
    )
    await h.prompt("go")
    assert not marker.exists()

    trusted = CommandHooks.load(tmp_path, user_settings=user, trust_project=tmp_path)
    assert [(x.command, x.source, x.key) for x in trusted.hooks] == [
        (touch, "project", "hooks.PreToolUse[0].hooks[0]")
    ]
    h = AgentHarness(
        session=session,
        model=FauxModel(calls(("bash", {"command": "true"}))),
        tools=[bash_tool()],
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        cwd=tmp_path,
        resources=None,
        command_hooks=trusted,
    )
    await h.prompt("again")
    assert marker.exists()


async def test_hooks_come_in_settings_order_code_user_project(tmp_path: Path) -> None:
    user = tmp_path / "user.json"
    user.write_bytes(orjson.dumps(hooks("tool_call", "echo user")))  # our name works too
    (tmp_path / ".harness").mkdir()
    (tmp_path / ".harness" / "settings.json").write_bytes(
        orjson.dumps(hooks("PreToolUse", "echo project"))
    )
    loaded = CommandHooks.load(
        tmp_path,
        settings=hooks("PreToolUse", "echo code"),
        user_settings=user,
        trust_project=True,
    )
    assert [(h.command, h.source, h.event) for h in loaded.hooks] == [
        ("echo code", "code", "tool_call"),
        ("echo user", "user", "tool_call"),
        ("echo project", "project", "tool_call"),
    ]
    assert loaded.hooks[1].path == str(user)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"hooks": {"BeforeTool": []}}, "hooks.BeforeTool"),
        ({"hooks": {"PreToolUse": {}}}, "hooks.PreToolUse"),
        ({"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}, "hooks.PreToolUse[0].matcher"),
        ({"hooks": {"Stop": [{"matcher": "Bash", "hooks": []}]}}, "hooks.Stop[0].matcher"),
        (
            {"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}},
            "hooks.PreToolUse[0].hooks[0]",
        ),
        (
            {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": ""}]}]}},
            "hooks.PreToolUse[0].hooks[0].command",
        ),
        (
            {
                "hooks": {
                    "PreToolUse": [{"hooks": [{"type": "command", "command": "x", "timeout": 0}]}]
                }
            },
            "hooks.PreToolUse[0].hooks[0].timeout",
        ),
        (
            {"hooks": {"PreToolUse": [{"matchers": "Bash", "hooks": []}]}},
            "hooks.PreToolUse[0]",
        ),
    ],
)
def test_hooks_not_in_claude_codes_shape_are_a_settings_error(
    tmp_path: Path, settings: Any, key: str
) -> None:
    path = tmp_path / "user.json"
    path.write_bytes(orjson.dumps(settings))
    with pytest.raises(HookSettingsError) as raised:
        CommandHooks.load(tmp_path, user_settings=path, setting_sources=("user",))
    assert raised.value.code == "hook_settings_invalid"
    assert raised.value.path == str(path) and raised.value.key == key


def test_a_settings_file_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "user.json"
    os.mkfifo(fifo)
    with pytest.raises(HookSettingsError):
        CommandHooks.load(tmp_path, user_settings=fifo, setting_sources=("user",))


async def test_a_nested_run_runs_no_session_or_prompt_hooks(
    session: Session, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    record = script(
        tmp_path,
        "record.py",
        f"""import json, sys
event = json.load(sys.stdin)
with open({str(log)!r}, "a") as f:
    f.write(event["hook_event_name"] + "\\n")
""",
    )
    settings = {
        "hooks": {
            name: [{"hooks": [{"type": "command", "command": record}]}]
            for name in ("SessionStart", "UserPromptSubmit", "SubagentStop", "SessionEnd")
        }
    }
    nested = Run(session, tmp_path, settings, ["done"], depth=1)
    await nested.harness.prompt("a skill's task")
    await nested.harness.shutdown()
    assert log.read_text().splitlines() == ["SubagentStop"]


async def test_a_hooks_program_is_never_found_in_the_working_folder(
    session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 13, finding 13: `/bin/sh -c fmt-check` found the hook's program through an
    empty `$PATH` entry, in the (untrusted) working folder; review 15, finding 2: through an
    absolute entry there (an activated `.venv/bin`, which sandboxed commands write). Hooks see
    `$PATH`'s absolute entries outside the working folder only: the user's own `fmt-check`
    runs."""
    work = tmp_path / "work"
    work.mkdir()
    planted = work / "fmt-check"
    planted.write_text(f"#!/bin/sh\ntouch {tmp_path / 'PLANTED_RAN'}\n")
    planted.chmod(0o755)
    mine = tmp_path / "bin"
    mine.mkdir()
    (mine / "fmt-check").write_text(f"#!/bin/sh\ntouch {tmp_path / 'MINE_RAN'}\n")
    (mine / "fmt-check").chmod(0o755)
    # an empty entry, and an absolute one in the working folder (an activated .venv/bin:
    # review 15, finding 2)
    (work / ".venv/bin").mkdir(parents=True)
    (work / ".venv/bin/fmt-check").write_bytes(planted.read_bytes())
    (work / ".venv/bin/fmt-check").chmod(0o755)
    monkeypatch.setenv("PATH", f"{work / '.venv/bin'}::{os.environ['PATH']}:{mine}")
    run = Run(
        session,
        work,
        hooks("PreToolUse", "fmt-check", matcher="Bash"),
        calls(("bash", {"command": "echo hi"})),
    )
    await run.harness.prompt("go")
    assert not (tmp_path / "PLANTED_RAN").exists()
    assert (tmp_path / "MINE_RAN").exists()
