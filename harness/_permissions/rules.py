"""Permission rules (``bash(git status:*)``, ``write(src/**)``, ``read(**/.env)``) and the
settings files they are loaded from.

A rule is a tool name, optionally with a specifier in parentheses, as in Claude Code:

- no specifier, or ``(*)``: every call of the tool;
- a tool with a command ``target`` (``bash``): the command is parsed (``shell``) into the
  simple commands bash would run, and the specifier's words are compared with their words
  after quote removal: ``prefix:*`` is those words and any after, ``*`` a wildcard. A deny or
  ask rule catches a command when any simple command matches, seen through wrappers
  (``sudo``, ``env``, ``xargs``, ``bash -c``, ...) and by the command word's basename; when
  one possibly matches (a computed word, code it cannot read, a line that does not parse) the
  call is asked. An allow rule approves a command only when every simple command is allowed,
  naming its command word literally, and the line holds nothing the words do not show
  (substitutions, redirections to files, ``&``, ...), or when the command is exactly the
  specifier's text. docs/permissions.md has the whole table.
- a tool with a path ``target``: a glob (``harness._globs``, matched by RE2 in linear time:
  ``**`` spans folders, hidden files match, braces expand to at most 256 alternatives) against
  the path relative to the working folder, as written and with symlinks resolved; deny and ask
  rules catch either, allow rules need both. A specifier starting with ``/`` or ``~`` is
  matched against absolute paths; a relative one also against paths outside the working
  folder, without their leading ``/`` (so ``**/.env`` catches them everywhere). ``read(...)``
  rules name the operation, not one tool: they apply to every tool that reads paths (read,
  grep, find, ls); ``write(...)`` and ``edit(...)`` to every tool that writes them (write,
  edit). A folder a tool walks is filtered too: files a deny or ask ``read`` rule matches are
  left out of what grep, find and ls return.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import orjson
from attrs import evolve, field, frozen

from .._fs import FileRefusedError, beneath, read_regular_file, write_file
from .._globs import GlobError, compile_glob, expanded_chars
from .claude_code import CLAUDE_CODE_TOOLS, permission_mode
from .decisions import PermissionMode, PermissionRequest
from .folders import SETTINGS_MAX_BYTES
from .shell import (
    ANSI_C,
    ParsedCommand,
    SimpleCommand,
    Spec,
    ansi_c,
    compile_spec,
    git_local_repository,
    git_repositories,
    names_code_variable,
    parse_command,
    runs_any_program,
)

__all__ = [
    "OPERATION_RULES",
    "PERMISSION_MODES",
    "PermissionRules",
    "Rule",
    "Settings",
    "add_project_rule",
    "commands_to_allow",
    "load_settings",
]

PERMISSION_MODES: tuple[PermissionMode, ...] = (
    "default",
    "accept_edits",
    "plan",
    "bypass",
    "dont_ask",
)
OPERATION_RULES: Mapping[str, str] = {"read": "read", "write": "edit", "edit": "edit"}
"""Rule names that name an operation, not one tool: the tool kind each covers."""
_RULE = re.compile(r"(?P<tool>[\w.-]+(?:__\*)?)(?:\((?P<spec>.*)\))?", re.S)


@frozen
class Rule:
    """One parsed rule; ``source`` says where it came from (``code``, a settings file path)."""

    tool: str
    spec: str | None
    text: str
    source: str = "code"

    @classmethod
    def parse(cls, text: str, source: str = "code") -> Rule:
        """Raises ValueError: not ``tool`` or ``tool(specifier)``."""
        found = _RULE.fullmatch(text.strip())
        if found is None:
            raise ValueError(f"not a permission rule: {text!r} (expected tool or tool(pattern))")
        spec = found["spec"]
        rule = cls(found["tool"], None if spec in (None, "", "*") else spec, text.strip(), source)
        if rule.spec is not None and _tool_name(rule.tool) in OPERATION_RULES:
            try:  # a path rule's glob must compile: a broken one fails its file, not a match
                compile_glob(rule.spec.removeprefix("/").removeprefix("./"))
            except GlobError as exc:
                raise ValueError(f"{text.strip()!r}: {exc}") from None
        return rule

    def matches(self, request: PermissionRequest, *, how: Literal["any", "maybe", "all"]) -> bool:
        """Whether the rule covers ``request``: ``any`` part (deny, ask), ``maybe`` any part
        possibly (a command whose words or code the rule cannot see), or ``all`` parts (allow)
        of a compound command or of the path variants."""
        if not self.covers_tool(request):
            return False
        if self.spec is None:
            return True
        if request.target is None:
            return False
        if request.kind == "execute":
            return self._matches_command(request.target, how, request.cwd)
        hits = [self.matches_path(p, how=how, cwd=request.cwd) for p in request.paths]
        return bool(hits) and (all(hits) if how == "all" else any(hits))

    def names_operation(self, operation: str) -> bool:
        """Whether the rule's tool part is ``operation`` (``read``, ``write``, ``edit``),
        any spelling."""
        return _tool_name(self.tool) == operation

    def covers_tool(self, request: PermissionRequest) -> bool:
        """Whether the rule's tool part names the call: ``read`` names every tool that reads
        paths (kind ``read``: read, grep, find, ls, and any tool of that kind), ``write`` and
        ``edit`` every tool that writes them (kind ``edit``: write, edit); ``mcp__server``
        and ``mcp__server__*`` every tool of that MCP server; any other name names that
        tool only. Names compare without case, so Claude Code's spellings
        (``Bash(...)``, ``Read(...)``, ``Edit(...)``) bind the same tools."""
        name = _tool_name(self.tool)
        operation = OPERATION_RULES.get(name)
        if operation is not None:
            return request.kind == operation
        called = request.tool_name.lower()
        if name.startswith("mcp__") and called.startswith("mcp__"):
            # Claude Code's MCP rules: ``mcp__server`` and ``mcp__server__*`` name every
            # tool of that server (tool names are ``mcp__<server>__<tool>``).
            # The server is what comes before the first ``__`` after the prefix (a server's
            # name has no ``__`` and does not end in ``_``), compared whole: a rule for
            # ``mcp__a_`` never covers ``mcp__a___x``, server ``a``'s tool ``_x``.
            server = name.removesuffix("__*").removeprefix("mcp__")
            if "__" not in server:
                called_server, sep, _ = called.removeprefix("mcp__").partition("__")
                return bool(sep) and called_server == server
        return name == called

    def allows(self, tool_name: str, command: SimpleCommand) -> bool:
        """Whether the rule, as an allow rule, approves one simple command of ``tool_name``
        (by its words; the line's constructs are the caller's to check)."""
        if _tool_name(self.tool) != tool_name.lower():
            return False
        return self.spec is None or compile_spec(self.spec).allows(command)

    def _matches_command(
        self, command: str, how: Literal["any", "maybe", "all"], cwd: Path | None = None
    ) -> bool:
        spec = compile_spec(self.spec or "")
        if spec.exact is not None and spec.exact == command:
            return True  # the command the rule names, byte for byte (an approve-always key)
        parsed = parse_command(command)
        if how == "all":
            commands = parsed.commands if cwd is None else commands_to_allow(parsed, cwd)
            return parsed.allowable and bool(commands) and all(spec.allows(c) for c in commands)
        if self._matches_text(" ".join(command.split())):
            return True
        found = spec.finds(parsed)
        if found == "yes":
            return True
        # The words the rule names, written anywhere in the command: possibly run (asked).
        return how == "maybe" and (
            found == "maybe"
            or spec.mentioned_in(command)
            or names_code_variable(command)
            or (cwd is not None and _runs_through_a_link(spec, command, parsed, cwd))
        )

    def _matches_text(self, text: str) -> bool:
        """The specifier against the command's text, blanks squeezed: deny and ask rules catch
        what a text pattern catches, on top of what they find in the words."""
        return compile_spec(self.spec or "").text.fullmatch(text)

    def matches_path(
        self,
        path: str,
        *,
        how: Literal["any", "maybe", "all"] = "any",
        cwd: str | os.PathLike[str] | None = None,
    ) -> bool:
        """Whether the specifier's glob matches ``path`` (relative to the working folder
        ``cwd``, or absolute outside it).

        A specifier starting with ``/`` or ``~`` is matched against the absolute path (a
        relative one joined to ``cwd``). Claude Code's spellings: ``//abs/**`` is an absolute
        path too, ``./src/**`` a relative one. Claude Code reads ``/src/**`` as relative to
        the settings file's project, where we read an absolute path; a deny or ask rule
        (``how`` other than ``all``) catches the relative reading too, so a rule written for
        Claude Code never denies less here, while an allow rule keeps the absolute reading
        alone and never allows more. Likewise a deny or ask rule without ``/`` (``.env``,
        ``*.key``) also matches that name at any depth, as a gitignore pattern does. A
        relative specifier (``**``, ``src/**``, ``./**``) in an allow rule matches only paths
        inside the working folder; in a deny or ask rule it also matches an outside path
        without its leading ``/``.
        """
        spec = self.spec or ""
        if spec.startswith(("/", "~")):
            pattern = spec[1:] if spec.startswith("//") else os.path.expanduser(spec)
            full = path
            if not os.path.isabs(path) and cwd is not None:
                full = os.path.normpath(os.path.join(cwd, path))
            if os.path.isabs(full) and _glob_matches(pattern, full, how):
                return True
            return (
                how != "all"
                and spec.startswith("/")
                and not spec.startswith("//")
                and not os.path.isabs(path)
                and _glob_matches(spec[1:], path, how)
            )
        anchored = spec.startswith("./")
        if anchored:
            spec = spec[2:]
        if os.path.isabs(path) and how == "all":
            # a relative allow rule (`read(**)`, `write(**/*.py)`) is about the working
            # folder: it never approves a path outside it (review 14, finding 5: `~/.ssh` read
            # and an IPython startup file written unasked); deny and ask rules still catch one
            return False
        candidate = path.lstrip("/") if os.path.isabs(path) else path
        if _glob_matches(spec, candidate, how):
            return True
        # Claude Code's rules are gitignore patterns, where one without "/" names a file at
        # any depth (Read(.env) is sub/.env too): deny and ask rules catch that reading as
        # well, so a rule written for Claude Code never denies less; allow rules never float.
        floats = how != "all" and not anchored and "/" not in spec.rstrip("/")
        return floats and _glob_matches("**/" + spec, candidate, how)


def _glob_matches(pattern: str, path: str, how: Literal["any", "maybe", "all"]) -> bool:
    """``pattern`` against ``path`` in linear time (``harness._globs``). A pattern that cannot
    be compiled (``Rule.parse`` refuses those, but a ``Rule`` may be built directly) catches
    every path for a deny or ask rule and none for an allow rule."""
    try:
        return compile_glob(pattern).matches(path)
    except GlobError:
        return how != "all"


def _tool_name(name: str) -> str:
    """A rule's tool name as ours: lower case, Claude Code's ``Glob`` as ``find``."""
    lowered = name.lower()
    return CLAUDE_CODE_TOOLS.get(lowered, lowered)


def _path_pattern_chars(texts: Iterable[str]) -> int:
    """The characters the path rules among ``texts`` expand to, counted without compiling
    (a rule that does not parse, or whose glob is refused, counts nothing here: parsing it
    reports it)."""
    total = 0
    for text in texts:
        found = _RULE.fullmatch(text.strip())
        if found is None or found["spec"] in (None, "", "*"):
            continue
        if _tool_name(found["tool"]) not in OPERATION_RULES:
            continue
        spec = found["spec"]
        try:
            total += expanded_chars(spec.removeprefix("/").removeprefix("./"))
        except GlobError:
            continue
        if total > MAX_PATTERN_CHARS_PER_FILE:
            break
    return total


def _rules(values: Iterable[str | Rule], source: str, key: str | None = None) -> tuple[Rule, ...]:
    """Parse rules; with ``key`` (a settings file's ``permissions.allow``), an error names
    the item (``permissions.allow[2]``)."""
    if isinstance(values, str):
        raise TypeError(f"rules must be a list of strings, not the string {values!r}")
    parsed = []
    for index, value in enumerate(values):
        try:
            parsed.append(value if isinstance(value, Rule) else Rule.parse(value, source))
        except ValueError as exc:
            raise ValueError(f"{key}[{index}]: {exc}" if key else str(exc)) from None
    return tuple(parsed)


def _code_rules(values: Iterable[str | Rule]) -> tuple[Rule, ...]:
    return _rules(values, "code")


@frozen(kw_only=True)
class PermissionRules:
    """Allow, deny and ask rules (strings such as ``bash(git status:*)``, parsed on creation).

    Raises:
        ValueError: a string is not a rule.
    """

    allow: tuple[Rule, ...] = field(default=(), converter=_code_rules)
    deny: tuple[Rule, ...] = field(default=(), converter=_code_rules)
    ask: tuple[Rule, ...] = field(default=(), converter=_code_rules)

    def __add__(self, other: PermissionRules) -> PermissionRules:
        return PermissionRules(
            allow=(*self.allow, *other.allow),
            deny=(*self.deny, *other.deny),
            ask=(*self.ask, *other.ask),
        )


@frozen(kw_only=True)
class Settings:
    """The ``permissions`` of one settings file: rules, an optional ``mode``, and Claude
    Code's ``additionalDirectories`` (folders treated as the working folder is, as written:
    ``~`` and relative paths are resolved against the working folder when a call is decided)."""

    rules: PermissionRules = PermissionRules()
    mode: PermissionMode | None = None
    additional_directories: tuple[str, ...] = ()
    allow_write: tuple[str, ...] = ()
    """Claude Code's ``sandbox.filesystem.allowWrite``: folders a sandboxed command may write
    in beside the working folder, the additional directories and the temporary folder (as
    written: ``~`` and relative paths are resolved against the working folder)."""


def load_settings(path: Path, *, root: Path | None = None) -> Settings:
    """Read ``{"permissions": {"allow": [...], "deny": [...], "ask": [...], "mode": ...}}``
    from ``path`` (the layout of Claude Code's settings files, whose ``defaultMode`` is read as
    ``mode``; a mode may be written in either spelling, ``acceptEdits`` or ``accept_edits``;
    ``sandbox.filesystem.allowWrite``, Claude Code's list of folders a sandboxed command may
    write in, is read too; other keys beside ``permissions`` are ignored here: ``hooks`` is
    read by ``CommandHooks``).

    Never blocks and never reads without bound: a FIFO, a device or a folder is refused before
    reading, and so is a file over :data:`SETTINGS_MAX_BYTES`. With ``root`` (a project's
    folder), ``path`` is opened beneath it by the kernel: a symlink leading out is refused.

    Returns:
        Empty settings when the file does not exist.

    Raises:
        ValueError: the file cannot be read as above, is not JSON of that shape, a rule does
            not parse, it holds more than :data:`MAX_RULES` rules, or the mode is not one of
            :data:`PERMISSION_MODES` nor Claude Code's
            name of one (the message names the file and the key, e.g.
            ``permissions.allow[2]``).
    """
    try:
        # Most decisions find no settings file: a lstat says so for a fraction of the open's
        # cost (a path missing through every symlink is missing beneath the root too).
        os.lstat(path)
    except FileNotFoundError:
        return Settings()
    except OSError:
        pass  # the read below says what is wrong
    try:
        raw = read_regular_file(path, max_bytes=SETTINGS_MAX_BYTES, root=root)
        if raw is None:
            return Settings()
        data: Any = orjson.loads(raw)
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"{path}: cannot read permission settings: {exc}") from None
    permissions = data.get("permissions", {}) if isinstance(data, Mapping) else None
    if not isinstance(permissions, Mapping):
        raise ValueError(f"{path}: 'permissions' must be an object")
    known = ("allow", "deny", "ask", "mode", "defaultMode", "additionalDirectories")
    unknown = sorted(set(permissions) - set(known))
    if unknown:  # a misspelt "deny" must not pass for no rules at all
        raise ValueError(
            f"{path}: unknown key(s) in 'permissions': {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(map(repr, known))})"
        )
    try:
        lists = {k: permissions.get(k, []) for k in ("allow", "deny", "ask")}
        folders = permissions.get("additionalDirectories", [])
        for key, values in [*lists.items(), ("additionalDirectories", folders)]:
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ValueError(f"'permissions.{key}' must be a list of strings")
        if any(not v or "\0" in v for v in folders):
            raise ValueError("'permissions.additionalDirectories' holds an empty path or a NUL")
        count = sum(len(v) for v in lists.values())
        if count > MAX_RULES or len(folders) > MAX_RULES:
            # every read and every file of a walk is matched against every rule: a file
            # cannot make each call cost seconds (review 11, finding 11)
            raise ValueError(
                f"it holds {max(count, len(folders)):,} rules or folders; at most "
                f"{MAX_RULES:,} are read from one settings file"
            )
        chars = _path_pattern_chars(v for values in lists.values() for v in values)
        if chars > MAX_PATTERN_CHARS_PER_FILE:
            # each path rule is compiled to one expression: a thousand rules of 256 long
            # alternatives took minutes and gigabytes (review 12, finding 10)
            raise ValueError(
                f"its path rules expand to more than {MAX_PATTERN_CHARS_PER_FILE:,} characters "
                "of patterns"
            )
        rules = PermissionRules(
            allow=_rules(lists["allow"], str(path), "permissions.allow"),
            deny=_rules(lists["deny"], str(path), "permissions.deny"),
            ask=_rules(lists["ask"], str(path), "permissions.ask"),
        )
        return Settings(
            rules=rules,
            mode=_settings_mode(permissions),
            additional_directories=tuple(folders),
            allow_write=_allow_write(data),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def _allow_write(data: Mapping[str, Any]) -> tuple[str, ...]:
    """``sandbox.filesystem.allowWrite`` (Claude Code's key; its other ``sandbox`` keys are
    not read here)."""
    sandbox = data.get("sandbox", {})
    if not isinstance(sandbox, Mapping):
        raise ValueError("'sandbox' must be an object")
    filesystem = sandbox.get("filesystem", {})
    if not isinstance(filesystem, Mapping):
        raise ValueError("'sandbox.filesystem' must be an object")
    folders = filesystem.get("allowWrite", [])
    if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
        raise ValueError("'sandbox.filesystem.allowWrite' must be a list of strings")
    if any(not f or "\0" in f for f in folders):
        raise ValueError("'sandbox.filesystem.allowWrite' holds an empty path or a NUL")
    if len(folders) > MAX_RULES:
        raise ValueError(
            f"'sandbox.filesystem.allowWrite' holds {len(folders):,} folders; at most "
            f"{MAX_RULES:,} are read from one settings file"
        )
    return tuple(folders)


def _settings_mode(permissions: Mapping[str, Any]) -> PermissionMode | None:
    """``permissions.mode`` or Claude Code's ``permissions.defaultMode``, in either spelling;
    both may be given only when they name the same mode."""
    modes = {}
    for key in ("mode", "defaultMode"):
        value = permissions.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"'permissions.{key}' must be a string, not {value!r}")
        try:
            modes[key] = permission_mode(value)
        except ValueError as exc:
            raise ValueError(f"'permissions.{key}': {exc}") from None
    if len(set(modes.values())) > 1:
        raise ValueError(
            f"'permissions.mode' ({permissions['mode']!r}) and 'permissions.defaultMode' "
            f"({permissions['defaultMode']!r}) name different modes; keep one"
        )
    return next(iter(modes.values()), None)


MAX_PATTERN_CHARS_PER_FILE = 262_144
"""The most characters the path rules of one settings file may expand to (their brace
alternatives, what compiling them costs); beyond, the file is refused as broken."""
MAX_RULES = 1_000
"""The most rules (``allow``, ``deny`` and ``ask`` together) and ``additionalDirectories``
one settings file may hold; beyond, the file is refused as broken (every call denied,
naming it)."""


def add_project_rule(cwd: Path, rule: str) -> Path:
    """Append ``rule`` to the allow list of ``cwd/.harness/settings.json`` (created if missing;
    other content kept), replacing the file atomically.

    The file is read and written beneath ``cwd`` by the kernel (``openat2`` with
    ``RESOLVE_BENEATH``): a ``.harness`` that is a symlink to another folder (the user's config
    folder, say) is refused, never written through.

    Returns:
        The settings file's path.

    Raises:
        ValueError: the existing file is not a JSON object with a ``permissions`` object, or
            is no regular file, too large, or reached through a symlink leading out of ``cwd``.
        OSError: the file could not be written.
    """
    path = cwd / ".harness" / "settings.json"
    try:
        raw = read_regular_file(path, max_bytes=SETTINGS_MAX_BYTES, root=cwd)
        data: Any = {} if raw is None else orjson.loads(raw)
        if not isinstance(data, dict) or not isinstance(data.setdefault("permissions", {}), dict):
            raise ValueError("not a settings object")
        allow = data["permissions"].setdefault("allow", [])
        if not isinstance(allow, list):
            raise ValueError("'allow' is not a list")
        if rule not in allow:
            allow.append(rule)
        write_file(beneath(cwd, path), orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    except FileRefusedError as exc:
        raise ValueError(f"{exc}; not changed") from None
    except ValueError as exc:  # JSONDecodeError too
        raise ValueError(f"{path}: {exc}; not changed") from None
    return path


def _runs_through_a_link(spec: Spec, command: str, parsed: ParsedCommand, cwd: Path) -> bool:
    """Whether a command word may be a symlink to a program the rule names (``bin/t ->
    /usr/bin/touch`` under ``bash(touch:*)``, a link a project ships), or to a shell or a
    wrapper, which may run any: bash runs the link's target (review 5, finding 06; review 16,
    finding 2). A word with a ``/`` is resolved from every folder the line may change to
    (``cd bin && ./t``, ``env -iC bin ./t``, ``unshare --wd=bin ./t``: review 15, finding 11;
    review 16, finding 5), a bare name through the ``$PATH`` entries in the working folder
    (an activated ``.venv/bin``); a line that may set ``PATH`` or the shell's command table
    itself, or change folder to a computed one, may make any word any program."""
    folders, unknown_folder = _folders_of(parsed, str(cwd))
    sets_path = _may_set_path(command, parsed)
    local_path = [
        e
        for e in os.environ.get("PATH", "").split(os.pathsep)
        if os.path.isabs(e) and (os.path.realpath(e) + "/").startswith(os.path.realpath(cwd) + "/")
    ]
    looked: set[str] = set()
    deadline = time.monotonic() + _LINK_SECONDS
    for simple, start in (*parsed.views, *parsed.possible):
        word = simple.words[start].value if start < len(simple.words) else None
        if word is None:
            continue
        rest = " ".join(w.value for w in simple.words[start + 1 :] if w.value is not None)
        if "/" in word:
            if unknown_folder and not os.path.isabs(word):
                return True
            places = [os.path.join(f, os.path.expanduser(word)) for f in folders]
        elif sets_path:
            return True
        else:
            places = [os.path.join(e, word) for e in local_path]
        for place in places:
            if place in looked:
                continue
            looked.add(place)
            if len(looked) > _LINK_LOOKUPS or time.monotonic() > deadline:
                # Past the bounds the word may be anything: asked, never a stall (20,000
                # `./x` words from 64 folders took 35 s on the event loop, words through
                # chains of links a project ships 4.8 s per 600 characters: review 16, 6).
                return True
            real = os.path.realpath(place)
            target = os.path.basename(real)
            renamed = target != word.rsplit("/", 1)[-1] and os.path.exists(real)
            if renamed and (runs_any_program(target) or spec.mentioned_in(f"{target} {rest}")):
                return True
    return False


def commands_to_allow(parsed: ParsedCommand, cwd: Path) -> tuple[SimpleCommand, ...]:
    """The line's simple commands as allow rules judge them: a ``git push NAME`` (``git
    send-pack NAME``, ``git archive --remote NAME``) where a folder the line may run git in,
    or one above it up to the repository's top, holds ``NAME`` or ``NAME.git`` runs what that
    repository's config says, when no remote is called ``NAME``: only a rule naming every word
    approves it, as a path there (review 16, finding 8)."""
    found: list[SimpleCommand] = []
    folders: tuple[list[str], bool] | None = None
    for command in parsed.commands:
        names = [
            word.value
            for word in git_repositories(command.words[command.assignments :])
            if word.value is not None and git_local_repository(word.value) is None
        ]
        if command.runs_other is None and names:
            folders = folders or _folders_of(parsed, str(cwd))
            if (name := _holds_a_repository(names, *folders)) is not None:
                why = f"git and {name!r}, a folder there (a repository runs its config)"
                command = evolve(command, runs_other=why)
        found.append(command)
    return tuple(found)


def _holds_a_repository(names: list[str], folders: list[str], unknown: bool) -> str | None:
    """The name in ``names`` that is a file or folder git may take for a repository (``NAME``,
    ``NAME.git``) in one of ``folders`` or a folder above it, up to the first holding ``.git``
    (git runs push and archive from the top of the working tree); any when a folder is
    computed."""
    if unknown:
        return names[0]
    for folder in folders:
        while True:
            for name in names:
                if any(os.path.lexists(os.path.join(folder, n)) for n in (name, name + ".git")):
                    return name
            parent = os.path.dirname(folder)
            if os.path.lexists(os.path.join(folder, ".git")) or parent == folder:
                break
            folder = parent
    return None


_CHDIR = {"cd", "pushd"}
_MAX_FOLDERS = 64
# Places (a command word in a folder) looked up for a link per command: each a realpath, up
# to 40 links deep.
_LINK_LOOKUPS = 1_000
_LINK_SECONDS = 1.0
# A folder option of any program (env -C/--chdir, sudo -D/--chdir, unshare --wd, nsenter
# --wdns, systemd-run --working-directory, bwrap --chdir, git/make/tar -C), getopt's
# abbreviations too (`env --ch=`): taken from every command, as more folders only mean more
# places a command word is looked up in.
_FOLDER_LONG = re.compile(r"--(?:ch|dir|wd|wo|cwd)[a-z-]*")
_FOLDER_SHORT = re.compile(r"-[A-Za-z0-9]*?[CDw]")


def _folders_of(parsed: ParsedCommand, cwd: str) -> tuple[list[str], bool]:
    """The folders a line's commands may run in (the working folder, and each literal ``cd``,
    ``pushd`` target and any program's folder option, from any of them), and whether one is
    computed (a ``$x``, ``~+``, ``-``), split from a string (``env -S``) or too many to
    follow."""
    folders = [cwd]
    unknown = False
    # each command once: a command's views are the same object (a wrapper's, a new one)
    commands = {id(c): c for c in (*parsed.commands, *(view for view, _ in parsed.views))}
    for command in commands.values():
        words = [w.value for w in command.words[command.assignments :]]
        if not words:
            continue
        targets: list[str | None] = []
        if words[0] in _CHDIR:
            args = [w for w in words[1:] if w is None or not w.startswith("-")]
            targets.append(args[0] if args else os.path.expanduser("~"))
        # env by any path, or behind a wrapper (`/usr/bin/env -S`, `command env -S`)
        is_env = any(w is not None and os.path.basename(w) == "env" for w in words)
        for i, w in enumerate(words[1:], 1):
            if w is None or not w.startswith("-"):
                continue
            after = words[i + 1] if i + 1 < len(words) else None
            if is_env and (w.startswith("--s") or _bundles(w, "S")):
                unknown = True  # env -S splits a string into options: `-S'-C bin ./t'`
            if _FOLDER_LONG.match(w):
                targets.append(w.split("=", 1)[1] if "=" in w else after)
            elif (short := _FOLDER_SHORT.match(w)) is not None and not w.startswith("--"):
                glued = w[short.end() :]
                targets.append(glued.removeprefix("=") if glued else after)
        for target in targets:
            if target is None or target in ("-", "~+", "~-") or target.startswith("~+"):
                unknown = True
                continue
            folders += [
                os.path.normpath(os.path.join(f, os.path.expanduser(target))) for f in folders
            ]
            folders = list(dict.fromkeys(folders))
            if len(folders) > _MAX_FOLDERS:
                return folders[:_MAX_FOLDERS], True
    return folders, unknown


def _bundles(word: str, letter: str) -> bool:
    """Whether the short-option word ``word`` (``-iS``) holds the option ``letter``."""
    return len(word) > 1 and word[0] == "-" and word[1] != "-" and letter in word[1:]


# `PATH` named where bash may set it: an assignment, `read PATH`, `printf -v PATH`, `for PATH
# in`, `mapfile PATH`, `getopts x PATH`, `declare`/`export`, in `bash -c` or `eval` code; not
# an expansion of it (`$PATH`, `${PATH}`, `${#PATH}`).
_NAMES_PATH = re.compile(r"(?<![\w$])(?<!\$\{)(?<!\$\{[#!])PATH(?!\w)")
_QUOTES = re.compile(r"['\"\\]")
# Builtins that set a variable they are given the name of: a computed name may be PATH.
_SETS_NAMED = frozenset(
    {"read", "printf", "mapfile", "readarray", "getopts", "declare", "typeset", "local",
     "export", "readonly", "eval", "let", "unset", "set"}
)  # fmt: skip
# The shell's command table (`hash -p bin/t ls`), aliases, a loaded builtin, a sourced file.
_SETS_SEARCH = frozenset({"hash", "alias", "source", ".", "enable"})


def _may_set_path(command: str, parsed: ParsedCommand) -> bool:
    """Whether the line may change what program a bare command word runs: ``PATH`` named
    anywhere but in an expansion, as written, with quotes and backslashes removed or ``$'…'``
    decoded (review 16, finding 1); a builtin given a computed variable name; the command
    table, an alias, a loaded builtin or a sourced file."""
    decoded = ANSI_C.sub(ansi_c, command)
    if any(
        _NAMES_PATH.search(text)
        for text in (command, _QUOTES.sub("", command), _QUOTES.sub("", decoded))
    ):
        return True
    for simple in (*parsed.commands, *(view for view, _ in parsed.views)):
        words = [w.value for w in simple.words[simple.assignments :]]
        if not words:
            continue
        if words[0] in _SETS_SEARCH:
            return True
        if words[0] in _SETS_NAMED and any(w is None for w in words[1:]):
            return True
    return False
