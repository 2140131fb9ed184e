"""MCP settings in Claude Code's shape, and what a hostile server can never make the harness do
(docs/security.md, "MCP servers"): real servers written with the ``mcp`` SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp_servers import (
    ESC,
    SCRIPT,
    build,
    build_hostile,
    build_schema_flood,
    stdio,
    wait_gone,
)

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    HttpServer,
    McpConfigError,
    McpOptions,
    MemorySessionRepo,
    PermissionRules,
    SecuritySupervisor,
    SseServer,
    StdioServer,
    TextContent,
    ToolResultMessage,
    load_mcp_config,
    nested_deeper,
)
from harness._mcp.adapter import MAX_SCHEMA_TEXT_CHARS, MAX_SERVER_TOOL_BYTES
from harness._permissions.folders import user_folder


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_settings_in_claude_codes_shape_with_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCS_TOKEN", "s3cret")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    user = tmp_path / "user.json"
    write(
        user,
        {
            "permissions": {"allow": []},
            "mcpServers": {
                "files": {"command": "srv-${NOT_SET_ANYWHERE:-default}", "args": ["--x"]},
                "docs": {
                    "type": "http",
                    "url": "https://docs.test/mcp",
                    "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
                },
                "old": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
                "broken": {"command": "x", "env": {"K": "${NOT_SET_ANYWHERE}"}},
                "typo": {"comand": "x"},
                "bad__name": {"command": "x"},
            },
        },
    )
    config = load_mcp_config(tmp_path, user_settings=user)
    assert config.servers == {
        # the project is not trusted: the user's server starts in an empty private folder
        # (never their config folder, whose files it could read by bare names: review 13,
        # findings 20, 21)
        "files": StdioServer("srv-default", ["--x"], cwd=config.servers["files"].cwd),
        "docs": HttpServer("https://docs.test/mcp", headers={"Authorization": "Bearer s3cret"}),
        "old": SseServer("http://127.0.0.1:1/sse"),
    }
    # a new empty folder of its own at each start (review 15, finding 7: a file server's
    # write_file there was what `python -m` imported at the next start)
    cwd = Path(str(config.servers["files"].cwd))
    assert cwd.parent == user_folder("state") / "mcp-servers" and os.listdir(cwd) == []
    again = load_mcp_config(tmp_path, user_settings=user).servers["files"]
    assert isinstance(again, StdioServer) and again.cwd != str(cwd)
    reasons = {s.name: s.reason for s in config.skipped}
    assert set(reasons) == {"broken", "typo", "bad__name"}
    assert "NOT_SET_ANYWHERE" in reasons["broken"] and "comand" in reasons["typo"]


def test_an_untrusted_projects_servers_are_skipped_with_the_reason(tmp_path: Path) -> None:
    write(tmp_path / ".mcp.json", {"mcpServers": {"a": {"command": "a"}}})
    write(tmp_path / ".harness" / "settings.json", {"mcpServers": {"b": {"command": "b"}}})
    user = tmp_path / "none.json"
    untrusted = load_mcp_config(tmp_path, user_settings=user)
    assert untrusted.servers == {}
    assert {s.name for s in untrusted.skipped} == {"a", "b"}
    assert all("not trusted" in s.reason for s in untrusted.skipped)
    trusted = load_mcp_config(tmp_path, user_settings=user, trust_project=True)
    assert set(trusted.servers) == {"a", "b"}
    assert trusted.sources["a"] == str(tmp_path / ".mcp.json")


def test_a_settings_file_that_is_not_a_file_or_not_json_is_an_error(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / ".mcp.json")  # would block a reader that did not check
    with pytest.raises(McpConfigError) as raised:
        load_mcp_config(tmp_path, user_settings=tmp_path / "none.json")
    assert raised.value.code == "mcp_config" and ".mcp.json" in str(raised.value)
    (tmp_path / "user.json").write_text("{not json")
    with pytest.raises(McpConfigError):
        load_mcp_config(tmp_path, user_settings=tmp_path / "user.json", sources=("user",))


async def test_a_bad_server_name_or_object_is_refused_at_construction(tmp_path: Path) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    with pytest.raises(McpConfigError):
        AgentHarness(session=session, mcp_servers={"a b": build()}, resources=None)
    with pytest.raises(TypeError):
        AgentHarness(session=session, mcp_servers={"x": "not a server"}, resources=None)


def _results(harness: AgentHarness) -> list[ToolResultMessage]:
    return [m for m in harness.session.build_context().messages if isinstance(m, ToolResultMessage)]


@pytest.mark.parametrize("transport", ["in_process", "stdio"])
async def test_what_a_hostile_server_sends_stays_bounded(transport: str, tmp_path: Path) -> None:
    server = build_hostile() if transport == "in_process" else stdio("--hostile")
    session = await MemorySessionRepo().create(str(tmp_path))
    calls = ["flood", "deep", "terminal", "evil_image"]
    model = FauxModel(
        [
            FauxReply(
                tool_calls=[FauxToolCall(name=f"mcp__evil__{n}", arguments={}) for n in calls]
            ),
            "ok",
        ]
    )
    harness = AgentHarness(
        session=session,
        model=model,
        mcp_servers={"evil": server},
        mcp_options=McpOptions(call_timeout_s=3.0),
        resources=None,
        cwd=tmp_path,
        supervisor=SecuritySupervisor(setting_sources=()),
    )
    await harness.prompt("go")
    offered = {t.name: t for t in model.requests[0].tools}
    # A name with escapes and path characters becomes plain characters under mcp__evil__;
    # a name too long is left out (and said so); neither can pose as a built-in tool.
    assert all(n.startswith("mcp__evil__") for n in offered)
    assert all(
        set(n) <= set("abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
        for n in offered
    )
    assert "mcp__evil__read_file__2J_______bash" in offered
    escaped = offered["mcp__evil__read_file__2J_______bash"]
    assert "\x1b" not in escaped.description and "\x07" not in escaped.description
    assert len(escaped.description) < 2100  # cut to 2,048 characters and the server's note
    (status,) = harness.mcp_servers
    assert any("over 64 characters" in note for note in status.notes)
    flood, deep, terminal, image = _results(harness)
    flood_text = "".join(b.text for b in flood.content if isinstance(b, TextContent))
    assert len(flood_text) < 100_200 and "more characters were cut" in flood_text
    if transport == "in_process":
        assert deep.details == {"structuredContentDropped": "nested too deep to store"}
    else:  # the SDK cannot parse a line that deep: the call ends at its timeout
        assert deep.is_error and "within 3 s" in deep.text
    # Stored as it came: escaping is the terminal's job (the CLI's sink), not the session's.
    assert ESC in terminal.text
    assert [type(b) for b in image.content] == [TextContent] and "left out" in image.text
    assert not nested_deeper(deep.details, 10)
    await harness.shutdown()


async def test_a_server_hanging_in_a_call_costs_that_call_only(tmp_path: Path) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel(
            [
                FauxReply(
                    tool_calls=[
                        FauxToolCall(name="mcp__evil__hang", arguments={}),
                        FauxToolCall(name="mcp__probe__echo", arguments={"text": "alive"}),
                    ]
                ),
                "the run went on",
            ]
        ),
        mcp_servers={"evil": stdio("--hostile"), "probe": build()},
        mcp_options=McpOptions(call_timeout_s=1.0),
        resources=None,
        cwd=tmp_path,
        supervisor=SecuritySupervisor(setting_sources=()),
    )
    reply = await harness.prompt("go")
    assert reply.text == "the run went on"
    hung, echo = _results(harness)
    assert hung.is_error and "'evil'" in hung.text and "within 1 s" in hung.text
    assert (echo.text, echo.is_error) == ("alive", False)
    await harness.shutdown()


def test_no_server_process_is_left_when_python_exits(tmp_path: Path) -> None:
    program = textwrap.dedent(
        f"""
        import asyncio, sys
        from harness import AgentHarness, FauxModel, FauxReply, FauxToolCall
        from harness import MemorySessionRepo, StdioServer

        async def main():
            session = await MemorySessionRepo().create({str(tmp_path)!r})
            harness = AgentHarness(
                session=session,
                model=FauxModel([FauxReply(tool_calls=[
                    FauxToolCall(name="mcp__probe__pid", arguments={{}})]), "ok"]),
                mcp_servers={{"probe": StdioServer(sys.executable, [{str(SCRIPT)!r}])}},
                resources=None,
            )
            await harness.prompt("go")
            print(session.build_context().messages[-2].text, flush=True)
            # no shutdown(): the process just ends

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=tmp_path,
    )
    pid = int(done.stdout.strip().splitlines()[-1])
    assert wait_gone(pid)


async def test_schemas_a_server_sends_are_checked_before_the_model_sees_them(
    tmp_path: Path,
) -> None:
    from mcp.server.lowlevel import Server
    from mcp_types import ListToolsResult, Tool

    async def list_tools(ctx: object, params: object) -> ListToolsResult:
        return ListToolsResult(
            tools=[
                Tool(name="remote", input_schema={"type": "object", "$ref": "http://x.test/s"}),
                Tool(
                    name="patterned",
                    input_schema={
                        "type": "object",
                        "properties": {"a": {"type": "string", "pattern": "(a+)+$"}},
                    },
                ),
                Tool(
                    name="deep",
                    input_schema={"type": "object", "properties": _nested(40)},
                ),
            ]
        )

    server: Server[object] = Server("schemas", on_list_tools=list_tools)
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(session=session, mcp_servers={"s": server}, resources=None, cwd=tmp_path)
    (status,) = await harness.start_mcp_servers()
    assert status.tools == ("mcp__s__patterned",)
    notes = " ".join(status.notes)
    assert "'remote'" in notes and "nothing is fetched" in notes
    assert "'deep'" in notes and "deeper than 32" in notes
    tools = harness.turn_settings().tools
    assert tools["mcp__s__patterned"].parameters["properties"] == {"a": {"type": "string"}}
    await harness.shutdown()


def _nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {"type": "string"}
    for _ in range(depth):
        value = {"a": {"type": "object", "properties": value}}
    return value


def test_server_rules_name_that_server_only(tmp_path: Path) -> None:
    from permission_requests import request

    from harness import PermissionRules, Tool

    async def nothing(input: object, run: object) -> str:
        return ""

    rules = PermissionRules(deny=["mcp__docs", "mcp__files__*"])
    for name, denied in (
        ("mcp__docs__search", True),
        ("mcp__files__write", True),
        ("mcp__docs2__search", False),
        ("mcp__doc__search", False),
        ("mcp_docs__search", False),
    ):
        call = request(tmp_path, Tool(name=name, description="", execute=nothing))  # type: ignore[arg-type]
        found = [r for r in rules.deny if r.matches(call, how="any")]
        assert bool(found) is denied, name


async def test_a_server_name_ending_in_an_underscore_is_refused(tmp_path: Path) -> None:
    # Server "a_"'s tool "x" would be mcp__a___x, the name of server "a"'s tool "_x": one
    # would replace the other, and a rule for one server would name the other's tool.
    session = await MemorySessionRepo().create(str(tmp_path))
    with pytest.raises(McpConfigError, match="not ending in '_'"):
        AgentHarness(session=session, mcp_servers={"a": build(), "a_": build()}, resources=None)
    write(tmp_path / ".mcp.json", {"mcpServers": {"files_": {"command": "srv"}}})
    config = load_mcp_config(tmp_path, trust_project=True, user_settings=tmp_path / "none.json")
    assert config.servers == {} and [s.name for s in config.skipped] == ["files_"]


def test_a_server_rule_never_names_a_tool_of_a_server_whose_name_extends_it(
    tmp_path: Path,
) -> None:
    from permission_requests import request

    from harness import PermissionRules, Tool

    async def nothing(input: object, run: object) -> str:
        return ""

    for rule, name, covered in (
        ("mcp__a_", "mcp__a___x", False),  # server a's tool _x, not a server "a_"
        ("mcp__a_", "mcp__a_b__x", False),
        ("mcp__a", "mcp__a___x", True),
        ("mcp__a__*", "mcp__a___x", True),
        ("mcp__a_b", "mcp__a_b__x", True),
    ):
        rules = PermissionRules(deny=[rule])
        call = request(tmp_path, Tool(name=name, description="", execute=nothing))  # type: ignore[arg-type]
        assert bool([r for r in rules.deny if r.matches(call, how="any")]) is covered, (rule, name)


def _schema_bomb(levels: int) -> dict[str, object]:
    """1.6 KB at 24 levels: each definition is any of two references to the next, so
    validating one value follows 2**levels references."""
    defs: dict[str, object] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string", "minLength": 5}
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs}


async def test_a_schema_bomb_cannot_hang_the_check_of_the_models_input(tmp_path: Path) -> None:
    from mcp.server.lowlevel import Server
    from mcp_types import CallToolResult, ListToolsResult, Tool
    from mcp_types import TextContent as McpText

    loop = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/d"}},
        "$defs": {"d": {"$ref": "#/$defs/d"}},
    }
    fine = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/word"}},
        "$defs": {"word": {"type": "string"}},
        "required": ["a"],
    }

    async def list_tools(ctx: object, params: object) -> ListToolsResult:
        return ListToolsResult(
            tools=[
                Tool(name="bomb", input_schema=_schema_bomb(40)),
                Tool(name="loop", input_schema=loop),
                Tool(name="fine", input_schema=fine),
            ]
        )

    async def call_tool(ctx: object, params: Any) -> CallToolResult:
        return CallToolResult(content=[McpText(type="text", text=f"{params.name} ran")])

    server: Server[object] = Server("s", on_list_tools=list_tools, on_call_tool=call_tool)
    session = await MemorySessionRepo().create(str(tmp_path))
    calls = [("bomb", {"a": "x"}), ("loop", {"a": "x"}), ("fine", {"a": 3})]
    harness = AgentHarness(
        session=session,
        model=FauxModel(
            [
                FauxReply(
                    tool_calls=[FauxToolCall(name=f"mcp__s__{n}", arguments=a) for n, a in calls]
                ),
                "done",
            ]
        ),
        mcp_servers={"s": server},
        resources=None,
        cwd=tmp_path,
        supervisor=SecuritySupervisor(setting_sources=(), rules=PermissionRules(allow=["mcp__s"])),
    )
    (status,) = await harness.start_mcp_servers()
    tools = harness.turn_settings().tools
    for name in ("bomb", "loop"):
        assert "$ref" not in json.dumps(tools[f"mcp__s__{name}"].parameters)
        assert any(f"'{name}'" in n and "were dropped" in n for n in status.notes)
    assert tools["mcp__s__fine"].parameters == fine  # a schema that expands little keeps them
    await harness.prompt("go")  # the bomb is checked in linear time: the run ends
    bomb, looped, fine_result = _results(harness)
    assert (bomb.text, looped.text) == ("bomb ran", "loop ran")
    assert fine_result.is_error and "invalid arguments" in fine_result.text
    await harness.shutdown()


async def test_the_images_of_one_result_are_bounded_in_all(tmp_path: Path) -> None:
    # Each image is under the 5 MB limit; 16 of them would be stored in the session and sent
    # with every later request.
    import base64

    from mcp.server.lowlevel import Server
    from mcp_types import CallToolResult, ImageContent, ListToolsResult, Tool

    image = base64.b64encode(b"\x89PNG" + b"\0" * (4 * 1024 * 1024)).decode()

    async def list_tools(ctx: object, params: object) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="pictures", input_schema={"type": "object"})])

    async def call_tool(ctx: object, params: object) -> CallToolResult:
        blocks = [ImageContent(type="image", data=image, mime_type="image/png")] * 16
        return CallToolResult(content=list(blocks))

    server: Server[object] = Server("s", on_list_tools=list_tools, on_call_tool=call_tool)
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[FauxToolCall(name="mcp__s__pictures")]), "ok"]),
        mcp_servers={"s": server},
        resources=None,
        cwd=tmp_path,
        supervisor=SecuritySupervisor(setting_sources=(), rules=PermissionRules(allow=["mcp__s"])),
    )
    await harness.prompt("go")
    (result,) = _results(harness)
    kept = [b for b in result.content if not isinstance(b, TextContent)]
    assert len(kept) == 2 and len(result.content) == 16
    assert sum(len(b.data) * 3 // 4 for b in kept) <= 10 * 1024 * 1024  # type: ignore[union-attr]
    assert "over 10485760 bytes in all" in result.text
    await harness.shutdown()


async def test_a_servers_configured_secrets_never_reach_its_errors(tmp_path: Path) -> None:
    # A server may echo its token in an error or print its environment when it crashes; the
    # message is stored in the session and shown.
    token = "tok-0123456789abcdef"
    server = StdioServer(sys.executable, [str(SCRIPT), "--hostile"], env={"HOSTILE_TOKEN": token})
    session = await MemorySessionRepo().create(str(tmp_path))
    calls = [FauxToolCall(name=f"mcp__evil__{n}") for n in ("leak_error", "leak_crash")]
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls[:1]), FauxReply(tool_calls=calls[1:]), "ok"]),
        mcp_servers={"evil": server},
        resources=None,
        cwd=tmp_path,
        supervisor=SecuritySupervisor(
            setting_sources=(), rules=PermissionRules(allow=["mcp__evil"])
        ),
    )
    await harness.prompt("go")
    echoed, crashed = _results(harness)
    assert echoed.is_error and "bad token [redacted]" in echoed.text
    assert crashed.is_error and "HOSTILE_TOKEN=[redacted]" in crashed.text
    (status,) = harness.mcp_servers
    for text in (echoed.text, crashed.text, status.error or ""):
        assert token not in text
    await harness.shutdown()


async def test_requests_from_a_server_are_refused_and_its_uris_never_read(tmp_path: Path) -> None:
    # Sampling would spend the user's model on the server's prompt, elicitation ask the user
    # for what the server wants, roots name the user's folders: none is configured, so each
    # is refused. A URI a server names is a string: the file it names is never opened.
    secret = tmp_path / "secret.txt"
    secret.write_text("the-content-of-a-local-file")
    session = await MemorySessionRepo().create(str(tmp_path))
    calls = [
        FauxToolCall(name="mcp__evil__ask_client"),
        FauxToolCall(name="mcp__evil__local_file", arguments={"path": str(secret)}),
    ]
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        mcp_servers={"evil": stdio("--hostile")},
        resources=None,
        cwd=tmp_path,
        supervisor=SecuritySupervisor(setting_sources=()),
    )
    await harness.prompt("go")
    asked, linked = _results(harness)
    assert "GRANTED" not in asked.text
    for what in ("sampling", "roots", "elicitation"):
        assert f"{what} refused" in asked.text
    assert secret.as_uri() in linked.text
    assert "the-content-of-a-local-file" not in linked.text
    await harness.shutdown()


async def test_names_that_differ_only_in_case_are_refused(tmp_path: Path) -> None:
    # Rules compare names without case: an allow rule for server "docs" (or tool "read")
    # would also run server "Docs"'s tools (or tool "READ").
    from mcp.server.lowlevel import Server
    from mcp_types import ListToolsResult, Tool

    session = await MemorySessionRepo().create(str(tmp_path))
    with pytest.raises(McpConfigError, match="more than case"):
        AgentHarness(session=session, mcp_servers={"docs": build(), "Docs": build()})
    user = tmp_path / "user.json"
    write(user, {"mcpServers": {"docs": {"command": "a"}}})
    write(tmp_path / ".mcp.json", {"mcpServers": {"Docs": {"command": "b"}}})
    config = load_mcp_config(tmp_path, user_settings=user, trust_project=True)
    assert list(config.servers) == ["docs"]
    assert [(s.name, "only in case" in s.reason) for s in config.skipped] == [("Docs", True)]

    async def list_tools(ctx: object, params: object) -> ListToolsResult:
        return ListToolsResult(
            tools=[Tool(name=n, input_schema={"type": "object"}) for n in ("read", "READ")]
        )

    server: Server[object] = Server("s", on_list_tools=list_tools)
    harness = AgentHarness(session=session, mcp_servers={"s": server}, resources=None, cwd=tmp_path)
    (status,) = await harness.start_mcp_servers()
    assert status.tools == ("mcp__s__read",)
    assert any("'READ'" in n and "is taken" in n for n in status.notes)
    await harness.shutdown()


@pytest.mark.parametrize("transport", ["in_process", "stdio"])
async def test_a_server_cannot_flood_every_request_through_its_schemas(
    transport: str, tmp_path: Path
) -> None:
    # The review's reproduction (review 9, finding 16): 200 tools with a 60 KB description
    # of a parameter each were 12,032,290 bytes of tool definitions in every request.
    server = build_schema_flood() if transport == "in_process" else stdio("--schema-flood")
    session = await MemorySessionRepo().create(str(tmp_path))
    model = FauxModel(["ok"])
    harness = AgentHarness(
        session=session,
        model=model,
        mcp_servers={"flood": server},
        mcp_options=McpOptions(start_timeout_s=60.0),
        resources=None,
        cwd=tmp_path,
    )
    await harness.prompt("hi")
    tools = model.requests[0].tools
    # What the server said (the description without our note naming the server), as JSON.
    sent = sum(
        len(json.dumps(t.parameters, separators=(",", ":"), ensure_ascii=False).encode())
        + len(t.description.split("\n\n[MCP server flood]")[0].encode())
        + len(t.name)
        for t in tools
    )
    assert sent <= MAX_SERVER_TOOL_BYTES
    assert 100 <= len(tools) < 200  # cut to 1,024 characters, most tools still fit
    x = tools[0].parameters["properties"]["x"]  # type: ignore[index]
    assert len(x["description"]) == len(x["title"]) == MAX_SCHEMA_TEXT_CHARS  # type: ignore[index]
    (status,) = harness.mcp_servers
    (note,) = [n for n in status.notes if "left out" in n]
    assert note.startswith(f"{200 - len(tools)} tools from 't{len(tools)}' on were left out")
    assert f"{MAX_SERVER_TOOL_BYTES} bytes in all" in note
    await harness.shutdown()


async def test_texts_in_a_schema_are_cut_and_its_data_kept(tmp_path: Path) -> None:
    from mcp.server.lowlevel import Server
    from mcp_types import ListToolsResult, Tool

    long = "z" * 5_000
    schema = {
        "type": "object",
        "title": ESC + long,
        "properties": {
            "description": {"type": "string", "description": long, "default": long},
            "title": {"type": "string", "enum": [long, "b"], "examples": [long]},
            "n": {"$ref": "#/$defs/n"},
        },
        "$defs": {"n": {"type": "integer", "description": "\x1b[2J" + long, "const": 3}},
    }

    async def list_tools(ctx: object, params: object) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="t", input_schema=schema)])

    server: Server[object] = Server("s", on_list_tools=list_tools)
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(session=session, mcp_servers={"s": server}, resources=None, cwd=tmp_path)
    await harness.start_mcp_servers()
    offered: Any = harness.turn_settings().tools["mcp__s__t"].parameters
    shown = " ]52;c;aGk=  [2J"  # ESC, BEL and ESC made spaces
    assert offered["title"] == shown + "z" * (1_023 - len(shown)) + "…"
    assert len(offered["title"]) == MAX_SCHEMA_TEXT_CHARS
    props = offered["properties"]
    # Properties named description and title are schemas, not texts; data stays as sent.
    assert props["description"]["description"] == "z" * 1_023 + "…"
    assert props["description"]["default"] == long
    assert props["title"] == {"type": "string", "enum": [long, "b"], "examples": [long]}
    assert offered["$defs"]["n"]["description"] == " [2J" + "z" * 1_019 + "…"
    assert offered["$defs"]["n"]["const"] == 3
    await harness.shutdown()
