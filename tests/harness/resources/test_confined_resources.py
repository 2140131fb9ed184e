"""Skills, templates and context files are read beneath their scope's folder, only when they
are regular files of bounded size with bounded frontmatter; write_skill writes beneath it too.

A project is untrusted (docs/security.md): a symlink out of it must never put another file
(``/etc/shadow`` in the issue; a secret file here) into the system prompt or a tool result, a
FIFO or a link to ``/dev/zero`` must never block or exhaust the process, and no frontmatter may
crash the harness. Each hazard becomes a diagnostic for that one file. Calls run under a hard
limit (a hang is the bug), in a daemon thread that must return.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from resource_trees import write_skill

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    ResourceOptions,
    Resources,
    SkillContext,
    SkillListing,
    SkillWriteRefusedError,
    SkillWriteRequest,
    ToolResultMessage,
)

LIMIT_S = 30.0
SECRET = "TOP-SECRET-CONTENT"
T = TypeVar("T")


def bounded(fn: Callable[[], T]) -> T:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(LIMIT_S)
    if thread.is_alive():
        pytest.fail(f"still running after {LIMIT_S:g} s: it hangs")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def scan(cwd: Path, **options: Any) -> tuple[Resources, SkillListing]:
    def run() -> tuple[Resources, SkillListing]:
        resources = Resources(cwd, ResourceOptions(**options))
        ctx = SkillContext(session_id=None, cwd=cwd)
        return resources, asyncio.run(resources.listing(ctx))

    return bounded(run)


def everything(resources: Resources, listing: SkillListing) -> str:
    """All text the model could be given from these resources (catalog, bodies, files)."""
    parts = [f"{r.name} {r.description}" for r in listing.records]
    ctx = SkillContext(session_id=None, cwd=Path("/"))
    for r in listing.records:
        body = asyncio.run(resources.load(r.name, r.scope, ctx))
        parts.append(body or "")
    parts += [f.content for f in resources.context_files]
    parts += [t.content + t.description for t in resources.templates]
    return "\n".join(parts)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "shadow"
    path.parent.mkdir()
    path.write_text(f"---\nname: leaked\ndescription: {SECRET}\n---\n{SECRET}\n")
    return path


# --- class 8: nothing read through a symlink out of the scope --------------------------------

ESCAPES = [
    "skill-md",  # the issue's: SKILL.md -> /etc/shadow
    "top-level-md",  # a one-file skill at the root
    "relative-skill-md",  # ../../../../outside/shadow
    "skill-folder",  # .agents/skills/s -> a folder outside
    "skills-folder",  # .agents/skills -> a folder outside
    "agents-folder",  # .agents -> a folder outside
    "agents-md",  # the issue's: AGENTS.md -> outside
    "claude-md",
    "nested-agents-md",  # in the working folder below the repository root
    "template",
    "templates-folder",
    "gitignore",  # even a .gitignore is not read through a link out
]


def _escape(kind: str, project: Path, secret: Path) -> None:
    skills = project / ".agents" / "skills"
    outside = secret.parent
    if kind in ("skill-folder", "skills-folder", "agents-folder"):
        (outside / "s").mkdir()
        (outside / "s" / "SKILL.md").symlink_to(secret)
        (outside / "SKILL.md").symlink_to(secret)
    if kind == "skill-md":
        (skills / "s").mkdir(parents=True)
        (skills / "s" / "SKILL.md").symlink_to(secret)
    elif kind == "top-level-md":
        skills.mkdir(parents=True)
        (skills / "leaked.md").symlink_to(secret)
    elif kind == "relative-skill-md":
        (skills / "s").mkdir(parents=True)
        up = os.path.relpath(secret, skills / "s")
        (skills / "s" / "SKILL.md").symlink_to(up)
    elif kind == "skill-folder":
        skills.mkdir(parents=True)
        (skills / "s").symlink_to(outside / "s")
    elif kind == "skills-folder":
        (project / ".agents").mkdir()
        (project / ".agents" / "skills").symlink_to(outside)
    elif kind == "agents-folder":
        (outside / "skills").mkdir()
        (outside / "skills" / "s").symlink_to(outside / "s")
        (project / ".agents").symlink_to(outside)
    elif kind == "agents-md":
        (project / "AGENTS.md").symlink_to(secret)
    elif kind == "claude-md":
        (project / "CLAUDE.md").symlink_to(secret)
    elif kind == "nested-agents-md":
        (project / "app" / "AGENTS.md").symlink_to(secret)
    elif kind == "template":
        (project / ".agents" / "prompts").mkdir(parents=True)
        (project / ".agents" / "prompts" / "t.md").symlink_to(secret)
    elif kind == "templates-folder":
        (project / ".agents").mkdir()
        (project / ".agents" / "prompts").symlink_to(outside)
        (outside / "t.md").write_text(SECRET)
    elif kind == "gitignore":
        write_skill(skills, "kept")
        (outside / "ignore").write_text("kept\n")
        (skills / ".gitignore").symlink_to(outside / "ignore")


@pytest.mark.parametrize("kind", ESCAPES)
def test_nothing_is_read_through_a_symlink_out_of_the_project(
    project: Path, secret: Path, kind: str
) -> None:
    _escape(kind, project, secret)
    resources, listing = scan(project / "app")
    assert SECRET not in everything(resources, listing)
    assert "leaked" not in [r.name for r in listing.records]
    codes = [d.code for d in listing.diagnostics]
    assert "outside_root" in codes, listing.diagnostics
    if kind == "gitignore":  # its patterns were not applied
        assert [r.name for r in listing.records] == ["kept"]


async def test_the_model_never_gets_a_file_outside_the_project(
    project: Path, secret: Path, tmp_path: Path
) -> None:
    write_skill(project / ".agents" / "skills", "good", "A good skill", "Good body.")
    (project / "AGENTS.md").symlink_to(secret)
    (project / ".agents" / "skills" / "bad").mkdir()
    (project / ".agents" / "skills" / "bad" / "SKILL.md").symlink_to(secret)
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    model = FauxModel(
        [
            FauxReply(tool_calls=[FauxToolCall(name="skill", arguments={"name": "bad"})]),
            FauxReply(tool_calls=[FauxToolCall(name="skill", arguments={"name": "leaked"})]),
            "done",
        ]
    )
    h = AgentHarness(session=session, model=model, cwd=project)
    await h.prompt("go")
    assert all(SECRET not in r.system_prompt for r in model.requests)
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert results and all(r.is_error and SECRET not in r.text for r in results)
    session.close()


def test_a_symlink_that_stays_inside_the_project_is_followed(project: Path) -> None:
    shared = write_skill(project / "shared", "common", "Shared procedure", "Shared body.")
    skills = project / "app" / ".agents" / "skills"
    (skills / "common").mkdir(parents=True)
    (skills / "common" / "SKILL.md").symlink_to(os.path.relpath(shared, skills / "common"))
    (project / "docs.md").write_text("Project rules.")
    (project / "AGENTS.md").symlink_to("docs.md")
    resources, listing = scan(project / "app")
    assert [r.name for r in listing.records] == ["common"]
    assert "Shared body." in everything(resources, listing)
    assert [f.content for f in resources.context_files] == ["Project rules."]


def test_a_skill_swapped_for_a_link_out_after_the_scan_is_not_served(
    project: Path, secret: Path
) -> None:
    path = write_skill(project / ".agents" / "skills", "s", "Fine at scan time", "Fine.")
    resources, listing = scan(project)
    assert [r.name for r in listing.records] == ["s"]
    path.unlink()
    path.symlink_to(secret)
    ctx = SkillContext(session_id=None, cwd=project)
    assert bounded(lambda: asyncio.run(resources.load("s", "project", ctx))) is None


def test_user_and_extra_scopes_stay_in_their_folders(
    project: Path, secret: Path, user_config: Path, tmp_path: Path
) -> None:
    (user_config / "skills" / "u").mkdir(parents=True)
    (user_config / "skills" / "u" / "SKILL.md").symlink_to(secret)
    (user_config / "AGENTS.md").symlink_to(secret)
    extra = tmp_path / "extra"
    (extra / "e").mkdir(parents=True)
    (extra / "e" / "SKILL.md").symlink_to(secret)
    resources, listing = scan(project, skill_roots=[extra])
    assert SECRET not in everything(resources, listing)
    assert [d.code for d in listing.diagnostics].count("outside_root") == 3


# --- write_skill writes beneath the scope's folder -----------------------------------------

REQUEST = SkillWriteRequest(
    scope="project", scopes=("project", "user", "extra", "internal"), author="agent"
)


@pytest.mark.parametrize("link", ["skill-folder", "skills-folder", "agents-folder"])
async def test_write_skill_never_writes_through_a_symlink_out(
    project: Path, user_config: Path, tmp_path: Path, link: str
) -> None:
    (user_config / "skills" / "learned").mkdir(parents=True)
    if link == "skill-folder":
        (project / ".agents" / "skills").mkdir(parents=True)
        (project / ".agents" / "skills" / "learned").symlink_to(user_config / "skills" / "learned")
    elif link == "skills-folder":
        (project / ".agents").mkdir()
        (project / ".agents" / "skills").symlink_to(user_config / "skills")
    else:
        (project / ".agents").symlink_to(user_config)
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    h = AgentHarness(session=session, cwd=project)
    with pytest.raises(SkillWriteRefusedError):
        await h.write_skill(REQUEST, name="learned", description="d", body="b")
    assert list((user_config / "skills" / "learned").iterdir()) == []
    session.close()


async def test_write_skill_replaces_a_symlinked_skill_file_never_its_target(
    project: Path, secret: Path, tmp_path: Path
) -> None:
    (project / ".agents" / "skills" / "learned").mkdir(parents=True)
    (project / ".agents" / "skills" / "learned" / "SKILL.md").symlink_to(secret)
    before = secret.read_text()
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    h = AgentHarness(session=session, cwd=project)
    path = await h.write_skill(REQUEST, name="learned", description="d", body="b")
    assert secret.read_text() == before
    assert not path.is_symlink() and "description: d" in path.read_text()
    session.close()


# --- class 12: FIFOs, devices and huge files are reported, never waited on -----------------

HAZARDS = ["fifo", "dev-zero", "dev-kmsg", "huge", "socket"]


def _hazard(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dev-kmsg":
        path.symlink_to("/dev/kmsg")
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        with path.open("wb") as f:
            f.write(b"---\nname: huge\ndescription: huge\n---\n")
            f.truncate(64 << 20)  # 64 MiB, mostly holes


@pytest.mark.parametrize("kind", HAZARDS)
@pytest.mark.parametrize(
    "where",
    [
        ".agents/skills/huge/SKILL.md",
        ".agents/skills/huge.md",
        ".agents/skills/.gitignore",
        ".agents/prompts/t.md",
        "AGENTS.md",
        "CLAUDE.md",
    ],
)
def test_a_hostile_file_is_a_diagnostic_and_the_rest_still_loads(
    project: Path, kind: str, where: str
) -> None:
    write_skill(project / ".agents" / "skills", "fine", "Still here")
    _hazard(project / where, kind)
    resources, listing = scan(project)
    assert [r.name for r in listing.records] == ["fine"]
    assert resources.context_files == ()
    mine = [d for d in listing.diagnostics if d.path == str(project / where)]
    assert mine and mine[0].code in ("read_failed", "outside_root"), listing.diagnostics


# --- class 11: frontmatter nesting is bounded ----------------------------------------------


def _nested_yaml_flow(depth: int) -> str:
    return "---\nname: deep\ndescription: " + "{a: " * depth + "1" + "}" * depth + "\n---\nb\n"


def _nested_yaml_block(depth: int) -> str:
    depth = min(depth, 1000)  # indentation grows with depth: 1000 levels is 500 KB
    lines = "".join(" " * (i + 1) + "a:\n" for i in range(depth))
    return f"---\nname: deep\ndescription: d\nx:\n{lines}" + " " * (depth + 1) + "1\n---\nb\n"


def _nested_yaml_lists(depth: int) -> str:
    return "---\nname: deep\ndescription: d\nx: " + "[" * depth + "]" * depth + "\n---\nb\n"


def _nested_json_objects(depth: int) -> str:
    inner = '{"a": ' * depth + "1" + "}" * depth
    return '{"name": "deep", "description": "d", "x": ' + inner + "}\nbody\n"


def _nested_json_arrays(depth: int) -> str:
    return '{"name": "deep", "description": "d", "x": ' + "[" * depth + "]" * depth + "}\nbody\n"


def _alias(depth: int) -> str:
    bomb = "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 6)
    )  # 9**5 references: exponential for anything that walks it
    return f"---\nname: deep\ndescription: d\nl0: &l0 [x]\n{bomb}---\nbody\n"


NESTINGS = [
    _nested_yaml_flow,  # the issue's
    _nested_yaml_block,
    _nested_yaml_lists,
    _nested_json_objects,
    _nested_json_arrays,
    _alias,
]


@pytest.mark.parametrize("make", NESTINGS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("depth", [40, 2000, 100_000])
def test_deep_frontmatter_is_a_parse_diagnostic_not_a_crash(
    project: Path, make: Callable[[int], str], depth: int
) -> None:
    write_skill(project / ".agents" / "skills", "fine", "Still here")
    deep = project / ".agents" / "skills" / "deep" / "SKILL.md"
    deep.parent.mkdir()
    deep.write_text(make(depth))
    prompts = project / ".agents" / "prompts"
    prompts.mkdir()
    (prompts / "deep.md").write_text(make(depth))
    resources, listing = scan(project)
    assert [r.name for r in listing.records] == ["fine"]
    assert [t.name for t in resources.templates] == []
    by_path = {d.path: d for d in listing.diagnostics}
    assert by_path[str(deep)].code == "parse_failed"
    assert by_path[str(prompts / "deep.md")].code == "parse_failed"
    assert all(len(d.message) < 2000 for d in listing.diagnostics)


async def test_a_harness_over_a_deep_frontmatter_starts_and_runs(
    project: Path, tmp_path: Path
) -> None:
    deep = project / ".agents" / "skills" / "deep" / "SKILL.md"
    deep.parent.mkdir(parents=True)
    deep.write_text(_nested_yaml_flow(2000))
    (project / ".agents" / "prompts").mkdir()
    (project / ".agents" / "prompts" / "t.md").write_text(_nested_json_arrays(5000))
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    h = AgentHarness(session=session, model=FauxModel(["ok"]), cwd=project)
    assert (await h.prompt("hi")).text == "ok"
    session.close()


@pytest.mark.parametrize("command", [["skills", "list"], ["templates", "list"]])
def test_the_cli_lists_resources_over_a_deep_frontmatter(project: Path, command: list[str]) -> None:
    deep = project / ".agents" / "skills" / "deep" / "SKILL.md"
    deep.parent.mkdir(parents=True)
    deep.write_text(_nested_yaml_flow(2000))
    (project / ".agents" / "prompts").mkdir()
    (project / ".agents" / "prompts" / "t.md").write_text(_nested_yaml_flow(2000))
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *command, "--cwd", str(project)],
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


# --- class 14: descriptions and names are capped -------------------------------------------


@pytest.mark.parametrize(
    ("source", "length"),
    [
        ("frontmatter", 1025),
        ("frontmatter", 65_000),  # under the most a frontmatter holds (review 12, finding 7)
        ("json", 100_000),
        ("body", 500_000),  # the first paragraph, when there is no description
        ("multibyte", 3000),
    ],
)
async def test_a_long_description_is_cut_to_the_agent_skills_limit(
    project: Path, tmp_path: Path, source: str, length: int
) -> None:
    path = project / ".agents" / "skills" / "big" / "SKILL.md"
    path.parent.mkdir(parents=True)
    word = "é" if source == "multibyte" else "x"
    long = word * length
    if source in ("frontmatter", "multibyte"):
        path.write_text(f"---\nname: big\ndescription: {long}\n---\nBody.\n")
    elif source == "json":
        path.write_text(f'{{"name": "big", "description": "{long}"}}\nBody.\n')
    else:
        path.write_text(f"---\nname: big\n---\n{long}\n")
    _, listing = scan(project)
    (record,) = listing.records
    assert record.description == word * 1024
    assert [d.code for d in listing.diagnostics] == ["invalid_metadata"]
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(project))
    model = FauxModel(["ok"])
    await AgentHarness(session=session, model=model, cwd=project).prompt("hi")
    assert word * 1025 not in model.requests[0].system_prompt
    session.close()


def test_a_5_mb_skill_file_is_refused_and_never_reaches_the_prompt(project: Path) -> None:
    path = project / ".agents" / "skills" / "big" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nname: big\ndescription: " + "x" * 5_000_000 + "\n---\nBody.\n")
    _, listing = scan(project)
    assert listing.records == ()
    (diagnostic,) = listing.diagnostics
    assert (diagnostic.code, diagnostic.path, diagnostic.dropped) == (
        "read_failed",
        str(path),
        True,
    )
    assert len(diagnostic.message) < 500


@pytest.mark.parametrize("name", ["a" * 65, "a" * 5_000_000, "x" * 70 + "-y"])
def test_a_long_name_is_refused_with_a_short_message(project: Path, name: str) -> None:
    path = project / ".agents" / "skills" / "n" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: d\n---\n")
    _, listing = scan(project)
    assert listing.records == ()
    if len(name) < 1_000_000:
        (diagnostic,) = listing.diagnostics
        assert diagnostic.code == "invalid_name" and len(diagnostic.message) < 500
    else:  # the file itself is over the 1 MiB cap
        assert [d.code for d in listing.diagnostics] == ["read_failed"]


@pytest.mark.parametrize("kind", ["agents-md", "skill-md", "template"])
def test_a_resource_linked_to_the_harness_private_data_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Review 8, finding 5: working in the home folder, `AGENTS.md` symlinked to
    `approvals.key` (or to a session) stays inside the project, and was read into the system
    prompt: the signing key went to the model."""
    home = tmp_path / "home"
    for name, sub in [("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share")]:
        (home / sub).mkdir(parents=True)
        monkeypatch.setenv(name, str(home / sub))
    monkeypatch.setenv("HOME", str(home))
    key = home / ".config/harness/approvals.key"
    key.parent.mkdir()
    key.write_text(f"---\nname: leaked\ndescription: {SECRET}\n---\n{SECRET}\n")
    session = home / ".local/share/harness/sessions/--p--/s.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text(f"---\nname: leaked2\ndescription: {SECRET}\n---\n{SECRET}\n")
    skills = home / ".agents" / "skills"

    def link(at: Path, target: Path) -> None:  # relative: it stays inside the project
        at.parent.mkdir(parents=True, exist_ok=True)
        at.symlink_to(os.path.relpath(target, at.parent))

    if kind == "agents-md":
        link(home / "AGENTS.md", key)
    elif kind == "skill-md":
        link(skills / "s" / "SKILL.md", key)
        link(skills / "t" / "SKILL.md", session)
    else:
        link(home / ".agents" / "prompts" / "t.md", key)
    resources, listing = scan(home)
    assert SECRET not in everything(resources, listing)
    assert "leaked" not in [r.name for r in listing.records]
    messages = " ".join(d.message for d in listing.diagnostics)
    assert "is not read" in messages or "outside" in messages, listing.diagnostics
