"""``harness serve`` needs a token by default (review 9, finding 10).

Served on loopback without a token, it answered every local process, a sandboxed bash command
too (the sandbox shares the network namespace): the command that found the session store empty
on disk read every session over HTTP, and could label and fork with the CSRF token of the page.
Now each start makes a new token, printed in the ``?token=`` URL to open (which keeps it in an
HttpOnly, SameSite=Strict cookie); ``--no-token`` keeps the old way, with a warning.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_sessions import PAYLOADS_HTML, write_session
from rich_session import build_rich_session
from web_server import REPO_ROOT, Served, serve

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    SecuritySupervisor,
    TextContent,
    bash_tool,
)
from harness._tools.sandbox import sandbox_available
from repos import open_session


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("web-token")
    asyncio.run(build_rich_session(folder / "sessions", folder / "work"))
    write_session(
        folder / "sessions" / "--tmp--" / "2025_hostile.jsonl", " ".join(PAYLOADS_HTML.values())
    )
    return folder / "sessions"


@pytest.fixture(scope="module")
def server(store: Path) -> Iterator[Served]:
    with serve(store) as served:
        yield served


def _rich(store: Path) -> tuple[str, str, Path]:
    """The rich session's id, its first entry's id, and its file."""
    [path] = [p for p in store.rglob("*.jsonl") if "hostile" not in p.name]
    with open_session(path) as session:
        return session.id, session.get_branch()[1].id, path


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_each_start_prints_a_new_strong_token_in_the_url(server: Served, store: Path) -> None:
    assert server.token is not None and len(server.token) >= 43  # 256 bits, URL-safe
    assert server.url == f"http://127.0.0.1:{server.port}/?token={server.token}"
    assert "warning" not in server.printed
    with serve(store) as other:
        assert other.token is not None and other.token != server.token


def test_without_the_token_every_page_and_action_is_refused(server: Served, store: Path) -> None:
    sid, first, path = _rich(store)
    before = path.read_bytes()
    gets = ["/", "/?q=greeting", f"/s/{sid}", f"/s/{sid}/live", "/s/nope", "/favicon.ico"]
    for where in gets:
        status, headers, body = server.request("GET", where, auth=False)
        assert status == 401, where
        assert "Fixing" not in body and "greeting" not in body and "csrf" not in body
        assert "set-cookie" not in headers
    # Wrong credentials of every kind are refused the same way.
    for wrong in (
        {"Cookie": "harness_token=" + "x" * 43},
        {"Cookie": f"harness_token={server.token}x"},
        {"Authorization": "Bearer " + "x" * 43},
        {"Authorization": f"Basic {server.token}"},
    ):
        assert server.request("GET", "/", headers=wrong)[0] == 401, wrong
    assert server.request("GET", "/?token=" + "x" * 43, auth=False)[0] == 401
    # The CSRF token of a page (as a sandboxed command read it before) is not enough either.
    _, _, page = server.request("GET", f"/s/{sid}")
    csrf = _csrf(page)
    for action, form in [
        ("label", {"entry": first, "label": "pwned"}),
        ("name", {"name": "pwned"}),
        ("checkout", {"entry": first}),
        ("fork", {"entry": first, "position": "at"}),
    ]:
        status, _, _ = server.request(
            "POST",
            f"/s/{sid}/{action}",
            headers=server.same_origin(),
            form={"csrf": csrf, **form},
            auth=False,
        )
        assert status == 401, action
    assert path.read_bytes() == before
    assert len(list(store.rglob("*.jsonl"))) == 2  # no fork


def test_with_the_token_it_works_and_no_page_holds_it(server: Served, store: Path) -> None:
    sid, _, _ = _rich(store)
    assert server.token is not None
    # The printed URL: a redirect to the same place without the token, setting the cookie.
    status, headers, body = server.request("GET", f"/s/{sid}?token={server.token}", auth=False)
    # Under a random prefix the cookie is scoped to (review 10, finding 7).
    base = re.fullmatch(r"(/h-[A-Za-z0-9_-]{20,})/s/" + sid, headers["location"])
    assert status == 303 and base is not None, headers["location"]
    assert server.token not in headers["location"] and server.token not in body
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"harness_token={server.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert f"Path={base.group(1)}" in cookie.split("; ")
    kept = {"Cookie": cookie.split(";")[0]}
    for where in ["/", "/?q=greeting", f"/s/{sid}", "/s/hostile1234"]:
        status, headers, page = server.request("GET", where, headers=kept)
        assert status in (200, 404), where
        # Nowhere in a page (so in no link to another origin, no script, no form) and in no
        # header; the referrer policy keeps even the URL's path to this origin.
        assert server.token not in page, where
        assert all(server.token not in v for v in headers.values()), where
        assert headers["referrer-policy"] == "same-origin"
    assert "Fixing the greeting" in server.request("GET", "/", headers=kept)[2]
    bearer = {"Authorization": f"Bearer {server.token}"}
    assert server.request("GET", f"/s/{sid}", headers=bearer)[0] == 200
    # The Host check still holds on loopback (DNS rebinding), token or not.
    rebound = {**kept, "Host": f"evil.example:{server.port}"}
    assert server.request("GET", "/", headers=rebound)[0] == 421


def test_no_token_keeps_the_old_way_with_a_warning(store: Path) -> None:
    with serve(store, "--no-token") as server:
        assert server.token is None and server.url == f"http://127.0.0.1:{server.port}/"
        assert "warning: serving without a token" in server.printed
        assert "sandboxed command" in server.printed
        status, _, page = server.request("GET", "/")
        assert status == 200 and "Fixing the greeting" in page
    both = subprocess.run(
        [
            *(sys.executable, "-m", "harness.cli", "serve", "--root", str(store)),
            *("--port", "0", "--no-token", "--token", "t0ken-for-the-test-0123456789"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )
    assert both.returncode == 2 and "--no-token contradicts" in both.stderr


# --- the review's reproduction: a sandboxed command asks the server ------------------------


@pytest.mark.sandbox
@pytest.mark.skipif(
    not sandbox_available() or shutil.which("curl") is None,
    reason="bubblewrap cannot sandbox here, or curl is missing",
)
async def test_a_sandboxed_command_reads_nothing_through_the_server(
    server: Served, store: Path, tmp_path: Path
) -> None:
    base = f"http://127.0.0.1:{server.port}"
    commands = [
        f"curl -s -o /dev/null -w 'status=%{{http_code}}' {base}/",
        f"curl -s {base}/ | grep -c 'Fixing the greeting' || true",
        f"curl -s -o /dev/null -w 'status=%{{http_code}}' -X POST -H 'Origin: {base}' "
        f"-d csrf=x -d name=pwned {base}/s/nope/name",
    ]
    work = tmp_path / "work"
    work.mkdir()
    calls = [FauxToolCall(name="bash", arguments={"command": c}) for c in commands]
    session = await MemorySessionRepo().create(str(work))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[bash_tool()],
        cwd=work,
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        resources=None,
    )
    await harness.prompt("go")
    results = [m for m in session.build_context().messages if m.role == "toolResult"]
    texts = ["".join(b.text for b in m.content if isinstance(b, TextContent)) for m in results]
    assert all(isinstance(m.details, dict) and m.details["sandboxed"] for m in results), texts
    assert texts[0].strip() == "status=401", texts
    assert texts[1].strip() == "0", texts
    assert texts[2].strip() == "status=401", texts
