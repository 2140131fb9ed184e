"""Choosing a model on the command line, shared by ``run`` and ``chat``.

``--model provider/id[:thinking]`` (pi's form; a bare id is looked up in every provider),
``--base-url URL`` (an OpenAI-compatible server), ``--api responses|chat`` and
``--fallback-model M``. Names resolve through the model registry: the package's models plus
the ``models`` of the user settings and, with ``--trust-project``, of the project's
``.harness/settings.json``; their ``model`` key is the default model (docs/providers.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import attrs
import click

from harness import (
    LoadedRegistry,
    Model,
    ModelRegistry,
    ModelSpec,
    Session,
    ThinkingLevel,
    load_registry,
    make_model,
    parse_model_spec,
)

from ._escape import echo, json_line

__all__ = ["DEFAULT_MODEL", "ModelChoice", "model_lines", "model_options", "models"]

DEFAULT_MODEL = "anthropic/claude-sonnet-4-5"
"""The model ``run`` and ``chat`` use without ``--model``, a session naming one, or a
``model`` in the settings."""


def model_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--model``, ``--base-url``, ``--api`` and ``--fallback-model`` (passed as ``model_id``,
    ``base_url``, ``api`` and ``fallback_model_id``)."""
    command = click.option(
        "--fallback-model",
        "fallback_model_id",
        metavar="M",
        default=None,
        help="A model that answers a turn once --model's retries are spent on an overloaded, "
        "failing or unreachable server (provider/id).",
    )(command)
    command = click.option(
        "--api",
        type=click.Choice(["responses", "chat"]),
        default=None,
        help="For OpenAI-style models: the Responses API or Chat Completions (what "
        "OpenAI-compatible servers speak; the default with --base-url).",
    )(command)
    command = click.option(
        "--base-url",
        metavar="URL",
        default=None,
        help="An OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio...), e.g. "
        "http://localhost:11434/v1; needs --model with the server's model name.",
    )(command)
    return click.option(
        "--model",
        "model_id",
        metavar="M",
        default=None,
        help="provider/id[:thinking] (openai/gpt-4.1, anthropic/claude-sonnet-4-5:high, "
        "ollama/qwen3:8b) or a known id (default: the session's, else the settings' "
        f"'model', else {DEFAULT_MODEL}).",
    )(command)


class ModelChoice:
    """The models of one command: the registry it loaded and what the options asked for.

    Raises (from its methods): ``UnknownModelError`` with "did you mean", ``MissingApiKeyError``,
    ``MissingExtraError``, ``ModelSettingsError``, and ``click.UsageError`` for options that
    do not fit together.
    """

    def __init__(
        self,
        *,
        model_id: str | None,
        base_url: str | None,
        api: Literal["responses", "chat"] | None,
        fallback_model_id: str | None,
        cwd: Path,
        trust_project: bool,
    ) -> None:
        if base_url is not None and model_id is None:
            raise click.UsageError("--base-url needs --model: the name the server knows")
        self.loaded: LoadedRegistry = load_registry(cwd=cwd, trust_project=trust_project)
        self._model_id, self._base_url = model_id, base_url
        # A custom server speaks Chat Completions unless told otherwise.
        self._api: Literal["responses", "chat"] | None = api or ("chat" if base_url else None)
        self._fallback_id = fallback_model_id

    @property
    def registry(self) -> ModelRegistry:
        return self.loaded.registry

    @property
    def given(self) -> bool:
        """Whether ``--model`` was given."""
        return self._model_id is not None

    def model(self, session: Session | None = None) -> tuple[Model, ThinkingLevel | None]:
        """The model to use, and the thinking level its name carries: ``--model``, else the
        model ``session`` last used (when the registry knows its provider), else the
        settings' ``model``, else :data:`DEFAULT_MODEL`."""
        name = self._model_id
        if name is None and session is not None:
            ref = session.build_context().model
            if ref is not None and self.registry.provider(ref.provider) is not None:
                name = f"{ref.provider}/{ref.model_id}"
        name = name or self.loaded.default_model or DEFAULT_MODEL
        spec = parse_model_spec(name)
        built = make_model(
            spec, registry=self.registry, base_url=self._base_url, api=self._api_for(spec)
        )
        level: ThinkingLevel | None = spec.thinking  # type: ignore[assignment]
        return built, level

    def fallback(self) -> Model | None:
        """The ``--fallback-model``, None when not given."""
        if self._fallback_id is None:
            return None
        spec = parse_model_spec(self._fallback_id)
        return make_model(spec, registry=self.registry)

    def _api_for(self, spec: ModelSpec) -> Literal["responses", "chat"] | None:
        # --api is for OpenAI-style providers; an Anthropic model takes none.
        info = self.registry.provider(spec.provider) if spec.provider else None
        if info is not None and info.api == "anthropic-messages":
            if self._api is not None and self._base_url is None:
                raise click.UsageError("--api is for OpenAI-style models, not Anthropic's")
            return None
        return self._api


def model_lines(registry: ModelRegistry, current: Model | None) -> list[str]:
    """``/model``'s listing: every known model with its window, output limit and prices per
    million tokens (input / output), the current one marked ``*``."""
    lines = []
    for info in registry:
        here = current is not None and (info.provider, info.id) == (current.provider, current.id)
        mark = "*" if here else " "
        window = f"{info.context_window:,}" if info.context_window else "?"
        out = f"{info.max_output_tokens:,}" if info.max_output_tokens else "?"
        price = (
            f"${info.prices.input:g} / ${info.prices.output:g}" if info.prices is not None else "?"
        )
        lines.append(f"{mark} {info.ref:<36} window {window:>9}  out {out:>7}  {price}")
    return lines


@click.command("models")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="A JSON array of models, each with the same keys.",
)
@click.option(
    "--trust-project",
    is_flag=True,
    help="Add the models of the project's .harness/settings.json.",
)
def models(as_json: bool, trust_project: bool) -> None:
    """The models --model can name: the package's, and those of the user settings (with their
    window, output limit and prices per million tokens, input / output)."""
    registry = load_registry(cwd=Path.cwd(), trust_project=trust_project).registry
    if not as_json:
        for line in model_lines(registry, None):
            echo(line)
        return
    rows = [
        {
            "ref": info.ref,
            "provider": info.provider,
            "id": info.id,
            "name": info.name,
            "context_window": info.context_window,
            "max_output_tokens": info.max_output_tokens,
            "reasoning": info.reasoning,
            "input": list(info.input),
            "prices": None if info.prices is None else attrs.asdict(info.prices),
            "aliases": list(info.aliases),
            "shorthands": list(info.shorthands),
        }
        for info in registry
    ]
    echo(json_line(rows, indent=True))
