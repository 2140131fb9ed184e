"""jsonl-harness: an agent harness whose sessions are append-only JSONL trees."""

from ._errors import BusyError, ProviderError, SyncInLoopError, ToolError

__all__ = ["BusyError", "ProviderError", "SyncInLoopError", "ToolError"]
