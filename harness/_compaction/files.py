"""Which files a conversation read and modified (pi's file-operation tracking, reference §4.5).

Pure. Extracted from assistant tool calls whose arguments hold a string ``path``; which tool
names count as read, write and edit is configurable (pi hard-codes ``read``/``write``/``edit``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from attrs import field, frozen

from hooks import AssistantMessage, JSONValue, Message

__all__ = ["DEFAULT_FILE_TOOLS", "FileOps", "FileTools", "format_file_lists"]


def _names(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


@frozen(kw_only=True)
class FileTools:
    """Tool names whose ``path`` argument marks a file as read, written or edited."""

    read: frozenset[str] = field(default=frozenset({"read"}), converter=_names)
    write: frozenset[str] = field(default=frozenset({"write"}), converter=_names)
    edit: frozenset[str] = field(default=frozenset({"edit"}), converter=_names)


DEFAULT_FILE_TOOLS = FileTools()
"""pi's tool names: ``read``, ``write``, ``edit`` (our built-in tools use the same names)."""


class FileOps:
    """Accumulates read, written and edited paths; :meth:`lists` gives the final lists.

    pi's ``FileOperations`` with ``computeFileLists`` (coding-agent ``compaction/utils.ts``).
    """

    def __init__(self, tools: FileTools = DEFAULT_FILE_TOOLS) -> None:
        self._tools = tools
        self.read: set[str] = set()
        self.written: set[str] = set()
        self.edited: set[str] = set()

    def seed(self, details: JSONValue) -> None:
        """Add the ``readFiles``/``modifiedFiles`` of an earlier summary's ``details``.

        Modified files count as edited (pi). Anything not shaped like that is ignored.
        """
        if not isinstance(details, Mapping):
            return
        for key, target in (("readFiles", self.read), ("modifiedFiles", self.edited)):
            values = details.get(key)
            if isinstance(values, list):
                target.update(v for v in values if isinstance(v, str) and v)

    def add_message(self, message: Message) -> None:
        """Record the file operations of an assistant message's tool calls."""
        if not isinstance(message, AssistantMessage):
            return
        for call in message.tool_calls:
            path = call.arguments.get("path")
            if not isinstance(path, str) or not path:
                continue
            if call.name in self._tools.read:
                self.read.add(path)
            if call.name in self._tools.write:
                self.written.add(path)
            if call.name in self._tools.edit:
                self.edited.add(path)

    def add_messages(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.add_message(message)

    def lists(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(read_files, modified_files)``: modified = edited or written, sorted; read = read
        but not modified, sorted."""
        modified = self.edited | self.written
        return tuple(sorted(self.read - modified)), tuple(sorted(modified))


def format_file_lists(read_files: Iterable[str], modified_files: Iterable[str]) -> str:
    """The file lists as appended to a summary: ``<read-files>`` and ``<modified-files>``
    blocks, each one path per line, preceded by a blank line; empty lists are left out and
    nothing at all gives ``""`` (pi's ``formatFileOperations``)."""
    sections = []
    for tag, files in (("read-files", list(read_files)), ("modified-files", list(modified_files))):
        if files:
            body = "\n".join(files)
            sections.append(f"<{tag}>\n{body}\n</{tag}>")
    return "\n\n" + "\n\n".join(sections) if sections else ""
