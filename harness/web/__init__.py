"""``harness serve``: a local web app to browse sessions, follow one live and act on it.

Installed with the ``web`` extra (``pip install 'jsonl-harness[web]'``: Starlette and
uvicorn); importing this package without it raises :class:`~harness.MissingExtraError`.

It serves on 127.0.0.1 by default and refuses any other address without a token
(:func:`check_bind`), because session files hold secrets; with a token every request must carry
it (:mod:`.guard`). :func:`serve` makes a new token at every start unless told ``no_token``:
a loopback port is open to every process of the machine, a sandboxed command's too (it shares
the network namespace), and the session store it cannot read on disk would be read over
HTTP. What a hostile page, request, id, local process or session file can never make it do is
in docs/security.md ("The web app").
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._errors import MissingExtraError

try:
    import starlette  # noqa: F401
    import uvicorn
except ImportError as exc:  # pragma: no cover - exercised by the install tests
    raise MissingExtraError("harness serve", "web") from exc

from hooks import HarnessError
from repos import JsonlSessionRepo, SessionRepo, SqliteSessionRepo

from .._providers.registry import ModelRegistry
from .app import CSP, make_app
from .guard import Guard, is_loopback, new_secret

__all__ = [
    "ServeRefusedError",
    "check_bind",
    "create_app",
    "is_loopback",
    "new_secret",
    "open_store",
    "serve",
]

_TOKEN = re.compile(r"[A-Za-z0-9._~-]{16,256}")


class ServeRefusedError(HarnessError):
    """``harness serve`` will not start (code ``serve_refused``): a non-loopback address
    without a token, or a token too weak or of the wrong shape."""

    code = "serve_refused"


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve sessions beyond this machine without a token.

    Raises:
        ServeRefusedError: ``host`` is not loopback and ``token`` is None, or ``token`` is not
            16-256 of ``[A-Za-z0-9._~-]``.
    """
    if token is not None and not _TOKEN.fullmatch(token):
        raise ServeRefusedError(
            "the token must be 16 to 256 characters of A-Z a-z 0-9 . _ ~ - "
            "(e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    if token is None and not is_loopback(host):
        raise ServeRefusedError(
            f"refusing to serve sessions on {host}, which is not a loopback address, without "
            "a token: session files hold secrets. Drop --no-token (a token is made at each "
            "start), or serve on 127.0.0.1"
        )


def open_store(spec: str | Path) -> SessionRepo:
    """The store a ``--root`` names: ``jsonl:DIR``, ``sqlite:PATH``, ``postgresql://...``, or
    a folder of JSONL sessions.

    Raises:
        ServeRefusedError: a folder or database file that does not exist.
        MissingExtraError: ``postgresql://`` without the ``postgres`` extra.
    """
    text = str(spec)
    scheme, sep, rest = text.partition(":")
    if sep and scheme in ("postgresql", "postgres"):
        try:
            from repos.postgres import PostgresSessionRepo
        except ImportError as exc:
            raise MissingExtraError("a PostgreSQL store", "postgres") from exc
        return PostgresSessionRepo(text)
    if sep and scheme == "sqlite":
        path = Path(rest).expanduser()
        if not path.is_file():
            raise ServeRefusedError(f"no database file {path}")
        return SqliteSessionRepo(path)
    folder = Path(rest if sep and scheme == "jsonl" else text).expanduser()
    if not folder.is_dir():
        raise ServeRefusedError(f"the sessions root {folder} does not exist")
    return JsonlSessionRepo(folder)


def create_app(
    repo: SessionRepo,
    *,
    port: int,
    host: str = "127.0.0.1",
    token: str | None = None,
    registry: ModelRegistry | None = None,
) -> Guard:
    """The ASGI application ``harness serve`` runs: the routes of :mod:`.app` behind the
    :class:`.guard.Guard` (Host check, token, same-origin POSTs, security headers).

    Args:
        port: the port it is served on (Host headers must name it).
        host: the address bound.
        token: every request must carry it (None: none, loopback Hosts only; then every
            process of the machine can read the store through it).

    Raises:
        ServeRefusedError: as :func:`check_bind`.
    """
    check_bind(host, token)
    app = make_app(repo, csrf_token=new_secret(), registry=registry)
    return Guard(app, port=port, bound=host, token=token, csp=CSP)


def serve(
    repo: SessionRepo,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    no_token: bool = False,
    registry: ModelRegistry | None = None,
    on_ready: Callable[[str], Any] | None = None,
) -> None:
    """Serve ``repo`` until interrupted (Ctrl-C). The address is checked before anything is
    bound; ``port=0`` picks a free port. ``on_ready(url)`` is called once listening, with the
    URL to open (carrying ``?token=`` when there is a token).

    Args:
        token: every request must carry it. None: a new one (:func:`.guard.new_secret`, 256
            bits), known only through the URL ``on_ready`` is given.
        no_token: serve without any token (loopback only): every process of this machine,
            a sandboxed command too, can then read every session of ``repo`` and act on it.

    Raises:
        ServeRefusedError: as :func:`check_bind`; ``token`` with ``no_token``.
        OSError: the address cannot be bound.
    """
    if no_token and token is not None:
        raise ServeRefusedError("a token and no_token contradict each other")
    if token is None and not no_token:
        token = new_secret()
    check_bind(host, token)
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((bare, port))
    sock.listen(128)
    sock.setblocking(False)
    bound_port = sock.getsockname()[1]
    app = create_app(repo, port=bound_port, host=bare, token=token, registry=registry)
    shown = "127.0.0.1" if bare in ("0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
    url = f"http://{shown}:{bound_port}/" + (f"?token={token}" if token else "")
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=2,
        lifespan="off",
        proxy_headers=False,
    )
    server = uvicorn.Server(config)

    # The socket listens already: a browser opened now waits in its backlog, not refused.
    if on_ready is not None:
        on_ready(url)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
