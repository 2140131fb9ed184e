"""Chat's prompt history file (``harness chat`` on a terminal): never followed through a
symlink at its name, never a FIFO or device (review 9, finding 1)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from harness.cli._chat_terminal import _History


def test_a_history_linked_elsewhere_is_neither_read_nor_appended(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("+not a prompt of mine\n")
    history = tmp_path / "chat_history"
    history.symlink_to(notes)
    h = _History(str(history))
    assert list(h.load_history_strings()) == []
    h.store_string("my secret plan")
    assert notes.read_text() == "+not a prompt of mine\n"


def test_a_fifo_history_never_blocks(tmp_path: Path) -> None:
    history = tmp_path / "chat_history"
    os.mkfifo(history)
    done: list[object] = []

    def use() -> None:
        h = _History(str(history))
        done.append(list(h.load_history_strings()))
        h.store_string("x")
        done.append(True)

    worker = threading.Thread(target=use, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert done == [[], True]


def test_the_history_keeps_prompt_toolkits_format(tmp_path: Path) -> None:
    history = tmp_path / "chat_history"
    h = _History(str(history))
    h.store_string("one")
    h.store_string("two\nlines")
    assert list(_History(str(history)).load_history_strings()) == ["two\nlines", "one"]
    assert "\n+two\n+lines\n" in history.read_text()
    assert history.stat().st_mode & 0o777 == 0o600
