"""Shell commands as the permission rules see them: the simple commands bash would run, their
words after quote removal, and what no allow rule can vouch for.

Parsed with tree-sitter's bash grammar, then checked where the grammar and bash part ways
(:func:`parse_command`). Matching a rule is done here too, on words, never on re-joined text
(:class:`Spec`). Pure functions, no I/O; a command is parsed once per text (an LRU cache), however
many rules look at it.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any, Literal, TypeAlias

import re2
import tree_sitter_bash
from attrs import evolve, frozen
from tree_sitter import Language, Node, Parser, Tree

__all__ = [
    "ANSI_C",
    "MAX_COMMAND_CHARS",
    "MAX_COMMAND_OPERATORS",
    "Found",
    "ParsedCommand",
    "SimpleCommand",
    "Spec",
    "Word",
    "ansi_c",
    "command_key",
    "compile_spec",
    "escape_spec",
    "git_local_repository",
    "git_repositories",
    "parse_command",
    "without_expansions",
]

MAX_COMMAND_CHARS = 100_000
"""Longer commands are not parsed: no rule allows them by their words, and every deny and ask rule
counts as possibly matching them (so they are asked)."""
MAX_COMMAND_OPERATORS = 5_000
"""A command holding more of ``| & ; ( ) < >`` than this is not parsed either (as above)."""
_OPERATOR_CHARS = "|&;()<>"

_LANGUAGE = Language(tree_sitter_bash.language())
_MAX_DEPTH = 8  # code inside code (bash -c "bash -c '…'"), commands run by xargs and find -exec
_BUDGET = 64  # such nested analyses per command, in all (and as much code as the command)
_MAX_PASSES = 8  # rounds of removing line continuations (each pass removes every one it can see)

Found: TypeAlias = Literal["yes", "maybe", "no"]
_RANK: dict[Found, int] = {"no": 0, "maybe": 1, "yes": 2}
_BY_RANK: tuple[Found, ...] = ("no", "maybe", "yes")


@frozen
class Word:
    """One word of a simple command after quote removal.

    ``value`` is None when bash computes it at run time (``$x``, ``$(…)``, a glob, ``~``,
    ``$'…'``); ``splits`` says such a word may also become several words or none (unquoted
    expansions, globs, brace expansion).
    """

    value: str | None
    splits: bool = False


_UNKNOWN = Word(None)
_LITERAL_NUMBER = re.compile(r"-?[0-9A-Za-z]+(?:#[0-9A-Za-z@_]+)?")
_SPLITS = Word(None, splits=True)


@frozen
class SimpleCommand:
    """The words of one simple command as written: prefix assignments (``X=1``) first, then the
    command word and its arguments. ``assignments`` counts the prefix assignments."""

    words: tuple[Word, ...]
    assignments: int = 0
    runs_other: str | None = None
    """Why it may run another program (a wrapper, ``bash -c``, an option such as ``tar
    --to-command``): only a rule naming every word approves it."""

    @property
    def vanish_from(self) -> int:
        """The index from which every word may expand to nothing."""
        i = len(self.words)
        while i > 0 and self.words[i - 1].splits:
            i -= 1
        return i


View: TypeAlias = tuple[SimpleCommand, int]
"""A command a deny rule is matched against: the words of ``SimpleCommand`` from an index on (a
command run by a wrapper: ``sudo touch P`` gives ``touch P`` from 1)."""


@frozen
class ParsedCommand:
    """What a command line runs, as far as the parser can tell.

    Attributes:
        commands: every simple command in it, as written (inside pipelines, lists, subshells,
            ``{ }``, if/while/case, substitutions and function bodies), in source order.
        constructs: why no allow rule can approve the line by its words (a substitution, a
            redirection to a file, ``&``, it does not parse, ...); empty when allow rules may.
        views: the commands deny and ask rules are matched against: each simple command with
            and without its assignments, and what wrappers (``env``, ``sudo``, ``xargs``, ...),
            ``bash -c``, ``eval`` and ``find -exec`` run.
        possible: commands that may run, or may be data (a here-document whose end bash may
            see elsewhere; a wrapper's argument that reads as a command): a rule matching one
            of them possibly matches.
        hidden: why the line may run code no view shows (it does not parse, ``eval "$x"``, a
            shell reading commands from its input): every deny and ask rule possibly matches.
        plain: the line is exactly one simple command of literal words and nothing else.
    """

    commands: tuple[SimpleCommand, ...]
    constructs: tuple[str, ...]
    views: tuple[View, ...]
    possible: tuple[View, ...]
    hidden: tuple[str, ...]
    plain: bool

    @property
    def allowable(self) -> bool:
        """Whether allow rules may approve it by the words of its simple commands."""
        return not self.constructs


# --- what bash runs that is not the command word ----------------------------------------------

# Programs and builtins that run a command given in their arguments: deny rules see the command
# starting at every later word.
_WRAPPERS = frozenset(
    {
        "aa-exec", "builtin", "busybox", "bwrap", "caffeinate", "catchsegv", "cgexec",
        "chpst", "chroot", "chrt", "command", "coproc", "cpulimit", "daemonize", "dbus-launch",
        "dbus-run-session", "doas", "dumb-init", "eatmydata", "env", "envdir", "exec",
        "fakechroot", "fakeroot", "faketime", "firejail", "flatpak-spawn", "flock", "gdb",
        "heaptrack", "i386", "ionice", "linux32", "linux64", "lldb", "ltrace", "nice",
        "nocache", "nohup", "nsenter", "numactl", "parallel", "perf", "pkexec", "prlimit",
        "proxychains", "proxychains4", "rr", "runcon", "runuser", "schroot", "script", "setarch",
        "setpriv", "setsid", "setuidgid", "sg", "softlimit", "ssh-agent", "sshpass", "stdbuf",
        "strace", "su", "sudo", "systemd-nspawn", "systemd-run", "taskset", "time", "timeout",
        "tini", "torify", "torsocks", "trickle", "tsocks", "unbuffer", "unshare", "valgrind",
        "watch", "x86_64", "xargs", "xvfb-run",
    }
)  # fmt: skip
# Tools whose subcommand runs any command: `uv run touch P`.
_RUNNERS = frozenset(
    {
        ("asdf", "exec"), ("bundle", "exec"), ("conda", "run"), ("direnv", "exec"),
        ("hatch", "run"), ("mamba", "run"), ("mise", "exec"), ("npm", "exec"), ("pdm", "run"),
        ("pipenv", "run"), ("pipx", "run"), ("pixi", "run"), ("pnpm", "dlx"), ("pnpm", "exec"),
        ("poetry", "run"), ("pyenv", "exec"), ("rbenv", "exec"), ("uv", "run"), ("yarn", "dlx"),
        ("yarn", "exec"), ("bun", "x"),
        # review 13, finding 10: `npm explore PKG -- CMD` runs CMD, `npm x` is `npm exec`; and
        # the config writers make every later run of the tool run what they set
        # (`npm config set node-options=--import=…`), as `git config` would
        ("npm", "explore"), ("npm", "x"), ("npm", "config"), ("npm", "set"), ("npm", "c"),
        ("pnpm", "config"), ("pnpm", "explore"), ("yarn", "config"), ("pip", "config"),
        ("pip3", "config"), ("uv", "tool"), ("bun", "pm"), ("mise", "x"), ("pdm", "exec"),
    }
)  # fmt: skip
# Wrappers that run the string after -c (or --command) as shell code: `sg root -c 'touch P'`.
_DASH_C = frozenset({"flock", "runuser", "script", "sg", "su"})
# Debugger options that run debugger commands (gdb's `shell touch P`, `!touch P`): hidden code.
_DEBUGGER_CODE = re.compile(
    r"-{1,2}(?:i?ex|i?x|batch|(?:init-)?eval-command|(?:init-)?command|source|one-line[-a-z]*"
    r"|[oskSK])(?:=[\s\S]*)?"
)


@frozen
class _CodeOptions:
    """The options of one program (or git subcommand) that run another program or write a
    file: an allow rule for the program does not approve them (docs/permissions.md lists
    them). ``long``: long option names, also as the abbreviations getopt accepts (any prefix
    that is not itself in ``safe``); ``short``: option letters, anywhere in a ``-abc`` word;
    ``starts``: word beginnings; ``words``: whole words; ``unknown``: a computed word may be
    one of them."""

    long: frozenset[str] = frozenset()
    short: str = ""
    starts: tuple[str, ...] = ()
    words: frozenset[str] = frozenset()
    safe: frozenset[str] = frozenset()
    values: str = ""
    """Letters that take the rest of a ``-abc`` word as their value (``-oUserKnownHostsFile``
    holds no ``-F``)."""
    unknown: bool = True
    only_long: frozenset[str] | None = None
    """When given, every long option (up to ``--``) must be one of these names (exactly, no
    abbreviation), and every letter of a short one in ``only_short`` (up to a letter of
    ``values``, whose value the rest of the word is): the program takes any option it does
    not know as configuration (npm reads ``--node-options=…`` as its config key), or its
    options (and its plugins') that write files or load code are too many to list, so the
    safe ones are."""
    only_short: str = ""


# What a prefix rule for npm, pnpm or yarn covers after it (before `--`, whose words go to the
# script): output, workspace selection, install flags that write only the project's files.
_PACKAGE_MANAGER_OPTIONS = frozenset(
    {
        "aggregate-output", "all", "audit", "ci", "color", "coverage", "depth", "dry-run",
        "filter", "foreground-scripts", "frozen-lockfile", "fund", "help", "if-present",
        "ignore-scripts", "immutable", "include", "include-workspace-root", "json",
        "legacy-peer-deps", "loglevel", "long", "no-audit", "no-color", "no-fund",
        "no-package-lock", "no-progress", "no-save", "no-sort", "no-yes", "offline", "omit",
        "package-lock", "parallel", "parseable", "prefer-frozen-lockfile", "prefer-offline",
        "prefer-online", "production", "progress", "quiet", "recursive", "reporter", "reverse",
        "save", "save-dev", "save-exact", "save-optional", "save-peer", "save-prod", "silent",
        "sort", "stream", "strict-peer-deps", "verbose", "version", "watch", "workspace",
        "workspace-root", "workspaces", "yes",
    }
)  # fmt: skip
_PACKAGE_MANAGER_SHORT = "DEFOPSadhlpqrswy"  # -s, -ws, -dd, -D, ...


_PYTEST_OPTIONS = frozenset(
    {
        "quiet", "verbose", "exitfirst", "maxfail", "tb", "showlocals", "capture", "co",
        "collect-only", "lf", "last-failed", "ff", "failed-first", "nf", "new-first", "sw",
        "stepwise", "sw-skip", "stepwise-skip", "durations", "durations-min", "no-header",
        "no-summary", "strict-markers", "strict-config", "disable-warnings",
        "disable-pytest-warnings", "runxfail", "color", "code-highlight", "import-mode",
        "deselect", "ignore", "ignore-glob", "keep-duplicates", "doctest-modules",
        "continue-on-collection-errors", "setup-show", "setup-only", "setup-plan",
        "fixtures", "fixtures-per-test", "markers", "version", "help", "full-trace",
        "log-level", "log-cli-level", "numprocesses", "dist", "maxprocesses", "timeout",
        "reruns", "cov", "no-cov", "pythonwarnings", "trace-config", "assert",
    }
)  # fmt: skip


def _opts(
    long: str = "",
    short: str = "",
    starts: str = "",
    words: str = "",
    safe: str = "",
    values: str = "",
) -> _CodeOptions:
    return _CodeOptions(
        frozenset(long.split()), short, tuple(starts.split()), frozenset(words.split()),
        frozenset(safe.split()), values,
    )  # fmt: skip


_SSH_VALUES = "BbcDEeFIiJLlmOoPpQRSWw"  # ssh, scp and sftp options that take a value
# -F a config, -I a PKCS#11 library it loads, -E a log file it writes (review 6, finding 27)
# -S a control socket another process serves, -M a master for one (ControlPath and
# ControlMaster's short forms: review 13, finding 11)
_SSH = _opts(short="FIEMS", values=_SSH_VALUES.replace("S", ""))
_CODE_OPTIONS: dict[str, _CodeOptions] = {
    "tar": _opts(
        "checkpoint-action use-compress-program to-command info-script new-volume-script"
        " rsh-command rmt-command index-file listed-incremental volno-file",
        "IFg",
        safe="checkpoint to-stdout",
    ),
    "zip": _opts("unzip-command", starts="-TT"),
    "make": _opts("eval file makefile directory", "fCE"),
    "gmake": _opts("eval file makefile directory", "fCE"),
    # review 13, finding 11: the log file's lines are the model's (--log-file-format), and a
    # daemon's config runs `pre-xfer exec`
    "rsync": _opts(
        "rsh rsync-path log-file log-file-format daemon config write-batch only-write-batch",
        "e",
    ),
    # review 13, finding 8: curl writes where its output options say, with what it fetched
    # (`-o ~/.bashrc file:///dev/stdin <<< …`), and a config (-K) may name an output
    "curl": _opts(
        "output remote-name remote-name-all output-dir create-dirs dump-header cookie-jar "
        "trace trace-ascii libcurl stderr config etag-save hsts alt-svc ssl-sessions",
        "oODcK",
        values="AbCdeEFHmPQrtTuUwxXyYz",  # -XPOST, -H…: the rest of the word is a value
    ),
    "ssh": _SSH,
    "scp": _opts(short="FSIE", values=_SSH_VALUES),
    "sftp": _opts(short="FSDIE", values=_SSH_VALUES),  # -D: the sftp server program
    "find": _opts(words="-exec -execdir -ok -okdir -fprint -fprint0 -fprintf -fls -delete"),
    "sort": _opts("compress-program output", "o"),
    # review 6, findings 29-31: a lesskey file's #env LESSOPEN, man's config DEFINEs, a
    # wgetrc's use_askpass run programs; wget's output options write any file
    "less": _opts("log-file LOG-FILE lesskey-src lesskey-file lesskey-content", "oOk"),
    "man": _opts("pager html config-file", "PHC"),
    "wget": _opts(
        "use-askpass execute config output-document output-file append-output"
        " directory-prefix input-file"
        # review 15, finding 4: these name a file wget writes, or let the server (or an
        # older local copy, -N) choose which file is replaced
        " default-page save-cookies warc-file rejected-log hsts-file content-disposition"
        " trust-server-names backups timestamping",
        "eOoaPiN",
    ),
    "cargo": _opts("config"),
    "rg": _opts(
        "pre hostname-bin"
    ),  # ripgrep runs the --pre program on each file (review 12, finding 9)
    # npm, pnpm and yarn take any `--key=value` as configuration: `--node-options=--import=…`
    # runs code, `--userconfig`/`--globalconfig` an npmrc that sets `script-shell`, `-C`/
    # `--prefix` another folder's scripts (review 12, finding 1); only these are safe
    **dict.fromkeys(
        ("npm", "pnpm", "yarn"),
        _CodeOptions(only_long=_PACKAGE_MANAGER_OPTIONS, only_short=_PACKAGE_MANAGER_SHORT),
    ),
    # `--basetemp` is emptied first, `-o`/`-c` name other settings (`cache_dir`, `addopts`),
    # `-p` loads a module as a plugin; the others write report files where they name
    # pytest's own options write files (`--basetemp`, which it empties, `--junitxml`,
    # `--log-file` with `--log-file-format`: review 13, finding 2), name other settings
    # (`-o`, `-c`, `--rootdir`) or load modules (`-p`), and plugins add more: after a prefix
    # rule only these are approved
    "pytest": _CodeOptions(
        only_long=_PYTEST_OPTIONS,
        only_short="qvxsl",
        values="kmrnW",  # -k EXPR, -m EXPR, -rfE, -n 4, -W error: the rest is a value
    ),
    # `-exec`/`-toolexec` run a program, `-ldflags=-extld=…` a linker, `-overlay` swaps the
    # sources, `-C` changes folder; the profile flags write files where they name
    "go": _opts(
        starts=(
            "-exec -toolexec -overlay -modfile -ldflags -gcflags -asmflags -gccgoflags -C -o "
            "-coverprofile -cpuprofile -memprofile -blockprofile -mutexprofile -trace -outputdir "
            "--exec --toolexec --overlay --modfile --ldflags --gcflags --asmflags --gccgoflags "
            "--C --o --coverprofile --cpuprofile --memprofile --blockprofile --mutexprofile "
            "--trace --outputdir -w --w"
            # `go vet` and `go test` (which vets first) run the analysis tool named; -pkgdir is
            # a folder it writes (review 16, finding 3)
            " -vettool --vettool -pkgdir --pkgdir"
            # the test binary's own spellings, which `go test` passes on (review 15, 10)
            " -test.coverprofile -test.cpuprofile -test.memprofile -test.blockprofile"
            " -test.mutexprofile -test.trace -test.outputdir -test.testlogfile -test.gocoverdir"
            " --test.coverprofile --test.cpuprofile --test.memprofile --test.blockprofile"
            " --test.mutexprofile --test.trace --test.outputdir --test.testlogfile"
            " --test.gocoverdir"
        )
    ),
}
_GIT_DIFFS = _opts("ext-diff output textconv")
# (a computed word is judged by the subcommand's own row: `git add $x` stays approved)
_GIT_ANY = evolve(_opts("ext-diff output textconv open-files-in-pager"), unknown=False)
_GIT_REMOTE = _opts("upload-pack receive-pack exec", "u")
# diff options whose value may follow in the same word (`-Sfoo` holds no -o)
_GIT_DIFF_VALUES = "SGOIlUMCBXv"
_GIT_CODE_OPTIONS: dict[str, _CodeOptions] = {
    **dict.fromkeys(
        ("diff", "log", "show", "whatchanged", "diff-tree", "diff-files", "diff-index",
         "range-diff", "blame", "annotate", "stash"),
        _GIT_DIFFS,
    ),
    **dict.fromkeys(("fetch", "ls-remote"), _GIT_REMOTE),
    # review 9, finding 4: the files these write are named by an option, anywhere (a
    # `--suffix=.pth` patch in a site-packages folder runs at every Python start)
    "format-patch": _opts(
        "ext-diff output textconv output-directory suffix", "o", values=_GIT_DIFF_VALUES
    ),
    "archive": _opts("upload-pack receive-pack exec output", "uo"),
    # review 10, finding 12: -v prints the staged and unstaged diffs, every changed file's
    # content, so `git status`'s prefix key (an approve-always) never covers it
    "status": _opts("verbose", "v"),
    "bugreport": _opts("output-directory suffix", "os"),
    "diagnose": _opts("output-directory suffix", "os"),
    "checkout-index": _opts("prefix"),
    "index-pack": _opts(short="o"),
    "mailsplit": _opts(short="o"),
    "fast-import": _opts("export-marks export-pack-edges"),
    "fast-export": _opts("export-marks"),
    "credential-store": _opts("file"),
    "credential-cache": _opts("socket"),
    "apply": _opts("unsafe-paths"),
    "init": _opts("template separate-git-dir"),
    # clone's own -c/--config applies to the new repository before it fetches
    # (core.sshCommand runs at once: review 6, finding 28), as do a template and a git dir
    "clone": _opts("upload-pack receive-pack exec config template separate-git-dir", "uc"),
    "pull": _opts("upload-pack receive-pack exec"),
    "push": _opts("receive-pack exec"),
    "grep": _opts("open-files-in-pager", "O"),
    "rebase": _opts("exec", "x"),
    "difftool": _opts("extcmd tool", "xt"),
    "mergetool": _opts("tool", "t"),
    "bisect": _opts(words="run"),
    "bisect--helper": _opts(words="run"),
    "submodule": _opts(words="foreach"),
    "submodule--helper": _opts(words="foreach"),
}  # fmt: skip
# Subcommands that exist to run a program or serve the repository (instaweb's web server and
# browser, send-email's `--smtp-server` and `--*-cmd`, filter-branch's filters, daemon's
# `--access-hook`, `shell -c`, remote-ext's command, svn's `--authors-prog`, the difftool
# helper's `GIT_DIFFTOOL_EXTCMD`): no prefix rule approves them, only one naming every word
# (review 9, finding 4). `upload-archive DIR`, archive's server, applies DIR's
# tar.<format>.command to the request it reads (review 16, finding 8).
_GIT_RUNNERS = frozenset(
    {"instaweb", "send-email", "filter-branch", "daemon", "shell", "remote-ext", "svn",
     "difftool--helper", "credential", "upload-archive"}
)  # fmt: skip
_GIT_PLUMBING = frozenset(
    {"send-pack", "http-push", "receive-pack", "fetch-pack", "upload-pack", "remote-ext",
     "remote-fd", "remote-ftp", "remote-ftps", "remote-http", "remote-https"}
)  # fmt: skip
_PYTHON = re.compile(r"python(?:[23](?:\.\d+)?)?")
_GIT_GLOBAL_VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
# git's own commands (`git --list-cmds=main,builtins,nohelpers`, git 2.39, and later ones): any
# other subcommand word may be an alias from a config git reads (`[alias] p = push`), so a
# rule on git possibly matches it (review 12, finding 9)
_GIT_COMMANDS = frozenset(
    {
        "add", "am", "annotate", "apply", "archive", "backfill", "bisect", "blame", "branch",
        "bugreport", "bundle", "cat-file", "check-attr", "check-ignore", "check-mailmap",
        "check-ref-format", "checkout", "checkout-index", "cherry", "cherry-pick", "clean",
        "clone", "column", "commit", "commit-graph", "commit-tree", "config", "count-objects",
        "credential", "credential-cache", "credential-store", "daemon", "describe", "diagnose",
        "diff", "diff-files", "diff-index", "diff-tree", "difftool", "fast-export", "fast-import",
        "fetch", "fetch-pack", "filter-branch", "fmt-merge-msg", "for-each-ref", "for-each-repo",
        "format-patch", "fsck", "fsck-objects", "gc", "get-tar-commit-id", "grep", "hash-object",
        "help", "hook", "http-backend", "http-fetch", "http-push", "imap-send", "index-pack",
        "init", "init-db", "instaweb", "interpret-trailers", "last-modified", "log", "ls-files",
        "ls-remote", "ls-tree", "mailinfo", "mailsplit", "maintenance", "merge", "merge-base",
        "merge-file", "merge-index", "merge-octopus", "merge-one-file", "merge-ours",
        "merge-recursive", "merge-recursive-ours", "merge-recursive-theirs", "merge-resolve",
        "merge-subtree", "merge-tree", "mergetool", "mktag", "mktree", "multi-pack-index", "mv",
        "name-rev", "notes", "pack-objects", "pack-redundant", "pack-refs", "patch-id", "pickaxe",
        "prune", "prune-packed", "pull", "push", "quiltimport", "range-diff", "read-tree",
        "rebase", "receive-pack", "reflog", "refs", "remote", "remote-ext", "remote-fd",
        "remote-ftp", "remote-ftps", "remote-http", "remote-https", "repack", "replace", "replay",
        "request-pull", "rerere", "reset", "restore", "rev-list", "rev-parse", "revert", "rm",
        "send-pack", "shell", "shortlog", "show", "show-branch", "show-index", "show-ref",
        "sparse-checkout", "stage", "stash", "status", "stripspace", "submodule", "subtree",
        "switch", "symbolic-ref", "tag", "unpack-file", "unpack-objects", "update-index",
        "update-ref", "update-server-info", "upload-archive", "upload-pack", "var",
        "verify-commit", "verify-pack", "verify-tag", "version", "whatchanged", "worktree",
        "write-tree",
    }
)  # fmt: skip
_MAKE_ASSIGNMENT = re.compile(r"[^-=][^=]*=")  # make VAR=value overrides a recipe's variables
# ProxyCommand, LocalCommand, Match exec, Include; libraries it loads (PKCS11Provider,
# SecurityKeyProvider); a socket another process serves (ControlPath)
_SSH_CODE = ("command", "match", "include", "provider", "controlpath", "controlmaster")


def _code_option(argv: tuple[Word, ...]) -> str | None:
    """Why the command ``argv`` (from its command word) may run another program through an
    option of its own (``git fetch --upload-pack=…``, ``tar -I …``); None when it cannot."""
    if not argv or argv[0].value is None:
        return None
    name = _basename(argv[0].value)
    args = argv[1:]
    if _PYTHON.fullmatch(name):
        # `python -m pytest …` is pytest (review 13, finding 5: its --basetemp emptied the
        # home folder under bash(python -m pytest:*)); the interpreter's own options first
        i = 0
        while i < len(args) and (args[i].value or "").startswith("-") and args[i].value != "-m":
            i += 1
        if i + 1 < len(args) and args[i].value == "-m":
            module = args[i + 1].value
            if module is None:
                return f"{name} -m and a computed module name"
            return _code_option((Word(module), *args[i + 2 :]))
        return None
    if name == "git":
        return _git_code_option(args)
    if name == "less" and any(
        a.value is None or (a.value[:1] == "+" and ("!" in a.value or "|" in a.value)) for a in args
    ):
        return "less +! (it runs a shell command)"
    if name in ("make", "gmake") and any(
        a.value is not None and _MAKE_ASSIGNMENT.match(a.value) for a in args
    ):
        return "make VAR=value (it overrides the recipes' variables, SHELL too)"
    if name == "curl" and any(a.value is None or "%output{" in a.value for a in args):
        return "curl -w '%output{FILE}' (it writes the file it names)"
    if name == "curl" and _curl_format_from_file(args):
        # `-w @FILE`/`-w @-`: the format, `%output{…}` included, is read where the text
        # check cannot see it (review 15, finding 4)
        return "curl -w @FILE (a format read from a file may write the files it names)"
    if name in ("ssh", "scp", "sftp") and _ssh_code(args):
        return f"{name} -o ProxyCommand/LocalCommand/Match (it runs a local command)"
    options = _CODE_OPTIONS.get(name)
    if options is None:
        return None
    if name == "tar" and args and args[0].value is not None and args[0].value[:1] != "-":
        args = (Word("-" + args[0].value), *args[1:])  # tar cIf …: old-style bundled options
    found = _finds_option(options, args)
    return f"{name} {found}" if found else None


def _curl_format_from_file(args: tuple[Word, ...]) -> bool:
    """Whether curl's ``-w``/``--write-out`` takes its format from a file (``@FILE``, ``@-``)."""
    for i, arg in enumerate(args):
        value = arg.value or ""
        following = args[i + 1].value if i + 1 < len(args) else ""
        if value in ("-w", "--write-out") or (
            value.startswith("--") and len(value) > 2 and "--write-out".startswith(value)
        ):
            if following is None or following.startswith("@"):
                return True
        elif value.startswith("--write-out=@") or (
            value.startswith("-w@")
            or (value.startswith("-") and not value.startswith("--") and "w@" in value)
        ):
            return True
    return False


def _finds_option(options: _CodeOptions, args: tuple[Word, ...]) -> str | None:
    for arg in args:
        value = arg.value
        if value is None:
            if options.unknown:
                return "and a computed word (it may be an option that runs a program)"
            continue
        if value == "--":
            break
        if options.only_long is not None:
            if value.startswith("--"):
                if value[2:].partition("=")[0] not in options.only_long:
                    return value
            elif value.startswith("-") and len(value) > 1:
                for c in value[1:]:
                    if c in options.values:
                        break  # the rest of the word is this option's value
                    if c not in options.only_short:
                        return value
            continue
        if value in options.words or (options.starts and value.startswith(options.starts)):
            return value
        if value.startswith("--") and len(value) > 2:
            given = value[2:].partition("=")[0]
            if given not in options.safe and any(o.startswith(given) for o in options.long):
                return value
        elif value.startswith("-") and not options.words and _short_code(options, value[1:]):
            return value
    return None


def _short_code(options: _CodeOptions, letters: str) -> bool:
    for c in letters:
        if c in options.short:
            return True
        if c in options.values:
            return False  # the rest of the word is this option's value
    return False


def _git_code_option(args: tuple[Word, ...]) -> str | None:
    i = 0
    while i < len(args):
        value = args[i].value
        if value is None:
            return "git and a computed word before its subcommand"
        if value in ("-c", "--config-env") or value.startswith(
            ("-c", "--config-env=", "--exec-path")
        ):
            return f"git {value} (configuration runs programs: core.pager, alias.x=!…)"
        if value == "--bare" or value.startswith(("--git-dir", "--work-tree")):
            # the repository it names may be one the model made (`git hash-object -w`, then
            # `git checkout-index` writes x/config), whose config runs programs (review 13,
            # finding 1); `safe.bareRepository=explicit` lets a named one through
            return f"git {value} (a repository it names runs what its config says)"
        if not value.startswith("-"):
            break
        i += 2 if value in _GIT_GLOBAL_VALUES else 1
    if i >= len(args):
        return None
    sub = args[i].value or ""
    if sub in _GIT_RUNNERS:
        return f"git {sub} (it runs programs: only a rule naming every word approves it)"
    if any((a.value or "").casefold().startswith("ext::") for a in args[i + 1 :]):
        # git's `ext::` transport runs the URL's command (if protocol.ext.allow lets it)
        return "git and an ext:: URL (it runs a command)"
    # git's revision and diff option parsers are shared by many subcommands (`reflog`,
    # `rev-list`, `shortlog`, `notes show` took `--output=Makefile`: review 15, finding 3):
    # their options that write or run a program need a full rule whatever the subcommand
    for options in (_GIT_CODE_OPTIONS.get(sub), _GIT_ANY):
        if options is not None and (found := _finds_option(options, args[i + 1 :])):
            return f"git {args[i].value} {found}"
    for word in _repository_words(sub, args[i + 1 :]):
        if word.value is None:
            return f"git {sub} and a computed repository (it may be one on this machine)"
        if git_local_repository(word.value):
            return f"git {sub} {word.value} (a repository on this machine runs its config)"
    return None


# `git push` and `git send-pack` run `git receive-pack` in the repository they are given, and
# `git archive --remote` runs `git upload-archive` there: in a repository on this machine these
# run what its config says (core.alternateRefsCommand, tar.<format>.command, its hooks), and
# the model can make one with git alone (review 16, finding 8). Their options taking the next
# word as their value (long ones by any abbreviation), and the short ones.
_GIT_PUSH_VALUES: dict[str, tuple[tuple[str, ...], str]] = {
    "push": (("repo", "receive-pack", "exec", "recurse-submodules", "push-option"), "o"),
    "send-pack": (("receive-pack", "exec", "remote", "push-option"), ""),
}
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def git_local_repository(url: str) -> bool | None:
    """Whether git takes the repository ``url`` for one on this machine, as its transport
    does: True for a path (``./evil``, ``/abs/evil``, ``x/y``, ``.``) or a ``file://`` URL;
    False for another host's (``https://…``, the scp-like ``host:path``, a remote helper's
    ``transport::address``); None for a bare name, which is a remote's name, or the folder
    of that name (or ``NAME.git``) when no remote has it."""
    if url.casefold().startswith("file:"):
        return True
    if _URL.match(url):
        return False
    colon, slash = url.find(":"), url.find("/")
    if colon >= 0 and (slash < 0 or colon < slash):
        return False
    return True if slash >= 0 or not url or url.startswith((".", "~")) else None


def git_repositories(argv: tuple[Word, ...]) -> tuple[Word, ...]:
    """The words of the command ``argv`` naming the repository a ``git push``, ``git
    send-pack`` or ``git archive --remote`` runs git's receiving side in; empty for any other
    command."""
    if not argv or argv[0].value is None or _basename(argv[0].value) != "git":
        return ()
    args = argv[1:]
    i = 0
    while i < len(args) and (args[i].value or "").startswith("-"):
        i += 2 if args[i].value in _GIT_GLOBAL_VALUES else 1
    if i >= len(args) or args[i].value is None:
        return ()
    return _repository_words(args[i].value or "", args[i + 1 :])


def _repository_words(sub: str, args: tuple[Word, ...]) -> tuple[Word, ...]:
    if sub == "archive":
        # its first pass reads `--remote` anywhere before `--`, another option's value too
        found: list[Word] = []
        for j, arg in enumerate(args):
            value = arg.value
            if value == "--":
                break
            name, eq, given = (value or "").partition("=")
            if name.startswith("--r") and "--remote".startswith(name):
                if eq:
                    found.append(Word(given))
                elif j + 1 < len(args):
                    found.append(args[j + 1])
        return tuple(found)
    if sub not in _GIT_PUSH_VALUES:
        return ()
    long, short = _GIT_PUSH_VALUES[sub]
    found = []
    j = 0
    while j < len(args):
        value = args[j].value
        following = args[j + 1] if j + 1 < len(args) else None
        if value is None:
            return (*found, args[j])  # the repository, or an option naming one
        if value == "--":
            return (*found, following) if following is not None else tuple(found)
        if value.startswith("--no-"):
            pass  # a negated option takes no value
        elif value.startswith("--"):
            name, eq, given = value[2:].partition("=")
            if name and "repo".startswith(name) and sub == "push":
                # `--repo=X` names the repository (`--r`, `--re`: git finds them ambiguous)
                found.append(Word(given) if eq else following or Word(""))
            if not eq and any(o.startswith(name) for o in long):
                j += 1
        elif value.startswith("-") and len(value) > 1:
            letters = value[1:]
            at = min((letters.find(c) for c in short if c in letters), default=-1)
            if at == len(letters) - 1:
                j += 1  # the last letter takes the next word (`-uo ci.skip`)
        else:
            return (*found, args[j])  # the first word that is no option
        j += 1
    return tuple(found)


def _ssh_code(args: tuple[Word, ...]) -> bool:
    for i, arg in enumerate(args):
        value = arg.value
        if value is None:
            return True
        if value.startswith("-") and not value.startswith("--") and "o" in value:
            rest = value[value.index("o") + 1 :]
            if not rest:
                nxt = args[i + 1].value if i + 1 < len(args) else ""
                if nxt is None:
                    return True
                rest = nxt
            if any(k in rest.lower() for k in _SSH_CODE):
                return True
    return False


_SHELLS = frozenset(
    {"ash", "bash", "csh", "dash", "fish", "ksh", "mksh", "posh", "rbash", "sh", "tcsh", "yash",
     "zsh"}
)  # fmt: skip
# Builtins that change the shell for the commands after them (variables, options, functions,
# the command hash): a line with one of them and other commands is not allowed by its parts.
_STATE = frozenset(
    {
        ".", "alias", "builtin", "declare", "enable", "eval", "exec", "export", "getopts",
        "hash", "let", "local", "mapfile", "read", "readarray", "readonly", "set", "shopt",
        "source", "trap", "typeset", "unalias", "unset",
    }
)  # fmt: skip
_RUNS_CODE = _SHELLS | {"xargs", "find", "eval", "source", ".", "trap", "alias", "env"}
# Text bash evaluates as code where no command shows: ``${x@P}`` (prompt expansion runs $(…)),
# ``${!x}`` (indirection), and arithmetic, which evaluates a variable's value as an expression, so
# a value ``a[$(cmd)]`` runs cmd (``echo 'a[$(cmd)]'; echo ${@:_}`` runs it through ``$_``). The
# forms of ``${…}`` that evaluate nothing: a name, a number or a special parameter, an optional
# literal subscript, and a default, alternative, pattern or case operator.
_PLAIN_EXPANSION = re.compile(
    r"\$\{#?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[-@*#?$!0])(?:\[(?:[@*]|[0-9]+)\])?"
    r"(?:(?::?[-+?=]|##?|%%?|/[/#%]?|\^\^?|,,?|:[0-9]+(?::[0-9]+)?)[\s\S]*)?\}"
)


# A literal word bash may read as a variable name with a subscript it expands (``test -v``,
# ``printf -v``, ``declare``, ``read``, ``let``, ``unset``, ``mapfile``, ``[[ -v ]]``: the
# subscript is arithmetic, and its ``$(…)`` runs).
def _subscript_code(text: str) -> bool:
    """Whether ``text`` holds a ``[`` followed, before any ``]``, by ``$`` or a backtick (one
    pass: a backtracking pattern was quadratic in a word of 100,000 ``[``)."""
    open_bracket = False
    for c in text:
        if c == "[":
            open_bracket = True
        elif c == "]":
            open_bracket = False
        elif open_bracket and c in "$`":
            return True
    return False


def _subscript_name(text: str) -> bool:
    """Whether ``text`` holds a ``[`` followed, before any ``]``, by a letter or ``_``: a
    subscript naming a variable, which bash evaluates arithmetically (its value may be
    ``a[$(cmd)]``). One pass, as :func:`_subscript_code`."""
    open_bracket = False
    for c in text:
        if c == "[":
            open_bracket = True
        elif c == "]":
            open_bracket = False
        elif open_bracket and (c == "_" or (c.isascii() and c.isalpha())):
            return True
    return False


# Builtins that take variable names (and so expand a subscript in one): given a computed word,
# the name may be ``a[$(cmd)]`` built at run time (``"a[$_"``). With the option that makes them
# take a name, for those that take one only so.
_NAME_BUILTINS: dict[str, frozenset[str] | None] = {
    "test": frozenset({"-v", "-R"}),
    "[": frozenset({"-v", "-R"}),
    "printf": frozenset({"-v"}),
    "wait": frozenset({"-p"}),
    "read": None,
    "unset": None,
    "let": None,
    "mapfile": None,
    "readarray": None,
    "getopts": None,
}
_ARITHMETIC_NAME = re.compile(r"[A-Za-z_]")
_INTEGER_OR_REF = re.compile(r"[-+][A-Za-z]*[in][A-Za-z]*")
_TEST_ARITHMETIC = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
# Variables a shell (or the loader) runs as code, or that say which program a name runs
# (BASH_CMDS is the command hash, BASH_ALIASES the aliases): set, they run what the harness
# cannot read.
_CODE_VARIABLES = re.compile(
    r"(?:BASH_ENV|ENV|PS[0-4]|PROMPT_COMMAND|BASH_FUNC_[^=\[]*|SHELLOPTS|BASHOPTS|LD_PRELOAD"
    r"|LD_AUDIT|LD_LIBRARY_PATH|BASH_CMDS|BASH_ALIASES)(?:\[[^\]]*\])?\+?="
)
_STDIN_SCRIPTS = re.compile(r"-|/dev/stdin|/dev/fd/\d+|/proc/[^/]+/fd/\d+")
_SHELL_OPTION_ARGS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
# Redirection targets that write and read nothing: allow rules accept them.
_QUIET_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_HEREDOC_START = re.compile(
    r"(?P<w>[A-Za-z_]\w*)|'(?P<s>[A-Za-z_]\w*)'|\"(?P<d>[A-Za-z_]\w*)\"|\\(?P<b>[A-Za-z_]\w*)"
)
_CODE_CHARS = re.compile(r"[\s;&|<>()$`\"'\\]")
_EXPANDS = re.compile(r"`|\$[({\[]")  # what bash runs or evaluates in a double-quoted string
# Bytes that end a word for bash (its metacharacters); and the grammar's keywords, which bash
# reads as keywords only when they stand as words of their own.
_META = frozenset(b" \t\n;&|()<>")
_UNQUOTED_META = re.compile(r"\\[\s\S]|(?P<meta>[ \t\n;&|()<>])")
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "in", "while",
     "until", "do", "done", "function", "{", "}", "!", "[[", "]]"}
)  # fmt: skip
_KEYWORD_PARENTS = frozenset(
    {"compound_statement", "negated_command", "if_statement", "elif_clause", "else_clause",
     "while_statement", "do_group", "case_statement", "for_statement", "function_definition",
     "test_command"}
)  # fmt: skip
# Where the grammar puts words of their own (the others are inside words or expressions).
_WORD_PARENTS = frozenset(
    {"command", "declaration_command", "unset_command", "file_redirect", "herestring_redirect",
     "heredoc_redirect", "for_statement", "case_statement", "case_item"}
)  # fmt: skip
_NOT_WORDS = frozenset(
    {"file_redirect", "heredoc_redirect", "herestring_redirect", "heredoc_body", "heredoc_end",
     "comment"}
)  # fmt: skip

# Node types that hold no construct of their own: their commands and words are checked.
_STRUCTURE = frozenset(
    {
        "program", "list", "pipeline", "subshell", "negated_command", "if_statement",
        "elif_clause", "else_clause", "while_statement", "do_group", "case_statement",
        "case_item", "comment", "command", "command_name",
        "declaration_command", "unset_command", "herestring_redirect", "heredoc_start",
        "heredoc_body", "heredoc_content", "heredoc_end", "file_descriptor", "word", "string",
        "string_content", "raw_string", "ansi_c_string", "translated_string", "concatenation",
        "number", "simple_expansion", "variable_name", "special_variable_name",
        "brace_expression", "extglob_pattern",
    }
)  # fmt: skip
_CONSTRUCTS = {
    "command_substitution": "a command substitution ($(…) or backticks)",
    "process_substitution": "a process substitution (<(…) or >(…))",
    "arithmetic_expansion": "arithmetic ($((…)))",
    "function_definition": "a function definition",
    "for_statement": "a for or select loop (it assigns a variable)",
    "c_style_for_statement": "arithmetic (for ((…)))",
    "test_command": "a test expression ([ … ] or [[ … ]])",
    "variable_assignments": "a variable assignment",
}


# --- parsing -------------------------------------------------------------------------------

# A backslash and the character it escapes, or a byte tree-sitter may read as a blank where bash
# never does: CR, VT, FF, and any byte of a non-ASCII character (U+3000, U+00A0, ...).
_PAIR_OR_BLANK = re.compile(rb"\\[\s\S]|[\r\x0b\x0c\x80-\xff]")
_MASK = b"\x01"  # a plain word character for tree-sitter, as those are for bash
_LONE_DASH = re.compile(rb"(?<![^ \t\n])-(?![^ \t\n])")
_MASKED_AFTER_BACKSLASH = frozenset(b" \t\r\x0b\x0c") | frozenset(range(0x80, 0x100))


def _masked(src: bytes) -> bytes:
    """``src`` as tree-sitter must read it to split words where bash does, same length.

    Tree-sitter takes CR, VT, FF and Unicode spaces for blanks, and drops a backslash before a
    blank; bash splits words only at ASCII space, tab and newline (``git\\<TAB>x`` is one word).
    Each such byte is replaced by one that both read as a word character, so byte offsets still
    point into ``src``.
    """

    def one(m: re.Match[bytes]) -> bytes:
        text = m.group(0)
        if len(text) == 2:
            return b"\\" + _MASK if text[1] in _MASKED_AFTER_BACKSLASH else text
        return _MASK

    # A "-" word of its own before a here-document vanishes from the grammar's tree
    # (`git commit -F - <<EOF`); as a plain character it stays a word.
    return _LONE_DASH.sub(_MASK, _PAIR_OR_BLANK.sub(one, src))


def _kept_ranges(tree: Tree) -> list[tuple[int, int]]:
    """Where bash keeps a backslash-newline (single quotes, ``$'…'``, comments, quoted
    here-documents; elsewhere it joins the lines), in source order (they never nest)."""
    ranges: list[tuple[int, int]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in ("raw_string", "ansi_c_string", "comment"):
            ranges.append((node.start_byte, node.end_byte))
            continue
        if node.type == "heredoc_redirect":
            kids = node.children
            start = next((c for c in kids if c.type == "heredoc_start"), None)
            if start is None or any(q in (start.text or b"") for q in (b"'", b'"', b"\\")):
                ranges.extend((c.start_byte, c.end_byte) for c in kids if c.type == "heredoc_body")
        stack.extend(node.children)
    return sorted(ranges)


def _kept(ranges: list[tuple[int, int]], at: int) -> bool:
    i = bisect.bisect_right(ranges, (at, 1 << 62)) - 1  # the last range starting at or before
    return i >= 0 and ranges[i][0] <= at < ranges[i][1]


def _parse(command: str) -> tuple[bytes, Tree] | None:
    """The bytes bash runs (line continuations joined) and their tree; None when the command is
    too long, holds NUL, cannot be encoded, or keeps changing as continuations are joined."""
    if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        return None
    if sum(command.count(c) for c in _OPERATOR_CHARS) > MAX_COMMAND_OPERATORS:
        # tree-sitter's parse of a long pipeline or list is quadratic (80 KB of `a|` took
        # minutes) and cannot be cancelled mid-way: such a command is not parsed (review 11,
        # finding 15)
        return None
    try:
        src = os.fsencode(command)  # as subprocess hands it to bash
    except UnicodeError:
        return None
    parser = Parser(_LANGUAGE)
    for _ in range(_MAX_PASSES):
        tree = parser.parse(_masked(src))
        found = [m.start() for m in _PAIR_OR_BLANK.finditer(src) if m.group(0) == b"\\\n"]
        kept = _kept_ranges(tree) if found else []
        cuts = [at for at in found if not _kept(kept, at)]
        if not cuts:
            return src, tree
        joined = bytearray()
        last = 0
        for at in cuts:
            joined += src[last:at]
            last = at + 2
        src = bytes(joined + src[last:])
    return None


def _text(src: bytes, node: Node) -> str:
    return os.fsdecode(src[node.start_byte : node.end_byte])


def _tiles(node: Node, inner: Iterable[Node], start: int, end: int) -> bool:
    """Whether ``inner`` covers ``start..end`` with no gap (no text the grammar skipped)."""
    at = start
    for child in inner:
        if child.start_byte != at:
            return False
        at = child.end_byte
    return at == end


_BRACE = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


def _unquoted(raw: str, at_start: bool) -> tuple[Word, str]:
    """An unquoted word part: its value and a mask (escaped characters as NUL) for brace
    detection. Globs, tildes and stray ``$`` or backticks make the value unknown."""
    out: list[str] = []
    mask: list[str] = []
    unknown = splits = False
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            if i + 1 == len(raw):  # a lone trailing backslash: leave it to bash
                unknown = True
                break
            out.append(raw[i + 1])
            mask.append("\x00")
            i += 2
            continue
        if c in "*?[":
            unknown = splits = True
        elif c in "$`" or (c == "~" and ((i == 0 and at_start) or raw[i - 1 : i] in ("=", ":"))):
            unknown = True  # a tilde bash expands, or a $ or backtick left in a word: no guess
        out.append(c)
        mask.append(c)
        i += 1
    if unknown:
        return (_SPLITS if splits else _UNKNOWN), "".join(mask)
    return Word("".join(out)), "".join(mask)


_DQ_ESCAPES = '$`"\\\n'


def _double_quoted(raw: str) -> Word:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw) and raw[i + 1] in _DQ_ESCAPES:
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        if c in "$`":  # the grammar should have made a node of it: do not guess
            return _UNKNOWN
        out.append(c)
        i += 1
    return Word("".join(out))


def _word(node: Node, src: bytes) -> Word:
    """The value of one argument node (see :class:`Word`)."""
    return _word_and_mask(node, src, at_start=True)[0]


def _word_and_mask(node: Node, src: bytes, *, at_start: bool) -> tuple[Word, str]:
    t = node.type
    opaque = "\x00"  # a quoted or computed part: no brace of brace expansion
    if t == "word":
        word, mask = _unquoted(_text(src, node), at_start)
        if _BRACE.search(mask):
            return _SPLITS, mask
        return word, mask
    if t == "number":
        raw = _text(src, node)
        # -3, 0x1F, 10#ff: letters, digits and these marks are literal to bash outside (( ))
        return (Word(raw) if _LITERAL_NUMBER.fullmatch(raw) else _UNKNOWN), opaque
    if t == "variable_name":
        return Word(_text(src, node)), opaque
    if t == "raw_string":
        return Word(_text(src, node)[1:-1]), opaque
    if t == "string":
        inner = node.children[1:-1] if node.child_count >= 2 else []
        if not _tiles(node, inner, node.start_byte + 1, node.end_byte - 1):
            return _UNKNOWN, opaque
        parts = [
            _double_quoted(_text(src, c)) if c.type == "string_content" else _UNKNOWN for c in inner
        ]
        if any(p.value is None for p in parts):
            return _UNKNOWN, opaque
        return Word("".join(p.value or "" for p in parts)), opaque
    if t == "concatenation":
        if not _tiles(node, node.children, node.start_byte, node.end_byte):
            return _SPLITS, opaque
        values: list[str] = []
        masks: list[str] = []
        unknown = splits = False
        for i, child in enumerate(node.children):
            part, mask = _word_and_mask(child, src, at_start=at_start and i == 0)
            masks.append(mask)
            if part.value is None:
                unknown = True
                splits = splits or part.splits
            else:
                values.append(part.value)
        mask = "".join(masks)
        if _BRACE.search(mask):
            return _SPLITS, mask
        if unknown:
            return (_SPLITS if splits else _UNKNOWN), mask
        return Word("".join(values)), mask
    if t in ("ansi_c_string", "translated_string"):
        return _UNKNOWN, opaque
    return _SPLITS, opaque  # expansions, substitutions, anything else: computed at run time


def _assignment_word(node: Node, src: bytes) -> Word:
    """``NAME=value`` as a word of the command (unknown when the value is computed)."""
    value = node.child_by_field_name("value")
    if value is None:
        head = _text(src, node)
        return Word(head) if head.endswith("=") else _UNKNOWN
    if value.type == "array":
        return _UNKNOWN
    head = os.fsdecode(src[node.start_byte : value.start_byte])
    word = _word_and_mask(value, src, at_start=True)[0]
    if word.value is None:
        return _UNKNOWN
    return Word(head + word.value)


# --- the walk ------------------------------------------------------------------------------


_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_WORDISH = frozenset(
    {"word", "string", "raw_string", "concatenation", "number", "simple_expansion", "expansion",
     "ansi_c_string", "translated_string", "command_substitution", "process_substitution",
     "arithmetic_expansion", "brace_expression"}
)  # fmt: skip


def _extras(redirect: Node) -> list[Node]:
    """Words the grammar puts inside a redirection that bash gives the command as arguments
    (``echo >&2 message``: ``message``; ``cat <<EOF -``: ``-``)."""
    if redirect.type == "file_redirect":
        return redirect.children_by_field_name("destination")[1:]
    if redirect.type != "heredoc_redirect":
        return []
    found: list[Node] = []
    for child in redirect.children:
        if child.type in _REDIRECTS:
            found.extend(_extras(child))
        elif child.type in _WORDISH:
            found.append(child)
    return found


class _Place:
    """A node and its parent's place: tree-sitter finds a parent by walking down from the root,
    so the walk carries them (deep nesting stays linear)."""

    __slots__ = ("node", "up")

    def __init__(self, node: Node, up: _Place | None) -> None:
        self.node = node
        self.up = up


def _starts_pipeline(place: _Place) -> bool:
    """Whether the command at ``place`` stands where bash reads ``!`` and ``time`` as keywords:
    at the start of a pipeline (``a | time b`` runs the program ``time``)."""
    while place.up is not None and place.up.node.type == "redirected_statement":
        place = place.up
    if place.up is None or place.up.node.type != "pipeline":
        return True
    first = place.up.node.children[0]
    return (first.start_byte, first.end_byte) == (place.node.start_byte, place.node.end_byte)


def _head(src: bytes, node: Node) -> str:
    """The start of ``node``'s text: enough to tell a keyword or ``NAME=`` (decoding all of a
    long word, for every command nested in it, would be quadratic)."""
    return os.fsdecode(src[node.start_byte : min(node.end_byte, node.start_byte + 256)])


def _keywords_removed(words: list[tuple[str, Word]]) -> list[tuple[str, Word]]:
    """``words`` (as written, value) without the leading ``!`` and ``time [-p] [--]`` keywords
    the grammar left in a command (``! ! x``, ``time ! x``)."""
    while words:
        if words[0][0] == "!":
            words = words[1:]
        elif words[0][0] == "time":
            words = words[1:]
            for option in ("-p", "--"):
                if words and words[0][0] == option:
                    words = words[1:]
        else:
            break
    return words


def _basename(value: str) -> str:
    return value.rsplit("/", 1)[-1]


class _Analysis:
    """Collects one command line's simple commands, constructs, views and hidden code."""

    def __init__(self, depth: int, budget: list[int], git_environment: bool) -> None:
        self.depth = depth
        self.budget = budget  # [analyses, characters] left, shared with nested analyses
        # GIT_CONFIG*/GIT_EXEC_PATH named in the line or a line that runs this one: git may
        # take aliases or programs from the environment (see git_views)
        self.git_environment = git_environment
        self.commands: list[SimpleCommand] = []
        self.constructs: dict[str, None] = {}
        self.views: list[View] = []
        self.possible: list[View] = []
        self.hidden: dict[str, None] = {}

    def construct(self, why: str) -> None:
        self.constructs.setdefault(why)

    def hide(self, why: str) -> None:
        self.hidden.setdefault(why)

    def spend(self, chars: int = 0) -> bool:
        """Take one nested analysis (of ``chars`` characters of code) from the budget; False,
        and hidden code, when it is spent."""
        if self.depth >= _MAX_DEPTH or self.budget[0] <= 0 or chars > self.budget[1]:
            self.hide("it nests commands deeper than the harness reads")
            return False
        self.budget[0] -= 1
        self.budget[1] -= chars
        return True

    # -- nodes --

    def walk(self, root: Node, src: bytes) -> None:
        stack = [_Place(root, None)]
        covered = 0  # the tokens so far cover src up to here (leaves come in source order)
        while stack:
            place = stack.pop()
            node = place.node
            self.node(place, src)
            if node.child_count == 0 or node.type == "heredoc_body":  # a body holds its text
                if src[covered : node.start_byte].strip(b" \t\n"):
                    self.misread()  # text the grammar dropped from its tree
                covered = max(covered, node.end_byte)
            stack.extend(_Place(c, place) for c in reversed(node.children))
        if src[covered:].strip(b" \t\n"):
            self.misread()

    def node(self, place: _Place, src: bytes) -> None:
        node = place.node
        t = node.type
        if node.is_error or node.is_missing:
            self.construct("it does not parse")
            self.hide("it does not parse")
            return
        parent = place.up.node if place.up is not None else None
        if parent is not None and (
            (not node.is_named and t in _KEYWORDS and parent.type in _KEYWORD_PARENTS)
            or (node.is_named and parent.type in _WORD_PARENTS and t not in _NOT_WORDS)
            or t == "comment"
        ):
            self.bounded(node, src)
        if not node.is_named:
            if t == "&":
                self.construct("a background job (&)")
            elif t == "((":
                self.construct("arithmetic ((…))")
                if parent is not None and _ARITHMETIC_NAME.search(_text(src, parent)):
                    self.evaluates("arithmetic on a variable, whose value it evaluates")
            return
        if t in ("arithmetic_expansion", "c_style_for_statement"):
            if _ARITHMETIC_NAME.search(_text(src, node)):
                self.evaluates("arithmetic on a variable, whose value it evaluates")
        elif t == "test_command":
            text = _text(src, node)
            if any(op in text.split() for op in _TEST_ARITHMETIC) or "-v" in text.split():
                self.evaluates("a test that evaluates a variable's value as arithmetic")
        if t in _CONSTRUCTS:
            self.construct(_CONSTRUCTS[t])
        elif t == "word":
            if any(m["meta"] for m in _UNQUOTED_META.finditer(_text(src, node))):
                self.misread()
        elif t == "command":
            self.command(place, src)
        elif t in ("declaration_command", "unset_command"):
            self.declaration(node, src)
        elif t == "variable_name":
            if not _NAME.fullmatch(_text(src, node)):
                self.misread()  # @X=1 is a word to bash, not an assignment
        elif t == "variable_assignment":
            if parent is None or parent.type not in ("command", "declaration_command"):
                self.construct("a variable assignment")
            if _CODE_VARIABLES.match(_head(src, node)):
                self.hide("it sets a variable a shell runs as code (BASH_ENV, BASH_CMDS, ...)")
            if _subscript_code(_text(src, node)):  # declare -i x; x='a[$(…)]'
                self.evaluates("a word bash may read as a subscript it expands (a[$(…)])")
            if _subscript_name(_text(src, node)):  # a[x]=1, a+=([x]=1): x's value evaluated
                self.evaluates("a subscript naming a variable, whose value bash evaluates")
        elif t == "expansion":
            if any(c.type in ("=", ":=") for c in node.children):
                self.construct("an expansion that assigns (${x=…})")
            if not _PLAIN_EXPANSION.fullmatch(_text(src, node)):
                self.evaluates("an expansion that evaluates text (${x@P}, ${!x}, ${x:$n})")
        elif t == "file_redirect":
            self.redirect(node, src)
        elif t in ("simple_expansion", "concatenation"):
            if not _tiles(node, node.children, node.start_byte, node.end_byte):
                self.misread()  # $<TAB>- is no expansion to bash
        elif t == "file_descriptor":
            if not _text(src, node).isdigit():  # -x2>&1 is the word -x2 and >&1 to bash
                self.misread()
        elif t == "redirected_statement":
            body = node.child_by_field_name("body")
            if (body is None or body.type != "command") and any(
                _extras(r) for r in node.children_by_field_name("redirect")
            ):
                self.misread()  # a && b >f c: c is b's, not the list's
        elif t == "heredoc_redirect":
            self.heredoc(node, src)
        elif t == "compound_statement":
            pass  # { … }, or (( … )) (its "((" token)
        elif t not in _STRUCTURE:
            self.construct(f"syntax the harness does not read ({t})")

    def bounded(self, node: Node, src: bytes) -> None:
        """A word or keyword of the grammar must be a word for bash too: ended on both sides
        by a metacharacter (``""\\!x`` is one word to bash, ``done}`` is no keyword)."""
        start, end = node.start_byte, node.end_byte
        # a redirection starts a word; a here-document's delimiter follows its << or <<-
        operator = src[start : start + 1] in (b"<", b">", b"&") or node.type == "heredoc_start"
        if (start > 0 and src[start - 1] not in _META and not operator) or (
            end < len(src) and src[end] not in _META and node.type != "comment"
        ):
            self.misread()

    def evaluates(self, why: str) -> None:
        """Text bash evaluates as code at run time: no rule can read it."""
        self.construct(why)
        self.hide(why)

    def misread(self) -> None:
        why = "words the harness splits differently from bash"
        self.construct(why)
        self.hide(why)

    def redirect(self, node: Node, src: bytes) -> None:
        operator = next((c for c in node.children if not c.is_named), None)
        if operator is not None and operator.type in (">&-", "<&-"):
            return
        target = node.child_by_field_name("destination")
        if target is None:
            self.construct("a redirection the harness does not read")
            return
        if operator is not None and operator.type in (">&", "<&") and target.type == "number":
            return  # 2>&1: a descriptor copied, no file
        if operator is not None and operator.type in (">&", "<&") and _text(src, target) == "-":
            return
        value = _word(target, src).value
        if value not in _QUIET_FILES:
            self.construct("a redirection to or from a file")

    def heredoc(self, node: Node, src: bytes) -> None:
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        if not self._heredoc_ends_where_bash_ends(node, src):
            self.construct("a here-document whose end the harness cannot confirm")
            if body is not None:
                self.nested(_text(src, body), certain=False)
            return
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        found = _HEREDOC_START.fullmatch(_text(src, start)) if start is not None else None
        text = _text(src, body) if body is not None else ""
        if found is not None and found.group("w") is not None and _EXPANDS.search(text):
            # An unquoted delimiter: bash expands the body as a double-quoted string, and the
            # parser does not show every substitution in it (backticks, a <<- body; review 5,
            # finding 11). No allow rule approves it; what it may run is possibly run.
            self.construct("a here-document body with substitutions bash expands")
            self.nested(text, certain=False)

    def _heredoc_ends_where_bash_ends(self, node: Node, src: bytes) -> bool:
        kids = node.children
        start = next((c for c in kids if c.type == "heredoc_start"), None)
        end = next((c for c in kids if c.type == "heredoc_end"), None)
        body = next((c for c in kids if c.type == "heredoc_body"), None)
        if start is None or end is None:
            return False
        found = _HEREDOC_START.fullmatch(_text(src, start))
        if found is None:
            return False
        delimiter = next(g for g in found.groups() if g is not None)
        strip_tabs = any(c.type == "<<-" for c in kids)
        if _text(src, end) != delimiter:
            return False
        line_start = src.rfind(b"\n", 0, end.start_byte) + 1
        lead = src[line_start : end.start_byte]
        if lead.strip(b"\t") if strip_tabs else lead:
            return False
        if src[end.end_byte : end.end_byte + 1] not in (b"", b"\n"):
            return False
        if body is not None:
            for line in src[body.start_byte : line_start].split(b"\n"):
                if (line.lstrip(b"\t") if strip_tabs else line) == delimiter.encode():
                    return False
        return True

    def command(self, place: _Place, src: bytes) -> None:
        node = place.node
        # (where, the word's node; None for one the harness cannot read), in source order
        units: list[tuple[int, Node | None]] = []
        for i, child in enumerate(node.children):
            field = node.field_name_for_child(i)
            if child.type in _REDIRECTS:
                units.extend((x.start_byte, x) for x in _extras(child))
            elif field == "name":
                units.append(
                    (child.start_byte, child.children[0] if child.child_count == 1 else None)
                )
            elif child.type == "variable_assignment" or (field == "argument" and child.is_named):
                units.append((child.start_byte, child))
            else:
                self.construct(f"syntax the harness does not read ({child.type})")
                units.append((child.start_byte, None))
        parent = place.up.node if place.up is not None else None
        if parent is not None and parent.type == "redirected_statement":
            for redirect in parent.children_by_field_name("redirect"):
                units.extend((x.start_byte, x) for x in _extras(redirect))
        units.sort(key=lambda u: u[0])
        assignments: list[Word] = []
        rest: list[tuple[str, Word]] = []  # (as written, value)
        for _, unit in units:
            if unit is None:
                rest.append(("", _SPLITS))
            elif unit.type == "variable_assignment" and not rest:
                assignments.append(_assignment_word(unit, src))
            else:
                rest.append((_head(src, unit), _word(unit, src)))
        if not assignments and units and units[0][0] == node.start_byte and _starts_pipeline(place):
            rest = _keywords_removed(rest)
            while rest and _ASSIGNMENT.match(rest[0][0]):
                assignments.append(rest.pop(0)[1])  # time X=1 cmd: X=1 assigns again
        if not rest:
            if not assignments:
                return  # time alone: it times nothing
            self.construct("a variable assignment")
            return
        words = tuple(assignments) + tuple(w for _, w in rest)
        self.add(SimpleCommand(words, len(assignments)))

    def declaration(self, node: Node, src: bytes) -> None:
        words = []
        for child in node.children:
            if not child.is_named:
                words.append(Word(child.type))  # the keyword: export, declare, local, unset, ...
            elif child.type == "variable_assignment":
                words.append(_assignment_word(child, src))
                if child.child_by_field_name("name") is None:
                    self.evaluates("a declaration of a computed variable name")
            elif child.type == "word" and _INTEGER_OR_REF.fullmatch(_text(src, child)):
                # -i evaluates what is assigned as arithmetic; -n makes a name refer to another
                self.evaluates("an integer or reference declaration (declare -i, -n)")
                words.append(_word(child, src))
            elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                continue
            else:
                word = _word(child, src)
                if word.value is None:  # declare "a[$_]=1": a name built at run time
                    self.evaluates("a declaration of a computed variable name")
                words.append(word)
        self.add(SimpleCommand(tuple(words)))

    def add(self, command: SimpleCommand) -> None:
        self.commands.append(command)
        first = command.words[command.assignments].value
        if first is not None and _basename(first) == "coproc":
            self.construct("a background job (coproc)")
            self.hide("coproc, whose syntax the harness does not read")
        name_options = _NAME_BUILTINS.get(first or "", frozenset())
        args = command.words[command.assignments + 1 :]
        if (
            first in _NAME_BUILTINS
            and any(w.value is None for w in args)
            and (name_options is None or any(w.value in name_options for w in args))
        ):
            self.evaluates("a builtin given a computed variable name (a[$(…)] built at run time)")
        if first == "let" and len(args) > 0:
            self.evaluates("let, whose arithmetic evaluates variables' values as code")
        for word in command.words:
            if word.value is not None and _subscript_code(word.value):
                self.evaluates("a word bash may read as a subscript it expands (a[$(…)])")
            if first in _NAME_BUILTINS and word.value is not None and _subscript_name(word.value):
                # read "a[x]", printf -v "a[x]": the name's subscript evaluates x's value
                self.evaluates("a subscript naming a variable, whose value bash evaluates")
            if word.value is not None and (
                _CODE_VARIABLES.match(word.value)
                or word.value.startswith(("BASH_CMDS", "BASH_ALIASES"))  # read BASH_CMDS[ls]
            ):
                self.hide("it sets a variable a shell runs as code (BASH_ENV, BASH_CMDS, ...)")
        argv = command.words[command.assignments :]
        options = [w.value or "-pf" for w in argv[1:] if (w.value or "-").startswith("-")]
        if first in ("hash", "enable") and any("p" in o or "f" in o for o in options):
            self.hide("hash -p or enable -f makes a name run another program")
        marks = (len(self.views), len(self.possible), len(self.hidden))
        self.unwrap(command, self.views)
        heads = (0, command.assignments)
        why = _code_option(argv)
        if why is None and (
            any(v is not command or s not in heads for v, s in self.views[marks[0] :])
            or (len(self.possible), len(self.hidden)) != marks[1:]
        ):
            why = "it runs another command (a wrapper, bash -c, xargs, find -exec, ...)"
        if why is not None:  # allow rules look through it as deny rules do (Spec.allows)
            self.commands[self.commands.index(command)] = evolve(command, runs_other=why)

    # -- what a command runs --

    def unwrap(self, command: SimpleCommand, into: list[View]) -> None:
        """Add the views of ``command``: itself, and what its wrappers, shells and ``eval`` run."""
        words = command.words
        starts = {0, command.assignments}
        open_after: int | None = None  # every word after a wrapper may start a command
        for s in range(len(words)):
            if s not in starts and (open_after is None or s <= open_after):
                continue
            into.append((command, s))
            value = words[s].value
            if value is None:
                continue  # a computed command word: matching says "maybe"
            name = _basename(value)
            if _PROC_EXE.fullmatch(value):
                name = "bash"  # the running program itself: the bash tool's bash (review 5, 10)
            if name.startswith("git") and self.git_views(command, s, into):
                continue
            runner = s + 1 < len(words) and (name, words[s + 1].value) in _RUNNERS
            if (name in _WRAPPERS or runner) and open_after is None:
                open_after = s
                self.wrapped_code(words[s + 1 :])  # later wrappers' arguments are among these
            if name in _DASH_C:
                self.dash_c(words[s + 1 :])
            if name in ("gdb", "lldb") and any(
                w.value is None or _DEBUGGER_CODE.fullmatch(w.value) for w in words[s + 1 :]
            ):
                self.hide("a debugger runs commands given in its options (gdb -ex 'shell …')")
            derived = len(words) - s if name in ("xargs", "find") else 0
            if name not in _RUNS_CODE or not self.spend(derived):
                continue  # each costs one from the budget: a line of 10,000 "bash" stays cheap
            if name == "xargs":
                self.xargs(words[s + 1 :], into)
            elif name == "find":
                self.find_exec(words[s + 1 :], into)
            elif name in _SHELLS:
                self.shell(words, s + 1)
            elif name == "eval":
                self.eval(words[s + 1 :])
            elif name == "trap":
                self.trap(words[s + 1 :])
            elif name == "alias":
                self.alias(words[s + 1 :])
            elif name == "env":
                self.env_split(words[s + 1 :])
            else:  # source, .
                script = words[s + 1] if s + 1 < len(words) else None
                if script is None or script.value is None or _STDIN_SCRIPTS.fullmatch(script.value):
                    self.hide("it sources code the harness cannot read")

    def git_views(self, command: SimpleCommand, s: int, into: list[View]) -> bool:
        """The views of the git command at ``command.words[s]``; True when it is one.

        ``git-push`` (git's program for a subcommand, by any path) is ``git push``; a git whose
        aliases or programs may come from elsewhere (``-c``, ``--config-env``, ``--exec-path``
        before the subcommand, or ``GIT_CONFIG*``/``GIT_EXEC_PATH`` anywhere in the line), or
        whose subcommand is not one of git's own (an alias: ``git p`` for ``push``) may run any
        subcommand: every rule on git possibly matches (review 5, finding 02; review 12,
        finding 9)."""
        words = command.words
        name = _basename(words[s].value or "")
        if name.startswith("git-") and len(name) > 4:
            into.append((SimpleCommand((Word("git"), Word(name[4:]), *words[s + 1 :])), 0))
            return True
        if name != "git":
            return False
        i = s + 1
        while i < len(words) and (words[i].value or "").startswith("-"):
            option = words[i].value or ""
            if option.startswith(
                ("-c", "--config-env", "--exec-path", "--git-dir", "--bare", "--work-tree")
            ):
                self.possible.append((SimpleCommand((Word("git"), _SPLITS)), 0))
                break
            i += 2 if option in _GIT_GLOBAL_VALUES else 1
        else:
            sub = words[i].value if i < len(words) else ""
            # git's push and fetch plumbing (`git send-pack URL main` pushes) is a spelling of
            # the porcelain a rule names (review 13, finding 7)
            if sub is not None and sub and (sub not in _GIT_COMMANDS or sub in _GIT_PLUMBING):
                # an alias (or a `git-NAME` program) may run any subcommand
                self.possible.append((SimpleCommand((Word("git"), _SPLITS)), 0))
        if self.git_environment:
            self.possible.append((SimpleCommand((Word("git"), _SPLITS)), 0))
        return False

    def wrapped_code(self, args: tuple[Word, ...]) -> None:
        """A wrapper's literal argument that reads as shell code (``watch 'touch P'``, ``su -c
        …``) may run as a command: its commands possibly match."""
        for arg in args:
            if arg.value is not None and _CODE_CHARS.search(arg.value):
                self.nested(arg.value, certain=False)

    def dash_c(self, args: tuple[Word, ...]) -> None:
        """``su -c CODE``, ``sg GROUP -c CODE``, ``flock F -c CODE``: CODE runs in a shell."""
        for i, arg in enumerate(args):
            value = arg.value
            code: Word | None = None
            if value in ("-c", "--command"):
                code = args[i + 1] if i + 1 < len(args) else None
            elif value is not None and value.startswith("--command="):
                code = Word(value.partition("=")[2])
            elif value is not None and value.startswith("-c") and len(value) > 2:
                code = Word(value[2:])
            else:
                continue
            if code is None or code.value is None:
                self.hide("it runs a shell on code the harness cannot read")
            else:
                self.nested(code.value, certain=True)

    def shell(self, words: tuple[Word, ...], start: int) -> None:
        """``bash -c CODE`` runs CODE; ``bash`` without a script (or with ``-s``, ``-``) runs
        what it reads from its input. Options end at the first operand (the code or script)."""
        code = stdin = False
        i = start
        while i < len(words):
            value = words[i].value
            if value is None:
                break
            if value == "--":
                i += 1
                break
            if value in ("--version", "--help"):
                return  # it prints and exits
            if value in _SHELL_OPTION_ARGS:
                i += 2
                continue
            if value.startswith("--"):
                i += 1
                continue
            if len(value) < 2 or value[0] not in "-+":
                break
            flags = value[1:]
            code = code or (value[0] == "-" and "c" in flags)
            stdin = stdin or "s" in flags
            i += 2 if ("o" in flags or "O" in flags) else 1
        operand = words[i] if i < len(words) else None
        if code:
            if operand is None or operand.value is None:
                self.hide("it runs a shell on code the harness cannot read")
            else:
                self.nested(operand.value, certain=True)
        elif (
            stdin
            or operand is None
            or operand.value is None
            or _STDIN_SCRIPTS.fullmatch(operand.value)
        ):
            self.hide("it runs a shell reading commands from its input")

    def trap(self, args: tuple[Word, ...]) -> None:
        """``trap CODE SIGNAL…`` runs CODE when the signal (or EXIT) comes."""
        rest = list(args)
        while rest and rest[0].value in ("-p", "-l", "-P"):
            rest.pop(0)
        if rest and rest[0].value == "--":
            rest.pop(0)
        if len(rest) >= 2:
            self.construct("a trap (its code runs later)")
            code = rest[0].value
            if code is None:
                self.hide("it traps a signal with code the harness cannot read")
            elif code != "-":
                self.nested(code, certain=True)

    def alias(self, args: tuple[Word, ...]) -> None:
        """``alias e=touch``: the value runs wherever the alias is used."""
        for arg in args:
            if arg.value is None:
                self.hide("it defines an alias the harness cannot read")
            elif "=" in arg.value:
                self.construct("an alias definition (its code runs where it is used)")
                self.nested(arg.value.partition("=")[2], certain=True)

    def env_split(self, args: tuple[Word, ...]) -> None:
        """``env -S 'cmd args'`` (``-S'…'``, ``--split-string=…``, ``-iS…``) splits its
        argument into a command and runs it."""
        for i, arg in enumerate(args):
            value = arg.value
            if value is None or not value.startswith("-") or value == "--":
                break
            code: str | None = None
            if value.startswith("--split-string"):
                code = value.partition("=")[2] if "=" in value else None
                nxt = i + 1
            elif not value.startswith("--") and "S" in value:
                code = value[value.index("S") + 1 :] or None
                nxt = i + 1
            else:
                continue
            if code is None:
                follow = args[nxt] if nxt < len(args) else None
                if follow is None or follow.value is None:
                    self.hide("env -S splits a string the harness cannot read")
                    return
                code = follow.value
            self.construct("env -S (it splits a string into a command)")
            self.nested(code, certain=True)
            return

    def eval(self, args: tuple[Word, ...]) -> None:
        if any(a.value is None for a in args):
            self.hide("it evaluates a computed string")
        elif args:
            self.nested(" ".join(a.value or "" for a in args), certain=True)

    def xargs(self, args: tuple[Word, ...], into: list[View]) -> None:
        """``xargs CMD``: CMD with more words from its input; ``-I R`` puts them where R is."""
        replace: str | None = None
        i = 0
        while i < len(args) and args[i].value is not None and (args[i].value or "").startswith("-"):
            value = args[i].value or ""
            if value in ("-I", "--replace") and i + 1 < len(args):
                replace = args[i + 1].value or "{}"
                i += 2
                continue
            if value.startswith("-I") and len(value) > 2:
                replace = value[2:]
            elif value.startswith(("-i", "--replace")):
                replace = value.partition("=")[2] or value[2:] or "{}"
            elif value in ("-a", "-d", "-E", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter"):
                i += 1  # an option with a value
            i += 1
        if i >= len(args):
            return
        words = tuple(
            _UNKNOWN if replace and a.value is not None and replace in a.value else a
            for a in args[i:]
        )
        self.unwrap(SimpleCommand((*words, _SPLITS)), into)

    def find_exec(self, args: tuple[Word, ...], into: list[View]) -> None:
        """``find … -exec CMD {} ;``: CMD, with ``{}`` a found path."""
        for i, arg in enumerate(args):
            if arg.value not in ("-exec", "-execdir", "-ok", "-okdir"):
                continue
            tail = []
            for a in args[i + 1 :]:
                if a.value in (";", "+"):
                    break
                tail.append(_UNKNOWN if a.value is None or "{}" in a.value else a)
            if tail:
                self.unwrap(SimpleCommand(tuple(tail)), into)

    def nested(self, code: str, *, certain: bool) -> None:
        """Analyse ``code`` as a command line run by this one: its views count as views
        (``certain``) or as possible views, and its hidden code hides in this one too."""
        if not self.spend(len(code)):
            return
        inner = _analyse(code, self.depth + 1, self.budget, self.git_environment)
        if certain:
            self.views.extend(inner.views)
            self.possible.extend(inner.possible)
            for why in inner.hidden:
                self.hide(why)
        else:  # maybe not code at all: only what it would run counts, not that it fails to parse
            self.possible.extend(inner.views)
            self.possible.extend(inner.possible)

    def state_changes(self) -> bool:
        for command in self.commands:
            argv = command.words[command.assignments :]
            name = argv[0].value if argv else None
            if name in _STATE or (name == "printf" and any(w.value == "-v" for w in argv[1:])):
                return True
        return False


_GIT_ENVIRONMENT = re.compile(r"GIT_CONFIG|GIT_EXEC_PATH", re.IGNORECASE)
_PROC_EXE = re.compile(r".*/proc/+[^/]+/+exe")


def _analyse(
    command: str, depth: int, budget: list[int], git_environment: bool = False
) -> ParsedCommand:
    parsed = _parse(command)
    if parsed is None:
        why = "it is too long or holds characters bash cannot be given"
        return ParsedCommand((), (why,), (), (), (why,), plain=False)
    src, tree = parsed
    analysis = _Analysis(
        depth, budget, git_environment or _GIT_ENVIRONMENT.search(command) is not None
    )
    analysis.walk(tree.root_node, src)
    if len(analysis.commands) > 1 and analysis.state_changes():
        analysis.construct("a builtin that changes the shell (export, read, …) with other commands")
    root = tree.root_node
    plain = (
        not analysis.constructs
        and not analysis.hidden
        and len(analysis.commands) == 1
        and root.child_count == 1
        and root.children[0].type == "command"
        and analysis.commands[0].assignments == 0
        and all(
            c.type == "command_name" or root.children[0].field_name_for_child(i) == "argument"
            for i, c in enumerate(root.children[0].children)
        )
        and all(w.value is not None for w in analysis.commands[0].words)
    )
    return ParsedCommand(
        commands=tuple(analysis.commands),
        constructs=tuple(analysis.constructs),
        views=tuple(analysis.views),
        possible=tuple(analysis.possible),
        hidden=tuple(analysis.hidden),
        plain=plain,
    )


@functools.lru_cache(maxsize=512)
def parse_command(command: str) -> ParsedCommand:
    """Split ``command`` (a ``bash -c`` string) into what it runs (see :class:`ParsedCommand`).

    Never raises: a command that does not parse comes back with a construct and hidden code
    saying so. Cached by text.
    """
    return _analyse(command, 0, [_BUDGET, MAX_COMMAND_CHARS])


# --- rule specifiers -----------------------------------------------------------------------

_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./^-]+")


def runs_any_program(name: str) -> bool:
    """Whether the program ``name`` (a shell, a wrapper, ``xargs``, ``find``, ``eval``...) may
    run any other program its arguments give: what a link to it runs cannot be known from
    the link's name (``bin/s -> /bin/bash``, ``bin/s -c '…'``: review 16, finding 2)."""
    return name in _SHELLS or name in _WRAPPERS or name in _RUNS_CODE


def names_code_variable(command: str) -> bool:
    """Whether a variable bash (or the loader) runs as code is named anywhere in ``command``,
    with or without ``=``: ``read PS4``, ``printf -v BASH_ENV``, ``export BASH_ENV``, ``for PS4
    in``, ``mapfile PS4`` set it without the ``NAME=`` an assignment has (review 4, finding 15);
    deny and ask rules then possibly match (asked)."""
    return any(_CODE_VARIABLE_NAME.fullmatch(token) for token in _TOKEN.findall(command))


_CODE_VARIABLE_NAME = re.compile(
    r"BASH_ENV|ENV|PS[0-4]|PROMPT_COMMAND|BASH_FUNC_\S*|SHELLOPTS|BASHOPTS|LD_PRELOAD|LD_AUDIT"
    r"|LD_LIBRARY_PATH|BASH_CMDS|BASH_ALIASES|BASH_LOADABLES_PATH"
)
# Spec.mentioned_in's tokens: runs of what is none of blanks, quotes, backslashes, the shell's
# operators and the characters options and assignments join words with.
_TOKEN = re.compile(r"[^\s'\"`\\;&|()<>{}$=,!]+")
_QUOTING = re.compile(r"['\"\\]")
_GLOB_CHARS = re.compile(r"[*?\[]")


def _in_bundle(token: str, word: _RuleWord) -> bool:
    """Whether the rule's literal ``word`` ends a bundle of short options (``-qctouch``:
    ``script -c`` takes ``touch`` glued on; ``-xrm``; review 7, finding 16)."""
    literal = word.literal
    return (
        literal is not None
        and len(token) > len(literal) + 1
        and token[0] == "-"
        and token[1] != "-"
        and token.endswith(literal)
    )


def _glob_names(token: str, word: _RuleWord) -> bool:
    """Whether the glob ``token`` (with a character that is not a wildcard) may expand to the
    rule's literal ``word``."""
    if word.literal is None or not _GLOB_CHARS.search(token) or not _GLOB_CHARS.sub("", token):
        return False
    return fnmatch.fnmatchcase(word.literal, token)


# The commands an approve-always generalises to a prefix rule (``bash(git status:*)``): each
# reads and prints and nothing else, whatever arguments follow (no option writes a file, runs a
# program or prints a file's content). Every other command is approved always exactly as it was
# shown: nothing tells ``rm -f x`` from ``rm -rf /``, ``git config user.name x`` from ``git
# config core.fsmonitor 'touch P'`` or ``git log`` from ``git log --output=~/.bashrc`` but the
# words that follow.
_PREFIX_KEYS: frozenset[tuple[str, ...]] = frozenset(
    {("git", "status"), ("ls",), ("pwd",), ("whoami",)}
)


@frozen
class _RuleWord:
    """One word of a rule: ``literal`` when it has no wildcard, ``star`` when it is just ``*``
    (any number of words), else ``pattern`` (``*`` is any text within the word)."""

    literal: str | None
    star: bool
    pattern: _Linear

    def matches(self, value: str) -> bool:
        return value == self.literal if self.literal is not None else self.pattern.fullmatch(value)


class _Linear:
    """A rule's wildcard pattern (literal text and ``.*``) run by RE2, in time linear in the
    text: Python's ``re`` took minutes for ``bash(*a*a*a*a*b)`` against a long command, and
    rules come from settings files (an untrusted project's deny rules too). Bytes are matched
    as Latin-1 characters, so any text (lone surrogates included) matches as written."""

    __slots__ = ("_regex",)

    def __init__(self, pattern: str) -> None:
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        options.dot_nl = True
        options.never_capture = True
        options.log_errors = False
        self._regex: Any = re2.compile(_latin1(pattern), options)  # google-re2 has no hints

    def fullmatch(self, text: str) -> bool:
        return self._regex.fullmatch(_latin1(text)) is not None


def _latin1(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _escape(text: str) -> str:
    """``text`` as RE2 literal text (as Latin-1 bytes: each byte escaped by its code)."""
    return "".join(f"\\x{b:02x}" for b in _latin1(text))


def _rule_word(chars: list[str | None]) -> _RuleWord:
    if all(c is not None for c in chars):
        literal = "".join(c for c in chars if c is not None)
        return _RuleWord(literal, False, _Linear(_escape(literal)))
    pattern = "".join(".*" if c is None else _escape(c) for c in chars)
    return _RuleWord(None, chars == [None], _Linear(pattern))


def escape_spec(command: str) -> str:
    """``command`` as a rule specifier that means exactly it: ``\\`` and ``*`` escaped."""
    return command.replace("\\", "\\\\").replace("*", "\\*")


@frozen
class Spec:
    """A compiled ``bash(...)`` specifier (see :func:`compile_spec`)."""

    words: tuple[_RuleWord, ...]
    rest: bool
    exact: str | None
    plain: bool
    text: _Linear

    def finds(self, parsed: ParsedCommand) -> Found:
        """Whether a deny or ask rule with this specifier catches a simple command of
        ``parsed``: ``yes``; ``maybe`` when it could (a computed word where the rule looks, code
        the harness cannot read, a possible command); else ``no``."""
        best: Found = "maybe" if parsed.hidden else "no"
        for command, starts in _by_command(parsed.views):
            found = self._finds_in(command, starts)
            if found == "yes":
                return "yes"
            best = _BY_RANK[max(_RANK[best], _RANK[found])]
        if best == "no" and any(
            self._finds_in(c, starts) != "no" for c, starts in _by_command(parsed.possible)
        ):
            best = "maybe"
        return best

    def mentioned_in(self, command: str) -> bool:
        """Whether the rule's words (those that are not ``*``) appear, in order, among the
        tokens of ``command``'s text: its words split at blanks, quotes, backslashes and the
        shell's operators (``(``, ``;``, ``=``, ...), a token with ``/`` also by its last part.

        The safety net under :meth:`finds` for deny and ask rules: however bash is made to run
        a program (a wrapper no list names, a builtin's callback, an option that takes a
        command, a program's global options before a subcommand), its name is written in the
        command unless it is computed, and a computed word already makes rules ask. A rule
        mentioned so possibly matches: the call is asked, never silently run. The cost is a
        question where the name is data (``echo touch`` under a ``touch`` deny rule)."""
        words = [w for w in self.words if not w.star]
        if not words:
            return False
        # Also with quotes and backslashes removed (`touc\\h`, `to''uch` are `touch`); a glob
        # token (`/usr/bin/tou?h`, `t*h`) counts when it could name the rule's word.
        # And as bash decodes `$'…'` (`$'\x74ouch'`, a tab before it) and with expansions
        # made empty or given their default (`tou${x}ch`, `${x:-touch}`) (review 7, finding 16).
        decoded = ANSI_C.sub(ansi_c, command)
        texts = (command, decoded, *without_expansions(decoded))
        for text in dict.fromkeys(t for c in texts for t in (c, _QUOTING.sub("", c))):
            i = 0
            for token in _TOKEN.findall(text):
                last = _basename(token)
                if (
                    words[i].matches(token)
                    or ("/" in token and words[i].matches(last))
                    or _glob_names(last, words[i])
                    or _in_bundle(token, words[i])
                ):
                    i += 1
                    if i == len(words):
                        return True
        return False

    def _finds_in(self, command: SimpleCommand, starts: set[int]) -> Found:
        """The rule against ``command`` from each of ``starts`` at once (one pass, however many
        wrappers give it starts)."""
        words = command.words
        n = len(words)
        states: dict[int, int] = dict.fromkeys(starts, 2)
        maybe = False
        for i, rule in enumerate(self.words):
            new: dict[int, int] = {}
            if rule.star:
                first = min(states)
                level = 0
                for j in range(first, n + 1):
                    level = max(level, states.get(j, 0))
                    new[j] = level
            else:
                for j, level in states.items():
                    if j >= n:
                        continue
                    word = words[j]
                    if word.splits:
                        maybe = True  # it may become these rule words and any others
                        continue
                    if word.value is None:
                        got = 1
                    elif rule.matches(word.value) or (
                        i == 0
                        and j in starts
                        and "/" in word.value
                        and rule.matches(_basename(word.value))
                    ):
                        got = 2
                    else:
                        continue
                    new[j + 1] = max(new.get(j + 1, 0), min(level, got))
            states = new
            if not states:
                break
        vanish = command.vanish_from
        result = 1 if maybe else 0
        for j, level in states.items():
            if self.rest or j == n:
                result = max(result, level)
            elif j >= vanish:
                result = max(result, min(level, 1))
        return _BY_RANK[result]

    def allows(self, command: SimpleCommand) -> bool:
        """Whether an allow rule with this specifier approves ``command`` by its words.

        The rule's words must name the assignments and the command word literally (a wildcard
        never matches them, so ``git*`` cannot stand for ``git status x/../../bin/touch``);
        every other word the rule compares must be literal. Words after a ``:*`` prefix may be
        computed: they are arguments whatever they expand to.
        """
        if self.exact is not None and not self.plain:
            return False  # quotes or other shell syntax in the rule: only the exact text
        words = command.words
        head = command.assignments + 1
        if not self.words:
            return self.rest
        if command.runs_other is not None and (
            self.rest or any(r.literal is None for r in self.words)
        ):
            return False  # what it runs decides: only a rule naming every word approves it
        if len(self.words) < head:
            return False
        for rule, word in zip(self.words[:head], words[:head], strict=False):
            if rule.literal is None or word.value != rule.literal:
                return False
        states = {head}
        n = len(words)
        for rule in self.words[head:]:
            if rule.star:
                states = set(range(min(states), n + 1))
            else:
                states = {
                    j + 1
                    for j in states
                    if j < n and words[j].value is not None and rule.matches(words[j].value or "")
                }
            if not states:
                return False
        return self.rest or n in states


def _by_command(views: Iterable[View]) -> list[tuple[SimpleCommand, set[int]]]:
    """``views`` grouped by command: each command once, with every index a view starts at."""
    starts: dict[int, tuple[SimpleCommand, set[int]]] = {}
    for command, start in views:
        starts.setdefault(id(command), (command, set()))[1].add(start)
    return list(starts.values())


@functools.lru_cache(maxsize=1024)
def compile_spec(spec: str) -> Spec:
    """Compile a ``bash(...)`` specifier.

    Words are separated by blanks; ``*`` is a wildcard (a word of its own: any number of words;
    inside a word: any text within it; at the very end: any further words as well), ``\\*`` a
    literal star and ``\\\\`` a literal backslash. A trailing ``:*`` makes the words a prefix:
    ``git status:*`` is ``git status`` and any words after. A specifier with neither is also
    exact text: it matches a command equal to it byte for byte.
    """
    chars: list[str | None] = []
    i = 0
    while i < len(spec):
        c = spec[i]
        if c == "\\" and spec[i + 1 : i + 2] in ("\\", "*"):
            chars.append(spec[i + 1])
            i += 2
            continue
        chars.append(None if c == "*" else c)
        i += 1
    text_chars = list(chars)
    prefix = len(chars) >= 2 and chars[-1] is None and chars[-2] == ":"
    if prefix:
        chars = chars[:-2]
    groups: list[list[str | None]] = [[]]
    for char in chars:
        if char is not None and char.isspace():
            if groups[-1]:
                groups.append([])
        else:
            groups[-1].append(char)
    words = [_rule_word(g) for g in groups if g]
    rest = prefix
    if words and words[-1].star:
        words.pop()
        rest = True
    elif words and groups[-1] and groups[-1][-1] is None:
        rest = True  # "ls*" is ls… and any words after, as "*" meant any text
    exact = None if prefix or None in chars else "".join(c for c in chars if c is not None)
    plain = all(w.literal is None or _PLAIN.fullmatch(w.literal) for w in words)
    return Spec(
        words=tuple(words),
        rest=rest,
        exact=exact,
        plain=plain,
        text=_text_pattern(text_chars, prefix),
    )


def _text_pattern(chars: list[str | None], prefix: bool) -> _Linear:
    """The specifier as a pattern over the command's text with blanks squeezed (how rules matched
    before they read words): deny and ask rules still catch what it matches."""
    body = chars[:-2] if prefix else chars
    pieces: list[str] = []
    for blank, run in _runs(body):
        if blank:
            pieces.append(" ")
        else:
            pieces.extend(".*" if c is None else _escape(c) for c in run)
    pattern = "".join(pieces).strip(" ")
    return _Linear(pattern + ("(?: .*)?" if prefix else ""))


def _runs(chars: list[str | None]) -> Iterator[tuple[bool, list[str | None]]]:
    run: list[str | None] = []
    blank = False
    for c in chars:
        is_blank = c is not None and c.isspace()
        if run and is_blank != blank:
            yield blank, run
            run = []
        run.append(c)
        blank = is_blank
    if run:
        yield blank, run


# --- operation keys ------------------------------------------------------------------------


def command_key(tool: str, command: str) -> str:
    """The operation key of one command of ``tool``, in rule syntax.

    ``tool(git status:*)`` (a prefix and any words after) only for a line that is exactly one
    simple command of literal words starting with one of the prefixes of
    :data:`_PREFIX_KEYS` (``git status``, ``ls``, ``pwd``, ``whoami``), spelt as there (not
    ``/bin/ls``); otherwise ``tool(<the command, byte for byte>)`` with ``*`` and ``\\``
    escaped, so that the key, read back as a rule, matches that command and nothing else
    (``rm -f x`` approved always approves ``rm -f x``, never ``rm -rf /``; ``python3 -c
    'print(1)'`` never another program).
    """
    if not command:
        return f"{tool}('')"  # tool() would be every command; this one is asked again later
    parsed = parse_command(command)
    if parsed.plain:
        argv = tuple(w.value or "" for w in parsed.commands[0].words)
        for size in (2, 1):
            if argv[:size] in _PREFIX_KEYS:
                return f"{tool}({' '.join(argv[:size])}:*)"
    return f"{tool}({escape_spec(command)})"


ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")  # bash's $'…' quoting
_ANSI_C_ESCAPE = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))",
    re.DOTALL,
)
_ANSI_C_LETTERS = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip


def ansi_c(m: re.Match[str]) -> str:
    r"""A ``$'…'`` word's text as bash makes it (``$'.git'`` is ``.git``, ``$'\x2egit'`` and
    ``$'\u2egit'`` too): bash's escapes, 1-2 hex digits after ``\x``, 1-4 after ``\u``, 1-8
    after ``\U``, 1-3 octal, ``\cX``; an unknown escape stays as written (Python's decoder
    wanted exactly 4 digits after ``\u`` and, failing, left the whole word undecoded: review
    6, finding 2)."""

    def one(e: re.Match[str]) -> str:
        hex_x, hex_u, hex_big, octal, control, letter = e.groups()
        number = hex_x or hex_u or hex_big
        if number is not None:
            code = int(number, 16)
            return chr(code) if code < 0x110000 else ""
        if octal is not None:
            return chr(int(octal, 8) & 0xFF)
        if control is not None:
            return chr(ord(control) & 0x1F)
        return _ANSI_C_LETTERS.get(letter, "\\" + letter)

    return _ANSI_C_ESCAPE.sub(one, m.group(1))


_BRACED = re.compile(r"\$\{([^{}$]*)\}")  # an innermost ${…}
_OPERATOR_WORD = re.compile(
    r"^[#!]?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])(?:\[[^]]*\])?:?[-=+?](.*)$", re.S
)
_SIMPLE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])")
_SUBSTITUTION = re.compile(r"\$\([^()]*\)|`[^`]*`")


def without_expansions(command: str) -> tuple[str, str]:
    """``command`` with every expansion bash may make empty taken out (``$X``, ``$@``, ``$1``,
    ``${…}``, ``$(…)``, backquotes), and with each ``${x<op>word}`` giving its ``word``
    (``${X:=.g}it``, ``${X:-${Y:-.g}}it``), innermost first, before quotes are removed (a name
    ends at a quote: ``.g$X''it``). A protected name seen in either is named in the text
    (review 6, findings 19, 20)."""

    def default(m: re.Match[str]) -> str:
        op = _OPERATOR_WORD.match(m.group(1))
        return op.group(1) if op is not None else ""

    empty, given = command, command
    for _ in range(8):  # nesting levels undone; deeper ones stay as written
        if "${" not in empty and "${" not in given:
            break
        empty, given = _BRACED.sub("", empty), _BRACED.sub(default, given)
    return (
        _SUBSTITUTION.sub("", _SIMPLE.sub("", empty)),
        _SUBSTITUTION.sub("", _SIMPLE.sub("", given)),
    )
