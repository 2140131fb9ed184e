"""What ``JsonlSessionRepo.list`` learnt of each file, kept between processes.

A first ``list`` in a fresh process would otherwise read every file (pi parses every line of
every file, every time). The cache holds, per file path, the file's identity (inode, size,
mtime) when it was summarised and the summary; a file whose identity changed is summarised
again (only what was appended, when it grew). The cache is an optimisation only: a missing,
unreadable, damaged or foreign cache file is ignored and rewritten, and a write that fails is
logged, never raised.

Location: ``$HARNESS_CACHE_DIR`` if set, else ``platformdirs.user_cache_path("harness")``; one
file per sessions root, ``list-<hash of the root>.json``.
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

__all__ = ["CACHE_ENV", "cache_file", "load", "save"]

log = logging.getLogger("repos")

CACHE_ENV = "HARNESS_CACHE_DIR"
_VERSION = 1


def cache_file(root: Path) -> Path:
    """The cache file of the sessions folder ``root``."""
    env = os.environ.get(CACHE_ENV)
    folder = Path(env).expanduser() if env else platformdirs.user_cache_path("harness")
    digest = hashlib.blake2b(str(root.resolve()).encode(), digest_size=8).hexdigest()
    return folder / f"list-{digest}.json"


def load(path: Path, root: Path) -> dict[str, dict[str, Any]]:
    """The entries of the cache file, by file path; empty when it cannot be used."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if (
        not isinstance(data, dict)
        or data.get("version") != _VERSION
        or data.get("root") != str(root.resolve())
        or not isinstance(data.get("files"), dict)
    ):
        return {}
    return {k: v for k, v in data["files"].items() if isinstance(v, dict)}


def save(path: Path, root: Path, files: dict[str, dict[str, Any]]) -> None:
    """Replace the cache file atomically (a reader sees the old file or the new one)."""
    body = orjson.dumps({"version": _VERSION, "root": str(root.resolve()), "files": files})
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
