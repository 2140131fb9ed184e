"""Protected paths: the files that grant permissions or run code the next time something
starts (the harness, Claude Code, git, an MCP client). A call that may change one is always
asked, whatever the mode or an allow rule says (Claude Code protects ``.git``, ``.claude`` and
its settings the same way), so a model in ``accept_edits``, ``bypass`` or ``dont_ask`` with
``edit`` allowed cannot give itself more rights or plant a git hook.

Paths are compared component by component without case (a case-insensitive file system opens
``.GIT/HOOKS`` as ``.git/hooks``), on both the path as written (normalised, so ``..`` is gone)
and the path with symlinks resolved.

The harness's own folders are protected too, wherever the working folder is (the user's home
holds them all): the user config, data, state and cache folders, the sessions store
(``$HARNESS_SESSIONS_DIR``, or the ``store_folders`` the supervisor was given: ``--root``) and
its checkpoint store. A write there could replace an earlier session or a checkpoint's blob.
Reading a store (:func:`private_path`: sessions, checkpoints, ``approvals.key``) is asked as
well: it holds what every other project's tools read.

Commands are matched on their text with quotes and
backslashes removed (redirections and arguments alike); a name bash computes at run time
(``$d/config``, ``$'\\x2egit'``) is not seen.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from repos import InvalidStoreUrlError, parse_store_url

from .folders import user_folder
from .signing import approval_key_path

__all__ = [
    "harness_folders",
    "private_path",
    "protected_command",
    "protected_path",
    "store_folders",
]

# (folder, what beneath it): None protects the folder and everything in it.
_FOLDERS: dict[str, tuple[str, ...] | None] = {
    ".git": None,  # hooks, config (core.hooksPath, core.fsmonitor, aliases), or a swapped .git
    ".harness": ("settings*.json", "hooks", "agents"),
    ".claude": ("settings*.json", "hooks", "agents"),
}
_FILES = (".mcp.json", ".gitconfig")  # the user's git config: hooksPath, aliases, pagers

# What the second component of a glob under .harness or .claude is tried against.
_INSIDE_SAMPLES = ("settings.json", "settings.local.json", "hooks", "agents")

_QUOTES = re.compile(r"['\"\\]")
_WORD_BREAK = re.compile(r"[\s;&|()<>`=]+")
# ``git config`` that may write (anything but a read: --get*, -l/--list, get, list).
_GIT_CONFIG = re.compile(
    r"(?:^|[\s;&|(`])(?:\S*/)?git(?:\s+-\S+(?:\s+\S+)?)*\s+config\b([^;&|\n]*)"
)  # git by any path too (/usr/bin/git config ...)
# Globs in a word are expanded as bash would, against the folders, at most this many names;
# a word with more wildcard components than _GLOB_PARTS is taken as naming anything.
_GLOB_NAMES = 256
_GLOB_PARTS = 4
_GLOB_WORDS = 16  # glob words per command expanded
_GLOB_CHARS = 1024  # a longer glob word is not expanded
_CD = re.compile(r"(?:^|[\s;&|(`])(?:cd|pushd)\s+(?:-\S+\s+)*([^\s;&|)`]+)")
_ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")  # bash's $'…' quoting
_GIT_CONFIG_READS = re.compile(r"^\s*(?:--get\S*|-l|--list|get|list)\b")


def _user_folder() -> str:
    return os.path.realpath(user_folder("config"))


def _both(paths: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """Each path absolute and normalised, and with symlinks resolved (a link to the store is
    the store)."""
    out: list[str] = []
    for p in paths:
        absolute = os.path.normpath(os.path.abspath(os.path.expanduser(os.fspath(p))))
        for form in (absolute, os.path.realpath(absolute)):
            if form not in out:
                out.append(form)
    return tuple(out)


def store_folders(extra: Iterable[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """Where sessions and checkpoints are: the user data folder (the default sessions store
    and checkpoint store), ``$HARNESS_SESSIONS_DIR`` (a folder, or an SQLite file) and
    ``extra`` (the store in use, its checkpoint store)."""
    found: list[str | os.PathLike[str]] = [user_folder("data"), *extra]
    env = os.environ.get("HARNESS_SESSIONS_DIR")
    if env:
        try:
            url = parse_store_url(env)
        except InvalidStoreUrlError:
            url = None  # the store cannot be opened either
        if url is not None and url.scheme in ("jsonl", "sqlite"):
            found.append(url.location)
    return _both(found)


def harness_folders(extra: Iterable[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """Every folder of the harness's own: :func:`store_folders`, and the user config, state
    (chat history) and cache (``$HARNESS_CACHE_DIR``: the list cache) folders."""
    cache = os.environ.get("HARNESS_CACHE_DIR")
    return (
        *store_folders(extra),
        *_both(
            [
                user_folder("config"),
                user_folder("state"),
                user_folder("cache"),
                *([cache] if cache else []),
            ]
        ),
    )


def _inside(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _resolved(path: str, cwd: Path) -> tuple[str, str]:
    absolute = os.path.normpath(os.path.join(os.path.abspath(cwd), os.path.expanduser(path)))
    return absolute, os.path.realpath(absolute)


def private_path(path: str, cwd: Path, extra: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """Why reading ``path`` is asked in every mode (the approvals key, a sessions or
    checkpoint store), or None."""
    forms = _resolved(path, cwd)
    key = os.path.realpath(approval_key_path())
    if key in forms:
        return "it reads the key that signs this user's approvals"
    if any(_inside(f, store_folders(extra)) for f in forms):
        return "it reads the sessions or checkpoints store (every project's sessions)"
    return None


def _protected_parts(parts: list[str]) -> bool:
    folded = [p.casefold() for p in parts if p not in ("", ".")]
    for i, part in enumerate(folded):
        if part == ".config" and folded[i + 1 : i + 2] in (["harness"], ["git"]):
            return True  # the user's harness settings and git config, at their default places
        if part in _FILES:
            return True
        if part not in _FOLDERS:
            continue
        inside = _FOLDERS[part]
        if inside is None:
            return True
        if i + 1 == len(folded):
            return True  # the folder itself (replaced by a file or a symlink)
        if any(fnmatch.fnmatchcase(folded[i + 1], p) for p in inside):
            return True
    return False


def protected_path(
    path: str, cwd: Path, extra: Iterable[str | os.PathLike[str]] = ()
) -> str | None:
    """Why ``path`` (relative to ``cwd``, or absolute) is protected, or None; ``extra``: more
    store folders (:func:`store_folders`)."""
    absolute = os.path.normpath(os.path.join(os.path.abspath(cwd), path))
    user = _user_folder()
    if absolute == user or absolute.startswith(user.rstrip("/") + "/"):
        return "it is in the user's harness settings folder"
    if any(_inside(f, harness_folders(extra)) for f in _resolved(path, cwd)):
        return "it is in the harness's own folders (sessions, checkpoints, state, cache)"
    if any(_inside(f, git_dirs(cwd)) for f in _resolved(path, cwd)):
        return f"{path!r} is in the git folder a .git file names (hooks, config)"
    # The absolute path too: a working folder inside .git (cwd=.git, path=hooks/pre-commit).
    if _protected_parts(path.replace("\\", "/").split("/")) or _protected_parts(
        absolute.split("/")
    ):
        return (
            f"{path!r} grants permissions or runs code the next time the harness, Claude "
            "Code or git starts"
        )
    return None


def protected_command(
    command: str, cwd: Path | None = None, extra: Iterable[str | os.PathLike[str]] = ()
) -> str | None:
    """Why ``command`` may change a protected path (it names one, in any word or redirection,
    or runs ``git config`` to write), or None. With ``cwd``, a word naming one of the
    harness's own folders (:func:`harness_folders`, ``extra`` too), something in it, or a
    folder holding a sessions or checkpoint store (``rm -r .local``) counts, relative to
    ``cwd`` or absolute; the working folder itself (``.``) and ``/`` do not."""
    text = _QUOTES.sub("", _ANSI_C.sub(_ansi_c, command).replace('$"', '"'))
    if _git_config_writes(text):
        return "it may change .git/config (git config), which can make git run commands"
    home = os.path.expanduser("~")
    here = os.path.normpath(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    # A path may be split by a cd (`cd ~/.config && cat harness/approvals.key`): each word is
    # judged from the working folder and from every folder the command changes to.
    bases = [here]
    for m in _CD.finditer(text):
        target = _home(m.group(1), home)
        bases += [os.path.normpath(os.path.join(b, target)) for b in list(bases)[:8]]
    gits = {base: git_dirs(base) for base in bases}
    globs = 0
    for word in _WORD_BREAK.split(text):
        if not word:
            continue
        # A short option's attached value (`cp -t.git/hooks x`) and each brace alternative
        # (`~/.config/{harness,x}/approvals.key`) are paths too.
        attached = word[2:] if word.startswith("-") and not word.startswith("--") else ""
        forms = [word, attached] if attached else [word]
        for form in [alt for f in forms for alt in _braces(f)]:
            expanded = _home(form, home)
            wild = any(c in "*?[" for c in expanded)
            globs += wild
            for base in bases:
                names = [expanded]
                if wild:
                    far = globs > _GLOB_WORDS or len(expanded) > _GLOB_CHARS
                    found = None if far else _globbed(expanded, base)
                    if found is None:  # past the caps: it could name anything (asked)
                        return f"it names {word!r}, a glob too wide to check for protected paths"
                    names += found
                for name in names:
                    why = _names_protected(word, name, base, cwd is not None, extra, gits[base])
                    if why is not None:
                        return why
    return None


def git_dirs(cwd: Path | str) -> tuple[str, ...]:
    """The folders a ``.git`` *file* (``gitdir: X``, as ``git init --separate-git-dir`` and
    worktrees write) in ``cwd`` or a folder above it names: git runs their hooks and config as
    it would a ``.git`` folder's. At most 4 KiB of each file is read, and only regular files."""
    found: list[str] = []
    folder = os.path.abspath(cwd)
    while True:
        dot_git = os.path.join(folder, ".git")
        try:
            fd = os.open(dot_git, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    text = os.read(fd, 4096).decode("utf-8", "replace")
                    if text.startswith("gitdir:"):
                        named = text[len("gitdir:") :].strip().splitlines()[0:1]
                        if named:
                            found.append(os.path.realpath(os.path.join(folder, named[0])))
            finally:
                os.close(fd)
        parent = os.path.dirname(folder)
        if parent == folder:
            return tuple(found)
        folder = parent


def _ansi_c(m: re.Match[str]) -> str:
    """A ``$'…'`` word's text as bash makes it (``$'.git'`` is ``.git``, ``$'\x2egit'`` too);
    text Python's decoder refuses is kept as written."""
    try:
        return m.group(1).encode("latin-1", "backslashreplace").decode("unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return m.group(1)


def _home(word: str, home: str) -> str:
    return home + word[1:] if word.startswith("~/") or word == "~" else word


def _globbed(pattern: str, base: str) -> list[str] | None:
    """The names bash's glob ``pattern`` expands to from ``base`` (dot names included, as
    with ``shopt -s dotglob``), at most :data:`_GLOB_NAMES`; None for a pattern with more
    wildcard components than :data:`_GLOB_PARTS` or one glob cannot read."""
    parts = [p for p in pattern.split("/") if any(c in "*?[" for c in p)]
    if len(parts) > _GLOB_PARTS:
        return None
    try:
        found = glob.iglob(pattern, root_dir=base, include_hidden=True)
        return list(itertools.islice(found, _GLOB_NAMES))
    except (OSError, ValueError, re.error):
        return None


def _names_protected(
    word: str,
    name: str,
    here: str,
    stores_too: bool,
    extra: Iterable[str | os.PathLike[str]],
    gits: tuple[str, ...],
) -> str | None:
    """Why the path ``name`` (``word`` as written, expanded), from the folder ``here``, is
    protected, or None."""
    user = _user_folder()
    named = os.path.normpath(os.path.join(here, name))
    if named == user or named.startswith(user.rstrip("/") + "/"):
        return "it names the user's harness settings folder"
    key = os.path.realpath(approval_key_path())
    if named == key:
        return "it names the key that signs this user's approvals"
    if named != "/" and key.startswith(named.rstrip("/") + "/"):
        # grep -r, find, tar, cp -r of a folder holding it read the key as well
        return f"it names {word!r}, a folder holding the key that signs this user's approvals"
    if stores_too and not word.startswith("-"):
        if _inside(named, harness_folders(extra)):
            return f"it names {word!r}, in the harness's own folders (sessions, checkpoints)"
        if named not in (here, "/") and any(_inside(s, [named]) for s in store_folders(extra)):
            return f"it names {word!r}, which holds the sessions or checkpoints store"
    if gits and _inside(os.path.realpath(named), gits):
        return f"it names {word!r}, in the git folder a .git file names (hooks, config)"
    parts = name.split("/")
    if _protected_parts(parts) or _glob_hits(parts) or _protected_parts(named.split("/")):
        return (
            f"it names {word!r}, which grants permissions or runs code the next time "
            "the harness, Claude Code or git starts"
        )
    return None


def _git_config_writes(text: str) -> bool:
    return any(
        not _GIT_CONFIG_READS.match(m.group(1)) and m.group(1).strip()
        for m in _GIT_CONFIG.finditer(text)
    )


def _glob_hits(parts: list[str]) -> bool:
    """A word with a glob or brace in a dot component (``.g?t/c*``, ``.{git,x}/config``)
    that could name a protected path (bash's globs never match a leading dot unless the
    pattern starts with one)."""
    if not any(c in "*?[{" for c in "".join(parts)):
        return False
    for alternative in _braces("/".join(parts).casefold()):
        names = [p for p in alternative.split("/") if p not in ("", ".")]
        for i, name in enumerate(names):
            if not name.startswith("."):
                continue
            for folder, inside in (*_FOLDERS.items(), *((f, None) for f in _FILES)):
                if not fnmatch.fnmatchcase(folder, name):
                    continue
                if inside is None or i + 1 == len(names):
                    return True
                if any(fnmatch.fnmatchcase(s, names[i + 1]) for s in _INSIDE_SAMPLES):
                    return True
    return False


def _braces(pattern: str, limit: int = 64) -> list[str]:
    """Bash's brace expansion of ``pattern`` (``a{b,c}`` -> ``ab``, ``ac``), at most ``limit``
    results (beyond that the word is taken as it is)."""
    out = [pattern]
    done: list[str] = []
    while out and len(out) + len(done) <= limit:
        item = out.pop()
        m = re.search(r"\{([^{}]*,[^{}]*)\}", item)
        if m is None:
            done.append(item)
            continue
        out += [item[: m.start()] + alt + item[m.end() :] for alt in m.group(1).split(",")]
    return done + out
