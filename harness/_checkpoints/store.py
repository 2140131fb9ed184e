"""The content-addressed store of checkpointed file contents.

One folder shared by every session beside it: ``objects/<2 hex>/<62 hex>``, each blob named by
the SHA-256 of its bytes, so a content stored twice takes the room of one. Blobs are written
under their final name, created exclusively, with mode 0600 in a folder of mode 0700: they hold
the user's files. Reads go through ``harness._fs`` (a regular file beneath the store, at most
the file cap) and are checked against their name, so a damaged or swapped blob is never
restored.

Processes share a store: ``.lock`` (opened without following a symlink, a regular file only)
is held shared by each put and exclusively by gc while it removes a blob, and gc removes a
blob only if its mtime is still the one it listed, so a content a running session just stored
again is never removed under it.

A content a tool call changed is stored after the call (``capture.py``): its entry names a
*ref* then, a random 64-hex name, and ``refs/<2 hex>/<62 hex>`` (the blob's digest, 64
characters) is written once the blob is: a ref with no file names a content that was never
stored (the process ended first), never a blob that is not there.

The store grows with every change a session records; :meth:`CheckpointStore.gc` bounds it:
blobs no session references are removed, then, while the store is larger than its cap, the
least recently stored or reused blobs, referenced or not (their checkpoints become
unavailable, and a rewind that needs them says so).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Final

from attrs import frozen
from platformdirs import user_data_path

from repos import JsonlSessionRepo, SessionRepo

from .._fs import FileRefusedError, beneath, open_parent, read_regular

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILE_BYTES",
    "CheckpointStore",
    "GcReport",
    "is_digest",
]

DEFAULT_MAX_BYTES: Final = 2 * 1024**3
"""The store's default cap, 2 GiB, which :meth:`CheckpointStore.gc` brings it under."""
DEFAULT_MAX_FILE_BYTES: Final = 64 * 1024**2
"""The largest file a checkpoint stores, 64 MiB; a larger one is recorded as missed."""
STORE_FOLDER: Final = ".checkpoints"
"""The store's folder inside a JSONL sessions root."""

REWIND_KEY_BYTES: Final = 32
"""The size of the store's ``.rewind-key``, the secret a rewind tags its temporary files with."""
LOCK_WAIT_S: Final = 30.0
"""The longest a put or gc waits for the store's ``.lock`` (a gc removing a blob, puts)."""
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")
_log = logging.getLogger("harness")


@contextlib.contextmanager
def _flocked(fd: int, kind: int) -> Iterator[None]:
    """Hold ``flock(kind)`` on ``fd``, waiting at most :data:`LOCK_WAIT_S`.

    Raises:
        TimeoutError: the lock stayed taken that long.
    """
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the checkpoint store stayed locked {LOCK_WAIT_S:.0f} s"
                ) from None
            time.sleep(0.005)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def is_digest(value: object) -> bool:
    """True for a blob name: 64 lowercase hex characters (a SHA-256)."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


@frozen(kw_only=True)
class GcReport:
    """What :meth:`CheckpointStore.gc` did. Sizes in bytes.

    ``removed`` counts blobs no session referenced; ``evicted`` referenced ones removed to get
    under the cap (their checkpoints can no longer be restored); ``kept`` what is left."""

    removed: int
    removed_bytes: int
    evicted: int
    evicted_bytes: int
    kept: int
    kept_bytes: int


class CheckpointStore:
    """Blobs of file contents, by SHA-256, in the folder ``root`` (created on first write).

    Args:
        root: the store's folder, the user's (:meth:`default`, :meth:`for_repo`): never one
            a session file's place or content chose.
        max_bytes: the cap :meth:`gc` brings the store under.
        max_file_bytes: the largest content :meth:`put` takes; checkpoints record a larger
            file as missed instead.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        if max_bytes < 0 or max_file_bytes < 0:
            raise ValueError("max_bytes and max_file_bytes must be >= 0")
        self._root = Path(os.path.abspath(root))
        self._objects = self._root / "objects"
        self._refs = self._root / "refs"
        self.max_bytes = max_bytes
        self.max_file_bytes = max_file_bytes
        self._made = False
        self._key: bytes | None = None

    @classmethod
    def default(cls) -> CheckpointStore:
        """The user's own store: ``checkpoints`` in the user data folder (``platformdirs``).
        Never a folder beside a session's file: a downloaded session would bring its own
        store, and with it the contents a rewind writes (docs/security.md)."""
        return cls(user_data_path("harness") / "checkpoints")

    @classmethod
    def for_repo(cls, repo: SessionRepo) -> CheckpointStore:
        """The store of the sessions in ``repo`` (the store the user chose: ``--root``, the
        environment, the default): ``.checkpoints`` in a JSONL store's root, shared by its
        sessions; :meth:`default` for a database or memory store. Wherever a session's file
        lies, its contents go here."""
        if isinstance(repo, JsonlSessionRepo):
            return cls(Path(os.path.abspath(repo.root)) / STORE_FOLDER)
        return cls.default()

    @property
    def root(self) -> Path:
        return self._root

    def __repr__(self) -> str:
        return f"CheckpointStore({str(self._root)!r})"

    def _rel(self, digest: str) -> str:
        return f"objects/{digest[:2]}/{digest[2:]}"

    def has(self, digest: str) -> bool:
        """Whether the blob ``digest`` is stored (a bad name never is)."""
        return is_digest(digest) and os.path.isfile(self._root / self._rel(digest))

    def put(self, data: bytes | memoryview) -> str:
        """Store ``data`` (once: a content already there is only marked as used now; a
        ``memoryview`` of bytes is taken as its bytes).

        Returns:
            Its name, the SHA-256 as 64 hex characters.

        Raises:
            ValueError: ``data`` is larger than ``max_file_bytes``.
            OSError: the store cannot be written.
        """
        if len(data) > self.max_file_bytes:
            raise ValueError(f"{len(data)} bytes is more than the store takes per file")
        digest = hashlib.sha256(data).hexdigest()
        self._make()
        lock = self._open_lock()
        try:
            # Shared: puts run side by side; gc's removal of a blob waits for them and sees
            # one a put just reused as used.
            with _flocked(lock, fcntl.LOCK_SH):
                folder, name = open_parent(beneath(self._root, self._rel(digest)))
                try:
                    self._write_blob(folder, name, data)
                finally:
                    os.close(folder)
        finally:
            os.close(lock)
        return digest

    def put_ref(self, ref: str, digest: str) -> None:
        """Record that the content a checkpoint named ``ref`` is the blob ``digest`` (stored
        already: call it after :meth:`put` returned). Both are 64 hex characters.

        Raises:
            ValueError: a name is not 64 hex characters.
            FileExistsError: ``ref`` names another blob already.
            OSError: the store cannot be written.
        """
        if not is_digest(ref) or not is_digest(digest):
            raise ValueError("a ref and a digest are 64 hex characters")
        self._make()
        folder, name = open_parent(beneath(self._root, f"refs/{ref[:2]}/{ref[2:]}"))
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(name, flags, 0o600, dir_fd=folder)
            except FileExistsError:
                if self.resolve(ref) != digest:
                    raise
                return
            with os.fdopen(fd, "wb") as out:
                out.write(digest.encode("ascii"))
        finally:
            os.close(folder)

    def resolve(self, ref: str) -> str | None:
        """The blob a ref names (:meth:`put_ref`), or None: never recorded (the content was
        never stored), cut short, or not a ref at all. The blob itself may be gone (gc)."""
        if not is_digest(ref):
            return None
        try:
            data = read_regular(beneath(self._root, f"refs/{ref[:2]}/{ref[2:]}"), 64)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (FileRefusedError, OSError) as exc:
            _log.warning("checkpoint ref %s cannot be read: %s", ref, exc)
            return None
        digest = data.decode("ascii", "replace")
        return digest if is_digest(digest) else None

    def rewind_key(self) -> bytes:
        """The store's secret: :data:`REWIND_KEY_BYTES` random bytes in ``.rewind-key``
        (mode 0600, made on first use, read only as a regular file, never through a symlink).
        A rewind names its temporary files with a tag made with it, so the files it removes
        as leftovers are only those it made, never a file of the same shape the workspace
        holds (docs/security.md).

        Raises:
            FileRefusedError: ``.rewind-key`` is a symlink, not a regular file, or of another
                size (remove it: a new one is made).
            OSError: the store cannot be written.
        """
        if self._key is not None:
            return self._key
        self._make()
        where = beneath(self._root, ".rewind-key")
        try:
            key = read_regular(where, REWIND_KEY_BYTES + 1)
        except FileNotFoundError:
            # Written whole under another name, then linked: a rewind in another process
            # never reads half a key, and the first link made is the one every process uses.
            made = self._root / f".rewind-key.{secrets.token_hex(8)}.new"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(made, flags, 0o600), "wb") as out:
                out.write(secrets.token_bytes(REWIND_KEY_BYTES))
            try:
                with contextlib.suppress(FileExistsError):
                    os.link(made, where.path, follow_symlinks=False)
            finally:
                os.unlink(made)
            key = read_regular(where, REWIND_KEY_BYTES + 1)
        if len(key) != REWIND_KEY_BYTES:
            raise FileRefusedError(
                errno.EINVAL,
                f"is not {REWIND_KEY_BYTES} bytes (remove it: a new one is made)",
                where.path,
            )
        self._key = key
        return key

    def _make(self) -> None:
        if not self._made:
            # The user's files live here: nobody else may read them.
            os.makedirs(self._root, mode=0o700, exist_ok=True)
            self._made = True

    def _open_lock(self) -> int:
        """A descriptor of the store's ``.lock`` file, created if missing; never through a
        symlink, and only a regular file.

        Raises:
            FileRefusedError: ``.lock`` is a symlink or not a regular file.
        """
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self._root / ".lock", flags, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise
            raise FileRefusedError(
                exc.errno, "is not a regular file (a symlink is never followed)", ".lock"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise FileRefusedError(errno.EINVAL, "is not a regular file", ".lock")
        return fd

    def _write_blob(self, folder: int, name: str, data: bytes | memoryview) -> None:
        """Write a blob under its final name (no rename: it costs more than the rest of a
        small checkpoint). Created exclusively, so a content stored already is only marked as
        used; one cut short (a writer killed mid-way) is shorter than its content and is
        written again; any other damage is caught by :meth:`get`'s hash check."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for _ in range(2):
            try:
                fd = os.open(name, flags, 0o600, dir_fd=folder)
            except FileExistsError:
                st = os.stat(name, dir_fd=folder, follow_symlinks=False)
                if st.st_size == len(data):
                    os.utime(name, dir_fd=folder)  # used now: gc's eviction keeps it longest
                    return
                os.unlink(name, dir_fd=folder)
                continue
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=folder)
                raise
            return
        raise FileExistsError(f"blob {name} kept changing while it was stored")

    def get(self, digest: str) -> bytes | None:
        """The content of blob ``digest``, or None when it is not stored, or is damaged (its
        bytes do not hash to its name: logged, never returned). A bad name is never read."""
        if not is_digest(digest):
            return None
        try:
            data = read_regular(beneath(self._root, self._rel(digest)), self.max_file_bytes)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (FileRefusedError, OSError) as exc:
            _log.warning("checkpoint blob %s cannot be read: %s", digest, exc)
            return None
        if hashlib.sha256(data).hexdigest() != digest:
            _log.warning("checkpoint blob %s is damaged (its content has another hash)", digest)
            return None
        return data

    def blobs(self) -> list[tuple[str, int, float]]:
        """Every stored blob: name, size in bytes, last use (mtime, seconds)."""
        found = []
        try:
            shards = list(os.scandir(self._objects))
        except FileNotFoundError:
            return []
        for shard in shards:
            if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
                continue
            with os.scandir(shard.path) as entries:
                for entry in entries:
                    digest = shard.name + entry.name
                    if is_digest(digest) and entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        found.append((digest, st.st_size, st.st_mtime))
        return found

    def size(self) -> int:
        """The bytes all blobs take (their contents' sizes)."""
        return sum(size for _, size, _ in self.blobs())

    def gc(
        self,
        referenced: Collection[str],
        *,
        max_bytes: int | None = None,
        min_age_s: float = 3600.0,
        remove_unreferenced: bool = True,
    ) -> GcReport:
        """Bound the store: remove blobs not in ``referenced`` that are older than
        ``min_age_s`` (a run may have stored one its session has not referenced yet), then,
        while the store holds more than ``max_bytes`` (default: the store's cap), the least
        recently used blobs, referenced or not, oldest first. Afterwards the store holds at
        most the cap. Temporary files older than ``min_age_s`` (a writer killed mid-write)
        are removed too.

        Refs (what a checkpoint stored after its call names) count as their blobs: a blob a
        referenced ref names is referenced; a ref not in ``referenced`` is removed when older
        than ``min_age_s`` (and ``remove_unreferenced``).

        Args:
            referenced: blob and ref names some session still needs (:func:`referenced_blobs`).
            remove_unreferenced: False for a store other sessions use too (the user data
                folder's): ``referenced`` does not cover them, so only the cap removes blobs.
        """
        cap = self.max_bytes if max_bytes is None else max_bytes
        now = time.time()
        referenced = self._through_refs(referenced, now, min_age_s, remove_unreferenced)
        removed = removed_bytes = evicted = evicted_bytes = 0
        listed = self.blobs()
        if not listed:
            self._sweep_temp(now, min_age_s)
            return GcReport(
                removed=0, removed_bytes=0, evicted=0, evicted_bytes=0, kept=0, kept_bytes=0
            )
        kept: list[tuple[str, int, float]] = []
        lock = self._open_lock()
        try:
            for digest, size, used in listed:
                if remove_unreferenced and digest not in referenced and now - used >= min_age_s:
                    outcome = self._remove(lock, digest, used)
                    if outcome is None:  # a put reused it since the listing
                        kept.append((digest, size, now))
                    elif outcome:
                        removed += 1
                        removed_bytes += size
                else:
                    kept.append((digest, size, used))
            total = sum(size for _, size, _ in kept)
            kept.sort(key=lambda blob: blob[2])  # least recently used first
            while kept and total > cap:
                digest, size, used = kept.pop(0)
                outcome = self._remove(lock, digest, used)
                if outcome is None:
                    kept.append((digest, size, now))  # just reused: the most recent now
                    if all(u == now for _, _, u in kept):
                        break  # everything left was reused while gc ran
                    continue
                if outcome:
                    evicted += 1
                    evicted_bytes += size
                total -= size
        finally:
            os.close(lock)
        self._sweep_temp(now, min_age_s)
        return GcReport(
            removed=removed,
            removed_bytes=removed_bytes,
            evicted=evicted,
            evicted_bytes=evicted_bytes,
            kept=len(kept),
            kept_bytes=total,
        )

    def _through_refs(
        self, referenced: Collection[str], now: float, min_age_s: float, remove: bool
    ) -> set[str]:
        """``referenced`` with the blobs its refs name; refs nobody references and older than
        ``min_age_s`` removed (when ``remove``)."""
        found = set(referenced)
        with contextlib.suppress(FileNotFoundError):
            for shard in os.scandir(self._refs):
                if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
                    continue
                for entry in os.scandir(shard.path):
                    ref = shard.name + entry.name
                    if not is_digest(ref) or not entry.is_file(follow_symlinks=False):
                        continue
                    if ref in found:
                        digest = self.resolve(ref)
                        if digest is not None:
                            found.add(digest)
                    elif remove and now - entry.stat(follow_symlinks=False).st_mtime >= min_age_s:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.path)
        return found

    def _remove(self, lock: int, digest: str, used: float) -> bool | None:
        """Remove the blob ``digest`` unless it was used since ``used`` (its mtime when
        listed), under the store's lock held exclusively, so a put that reused it is seen.
        True: removed; False: gone already; None: used since, kept."""
        try:
            shard = os.open(
                self._objects / digest[:2],
                os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
            )
        except (FileNotFoundError, NotADirectoryError):
            return False
        try:
            with _flocked(lock, fcntl.LOCK_EX):
                try:
                    st = os.stat(digest[2:], dir_fd=shard, follow_symlinks=False)
                except FileNotFoundError:
                    return False
                if st.st_mtime != used:
                    return None
                os.unlink(digest[2:], dir_fd=shard)
                return True
        finally:
            os.close(shard)

    def _sweep_temp(self, now: float, min_age_s: float) -> None:
        with contextlib.suppress(FileNotFoundError):
            for shard in os.scandir(self._objects):
                if not shard.is_dir(follow_symlinks=False):
                    continue
                for entry in os.scandir(shard.path):
                    if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                        st = entry.stat(follow_symlinks=False)
                        if now - st.st_mtime >= min_age_s:
                            with contextlib.suppress(FileNotFoundError):
                                os.unlink(entry.path)
