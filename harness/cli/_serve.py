"""``harness serve``: browse the sessions of a store in a web browser (the ``web`` extra)."""

from __future__ import annotations

import click

from harness import load_registry

from ._escape import echo

__all__ = ["serve"]


@click.command()
@click.option(
    "--root",
    "root",
    metavar="STORE",
    default=None,
    help="The sessions: a folder, jsonl:DIR, sqlite:PATH or postgresql://... "
    "(default: $HARNESS_SESSIONS_DIR, else the user data folder).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback needs a token (not --no-token).",
)
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    envvar="HARNESS_SERVE_TOKEN",
    help="The token every request must carry (16+ of A-Z a-z 0-9 . _ ~ -; default "
    "$HARNESS_SERVE_TOKEN, else a new random one at each start, in the URL printed).",
)
@click.option(
    "--no-token",
    is_flag=True,
    help="Serve without a token, on loopback only: then any process of this machine, a "
    "sandboxed command too, can read every session and act on it.",
)
def serve(root: str | None, host: str, port: int, token: str | None, no_token: bool) -> None:
    """Serve a web app listing the sessions (search and filters), showing each one (the
    export's page), following a running one live, and labelling, naming, checking out and
    forking from the page. Every request needs a token, new at each start: open the URL
    printed (with ?token=...), which keeps it in a cookie. Ctrl-C stops it."""
    from harness import web  # raises MissingExtraError naming the extra when it is missing
    from repos import JsonlSessionRepo

    token = token or None
    if no_token and token is not None:
        raise click.UsageError("--no-token contradicts --token (or $HARNESS_SERVE_TOKEN)")
    if not no_token and token is None:
        token = web.new_secret()
    web.check_bind(host, token)  # before the store is opened or anything bound
    if no_token:
        echo(
            "warning: serving without a token (--no-token): any process of this machine, a "
            "sandboxed command too, can read every session and act on it",
            err=True,
        )
    repo = web.open_store(root if root is not None else JsonlSessionRepo().root)

    def ready(url: str) -> None:
        echo(f"serving {url}  (Ctrl-C stops)", err=True)

    try:
        web.serve(
            repo,
            host=host,
            port=port,
            token=token,
            no_token=no_token,
            registry=load_registry().registry,
            on_ready=ready,
        )
    except KeyboardInterrupt:
        pass
    finally:
        close = getattr(repo, "close", None)
        if close is not None:
            close()
