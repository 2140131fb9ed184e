"""Model names (``openai/gpt-4.1``, ``claude-sonnet-4-5:high``, ``ollama/qwen3:8b``) made into
models, through the registry.

pi's ``--model provider/id[:thinking]``: the provider picks the wire format and the endpoint
(from the registry or the settings' ``models``), the id is sent as written (a dated id stays
dated), and a known thinking level after the last ``:`` is the thinking level.
"""

from __future__ import annotations

import logging
import os
from typing import Literal

from .._errors import MissingApiKeyError, MissingExtraError, UnknownModelError
from .base import Model, ThinkingLevel
from .registry import ModelRegistry, ModelSpec, parse_model_spec

__all__ = ["make_model", "model_of"]

log = logging.getLogger("harness")


def make_model(
    spec: str | ModelSpec,
    *,
    registry: ModelRegistry | None = None,
    base_url: str | None = None,
    api: Literal["responses", "chat"] | None = None,
    api_key: str | None = None,
) -> Model:
    """The model a name stands for.

    A bare id (no ``provider/``) is looked up in every provider. A model the registry does not
    know is an error on a provider's own endpoint (with the closest names), but runs on a
    custom ``base_url`` or a provider from the settings (local servers serve any name), with a
    one-line log note that its cost and window are unknown until added under ``models``.

    Args:
        spec: ``[provider/]id[:thinking]`` or a parsed :class:`ModelSpec` (the thinking level
            is not part of the model: see :func:`model_of`).
        registry: where names are looked up; default the package's registry.
        base_url: a custom endpoint (an OpenAI-compatible server); for a bare unknown id it
            means an OpenAI-compatible server.
        api: ``responses`` or ``chat`` for OpenAI-style providers; default the provider's
            (``openai``: Responses; a settings provider: its ``api``).
        api_key: the key; default the provider's ``apiKeyEnv`` variable. A settings provider
            without one gets no key (the user's OpenAI key is never sent to another server).

    Raises:
        UnknownModelError: an unknown provider, or an unknown model on a provider's own
            endpoint (code ``unknown_model``, with ``suggestions``).
        MissingApiKeyError: the provider needs a key and none is set.
        MissingExtraError: an OpenAI-style model without the ``openai`` extra installed.
        ValueError: ``api`` given for an Anthropic model.
    """
    registry = registry or ModelRegistry.builtin()
    parsed = registry.expand(parse_model_spec(spec) if isinstance(spec, str) else spec)
    provider = parsed.provider
    if provider is None:
        found = registry.find(parsed.model_id)
        if found is not None:
            provider = found.provider
        elif base_url is not None:
            provider = "openai"
        else:
            raise UnknownModelError(parsed.model_id, registry.suggest(parsed.model_id))
    pinfo = registry.provider(provider)
    if pinfo is None:
        registry.require(ModelSpec(provider=provider, model_id=parsed.model_id))
        raise AssertionError("unreachable: require() raised")  # pragma: no cover
    info = registry.find(parsed.model_id, provider)
    endpoint = base_url or pinfo.base_url
    if info is None:
        if endpoint is None:
            registry.require(ModelSpec(provider=provider, model_id=parsed.model_id))
        log.warning(
            "model %s/%s is not in the registry: its cost and context window are unknown until "
            "added under 'models' in the settings (docs/providers.md)",
            provider,
            parsed.model_id,
        )
    key = api_key or (os.environ.get(pinfo.api_key_env) or None if pinfo.api_key_env else None)
    if pinfo.api == "anthropic-messages":
        if api is not None:
            raise ValueError(f"api={api!r} is for OpenAI-style providers, not {provider!r}")
        from .anthropic import AnthropicModel

        return AnthropicModel(parsed.model_id, api_key=key, base_url=endpoint, registry=registry)
    try:
        from .openai import NO_KEY, OpenAIModel
    except ImportError as exc:
        raise MissingExtraError(f"the model {provider}/{parsed.model_id}", "openai") from exc
    if key is None and provider != "openai":
        if pinfo.api_key_env:
            raise MissingApiKeyError(
                f"provider {provider!r} needs an API key in ${pinfo.api_key_env}",
                variable=pinfo.api_key_env,
            )
        key = NO_KEY
    wire: Literal["responses", "chat"] = api or (
        "chat" if pinfo.api == "openai-completions" else "responses"
    )
    return OpenAIModel(
        parsed.model_id,
        api=wire,
        base_url=endpoint,
        api_key=key,
        provider=provider,
        info=info,
        registry=registry,
    )


def model_of(
    value: Model | str, registry: ModelRegistry | None = None
) -> tuple[Model, ThinkingLevel | None]:
    """``value`` as a model, and the thinking level its name carries (``:high``), if any."""
    if not isinstance(value, str):
        return value, None
    parsed = parse_model_spec(value)
    level: ThinkingLevel | None = parsed.thinking  # type: ignore[assignment]
    return make_model(parsed, registry=registry), level
