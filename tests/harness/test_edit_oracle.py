"""``edit`` and ``write`` are no oracle for files the model may not read (adversarial review
after issue 18).

Reproduction: with ``deny read(.env)`` in ``accept_edits`` (or ``bypass``), ``read .env`` was
denied but ``edit .env`` ran: ``oldText: "SECRET=h"`` answered "the edits leave .env unchanged"
and ``"SECRET=x"`` "oldText not found", so the secret could be read back one character at a
time (and a real change's diff showed the line). Outside the working folder, every tool gives
the same refusal whether the file exists or not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    SecuritySupervisor,
    ToolResultMessage,
    edit_tool,
    find_tool,
    grep_tool,
    ls_tool,
    read_tool,
    write_tool,
)

SECRET = "SECRET=hunter2\n"


async def result_of(cwd: Path, name: str, args: dict[str, Any], mode: Any, rules: Any) -> str:
    session = await MemorySessionRepo().create(str(cwd))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[FauxToolCall(name=name, arguments=args)]), "ok"]),
        tools=[read_tool(), write_tool(), edit_tool(), ls_tool(), find_tool(), grep_tool()],
        cwd=cwd,
        supervisor=SecuritySupervisor(mode=mode, rules=rules, setting_sources=()),
        resources=None,
    )
    await harness.prompt("go")
    [result] = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert result.is_error
    return str(result.content[0].text)  # type: ignore[union-attr]


GUESSES = [
    {"oldText": "SECRET=h", "newText": "SECRET=h"},  # right: "leave unchanged"
    {"oldText": "SECRET=x", "newText": "SECRET=x"},  # wrong: "not found"
    {"oldText": "SECRET=", "newText": "SECRET=!"},  # a real change: its diff shows the line
    {"edits": [{"oldText": SECRET, "newText": "a"}, {"oldText": "S", "newText": "b"}]},
]


@pytest.mark.parametrize("mode", ["accept_edits", "bypass", "default"])
@pytest.mark.parametrize("rule", ["read(.env)", "read(**/.env)", "Read(./.env)"])
@pytest.mark.parametrize("kind", ["deny", "ask"])
async def test_a_file_a_read_rule_hides_cannot_be_probed_by_edit(
    tmp_path: Path, mode: str, rule: str, kind: str
) -> None:
    (tmp_path / ".env").write_text(SECRET)
    rules = {kind: [rule]}
    answers = {
        await result_of(tmp_path, "edit", {"path": ".env", **guess}, mode, rules)
        for guess in GUESSES
    }
    assert len(answers) == 1, answers  # one answer whatever the guess
    [answer] = answers
    assert "hunter2" not in answer and "read(" in answer.lower()
    assert (tmp_path / ".env").read_text() == SECRET


OUTSIDE = [
    ("/etc/passwd", "/etc/no-such-file"),
    ("link/passwd", "link/no-such-file"),  # a symlink in the folder leading out
    ("../../../../../../etc/passwd", "../../../../../../etc/no-such-file"),
]


@pytest.mark.parametrize(
    ("mode", "rules"),
    [
        ("default", None),
        ("dont_ask", None),
        ("accept_edits", None),
        ("bypass", {"deny": ["read(/etc/**)", "edit(/etc/**)"]}),
    ],
)
@pytest.mark.parametrize("name", ["edit", "read", "write", "ls", "grep", "find"])
@pytest.mark.parametrize(("there", "missing"), OUTSIDE)
async def test_outside_the_folder_a_refusal_does_not_say_whether_the_file_exists(
    tmp_path: Path, mode: str, rules: Any, name: str, there: str, missing: str
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "link").symlink_to("/etc")
    extra: dict[str, Any] = {
        "edit": {"oldText": "root", "newText": "x"},
        "write": {"content": "x"},
        "grep": {"pattern": "root"},
        "find": {"pattern": "*"},
    }.get(name, {})
    answers = []
    for path in (there, missing):
        text = await result_of(cwd, name, {"path": path, **extra}, mode, rules)
        answers.append(
            text.replace(path.rsplit("/", 1)[0] + "/", "DIR/").replace(
                path.rsplit("/", 1)[-1], "NAME"
            )
        )
    assert answers[0] == answers[1]
    assert "root:" not in answers[0]
