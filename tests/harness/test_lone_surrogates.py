"""Lone surrogates from untrusted text never crash a run or break the session file
(adversarial review after issue 18).

Reproduction: a reply holding ``"\\ud800"`` (which a model server's JSON escape decodes to, and
orjson refuses to encode), a tool call with such an argument, a prompt with one, or a ``read``
of a file name that is not UTF-8 made ``prompt()`` raise ``InvalidEntryError`` and lose the
reply; a tool's output with one was replaced by an error. Now each is stored with U+FFFD, the
session file stays UTF-8 JSONL that reads back, and the run goes on.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from harness import (
    AgentHarness,
    AssistantMessage,
    CommandHooks,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    SecuritySupervisor,
    TextContent,
    Tool,
    ToolResult,
    ToolResultMessage,
    ToolRun,
    UserMessage,
    ls_tool,
    read_tool,
)
from harness.cli._escape import json_line
from hooks import JSONValue


def lines_of(path: Path) -> list[object]:
    data = path.read_bytes()
    data.decode("utf-8")  # strict: no surrogate bytes
    return [orjson.loads(line) for line in data.splitlines()]


async def lone_tool(input: object, run: ToolRun) -> ToolResult:
    return ToolResult(content="out \ud800 put", details={"k\udc80": ["v\udfff"]})


LONE = Tool(name="lone", description="d", parameters={"type": "object"}, execute=lone_tool)

CASES: dict[str, tuple[list[object], str]] = {
    "reply_text": (["reply \ud800 text"], "go"),
    "prompt_text": (["ok"], "user \udc80 text"),
    "tool_call_arguments": (
        [FauxReply(tool_calls=[FauxToolCall(name="read", arguments={"path": "\ud800.txt"})]), "ok"],
        "go",
    ),
    "tool_call_name": (
        [FauxReply(tool_calls=[FauxToolCall(name="re\ud800ad", arguments={"p\udc00": 1})]), "ok"],
        "go",
    ),
    "file_name_not_utf8": (
        [
            FauxReply(
                tool_calls=[
                    FauxToolCall(name="read", arguments={"path": os.fsdecode(b"bad\xffname")})
                ]
            ),
            "ok",
        ],
        "go",
    ),
    "tool_output": ([FauxReply(tool_calls=[FauxToolCall(name="lone")]), "ok"], "go"),
    "thinking_and_text": (
        [FauxReply(text="a\udbff", thinking="t\ud800"), "ok"],
        "go",
    ),
}


@pytest.mark.parametrize(("replies", "prompt"), CASES.values(), ids=CASES.keys())
async def test_a_lone_surrogate_is_stored_as_a_replacement_character(
    tmp_path: Path, replies: list[object], prompt: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / os.fsdecode(b"bad\xffname")).write_text("x")
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(work))
    harness = AgentHarness(
        session=session,
        model=FauxModel(replies),  # type: ignore[arg-type]
        tools=[read_tool(), ls_tool(), LONE],
        cwd=work,
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        resources=None,
    )
    await harness.prompt(prompt)  # raised InvalidEntryError before
    assert session.path is not None
    stored = lines_of(session.path)
    assert "\ufffd" in session.path.read_text(encoding="utf-8")
    messages = (await repo.open(session.id)).build_context().messages
    assert len(stored) == len(list(session.entries())) + 1  # the header
    assert isinstance(messages[0], UserMessage) and isinstance(messages[-1], AssistantMessage)
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert all("could not be stored" not in str(r.content) for r in results)
    session.close()


async def test_every_entry_kind_stores_lone_surrogates(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(tmp_path))
    data: JSONValue = {"k\ud800": ["v\udc00", {"n": "\udfff"}]}
    custom = session.append_custom("x\ud800", data)
    session.set_label(custom.id, "label \ud800")
    session.set_name("name \udc80")
    assert session.path is not None
    lines_of(session.path)
    again = await repo.open(session.id)
    assert again.labels[custom.id] == "label \ufffd"
    assert again.name == "name \ufffd"
    session.close()


@pytest.mark.parametrize("indent", [False, True])
def test_cli_json_output_escapes_a_lone_surrogate(indent: bool) -> None:
    value = {"text": "a\ud800b", "list": [TextContent(text="x").text, "\udfff"]}
    out = json_line(value, indent=indent)
    out.encode("utf-8")  # printable
    assert orjson.loads(
        out.encode("utf-8").replace(b"\\ud800", b"\\ufffd").replace(b"\\udfff", b"\\ufffd")
    ) == {"text": "a\ufffdb", "list": ["x", "\ufffd"]}


async def test_a_prompt_hook_gets_the_prompt_as_stored(tmp_path: Path) -> None:
    """A prompt from bytes that are not UTF-8 (``harness run $'\\xff'`` decodes argv with
    surrogate escapes): the UserPromptSubmit command hook, whose JSON payload orjson could not
    encode, used to fail and so refuse the prompt; it now gets U+FFFD, as the session does."""
    seen = tmp_path / "seen.json"
    hook = {"type": "command", "command": f"cat > {seen}", "timeout": 10}
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel(["ok"]),
        cwd=tmp_path,
        resources=None,
        command_hooks=CommandHooks.from_settings(
            {"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}
        ),
    )
    reply = await harness.prompt(os.fsdecode(b"bad \xff byte"))
    assert reply.text == "ok"
    assert orjson.loads(seen.read_bytes())["prompt"] == "bad \ufffd byte"
    session.close()
