"""Session text as HTML: Markdown (markdown-it-py, CommonMark) with code highlighted (pygments).

Session text is untrusted (docs/security.md), so the parser is set up to produce only
Markdown's own elements and nothing the text could steer:

* raw HTML is off (``html=False``): ``<script>``, comments and tags are shown as text;
* CommonMark autolinks (``<scheme:...>``) and images are off: an image would load from the
  network (a tracking pixel) and the page is self-contained; ``![a](u)`` shows as ``!`` and a
  link;
* a link's destination must be ``http:``, ``https:`` or ``mailto:`` (after markdown-it's
  normalisation, so ``JaVa&#9;script:`` or ``java\\script:`` never pass); any other link stays
  text. Links get ``rel="nofollow noopener noreferrer"``;
* a fence's info string picks a highlighter from a fixed list and never becomes a class or an
  attribute; table cells lose their ``style`` alignment;
* terminal controls are shown as ``\\x1b``-style escapes, before parsing and in the output (an
  entity such as ``&#x202e;`` decodes to a bidi control during parsing).

Text longer than :data:`MAX_MARKDOWN_CHARS` is shown as plain preformatted text, and fences
longer than :data:`MAX_HIGHLIGHT_CHARS` are not highlighted: rendering stays bounded.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from ..cli._escape import html_text, terminal

__all__ = [
    "HIGHLIGHT_CSS",
    "MAX_HIGHLIGHT_CHARS",
    "MAX_MARKDOWN_CHARS",
    "code_html",
    "markdown_html",
]

MAX_MARKDOWN_CHARS = 200_000
"""Longer text is shown as plain preformatted text, not parsed."""
MAX_HIGHLIGHT_CHARS = 50_000
"""Longer code is shown unhighlighted."""

_SAFE_SCHEMES = ("http://", "https://", "mailto:")
# Names a fence may give; anything else is plain text. A fixed list: the info string is
# session text, and not every lexer is made for hostile input.
_LANGUAGES = {
    **dict.fromkeys(("py", "python", "python3"), "python"),
    **dict.fromkeys(("js", "javascript", "mjs", "jsx"), "javascript"),
    **dict.fromkeys(("ts", "typescript", "tsx"), "typescript"),
    **dict.fromkeys(("sh", "bash", "shell", "zsh", "console"), "bash"),
    **dict.fromkeys(("json", "jsonl"), "json"),
    **dict.fromkeys(("yaml", "yml"), "yaml"),
    **dict.fromkeys(("diff", "patch"), "diff"),
    **dict.fromkeys(("html", "xml", "svg"), "html"),
    **dict.fromkeys(("c", "h"), "c"),
    **dict.fromkeys(("cpp", "c++", "cc", "hpp"), "cpp"),
    **dict.fromkeys(("rs", "rust"), "rust"),
    **dict.fromkeys(("go", "golang"), "go"),
    **dict.fromkeys(("md", "markdown"), "markdown"),
    **{n: n for n in ("toml", "css", "sql", "java", "kotlin", "ruby", "php", "swift", "ini")},
}
_FORMATTER: HtmlFormatter[str] = HtmlFormatter(nowrap=True)
HIGHLIGHT_CSS: str = _FORMATTER.get_style_defs(".code")  # type: ignore[no-untyped-call]
"""The highlighter's style rules, scoped to ``pre.code`` (pygments' fixed token classes)."""


@functools.cache
def _lexer(name: str) -> Lexer | None:
    try:
        return get_lexer_by_name(name)
    except ClassNotFound:
        return None


def code_html(code: str, language: str = "") -> str:
    """``code`` as ``<pre class="code"><code>...</code></pre>``, highlighted when ``language``
    names one of the known languages and the code is short enough; escaped either way."""
    code = terminal(code)
    lexer = _lexer(_LANGUAGES[language.lower()]) if language.lower() in _LANGUAGES else None
    if lexer is None or len(code) > MAX_HIGHLIGHT_CHARS:
        return f'<pre class="code"><code>{html_text(code)}</code></pre>'
    # pygments escapes & < > " ' in token text; its classes are its own fixed set.
    return f'<pre class="code"><code>{terminal(highlight(code, lexer, _FORMATTER))}</code></pre>'


def _fence(self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    language = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else ""
    return code_html(token.content.rstrip("\n"), language)


def _code_block(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return code_html(tokens[idx].content.rstrip("\n"))


def _link_open(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    href = str(token.attrs.get("href", ""))
    token.attrs = {"href": href, "rel": "nofollow noopener noreferrer"}
    return str(self.renderToken(tokens, idx, options, env))


def _cell_open(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrs = {}  # no style="text-align: ..." (the page allows no inline styles)
    return str(self.renderToken(tokens, idx, options, env))


def _valid_link(url: str) -> bool:
    return url.strip().lower().startswith(_SAFE_SCHEMES)


@functools.cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable(["autolink", "image", "html_block", "html_inline"])
    md.validateLink = _valid_link  # type: ignore[method-assign]
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", _code_block)
    md.add_render_rule("link_open", _link_open)
    for name in ("th_open", "td_open"):
        md.add_render_rule(name, _cell_open)
    return md


def markdown_html(text: str) -> str:
    """Session text rendered as Markdown inside ``<div class="md">`` (see the module doc);
    text longer than :data:`MAX_MARKDOWN_CHARS` as ``<pre class="plain">``."""
    text = terminal(text)
    if len(text) > MAX_MARKDOWN_CHARS:
        return f'<div class="md"><pre class="plain">{html_text(text)}</pre></div>'
    return f'<div class="md">{terminal(_parser().render(text))}</div>'
