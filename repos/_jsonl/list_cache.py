"""What ``JsonlSessionRepo.list`` learnt of each file, kept between processes.

A first ``list`` in a fresh process would otherwise read every file (pi parses every line of
every file, every time). The cache holds, per file, the file's identity (inode, size, mtime)
when it was summarised and the summary; a file whose identity changed is summarised again
(only what was appended, when it grew). The cache is an optimisation only: a missing,
unreadable, damaged or foreign cache file is ignored and rewritten, and a write that fails is
logged, never raised.

Location: ``$HARNESS_CACHE_DIR`` if set, else ``platformdirs.user_cache_path("harness")``; one
file per sessions root, ``list-<hash of the root>.json``. Layout (compact, so that a thousand
sessions load in a few milliseconds): ``{"version": 2, "root": <resolved root>, "files":
{<path relative to the root>: [<row>]}}``; what a row holds is the caller's business.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import platformdirs

__all__ = ["CACHE_ENV", "VERSION", "cache_file", "load", "save"]

log = logging.getLogger("repos")

CACHE_ENV = "HARNESS_CACHE_DIR"
VERSION = 2
"""Of the layout; a file of another version is ignored (and replaced by the next save)."""


def cache_file(root: Path) -> Path:
    """The cache file of the sessions folder ``root``."""
    env = os.environ.get(CACHE_ENV)
    folder = Path(env).expanduser() if env else platformdirs.user_cache_path("harness")
    digest = hashlib.blake2b(str(root.resolve()).encode(), digest_size=8).hexdigest()
    return folder / f"list-{digest}.json"


def load(path: Path, root: Path) -> dict[str, list[Any]]:
    """The rows of the cache file, by file path relative to ``root``; empty when the file is
    missing, unreadable, not JSON, of another version or of another root. Rows that are not
    lists are dropped; the caller checks what is in each."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if (
        not isinstance(data, dict)
        or data.get("version") != VERSION
        or data.get("root") != str(root.resolve())
        or not isinstance(data.get("files"), dict)
    ):
        return {}
    return {k: v for k, v in data["files"].items() if type(v) is list}


def save(path: Path, root: Path, files: dict[str, list[Any]]) -> None:
    """Replace the cache file atomically (a reader sees the old file or the new one).

    ``files``: rows by file path relative to ``root``. A row JSON cannot hold (an integer past
    64 bits, from a file's odd timestamp; a file name that is not UTF-8) is left out: its file
    is read again next time. A
    failure to write is logged as a warning, never raised.
    """
    head = {"version": VERSION, "root": str(root.resolve())}
    try:
        body = orjson.dumps({**head, "files": files})
    except orjson.JSONEncodeError:
        kept = {k: v for k, v in files.items() if _encodes(k, v)}
        try:
            body = orjson.dumps({**head, "files": kept})
        except orjson.JSONEncodeError as exc:  # a root whose name is not UTF-8
            log.warning("not writing the list cache of %r: %s", str(root), exc)
            return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".list-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("could not write the list cache %s: %s", path, exc)


def _encodes(name: str, row: list[Any]) -> bool:
    try:
        orjson.dumps({name: row})  # the name too: a file name that is not UTF-8 cannot be a key
    except orjson.JSONEncodeError as exc:
        log.warning("not caching what list learnt of %r: %s", name, exc)
        return False
    return True
