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

import contextlib
import fnmatch
import functools
import itertools
import os
import pwd
import re
import shutil
import site
import stat
import sys
import sysconfig
import tempfile
import time
import urllib.parse
from collections.abc import Iterable
from pathlib import Path

from attrs import field, frozen

from repos import InvalidStoreUrlError, parse_store_url

from .._fs import BASH_LOG_PREFIX, SYSTEM_FOLDERS, bash_log_folder, root_only
from .._tools.sandbox import Sandbox
from .folders import user_folder
from .shell import ANSI_C, ansi_c, parse_command, without_expansions
from .signing import approval_key_path

__all__ = [
    "CONFIG_RESOURCES",
    "ProtectedPaths",
    "file_url_paths",
    "harness_folders",
    "other_bash_log",
    "private_config_file",
    "private_folders",
    "private_path",
    "protected_command",
    "protected_path",
    "python_folders",
    "sandbox_paths",
    "store_folders",
    "user_config_folders",
]

# (folder, what beneath it): None protects the folder and everything in it.
_FOLDERS: dict[str, tuple[str, ...] | None] = {
    ".git": None,  # hooks, config (core.hooksPath, core.fsmonitor, aliases), or a swapped .git
    ".hg": None,  # Mercurial's .hg/hgrc [hooks] run at its next command
    ".jj": None,  # Jujutsu's repository config (pagers, diff and merge tools it runs)
    # skills: a trusted project's skills' `build` commands run (review 10, finding 1)
    ".harness": ("settings*.json", "hooks", "agents", "skills"),
    ".agents": ("skills",),
    # Claude Code's slash commands run their `!` lines with the tools their own
    # `allowed-tools` grant, and its skills' `allowed-tools` are granted while the skill is
    # active (review 9, finding 2)
    ".claude": ("settings*.json", "hooks", "agents", "commands", "skills"),
    ".husky": None,  # husky's git hooks (git runs them through core.hooksPath)
    # lefthook's script folders (`source_dir`, `source_dir_local`): its git hook runs them
    ".lefthook": None,
    ".lefthook-local": None,
}
_FILES = (
    ".mcp.json",
    ".claude.json",  # Claude Code's user and local MCP servers and tool approvals
    ".gitconfig",  # the user's git config: hooksPath, aliases, pagers
    # Hook managers' configs: commands their installed git hook runs at the next commit.
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".lefthook.yml",
    # lint-staged's configs: the commands husky's `npx lint-staged` hook runs at every
    # commit (a `.js` one is code node runs: review 15, finding 6)
    *(f".lintstagedrc{ext}" for ext in ("", ".json", ".yaml", ".yml", ".js", ".mjs", ".cjs")),
    *(f"lint-staged.config.{ext}" for ext in ("js", "mjs", "cjs")),
    # husky v4's configs: its installed git hooks read them at every hook (review 9, 6)
    ".huskyrc",
    ".huskyrc.json",
    ".huskyrc.js",
    ".huskyrc.cjs",
    ".huskyrc.yaml",
    ".huskyrc.yml",
    "husky.config.js",
    "husky.config.cjs",
)

# What the second component of a glob under .harness or .claude is tried against.
_INSIDE_SAMPLES = ("settings.json", "settings.local.json", "hooks", "agents", "commands", "skills")

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
_CD = re.compile(
    r"(?:^|[\s;&|(`])(?:cd|pushd)\s+(?:-\S+\s+)*([^\s;&|)`<>]+)"
    # a program's folder option: env -C/--chdir, git/make/tar -C, make --directory, sudo -D,
    # systemd-run --working-directory, unshare --wd, bwrap --chdir
    # (getopt's abbreviations too: `env --ch=`, `tar --dir=`; nsenter -w: review 6, 24)
    r"|(?:^|\s)(?:-C|-D|-w|--ch[a-z]*|--dir[a-z]*|--wo[a-z-]*|--wd|--cwd|--prefix"
    r")(?:=|\s+)?([^\s;&|)`=<>]+)"
)
_BASES = 64  # folders a command's words are judged from; past that it is asked
_MAKES_LINK = re.compile(
    r"(?:^|[\s;&|(`])(?:\S*/)?(?:ln|cp)\s(?:[^;&|\n]*\s)?(?:-[A-Za-z]*s[A-Za-z]*|--symbolic\S*)"
    r"(?=[\s;&|)]|$)"
)
_GOES_ON = re.compile(r"[;&|\n]")
_BARE_CD = re.compile(r"(?:^|[\s;&|(`])cd(?:\s+-[LPe@]*|\s+--)*\s*(?=$|[;&|)`\n<>]|\d+[<>])")
_UNKNOWN_CD = re.compile(
    r"(?:^|[\s;&|(`])(?:cd(?:\s+-[LPe@]+|\s+--)*\s+-(?=$|[\s;&|)`<>])|popd\b"
    r"|pushd\s*(?=$|[;&|)`\n<>])|pushd\s+[+-]\d)|cdable_vars"
)
# Protected names anywhere in a command's text, glued to other characters or not (`.git/`
# after any character; a bare `.git` only as a name of its own, so `repo.git` URLs stay free).
_LEFTHOOK = re.compile(r"\.?lefthook(?:-local)?\.(?:ya?ml|jsonc?|toml)")
_GLUED = re.compile(
    r"\.git/|(?<![\w.-])\.git(?![\w.-])|\.mcp\.json|\.claude\.json|\.gitconfig"
    r"|\.config/(?:git|harness)\b"
    r"|\.(?:harness|claude)/(?:settings[^/\s]*\.json|hooks|agents|skills)|\.claude/commands"
    r"|\.agents/skills"
    r"|\.husky\b|\.pre-commit-config\.yaml|lefthook(?:-local)?\.(?:ya?ml|jsonc?|toml)"
    r"|(?<![\w.-])\.lefthook(?:-local)?(?![\w.-])|\.config/husky\b|\.huskyrc|husky\.config\.c?js",
    re.IGNORECASE,
)
_GIT_CONFIG_READS = re.compile(r"^\s*(?:--get\S*|-l|--list|get|list)\b")
# Other ways git writes its config or hooks: git's own `git-config` program, an alias (which
# may be `config`) defined by -c, --config-env or GIT_CONFIG_* variables, a config file named
# by GIT_CONFIG*, and a template (`git init --template`, GIT_TEMPLATE_DIR) copying its hooks.
_GIT_OTHER_WRITES = re.compile(r"git-config\b|GIT_CONFIG|GIT_TEMPLATE_DIR", re.IGNORECASE)
_FEEDS_WORDS = re.compile(r"\b(?:xargs|parallel)\b")  # programs that add words at run time
_CONFIG_WORD = re.compile(r"(?<![\w./-])config(?![\w./-])", re.IGNORECASE)
_GIT_WORD = re.compile(r"(?:^|[\s;&|(`/])git(?=$|[\s;&|)`])")
_GIT_CALL = re.compile(r"(?:^|[\s;&|(`])(?:\S*/)?git\s([^;&|\n]*)")
_GIT_CALL_WRITES = re.compile(
    r"alias\.|--config-env|--template|--separate-git-dir|\{[^}]*(?:,|\.\.)[^}]*\}"
    # init and clone take any unique prefix (`--templ=`), and init.templateDir names a
    # template too (review 6, finding 38)
    r"|\b(?:init|clone)\b[^;&|\n]*\s--(?:t|se)|init\.templatedir",
    re.I,
)  # a brace in a git call may spell any subcommand (`git con{f..f}ig`)


def _user_folder() -> str:
    return _realpath(user_folder("config"))


def _both(paths: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """Each path absolute and normalised, and with symlinks resolved (a link to the store is
    the store)."""
    out: list[str] = []
    for p in paths:
        absolute = os.path.normpath(os.path.abspath(os.path.expanduser(os.fspath(p))))
        for form in (absolute, _realpath(absolute)):
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


def git_config_files() -> tuple[str, ...]:
    """The user's and the system's git configs, as git finds them (review 6, finding 7): the
    ``$XDG_CONFIG_HOME/git`` folder (``~/.config/git``), ``~/.gitconfig``, ``/etc/gitconfig``
    and the files ``$GIT_CONFIG_GLOBAL``/``$GIT_CONFIG_SYSTEM`` name, and the files their
    ``include``/``includeIf`` lines name (review 7, finding 6: ``~/.gitconfig.local``); both
    as written and with symlinks resolved."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    named = [os.path.join(xdg, "git"), os.path.join(home, ".gitconfig"), "/etc/gitconfig"]
    # and the default place, which a git started without $XDG_CONFIG_HOME (an IDE, cron, ssh)
    # reads (review 13, finding 14)
    named.append(os.path.join(home, ".config", "git"))
    named += [v for k in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM") if (v := os.environ.get(k))]
    files = [os.path.join(n, "config") if os.path.isdir(n) else n for n in named]
    return _both([*named, *_git_includes(files)])


@functools.cache
def _interpreter_paths() -> dict[str, str]:
    """The running interpreter's install paths (fixed for the process; looked up once)."""
    return sysconfig.get_paths()


@functools.lru_cache(maxsize=4)
def _harness_command(search: str) -> str | None:
    """The absolute path of the ``harness`` command on ``search`` (a ``$PATH``), as written
    (a link not followed), or None; looked up once per ``$PATH``."""
    found = shutil.which("harness", path=search)
    return found if found is not None and os.path.isabs(found) else None


_PACKAGES = ("harness", "repos", "hooks")  # the harness's own packages (pyproject.toml)
_SHARED_OBJECT = re.compile(r"\.so(?:\.[0-9.]+)?$")


@functools.cache
def _loaded_libraries() -> tuple[str, ...]:
    """The shared objects mapped into this process when first asked (``/proc/self/maps``;
    nothing where there is none): libpython and the libraries of the extension modules
    loaded by then, as the loader found them."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.read(4_000_000).splitlines()
    except OSError:
        return ()
    found = (line.split(maxsplit=5)[-1] for line in lines if line.count(" ") >= 5)
    return tuple(
        dict.fromkeys(
            f
            for f in found
            if f.startswith("/") and _SHARED_OBJECT.search(f) and not _inside(f, SYSTEM_FOLDERS)
        )
    )


def python_folders(cwd: Path | str, *, scripts: bool = True) -> tuple[str, ...]:
    """The folders of the Python the harness runs on whose files run at its next start, and
    at every start of that Python (review 9, finding 5): its site folders
    (``site.getsitepackages()``, where a ``.pth`` line runs), the user site
    (``site.getusersitepackages()``, missing or not), the standard library
    (``sitecustomize.py``), the scripts folder (the ``harness`` entry script; left out with
    ``scripts=False``), ``pyvenv.cfg`` (which interpreter a venv runs), the absolute
    ``$PYTHONPATH`` folders outside ``cwd``, the harness's own package folders and the folder
    of the ``harness`` command found on ``$PATH`` (with ``scripts``); both as written and with
    symlinks resolved.

    Left out: a folder holding ``cwd`` or the home folder (a Python installed in the home
    folder's own ``lib``), a package folder inside ``cwd`` (the harness's source being worked
    on: the residual in docs/security.md), and, for a user other than root, folders only root
    can change."""
    named: list[str] = [*getattr(site, "getsitepackages", list)()]
    with contextlib.suppress(Exception):  # an embedded or odd Python: no user site
        named.append(site.getusersitepackages())
    paths = _interpreter_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib", *(("scripts",) if scripts else ()))
    named += [paths[k] for k in keys if k in paths]
    named.append(os.path.join(sys.prefix, "pyvenv.cfg"))
    # the interpreter itself (a venv's python is a link to it) and the shared objects it has
    # loaded from outside the system's folders (a pyenv, uv or conda build's libpython): they
    # run, unsandboxed, at the next start (review 12, finding 5)
    named.append(os.path.dirname(os.path.realpath(sys.executable)))
    # a bytecode cache kept apart from the sources ($PYTHONPYCACHEPREFIX): a `.pyc` there
    # matching a module's source is what the next start runs
    if sys.pycache_prefix:
        named.append(sys.pycache_prefix)
    # every folder (or zip) on the import path, missing ones too (watched): an editable
    # install's source folder took a `sitecustomize.py`, a missing `lib/python311.zip` a zip
    # of one (review 13, findings 6, 12); the first entry ("" or the script's folder) is not
    # the next start's
    named += [e for e in sys.path[1:] if os.path.isabs(e)]
    folders = [*named, *(_realpath(n) for n in named)]
    # the folders of the shared objects it loaded from outside the system's folders (a
    # pyenv, uv or conda build's lib/, its RUNPATH): a library planted beside libpython
    # (libm.so.6) loads at the next start (review 13, finding 9)
    named += [
        os.path.dirname(f) for f in _loaded_libraries() if not _inside(os.path.dirname(f), folders)
    ]
    if scripts:
        # The `harness` the user types, where pipx and `uv tool` put it (~/.local/bin, a link
        # into the tool's venv): the link's folder, since a folder entry cannot be held alone
        # and a replaced link runs at the next start (review 11, finding 8).
        entry = _harness_command(os.environ.get("PATH", os.defpath))
        if entry is not None:
            named.append(os.path.dirname(entry))
        # Started through a version manager's shim, what runs first is the shim and the
        # manager's own code: pyenv's `libexec` sources every `pyenv.d/exec/*.bash` hook
        # (review 13, finding 17); and any `shims` folder on $PATH (asdf's, mise's)
        pyenv = os.environ.get("PYENV_ROOT") or os.path.join(os.path.expanduser("~"), ".pyenv")
        if os.path.isdir(pyenv):
            named += [
                os.path.join(pyenv, n)
                for n in ("shims", "libexec", "bin", "plugins", "pyenv.d", "version")
            ]
        entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
        named += [e for e in entries if os.path.isabs(e) and os.path.basename(e) == "shims"]
    # $PYTHONPATH's folders come first on the path: a `sitecustomize.py` there runs at every
    # start (review 10, finding 8); one inside the working folder is the project's source
    python_path = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    outside = [e for e in python_path if os.path.isabs(e) and not _inside(e, _both([cwd]))]
    named += outside
    packages: list[str] = []
    for name in _PACKAGES:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str):
            packages.append(os.path.dirname(os.path.abspath(file)))
    start = _both([cwd])
    home = _both(["~"])
    sources = _both(packages)
    out: list[str] = []
    for path in _both([*named, *packages]):
        if _inside(start[0], [path]) or _inside(start[-1], [path]) or path == "/":
            continue  # the working folder in it: held, it could not be worked in
        if any(_inside(h, [path]) for h in home):
            continue
        if path in sources and any(_inside(path, [f]) for f in start):
            continue  # the harness's source, the project being worked on
        if os.geteuid() != 0 and root_only(path):
            continue  # only root changes it (a system Python, /usr/lib/python3)
        out.append(path)
    return tuple(dict.fromkeys(out))


def _with_journals(paths: tuple[str, ...]) -> tuple[str, ...]:
    """``paths`` and their SQLite journal files: a SQLite store's ``-wal``, ``-shm`` and
    ``-journal`` files are the store too (``s.db-wal`` holds its latest lines: review 5,
    finding 28)."""
    return (*paths, *(p + suffix for p in paths for suffix in _SQLITE_FILES))


def _realpath(path: str | os.PathLike[str]) -> str:
    """``os.path.realpath``, or the path normalised when a link on it changes while it is
    resolved (``readlink`` of a name just swapped raises: a race the rewind tests provoke);
    the open that follows a decision never follows a link it did not decide on."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.normpath(os.fspath(path))


def _inside(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _resolved(path: str, cwd: Path) -> tuple[str, str]:
    joined = os.path.join(os.path.abspath(cwd), os.path.expanduser(path))
    # realpath of the path as written: the kernel resolves `L/..` physically (L's target's
    # parent), which normpath first would turn into the folder holding L (review 6, finding 1)
    return os.path.normpath(joined), _realpath(joined)


CONFIG_RESOURCES = frozenset({"skills", "prompts", "agents", "AGENTS.md", "CLAUDE.md"})
"""What the harness reads from the user config folder for the model (the user's skills,
prompt templates, agent files and context files): the only names there a model may read
unasked. Everything else there (``settings.json`` with a store's password, MCP servers'
tokens and providers' keys, ``settings.local.json``, the approvals key, a backup) is
private (:func:`private_path`)."""
_SETTINGS_FILES = ("settings.json", "settings.local.json")


def user_config_folders() -> tuple[str, ...]:
    """The user config folder, as written and with symlinks resolved."""
    return _both([user_folder("config")])


def private_config_file(path: str) -> bool:
    """Whether the absolute, normalised ``path`` lies in the user config folder (either
    form) and is not one of :data:`CONFIG_RESOURCES` (the folder itself is not: a walk of
    it leaves such files out). Lexical: no file system access."""
    for folder in user_config_folders():
        if path.startswith(folder.rstrip("/") + "/"):
            return path[len(folder.rstrip("/")) + 1 :].split("/")[0] not in CONFIG_RESOURCES
    return False


def private_path(path: str, cwd: Path, extra: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """Why reading ``path`` is asked in every mode (the approvals key, the user's settings
    and anything else of the user config folder but :data:`CONFIG_RESOURCES`, a sessions or
    checkpoint store), or None."""
    forms = _resolved(path, cwd)
    key = _realpath(approval_key_path())
    if any(other_bash_log(f) for f in forms):
        return "it reads another harness process's command output (part of its session)"
    if key in forms or _same_file(forms[1], key):
        # the same file by another name too: a hard link (review 5, finding 36)
        return "it reads the key that signs this user's approvals"
    config = user_folder("config")
    if any(private_config_file(f) for f in forms) or any(
        _same_file(forms[1], os.fspath(config / name)) for name in _SETTINGS_FILES
    ):
        return (
            "it reads the user's harness settings (they may hold a store's password, MCP "
            "servers' tokens, providers' keys)"
        )
    if any(_inside(f, private_folders(extra)) for f in forms):
        return (
            "it reads the sessions or checkpoints store, or the harness's cache or state "
            "(every project's sessions and prompts)"
        )
    return None


def private_folders(extra: Iterable[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """What no model reads unasked: the sessions and checkpoint stores with a SQLite store's
    journal files (review 6, finding 35), and the user cache and state folders, which hold the
    sessions list cache (every session's first message) and chat's history of prompts
    (finding 36)."""
    cache = os.environ.get("HARNESS_CACHE_DIR")
    return (
        *_with_journals(store_folders(extra)),
        *_both([user_folder("state"), user_folder("cache"), *([cache] if cache else [])]),
    )


def other_bash_log(path: str) -> bool:
    """Whether ``path`` is the full output another harness process's bash tool keeps
    (``$TMPDIR/harness-bash-logs-UID/harness-bash-PID-*.log``, or in ``$TMPDIR`` itself): part
    of that process's session (review 6, 39); the shared folder itself is too."""
    folder, name = os.path.split(path)
    if not name.startswith(BASH_LOG_PREFIX) or name.startswith(f"{BASH_LOG_PREFIX}{os.getpid()}-"):
        return False
    real = _realpath(folder)
    shared = bash_log_folder()
    return real == _realpath(tempfile.gettempdir()) or (
        shared is not None and real == _realpath(shared)
    )


def _same_file(path: str, other: str) -> bool:
    """Whether ``path`` and ``other`` are one file (device and inode), False if either is
    missing."""
    try:
        a, b = os.stat(path), os.stat(other)
    except (OSError, ValueError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _git_folder_holding(
    path: str, markers: dict[str, tuple[bool, bool, bool]] | None = None
) -> str | None:
    """The innermost folder holding ``path`` (or ``path`` itself) that git takes for a git
    folder whatever its name, or would once ``path`` is written: a ``HEAD`` file beside
    ``objects`` and ``refs`` folders (the test git's own discovery applies). ``path`` itself
    counts as the one missing: a model writing ``config``, ``HEAD``, ``objects/…`` and
    ``refs/…`` one by one made a folder whose config ``git push ./evil`` ran, each write
    approved before the last made it a git folder (review 16, finding 8). ``markers`` keeps
    what each folder holds on disk, for the many words of one command."""
    folder = path
    while True:
        on_disk = markers.get(folder) if markers is not None else None
        if on_disk is None:
            on_disk = (
                os.path.isfile(os.path.join(folder, "HEAD")),
                os.path.isdir(os.path.join(folder, "objects")),
                os.path.isdir(os.path.join(folder, "refs")),
            )
            if markers is not None:
                markers[folder] = on_disk
        prefix = folder.rstrip("/") + "/"
        rest = path[len(prefix) :] if path.startswith(prefix) else ""
        if (
            (on_disk[0] or rest == "HEAD")
            and (on_disk[1] or rest == "objects" or rest.startswith("objects/"))
            and (on_disk[2] or rest == "refs" or rest.startswith("refs/"))
        ):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _protected_parts(parts: list[str]) -> bool:
    folded = [p.casefold() for p in parts if p not in ("", ".")]
    for i, part in enumerate(folded):
        if _LEFTHOOK.fullmatch(part):
            return True  # lefthook's configs and local overrides, any spelling (review 6, 22)
        if part == ".config" and folded[i + 1 : i + 2] in (["harness"], ["git"], ["husky"]):
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


def _linked_targets(cwd: Path | str) -> tuple[str, ...]:
    """Where the protected names that are symlinks lead, in ``cwd``, each folder above it and
    the home folder (``.mcp.json -> config/mcp.json``, ``.harness -> conf/harness``)."""
    home = os.path.expanduser("~")
    folders = [os.path.abspath(cwd)]
    while (parent := os.path.dirname(folders[-1])) != folders[-1]:
        folders.append(parent)
    if home not in folders:
        folders.append(home)
    return tuple(
        _realpath(path)
        for folder in folders
        for name in (*_FOLDERS, *_FILES, *_LEFTHOOK_NAMES, ".config/husky")
        if os.path.islink(path := os.path.join(folder, name))
    )


class ProtectedPaths:
    """:func:`protected_path` for many paths of one ``cwd``: the folders it compares with (the
    harness's, git's configs and folders, the Python's, what protected symlinks lead to) are
    looked up once, at first use, not for every path (a rewind judges every path a session
    file names: 5-12 ms each made 100,000 paths run for minutes; issue 26 attack, finding 2).
    Build a new one when those may have changed (before each rewind plan)."""

    def __init__(self, cwd: Path, extra: Iterable[str | os.PathLike[str]] = ()) -> None:
        self.cwd = cwd
        self._extra = tuple(extra)

    @functools.cached_property
    def _harness(self) -> tuple[str, ...]:
        return _with_journals(harness_folders(self._extra))

    @functools.cached_property
    def _git_configs(self) -> tuple[str, ...]:
        return git_config_files()

    @functools.cached_property
    def _python(self) -> tuple[str, ...]:
        return python_folders(self.cwd)

    @functools.cached_property
    def _git_dirs(self) -> tuple[str, ...]:
        return git_dirs(self.cwd)

    @functools.cached_property
    def _linked(self) -> tuple[str, ...]:
        return _linked_targets(self.cwd)

    def git_folders_made(self, written: Iterable[str]) -> dict[str, str]:
        """The written paths (relative to ``cwd``) that would be in a git folder once all of
        them are written, each with that folder (``""``: ``cwd`` itself), for folders that
        are not git folders yet: a ``HEAD`` file beside ``objects`` and ``refs`` folders,
        from the disk or from ``written``. Judging each path alone misses a git folder that
        one hostile rewind makes whole (``vendor/evil.git/HEAD``, ``config``, ``objects/x``,
        ``refs/x``), whose ``config`` git then runs at its next command there (issue 26
        recheck)."""
        paths = [os.path.normpath(p) for p in written if not os.path.isabs(p)]
        ancestors = {""} | {
            "/".join(parts[:i])
            for parts in (p.split("/") for p in paths)
            for i in range(1, len(parts))
        }

        def has(folder: str, name: str, kind: str) -> bool:
            rel = f"{folder}/{name}" if folder else name
            on_disk = os.path.join(self.cwd, rel)
            if kind == "file":
                return rel in planned or os.path.isfile(on_disk)
            return rel in ancestors or os.path.isdir(on_disk)

        planned = set(paths)
        made = {
            folder
            for folder in ancestors
            if has(folder, "HEAD", "file")
            and has(folder, "objects", "dir")
            and has(folder, "refs", "dir")
            and _git_folder_holding(os.path.join(self.cwd, folder)) is None
        }
        return {
            path: folder
            for path in paths
            for folder in sorted(made)
            if folder == "" or path.startswith(folder + "/")
        }

    def __call__(self, path: str) -> str | None:
        """Why ``path`` (relative to ``cwd``, or absolute) is protected, or None."""
        cwd = self.cwd
        absolute = os.path.normpath(os.path.join(os.path.abspath(cwd), path))
        user = _user_folder()
        if absolute == user or absolute.startswith(user.rstrip("/") + "/"):
            return "it is in the user's harness settings folder"
        resolved = _resolved(path, cwd)
        if any(_inside(f, self._harness) for f in resolved):
            return "it is in the harness's own folders (sessions, checkpoints, state, cache)"
        if any(_inside(f, self._git_configs) for f in resolved):
            return f"{path!r} is a git config git reads for every repository"
        if any(_inside(f, self._python) for f in resolved):
            return (
                f"{path!r} is in the Python installation the harness runs on (a .pth or module "
                "there runs at its next start)"
            )
        if any(_inside(f, self._git_dirs) for f in resolved):
            return f"{path!r} is in a folder git runs code from (hooks, config)"
        if (found := _git_folder_holding(resolved[1])) is not None:
            # a git folder under another name (a bare `fixtures/remote.git`): its hooks run at
            # the next push into it, its config at the next git command there (review of issue
            # 26, finding 11)
            return f"{path!r} is in a git folder ({found}): git runs its hooks and config"
        if any(_inside(f, self._linked) for f in resolved):
            # `.mcp.json -> config/mcp.json`: the target by its own name (review 7, finding 14)
            return f"{path!r} is what a protected name (a symlink such as .mcp.json) leads to"
        # The absolute path too: a working folder inside .git (cwd=.git, path=hooks/pre-commit).
        # and with symlinks resolved (a project's `cfg -> .git`: review 8, finding 8)
        if (
            _protected_parts(path.replace("\\", "/").split("/"))
            or _protected_parts(absolute.split("/"))
            or _protected_parts(resolved[1].split("/"))
        ):
            return (
                f"{path!r} grants permissions or runs code the next time the harness, Claude "
                "Code or git starts"
            )
        return None


def protected_path(
    path: str, cwd: Path, extra: Iterable[str | os.PathLike[str]] = ()
) -> str | None:
    """Why ``path`` (relative to ``cwd``, or absolute) is protected, or None; ``extra``: more
    store folders (:func:`store_folders`)."""
    return ProtectedPaths(cwd, extra)(path)


_FILE_URL = re.compile(r"file:[^\s\"'<>]*", re.IGNORECASE)
_URL_DECODES = 3  # percent-decodings tried on a file URL (`%252F` is `/` decoded twice)


def file_url_paths(text: str) -> list[str]:
    """The paths the ``file:`` URLs in ``text`` name, decoded as a program reading them
    would (review finding 8): the scheme in any case, any host (``localhost``, or another,
    which some programs ignore), percent-encoding undone (each of the first
    :data:`_URL_DECODES` decodings, so ``%2F%2F`` before the path and ``%73`` in a name are
    seen), slashes collapsed, the query and fragment dropped."""
    found: list[str] = []
    for match in itertools.islice(_FILE_URL.finditer(text), _MAX_URLS):
        spelt = match.group(0)
        for _ in range(_URL_DECODES):
            url = urllib.parse.urlsplit(spelt)
            # the host as a folder too: `file://home/u/x` is /home/u/x to some programs
            for path in (url.path, f"/{url.netloc}/{url.path}" if url.netloc else ""):
                named = "/" + path.lstrip("/") if path.startswith("/") else path
                if named and named not in found:
                    found.append(named)
            decoded = urllib.parse.unquote(spelt)
            if decoded == spelt:
                break
            spelt = decoded
    return found


_MAX_URLS = 16  # file URLs in one string judged, at most


def protected_command(
    command: str, cwd: Path | None = None, extra: Iterable[str | os.PathLike[str]] = ()
) -> str | None:
    """Why ``command`` may change a protected path (it names one, in any word or redirection,
    or runs ``git config`` to write), or None. With ``cwd``, a word naming one of the
    harness's own folders (:func:`harness_folders`, ``extra`` too), something in it, or a
    folder holding a sessions or checkpoint store (``rm -r .local``) counts, relative to
    ``cwd`` or absolute; the working folder itself (``.``) and ``/`` do not."""
    # bash joins a line continuation before anything else (`.gi\⏎t/config` is .git/config:
    # review 5, finding 26)
    joined = command.replace("\\\n", "")
    text = _QUOTES.sub("", ANSI_C.sub(ansi_c, joined).replace('$"', '"'))
    glued = (
        _GLUED.search(text)
        or _GLUED.search(urllib.parse.unquote(text))
        or next(
            (g for v in without_expansions(joined) if (g := _GLUED.search(_QUOTES.sub("", v)))),
            None,
        )
    )
    if glued is not None:
        # A protected name inside a word (sed's `w.git/config`, `x,.mcp.json`, a path in
        # python -c or awk code): named in the text, so asked (review 5, finding 12).
        return (
            f"it names {glued.group(0)!r} in its text, which grants permissions or runs code "
            "the next time the harness, Claude Code or git starts"
        )
    if any(
        len(c.words) > c.assignments and c.words[c.assignments].value is None
        for c in parse_command(command).commands
    ):
        # a command word bash computes (`{git,} config`, `/usr/bin/gi[t]`, `$x`): it could be
        # git writing its config, or anything (review 6, finding 9)
        return "its command word is computed (a glob, brace or expansion): it could be any program"
    link = _MAKES_LINK.search(text)
    if link is not None and _GOES_ON.search(text, link.end()):
        # a symlink made and used in one command: its target is judged only once it exists
        # (a relative target is relative to the link's folder: review 6, finding 6)
        return "it makes a symlink and goes on to other commands: run them after it"
    if _git_config_writes(text):
        return (
            "it may change a git config or hooks (git config, an alias, a template), which "
            "can make git run commands"
        )
    home = os.path.expanduser("~")
    here = os.path.normpath(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    # A path may be split by a cd (`cd ~/.config && cat harness/approvals.key`) or a program's
    # folder option (`env -C .. env -C ../.config cat harness/approvals.key`, `git -C`): each
    # word is judged from the working folder and from every folder the command may be in after
    # each change, from any earlier one (a change that fails leaves the folder as it was).
    written_cds = len(_CD_WORD.findall(text))
    parsed_cds = sum(
        1
        for c in parse_command(command).commands
        if len(c.words) > c.assignments and c.words[c.assignments].value in ("cd", "pushd")
    )
    if written_cds > parsed_cds:
        # `cd` written where it is no command word with its target: `{cd,} DIR`, `alias c=cd`,
        # `builtin cd "$@"` (review 6, finding 37)
        return "it changes folders in a way the harness does not follow (cd spelt otherwise)"
    if _EXECDIR.search(text):
        # find runs the command in each found file's folder (review 6, finding 24)
        return "it runs a command in the folders find walks (-execdir, -okdir)"
    if _SETS_FOLDER_VARIABLE.search(joined):
        # `HOME=x; cat ~/…` (bash's ~, $HOME and a bare cd follow it: review 6, finding 15)
        return "it sets HOME, PWD, OLDPWD or CDPATH, which decide where its words lead"
    if _LOGIN_SHELL.search(text):
        # `su -`, `sudo -i`: the code runs in a user's home (review 6, finding 16)
        return "it starts a login shell, whose folder is a user's home"
    parsed = parse_command(command)
    for c in parsed.commands:
        program = c.words[c.assignments].value if len(c.words) > c.assignments else None
        if program and "/" in program:
            runs = os.path.basename(_realpath(os.path.join(here, program)))
            if (runs == "git" or runs.startswith("git-")) and runs != program.rsplit("/")[-1]:
                # git under another name (`./g -> /usr/bin/git`: review 6, finding 32)
                return f"it runs git as {program!r}, which may write its config"
    bases = [here]
    budget = _GlobBudget(_GLOB_ENTRIES)
    if _UNKNOWN_CD.search(text):
        return "it changes to a folder the harness cannot tell (cd -, popd, pushd alone)"
    if _BARE_CD.search(text):  # `cd` alone goes home (review 5, finding 23)
        bases.append(os.path.normpath(home))
    # cd targets as the parser reads them (quotes removed word by word: `cd "a b/.."`;
    # review 6, finding 21), and as the text shows them (folder options of other programs)
    targets = [m.group(1) or m.group(2) for m in _CD.finditer(text)]
    for c in parsed.commands:
        argv = c.words[c.assignments :]
        if argv and argv[0].value in ("cd", "pushd"):
            rest = [w for w in argv[1:] if not (w.value or "").startswith("-")]
            targets += [rest[0].value] if rest and rest[0].value is not None else []
    for written in dict.fromkeys(targets):
        more: list[str] = []
        for base in bases:
            target = _expand(written, home, base)
            if target is None:
                return f"it changes to {written!r}, a folder the harness cannot tell"
            targets = [target]
            if any(c in "*?[" for c in target):
                expansions = _globbed(target, base, budget)
                if expansions is None:
                    return f"it changes to {target!r}, a glob too wide to check for protected paths"
                targets = expansions
            more += [os.path.normpath(os.path.join(base, t)) for t in targets]
        bases = list(dict.fromkeys([*bases, *more]))
        if len(bases) > _BASES:
            return "it changes folders in more ways than the harness follows for protected paths"
    if (
        _posix_class(text)
        or ("extglob" in text.casefold() and _EXTGLOB.search(text) is not None)
        or (_GLOB_OPTIONS.search(text) and any(c in text for c in "*?["))
    ):
        # glob syntax Python's glob does not read (review 5, finding 20): asked
        return "it holds a glob class or an extended glob the harness does not expand"
    words = [w for w in dict.fromkeys(_WORD_BREAK.split(text)) if w]
    # and the parser's words, quotes removed word by word (`"/data/My Sessions/x"`: finding 12)
    words += [
        w.value
        for c in parsed.commands
        for w in c.words
        if w.value is not None and any(ch.isspace() for ch in w.value)
    ]
    if len(words) * len(bases) > _CHECKS:
        return "it has more words than the harness checks for protected paths"
    seen = _Seen.now(extra, cwd is not None, here)
    decoded = urllib.parse.unquote(text)  # file:///…/harnes%73 (review 6, finding 25)
    for place in (seen.user, seen.key, *seen.harness, *seen.git_configs, *seen.python):
        if place in text or place in decoded:
            # named in the text, whatever surrounds it: a blank in it splits the words (review
            # 6, finding 12), sed's `w/…` glues a command to it (finding 26)
            return f"it names {place!r}, one of the harness's own folders or files"
    gits = {base: git_dirs(base) for base in bases}
    globs = 0
    deadline = time.monotonic() + _CHECK_SECONDS
    for word in words:
        # A short option's attached value (`cp -t.git/hooks x`) and each brace alternative
        # (`~/.config/{harness,x}/approvals.key`) are paths too.
        written = [word]
        if word.startswith("-") and not word.startswith("--"):
            # a short option's attached value, after any bundled flags (`-uo/…`: review 6,
            # finding 5): every place a path may start
            written += [word[2:]] if len(word) > 2 else []
            written += [word[i:] for i in range(3, len(word)) if word[i] in "/~.$"]
        # A path after curl's `@` or in a file:// URL is read (review 5, finding 32).
        written += [f[1:] for f in written if f.startswith("@")]
        for f in list(written):
            if f[:5].casefold() == "file:":
                url = urllib.parse.urlsplit(f)
                if url.netloc not in ("", "localhost"):
                    return f"it names {word!r}, a file URL of another host"
                written.append(urllib.parse.unquote(url.path))
        # A parameter expansion may be empty (`${x:+}/home/u/...`) or its default value
        # (`${x:-.mcp.json}`): the word both ways too.
        written += [_EXPANSION.sub("", f) for f in written if "$" in f]
        written += [_DEFAULT.sub(r"\1", f) for f in written if "${" in f]
        forms: list[str] = []
        for f in written:
            alternatives = _braces(f)
            if alternatives is None:
                return f"it names {word!r}, a brace expansion too wide to check for protected paths"
            forms += alternatives
        for form in dict.fromkeys(forms):
            for base in bases:
                if time.monotonic() > deadline:
                    # a pair through chains of links a project ships costs 25 ms (a 24 KB
                    # command took 87 s, on the event loop: review 16, finding 7)
                    return "it takes longer than the harness checks for protected paths"
                expanded = _expand(form, home, base)
                if expanded is None:
                    return f"it names {word!r}, a folder the harness cannot tell"
                names = [expanded]
                if any(c in "*?[" for c in expanded):
                    globs += 1
                    far = globs > _GLOB_WORDS * len(bases) or len(expanded) > _GLOB_CHARS
                    found = None if far else _globbed(expanded, base, budget)
                    if found is None:  # past the caps: it could name anything (asked)
                        return f"it names {word!r}, a glob too wide to check for protected paths"
                    names += found
                for name in names:
                    why = _names_protected(word, name, base, seen, gits[base])
                    if why is not None:
                        return why
    return None


_CHECKS = 20_000  # words times folders judged per command; past that it is asked
_CHECK_SECONDS = 5.0  # and the time they may take
_SQLITE_FILES = ("-wal", "-shm", "-journal")


def _posix_class(text: str) -> bool:
    """Whether ``text`` holds ``[:``, ``[=`` or ``[.`` inside an open ``[`` (``[[:alpha:]]``,
    ``[[=a=]]``, ``[[.a.]]``), in one pass (the regular expression for it took seconds on a
    line of ``[``)."""
    open_bracket = False
    for i, c in enumerate(text):
        if c == "[":
            if open_bracket and text[i + 1 : i + 2] in (":", "=", "."):
                return True
            open_bracket = True
        elif c == "]":
            open_bracket = False
    return False


_EXTGLOB = re.compile(r"[@+?*!]\(")
# shell options under which bash's globs reach what Python's glob does not (review 6, finding 10)
_GLOB_OPTIONS = re.compile(r"globstar|nocaseglob|nocasematch|globasciiranges", re.IGNORECASE)
_TILDE_USER = re.compile(r"~([a-z_][a-z0-9_-]*[$]?)(?=/|$)")
_PROC_SELF = re.compile(r"/+proc/+([^/]+)/+(root|cwd)(?=/|$)")
_DOT_PARTS = re.compile(r"/(?:\./)+|//+")
_MAGIC = re.compile(r"/(?:proc|dev/fd|dev/std)")
_CD_WORD = re.compile(r"(?<![\w.-])(?:cd|pushd)(?![\w.-])")
_EXECDIR = re.compile(r"(?:^|\s)-(?:execdir|okdir)(?=\s|$)")
_SETS_FOLDER_VARIABLE = re.compile(r"(?<![\w${])(?:HOME|PWD|OLDPWD|CDPATH)\b(?!\})")
_LOGIN_SHELL = re.compile(
    r"(?:^|[\s;&|(`])(?:\S*/)?(?:su|runuser)\s(?:[^;&|\n]*\s)?(?:-|-l|--login)(?=\s|$)"
    r"|(?:^|[\s;&|(`])(?:\S*/)?sudo\s(?:[^;&|\n]*\s)?(?:-\w*i\w*|--login)(?=\s|$)"
    r"|machinectl\s+shell"
)
_EXPANSION = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*")
_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=+?]([^}]*)\}")
_HOME_VARIABLE = re.compile(r"\$(?:HOME\b|\{HOME\})")
_PWD_VARIABLE = re.compile(r"\$(?:PWD\b|\{PWD\})")
_UNKNOWN_FOLDER = re.compile(
    r"^~-|^~[+-]?\d|\$(?:OLDPWD\b|\{OLDPWD\})|\$\{?DIRSTACK|\$\{(?:HOME|PWD)[^}A-Za-z0-9_]"
)  # ~N, ~+N, ~-N: the folder stack (review 6, finding 4)


def _expand(word: str, home: str, base: str) -> str | None:
    """``word`` with the folders bash knows statically put in: ``~``, ``~/``, ``~+`` (the
    folder the word runs in, ``base``), ``~user`` (that user's home), ``$HOME``/``${HOME}``
    and ``$PWD``/``${PWD}`` anywhere in it (review 5, finding 17); None for a word starting
    with a folder the harness cannot tell (``~-``, ``$OLDPWD``), which is asked."""
    if _UNKNOWN_FOLDER.search(word):
        return None
    if word == "~+" or word.startswith("~+/"):
        word = base + word[2:]
    elif word == "~" or word.startswith("~/"):
        word = home + word[1:]
    else:
        m = _TILDE_USER.match(word)
        if m is not None:
            with contextlib.suppress(KeyError):  # bash keeps an unknown user's ~name as written
                word = pwd.getpwnam(m.group(1)).pw_dir + word[m.end() :]
    if "$" in word:
        word = _PWD_VARIABLE.sub(lambda _: base, _HOME_VARIABLE.sub(lambda _: home, word))
    # Other spellings of one path (review 5, finding 31): `//x` is `/x` on Linux, and
    # /proc/self/root and /proc/self/cwd are the root and the command's folder.
    if word.startswith("//"):
        word = "/" + word.lstrip("/")
    if word.startswith(("/proc/", "/dev/fd", "/dev/std")):
        word = _DOT_PARTS.sub("/", word)
    proc = _PROC_SELF.match(word)
    if proc is not None:
        if proc.group(1) not in ("self", "thread-self"):
            return None  # another process's folders: the harness cannot tell
        rest = word[proc.end() :]
        word = ("/" + rest.lstrip("/")) if proc.group(2) == "root" else base + rest
    elif _MAGIC.match(word) and ".." in word.split("/"):
        return None  # `..` through /proc or /dev/fd's magic links (review 6, finding 17)
    return word


@frozen
class _Seen:
    """What a command's words are compared with, looked up once per command (a long command
    once paid these lookups for every word: review 5, finding 15)."""

    user: str
    key: str
    harness: tuple[str, ...]
    stores: tuple[str, ...]
    stores_too: bool
    git_configs: tuple[str, ...]
    python: tuple[str, ...]
    # what each folder looked at holds of a git folder (HEAD, objects, refs)
    git_markers: dict[str, tuple[bool, bool, bool]] = field(factory=dict)

    @classmethod
    def now(cls, extra: Iterable[str | os.PathLike[str]], stores_too: bool, cwd: str) -> _Seen:
        extra = tuple(extra)

        return cls(
            user=_user_folder(),
            key=_realpath(approval_key_path()),
            harness=_with_journals(harness_folders(extra)),
            stores=_with_journals(store_folders(extra)),
            stores_too=stores_too,
            git_configs=git_config_files(),
            # not the scripts folder: running `.venv/bin/python` changes nothing (the sandbox
            # and the write tool hold it)
            python=python_folders(cwd, scripts=False),
        )


def git_dirs(cwd: Path | str) -> tuple[str, ...]:
    """The folders outside a ``.git`` folder from which git runs code for ``cwd``, protected
    as ``.git`` is: those a ``.git`` *file* (``gitdir: X``, as ``git init --separate-git-dir``
    and worktrees write) in ``cwd`` or a folder above it names (their hooks and config), and
    the hooks folder ``core.hooksPath`` sets (husky's ``.husky/_``, a ``.githooks`` folder) in
    the nearest repository's config and its ``config.worktree``, the user's and system's git
    config, and the files these include; and the files the repository's configs include
    (3 levels). At most :data:`_CONFIG_BYTES` of each file is read, and only regular files."""
    found: list[str] = []
    hooks: list[str] = []
    configs: list[tuple[str, str]] = []  # (config file, the work tree its relative paths use)
    folder = os.path.abspath(cwd)
    while True:
        dot_git = os.path.join(folder, ".git")
        text = _read_regular(dot_git, 4096)
        if text is not None and text.startswith("gitdir:"):
            named = text[len("gitdir:") :].strip().splitlines()[0:1]
            if named:
                target = _realpath(os.path.join(folder, named[0]))
                found.append(target)
                if not configs:
                    common = (_read_regular(os.path.join(target, "commondir"), 4096) or "").strip()
                    configs.append((os.path.join(target, "config"), folder))
                    if common:
                        configs.append((os.path.join(target, common, "config"), folder))
        elif not configs and os.path.isdir(dot_git):
            configs.append((os.path.join(dot_git, "config"), folder))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    tree = configs[0][1] if configs else os.path.abspath(cwd)
    # the worktree's own config (`git config --worktree`, read with extensions.worktreeConfig)
    # beside each repository config (review 9, finding 17)
    configs += [
        (os.path.join(os.path.dirname(c), "config.worktree"), t)
        for c, t in list(configs)
        if os.path.basename(c) == "config"
    ]
    # the files the repository's configs include are its config too (finding 17: a tracked
    # `tools/git.inc` took a core.fsmonitor)
    for config, work_tree in list(configs):
        for included in _git_includes([config]):
            found.append(_realpath(included))
            configs.append((included, work_tree))
    for user_config in (
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        "/etc/gitconfig",
    ):
        configs.append((user_config, tree))
        configs += [(included, tree) for included in _git_includes([user_config])]
    for config, work_tree in configs:
        value = _hooks_path(_read_regular(config, _CONFIG_BYTES) or "")
        if not value:
            continue
        hooks_dir = _realpath(os.path.join(work_tree, _home(value, home)))
        # A file (hooksPath=/dev/null turns hooks off) runs nothing; the work tree itself or a
        # folder above it would protect every file (only its hook names could run).
        if (os.path.lexists(hooks_dir) and not os.path.isdir(hooks_dir)) or _inside(
            _realpath(work_tree), [hooks_dir]
        ):
            continue
        hooks.append(hooks_dir)
    return tuple(found + hooks)


_CONFIG_BYTES = 1 << 16
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)\s*("(?:[^"\\]|\\.)*")?\s*\]\s*(.*)$')
_HOOKS_PATH = re.compile(r"^\s*hookspath\s*=\s*(.*)$", re.IGNORECASE)


def _hooks_path(
    config: str, section_name: str = "core", key: re.Pattern[str] = _HOOKS_PATH
) -> str | None:
    """The last ``core.hooksPath`` (or ``section_name``'s ``key``) in the git config text
    ``config`` (git's last one wins), or None. Git's syntax: sections and keys are
    case-insensitive, a value may be quoted and is cut at an unquoted ``#`` or ``;``;
    ``[core] hooksPath = x`` on one line counts too."""
    found: str | None = None
    section = ""
    for raw in config.splitlines():
        line = raw
        header = _SECTION.match(line)
        if header is not None:
            section = header.group(1).casefold() + ("" if header.group(2) is None else " sub")
            line = header.group(3)
        m = key.match(line)
        if m is not None and section == section_name:
            found = _config_value(m.group(1))
    return found or None


_TEMPLATE_DIR = re.compile(r"^\s*templatedir\s*=\s*(.*)$", re.IGNORECASE)


def _config_value(text: str) -> str:
    """A git config value as git reads it: quotes removed, cut at an unquoted comment."""
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c in "#;" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def _read_regular(path: str, limit: int) -> str | None:
    """At most ``limit`` bytes of ``path`` as text, None unless it is a regular file (no
    symlink followed at its last component, no FIFO opened for long)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _home(word: str, home: str) -> str:
    return home + word[1:] if word.startswith("~/") or word == "~" else word


class _GlobBudget:
    """Folder entries one command's glob words may read in all (review 12, finding 3: 16
    words such as ``../*/*/*z1`` from 40 ``cd`` folders walked a 64,000-name tree for each
    pair, 41 s for a 1 KB command, minutes under a ``node_modules``), and the expansions
    already made."""

    def __init__(self, entries: int) -> None:
        self.left = entries
        self.done: dict[str, list[str] | None] = {}  # by the folder's real path and pattern


_GLOB_ENTRIES = 100_000  # folder entries read per command for its globs; past that, asked


def _globbed(pattern: str, base: str, budget: _GlobBudget) -> list[str] | None:
    """The names bash's glob ``pattern`` expands to from ``base`` (dot names included, as
    with ``shopt -s dotglob``; bash's ``[^x]`` as ``[!x]``), written as the pattern is
    (relative stays relative), at most :data:`_GLOB_NAMES`; None for a pattern with more
    wildcard components than :data:`_GLOB_PARTS`, more names, or more folder entries to read
    than ``budget`` has left (each is then asked)."""
    parts = pattern.split("/")
    if sum(1 for p in parts if _magic(p)) > _GLOB_PARTS:
        return None
    key = f"{_realpath(base)}\0{pattern}"  # `..` is taken physically, as the kernel does
    if key in budget.done:
        return budget.done[key]
    found: list[str] | None = [""] if parts[0] else ["/"]
    for i, part in enumerate(parts[0 if parts[0] else 1 :]):
        last = i == len(parts) - (1 if parts[0] else 2)
        found = _glob_step(found or [], part, base, last, budget)
        if not found:
            break
    # more than the cap: one past it could be protected (review 5, finding 29), so asked
    if found is not None and len(found) > _GLOB_NAMES:
        found = None
    budget.done[key] = found
    return found


def _magic(part: str) -> bool:
    return any(c in "*?[" for c in part)


def _glob_step(
    prefixes: list[str], part: str, base: str, last: bool, budget: _GlobBudget
) -> list[str] | None:
    """Each of ``prefixes`` (as written) followed by the names ``part`` matches; None past the
    budget or the names cap."""
    out: list[str] = []
    for prefix in prefixes:
        folder = os.path.join(base, prefix) if prefix else base
        if not part:  # a trailing slash: folders only
            if os.path.isdir(folder):
                out.append(prefix + "/" if prefix and not prefix.endswith("/") else prefix)
            continue
        if not _magic(part):
            path = os.path.join(prefix, part) if prefix else part
            if (os.path.lexists if last else os.path.isdir)(os.path.join(base, path)):
                out.append(path)
            continue
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    budget.left -= 1
                    if budget.left < 0:
                        return None
                    if fnmatch.fnmatchcase(entry.name, part.replace("[^", "[!")) and (
                        last or entry.is_dir()
                    ):
                        out.append(os.path.join(prefix, entry.name) if prefix else entry.name)
                        if last and len(out) > _GLOB_NAMES:  # (folders on the way: the budget)
                            return None
        except (OSError, ValueError, re.error):
            continue  # as glob: a folder it cannot read matches nothing
    return out


def _names_protected(
    word: str, name: str, here: str, seen: _Seen, gits: tuple[str, ...]
) -> str | None:
    """Why the path ``name`` (``word`` as written, expanded), from the folder ``here``, is
    protected, or None."""
    named = os.path.normpath(os.path.join(here, name))
    why = _names_protected_at(word, name, named, here, seen, gits)
    real = _realpath(os.path.join(here, name))  # physical `..`, as the kernel
    if why is None and real != named:
        # a symlink on the way (`h -> .git/hooks`, `notes.txt -> ~/.config/harness/...`, which
        # a project can ship): the path it reaches counts as well (review 5, findings 03, 04)
        why = _names_protected_at(word, real, real, here, seen, gits)
    return why


def _names_protected_at(
    word: str, name: str, named: str, here: str, seen: _Seen, gits: tuple[str, ...]
) -> str | None:
    if other_bash_log(named):
        return f"it names {word!r}, another harness process's command output"
    if named == seen.user or named.startswith(seen.user.rstrip("/") + "/"):
        return "it names the user's harness settings folder"
    if _inside(named, seen.git_configs):
        return f"it names {word!r}, a git config git reads for every repository"
    if _inside(named, seen.python):
        return f"it names {word!r}, in the Python installation the harness runs on"
    if named == seen.key:
        return "it names the key that signs this user's approvals"
    if named != "/" and seen.key.startswith(named.rstrip("/") + "/"):
        # grep -r, find, tar, cp -r of a folder holding it read the key as well
        return f"it names {word!r}, a folder holding the key that signs this user's approvals"
    if seen.stores_too and not name.startswith("-"):
        if _inside(named, seen.harness):
            return f"it names {word!r}, in the harness's own folders (sessions, checkpoints)"
        if named not in (here, "/") and any(_inside(s, [named]) for s in seen.stores):
            return f"it names {word!r}, which holds the sessions or checkpoints store"
    if gits and _inside(_realpath(named), gits):
        return f"it names {word!r}, in a folder git runs code from (hooks, config)"
    if (found := _git_folder_holding(named, seen.git_markers)) is not None:
        # a bare repository under any name, or the one the command would complete
        # (`mkdir evil/refs` beside HEAD and objects/: review 16, finding 8)
        return f"it names {word!r}, in a git folder ({found}): git runs its hooks and config"
    parts = name.split("/")
    if _protected_parts(parts) or _glob_hits(parts) or _protected_parts(named.split("/")):
        return (
            f"it names {word!r}, which grants permissions or runs code the next time "
            "the harness, Claude Code or git starts"
        )
    return None


def _git_config_writes(text: str) -> bool:
    """Whether ``text`` (a command, quotes removed) may make git write a config or a hook:
    ``git config`` but a read, or any spelling in :data:`_GIT_OTHER_WRITES` and
    :data:`_GIT_CALL_WRITES` (review 5, finding 01)."""
    if _GIT_OTHER_WRITES.search(text):
        return True
    for word in _WORD_BREAK.split(text):
        if "{" in word:  # `{git,} config`: a brace may spell git (review 6, finding 9)
            alternatives = _braces(word)
            if alternatives is None or any(
                os.path.basename(a) in ("git", "git-config") for a in alternatives
            ):
                return True
    if any(_GIT_CALL_WRITES.search(m.group(1)) for m in _GIT_CALL.finditer(text)):
        return True
    # git given its words at run time (`echo config … | xargs git`): `config` anywhere with
    # git as a word of the command (review 6, finding 3)
    if _GIT_WORD.search(text) and _CONFIG_WORD.search(
        text if _FEEDS_WORDS.search(text) else _GIT_CONFIG.sub(" ", text)
    ):
        return True
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
    alternatives = _braces("/".join(parts).casefold().replace("[^", "[!"))
    if alternatives is None:
        return True  # too many to tell: it could name one
    for alternative in alternatives:
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


_BRACE_EXPRESSION = re.compile(
    r"\{(?:([^{}]*,[^{}]*)|(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?)\}"
)


def _braces(pattern: str, limit: int = 64) -> list[str] | None:
    """Bash's brace expansion of ``pattern`` (``a{b,c}`` -> ``ab``, ``ac``; sequences
    ``{g..g}``, ``{1..3}``, ``{a..e..2}`` too: review 5, finding 20); None past ``limit``
    results, which the callers ask about (a cap that kept the rest unexpanded let a third
    group name `.git`: finding 30)."""
    out = [pattern]
    done: list[str] = []
    while out:
        if len(out) + len(done) > limit:
            return None
        item = out.pop()
        m = _BRACE_EXPRESSION.search(item)
        if m is None:
            done.append(item)
            continue
        alternatives = m.group(1).split(",") if m.group(1) is not None else _sequence(m, limit)
        out += [item[: m.start()] + alt + item[m.end() :] for alt in alternatives]
    return done


def _sequence(m: re.Match[str], limit: int) -> list[str]:
    """The words of a brace sequence ``{first..last[..step]}`` (at most ``limit``); bash
    keeps a sequence mixing letters and numbers as written."""
    first, last, step = m.group(2), m.group(3), abs(int(m.group(4) or 1)) or 1
    if first.isalpha() != last.isalpha():
        return [m.group(0)]
    a, b = (ord(first), ord(last)) if first.isalpha() else (int(first), int(last))
    values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
    picked = list(itertools.islice(values, limit))
    return [chr(v) for v in picked] if first.isalpha() else [str(v) for v in picked]


# Inside a git folder: what runs code (its config, worktree config and hooks) and, for each
# submodule's git folder under `modules/`, the same.
_GIT_CODE = ("config", "config.worktree", "hooks", "commondir")


def added_folder(folder: str, cwd: Path | str) -> str | None:
    """The real path of a folder the user added (``permissions.additionalDirectories``,
    ``sandbox.filesystem.allowWrite``; ``~`` and relative paths against ``cwd``, ``..`` taken
    as written), or None when it is not a folder or its name passes through a symlink other
    than a component of the working folder's or the home folder's own path: a link a command
    made in a writable place (``ln -s ~ /tmp/added``), or one a cloned project ships
    (``../shared -> ~``), would otherwise choose which folder counts as added (review 14,
    finding 3)."""
    start = os.path.abspath(cwd)
    written = os.path.normpath(os.path.join(start, os.path.expanduser(folder)))
    chosen = {*_ancestors(start), *_ancestors(os.path.expanduser("~"))}
    if any(p not in chosen and os.path.islink(p) for p in _ancestors(written)):
        return None
    real = _realpath(written)
    return real if os.path.isdir(real) else None


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` as ``["/a", "/a/b", "/a/b/c"]``."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def sandbox_paths(
    cwd: Path | str,
    extra: Iterable[str | os.PathLike[str]] = (),
    writable: Iterable[str] = (),
) -> Sandbox:
    """What a sandboxed bash command in ``cwd`` may not change or read (:class:`Sandbox`):
        the protected paths found on the file system rather than in the command's text, so no
        spelling of a name reaches them.

        Protected (read-only when it exists; watched when it does not exist or is a symlink, since
        no mount holds a missing name and a link can be replaced, its target read-only): the
        user's and the system's git configs and the files their ``include``
        and ``includeIf`` lines name (3 levels), and in ``cwd``, each folder above it and the home
        folder the protected names (``.harness``, ``.claude``, ``.husky``, ``.mcp.json``,
        ``.claude.json``, ``.gitconfig``, the hook managers' configs); the folders git runs hooks
        from (:func:`git_dirs`); in every git folder found (a ``.git`` folder there, the one a
        ``.git`` file names, the common one its ``commondir`` names, each linked worktree's
        under ``worktrees/``, each submodule's under ``modules/``, nested too, at most
        :data:`_GIT_FOLDERS`) its ``config``, ``config.worktree``, ``commondir`` and ``hooks``,
        and the files its config includes. Pinned (changeable inside, never removed
        or renamed): those git folders, and every folder above anything protected, hidden or
        watched (but ``/``), so no rename of a folder above moves it away. Hidden (seen empty):
    the user's harness config folder (its settings may name a store with its password: review
    7, finding 13), the approvals key and :func:`private_folders`, except a folder holding
    ``cwd``; the user's config, data, state and cache folders of the harness are made first
    (mode 0700) when missing: a command must not be the one to make them (review 9, finding 1).
    The Python the harness runs on (:func:`python_folders`: its site folders, the user site,
    the standard library, scripts, ``pyvenv.cfg``) is protected too, even in ``cwd`` (a
    project whose ``.venv`` runs the harness: installing there needs the unsandboxed run a
    person approves).

    Writable (:attr:`Sandbox.writable`): ``cwd``, ``writable`` (the user's added folders as
    :func:`added_folder` resolves them, each guarded as ``cwd`` is: the protected names in it
    and the folders above it, its git folders) and the temporary folders; the rest is
    read-only.
    """
    home = os.path.expanduser("~")
    config = user_folder("config")
    # the harness's own folders exist before any command runs, so they are hidden: a missing
    # one could be made by the command, with a link in it where the harness later writes
    # (chat's history, the list cache: review 9, finding 1)
    for kind in ("config", "data", "state", "cache"):
        with contextlib.suppress(OSError):
            user_folder(kind).mkdir(mode=0o700, parents=True, exist_ok=True)
    read_only: list[str] = []
    watched: list[str] = []
    start = os.path.abspath(cwd)

    def protect(path: str) -> None:
        if os.path.islink(path) or not os.path.lexists(path):
            watched.append(path)
        if os.path.lexists(path):
            read_only.append(path)  # a link: its target, once resolved
        if os.path.islink(path) and not os.path.lexists(target := _realpath(path)):
            watched.append(target)  # a dangling link's target, made later (review 8, 6)

    if os.path.islink(config):
        watched.append(os.fspath(config))
    # (the XDG folder holds its config file: read that)
    config_files = [
        os.path.join(p, "config") if os.path.isdir(p) else p for p in git_config_files()
    ]
    for path in dict.fromkeys((*git_config_files(), *config_files, *_git_includes(config_files))):
        protect(path)
        # the template git copies hooks from at the next clone or init (review 7, finding 19),
        # and hooks folders any of these configs names (review 8, finding 4)
        text = _read_regular(path, _CONFIG_BYTES) or ""
        for named in (_hooks_path(text, "init", _TEMPLATE_DIR), _hooks_path(text)):
            if named:
                # a relative hooksPath is git's from the work tree (the folder it runs in)
                for base in (os.path.dirname(path), start):
                    protect(os.path.join(base, _home(named, home)))
    # the Python the harness runs on: a .pth in its site folder runs, unsandboxed, at the
    # harness's next start (review 9, finding 5); a missing user site is watched
    for path in python_folders(start):
        protect(path)
    folders: list[str] = []
    # the folders above as written and as git finds them, through symlinks (review 7, 17);
    # the added folders' too: a command writes there as in the working folder (review 14, 1)
    writable = tuple(writable)
    for first in dict.fromkeys((start, _realpath(start), *writable)):
        folder = first
        while folder not in folders:
            folders.append(folder)
            if (parent := os.path.dirname(folder)) == folder:
                break
            folder = parent
    if home not in folders:
        folders.append(home)
    names = (*_FOLDERS, *_FILES, *_LEFTHOOK_NAMES, ".config/husky")
    git_folders: list[str] = []
    for folder in folders:
        for name in names:
            path = os.path.join(folder, name)
            if name == ".git" and os.path.isdir(path) and not os.path.islink(path):
                git_folders.append(path)
            else:
                protect(path)
    added_git = (g for w in writable for g in git_dirs(w))
    for found in dict.fromkeys((*git_dirs(cwd), *git_dirs(_realpath(start)), *added_git)):
        if os.path.isfile(os.path.join(found, "HEAD")):
            git_folders.append(found)
        else:
            protect(found)  # a hooks folder
    # the common folder of a worktree's git folder, and submodules' (nested too): breadth
    # first, at most _GIT_FOLDERS (review 7, findings 5, 8)
    seen: set[str] = set()
    queue = list(git_folders)
    listed = _GIT_FOLDER_ENTRIES
    while queue and len(seen) < _GIT_FOLDERS:
        git = _realpath(queue.pop(0))
        if git in seen:
            continue
        seen.add(git)
        common = (_read_regular(os.path.join(git, "commondir"), 4096) or "").strip()
        if common:
            queue.append(os.path.join(git, common))
        # linked worktrees' git folders (their commondir: finding 5), submodules' (a
        # submodule named a/b keeps its git folder at modules/a/b)
        # the listings share one bound too: a command can make millions of folders there,
        # which every later command's sandbox would list (review 14, finding 4)
        for sub in ("worktrees", "modules"):
            with contextlib.suppress(OSError), os.scandir(os.path.join(git, sub)) as entries:
                for e in itertools.islice(entries, max(listed, 0)):
                    listed -= 1
                    if e.is_dir(follow_symlinks=False):
                        queue.append(e.path)
                        if sub == "modules" and not os.path.isfile(os.path.join(e.path, "HEAD")):
                            with os.scandir(e.path) as nested:
                                inner = list(itertools.islice(nested, max(listed, 0)))
                            listed -= len(inner)
                            queue += [d.path for d in inner if d.is_dir()]
    for git in seen:
        # a missing config.worktree or commondir is watched: made, it redirects git (finding 7)
        for name in _GIT_CODE:
            protect(os.path.join(git, name))
    # what a repository's config includes (finding 6)
    for path in _git_includes(
        os.path.join(git, name) for git in seen for name in ("config", "config.worktree")
    ):
        protect(path)
    hidden = [
        f
        for f in (os.fspath(config), os.fspath(approval_key_path()), *private_folders(extra))
        if not _inside(start, [f])
    ]
    # Launchers' caches, whose code runs unsandboxed at the next start of what they launch:
    # pre-commit's (the hook code its installed git hook runs at the next commit: review 13,
    # finding 18), npx's packages and uv's and pipx's tool environments (the user's stdio MCP
    # servers, `npx -y pkg`, `uvx pkg`: review 15, finding 8). Read-only where they are,
    # watched while missing: an allowWrite of ~/.npm or ~/.cache lets a command reach them
    # (review 14, finding 2).
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    npm_cache = os.environ.get("npm_config_cache") or os.environ.get("NPM_CONFIG_CACHE")  # noqa: SIM112 (npm reads both)
    launchers = (
        os.environ.get("PRE_COMMIT_HOME") or os.path.join(cache_home, "pre-commit"),
        os.path.join(home, ".cache", "pre-commit"),
        os.path.join(npm_cache or os.path.join(home, ".npm"), "_npx"),
        os.path.join(home, ".npm", "_npx"),
        os.environ.get("UV_CACHE_DIR") or os.path.join(cache_home, "uv"),
        os.environ.get("UV_TOOL_DIR") or os.path.join(data_home, "uv", "tools"),
        os.environ.get("PIPX_HOME") or os.path.join(data_home, "pipx"),
        os.path.join(home, ".local", "pipx"),
    )
    for launcher in dict.fromkeys(launchers):
        if os.path.isabs(launcher) and not _inside(start, [launcher]):
            if os.path.isdir(launcher) and not os.path.islink(launcher):
                read_only.append(launcher)
            else:
                watched.append(launcher)
    # the default config folder too, which a harness started without $XDG_CONFIG_HOME reads
    # (review 13, finding 14): hidden when it is there, watched when it is not
    default_config = os.path.join(home, ".config", "harness")
    if default_config != os.fspath(config) and not _inside(start, [default_config]):
        if os.path.isdir(default_config) and not os.path.islink(default_config):
            hidden.append(default_config)
        else:
            watched.append(default_config)
    # other harness processes' kept command output: the folder they all keep it in, hidden
    # whole, so logs made while the command runs are hidden too (review 11, finding 2; this
    # process's own are hidden with them: the read tool reads them), and those an older
    # harness left in the temporary folder itself, as they are now (review 8, finding 3)
    logs = bash_log_folder()
    if logs is not None:
        hidden.append(logs)
    with contextlib.suppress(OSError):
        hidden += [
            e.path
            for e in itertools.islice(os.scandir(tempfile.gettempdir()), 10_000)
            if e.name.startswith("harness-bash-") and other_bash_log(e.path)
        ]
    # Writes go only where Claude Code's sandbox lets them (its `sandbox.filesystem`): the
    # working folder, the folders the user added (``writable``: additional directories,
    # ``allowWrite``) and the temporary folders; the rest is read-only, so nothing that runs
    # at a later start outside them (a shell's rc file, a version manager's launcher, a
    # tool's config) can be planted, however it is spelt (reviews 9 to 13 found such places
    # one at a time). A home or XDG folder inside a temporary folder stays read-only.
    roots = _real_unique((start, *writable))
    temp = [t for t in _real_unique((tempfile.gettempdir(), "/tmp")) if not _inside(t, roots)]
    user = _real_unique(
        (
            home,
            *(
                os.environ.get(f"XDG_{kind}_HOME") or ""
                for kind in ("CONFIG", "DATA", "STATE", "CACHE")
            ),
        )
    )
    carved = [
        u
        for u in user
        if os.path.isabs(u) and _inside(u, temp) and not _inside(u, roots) and os.path.isdir(u)
    ]
    hidden_real = _real_unique(hidden)
    pinned_real = _real_unique(seen)
    # a writable folder inside a held one would undo the hold (a working folder in the
    # harness's own site folder)
    held = (*_real_unique(read_only), *hidden_real)
    open_folders = tuple(w for w in (*roots, *temp) if not _inside(w, held))
    read_only_real = _real_unique((*read_only, *carved))
    # every folder above what is held, so a rename of one cannot move it away (findings 1, 2)
    above: list[str] = []
    for path in (*read_only_real, *pinned_real, *hidden_real, *_real_unique(watched)):
        folder = os.path.dirname(path)
        while folder != os.path.dirname(folder):
            above.append(folder)
            folder = os.path.dirname(folder)
    return Sandbox(
        read_only=read_only_real,
        pinned=(*pinned_real, *(f for f in dict.fromkeys(above) if f not in pinned_real)),
        hidden=hidden_real,
        watched=tuple(dict.fromkeys(watched)),
        writable=open_folders,
    )


_INCLUDE_SECTION = re.compile(r"^\s*\[\s*include(?:if\s+\"[^\"]*\")?\s*\]\s*(.*)$", re.I)
_INCLUDE_PATH = re.compile(r"^\s*path\s*=\s*(.*)$", re.I)


def _git_includes(configs: Iterable[str], depth: int = 3) -> list[str]:
    """The files git configs' ``[include]`` and ``[includeIf "…"]`` sections name by
    ``path =`` (relative to the including file, ``~`` expanded), and theirs, ``depth`` levels
    (review 7, finding 6)."""
    home = os.path.expanduser("~")
    found: list[str] = []
    level = list(configs)
    for _ in range(depth):
        named: list[str] = []
        for config in level:
            inside = False
            for raw in (_read_regular(config, _CONFIG_BYTES) or "").splitlines():
                line = raw
                if raw.lstrip().startswith("["):
                    header = _INCLUDE_SECTION.match(raw)
                    inside = header is not None
                    line = header.group(1) if header is not None else ""
                m = _INCLUDE_PATH.match(line)
                if inside and m is not None:
                    value = _home(_config_value(m.group(1)), home)
                    named.append(os.path.join(os.path.dirname(config), value))
        level = [n for n in named if n not in found]
        found += level
    return found


_GIT_FOLDERS = 256  # git folders (a worktree's common one, submodules') held, at most
_GIT_FOLDER_ENTRIES = 4096  # entries of worktrees/ and modules/ folders listed, at most
_LEFTHOOK_NAMES = tuple(
    f"{dot}lefthook{local}.{ext}"
    for dot in ("", ".")
    for local in ("", "-local")
    for ext in ("yml", "yaml", "json", "jsonc", "toml")
)
# lefthook reads its configs under `.config/` too (https://lefthook.dev/configuration)
_LEFTHOOK_NAMES += tuple(f".config/{name}" for name in _LEFTHOOK_NAMES)


def _real_unique(paths: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """``paths`` with symlinks resolved (a mount is made on what a link names), each once."""
    return tuple(dict.fromkeys(_realpath(p) for p in paths))
