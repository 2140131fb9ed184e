"""YAML frontmatter read with PyYAML's safe loader, bounded (see :mod:`.frontmatter`).

A module of its own so that :mod:`.frontmatter` imports PyYAML only when a file has YAML
frontmatter: ``import harness`` stays fast (issue 24).
"""

from __future__ import annotations

from typing import Any

import yaml

from .frontmatter import MAX_DEPTH, FrontmatterError

__all__ = ["load_bounded"]


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing aliases and nesting past :data:`MAX_DEPTH` while it
    composes, before its recursive constructor could run out of stack."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise FrontmatterError("YAML aliases (*name) are not allowed in frontmatter")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise FrontmatterError(f"frontmatter is nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_bounded(text: str) -> Any:
    """The YAML document ``text`` as Python values.

    Raises:
        FrontmatterError: a YAML syntax error, an alias, nesting deeper than
            :data:`MAX_DEPTH`, or a value PyYAML cannot make (a 5,000-digit integer, month 13).
    """
    try:
        # Its reader refuses control characters already here, in the constructor.
        loader = _BoundedLoader(text)
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
