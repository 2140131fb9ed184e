"""The ``checkpoints`` key of the user's settings file: ``{"checkpoints": true}`` turns
checkpoints on for ``harness run`` and ``harness chat`` (``--checkpoints`` /
``--no-checkpoints`` win). Only the user's own settings count: the key only adds a record of
what changed, but a project's file is not the user's word (docs/security.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from .._fs import read_regular_file
from .._permissions import user_settings_path
from .._permissions.folders import SETTINGS_MAX_BYTES

__all__ = ["checkpoints_setting"]


def checkpoints_setting(path: Path | None = None) -> bool:
    """The ``checkpoints`` key of the user settings file (``path``, default
    ``user_settings_path()``): False when the file or the key is missing.

    Raises:
        ValueError: the file cannot be read (not a regular file, too large, not JSON), or the
            key is not a boolean; the message names the file.
    """
    where = path if path is not None else user_settings_path()
    try:
        raw = read_regular_file(where, max_bytes=SETTINGS_MAX_BYTES)
        data: Any = {} if raw is None else orjson.loads(raw)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{where}: cannot read the checkpoints setting: {exc}") from None
    value = data.get("checkpoints", False) if isinstance(data, Mapping) else False
    if not isinstance(value, bool):
        raise ValueError(f"{where}: 'checkpoints' must be true or false")
    return value
