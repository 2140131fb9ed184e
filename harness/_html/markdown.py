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
longer than :data:`MAX_HIGHLIGHT_CHARS` are not highlighted. Highlighting is bounded in time
as well: some of pygments' lexers take time quadratic in a block's length on crafted text (49,000
characters of ``a a a`` in a ``java`` fence took 68 s: review 12, finding 2), so a block that
takes more than :data:`HIGHLIGHT_SECONDS` is shown plain, and within :func:`highlight_budget`
(a whole page) blocks are highlighted only until :data:`HIGHLIGHT_PAGE_SECONDS` are spent.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import format as format_tokens
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from ..cli._escape import html_text, terminal

__all__ = [
    "HIGHLIGHT_CSS",
    "HIGHLIGHT_PAGE_SECONDS",
    "HIGHLIGHT_SECONDS",
    "MAX_HIGHLIGHT_CHARS",
    "MAX_MARKDOWN_CHARS",
    "code_html",
    "highlight_budget",
    "markdown_html",
]

MAX_MARKDOWN_CHARS = 200_000
"""Longer text is shown as plain preformatted text, not parsed."""
MAX_HIGHLIGHT_CHARS = 50_000
"""Longer code is shown unhighlighted."""
HIGHLIGHT_SECONDS = 0.25
"""A code block whose highlighting takes longer (wall time) is shown unhighlighted."""
HIGHLIGHT_PAGE_SECONDS = 2.0
"""Within :func:`highlight_budget`, the most time all blocks' highlighting takes together."""

# the wall-clock time by which highlighting stops within highlight_budget()
_page_deadline: ContextVar[float | None] = ContextVar("_page_deadline", default=None)


@contextlib.contextmanager
def highlight_budget(seconds: float = HIGHLIGHT_PAGE_SECONDS) -> Iterator[None]:
    """Within this block (this context: a page being rendered), code is highlighted only for
    ``seconds`` of wall time in all; blocks after that are shown unhighlighted (escaped)."""
    token = _page_deadline.set(time.perf_counter() + seconds)
    try:
        yield
    finally:
        _page_deadline.reset(token)


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
    done = _highlighted(code, lexer) if lexer is not None else None
    if done is None:
        return f'<pre class="code"><code>{html_text(code)}</code></pre>'
    # pygments escapes & < > " ' in token text; its classes are its own fixed set.
    return f'<pre class="code"><code>{terminal(done)}</code></pre>'


def _highlighted(code: str, lexer: Lexer) -> str | None:
    """``code`` highlighted as HTML, or None when it is too long or its time runs out (the
    lexer yields tokens as it goes, so the clock is read between them)."""
    if len(code) > MAX_HIGHLIGHT_CHARS:
        return None
    start = time.perf_counter()
    deadline = start + HIGHLIGHT_SECONDS
    page = _page_deadline.get()
    if page is not None:
        deadline = min(deadline, page)
    if start >= deadline:
        return None
    tokens = []
    for token in lexer.get_tokens(code):
        tokens.append(token)
        if time.perf_counter() > deadline:
            return None
    return str(format_tokens(tokens, _FORMATTER))


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
