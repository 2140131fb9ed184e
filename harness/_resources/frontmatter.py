"""Splitting a markdown file into its frontmatter and body.

YAML frontmatter between ``---`` lines (the Agent Skills layout, pi's loader) is read with
PyYAML's safe loader; a leading JSON object, optionally followed by a ``---`` line (the AgentCore
seed's format), is read with :mod:`json`. A file with neither is all body.

Frontmatter comes from project files, which are untrusted, so its shape is bounded: nesting
deeper than :data:`MAX_DEPTH` and YAML aliases (``*name``, whose shared references make a small
file into an exponentially large value for anything that walks it) are refused as errors,
never met as a ``RecursionError`` or a value too large to print. Any value a constructor cannot
make (a 5,000-digit integer, a 13th month, a malformed ``!!timestamp``) and any lone surrogate
(an escape such as ``"\\ud800"``, which no UTF-8 file, session line or terminal can hold) is a
:class:`FrontmatterError` too, never another exception.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

__all__ = [
    "MAX_CHARS",
    "MAX_DEPTH",
    "MAX_NODES",
    "SCAN_CHARS",
    "SCAN_NODES",
    "FrontmatterError",
    "frontmatter_budget",
    "new_budget",
    "split_frontmatter",
]

MAX_DEPTH = 32
"""Deepest nesting of mappings and lists a frontmatter may have (the top mapping is 1)."""
MAX_NODES = 2_000
"""Most YAML nodes (scalars, sequences, mappings) one frontmatter may have. PyYAML's loader is
pure Python, about 40 µs a node: a 1 MiB flow sequence ``[b, b, …]`` took 8 s, and a project
may hold a thousand such skill files (review 12, finding 7). Real frontmatter has tens."""
MAX_CHARS = 65_536
"""Longest YAML frontmatter (characters between the ``---`` lines): the scanner takes about
2 µs a character even where there are few nodes (one long plain scalar)."""
SCAN_NODES = 100_000
"""Within :func:`frontmatter_budget` (one scan of a kind of file: skills, templates, agents),
the most YAML nodes all files' frontmatter may have together; files after that are errors."""
SCAN_CHARS = 2_000_000
"""Within :func:`frontmatter_budget`, the most characters of YAML frontmatter read in all."""

# YAML nodes and characters left to the current scan (shared by its files), if any
_scan_left: ContextVar[list[int] | None] = ContextVar("_scan_left", default=None)


def new_budget() -> list[int]:
    """A budget for :func:`frontmatter_budget`: ``[YAML nodes, characters]`` left, at first
    :data:`SCAN_NODES` and :data:`SCAN_CHARS`."""
    return [SCAN_NODES, SCAN_CHARS]


@contextlib.contextmanager
def frontmatter_budget(budget: list[int] | None = None) -> Iterator[None]:
    """Within this block, every :func:`split_frontmatter` takes its YAML nodes and characters
    from ``budget`` (default a :func:`new_budget`; pass one to share it between blocks); once
    it is spent, a file with YAML frontmatter raises :class:`FrontmatterError`, so one scan
    costs a few seconds at most, whatever its files hold."""
    token = _scan_left.set(new_budget() if budget is None else budget)
    try:
        yield
    finally:
        _scan_left.reset(token)


_YAML_FENCE = re.compile(r"\A---[ \t]*\r?\n")
_YAML_END = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)
_JSON_END = re.compile(r"\A[ \t]*(?:\r?\n)?(?:---[ \t]*(?:\r?\n|\Z))?")


class FrontmatterError(ValueError):
    """The frontmatter is not valid YAML/JSON, not a mapping, nested deeper than
    :data:`MAX_DEPTH`, longer than :data:`MAX_CHARS`, has more YAML nodes than
    :data:`MAX_NODES` (or more of either than its scan has left), or uses YAML aliases."""


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """``(metadata, body)`` of a markdown file's text.

    Raises:
        FrontmatterError: unterminated ``---`` block, a YAML or JSON syntax error, frontmatter
            that is not a mapping, nested deeper than :data:`MAX_DEPTH`, or with YAML aliases
            (discovery turns this into ``parse_failed``).
    """
    text = text.removeprefix("\ufeff")
    fence = _YAML_FENCE.match(text)
    if fence is not None:
        end = _YAML_END.search(text, fence.end())
        if end is None:
            raise FrontmatterError("the frontmatter's opening '---' has no closing '---'")
        # Imported here, not at the top: `import harness` stays fast (issue 24).
        from ._yaml import load_bounded

        yaml_text = text[fence.end() : end.start()]
        if len(yaml_text) > MAX_CHARS:
            raise FrontmatterError(f"the frontmatter is longer than {MAX_CHARS:,} characters")
        left = _scan_left.get()
        if left is not None:
            left[1] -= len(yaml_text)
            if left[1] < 0:
                raise FrontmatterError(
                    "not read: the files before it used up the YAML this scan reads"
                )
        meta = load_bounded(yaml_text, left)
        _check_text(meta)
        return _mapping(meta), text[end.end() :]
    if text.lstrip().startswith("{"):
        start = len(text) - len(text.lstrip())
        try:
            meta, stop = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError as exc:
            raise FrontmatterError(f"invalid JSON frontmatter: {exc}") from None
        except RecursionError:  # the decoder recurses once per level
            raise FrontmatterError(
                f"frontmatter is nested deeper than {MAX_DEPTH} levels"
            ) from None
        except ValueError as exc:  # e.g. an integer past Python's 4,300-digit limit
            raise FrontmatterError(f"invalid JSON frontmatter: {exc}") from None
        _check_depth(meta)
        _check_text(meta)
        rest = text[stop:]
        separator = _JSON_END.match(rest)
        return _mapping(meta), rest[separator.end() if separator else 0 :]
    return {}, text


def _check_depth(value: object) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_DEPTH:
                    raise FrontmatterError(f"frontmatter is nested deeper than {MAX_DEPTH} levels")
                stack.append((child, depth + 1))


def _check_text(value: object) -> None:
    """Refuse a lone surrogate in any key or string (walked without recursion; the depth is
    already bounded)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise FrontmatterError(
                    f"frontmatter holds a lone surrogate ({ascii(item)[:40]}), not Unicode text"
                ) from None
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item


def _mapping(meta: object) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise FrontmatterError(f"frontmatter must be a mapping, not {type(meta).__name__}")
    return {str(k): v for k, v in meta.items()}
