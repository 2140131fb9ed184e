"""Glob matching for rules and tools, with ``wcmatch`` imported on first use.

One spelling everywhere: ``**`` spans folders, ``*`` matches hidden names too, ``{a,b}``
expands. ``wcmatch`` is imported inside each call so that ``import harness`` does not pay for
it (issue 24); after the first call the import is a dictionary look-up.
"""

from __future__ import annotations

__all__ = ["name_matches", "path_matches"]


def path_matches(path: str, pattern: str) -> bool:
    """Whether ``path`` matches the glob ``pattern`` as a whole path."""
    from wcmatch import glob

    return bool(glob.globmatch(path, pattern, flags=glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE))


def name_matches(name: str, pattern: str) -> bool:
    """Whether the file name ``name`` matches the glob ``pattern``."""
    from wcmatch import fnmatch

    return bool(fnmatch.fnmatch(name, pattern, flags=fnmatch.DOTMATCH | fnmatch.BRACE))
