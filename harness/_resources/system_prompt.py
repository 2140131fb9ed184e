"""The system prompt as a function of the resources (the AgentCore seed's system prompt
callback): a string gets the context files and the skills catalog appended; a function gets
every part and returns the whole prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from attrs import field, frozen

from .catalog import SkillOffer, catalog_block
from .context_files import ContextFile, context_block
from .templates import PromptTemplate

__all__ = ["PromptParts", "SystemPromptBuilder", "compose_system_prompt"]


def _files(value: Sequence[ContextFile]) -> tuple[ContextFile, ...]:
    return tuple(value)


def _templates(value: Sequence[PromptTemplate]) -> tuple[PromptTemplate, ...]:
    return tuple(value)


def _names(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen(kw_only=True)
class PromptParts:
    """What a system prompt may be built from.

    Attributes:
        context_files: in prompt order (user first, then repository root down to cwd).
        catalog: the skills offered to this turn.
        templates: the prompt templates.
        tools: names of the tools offered to the model (``skill`` included when offered).
    """

    context_files: tuple[ContextFile, ...] = field(converter=_files)
    catalog: SkillOffer
    templates: tuple[PromptTemplate, ...] = field(converter=_templates)
    tools: tuple[str, ...] = field(converter=_names)

    @property
    def context_text(self) -> str:
        """The context files as the default prompt shows them (empty: none)."""
        return context_block(self.context_files)

    @property
    def catalog_text(self) -> str:
        """The catalog as the default prompt shows it (empty: no skill offered)."""
        return catalog_block(self.catalog)


SystemPromptBuilder = Callable[[PromptParts], str]
"""``AgentHarness(system_prompt=build)``: called for every request with the current parts."""


def compose_system_prompt(base: str | SystemPromptBuilder, parts: PromptParts) -> str:
    """``base`` (a string), then the context files, then the catalog, blank-line separated;
    or ``base(parts)`` when it is a function."""
    if callable(base):
        return base(parts)
    return "\n\n".join(p for p in (base, parts.context_text, parts.catalog_text) if p)
