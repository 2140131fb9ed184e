"""``harness export``: HTML (parsed with ``html.parser``, and rendered by a real headless
chromium where one is installed), Markdown and JSONL, of a session with branches, a compaction,
a branch summary, tool calls, thinking, labels and a name, built through the public API."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest
from cli_in_process import run_cli
from pi_sessions import PiSession

from harness import (
    AgentHarness,
    CompactionSettings,
    ExtractiveSummarizer,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    ls_tool,
)
from hooks import AssistantMessage, UserMessage
from repos import CompactionEntry, MessageEntry, open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


async def _build(root: Path, work: Path) -> str:
    repo = JsonlSessionRepo(root)
    session = await repo.create(str(work))
    model = FauxModel(
        [
            FauxReply(
                thinking="Let me look at the folder.",
                text="Looking.",
                tool_calls=[FauxToolCall(name="ls", arguments={"path": "."})],
            ),
            "The folder holds notes.txt. " * 30,
            "Second answer. " * 30,
            "Third answer <b>not bold</b> & more. " * 30,
            "A different second answer.",
        ]
    )
    agent = AgentHarness(
        session=session,
        model=model,
        tools=[ls_tool()],
        cwd=work,
        summarizer=ExtractiveSummarizer(),
        compaction=CompactionSettings(reserve_tokens=16384, keep_recent_tokens=100),
        resources=None,
    )
    await agent.prompt("What is in this folder?")
    await agent.prompt("Second question")
    await agent.prompt("Third question")
    assert await agent.compact("keep the file names") is not None
    users = [
        e
        for e in session.get_branch()
        if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
    ]
    await agent.navigate_tree(users[1].id, summarize=True, label="retry")
    await agent.prompt("Second question, again")
    session.set_label(users[0].id, "start")
    session.set_name("Export demo")
    session.close()
    return str(session.path)


@pytest.fixture(scope="module")
def session_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("harness-export-test-")
    work = folder / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hi")
    return Path(asyncio.run(_build(folder / "sessions", work)))


def harness(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``harness export ...`` in-process, through the CLI's entry point (``cli_in_process``;
    ``test_cli_rough_edges`` exports in a real process, on a terminal)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = run_cli(args, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


class Page(HTMLParser):
    """What the tests look at in a page: entries, details blocks, scripts, links, the title."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[str, dict[str, str]] = {}
        self.details: list[dict[str, str | None]] = []
        self.external: list[str] = []
        self.scripts = 0
        self.styles = 0
        self.title = ""
        self._in: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self._in.append(tag)
        if "data-entry-id" in a:
            self.entries[a["data-entry-id"] or ""] = {k: v or "" for k, v in a.items()}
        if tag == "details":
            self.details.append(a)
        if tag == "script":
            self.scripts += 1
            if a.get("src"):
                self.external.append(a["src"] or "")
        if tag == "style":
            self.styles += 1
        if tag == "link" and a.get("href"):
            self.external.append(a["href"] or "")
        if tag == "img" and not (a.get("src") or "").startswith("data:"):
            self.external.append(a.get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if self._in:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "title":
            self.title += data
        self.text.append(data)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def test_html_has_the_whole_tree_with_the_active_branch_marked(
    session_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "page.html"
    harness("export", session_file, "--format", "html", "-o", out)
    page = parse(out.read_text(encoding="utf-8"))
    with open_session(session_file) as session:
        branch = {e.id for e in session.get_branch()}
        every = list(session.entries())
        leaf = session.leaf_id
        labels = session.labels

    shown = {e.id for e in every if e.type not in ("label", "leaf")}
    assert set(page.entries) == shown  # every entry once; labels shown on their targets
    for entry_id, attrs in page.entries.items():
        assert (attrs["data-on-path"] == "true") == (entry_id in branch), entry_id
    assert "leaf" in page.entries[str(leaf)]["class"].split()
    assert page.title == "Export demo"
    assert page.scripts == 1 and page.styles == 1 and page.external == []

    branches = [d for d in page.details if "branch" in (d.get("class") or "").split()]
    assert len(branches) == 2
    active = [d for d in branches if "active-branch" in (d.get("class") or "")]
    assert len(active) == 1 and "open" in active[0]
    assert all("open" not in d for d in branches if d not in active)
    kinds = [d.get("class") for d in page.details]
    assert "thinking" in kinds and "tool-call" in kinds and "tool-result" in kinds
    assert all("open" not in d for d in page.details if d.get("class") in ("thinking", "tool-call"))

    types = {attrs["data-type"] for attrs in page.entries.values()}
    assert {"compaction", "branch_summary", "user", "assistant", "toolResult"} <= types
    text = "".join(page.text)
    assert all(label in text for label in labels.values())
    assert "Third answer <b>not bold</b> & more." in text  # escaped, shown as text
    assert "Whole tree: 5 replies" in text


def test_markdown_is_the_active_branch(session_file: Path) -> None:
    md = harness("export", session_file, "--format", "md").stdout
    with open_session(session_file) as session:
        branch = session.get_branch()
        off_branch = [
            e
            for e in session.entries()
            if isinstance(e, MessageEntry) and e.id not in {b.id for b in branch}
        ]
    assert md.startswith("# Export demo\n")
    for entry in branch:
        if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
            assert entry.message.text in md
        if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            assert entry.message.text.strip() in md
    assert "## User [start]\n\nWhat is in this folder?" in md
    assert "<details><summary>Thinking</summary>" in md
    assert "**Tool call** `ls`" in md
    assert "<details><summary>Result of ls</summary>" in md
    assert "## Branch summary" in md
    assert md.index("Second question, again") > md.index("## Branch summary")
    # The abandoned branch is not in the Markdown (its summary is).
    off_users = [e.message for e in off_branch if isinstance(e.message, UserMessage)]
    assert [m.text for m in off_users] == ["Second question", "Third question"]
    for message in off_users:
        assert f"## User\n\n{message.text}\n" not in md
    assert "## Assistant (faux/faux-1)\n\nThird answer" not in md


def test_jsonl_reexport_reads_back_the_same(session_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy.jsonl"
    harness("export", session_file, "--format", "jsonl", "-o", out)
    with open_session(session_file) as a, open_session(out) as b:
        assert a.entry_ids() == b.entry_ids() and a.leaf_id == b.leaf_id
        assert [m.text for m in a.build_context().messages if hasattr(m, "text")] == [
            m.text for m in b.build_context().messages if hasattr(m, "text")
        ]
        assert any(isinstance(e, CompactionEntry) for e in b.entries())
        assert b.diagnostics == ()


def test_jsonl_of_a_v1_file_is_a_migrated_copy(
    pi_file: Callable[..., PiSession], tmp_path: Path
) -> None:
    record = pi_file("before-compaction")  # pi's legacy format: a header without a version
    source = record.path
    assert source is not None
    before = source.read_bytes()
    out = tmp_path / "migrated.jsonl"
    harness("export", source, "--format", "jsonl", "-o", out)
    assert source.read_bytes() == before
    with open_session(source) as old, open_session(out) as new:
        assert new.header.version == 3 and old.header.version == 1
        assert new.entry_ids() == old.entry_ids()


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")
def test_html_in_a_headless_browser(session_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    harness("export", session_file, "-o", out)
    assert CHROMIUM is not None
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    profile = f"--user-data-dir={tmp_path / 'profile'}"

    def dom(url: str) -> Page:
        done = subprocess.run(
            [*base, profile, "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return parse(done.stdout)

    page = dom(out.as_uri())
    with open_session(session_file) as session:
        branch = [e for e in session.get_branch() if isinstance(e, MessageEntry)]
    for entry in branch:  # every message of the active branch is in the rendered DOM
        assert entry.id in page.entries, entry.id
        assert page.entries[entry.id]["data-on-path"] == "true"
    assert any("open" not in d for d in page.details)  # collapsed blocks...
    expanded = dom(out.as_uri() + "#expand-all")  # ...which the page's script opens
    assert expanded.details and all("open" in d for d in expanded.details)

    # CI keeps it as an artefact (HARNESS_ARTIFACTS, set by .ci/run).
    artefacts = Path(os.environ.get("HARNESS_ARTIFACTS", tempfile.gettempdir()))
    artefacts.mkdir(parents=True, exist_ok=True)
    shot = artefacts / "harness-export-screenshot.png"
    done = subprocess.run(
        [*base, profile, f"--screenshot={shot}", "--window-size=1200,2000", out.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and shot.stat().st_size > 0, done.stderr
    print(f"screenshot: {shot}")
