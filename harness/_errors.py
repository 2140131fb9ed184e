"""Errors raised by the harness layer.

Tree::

    HarnessError (hooks)
    ├── BusyError                 another operation is running on this harness ("busy")
    ├── HarnessStateError         a call that needs another state, e.g. steer() when idle
    │                             ("invalid_state")
    ├── SessionNotEmptyError      prompt(initial_history=...) on a session with entries
    │                             ("session_not_empty")
    ├── PromptBlockedError        a user_prompt_submit hook refused the prompt; nothing was
    │                             written ("prompt_blocked")
    ├── SkillNotFoundError, SkillDisabledError, TemplateNotFoundError, SkillWriteRefusedError
    │                             (harness._resources) a skill or template call that does not
    │                             fit ("skill_not_found", "skill_disabled", ...)
    ├── ProviderError             a model request failed ("provider_error"); ``retryable``,
    │                             ``status``, ``error_type``, ``retry_after_s``
    │   └── MissingApiKeyError    a model was made with no key to send ("missing_api_key")
    ├── UnknownModelError         (harness._providers) a model name the registry does not know
    │                             ("unknown_model"); ``suggestions`` for "did you mean"
    ├── ModelSettingsError        a settings file's ``models``/``model`` has the wrong shape
    │                             ("invalid_model_settings")
    ├── MissingExtraError         a feature used without its optional extra installed
    │                             ("missing_extra"); ``extra`` names it
    ├── InvalidRequestError       the loop refused to send a request breaking the API's rules
    │                             ("invalid_request")
    ├── ContextOverflowError      the context does not fit even after compacting
    │                             ("context_overflow")
    ├── CompactionError           a compaction could not be committed ("compaction_failed")
    │   └── CompactionCancelledError   a hook cancelled it ("compaction_cancelled")
    ├── SummarizationError        (harness._compaction) a summary failed ("summarization_failed")
    ├── ToolError                 a tool could not run (bad input, path outside the cwd)
    │                             ("tool_error")
    └── SyncInLoopError           a ``*_sync`` method ran inside an event loop ("sync_in_loop")
"""

from __future__ import annotations

from hooks import AssistantMessage, HarnessError

__all__ = [
    "BusyError",
    "CompactionCancelledError",
    "CompactionError",
    "ContextOverflowError",
    "HarnessStateError",
    "InvalidNavigationTargetError",
    "InvalidRequestError",
    "MissingApiKeyError",
    "MissingExtraError",
    "ModelSettingsError",
    "PromptBlockedError",
    "ProviderError",
    "SessionNotEmptyError",
    "SyncInLoopError",
    "ToolError",
    "UnknownModelError",
]


class BusyError(HarnessError, RuntimeError):
    """Raised when an operation starts while another runs on the same harness."""

    code = "busy"

    def __init__(self, operation: str, running: str, where: str = "this harness") -> None:
        super().__init__(
            f"cannot start {operation}: {running} is still running on {where} "
            "(await it, or call abort() first)"
        )
        self.operation, self.running = operation, running


class ProviderError(HarnessError):
    """A model request failed.

    Attributes:
        retryable: whether sending the same request again may succeed: True for overloaded,
            rate-limit, 5xx, timeout and connection errors and for a stream cut short; never for
            ``context_overflow`` (the same request overflows again: compact first).
        status: HTTP status code, or None for errors without one (connection, mid-stream).
        error_type: what went wrong, "" if unknown. The Anthropic provider reports the API's own
            error types (``overloaded_error``, ``rate_limit_error``, ``api_error``,
            ``invalid_request_error``, ``authentication_error``, ``permission_error``,
            ``not_found_error``, ``request_too_large``, ``billing_error``, ``timeout_error``, or
            any new type the API sends) and its own: ``context_overflow`` (the prompt does not
            fit the model's context window), ``connection_error`` (no connection, or it dropped
            mid-stream), ``timeout`` (no response or no data within the request timeout),
            ``incomplete_stream`` (the body ended without ``message_stop``),
            ``stream_stalled`` (no content for ``stream_idle_timeout_s``; both providers),
            ``invalid_tool_input`` (a tool call whose input JSON is unfinished or invalid),
            ``invalid_response`` (a body that cannot be read) and ``client_error`` (the request
            could not be sent, e.g. no API key). The faux provider uses ``faux_error``.
        retry_after_s: how long the server asked to wait before retrying, in seconds (from
            ``retry-after-ms``, or ``retry-after`` as seconds or an HTTP date), or None.
        reply: when raised by ``AgentHarness.prompt()``, the error reply it persisted
            (``stop_reason="error"``); else None.
    """

    code = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        error_type: str = "",
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message, self.retryable, self.status, self.error_type = (
            message,
            retryable,
            status,
            error_type,
        )
        self.retry_after_s = retry_after_s
        self.reply: AssistantMessage | None = None


class MissingApiKeyError(ProviderError, ValueError):
    """A provider model was constructed with no credentials: no key argument, no client, and
    the environment variable it reads (``variable``) unset or empty."""

    code = "missing_api_key"

    def __init__(self, message: str, *, variable: str) -> None:
        super().__init__(message, retryable=False, error_type="missing_api_key")
        self.variable = variable


class UnknownModelError(HarnessError, LookupError):
    """A model name (``provider/id``) the registry does not know, or a provider it does not
    know. ``suggestions`` are the closest known ``provider/id`` names (maybe none); a model is
    made known by adding it to the ``models`` key of a settings file (docs/providers.md)."""

    code = "unknown_model"

    def __init__(self, name: str, suggestions: list[str], *, reason: str = "") -> None:
        hint = f"; did you mean {' or '.join(suggestions)}?" if suggestions else "."
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"unknown model {name!r}{why}{hint} A model the registry lacks can be added under "
            "'models' in the settings (docs/providers.md)"
        )
        self.name, self.suggestions, self.reason = name, suggestions, reason


class ModelSettingsError(HarnessError, ValueError):
    """The ``models`` (or ``model``) key of a settings file has the wrong shape; ``path`` names
    the file (``builtin`` for the package's own data) and ``problem`` says what is wrong."""

    code = "invalid_model_settings"

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: model settings: {problem}")
        self.path, self.problem = path, problem


class MissingExtraError(HarnessError, ImportError):
    """A feature was used without the optional dependencies it needs: install
    ``jsonl-harness[<extra>]``."""

    code = "missing_extra"

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs the optional '{extra}' dependencies: "
            f"pip install 'jsonl-harness[{extra}]'"
        )
        self.feature, self.extra = feature, extra


class ToolError(HarnessError):
    """A tool refused to run or failed; the loop turns it into an ``is_error`` tool result."""

    code = "tool_error"


class SyncInLoopError(HarnessError, RuntimeError):
    """A ``*_sync`` convenience was called from inside a running event loop."""

    code = "sync_in_loop"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name}_sync() cannot run inside a running event loop; use 'await {name}(...)'"
        )


class HarnessStateError(HarnessError, RuntimeError):
    """A call that needs another state, e.g. ``steer()`` with nothing running."""

    code = "invalid_state"


class SessionNotEmptyError(HarnessError, ValueError):
    """``initial_history`` hydrates only a new, empty session (it seeds one): the session
    already has ``entry_count`` entries, and history given twice would be duplicated."""

    code = "session_not_empty"

    def __init__(self, session_id: str, entry_count: int) -> None:
        super().__init__(
            f"initial_history is only for a new, empty session; session {session_id} already "
            f"has {entry_count} entries (prompt without initial_history to continue it)"
        )
        self.session_id, self.entry_count = session_id, entry_count


class PromptBlockedError(HarnessError):
    """A ``user_prompt_submit`` hook refused the prompt (Claude Code's ``UserPromptSubmit``
    blocking it), or one failed and so refused it (fail closed). Nothing was written to the
    session. ``reason`` is the hook's (a command hook's stderr, or its JSON ``reason``)."""

    code = "prompt_blocked"

    def __init__(self, reason: str) -> None:
        super().__init__(f"a user_prompt_submit hook refused the prompt: {reason}")
        self.reason = reason


class InvalidNavigationTargetError(HarnessError, ValueError):
    """``navigate_tree`` was given a ``label`` or ``leaf`` entry: bookkeeping, not a point of the
    conversation (tree views do not draw them). A label annotates its target and a leaf entry
    records a move to its target: navigate to that target instead (``target_id`` attribute)."""

    code = "invalid_navigation_target"

    def __init__(self, entry_id: str, kind: str, target_id: str | None) -> None:
        what = "annotates" if kind == "label" else "records a move to"
        super().__init__(
            f"{entry_id} is a {kind} entry: it {what} {target_id}; check out {target_id} instead"
        )
        self.entry_id, self.kind, self.target_id = entry_id, kind, target_id


class InvalidRequestError(HarnessError, ValueError):
    """The loop was about to send messages that break the API's rules (a bug, or a ``context``
    hook that returned broken messages). ``problems`` lists each rule broken."""

    code = "invalid_request"

    def __init__(self, problems: list[str]) -> None:
        shown = "; ".join(problems[:5]) + (
            f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        )
        super().__init__(f"refusing to send an invalid request: {shown}")
        self.problems = problems


class CompactionError(HarnessError):
    """A compaction could not be committed (bad hook result, the leaf moved meanwhile)."""

    code = "compaction_failed"


class CompactionCancelledError(CompactionError):
    """A ``session_before_compact`` hook cancelled the compaction; ``reason`` is the hook's."""

    code = "compaction_cancelled"

    def __init__(self, reason: str) -> None:
        super().__init__(f"compaction cancelled by a hook: {reason}")
        self.reason = reason


class ContextOverflowError(HarnessError):
    """The context does not fit the model's window, even after compacting once.

    Attributes:
        tokens: the estimated context size in tokens; window: the model's context window;
        largest: the biggest messages as (description, estimated tokens), biggest first.
    """

    code = "context_overflow"

    def __init__(self, tokens: int, window: int, largest: list[tuple[str, int]]) -> None:
        biggest = ", ".join(f"{what} (~{n} tokens)" for what, n in largest) or "nothing to cut"
        size = (
            f"the context (~{tokens} tokens estimated) does not fit the window ({window} tokens)"
            if tokens > window
            else f"the provider says the context is too long (estimated ~{tokens} tokens; "
            f"window {window})"
        )
        super().__init__(f"{size} even after compacting; largest: {biggest}")
        self.tokens, self.window, self.largest = tokens, window, largest
