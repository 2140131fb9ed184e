"""The exported page and ``harness serve`` in a real headless chromium (Debian's, driven by
Playwright's Python package; no browser is downloaded): Markdown and code render, hostile
payloads do not run (a control page shows they would), folding and search work, a live append
appears on an open page within a second, label and fork from the page change the store.
Screenshots go to ``$HARNESS_ARTIFACTS`` when set (CI keeps them)."""

from __future__ import annotations

import asyncio
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hostile_sessions import MARK, PAYLOADS_HTML, write_session
from rich_session import SEARCH_WORD, build_rich_session
from web_server import REPO_ROOT, Served, serve

from repos import open_session

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("browser")
    # Playwright's sync API runs an event loop in this thread: build in another one.
    with ThreadPoolExecutor(1) as pool:
        made = pool.submit(
            asyncio.run, build_rich_session(folder / "sessions", folder / "work")
        ).result(timeout=120)
    return Path(made)


def _shot(page: Any, name: str) -> None:
    folder = os.environ.get("HARNESS_ARTIFACTS")
    target = Path(folder) if folder else Path(tempfile.gettempdir())
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / name), full_page=False)


def _export(source: Path, out: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "export", str(source), "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def _ran(page: Any) -> bool:
    marker = page.evaluate("document.querySelector('pwn-marker') !== null")
    return bool(marker) or page.title().startswith(MARK)


# --- the exported page ------------------------------------------------------------------------


def test_export_renders_markdown_and_code(page: Any, rich: Path, tmp_path: Path) -> None:
    out = _export(rich, tmp_path / "page.html")
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    assert page.locator(".role-user .md strong").first.inner_text() == "greeting"
    assert page.locator(".role-assistant .md ol li").count() == 2
    keyword = page.locator("pre.code .k", has_text="def").first
    assert keyword.is_visible()
    assert keyword.evaluate("e => getComputedStyle(e).color") != page.locator(
        "pre.code"
    ).first.evaluate("e => getComputedStyle(e).color")  # highlighted: its own colour
    assert page.locator("pre.diff .add").first.evaluate(
        "e => getComputedStyle(e).backgroundColor"
    ) not in ("rgba(0, 0, 0, 0)", "transparent")
    assert page.locator("img.image").count() == 1
    assert page.locator("nav.side a.on-path").count() >= 2
    assert all(url.startswith(("file:", "data:")) for url in requests), requests  # no network
    _shot(page, "harness-export-rich.png")


def test_export_folding_and_search(page: Any, rich: Path, tmp_path: Path) -> None:
    out = _export(rich, tmp_path / "page.html")
    page.goto(out.as_uri())
    # The long read result shows 8 lines; the rest is folded until opened.
    hidden = page.locator("details.more pre.out", has_text="line 39")
    assert not hidden.is_visible()
    page.locator("details.more > summary", has_text="32 more lines").click()
    assert hidden.is_visible()
    # Thinking is folded too.
    thinking = page.get_by_text("The user wants the greeting fixed", exact=False)
    assert not thinking.is_visible()
    page.locator("details.thinking > summary").first.click()
    assert thinking.is_visible()
    # Search finds the one entry holding the word, even inside a closed branch.
    page.fill("#search", SEARCH_WORD.upper())
    page.wait_for_selector("#results li a")
    found = page.locator("#search-count").inner_text()  # the prompt, the reply, summaries
    assert found.endswith(" entries") and int(found.split()[0]) >= 2
    page.locator("#results li a").first.click()
    target = page.locator(".entry.target")
    assert SEARCH_WORD in (target.text_content() or "").lower() and target.is_visible()
    _shot(page, "harness-export-search.png")


def test_no_payload_runs_in_the_export_or_the_web_app(
    page: Any, browser: Any, tmp_path: Path
) -> None:
    payload = " ".join(PAYLOADS_HTML.values())
    # The control: the same payloads in a page that does not escape them do run here.
    control = tmp_path / "control.html"
    control.write_text(f"<!DOCTYPE html><title>t</title><body>{payload}</body>", "utf-8")
    page.goto(control.as_uri())
    page.wait_for_timeout(500)
    assert _ran(page)

    root = tmp_path / "sessions"
    source = write_session(root / "--tmp--" / "2025_hostile1234.jsonl", payload)
    # A valid id, so the web app serves it (the header's id holds the payload otherwise).
    lines = source.read_text().splitlines()
    lines[0] = lines[0].replace('"id": "hostile', '"id": "hostile1234", "x": "', 1)
    source.write_text("\n".join(lines) + "\n")
    fresh = browser.new_context().new_page()
    out = _export(source, tmp_path / "hostile.html")
    for url in (out.as_uri(), out.as_uri() + "#expand-all"):
        fresh.goto(url)
        fresh.wait_for_timeout(500)
        assert not _ran(fresh)
        fresh.locator("#expand-all").click()
        fresh.wait_for_timeout(300)
        assert not _ran(fresh)
    with serve(root) as server:
        fresh.goto(server.url_for("/s/hostile1234"))
        assert fresh.locator(".entry").count() > 5
        fresh.locator("#expand-all").click()
        fresh.wait_for_timeout(500)
        assert not _ran(fresh)
        fresh.fill("#search", "onerror")
        fresh.wait_for_selector("#results li a")
        fresh.locator("#results li a").first.click()
        fresh.wait_for_timeout(300)
        assert not _ran(fresh)
    fresh.context.close()


# --- the web app --------------------------------------------------------------------------------


@pytest.fixture
def served(rich: Path, tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    root = tmp_path / "store"
    shutil.copytree(rich.parent.parent, root)
    [path] = list(root.rglob("*.jsonl"))
    with serve(root) as server:
        yield server, path


def test_the_list_leads_to_the_session(page: Any, served: tuple[Served, Path]) -> None:
    server, _ = served
    page.goto(server.url)
    page.fill("input[name=q]", "greeting")
    page.click("form.filters button")
    page.get_by_role("link", name="Fixing the greeting").click()
    page.wait_for_selector("main#tree .entry")
    assert page.locator(".role-user .md strong").first.inner_text() == "greeting"
    _shot(page, "harness-serve-session.png")


def test_a_live_append_appears_without_a_reload(page: Any, served: tuple[Served, Path]) -> None:
    server, path = served
    with open_session(path) as session:
        sid = session.id
    page.goto(server.url_for(f"/s/{sid}"))
    # A selector, not wait_for_function: the page's CSP forbids a string predicate's eval.
    page.locator("#live-status:not(:empty)").wait_for()
    with open_session(path) as session:  # another process would do the same
        entry = session.append_custom_message("note", "**appended** while you watched")
    # The store's watch wakes the page within its poll interval (well under a second on an idle
    # machine); the wait is generous so a loaded CI machine does not turn this into a timing test.
    page.wait_for_selector(f"#entry-{entry.id} strong", timeout=5000)
    text = page.locator(f"#entry-{entry.id}").text_content() or ""
    assert "appended while you watched" in text


def test_label_and_fork_from_the_page_change_the_store(
    page: Any, served: tuple[Served, Path]
) -> None:
    server, path = served
    with open_session(path) as session:
        sid = session.id
        first = session.get_branch()[1].id
    page.goto(server.url_for(f"/s/{sid}"))
    page.locator(f"#entry-{first} a.eid").click()  # picks the entry for the forms
    assert page.locator("#label-form input[name=entry]").input_value() == first
    page.fill("#label-form input[name=label]", "picked in the browser")
    page.click("#label-form button")
    page.locator(".label", has_text="picked in the browser").wait_for()
    with open_session(path) as session:
        assert session.labels[first] == "picked in the browser"
    page.locator(f"#entry-{first} a.eid").click()
    page.click("#fork-form button")
    page.wait_for_url(lambda url: f"/s/{sid}" not in url)
    fork_id = page.url.rsplit("/", 1)[-1]
    [fork] = list(path.parent.parent.rglob(f"*_{fork_id}.jsonl"))
    with open_session(fork) as forked:
        assert forked.header.parent_session == str(path) and forked.leaf_id == first
    _shot(page, "harness-serve-fork.png")


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Another server on 127.0.0.1, as a sandboxed command would start: it records the
    cookies the browser sends it."""

    cookies: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.cookies.append(self.headers.get("Cookie") or "")
        body = b"<p>a preview</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_server_on_another_port_gets_no_token(page: Any, served: tuple[Served, Path]) -> None:
    """Review 10, finding 7: a browser sends a host's cookies to every port of it, so a server
    a sandboxed command started on another port of 127.0.0.1 got the token's cookie when the
    user opened its link, and read every session with it. The cookie's path is a random
    prefix every page is under, which no link of the other server can name."""
    server, _ = served
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        page.goto(server.url)
        page.get_by_role("link", name="Fixing the greeting").click()
        page.wait_for_selector("main#tree .entry")  # the cookie works on our own pages
        port = other.server_address[1]
        for where in ("/report", "/", "/s/x", "/h-/"):
            page.goto(f"http://127.0.0.1:{port}{where}")
            page.wait_for_selector("p")
    finally:
        other.shutdown()
        other.server_close()
    assert server.token is not None and len(_Recorder.cookies) >= 4  # and /favicon.ico
    assert not any(server.token in cookie for cookie in _Recorder.cookies), _Recorder.cookies
