"""``harness serve`` over real HTTP (a subprocess on a loopback port): what a hostile request,
id, Host, origin or session file can never make it do, and that the list, the session page and
the actions work. The same server in a real browser: ``test_web_browser.py``."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_sessions import PAYLOADS_HTML, write_session
from rich_session import SEARCH_WORD, build_rich_session
from web_server import REPO_ROOT, Served, serve

from repos import open_session


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("web")
    asyncio.run(build_rich_session(folder / "sessions", folder / "work"))
    payload = " ".join(PAYLOADS_HTML.values())
    write_session(folder / "sessions" / "--tmp--" / "2025_hostile.jsonl", payload)
    return folder / "sessions"


@pytest.fixture(scope="module")
def server(store: Path) -> Iterator[Served]:
    with serve(store) as served:
        yield served


def _rich_id(store: Path) -> str:
    [path] = [p for p in store.rglob("*.jsonl") if "hostile" not in p.name]
    with open_session(path) as session:
        return session.id


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_the_list_and_its_filters(server: Served, store: Path) -> None:
    status, headers, page = server.request("GET", "/")
    assert status == 200 and "Fixing the greeting" in page
    assert "script-src 'sha256-" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    _, _, found = server.request("GET", "/?q=greeting")
    assert "Fixing the greeting" in found and "hostile" not in found.split("<tbody>")[1]
    _, _, none = server.request("GET", "/?model=no-such-model")
    assert "<tbody></tbody>" in none
    _, _, by_model = server.request("GET", "/?model=faux-1")
    assert "Fixing the greeting" in by_model
    _, _, future = server.request("GET", "/?since=2999-01-01")
    assert "<tbody></tbody>" in future
    assert server.request("GET", "/?since=tomorrow")[0] == 400


def test_the_session_page_is_the_renderer(server: Served, store: Path) -> None:
    sid = _rich_id(store)
    status, _, page = server.request("GET", f"/s/{sid}")
    assert status == 200
    assert "<strong>greeting</strong>" in page and '<span class="k">def</span>' in page
    assert "Whole tree:" in page and 'id="stats"' in page and 'id="side"' in page
    assert 'id="label-form"' in page and 'id="fork-form"' in page
    assert SEARCH_WORD in page


@pytest.mark.parametrize(
    "path",
    [
        "/s/..%2F..%2Fetc%2Fpasswd",
        "/s/%2Fetc%2Fpasswd",
        "/s/..",
        "/s/x.jsonl",
        "/s/%2e%2e",
        "/s/a%00b",
        "/s/" + "a" * 200,
        "/s/..%2F..%2Fetc%2Fpasswd/live",
    ],
)
def test_a_hostile_session_id_is_refused(server: Served, path: str) -> None:
    status, _, page = server.request("GET", path)
    assert status in (400, 404), (status, page)
    assert "root:" not in page


def test_a_hostile_entry_id_is_refused_and_changes_nothing(server: Served, store: Path) -> None:
    sid = _rich_id(store)
    _, _, page = server.request("GET", f"/s/{sid}")
    [path] = [p for p in store.rglob(f"*{sid}.jsonl")]
    before = path.read_bytes()
    for entry in ("../../etc/passwd", "", "x" * 5000):
        status, _, _ = server.request(
            "POST",
            f"/s/{sid}/label",
            headers=server.same_origin(),
            form={"csrf": _csrf(page), "entry": entry, "label": "x"},
        )
        assert status in (400, 404)
    assert path.read_bytes() == before


def test_a_foreign_host_is_refused(server: Served) -> None:
    # DNS rebinding: a hostile name resolving to 127.0.0.1 makes the page same-origin.
    status, _, body = server.request("GET", "/", headers={"Host": f"evil.example:{server.port}"})
    assert status == 421 and "Fixing" not in body


def test_a_state_change_from_another_origin_fails(server: Served, store: Path) -> None:
    sid = _rich_id(store)
    _, _, page = server.request("GET", f"/s/{sid}")
    [path] = [p for p in store.rglob(f"*{sid}.jsonl")]
    before = path.read_bytes()
    token = _csrf(page)
    form = {"csrf": token, "name": "pwned"}
    cases = [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {},  # neither Origin nor Referer
        {"Referer": "http://evil.example/page"},
        {"Origin": server.base, "Sec-Fetch-Site": "cross-site"},
    ]
    for headers in cases:
        status, _, _ = server.request("POST", f"/s/{sid}/name", headers=headers, form=form)
        assert status == 403, headers
    status, _, _ = server.request(
        "POST", f"/s/{sid}/name", headers=server.same_origin(), form={"name": "pwned"}
    )
    assert status == 403  # same origin, no CSRF token
    status, _, _ = server.request(
        "POST",
        f"/s/{sid}/name",
        headers=server.same_origin(),
        form={"csrf": "wrong", "name": "pwned"},
    )
    assert status == 403
    assert path.read_bytes() == before


def test_same_origin_actions_change_the_store(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    path = Path(asyncio.run(build_rich_session(root, tmp_path / "work")))
    with open_session(path) as session:
        sid = session.id
        first = session.get_branch()[0].id
        leaf = session.leaf_id
    with serve(root) as server:
        _, _, page = server.request("GET", f"/s/{sid}")
        token = _csrf(page)
        same = server.same_origin()
        status, headers, _ = server.request(
            "POST",
            f"/s/{sid}/label",
            headers=same,
            form={"csrf": token, "entry": first, "label": "from the web"},
        )
        assert status == 303 and headers["location"].endswith(f"#entry-{first}")
        server.request("POST", f"/s/{sid}/name", headers=same, form={"csrf": token, "name": "N"})
        status, headers, _ = server.request(
            "POST",
            f"/s/{sid}/fork",
            headers=same,
            form={"csrf": token, "entry": first, "position": "at"},
        )
        assert status == 303
        fork_id = headers["location"].removeprefix("/s/")
        server.request(
            "POST", f"/s/{sid}/checkout", headers=same, form={"csrf": token, "entry": first}
        )
    with open_session(path) as session:
        assert session.labels[first] == "from the web" and session.name == "N"
        assert session.leaf_id == first and leaf != first
    [fork] = [p for p in root.rglob(f"*_{fork_id}.jsonl")]
    with open_session(fork) as forked:
        assert forked.header.parent_session == str(path) and forked.leaf_id is not None


def _serve_refused(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={k: v for k, v in os.environ.items() if k != "HARNESS_SERVE_TOKEN"} | (env or {}),
        timeout=60,
        check=False,
    )


def test_a_non_loopback_bind_without_a_token_is_refused(store: Path) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.1", "example.com"):
        done = _serve_refused("--root", str(store), "--host", host, "--no-token")
        assert done.returncode == 1, done.stderr
        assert "error[serve_refused]" in done.stderr and "without a token" in done.stderr
    weak = _serve_refused("--root", str(store), "--host", "0.0.0.0", "--token", "short")
    assert weak.returncode == 1 and "16 to 256" in weak.stderr


def test_with_a_token_every_request_needs_it(store: Path) -> None:
    token = "t0ken-for-the-test-0123456789"
    with serve(store, "--host", "0.0.0.0", "--token", token) as server:
        assert server.url.endswith(f"?token={token}")
        status, _, body = server.request("GET", "/", auth=False)
        assert status == 401 and "Fixing" not in body
        assert server.request("GET", "/", headers={"Authorization": "Bearer nope"})[0] == 401
        ok = server.request("GET", "/", headers={"Authorization": f"Bearer {token}"})
        assert ok[0] == 200 and "Fixing the greeting" in ok[2]
        status, headers, _ = server.request("GET", f"/?token={token}")
        assert status == 303 and re.fullmatch(r"/h-[A-Za-z0-9_-]{20,}/", headers["location"])
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        with_cookie = server.request("GET", "/", headers={"Cookie": cookie.split(";")[0]})
        assert with_cookie[0] == 200
        assert server.request("GET", "/?token=wrong")[0] == 401
        # Review 5, finding 9: the token URL redirected `//evil.example/x` to another host.
        for path in ("//evil.example/x", "///evil.example", "/%2F%2Fevil.example", "/\\evil"):
            status, headers, _ = server.request("GET", f"{path}?token={token}")
            assert status == 303 and not headers["location"].startswith(("//", "/\\")), path
