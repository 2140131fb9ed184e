"""``_fs.read_capped`` reads the whole file, however its size moved since the ``fstat`` it is
given, and refuses a file past the cap (it first reads the ``fstat``'s size and a byte more at
once: a 1 MiB read of a 1 MB file cost ten times as much)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness._fs import FileRefusedError, read_capped


def read(
    path: Path, max_bytes: int, *, grow_by: bytes = b"", shrink_to: int | None = None
) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if grow_by:
            with path.open("ab") as more:
                more.write(grow_by)
        if shrink_to is not None:
            os.truncate(path, shrink_to)
        return read_capped(fd, st, max_bytes, str(path))
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", [0, 1, 65_535, 65_536, 1_000_000, 1 << 20, 3 * (1 << 20) + 7])
def test_the_whole_file_is_read(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    data = os.urandom(size)
    path.write_bytes(data)
    assert read(path, 4 << 20) == data


def test_a_file_that_grew_since_the_fstat_is_read_whole_or_refused_past_the_cap(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a" * 1000)
    assert read(path, 1 << 20, grow_by=b"b" * 200_000) == b"a" * 1000 + b"b" * 200_000
    path.write_bytes(b"a" * 1000)
    with pytest.raises(FileRefusedError):
        read(path, 1500, grow_by=b"b" * 501)
    path.write_bytes(b"a" * 1000)
    assert read(path, 1500, grow_by=b"b" * 500) == b"a" * 1000 + b"b" * 500


def test_a_file_that_shrank_since_the_fstat_gives_what_is_left(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a" * 100_000)
    assert read(path, 1 << 20, shrink_to=10) == b"a" * 10


def test_a_file_over_the_cap_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a" * 2000)
    with pytest.raises(FileRefusedError):
        read(path, 1999)
