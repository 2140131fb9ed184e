"""``harness.cli._escape``, the one place each output kind is escaped: properties over any text
(hypothesis), the image and class-token filters, and a check that no command prints around the
terminal sink."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from harness.cli._common import gutter_lines
from harness.cli._escape import (
    html_text,
    html_token,
    image_src,
    json_line,
    json_text,
    md_code,
    md_fence,
    md_text,
    terminal,
)

CLI = Path(__file__).resolve().parents[2] / "harness" / "cli"
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
# Text rich in what matters here: controls, C1, bidi, backticks, markup.
TRICKY = st.text(
    alphabet=st.sampled_from(
        [*"\x00\x07\x08\t\n\r\x1b\x7f\x85\x9b\x9d\u2028\u202e\u2066\u2069`<>&\"'[]():\\ aZ"]
    )
    | st.characters(),
    max_size=60,
)
# What JSON can hold: no lone surrogates (orjson refuses them either way).
JSON_TEXT = TRICKY.map(lambda t: re.sub("[\ud800-\udfff]", "", t))


@given(TRICKY)
def test_terminal_leaves_no_control_and_is_idempotent(text: str) -> None:
    shown = terminal(text)
    assert UNSAFE.search(shown) is None
    assert terminal(shown) == shown
    assert shown.count("\n") == text.count("\n") and shown.count("\t") == text.count("\t")


def test_terminal_spellings() -> None:
    assert terminal("\x1b]52;c;aGk=\x07") == "\\x1b]52;c;aGk=\\x07"
    assert terminal("\x9b2J\x9d0;t\x9c") == "\\x9b2J\\x9d0;t\\x9c"
    assert terminal("a\u202eb\u2066c\u2069") == "a\\u202eb\\u2066c\\u2069"
    assert terminal("\udcff\r\x7f") == "\\udcff\\x0d\\x7f"
    assert terminal("plain\ttext\n, é and 日本") == "plain\ttext\n, é and 日本"


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | JSON_TEXT,
        lambda c: st.lists(c) | st.dictionaries(JSON_TEXT, c),
        max_leaves=10,
    )
)
def test_json_text_decodes_to_the_same_value_and_leaves_no_control(value: object) -> None:
    for text in (json_line(value), json_line(value, indent=True)):
        assert json.loads(text) == value
        assert UNSAFE.search(text) is None
        assert terminal(text) == text  # the terminal sink leaves valid JSON untouched
    assert json_text('"\x9b"') == '"\\u009b"'


@given(TRICKY)
def test_html_text_is_text_in_any_context(text: str) -> None:
    escaped = html_text(text)
    assert not set(escaped) & set("<>\"'") and UNSAFE.search(escaped) is None


def test_class_tokens_are_ours_only() -> None:
    known = {"user", "assistant"}
    assert html_token("user", known) == "user"
    for hostile in ('y"><img src=y onerror=x>', "user x", "USER", ""):
        assert html_token(hostile, known) == "unknown"


PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg=="
)


def test_only_raster_images_with_strict_base64_are_embedded() -> None:
    assert image_src("image/png", PNG) == f"data:image/png;base64,{PNG}"
    assert image_src(" Image/JPEG ", "AAAA") == "data:image/jpeg;base64,AAAA"
    for mime in ("image/svg+xml", "text/html", "image/png;charset=x", "application/xhtml+xml"):
        assert image_src(mime, PNG) is None, mime
    for data in (PNG + '"', PNG + " ", "AAA", "AA==AA==", "é", 'x" onerror="y'):
        assert image_src("image/png", data) is None, data


def _inline_code(markdown: str) -> list[str]:
    tokens = MarkdownIt("commonmark").parse(markdown)
    return [c.content for t in tokens for c in t.children or [] if c.type == "code_inline"]


@given(TRICKY.filter(lambda t: t.replace("\x00", "").strip()))
def test_md_code_is_one_code_span_holding_the_text(text: str) -> None:
    text = text.replace("\x00", "")  # the parser replaces NUL (U+FFFD)
    flat = " ".join(text.split())
    spans = _inline_code(f"a {md_code(text)} b")
    assert len(spans) == 1
    assert spans[0] == flat or spans[0] == flat.strip(" ")


@given(TRICKY)
def test_md_fence_holds_the_text_whole(text: str) -> None:
    text = text.replace("\r", "").replace("\x00", "")  # what the parser itself normalises
    fences = [t for t in MarkdownIt("commonmark").parse(md_fence(text, "json") + "\n\nafter")]
    assert fences[0].type == "fence" and fences[0].content == text + "\n"
    assert fences[0].info == "json"


@given(TRICKY)
def test_md_text_has_no_raw_html(text: str) -> None:
    tokens = MarkdownIt("commonmark").parse(md_text(text))
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in t.children or []}
    assert not kinds & {"html_block", "html_inline"}


def test_md_text_breaks_script_links() -> None:
    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True  # as renderers that do not filter links do
    for link in (
        "[a](javascript:alert(1))",
        "[a](JaVaScRiPt:alert(1))",
        "[a](java\tscript:alert(1))",
        "[a](javascript\\:alert(1))",
        "[a]: vbscript:msgbox(1)\n\n[a]",
        "![i](livescript:x)",
    ):
        assert "&#8203;:" in md_text(link), link
        for href in re.findall(r'(?:href|src)="([^"]*)"', md.render(md_text(link))):
            scheme = re.sub("[\t\n]", "", href).lower().partition(":")[0]
            assert scheme not in ("javascript", "vbscript", "livescript"), (link, href)
    assert md_text("a < b && c &amp; <br>") == "a &lt; b && c &amp;amp; &lt;br>"


def test_no_command_prints_around_the_terminal_sink() -> None:
    """Every line the commands print goes through ``_escape.echo`` (or, in the chat's view,
    ``rich.Text`` of ``_escape.terminal``); ``click.echo``, ``click.secho`` and ``print`` are
    not called anywhere else in the CLI."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "_escape.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else f"{ast.unparse(func.value)}.{func.attr}"
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in ("print", "click.echo", "click.secho", "orjson.dumps", "json.dumps"):
                found.append((path.name, name))
    # JSON shown inside text: tool arguments in a page, in Markdown and in `show`'s lines,
    # escaped with the text around them. Every JSON output uses `_escape.json_line`.
    assert set(found) <= {("_export.py", "json.dumps"), ("_render.py", "orjson.dumps")}, found


@pytest.mark.parametrize("blank", [" ", "\u00a0", "\u3000", "\u2800", "\u3164", "\u200b", "\u2003"])
def test_a_run_of_blanks_of_any_kind_is_counted_in_the_approval_gutter(blank: str) -> None:
    # Review 4, finding 06: 300 NBSPs pushed "; touch NB" out of sight, where 300 spaces were
    # shown as a count; bash reads the non-ASCII ones as word characters.
    (line,) = gutter_lines("echo hi" + blank * 300 + "; touch NB")
    assert line == "│ echo hi⟨300 blanks⟩; touch NB"
