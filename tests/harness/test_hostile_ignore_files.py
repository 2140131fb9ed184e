"""``find`` and ``grep`` under a ``.gitignore`` that cannot be compiled (review 9, finding 11).

RE2 refuses a pattern set past its memory budget (``re2.error: failed to compile Set``), and
``pathspec`` raises on patterns it rejects; either made every ``find`` and ``grep`` call in the
folder an error. Now such a file is never an error: the walk goes on without its patterns and
the result ends with a one-line note naming it (``details["unusedIgnores"]`` counts them).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness import TextContent, ToolResult, ToolRun, find_tool, grep_tool
from harness._ignore import (
    MAX_IGNORE_BYTES,
    MAX_IGNORE_BYTES_PER_WALK,
    MAX_IGNORE_PATTERNS,
    IgnoreFileError,
    compile_ignore,
)
from hooks import JSONValue


def make_run(cwd: Path) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        pass

    return ToolRun(tool_call_id="t1", cwd=cwd, confined=True, on_update=on_update)


def text(result: ToolResult | str) -> str:
    assert isinstance(result, ToolResult)
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def details(result: ToolResult | str) -> dict[str, JSONValue]:
    assert isinstance(result, ToolResult) and isinstance(result.details, dict)
    return result.details


# Each spelling of an ignore file that cannot be used, with what the note says of it. All of
# them also say `secret/`, which is not applied: the file is used whole or not at all.
UNUSABLE: dict[str, tuple[bytes, str]] = {
    # The review's reproductions: one 40 KB line, and 5,000 ordinary lines.
    "huge-line": (b"*a" * 20_000 + b"\nsecret/\n", "longer than 1024 characters"),
    "many-lines": (
        b"".join(f"pat{i}*/x{i}\n".encode() for i in range(5000)) + b"secret/\n",
        "larger than 65536 bytes",  # 70 KB: not even read
    ),
    "many-short-lines": (
        b"".join(b"p%d\n" % i for i in range(5000)) + b"secret/\n",
        "more than 1000",
    ),
    # Within every bound, and still past RE2's budget for one set.
    "set-too-large": (
        b"".join(("*a" * 250 + str(i) + "\n").encode() for i in range(100)) + b"secret/\n",
        "cannot be compiled (RE2 refuses them",
    ),
    # Patterns pathspec itself rejects, or whose regular expression Python refuses.
    "trailing-backslash": (b"secret/\nfoo\\\n", "cannot be compiled (a pattern is invalid)"),
    "lone-bang": (b"secret/\n!\n", "cannot be compiled (a pattern is invalid)"),
    "reversed-range": (b"secret/\n[z-a]\n", "cannot be compiled (a pattern is invalid)"),
    "unclosed-class": (b"secret/\n[[:alpha:]\n", "cannot be compiled (RE2 refuses them"),
    # Past the byte cap: not even read (a single 1 MB line once took 80 s to compile).
    "one-megabyte-line": (b"x" * 1_000_000 + b"\nsecret/\n", "larger than"),
    "over-the-byte-cap": (b"# comment\n" * 7000 + b"secret/\n", "larger than"),
}


def tree(root: Path, ignore: bytes, where: str = "") -> Path:
    """``sub/x.txt`` and ``secret/key.txt`` under ``root / where``, with ``ignore`` as the
    ``.gitignore`` of ``root / where``."""
    base = root / where
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "x.txt").write_text("hi\n")
    (base / "secret").mkdir()
    (base / "secret" / "key.txt").write_text("hi\n")
    (base / ".gitignore").write_bytes(ignore)
    return base


@pytest.mark.parametrize("spelling", list(UNUSABLE))
def test_find_and_grep_go_on_without_an_unusable_gitignore_and_name_it(
    tmp_path: Path, spelling: str
) -> None:
    content, why = UNUSABLE[spelling]
    tree(tmp_path, content)
    found = asyncio.run(find_tool().execute({"pattern": "*.txt"}, make_run(tmp_path)))
    lines = text(found).splitlines()
    assert lines[:2] == ["secret/key.txt", "sub/x.txt"]  # its patterns were not applied
    assert len(lines) == 3 and lines[2].startswith("[a .gitignore was not used")
    assert ".gitignore: " in lines[2] and why in lines[2]
    assert details(found)["unusedIgnores"] == 1
    grepped = asyncio.run(grep_tool().execute({"pattern": "hi"}, make_run(tmp_path)))
    lines = text(grepped).splitlines()
    assert lines[:2] == ["secret/key.txt:1: hi", "sub/x.txt:1: hi"]
    assert len(lines) == 3 and why in lines[2] and "was searched too" in lines[2]
    assert details(grepped)["unusedIgnores"] == 1


def test_a_gitignore_deep_in_the_tree_is_named_by_its_path_and_the_others_still_apply(
    tmp_path: Path,
) -> None:
    (tmp_path / ".gitignore").write_text("*.log\n")
    deep = tree(tmp_path, b"*a" * 20_000 + b"\n", "a/b/c/d/e")
    (deep / "sub" / "noise.log").write_text("hi\n")
    found = asyncio.run(find_tool().execute({"pattern": "*.txt"}, make_run(tmp_path)))
    assert text(found).splitlines()[:2] == ["a/b/c/d/e/secret/key.txt", "a/b/c/d/e/sub/x.txt"]
    assert "a/b/c/d/e/.gitignore: a pattern is longer" in text(found).splitlines()[2]
    logs = asyncio.run(find_tool().execute({"pattern": "*.log"}, make_run(tmp_path)))
    assert text(logs).splitlines()[0] == "No files found"  # the top .gitignore still applies
    # Searching from inside the folder names the file from the working folder too.
    inner = asyncio.run(grep_tool().execute({"pattern": "hi", "path": "a/b/c"}, make_run(tmp_path)))
    assert "a/b/c/d/e/.gitignore: " in text(inner).splitlines()[-1]


@pytest.mark.parametrize(
    ("spelling", "content"),
    [
        ("nul-bytes", b"a\0b\n\0\n*.tmp\nsecret/\n"),
        ("invalid-utf-8", b"\xff\xfe\xfd\n\xc3(\nsecret/\n*.tmp\n"),
        ("comments-and-blanks", b"# x\n" * 3000 + b"\n" * 3000 + b"secret/\n*.tmp\n"),
        (
            "exactly-the-pattern-cap",
            b"".join(b"p%d\n" % i for i in range(998)) + b"secret/\n*.tmp\n",
        ),
        ("nested-set-warning", b"[[x]]\nsecret/\n*.tmp\n"),
    ],
)
def test_odd_but_usable_gitignores_still_apply(
    tmp_path: Path, spelling: str, content: bytes
) -> None:
    assert len(content) <= MAX_IGNORE_BYTES
    tree(tmp_path, content)
    (tmp_path / "sub" / "y.tmp").write_text("hi\n")
    found = asyncio.run(find_tool().execute({"pattern": "*"}, make_run(tmp_path)))
    assert sorted(text(found).splitlines()) == [".gitignore", "sub/", "sub/x.txt"]
    assert "unusedIgnores" not in details(found)


def test_the_pattern_cap_is_exact(tmp_path: Path) -> None:
    at_cap = "\n".join(f"p{i}" for i in range(MAX_IGNORE_PATTERNS))
    assert compile_ignore(at_cap).match_file("p0")
    with pytest.raises(IgnoreFileError, match="1001 patterns"):
        compile_ignore(at_cap + "\nsecret/")


def test_one_walk_compiles_at_most_its_budget_of_ignore_files(tmp_path: Path) -> None:
    # Each file is within the cap (comments cost nothing to compile); together they pass the
    # walk's budget, so the last ones are named and not used.
    filler = b"#" * (MAX_IGNORE_BYTES - 100) + b"\n*.tmp\n"
    count = MAX_IGNORE_BYTES_PER_WALK // len(filler) + 2
    for i in range(count):
        folder = tmp_path / f"d{i:02}"
        folder.mkdir()
        (folder / ".gitignore").write_bytes(filler)
        (folder / "y.tmp").write_text("hi\n")
    found = asyncio.run(find_tool().execute({"pattern": "*.tmp"}, make_run(tmp_path)))
    lines = text(found).splitlines()
    assert lines[:2] == [f"d{count - 2:02}/y.tmp", f"d{count - 1:02}/y.tmp"]
    assert f"d{count - 2:02}/.gitignore: this search's ignore files pass" in lines[2]
    assert "(and 1 more)" in lines[2]
    assert details(found)["unusedIgnores"] == 2
