"""YAML frontmatter read with PyYAML's safe loader, bounded (see :mod:`.frontmatter`).

A module of its own so that :mod:`.frontmatter` imports PyYAML only when a file has YAML
frontmatter: ``import harness`` stays fast (issue 24).
"""

from __future__ import annotations

from typing import Any

import yaml

from .frontmatter import MAX_DEPTH, MAX_NODES, FrontmatterError

__all__ = ["load_bounded"]


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing aliases and nesting past :data:`MAX_DEPTH` while it
    composes, before its recursive constructor could run out of stack."""

    def __init__(self, stream: str, scan_left: list[int] | None) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._scan_left = scan_left

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise FrontmatterError("YAML aliases (*name) are not allowed in frontmatter")
        # counted as composed, before the slow construction: the cost is bounded by the count
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise FrontmatterError(f"frontmatter has more than {MAX_NODES:,} YAML values")
        if self._scan_left is not None:
            self._scan_left[0] -= 1
            if self._scan_left[0] < 0:
                raise FrontmatterError(
                    "not read: the files before it used up the YAML this scan reads"
                )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise FrontmatterError(f"frontmatter is nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_bounded(text: str, scan_left: list[int] | None = None) -> Any:
    """The YAML document ``text`` as Python values; each node it composes is taken from
    ``scan_left[0]`` when given (the scan's budget, :func:`.frontmatter.frontmatter_budget`).

    Raises:
        FrontmatterError: a YAML syntax error, an alias, nesting deeper than
            :data:`MAX_DEPTH`, more nodes than :data:`MAX_NODES` or than ``scan_left`` holds,
            or a value PyYAML cannot make (a 5,000-digit integer, month 13).
    """
    try:
        # Its reader refuses control characters already here, in the constructor.
        loader = _BoundedLoader(text, scan_left)
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"invalid YAML frontmatter: {exc}") from None
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"invalid YAML frontmatter: {exc}") from None
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        # PyYAML's constructors call int(), datetime() and a regex match on the scalar as
        # written; a value they cannot make is a bad file, not a crash.
        raise FrontmatterError(f"invalid YAML frontmatter: a value cannot be made: {exc}") from None
    finally:
        loader.dispose()
