"""The model registry: what each model accepts and what it costs.

The figures live in a data file of the package (``models.json``: per provider and model, the
context window, the most output tokens, whether it reasons, the kinds of input it takes, and
prices per million tokens, each model with the source and date of its figures). The user adds
or corrects models in the ``models`` key of the settings files, in the same shape (a local model
with its window and a zero price, another OpenAI-compatible server). pi keeps the same facts
per model (``contextWindow``, ``maxTokens``, ``reasoning``, ``input``, ``cost``), so the keys
are pi's.

No I/O but reading the data file once and the settings files when asked; everything else is
pure lookups and arithmetic.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections.abc import Iterator, Mapping
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import orjson
from attrs import evolve, field, frozen

from hooks import Cost, Usage

from .._errors import ModelSettingsError, UnknownModelError
from .._fs import read_regular_file

log = logging.getLogger("harness")

__all__ = [
    "API_NAMES",
    "SETTINGS_MAX_BYTES",
    "ApiName",
    "LoadedRegistry",
    "ModelInfo",
    "ModelRegistry",
    "ModelSpec",
    "Prices",
    "ProviderInfo",
    "cost_of",
    "load_registry",
    "parse_model_spec",
    "read_settings_models",
]

ApiName: TypeAlias = Literal["anthropic-messages", "openai-responses", "openai-completions"]
API_NAMES: Final[tuple[ApiName, ...]] = (
    "anthropic-messages",
    "openai-responses",
    "openai-completions",
)
"""The wire formats a provider may speak (pi's ``api`` names, stored in assistant messages)."""

THINKING_SUFFIXES: Final = ("off", "minimal", "low", "medium", "high", "xhigh")

SETTINGS_MAX_BYTES: Final = 1_000_000
"""A settings file larger than this is refused (as for the permission settings)."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,199}$")  # provider names and model ids
_PROVIDER = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_DATED = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")  # claude-...-20250514, gpt-...-2025-04-14
_MAX_TOKENS_FIGURE = 100_000_000  # no model comes near; larger is a typo
_MAX_PRICE = 100_000.0  # US dollars per million tokens


@frozen(kw_only=True)
class Prices:
    """Prices in US dollars per million tokens, split like :class:`~hooks.Usage`."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


@frozen(kw_only=True)
class ModelInfo:
    """What the registry knows of one model.

    Attributes:
        provider: provider name as stored in sessions (``anthropic``, ``openai``, ``ollama``).
        id: the model id sent to the API and stored in sessions.
        name: a human name.
        api: the wire format (:data:`API_NAMES`).
        context_window: tokens the model accepts (input and output), None when unknown.
        max_output_tokens: the most tokens one reply may have, None when unknown.
        reasoning: whether the model reasons (takes a thinking level).
        input: the kinds of input it takes (``text``, ``image``).
        prices: per million tokens; None when unknown (the cost is then unknown too).
        aliases: other ids naming the same model (dated forms, ``-latest``), sent as written.
        shorthands: short names that stand for this model and are sent as :attr:`id`
            (Claude Code's ``sonnet``, ``opus``, ``haiku``).
        source: where the figures come from; as_of: the date they were taken (YYYY-MM-DD).
        base_url: the provider's endpoint; None for the SDK's default.
        api_key_env: the environment variable holding the provider's key, if any.
    """

    provider: str
    id: str
    name: str
    api: ApiName
    context_window: int | None = None
    max_output_tokens: int | None = None
    reasoning: bool = False
    input: tuple[str, ...] = ("text",)
    prices: Prices | None = None
    aliases: tuple[str, ...] = ()
    shorthands: tuple[str, ...] = ()
    source: str = ""
    as_of: str = ""
    base_url: str | None = None
    api_key_env: str | None = None

    @property
    def ref(self) -> str:
        """``provider/id``, the form ``--model`` takes."""
        return f"{self.provider}/{self.id}"


@frozen(kw_only=True)
class ProviderInfo:
    """A provider: its wire format, endpoint, key variable and models (by id)."""

    name: str
    api: ApiName
    base_url: str | None = None
    api_key_env: str | None = None
    models: Mapping[str, ModelInfo] = field(factory=dict)
    source: str = "builtin"
    """Where it was defined last: ``builtin`` or a settings file's path."""


@frozen(kw_only=True)
class ModelSpec:
    """A model named on the command line or in code: ``[provider/]id[:thinking]``."""

    provider: str | None
    model_id: str
    thinking: str | None = None


def parse_model_spec(spec: str) -> ModelSpec:
    """Split ``provider/id[:thinking]`` (pi's ``--model`` form).

    The provider is what comes before the first ``/``; a ``:level`` suffix is taken as a
    thinking level only when it is one (``off``, ``minimal``, ``low``, ``medium``, ``high``,
    ``xhigh``), so ids with colons (``ollama/qwen3:8b``) stay whole.

    Raises:
        UnknownModelError: an empty id (code ``unknown_model``).
    """
    text = spec.strip()
    thinking = None
    head, sep, tail = text.rpartition(":")
    if sep and tail in THINKING_SUFFIXES:
        text, thinking = head, tail
    provider, slash, model_id = text.partition("/")
    if not slash:
        provider, model_id = "", text
    if not model_id:
        raise UnknownModelError(spec, [], reason="no model id given")
    return ModelSpec(provider=provider or None, model_id=model_id, thinking=thinking)


def _base_id(model_id: str) -> str:
    return _DATED.sub("", model_id.removesuffix("-latest"))


class ModelRegistry:
    """Models by provider, with lookups that accept dated ids and aliases.

    Build one with :func:`load_registry` (the package's data and the settings files) or
    :meth:`builtin`; :meth:`with_settings` adds a ``models`` mapping of a settings file.
    """

    def __init__(self, providers: Mapping[str, ProviderInfo]) -> None:
        self._providers = dict(providers)

    @classmethod
    def builtin(cls) -> ModelRegistry:
        """The models of the package's data file (read once per process)."""
        return _builtin()

    @property
    def providers(self) -> Mapping[str, ProviderInfo]:
        return dict(self._providers)

    def __iter__(self) -> Iterator[ModelInfo]:
        for provider in self._providers.values():
            yield from provider.models.values()

    def provider(self, name: str) -> ProviderInfo | None:
        return self._providers.get(name)

    def find(self, model_id: str, provider: str | None = None) -> ModelInfo | None:
        """The model ``model_id`` names, or None.

        Tried in order, in ``provider`` only when given: the exact id, an alias, then the id
        without a date suffix (``-20250514``, ``-2025-04-14``) or ``-latest``, as an id or an
        alias. So ``claude-sonnet-4-20250514`` (what Claude Code records) finds
        ``claude-sonnet-4``.
        """
        candidates = [self._providers[provider]] if provider in self._providers else []
        if provider is None:
            candidates = list(self._providers.values())
        for wanted in dict.fromkeys((model_id, _base_id(model_id))):
            for p in candidates:
                if wanted in p.models:
                    return p.models[wanted]
            for p in candidates:
                for info in p.models.values():
                    if wanted in info.aliases:
                        return info
        return None

    def expand(self, spec: ModelSpec) -> ModelSpec:
        """``spec`` with a shorthand (``sonnet``) replaced by the id and provider of the model
        that claims it (the last one defined, so a settings file's model wins); else as is."""
        for info in reversed(list(self)):
            if spec.model_id in info.shorthands and spec.provider in (None, info.provider):
                return ModelSpec(provider=info.provider, model_id=info.id, thinking=spec.thinking)
        return spec

    def suggest(self, name: str, provider: str | None = None, count: int = 3) -> list[str]:
        """The closest known ``provider/id`` names to ``name`` (for "did you mean")."""
        refs = {
            info.ref: info.id
            for info in self
            if provider is None or info.provider == provider or provider not in self._providers
        }
        wanted = name if "/" in name else name.rpartition("/")[2]
        by_id = difflib.get_close_matches(wanted, list(refs.values()), n=count, cutoff=0.5)
        by_ref = difflib.get_close_matches(name, list(refs), n=count, cutoff=0.5)
        ids = set(by_id)
        found = [ref for ref, mid in refs.items() if mid in ids]
        return list(dict.fromkeys([*by_ref, *found]))[:count]

    def require(self, spec: ModelSpec) -> ModelInfo:
        """The registry's model for ``spec``.

        Raises:
            UnknownModelError: no such provider or model; ``suggestions`` holds the closest
                names (code ``unknown_model``).
        """
        shown = f"{spec.provider}/{spec.model_id}" if spec.provider else spec.model_id
        if spec.provider is not None and spec.provider not in self._providers:
            names = difflib.get_close_matches(spec.provider, list(self._providers), n=3)
            raise UnknownModelError(
                shown,
                [f"{n}/{spec.model_id}" for n in names],
                reason=f"no provider {spec.provider!r} (known: {', '.join(self._providers)})",
            )
        found = self.find(spec.model_id, spec.provider)
        if found is None:
            raise UnknownModelError(shown, self.suggest(shown, spec.provider))
        return found

    def with_settings(self, data: object, source: str) -> ModelRegistry:
        """This registry with a settings file's ``models`` mapping added (see the module doc).

        A provider already known keeps what the mapping does not set; a model already known
        is updated field by field.

        Raises:
            ModelSettingsError: the mapping has the wrong shape (code
                ``invalid_model_settings``); nothing is added.
        """
        if not isinstance(data, Mapping):
            raise ModelSettingsError(source, "'models' must be an object of providers")
        providers = dict(self._providers)
        for name, body in data.items():
            providers[name] = _provider_from(name, body, providers.get(name), source)
        return ModelRegistry(providers)


def cost_of(usage: Usage, prices: Prices | None) -> Cost | None:
    """The cost of ``usage`` at ``prices`` (US dollars; tokens x price per million), or None
    when the prices are unknown. pi's ``calculateCost``."""
    if prices is None:
        return None
    input_ = usage.input * prices.input / 1e6
    output = usage.output * prices.output / 1e6
    cache_read = usage.cache_read * prices.cache_read / 1e6
    cache_write = usage.cache_write * prices.cache_write / 1e6
    return Cost(
        input=input_,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total=input_ + output + cache_read + cache_write,
    )


# --- reading the data file and the settings ---------------------------------------------------

_PROVIDER_KEYS: Final = frozenset({"api", "baseUrl", "apiKeyEnv", "models"})
_MODEL_KEYS: Final = frozenset(
    {
        "name",
        "contextWindow",
        "maxTokens",
        "reasoning",
        "input",
        "cost",
        "aliases",
        "shorthands",
        "source",
        "asOf",
    }
)
_COST_KEYS: Final = ("input", "output", "cacheRead", "cacheWrite")


def _provider_from(
    name: object, body: object, known: ProviderInfo | None, source: str
) -> ProviderInfo:
    where = f"provider {name!r}"
    if not isinstance(name, str) or not _PROVIDER.match(name):
        raise ModelSettingsError(
            source, f"{where}: a provider name is lower-case letters, digits, '.', '_' or '-'"
        )
    if not isinstance(body, Mapping):
        raise ModelSettingsError(source, f"{where}: must be an object")
    unknown = sorted(set(body) - _PROVIDER_KEYS)
    if unknown:
        raise ModelSettingsError(
            source, f"{where}: unknown key(s) {unknown} (known: {sorted(_PROVIDER_KEYS)})"
        )
    api = body.get("api", known.api if known else None)
    if api not in API_NAMES:
        raise ModelSettingsError(source, f"{where}: 'api' must be one of {list(API_NAMES)}")
    base_url = body.get("baseUrl", known.base_url if known else None)
    if base_url is not None and not (
        isinstance(base_url, str) and re.match(r"^https?://[^\s]+$", base_url)
    ):
        raise ModelSettingsError(source, f"{where}: 'baseUrl' must be an http(s) URL")
    key_env = body.get("apiKeyEnv", known.api_key_env if known else None)
    if key_env is not None and not (isinstance(key_env, str) and _ENV_NAME.match(key_env)):
        raise ModelSettingsError(
            source,
            f"{where}: 'apiKeyEnv' must name an environment variable (the key itself "
            "never goes in a settings file)",
        )
    raw_models = body.get("models", {})
    if not isinstance(raw_models, Mapping):
        raise ModelSettingsError(source, f"{where}: 'models' must be an object of model ids")
    models = {
        mid: evolve(m, api=api, base_url=base_url, api_key_env=key_env)
        for mid, m in (known.models.items() if known else ())
    }
    for model_id, fields in raw_models.items():
        models[model_id] = _model_from(
            name, model_id, fields, models.get(model_id), api, base_url, key_env, source
        )
    return ProviderInfo(
        name=name,
        api=api,
        base_url=base_url,
        api_key_env=key_env,
        models=models,
        source=source if body else (known.source if known else source),
    )


def _model_from(
    provider: str,
    model_id: object,
    fields: object,
    known: ModelInfo | None,
    api: ApiName,
    base_url: str | None,
    key_env: str | None,
    source: str,
) -> ModelInfo:
    where = f"model {provider}/{model_id}"
    if not isinstance(model_id, str) or not _NAME.match(model_id):
        raise ModelSettingsError(source, f"{where}: not a usable model id")
    if not isinstance(fields, Mapping):
        raise ModelSettingsError(source, f"{where}: must be an object")
    unknown = sorted(set(fields) - _MODEL_KEYS)
    if unknown:
        raise ModelSettingsError(
            source, f"{where}: unknown key(s) {unknown} (known: {sorted(_MODEL_KEYS)})"
        )
    base = known or ModelInfo(provider=provider, id=model_id, name=model_id, api=api)
    changes: dict[str, Any] = {"api": api, "base_url": base_url, "api_key_env": key_env}
    if "name" in fields:
        changes["name"] = _text(fields["name"], where, "name", source)
    for key, attr in (("contextWindow", "context_window"), ("maxTokens", "max_output_tokens")):
        if key in fields:
            changes[attr] = _token_figure(fields[key], where, key, source)
    if "reasoning" in fields:
        if not isinstance(fields["reasoning"], bool):
            raise ModelSettingsError(source, f"{where}: 'reasoning' must be true or false")
        changes["reasoning"] = fields["reasoning"]
    if "input" in fields:
        kinds = fields["input"]
        if not isinstance(kinds, list) or not set(kinds) <= {"text", "image"} or not kinds:
            raise ModelSettingsError(source, f"{where}: 'input' must list 'text' and/or 'image'")
        changes["input"] = tuple(dict.fromkeys(kinds))
    if "cost" in fields:
        changes["prices"] = _prices(fields["cost"], where, source)
    if "aliases" in fields:
        aliases = fields["aliases"]
        if not isinstance(aliases, list) or not all(
            isinstance(a, str) and _NAME.match(a) for a in aliases
        ):
            raise ModelSettingsError(source, f"{where}: 'aliases' must be a list of model ids")
        changes["aliases"] = tuple(aliases)
    if "shorthands" in fields:
        names = fields["shorthands"]
        if not isinstance(names, list) or not all(
            isinstance(a, str) and _NAME.match(a) for a in names
        ):
            raise ModelSettingsError(source, f"{where}: 'shorthands' must be a list of names")
        changes["shorthands"] = tuple(names)
    for key, attr in (("source", "source"), ("asOf", "as_of")):
        if key in fields:
            changes[attr] = _text(fields[key], where, key, source)
    if known is None and "source" not in fields:
        changes["source"] = source
    return evolve(base, **changes)


def _text(value: object, where: str, key: str, source: str) -> str:
    if not isinstance(value, str) or len(value) > 500 or not value.isprintable():
        raise ModelSettingsError(source, f"{where}: {key!r} must be a short line of text")
    return value


def _token_figure(value: object, where: str, key: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_TOKENS_FIGURE:
        raise ModelSettingsError(
            source, f"{where}: {key!r} must be a whole number of tokens, 1 to {_MAX_TOKENS_FIGURE}"
        )
    return value


def _prices(value: object, where: str, source: str) -> Prices:
    if not isinstance(value, Mapping) or not set(value) <= set(_COST_KEYS):
        raise ModelSettingsError(
            source, f"{where}: 'cost' must be an object with keys among {list(_COST_KEYS)}"
        )
    got: dict[str, float] = {}
    for key, attr in zip(_COST_KEYS, ("input", "output", "cache_read", "cache_write"), strict=True):
        price = value.get(key, 0)
        if (
            isinstance(price, bool)
            or not isinstance(price, int | float)
            or not math.isfinite(price)
            or not 0 <= price <= _MAX_PRICE
        ):
            raise ModelSettingsError(
                source, f"{where}: cost {key!r} must be US dollars per million tokens, 0 or more"
            )
        got[attr] = float(price)
    return Prices(**got)


@cache
def _builtin() -> ModelRegistry:
    raw = files("harness._providers").joinpath("models.json").read_bytes()
    data = orjson.loads(raw)
    return ModelRegistry({}).with_settings(data["providers"], "builtin")


def read_settings_models(path: Path, *, root: Path | None = None) -> tuple[object, object]:
    """The ``models`` and ``model`` values of a settings file, (None, None) when absent.

    Read like the permission settings: a non-regular file or one over
    :data:`SETTINGS_MAX_BYTES` is refused; with ``root`` the path is opened beneath it.

    Raises:
        ModelSettingsError: the file cannot be read or is not a JSON object (code
            ``invalid_model_settings``).
    """
    try:
        raw = read_regular_file(path, max_bytes=SETTINGS_MAX_BYTES, root=root)
        data: Any = None if raw is None else orjson.loads(raw)
    except (OSError, ValueError) as exc:
        raise ModelSettingsError(str(path), f"cannot read: {exc}") from None
    if data is None:
        return None, None
    if not isinstance(data, Mapping):
        raise ModelSettingsError(str(path), "a settings file must hold a JSON object")
    return data.get("models"), data.get("model")


@frozen(kw_only=True)
class LoadedRegistry:
    """A registry with the settings' default model (``model`` key), if one was set."""

    registry: ModelRegistry
    default_model: str | None = None


def load_registry(
    *,
    cwd: Path | None = None,
    user_settings: Path | None = None,
    trust_project: bool = False,
) -> LoadedRegistry:
    """The package's models plus the ``models`` of the user settings file and, when
    ``trust_project``, of ``cwd/.harness/settings.json``; and the ``model`` key (a default
    model, ``provider/id[:thinking]``) of the last file that sets one.

    A project's file comes with the folder (docs/security.md): untrusted, its ``models`` and
    ``model`` are ignored (a project could otherwise send the user's API key to a server of
    its choosing through a ``baseUrl``), and a log message says so.

    Raises:
        ModelSettingsError: a file cannot be read or has the wrong shape (code
            ``invalid_model_settings``).
    """
    from .._permissions import PROJECT_SETTINGS, user_settings_path

    registry = ModelRegistry.builtin()
    default: str | None = None
    sources: list[tuple[Path, Path | None]] = [(user_settings or user_settings_path(), None)]
    if cwd is not None:
        sources.append((cwd / PROJECT_SETTINGS, cwd))
    for path, root in sources:
        models, model = read_settings_models(path, root=root)
        if root is not None and not trust_project:
            if models is not None or model is not None:
                log.warning(
                    "%s: its 'models' and 'model' keys are ignored: the project is not trusted "
                    "(pass trust_project / --trust-project to use them)",
                    path,
                )
            continue
        if models is not None:
            registry = registry.with_settings(models, str(path))
        if model is not None:
            if not isinstance(model, str) or not model.strip():
                raise ModelSettingsError(str(path), "'model' must be a string provider/id")
            default = model
    return LoadedRegistry(registry=registry, default_model=default)
