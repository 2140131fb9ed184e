"""The harness's user folders (``platformdirs``), looked up once per environment.

``platformdirs`` builds its answer anew on every call (tens of microseconds), and the supervisor
asks for these folders on every decision; the answer depends only on the environment variables
below, so it is cached by their values (a test or a program that changes ``HOME`` or
``XDG_CONFIG_HOME`` gets the new folders).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal

from platformdirs import user_cache_path, user_config_path, user_data_path, user_state_path

__all__ = ["SETTINGS_MAX_BYTES", "user_folder", "user_settings_path"]

SETTINGS_MAX_BYTES = 1_000_000
"""A settings file larger than this is refused (no real one comes near)."""

_ENV = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "APPDATA",
    "LOCALAPPDATA",
)
Kind = Literal["config", "data", "state", "cache"]
_LOOKUP = {
    "config": user_config_path,
    "data": user_data_path,
    "state": user_state_path,
    "cache": user_cache_path,
}


def user_folder(kind: Kind) -> Path:
    """``platformdirs.user_<kind>_path("harness")`` for the current environment."""
    return _folder(kind, tuple(os.environ.get(name) for name in _ENV))


@functools.lru_cache(maxsize=64)
def _folder(kind: Kind, env: tuple[str | None, ...]) -> Path:
    return _LOOKUP[kind]("harness")


def user_settings_path() -> Path:
    """``settings.json`` in the user config folder (``platformdirs.user_config_path("harness")``,
    e.g. ``~/.config/harness/settings.json`` on Linux, honouring ``XDG_CONFIG_HOME``)."""
    return user_folder("config") / "settings.json"
