"""The exported page and Markdown run no script from a session, whatever its fields hold.

A session file with a payload in every field of every entry kind (``hostile_sessions``: all
entry types of DESIGN §2, every message role and content block type, unknown types, roles and
fields, images of every mime type) is exported and parsed. The page must have exactly the
elements, attributes and classes it has for the same session holding an inert word instead:
nothing in it came from the payload but text and quoted attribute values. A headless chromium
then opens the page (its handlers and timers given time to run) and must not see the title
change or a marker element appear, which the same payloads do in a page that does not escape
them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from cli_in_process import run_cli
from hostile_sessions import PAYLOADS_HTML, PAYLOADS_TERMINAL, PNG, write_session
from markdown_it import MarkdownIt

from harness.cli._export import session_html, session_markdown
from repos import open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INERT = "PAYLOAD"
EVERY = {**PAYLOADS_HTML, **PAYLOADS_TERMINAL}
# Every class token the page itself uses.
OUR_CLASSES = {
    *("session-name", "meta", "totals", "controls", "head", "text", "label", "image", "error"),
    *("entry", "on-path", "leaf", "minor", "branches", "branch", "active-branch"),
    *("thinking", "tool-call", "tool-result", "summary", "compaction-summary", "branch-summary"),
    *("message", "model_change", "thinking_level_change", "active_tools_change", "compaction"),
    *("branch_summary", "custom", "custom_message", "session_info", "unknown"),
    *("role-user", "role-assistant", "role-toolResult", "role-bashExecution", "role-custom"),
    "role-unknown",
    # The renderer's layout, side panel, usage block, Markdown, folding and diffs.
    *("top", "usage", "stats", "layout", "side", "nav", "alt", "active", "fork", "eid"),
    *("md", "plain", "code", "out", "more", "diff", "add", "del", "hunk"),
}
# The attributes whose values quote the session (escaped); every other value is ours.
QUOTING = {"id", "data-entry-id", "alt", "href"}


class Skeleton(HTMLParser):
    """Every start tag as (tag, attribute names, class tokens), the values of the quoting
    attributes apart, the text, the title, and custom elements (a script's marker)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
        self.values: list[tuple[str, str, str]] = []
        self.srcs: list[str] = []
        self.text: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = tuple((a.get("class") or "").split())
        self.tags.append((tag, tuple(sorted(a)), classes))
        for name, value in a.items():
            if name == "src":
                self.srcs.append(value or "")
            elif name not in ("class",):
                self.values.append((tag, name, value or ""))
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        self.text.append(data)


def skeleton(html: str) -> Skeleton:
    parsed = Skeleton()
    parsed.feed(html)
    parsed.close()
    return parsed


def _page(tmp_path: Path, payload: str, *, side_leaf: bool = False) -> str:
    path = write_session(
        tmp_path / f"{len(payload)}-{side_leaf}.jsonl", payload, side_leaf=side_leaf
    )
    with open_session(path) as session:
        return session_html(session)


@pytest.mark.parametrize("name", list(EVERY))
@pytest.mark.parametrize("side_leaf", [False, True], ids=["main-leaf", "side-leaf"])
def test_no_element_attribute_or_class_comes_from_the_session(
    name: str, side_leaf: bool, tmp_path: Path
) -> None:
    payload = EVERY[name]
    hostile = skeleton(_page(tmp_path, payload, side_leaf=side_leaf))
    inert = skeleton(_page(tmp_path, INERT, side_leaf=side_leaf))
    assert hostile.tags == inert.tags  # same elements, attributes and classes, in order
    assert {c for _, _, classes in hostile.tags for c in classes} <= OUR_CLASSES
    # Values that are not ours are only those of the quoting attributes.
    ours = [v for v in hostile.values if v[1] not in QUOTING]
    assert ours == [v for v in inert.values if v[1] not in QUOTING]
    assert not any(a.startswith("on") for _, attrs, _ in hostile.tags for a in attrs)
    # Links quote an entry id, within the page: never a scheme of the session's.
    hrefs = [v for _, name, v in hostile.values if name == "href"]
    assert hrefs and all(h.startswith("#entry-") for h in hrefs), hrefs
    # Only the valid PNGs are embedded (not SVG, HTML, a mime type with parameters, bad base64).
    assert hostile.srcs == [f"data:image/png;base64,{PNG}"] * 2
    assert sum(tag == "script" for tag, _, _ in hostile.tags) == 1
    assert sum(tag == "style" for tag, _, _ in hostile.tags) == 1


def test_every_field_is_shown_as_text(tmp_path: Path) -> None:
    payload = PAYLOADS_HTML["class-breakout"]
    page = skeleton(_page(tmp_path, payload))
    text = "".join(page.text)
    for field in (
        f"user text {payload}",
        f"reply {payload}",
        f"thought {payload}",
        f"prov{payload}/model{payload}",
        f"name{payload}",
        f"call{payload}",
        f"stop{payload}",
        f"error {payload}",
        f"result {payload}",
        f"echo {payload}",
        f"ctype{payload}",
        f"role{payload}",
        f"type{payload}",
        f"summary {payload}",
        f"label {payload}",
        f"branch {payload}",
        f"block{payload}",
        f"kind{payload}",
        "[image image/svg+xml: not shown]",
        "[image text/html: not shown]",
    ):
        assert field in text, field
    assert page.title == f"name {payload}"


def test_terminal_controls_in_a_page_are_shown_escaped(tmp_path: Path) -> None:
    page = _page(tmp_path, PAYLOADS_TERMINAL["osc52"] + PAYLOADS_TERMINAL["rlo"])
    assert "\x1b" not in page and "\u202e" not in page
    assert "user text \\x1b]52;c;aGk=\\x07\\u202eevil\\u202c" in "".join(skeleton(page).text)


# --- Markdown -----------------------------------------------------------------------------

_OUR_HTML = re.compile(r"<details><summary>[^<]*</summary>\n?|</details>\n?")
_SCRIPT_SCHEMES = ("javascript:", "vbscript:", "livescript:")


def _renderer() -> MarkdownIt:
    """CommonMark with raw HTML on, and every link destination let through (as renderers
    that do not filter them, Python-Markdown or marked, do)."""
    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True
    return md


def _markdown(tmp_path: Path, payload: str, side_leaf: bool) -> str:
    path = write_session(tmp_path / "md.jsonl", payload, side_leaf=side_leaf)
    with open_session(path) as session:
        return session_markdown(session)


def _as_browser_reads(url: str) -> str:
    """A URL as a browser takes its scheme: tabs and newlines dropped, leading controls and
    spaces stripped, lower case."""
    return re.sub("[\t\n\r]", "", url).lstrip("\x00- ").lower()


@pytest.mark.parametrize("name", list(EVERY))
@pytest.mark.parametrize("side_leaf", [False, True], ids=["main-leaf", "side-leaf"])
def test_markdown_renders_no_html_and_no_script_link_from_the_session(
    name: str, side_leaf: bool, tmp_path: Path
) -> None:
    text = _markdown(tmp_path, EVERY[name], side_leaf)
    md = _renderer()
    raw_html = [
        t.content
        for block in md.parse(text)
        for t in [block, *(block.children or [])]
        if t.type in ("html_block", "html_inline")
    ]
    assert all(_OUR_HTML.fullmatch(h) for h in raw_html), raw_html
    rendered = skeleton(md.render(text))
    links = [v for _, attr, v in rendered.values if attr == "href"] + rendered.srcs
    assert not any(_as_browser_reads(u).startswith(_SCRIPT_SCHEMES) for u in links), links
    assert not any(a.startswith("on") for _, attrs, _ in rendered.tags for a in attrs)
    # Markdown's own elements (session text keeps its Markdown), and our <details> blocks.
    commonmark = {"p", "blockquote", "ul", "ol", "li", "pre", "code", "em", "strong", "a", "img"}
    commonmark |= {"br", "hr", "h1", "h2", "h3", "h4", "h5", "h6"}
    assert {tag for tag, _, _ in rendered.tags} <= commonmark | {"details", "summary"}


def test_markdown_code_spans_and_fences_hold_any_backticks(tmp_path: Path) -> None:
    payload = "x`y `` ``` ````z"
    text = _markdown(tmp_path, payload, False)
    tokens = MarkdownIt("commonmark").parse(text)
    fences = [t.content for t in tokens if t.type == "fence"]
    assert f'"{payload}": "{payload}"' in "".join(fences)  # the tool call's arguments
    spans = [c.content for t in tokens for c in t.children or [] if c.type == "code_inline"]
    assert f"name{payload}" in spans and f"call{payload}" in spans


# --- a real browser -----------------------------------------------------------------------


def _dom(url: str, profile: Path) -> Skeleton:
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            # Virtual time runs the page's load, error and toggle handlers and timers first.
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return skeleton(done.stdout)


def _ran(page: Skeleton) -> bool:
    return page.title.startswith("PWNED") or any(tag == "pwn-marker" for tag, _, _ in page.tags)


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")
def test_no_payload_runs_in_a_headless_browser(tmp_path: Path) -> None:
    payload = " ".join(PAYLOADS_HTML.values())
    # The control: the same payloads in a page that does not escape them do run here.
    control = tmp_path / "control.html"
    control.write_text(f"<!DOCTYPE html><title>t</title><body>{payload}</body>", "utf-8")
    assert _ran(_dom(control.as_uri(), tmp_path / "profile-control"))

    source = write_session(tmp_path / "hostile.jsonl", payload)
    out = tmp_path / "page.html"
    done = run_cli(["export", source, "-o", out], cwd=REPO_ROOT)  # in-process (cli_in_process)
    assert done.returncode == 0, done.stderr
    for url in (out.as_uri(), out.as_uri() + "#expand-all"):  # every <details> opened too
        page = _dom(url, tmp_path / "profile")
        assert not _ran(page), page.title
        assert page.title == f"name {payload}"
        assert page.srcs == [f"data:image/png;base64,{PNG}"] * 2
