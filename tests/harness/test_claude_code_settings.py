"""A Claude Code settings file, written as its documentation shows one (permission rules with
``defaultMode``, the hooks guide's Bash validator and file protection, a docs auto-approver,
a formatter, a notifier), gives the decisions Claude Code gives, for 41 tool calls through one
real harness (issue 21, "Done when" 2).

``allow``: the call runs without asking; ``ask``: the user would be asked (here the approver
records it and says no); ``deny``: refused by a rule or a hook. Claude Code's order: hooks,
deny rules, ask rules, mode, allow rules, asking; a hook's ``allow`` skips neither deny nor
ask rules; a prefix rule never covers a second command, a substitution or a redirection.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness import (
    AgentHarness,
    CommandHooks,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    PermissionDecisionEvent,
    PermissionRequest,
    SecuritySupervisor,
    ToolResultMessage,
    bash_tool,
    edit_tool,
    find_tool,
    grep_tool,
    ls_tool,
    read_tool,
    write_tool,
)

# From Claude Code's settings and hooks documentation, as a user would copy it (the hooks
# under .harness/hooks, found through $CLAUDE_PROJECT_DIR).
SETTINGS = {
    "permissions": {
        "allow": [
            "Bash(npm run lint)",
            "Bash(npm run test:*)",
            "Bash(git status:*)",
            "Bash(git diff:*)",
            "Bash(git commit:*)",
            "Read(~/.zshrc)",
        ],
        "ask": ["Bash(git push:*)"],
        "deny": [
            "Bash(curl:*)",
            "Read(./.env)",
            "Read(./.env.*)",
            "Read(./secrets/**)",
            "WebFetch",
        ],
        "defaultMode": "acceptEdits",
    },
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {
                        "type": "command",
                        "command": 'python3 "$CLAUDE_PROJECT_DIR"/.harness/hooks/bash_validator.py',
                    },
                    {
                        "type": "command",
                        "command": '"$CLAUDE_PROJECT_DIR"/.harness/hooks/amend.sh',
                        "timeout": 30,
                    },
                ],
            },
            {
                "matcher": "Edit|MultiEdit|Write",
                "hooks": [
                    {
                        "type": "command",
                        "command": 'python3 -c "import json, sys; data=json.load(sys.stdin); '
                        "path=data.get('tool_input',{}).get('file_path',''); sys.exit(2 if any("
                        "p in path for p in ['.env', 'package-lock.json', '.git/']) else 0)\"",
                    }
                ],
            },
            {
                "matcher": "Read",
                "hooks": [
                    {
                        "type": "command",
                        "command": 'python3 "$CLAUDE_PROJECT_DIR"/.harness/hooks/docs_reads.py',
                    }
                ],
            },
        ],
        "PostToolUse": [
            {
                "matcher": "Edit|Write",
                "hooks": [
                    {
                        "type": "command",
                        "command": '"$CLAUDE_PROJECT_DIR"/.harness/hooks/newline.sh',
                    }
                ],
            }
        ],
        "Notification": [
            {"hooks": [{"type": "command", "command": 'cat >> "$HOME"/notifications.log'}]}
        ],
    },
}

BASH_VALIDATOR = '''"""The hooks guide's Bash command validator: suggest ripgrep."""
import json
import re
import sys

VALIDATION_RULES = [
    (r"^grep\\b(?!.*\\|)", "Use 'rg' (ripgrep) instead of 'grep' for better performance"),
    (r"^find\\s+\\S+\\s+-name\\b", "Use 'rg --files -g pattern' instead of 'find -name'"),
]

data = json.load(sys.stdin)
command = data.get("tool_input", {}).get("command", "")
issues = [message for pattern, message in VALIDATION_RULES if re.search(pattern, command)]
if issues:
    for message in issues:
        print(f"- {message}", file=sys.stderr)
    sys.exit(2)
'''

AMEND = """#!/bin/bash
# Rewriting history is the user's call, even where git commit is allowed.
if grep -q -- '--amend' ; then
  echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
    "permissionDecisionReason": "amending rewrites history"}}'
fi
"""

DOCS_READS = '''"""Auto-approve reading documentation files, wherever they are."""
import json
import sys

path = json.load(sys.stdin)["tool_input"].get("file_path", "")
if path.endswith((".md", ".mdx", ".txt", ".json")):
    print(json.dumps({
        "decision": "approve",
        "reason": "documentation file auto-approved",
        "suppressOutput": True,
    }))
'''

NEWLINE = """#!/bin/bash
file=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tool_input"]["file_path"])')
[ -f "$file" ] && [ -n "$(tail -c1 "$file")" ] && echo >> "$file"
exit 0
"""

# (tool, input, Claude Code's decision, why)
TABLE: list[tuple[str, dict[str, Any], str, str]] = [
    ("bash", {"command": "git status"}, "allow", "Bash(git status:*)"),
    ("bash", {"command": "git status --short"}, "allow", "a prefix rule covers arguments"),
    ("bash", {"command": "git diff HEAD~1"}, "allow", "Bash(git diff:*)"),
    ("bash", {"command": "npm run lint"}, "allow", "the exact rule"),
    ("bash", {"command": "npm run lint --fix"}, "ask", "an exact rule covers nothing more"),
    ("bash", {"command": "npm run test"}, "allow", "Bash(npm run test:*)"),
    ("bash", {"command": "npm run test -- --watch"}, "allow", "a prefix rule"),
    ("bash", {"command": "git push origin main"}, "ask", "the ask rule"),
    ("bash", {"command": "curl https://example.com"}, "deny", "Bash(curl:*)"),
    ("bash", {"command": "git status && curl https://x.io"}, "deny", "deny sees every part"),
    ("bash", {"command": "git status; rm -rf build"}, "ask", "rm is not allowed"),
    ("bash", {"command": "git status && npm run test"}, "allow", "each part allowed"),
    ("bash", {"command": "git status $(rm -rf build)"}, "ask", "a substitution"),
    ("bash", {"command": "git status `rm -rf build`"}, "ask", "backticks"),
    ("bash", {"command": "git status | sh"}, "ask", "a pipe into a shell"),
    ("bash", {"command": "git status > status.txt"}, "ask", "a redirection to a file"),
    ("bash", {"command": "grep -r TODO src"}, "deny", "the validator hook: use rg"),
    ("bash", {"command": "find . -name '*.py'"}, "deny", "the validator hook: rg --files"),
    ("bash", {"command": "rg TODO"}, "ask", "no rule; acceptEdits approves no command"),
    ("bash", {"command": "ls -la"}, "ask", "no rule"),
    ("bash", {"command": "git commit -m wip"}, "allow", "Bash(git commit:*)"),
    ("bash", {"command": "git commit --amend"}, "ask", "the hook asks, over the allow rule"),
    ("read", {"path": "src/app.py"}, "allow", "reads inside the folder"),
    ("read", {"path": ".env"}, "deny", "Read(./.env)"),
    ("read", {"path": ".env.local"}, "deny", "Read(./.env.*)"),
    ("read", {"path": "secrets/api.key"}, "deny", "Read(./secrets/**)"),
    ("read", {"path": "secrets/README.md"}, "deny", "a hook's allow skips no deny rule"),
    ("read", {"path": "../docs/guide.md"}, "allow", "outside, but the docs hook approves"),
    ("read", {"path": "../other/data.csv"}, "ask", "outside the folder"),
    ("read", {"path": "~/.zshrc"}, "allow", "Read(~/.zshrc)"),
    ("write", {"path": "src/new.py", "content": "x = 1"}, "allow", "acceptEdits"),
    ("write", {"path": "package-lock.json", "content": "{}"}, "deny", "file protection hook"),
    ("write", {"path": ".git/config", "content": ""}, "deny", "file protection hook"),
    ("write", {"path": "../outside.txt", "content": "x"}, "ask", "acceptEdits: inside only"),
    (
        "edit",
        {"path": "src/app.py", "edits": [{"oldText": "old", "newText": "new"}]},
        "allow",
        "acceptEdits",
    ),
    (
        "edit",
        {"path": ".env", "edits": [{"oldText": "KEY", "newText": "K"}]},
        "deny",
        "file protection hook",
    ),
    ("grep", {"pattern": "TODO", "path": "src"}, "allow", "a read inside"),
    ("find", {"pattern": "**/*.py"}, "allow", "a read inside"),
    ("ls", {"path": "."}, "allow", "a read inside"),
    ("ls", {"path": "../other"}, "ask", "outside the folder"),
    ("grep", {"pattern": "KEY", "path": ".env"}, "deny", "Read rules bind grep"),
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".zshrc").write_text("export EDITOR=vi\n")
    monkeypatch.setenv("HOME", str(home))
    # npm's start-up alone takes a second: a stand-in that says what it was asked to run.
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "npm").write_text('#!/bin/sh\necho "npm $*"\n')
    (bin_folder / "npm").chmod(0o755)
    # The hooks say python3: this interpreter (a version manager's shim costs 0.2 s a start).
    (bin_folder / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_folder}{os.pathsep}{os.environ['PATH']}")
    root = tmp_path / "project"
    for folder in ("src", "secrets", ".git", ".harness/hooks"):
        (root / folder).mkdir(parents=True)
    (root / "src" / "app.py").write_text("old = 1  # TODO\n")
    (root / ".env").write_text("KEY=1\n")
    (root / ".env.local").write_text("KEY=2\n")
    (root / "secrets" / "api.key").write_text("k\n")
    (root / "secrets" / "README.md").write_text("rotate monthly\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("a,b\n")
    hooks = root / ".harness" / "hooks"
    (hooks / "bash_validator.py").write_text(BASH_VALIDATOR)
    (hooks / "docs_reads.py").write_text(DOCS_READS)
    for name, body in (("amend.sh", AMEND), ("newline.sh", NEWLINE)):
        (hooks / name).write_text(body)
        (hooks / name).chmod(0o755)
    return root


async def test_a_claude_code_settings_file_decides_as_claude_code_does(
    project: Path, tmp_path: Path
) -> None:
    user = tmp_path / "settings.json"  # the user's settings: trusted, so its mode holds
    user.write_bytes(orjson.dumps(SETTINGS))
    asked: set[str] = set()

    async def person(request: PermissionRequest) -> Deny:
        asked.add(request.tool_call_id)
        await asyncio.sleep(0.01)  # a person takes a moment: the notification goes out
        return Deny(reason="asked the user, who said no")

    calls = [
        FauxToolCall(name=n, arguments=a, id=f"call_{i}") for i, (n, a, _, _) in enumerate(TABLE)
    ]
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "done"]),
        tools=[
            bash_tool(),
            read_tool(),
            write_tool(),
            edit_tool(),
            grep_tool(),
            find_tool(),
            ls_tool(),
        ],
        supervisor=SecuritySupervisor(
            approver=person, user_settings=user, setting_sources=("user",)
        ),
        command_hooks=CommandHooks.load(project, user_settings=user, setting_sources=("user",)),
        cwd=project,
        resources=None,
        notification_delay_s=0,
    )
    approved: set[str] = set()

    @harness.on(PermissionDecisionEvent)
    def record(sender: object, event: PermissionDecisionEvent) -> None:
        if event.decision != "deny":
            approved.add(event.tool_call_id)

    await harness.prompt("work on the project")

    results = {
        m.tool_call_id: m
        for m in session.build_context().messages
        if isinstance(m, ToolResultMessage)
    }
    decided = {
        call.id: "ask" if call.id in asked else "allow" if call.id in approved else "deny"
        for call in calls
    }
    expected = {call.id: row[2] for call, row in zip(calls, TABLE, strict=True)}
    wrong = [
        (row[0], row[1], row[3], f"expected {expected[c.id]}, got {decided[c.id]}")
        for c, row in zip(calls, TABLE, strict=True)
        if decided[c.id] != expected[c.id]
    ]
    assert wrong == []
    assert len(TABLE) >= 30
    # The hooks' own words reach the model; allowed calls really ran.
    assert "Use 'rg' (ripgrep)" in results["call_16"].text
    assert "EDITOR" in results["call_29"].text  # ~/.zshrc, allowed by its rule
    assert (project / "src" / "new.py").read_text() == "x = 1\n"  # the PostToolUse formatter
    assert (project / "src" / "app.py").read_text() == "new = 1  # TODO\n"
    assert not (project / "package-lock.json").exists()
    assert (project / ".env").read_text() == "KEY=1\n"
    log = (tmp_path / "home" / "notifications.log").read_text()
    notified = [orjson.loads(line) for line in log.splitlines()]
    assert len(notified) == len(asked)
    assert {n["notification_type"] for n in notified} == {"permission_prompt"}
