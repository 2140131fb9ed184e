"""Commands whose module is imported when the command is first used (issue 24, point 6).

``harness --help`` and ``harness sessions list`` then build only what they use: each command
module imports the parts of the library its command needs (the agent loop, permissions,
checkpoints...), which take most of a start's time. A lazy command is registered with its
module, its attribute and its summary (the first paragraph of its help, which ``--help`` lists
without importing it; ``tests/harness/test_fast_start.py`` checks each summary against the
command's own help).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import click

__all__ = ["LazyCommands", "LazyGroup"]


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's ``commands``: name → command, a lazy one imported when it is first read.

    Reading any entry (``commands[name]``, ``get``, ``values``, ``items``) gives the command
    itself, so code that walks a group's commands sees what it always saw; listing the names
    (``in``, iteration, ``len``) imports nothing.
    """

    def __init__(self, commands: MutableMapping[str, click.Command]) -> None:
        self._commands: dict[str, click.Command] = dict(commands)
        self._lazy: dict[str, tuple[str, str]] = {}
        self._order: dict[str, None] = dict.fromkeys(self._commands)

    def add_lazy(self, name: str, module: str, attribute: str) -> None:
        self._lazy[name] = (module, attribute)
        self._order[name] = None

    def loaded(self, name: str) -> click.Command | None:
        """The command ``name`` if it is imported already, else None (imports nothing)."""
        return self._commands.get(name)

    def __getitem__(self, name: str) -> click.Command:
        command = self._commands.get(name)
        if command is not None:
            return command
        if name not in self._lazy:
            raise KeyError(name)
        module, attribute = self._lazy[name]
        found = getattr(importlib.import_module(module, __package__), attribute)
        if not isinstance(found, click.Command):  # pragma: no cover - a wrong table entry
            raise TypeError(f"{module}.{attribute} is not a click command")
        # Importing the module may have registered it here already (``@sessions.command()``).
        return self._commands.setdefault(name, found)

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._commands[name] = command
        self._order[name] = None

    def __delitem__(self, name: str) -> None:
        if name not in self._order:
            raise KeyError(name)
        self._commands.pop(name, None)
        self._lazy.pop(name, None)
        del self._order[name]

    def __contains__(self, name: object) -> bool:
        return name in self._order

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)


class LazyGroup(click.Group):
    """A click group whose commands may be registered lazily (:meth:`add_lazy_command`)."""

    commands: LazyCommands

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.commands)
        self._summaries: dict[str, str] = {}

    def add_lazy_command(self, name: str, target: str, summary: str) -> None:
        """Register the command ``target`` (``"._module:attribute"``, relative to
        ``harness.cli``) as ``name``; ``summary`` is what ``--help`` lists for it until it is
        imported: the first paragraph of its help."""
        module, _, attribute = target.partition(":")
        self.commands.add_lazy(name, module, attribute)
        self._summaries[name] = summary

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with a command not yet imported shown by its summary."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.loaded(name)
            if command is None and name in self._summaries:
                command = click.Command(name, help=self._summaries[name])
            elif command is None:
                command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in rows])
