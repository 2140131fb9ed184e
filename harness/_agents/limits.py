"""Run limits: turns, tokens and cost per run, and the budget that counts them.

Follows Claude's ``max_turns``/``max_budget_usd`` and the OpenAI Agents SDK's ``max_turns``:
a limit reached ends the run after the current turn (its tool calls finish), never in the
middle of one, with a stop reason instead of an exception. A sub-agent's budget is linked to
its parent's: what the child uses counts in the parent's tokens and cost, and the child stops
at whichever limit of the two is reached first.

Pure arithmetic, no I/O.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from attrs import define, field, frozen

from hooks import AssistantMessage, JSONValue

from .._providers.base import Model
from .._providers.registry import ModelRegistry, cost_of
from .errors import PriceUnknownError
from .reply import LimitStopReason

__all__ = ["Budget", "LimitHit", "RunLimits", "require_price"]

_log = logging.getLogger("harness")


def _positive_int(_instance: object, attribute: Any, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{attribute.name} must be a whole number of 1 or more, not {value!r}")


def _positive_usd(_instance: object, attribute: Any, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{attribute.name} must be a number of US dollars, not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{attribute.name} must be more than 0 US dollars, not {value!r}")


@frozen(kw_only=True)
class RunLimits:
    """The limits of one run; None: no limit.

    Attributes:
        max_turns: model requests (turns) in the run; the run ends when one more would be
            sent.
        max_tokens: tokens over the run, input (cached tokens included) plus output, summed
            over every reply (``Usage.total``), a sub-agent's included.
        max_cost_usd: US dollars over the run, a sub-agent's included: each reply's recorded
            cost, else its tokens at the registry's prices for its model.

    Raises:
        ValueError: a limit below 1 (turns, tokens) or not above 0 (dollars).
    """

    max_turns: int | None = field(default=None, validator=_positive_int)
    max_tokens: int | None = field(default=None, validator=_positive_int)
    max_cost_usd: float | None = field(default=None, validator=_positive_usd)

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.max_turns, self.max_tokens, self.max_cost_usd))

    def over(self, other: RunLimits) -> RunLimits:
        """These limits where set, else ``other``'s (a prompt's over the harness's)."""
        return RunLimits(
            max_turns=self.max_turns if self.max_turns is not None else other.max_turns,
            max_tokens=self.max_tokens if self.max_tokens is not None else other.max_tokens,
            max_cost_usd=self.max_cost_usd if self.max_cost_usd is not None else other.max_cost_usd,
        )

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "maxTurns": self.max_turns,
            "maxTokens": self.max_tokens,
            "maxCostUsd": self.max_cost_usd,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunLimits:
        """The limits of :meth:`to_json`'s shape.

        Raises:
            ValueError: a value of the wrong type or range.
        """
        return cls(
            max_turns=data.get("maxTurns"),
            max_tokens=data.get("maxTokens"),
            max_cost_usd=data.get("maxCostUsd"),
        )


def require_price(model: Model, registry: ModelRegistry) -> None:
    """Check that ``model``'s cost can be counted.

    Raises:
        PriceUnknownError: the registry has no price for it (code ``price_unknown``).
    """
    info = registry.find(model.id, model.provider)
    if info is None or info.prices is None:
        raise PriceUnknownError(f"{model.provider}/{model.id}")


@frozen(kw_only=True)
class LimitHit:
    """A limit reached: which (the run's stop reason), its value, and what was used."""

    stop_reason: LimitStopReason
    limit: float
    used: float


@define
class Budget:
    """What one run has used, against its limits, counted into its parent's budget too.

    ``turns`` are this run's own; ``tokens`` and ``cost_usd`` include what linked children
    counted (:meth:`child`).
    """

    limits: RunLimits
    registry: ModelRegistry
    parent: Budget | None = None
    turns: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    _unpriced_warned: set[str] = field(factory=set)

    def child(self, limits: RunLimits = RunLimits()) -> Budget:
        """A budget for a sub-agent's run: its own ``limits`` (none by default), and
        whatever it uses counted here as well, so this run's limits hold for it too."""
        return Budget(limits=limits, registry=self.registry, parent=self)

    def count(self, reply: AssistantMessage) -> None:
        """Count one reply (one turn): its tokens and cost, here and in every parent."""
        self.turns += 1
        usage = reply.usage
        tokens = usage.total
        cost = usage.cost.total
        if not cost and tokens:
            info = self.registry.find(reply.model, reply.provider or None)
            priced = cost_of(usage, info.prices if info is not None else None)
            if priced is not None:
                cost = priced.total
            elif self.limited_by_cost() and reply.model not in self._unpriced_warned:
                self._unpriced_warned.add(reply.model)
                _log.warning(
                    "a reply of %s/%s has no known price: its cost counts as 0 towards "
                    "max_cost_usd",
                    reply.provider,
                    reply.model,
                )
        budget: Budget | None = self
        while budget is not None:
            budget.tokens += tokens
            budget.cost_usd += cost
            budget = budget.parent

    def exceeded(self) -> LimitHit | None:
        """The first limit reached, of this run (turns, tokens, cost) then of its parents
        (tokens, cost); None while every limit holds."""
        limits = self.limits
        if limits.max_turns is not None and self.turns >= limits.max_turns:
            return LimitHit(stop_reason="max_turns", limit=limits.max_turns, used=self.turns)
        budget: Budget | None = self
        while budget is not None:
            limits = budget.limits
            if limits.max_tokens is not None and budget.tokens >= limits.max_tokens:
                return LimitHit(
                    stop_reason="max_tokens", limit=limits.max_tokens, used=budget.tokens
                )
            if limits.max_cost_usd is not None and budget.cost_usd >= limits.max_cost_usd:
                return LimitHit(
                    stop_reason="max_cost", limit=limits.max_cost_usd, used=budget.cost_usd
                )
            budget = budget.parent
        return None

    def limited_by_cost(self) -> bool:
        """Whether a cost limit applies: this run's or a parent's."""
        budget: Budget | None = self
        while budget is not None:
            if budget.limits.max_cost_usd is not None:
                return True
            budget = budget.parent
        return False

    def to_json(self) -> dict[str, JSONValue]:
        """The counters, for a run that stops and resumes later."""
        return {"turns": self.turns, "tokens": self.tokens, "costUsd": self.cost_usd}

    @classmethod
    def restored(
        cls, state: Mapping[str, Any], default: RunLimits, registry: ModelRegistry
    ) -> Budget | None:
        """The budget of a run that stopped and goes on: the limits it had (``state``'s,
        else ``default``) and what it had used (:meth:`to_json`'s counters); None when
        nothing limits it.

        Raises:
            ValueError: the state's limits are of the wrong type or range.
        """
        raw = state.get("limits")
        limits = RunLimits.from_json(raw) if isinstance(raw, Mapping) else default
        if not limits:
            return None
        budget = cls(limits=limits, registry=registry)
        for name, key in (("turns", "turns"), ("tokens", "tokens"), ("cost_usd", "costUsd")):
            value = state.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                setattr(budget, name, value)
        return budget
