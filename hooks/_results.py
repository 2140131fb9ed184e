"""What hook receivers return, and what the bus makes of all their returns.

A receiver returns one result or None; combining them is ``_bus``'s job, never a receiver's.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Final, Literal, TypeAlias

from attrs import field, frozen

from ._messages import JSONValue, UserContent

__all__ = [
    "UNSET",
    "Block",
    "PatchInput",
    "PatchResult",
    "ToolCallOutcome",
    "ToolResultOutcome",
    "Unset",
]


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset.UNSET
"""Marks a :class:`PatchResult` field as not given; None stays a value you can set."""

Unset: TypeAlias = Literal[_Unset.UNSET]
"""The type of :data:`UNSET`."""


# --- tool_call ------------------------------------------------------------------------------


@frozen(kw_only=True)
class Block:
    """Returned from ``tool_call``: do not run the tool; ``reason`` becomes its error result."""

    reason: str


@frozen(kw_only=True)
class PatchInput:
    """Returned from ``tool_call``: run the tool with ``input`` instead (later receivers see it)."""

    input: Mapping[str, JSONValue]


@frozen(kw_only=True)
class ToolCallOutcome:
    """The combined answer of every ``tool_call`` receiver.

    ``input`` is the final input (as patched); when ``blocked``, ``reason`` says why.
    """

    blocked: bool
    reason: str | None
    input: Mapping[str, JSONValue]


# --- tool_result ----------------------------------------------------------------------------


def _tuple_or_unset(
    value: Iterable[UserContent] | Unset,
) -> tuple[UserContent, ...] | Unset:
    return value if value is UNSET else tuple(value)


@frozen(kw_only=True)
class PatchResult:
    """Returned from ``tool_result``: replace the fields that are set; :data:`UNSET` keeps one.

    ``terminate=True`` asks the agent to stop after this tool batch; the last receiver that sets
    it decides.
    """

    content: tuple[UserContent, ...] | Unset = field(default=UNSET, converter=_tuple_or_unset)
    details: JSONValue | Unset = UNSET
    is_error: bool | Unset = UNSET
    terminate: bool | Unset = UNSET


@frozen(kw_only=True)
class ToolResultOutcome:
    """The tool result after every ``tool_result`` receiver; ``terminate`` defaults to False."""

    content: tuple[UserContent, ...]
    details: JSONValue
    is_error: bool
    terminate: bool
