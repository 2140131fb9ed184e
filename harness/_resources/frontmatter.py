"""Splitting a markdown file into its frontmatter and body.

YAML frontmatter between ``---`` lines (the Agent Skills layout, pi's loader) is read with
PyYAML's safe loader; a leading JSON object, optionally followed by a ``---`` line (the AgentCore
seed's format), is read with :mod:`json`. A file with neither is all body.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

__all__ = ["FrontmatterError", "split_frontmatter"]

_YAML_FENCE = re.compile(r"\A---[ \t]*\r?\n")
_YAML_END = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)
_JSON_END = re.compile(r"\A[ \t]*(?:\r?\n)?(?:---[ \t]*(?:\r?\n|\Z))?")


class FrontmatterError(ValueError):
    """The frontmatter is not valid YAML/JSON, or not a mapping."""


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """``(metadata, body)`` of a markdown file's text.

    Raises:
        FrontmatterError: unterminated ``---`` block, a YAML or JSON syntax error, or
            frontmatter that is not a mapping (discovery turns this into ``parse_failed``).
    """
    text = text.removeprefix("\ufeff")
    fence = _YAML_FENCE.match(text)
    if fence is not None:
        end = _YAML_END.search(text, fence.end())
        if end is None:
            raise FrontmatterError("the frontmatter's opening '---' has no closing '---'")
        try:
            meta = yaml.safe_load(text[fence.end() : end.start()])
        except yaml.YAMLError as exc:
            raise FrontmatterError(f"invalid YAML frontmatter: {exc}") from None
        return _mapping(meta), text[end.end() :]
    if text.lstrip().startswith("{"):
        start = len(text) - len(text.lstrip())
        try:
            meta, stop = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError as exc:
            raise FrontmatterError(f"invalid JSON frontmatter: {exc}") from None
        rest = text[stop:]
        separator = _JSON_END.match(rest)
        return _mapping(meta), rest[separator.end() if separator else 0 :]
    return {}, text


def _mapping(meta: object) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise FrontmatterError(f"frontmatter must be a mapping, not {type(meta).__name__}")
    return {str(k): v for k, v in meta.items()}
