"""Turn context messages into the three roles a provider accepts (pi's ``convertToLlm``)."""

from __future__ import annotations

from collections.abc import Iterable

from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

from ._providers.base import LlmMessage

__all__ = ["to_llm_messages"]

BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n"
)
COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n"
)


def to_llm_messages(messages: Iterable[Message]) -> tuple[LlmMessage, ...]:
    """Convert context messages for a provider request.

    User, assistant and tool-result messages pass unchanged; custom messages become user
    messages; a user's shell run (``bashExecution``) becomes a user text with its output, unless
    ``exclude_from_context``; branch and compaction summaries become user texts wrapped in
    ``<summary>`` tags (pi's wording); unknown roles are dropped.
    """
    out: list[LlmMessage] = []
    for m in messages:
        if isinstance(m, UserMessage | AssistantMessage | ToolResultMessage):
            out.append(m)
        elif isinstance(m, CustomMessage):
            out.append(UserMessage(content=m.content, timestamp=m.timestamp))
        elif isinstance(m, BashExecutionMessage):
            if not m.exclude_from_context:
                out.append(UserMessage(content=_bash_text(m), timestamp=m.timestamp))
        elif isinstance(m, BranchSummaryMessage):
            text = f"{BRANCH_SUMMARY_PREFIX}<summary>\n{m.summary}\n</summary>"
            out.append(UserMessage(content=(TextContent(text=text),), timestamp=m.timestamp))
        elif isinstance(m, CompactionSummaryMessage):
            text = f"{COMPACTION_SUMMARY_PREFIX}<summary>\n{m.summary}\n</summary>"
            out.append(UserMessage(content=(TextContent(text=text),), timestamp=m.timestamp))
    return tuple(out)


def _bash_text(m: BashExecutionMessage) -> str:
    parts = [f"Ran `{m.command}`", f"```\n{m.output.rstrip()}\n```" if m.output else "(no output)"]
    if m.cancelled:
        parts.append("(command cancelled)")
    elif m.exit_code not in (0, None):
        parts.append(f"Command exited with code {m.exit_code}")
    if m.truncated:
        parts.append(f"[output truncated; full output: {m.full_output_path or 'not kept'}]")
    return "\n".join(parts)
