"""The ``harness serve`` application (Starlette): list sessions, show one, follow it live, and
label, name, check out and fork from the page.

Routes (every id from the browser is checked like the CLI's: a session id must match
``repos.validate_session_id`` and is looked up only under the store; an entry id must be an
entry of that session; nothing from a request is ever taken as a path):

* ``GET /``: the sessions, newest first, with filters (``q`` text, ``folder``, ``since`` and
  ``until`` days, ``model``);
* ``GET /s/{id}``: a session, drawn by the export's renderer (``harness._html``), with the
  actions' forms;
* ``GET /s/{id}/live?after=N``: server-sent events, one ``entry`` event (JSON: ``id``,
  ``parentId``, ``leaf``, ``html``) per entry after the first ``N``, as they are appended
  (the store's ``watch`` where it has one, else a ``refresh`` every 0.25 s);
* ``POST /s/{id}/label`` (``entry``, ``label``), ``/name`` (``name``), ``/checkout``
  (``entry``), ``/fork`` (``entry``, ``position`` ``at``/``before``): each needs the page's
  CSRF token and the same origin (:mod:`.guard`), then redirects (303) to the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, date
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from hooks import AssistantMessage, HarnessError
from repos import (
    EntryNotFoundError,
    ForkPosition,
    InvalidSessionIdError,
    MessageEntry,
    Session,
    SessionInfo,
    SessionNotFoundError,
    SessionRepo,
    validate_session_id,
)

from .._html.assets import SCRIPT, STYLE
from .._html.markdown import highlight_budget
from .._html.page import csp_hash, entry_html, session_parts
from .._providers.registry import ModelRegistry
from ..cli._escape import html_text as _e
from ..cli._render import short
from .guard import csrf_ok

__all__ = ["CSP", "WEB_SCRIPT", "WEB_STYLE", "make_app"]

POLL_S = 0.25
"""How often a live page's session is re-read when the store has no ``watch``."""
HEARTBEAT_S = 15.0
"""A comment line this often keeps an idle event stream open through proxies."""
MAX_FIELD = 4096
"""Longest form value accepted (a label, a name, an entry id)."""
MAX_MODEL_SCAN = 500
"""Sessions read whole to filter by model (the others are listed unfiltered, with a note)."""

WEB_STYLE = """
nav.crumbs { font-size: 12px; margin-bottom: .3rem; }
.actions { display: flex; flex-wrap: wrap; gap: .6rem; margin: .4rem 0; font-size: 12px; }
.actions form { display: flex; gap: .2rem; align-items: center; border: 1px solid var(--line);
  border-radius: 4px; padding: .2rem .4rem; }
.actions input { font-size: 12px; max-width: 10rem; }
#live-status { font-size: 12px; color: var(--muted); }
table.sessions { border-collapse: collapse; width: 100%; font-size: 13px; }
table.sessions td, table.sessions th { border-bottom: 1px solid var(--line); padding: .2rem .4rem;
  text-align: left; vertical-align: top; }
form.filters { display: flex; flex-wrap: wrap; gap: .4rem; margin: .4rem 0; }
.page { padding: .6rem 1rem; }
"""

WEB_SCRIPT = """
(function () {
  'use strict';
  function fill() {
    var id = '';
    try { id = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }
    if (id.indexOf('entry-') !== 0) { return; }
    document.querySelectorAll('input.entry-field').forEach(function (input) {
      input.value = id.slice(6);
    });
  }
  window.addEventListener('hashchange', fill);
  fill();
  var body = document.body;
  var url = body.getAttribute('data-live');
  if (!url || typeof EventSource === 'undefined') { return; }
  var status = document.getElementById('live-status');
  var after = body.getAttribute('data-count');
  var source = new EventSource(url + '?after=' + encodeURIComponent(after));
  source.addEventListener('open', function () { status.textContent = 'following live'; });
  source.addEventListener('error', function () { status.textContent = 'reconnecting...'; });
  source.addEventListener('entry', function (event) {
    var data = JSON.parse(event.data);
    if (document.getElementById('entry-' + data.id)) { return; }
    var holder = document.createElement('div');
    holder.innerHTML = data.html;
    var node = holder.firstElementChild;
    if (!node) { return; }
    var parent = data.parentId && document.getElementById('entry-' + data.parentId);
    if (parent && !(parent.nextElementSibling &&
        parent.nextElementSibling.classList.contains('entry'))) {
      parent.after(node);
    } else {
      document.getElementById('tree').appendChild(node);
    }
    if (data.leaf) {
      document.querySelectorAll('.entry.leaf').forEach(function (el) {
        if (el !== node) { el.classList.remove('leaf'); }
      });
    }
    body.setAttribute('data-count', String(data.count));
    if (window.harnessPage) { window.harnessPage.changed(); }
  });
})();
"""

CSP = (
    f"default-src 'none'; img-src data:; style-src {csp_hash(STYLE + WEB_STYLE)}; "
    f"script-src {csp_hash(SCRIPT + WEB_SCRIPT)}; connect-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
"""The Content-Security-Policy of every response: our script and style only (by hash)."""


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _document(
    title: str, body: str, *, attrs: str = "", script: bool = False, status: int = 200
) -> HTMLResponse:
    """A page of ours: ``body`` is HTML built here (session text escaped); the session page
    carries the script (other pages lack the controls it binds to)."""
    code = f"<script>{SCRIPT + WEB_SCRIPT}</script>" if script else ""
    return HTMLResponse(
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{STYLE + WEB_STYLE}</style></head>"
        f"<body{attrs}>{body}{code}</body></html>\n",
        status_code=status,
    )


def _root(request: Request) -> str:
    """The path the app is served under (the guard's secret prefix; empty without a token),
    for every link and redirect of a page."""
    return quote(str(request.scope.get("root_path", "")))


def _error_page(status: int, message: str, root: str = "") -> HTMLResponse:
    body = f'<div class="page"><nav class="crumbs"><a href="{root}/">Sessions</a></nav>'
    body += f"<h1>Error {status}</h1><p>{_e(message)}</p></div>"
    return _document(f"Error {status}", body, status=status)


def _session_id(request: Request) -> str:
    raw = str(request.path_params.get("sid", ""))
    try:
        return validate_session_id(raw)
    except InvalidSessionIdError as exc:
        raise _BadRequest(400, str(exc)) from None


def _field(form: dict[str, str], name: str, *, required: bool = True) -> str:
    value = form.get(name)
    if not isinstance(value, str) or (required and not value):
        raise _BadRequest(400, f"the form field {name!r} is missing")
    if len(value) > MAX_FIELD:
        raise _BadRequest(400, f"the form field {name!r} is longer than {MAX_FIELD} characters")
    return value


MAX_BODY = 64 * 1024
"""Largest form body accepted, in bytes."""


async def _form(request: Request) -> dict[str, str]:
    """A URL-encoded form (what the page's forms send), at most :data:`MAX_BODY` bytes and 8
    fields; a repeated field keeps its first value."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise _BadRequest(415, "forms are sent as application/x-www-form-urlencoded")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise _BadRequest(413, f"the form is larger than {MAX_BODY} bytes")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=8)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _BadRequest(400, f"the form cannot be read: {exc}") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        form.setdefault(name, value)
    return form


def _entry(session: Session, entry_id: str) -> str:
    if entry_id not in session:
        raise _BadRequest(404, f"no entry {entry_id!r} in session {session.id}")
    return entry_id


def _day(value: str, name: str) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise _BadRequest(400, f"{name} must be a day, YYYY-MM-DD") from None


def _models(session: Session) -> set[str]:
    return {
        f"{e.message.provider}/{e.message.model}"
        for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    }


def make_app(
    repo: SessionRepo,
    *,
    csrf_token: str,
    registry: ModelRegistry | None = None,
    title: str = "harness",
) -> Starlette:
    """The Starlette application over ``repo`` (any store). Put it behind
    :class:`harness.web.guard.Guard` (``harness.web.create_app`` does).

    Args:
        csrf_token: the token every form carries and every POST must return.
        registry: prices for the usage figures (default the package's).
        title: the list page's heading.
    """

    async def open_session(request: Request) -> Session:
        sid = _session_id(request)
        try:
            return await repo.open(sid)
        except SessionNotFoundError:
            raise _BadRequest(404, f"no session {sid!r}") from None

    async def index(request: Request) -> Response:
        root = _root(request)
        q = request.query_params.get("q", "").strip().lower()[:MAX_FIELD]
        folder = request.query_params.get("folder", "")[:MAX_FIELD]
        model = request.query_params.get("model", "").strip().lower()[:MAX_FIELD]
        since = _day(request.query_params.get("since", ""), "since")
        until = _day(request.query_params.get("until", ""), "until")
        infos = await repo.list()
        folders = sorted({i.cwd for i in infos})

        def keep(info: SessionInfo) -> bool:
            text = " ".join((info.id, info.name or "", info.first_message, info.cwd)).lower()
            day = info.modified.astimezone(UTC).date()
            return (
                (not q or q in text)
                and (not folder or info.cwd == folder)
                and (since is None or day >= since)
                and (until is None or day <= until)
            )

        shown = [i for i in infos if keep(i)]
        note = ""
        if model:
            scanned, kept = shown[:MAX_MODEL_SCAN], []
            for info in scanned:
                try:  # by the path list() found: a file's header id may not be a valid id
                    opened = await repo.open(info.path if info.path is not None else info.id)
                except HarnessError:
                    continue  # unreadable: it cannot be shown to name the model
                with opened as session:
                    if any(model in m.lower() for m in _models(session)):
                        kept.append(info)
            if len(shown) > MAX_MODEL_SCAN:
                note = f"only the newest {MAX_MODEL_SCAN} sessions were searched for the model"
            shown = kept
        shown.sort(key=lambda i: i.modified, reverse=True)
        options = "".join(
            f'<option value="{_e(f)}"{" selected" if f == folder else ""}>{_e(f)}</option>'
            for f in folders
        )
        form = (
            f'<form class="filters" method="get" action="{root}/">'
            f'<input name="q" type="search" placeholder="Search" value="{_e(q)}">'
            f'<select name="folder"><option value="">every folder</option>{options}</select>'
            f'<label>since <input name="since" type="date" value="{_e(since or "")}"></label>'
            f'<label>until <input name="until" type="date" value="{_e(until or "")}"></label>'
            f'<input name="model" placeholder="model" value="{_e(model)}">'
            '<button type="submit">Filter</button></form>'
        )
        rows = "".join(
            f'<tr data-session-id="{_e(i.id)}"><td><a href="{root}/s/{quote(i.id)}">'
            f"{_e(i.name or short(i.first_message, 60) or i.id)}</a></td>"
            f"<td><code>{_e(i.id[:8])}</code></td><td>{_e(i.cwd)}</td>"
            f"<td>{_e(i.modified.astimezone(UTC).strftime('%Y-%m-%d %H:%M'))}</td>"
            f"<td>{_e(i.message_count)}</td>"
            f"<td>{_e(short(i.parent_session or '', 30))}</td></tr>"
            for i in shown
        )
        body = (
            f'<div class="page"><h1>{_e(title)}</h1>'
            f'<p class="meta">{_e(len(shown))} of {_e(len(infos))} sessions'
            f"{_e('; ' + note) if note else ''}</p>{form}"
            '<table class="sessions"><thead><tr><th>session</th><th>id</th><th>folder</th>'
            "<th>last activity</th><th>messages</th><th>forked from</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></div>"
        )
        return _document(title, body)

    async def show(request: Request) -> Response:
        root = _root(request)
        with await open_session(request) as session:
            parts = await asyncio.to_thread(session_parts, session, registry=registry)
            count = len(session.entry_ids())
            sid = root + "/s/" + quote(session.id)
            name = session.name or ""
        hidden = f'<input type="hidden" name="csrf" value="{_e(csrf_token)}">'
        entry_field = (
            '<input class="entry-field" name="entry" placeholder="entry id" required '
            'aria-label="entry id">'
        )
        actions = (
            '<div class="actions">'
            f'<form method="post" action="{sid}/name" id="name-form">{hidden}'
            f'<input name="name" value="{_e(name)}" placeholder="name" aria-label="name">'
            '<button type="submit">Rename</button></form>'
            f'<form method="post" action="{sid}/label" id="label-form">{hidden}{entry_field}'
            '<input name="label" placeholder="label" aria-label="label">'
            '<button type="submit">Label</button></form>'
            f'<form method="post" action="{sid}/checkout" id="checkout-form">{hidden}'
            f'{entry_field}<button type="submit">Check out</button></form>'
            f'<form method="post" action="{sid}/fork" id="fork-form">{hidden}{entry_field}'
            '<select name="position" aria-label="fork position"><option value="at">at</option>'
            '<option value="before">before</option></select>'
            '<button type="submit">Fork</button></form></div>'
        )
        body = (
            f'<header class="top"><nav class="crumbs"><a href="{root}/">Sessions</a></nav>'
            f'{parts.header}{actions}<p id="live-status"></p></header>'
            f'<div class="layout">{parts.side}{parts.main}</div>'
        )
        attrs = f' data-live="{sid}/live" data-count="{count}"'
        return _document(parts.title, body, attrs=attrs, script=True)

    async def live(request: Request) -> Response:
        sid = _session_id(request)
        try:
            after = int(request.query_params.get("after", "0"))
        except ValueError:
            raise _BadRequest(400, "after must be a number") from None
        session = await open_session(request)

        async def stream() -> AsyncIterator[str]:
            sent = max(0, after)
            try:
                async with _changes(repo, sid) as wait:
                    yield ": following\n\n"
                    while True:
                        ids = session.entry_ids()
                        if len(ids) > sent:
                            leaf = session.leaf_id
                            on_path = set(session.path_ids(leaf))
                            for index in range(sent, len(ids)):
                                # rendered off the event loop: a slow entry must not
                                # stall every other request (review 12, finding 2)
                                event = await asyncio.to_thread(
                                    _entry_event, session, ids[index], leaf, on_path, index + 1
                                )
                                if event is not None:
                                    yield event
                            sent = len(ids)
                        if not await wait(session):
                            yield ": ping\n\n"
            finally:
                session.close()

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def post_action(
        request: Request, act: Callable[[Session, dict[str, str]], str | None]
    ) -> Response:
        form = await _form(request)
        if not csrf_ok(csrf_token, form.get("csrf")):
            raise _BadRequest(403, "the form's CSRF token is missing or wrong; reload the page")
        with await open_session(request) as session:
            where = act(session, form)
            target = f"{_root(request)}/s/{quote(session.id)}"
        return RedirectResponse(where or target, status_code=303)

    async def label(request: Request) -> Response:
        def act(session: Session, form: dict[str, str]) -> str:
            entry = _entry(session, _field(form, "entry"))
            leaf = session.leaf_id
            session.set_label(entry, _field(form, "label", required=False) or None)
            session.move_to(leaf)  # a label entry must not become the active leaf (as the CLI)
            return f"{_root(request)}/s/{quote(session.id)}#entry-{quote(entry)}"

        return await post_action(request, act)

    async def rename(request: Request) -> Response:
        def act(session: Session, form: dict[str, str]) -> None:
            session.set_name(_field(form, "name", required=False))

        return await post_action(request, act)

    async def checkout(request: Request) -> Response:
        def act(session: Session, form: dict[str, str]) -> str:
            entry = _entry(session, _field(form, "entry"))
            session.move_to(entry)
            return f"{_root(request)}/s/{quote(session.id)}#entry-{quote(entry)}"

        return await post_action(request, act)

    async def fork(request: Request) -> Response:
        form = await _form(request)
        if not csrf_ok(csrf_token, form.get("csrf")):
            raise _BadRequest(403, "the form's CSRF token is missing or wrong; reload the page")
        position_field = _field(form, "position")
        if position_field not in ("at", "before"):
            raise _BadRequest(400, "position must be 'at' or 'before'")
        position: ForkPosition = "at" if position_field == "at" else "before"
        with await open_session(request) as session:
            entry = _entry(session, _field(form, "entry"))
            source = session.id
        new = await repo.fork(source, entry_id=entry, position=position)
        with new:
            return RedirectResponse(f"{_root(request)}/s/{quote(new.id)}", status_code=303)

    async def failures(request: Request, exc: Exception) -> Response:
        if isinstance(exc, _BadRequest):
            return _error_page(exc.status, str(exc), _root(request))
        if isinstance(exc, EntryNotFoundError | SessionNotFoundError):
            return _error_page(404, str(exc), _root(request))
        if isinstance(exc, HarnessError):
            return _error_page(400, f"{exc.code}: {exc}", _root(request))
        raise exc

    def routed(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def wrapper(request: Request) -> Response:
            try:
                response: Response = await handler(request)
            except (_BadRequest, HarnessError) as exc:
                return await failures(request, exc)
            return response

        return wrapper

    return Starlette(
        routes=[
            Route("/", routed(index), methods=["GET"]),
            Route("/s/{sid}", routed(show), methods=["GET"]),
            Route("/s/{sid}/live", routed(live), methods=["GET"]),
            Route("/s/{sid}/label", routed(label), methods=["POST"]),
            Route("/s/{sid}/name", routed(rename), methods=["POST"]),
            Route("/s/{sid}/checkout", routed(checkout), methods=["POST"]),
            Route("/s/{sid}/fork", routed(fork), methods=["POST"]),
        ]
    )


def _entry_event(
    session: Session, entry_id: str, leaf: str | None, on_path: set[str], count: int
) -> str | None:
    kind = session.entry_type(entry_id)
    if kind in ("label", "leaf"):
        return None
    entry = session.get_entry(entry_id)
    with highlight_budget():  # an entry's code blocks, together (review 12, finding 2)
        html = entry_html(
            entry,
            on_path=entry_id in on_path,
            is_leaf=entry_id == leaf,
            label=session.get_label(entry_id),
        )
    data = {
        "id": entry_id,
        "parentId": entry.parent_id,
        "leaf": entry_id == leaf,
        "count": count,
        "html": html,
    }
    return f"event: entry\ndata: {json.dumps(data)}\n\n"


@contextlib.asynccontextmanager
async def _changes(repo: SessionRepo, sid: str) -> AsyncIterator[Callable[[Session], Any]]:
    """A function that waits until the session may have grown (True) or a heartbeat is due
    (False), and catches the session up: the store's ``watch`` where it has one, else a
    ``refresh`` every :data:`POLL_S` seconds."""
    watch = getattr(repo, "watch", None)
    if watch is None:

        async def poll(session: Session) -> bool:
            waited = 0.0
            while waited < HEARTBEAT_S:
                await asyncio.sleep(POLL_S)
                waited += POLL_S
                if await asyncio.to_thread(session.refresh):
                    return True
            return False

        yield poll
        return
    async with watch(sid) as changes:

        async def woken(session: Session) -> bool:
            try:
                await asyncio.wait_for(changes.next(), HEARTBEAT_S)
            except TimeoutError:
                return False
            await asyncio.to_thread(session.refresh)
            return True

        yield woken
