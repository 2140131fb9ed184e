"""Signed approvals: a session's ``permission`` entries count only if this user's harness wrote
them.

A session file is untrusted (docs/security.md): anyone can write a ``permission`` entry into
one and mail it. So every approve-always the harness records carries an HMAC-SHA256 over what
it approves, keyed by a per-user secret (``approvals.key`` in the user config folder, 32 random
bytes, mode 0600, created on first use), and a reopened session honours only entries whose
signature checks. Nothing else has the key: the file is not in any session, export or
settings file, and a key file others may read (group or other permission bits, another owner)
is refused and logged, because anyone who can read it could forge approvals.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import logging
import os
import secrets
import stat
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

import orjson

from hooks import JSONValue

from .folders import user_folder

__all__ = ["APPROVAL_KEY_FILE", "ApprovalSigner", "approval_key_path"]

APPROVAL_KEY_FILE = "approvals.key"
"""The per-user secret's file name, in ``platformdirs.user_config_path("harness")``."""

_KEY_BYTES = 32
_VERSION = "harness-approval/1"
_log = logging.getLogger("harness")


def approval_key_path() -> Path:
    """``approvals.key`` in the user config folder (``$XDG_CONFIG_HOME/harness`` on Linux)."""
    return user_folder("config") / APPROVAL_KEY_FILE


def _message(session_id: str, data: Mapping[str, JSONValue]) -> bytes:
    """What a signature covers: the session and every field that says what is approved."""
    fields = [
        _VERSION,
        session_id,
        data.get("operationKey"),
        data.get("decision"),
        data.get("toolName"),
        data.get("scope"),
        data.get("depth"),
    ]
    return orjson.dumps(fields)


def _entry_message(purpose: str, session_id: str, data: Mapping[str, JSONValue]) -> bytes:
    fields = {k: v for k, v in data.items() if k != "signature"}
    return orjson.dumps([purpose, session_id, fields], option=orjson.OPT_SORT_KEYS)


class ApprovalSigner:
    """Signs and checks ``permission`` entries with the per-user secret.

    Args:
        key_path: the secret's file (default :func:`approval_key_path`, looked up at each use,
            so ``XDG_CONFIG_HOME`` set later applies).
    """

    def __init__(self, key_path: Path | None = None) -> None:
        self._key_path = key_path

    def sign(self, session_id: str, data: Mapping[str, JSONValue]) -> str | None:
        """The signature of ``data`` (the entry's fields) in ``session_id``, creating the
        secret if there is none; None when no usable secret can be had (logged): the approval
        then holds for this harness only and is not honoured after a reopen."""
        key = self._key(create=True)
        if key is None:
            return None
        return hmac.new(key, _message(session_id, data), hashlib.sha256).hexdigest()

    def verify(self, session_id: str, data: Mapping[str, JSONValue]) -> bool:
        """Whether ``data["signature"]`` was made by :meth:`sign` with this user's secret."""
        signature = data.get("signature")
        if not isinstance(signature, str):
            return False
        key = self._key(create=False)
        if key is None:
            return False
        expected = hmac.new(key, _message(session_id, data), hashlib.sha256).hexdigest()
        return _same(expected, signature)

    def sign_entry(
        self, purpose: str, session_id: str, data: Mapping[str, JSONValue]
    ) -> str | None:
        """The signature of every field of ``data`` but ``signature`` (canonical JSON, keys
        sorted), for ``purpose`` (a versioned name such as ``harness-pending/1``, so a
        signature made for one kind of entry never checks for another) in ``session_id``.
        None when no usable secret can be had (logged), as for :meth:`sign`."""
        key = self._key(create=True)
        if key is None:
            return None
        return hmac.new(key, _entry_message(purpose, session_id, data), hashlib.sha256).hexdigest()

    def verify_entry(self, purpose: str, session_id: str, data: Mapping[str, JSONValue]) -> bool:
        """Whether ``data["signature"]`` was made by :meth:`sign_entry` with this user's
        secret, for this purpose and session, over exactly these fields."""
        signature = data.get("signature")
        if not isinstance(signature, str):
            return False
        key = self._key(create=False)
        if key is None:
            return False
        try:
            message = _entry_message(purpose, session_id, data)
        except TypeError:  # not JSON (a float NaN, a huge int): nothing signed it
            return False
        expected = hmac.new(key, message, hashlib.sha256).hexdigest()
        return _same(expected, signature)

    def _key(self, *, create: bool) -> bytes | None:
        path = self._key_path or approval_key_path()
        try:
            return _read_key(path)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as exc:
            _log.warning("approvals key %r refused: %s", str(path), exc.strerror or exc)
            return None
        try:
            return _create_key(path)
        except OSError as exc:
            _log.warning("cannot create the approvals key %r: %s", str(path), exc)
            return None


def _read_key(path: Path) -> bytes:
    """The key in ``path``; OSError when it is not a private regular file of this user."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise OSError(errno.EPERM, "others may read it (it must be yours, mode 0600)")
        raw = os.read(fd, 4 * _KEY_BYTES + 1)
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise OSError(errno.EINVAL, "not a hex key") from None
    if len(key) < _KEY_BYTES:
        raise OSError(errno.EINVAL, f"shorter than {_KEY_BYTES} bytes")
    return key


def _create_key(path: Path) -> bytes:
    """Write a new key to ``path`` (mode 0600), or read the one another process just wrote."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_bytes(_KEY_BYTES)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.hex() + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(tmp, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            return _read_key(path)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
    return key


def _same(expected: str, signature: str) -> bool:
    """``signature`` (a session file's, untrusted) equals ``expected`` (lowercase hex), in
    constant time. Compared as UTF-8 bytes: ``hmac.compare_digest`` raises on a ``str`` with
    non-ASCII characters, which crashed every reader of such a file (review 5, finding 24)."""
    return hmac.compare_digest(expected.encode(), signature.encode("utf-8", "surrogatepass"))
