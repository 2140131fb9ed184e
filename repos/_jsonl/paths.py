"""Where session files live, pi-compatible: ``<root>/--<encoded cwd>--/<timestamp>_<id>.jsonl``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import platformdirs

from .._errors import InvalidSessionIdError, StorageError

__all__ = [
    "ENV_VAR",
    "absolute_cwd",
    "check_under_root",
    "default_root",
    "encode_cwd",
    "file_name",
    "session_path",
    "validate_session_id",
]

ENV_VAR = "HARNESS_SESSIONS_DIR"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_NOT_IN_STAMP = re.compile(r"[^0-9A-Za-z+-]")
_STAMP_LIMIT = 64


def default_root() -> Path:
    """``$HARNESS_SESSIONS_DIR`` if set, else ``<user data dir>/harness/sessions``.

    Raises:
        InvalidStoreUrlError: the variable names another kind of store (``sqlite:...``,
            ``postgresql://...``, ``memory:``; ``repos.open_store`` opens those) or a store URL
            with a typo: never a folder named after it.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        from .._stores import InvalidStoreUrlError, parse_store_url  # _stores imports this

        url = parse_store_url(env)
        if url.scheme != "jsonl":
            raise InvalidStoreUrlError(
                env, f"${ENV_VAR} names a {url.scheme} store, not a folder; use open_store()"
            )
        return Path(url.location).expanduser()
    return platformdirs.user_data_path("harness") / "sessions"


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is safe as part of a file name.

    Raises:
        InvalidSessionIdError: the whole id does not match ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``
            (so ``../x``, ``a/b``, ``a\\n`` and empty ids are refused before any file is
            touched), holds ``..``, or ends in ``.jsonl`` (a ref ending so is read as a path).
    """
    if (
        not isinstance(session_id, str)
        or not _ID.fullmatch(session_id)
        or ".." in session_id
        or session_id.endswith(".jsonl")
    ):
        raise InvalidSessionIdError(
            str(session_id),
            "ids are 1-128 of [A-Za-z0-9._-], start alphanumeric, no '..', no '.jsonl' ending",
        )
    return session_id


def absolute_cwd(cwd: str | None) -> str:
    """The cwd a session records: ``cwd`` made absolute, or the process's working directory.

    Raises:
        InvalidSessionIdError: the cwd holds a NUL or cannot be written as UTF-8 (a lone
            surrogate), so it can be neither a folder name nor JSON.
        StorageError: the process's working directory is gone.
    """
    if cwd is not None:
        _check_cwd(cwd)
    try:
        resolved = os.path.abspath(cwd) if cwd is not None else os.getcwd()
    except OSError as exc:
        raise StorageError.wrap(".", exc, "reading the working directory") from exc
    _check_cwd(resolved)
    return resolved


def _check_cwd(cwd: str) -> None:
    if "\x00" in cwd:
        raise InvalidSessionIdError(cwd, "a cwd cannot hold a NUL character")
    try:
        cwd.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidSessionIdError(
            cwd, "a cwd must be valid Unicode (no lone surrogates)"
        ) from None


def encode_cwd(cwd: str) -> str:
    """pi's folder name for a cwd: one leading separator dropped, ``/ \\ :`` become ``-``.

    Lossy (``/a/b-c`` and ``/a-b/c`` collide, pi #4877), so listing filters on the header's cwd.
    """
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + re.sub(r"[/\\:]", "-", trimmed) + "--"


def file_name(timestamp_iso: str, session_id: str) -> str:
    """``2025-12-09T00-52-54-397Z_<id>.jsonl``: pi's name (``:`` and ``.`` become ``-``).

    The timestamp is a header's, and a header may be anyone's (an imported transcript's, a
    copied session's): every character but ASCII letters, digits, ``+`` and ``-`` becomes
    ``-`` (an ISO-8601 time keeps pi's name) and it is cut to 64 characters, so the name is one
    file name (no ``/``, no ``..``, no ``_`` before the id's) whatever the header says.

    Raises:
        InvalidSessionIdError: ``session_id`` is not a valid id.
    """
    stamp = _NOT_IN_STAMP.sub("-", timestamp_iso[:_STAMP_LIMIT])
    return f"{stamp}_{validate_session_id(session_id)}.jsonl"


def session_path(root: Path, cwd: str, timestamp_iso: str, session_id: str) -> Path:
    """Where the session with these header fields lives: ``<root>/--<encoded cwd>--/<file
    name>``, a folder and a file of one name each under ``root``, whatever the header (anyone's)
    holds.

    Raises:
        InvalidSessionIdError: the id is not valid, or the cwd holds a NUL (no folder can be
            named after it).
    """
    folder = encode_cwd(cwd)
    if "\x00" in folder:
        raise InvalidSessionIdError(cwd, "a cwd cannot hold a NUL character")
    return root / folder / file_name(timestamp_iso, session_id)


def check_under_root(root: Path, path: Path) -> Path:
    """Resolve ``path`` and make sure it stays under ``root``.

    Raises:
        InvalidSessionIdError: the resolved path escapes the root (symlinks included), or it
            cannot be resolved (a NUL byte, a symlink loop).
    """
    try:
        resolved = path.resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # NUL byte, symlink loop (3.11: Runtime)
        raise InvalidSessionIdError(str(path), f"cannot be resolved: {exc}") from None
    if not resolved.is_relative_to(root.resolve()):
        raise InvalidSessionIdError(str(path), f"resolves outside the sessions root {root}")
    return resolved
