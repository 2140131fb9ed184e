"""Escaping, one place per output kind: the terminal, JSON, HTML and Markdown.

Everything the CLI prints or exports may quote untrusted text (session files, transcripts,
project files, model and tool output; docs/security.md), so every output path ends here:

* **terminal**: :func:`terminal` shows C0 controls (all but ``\\n`` and ``\\t``), DEL, C1
  controls (U+0080-U+009F, U+009B the one-byte CSI among them), the bidirectional embedding,
  override and isolate controls of "Trojan Source" (U+202A-U+202E, U+2066-U+2069), the line and
  paragraph separators and lone surrogates as visible ``\\x1b`` / ``\\u202e`` escapes, so no
  escape sequence (OSC 52 clipboard writes, CSI screen clears, title changes) reaches the
  terminal. Our own text holds none of these characters, so escaping a whole line loses
  nothing: :func:`echo` does that for every line the commands print,
  :class:`TerminalFormatter` for log records and :func:`excepthook` for a bug's traceback.
* **JSON**: :func:`json_text` writes the same characters as ``\\u009b``-style escapes inside an
  encoded document; the JSON decodes to exactly the same values.
* **HTML**: :func:`html_text` escapes text and double-quoted attribute values; untrusted values
  never name a class or an attribute (:func:`html_token` maps them to a fixed set); images are
  embedded only as :func:`image_src` allows (raster types, valid base64).
* **Markdown**: :func:`md_text` keeps raw HTML, entity references and ``javascript:`` links in
  session text from becoming live when the file is rendered; :func:`md_code` and
  :func:`md_fence` quote text as code whatever backticks it holds. Whole documents also go
  through :func:`terminal` (Markdown is read in terminals too).
"""

from __future__ import annotations

import binascii
import html
import json
import logging
import re
import sys
import traceback
from collections.abc import Collection
from types import TracebackType
from typing import IO, Any

import click
import orjson

__all__ = [
    "IMAGE_TYPES",
    "TerminalFormatter",
    "echo",
    "excepthook",
    "html_text",
    "html_token",
    "image_src",
    "json_line",
    "json_text",
    "md_code",
    "md_fence",
    "md_text",
    "terminal",
]

# C0 but \t and \n, DEL, C1, U+2028/U+2029, the Trojan Source bidi controls, lone surrogates.
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_TERMINAL_UNSAFE = re.compile(f"[{_UNSAFE}]")
# In encoded JSON, C0 controls are already escaped (JSON requires it) and no lone surrogate can
# appear (the encoders refuse them): what is left to escape are the others.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: str) -> str:
    """``text`` with every character that could drive or deceive a terminal (see the module
    doc) shown as a ``\\x1b`` or ``\\u202e`` escape; newlines and tabs are kept.

    Idempotent: the result holds none of those characters, so escaping it again changes
    nothing.
    """
    return _TERMINAL_UNSAFE.sub(_shown, text)


def echo(
    message: str = "", *, err: bool = False, nl: bool = True, file: IO[Any] | None = None
) -> None:
    """``click.echo`` of ``message`` made safe for a terminal (:func:`terminal`): every line the
    commands print goes through here (to stderr with ``err``, to ``file`` when given)."""
    click.echo(terminal(message), file=file, err=err, nl=nl)


def excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """A ``sys.excepthook`` printing the traceback of an unexpected error (a bug) through
    :func:`terminal`: its message may quote session text."""
    sys.stderr.write(terminal("".join(traceback.format_exception(kind, value, tb))))
    sys.stderr.flush()


class TerminalFormatter(logging.Formatter):
    """A log formatter whose output (message, arguments and traceback alike) is passed through
    :func:`terminal`: library log messages may quote session text."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal(super().format(record))


def json_text(encoded: str) -> str:
    """An encoded JSON document with DEL, C1 controls (U+009B...), U+2028/U+2029 and the bidi
    controls written as ``\\u`` escapes. Those characters can only occur inside strings, where
    the escape decodes to the same character: ``json.loads`` of the result equals that of
    ``encoded``."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


def json_line(value: Any, *, indent: bool = False, default: Any = None) -> str:
    """``value`` as JSON text (orjson; two-space indents with ``indent``) made safe for a
    terminal by :func:`json_text`. Raises ``orjson.JSONEncodeError`` for what JSON cannot hold."""
    option = orjson.OPT_INDENT_2 if indent else 0
    try:
        return json_text(orjson.dumps(value, option=option, default=default).decode())
    except orjson.JSONEncodeError as exc:
        if "surrogates" not in str(exc):
            raise
    # A lone surrogate in untrusted text: written as a "\ud800" escape (json's ensure_ascii),
    # which decodes to the same string, as JavaScript's JSON.stringify writes it.
    return json.dumps(value, indent=2 if indent else None, default=default, ensure_ascii=True)


# --- HTML -------------------------------------------------------------------------------------


def html_text(value: object) -> str:
    """``str(value)`` for HTML text or a double-quoted attribute value: ``& < > " '`` escaped
    and terminal controls shown as :func:`terminal` shows them (a page may be written to a
    terminal, and bidi overrides would reorder what the reader sees)."""
    return html.escape(terminal(str(value)), quote=True)


def html_token(value: str, known: Collection[str]) -> str:
    """``value`` if it is one of ``known`` (our own class tokens), else ``"unknown"``: a value
    read from a file never becomes a class name of its own."""
    return value if value in known else "unknown"


IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types an exported page embeds; any other (``image/svg+xml``, ``text/html``) is
named, not shown."""


def image_src(mime_type: str, data: str) -> str | None:
    """A ``data:`` URI for a base64 image, or None when ``mime_type`` is not one of
    :data:`IMAGE_TYPES` or ``data`` is not strict base64 (alphabet, padding, no whitespace).
    The result holds only ASCII letters, digits and ``+/=:;``."""
    mime = mime_type.strip().lower()
    if mime not in IMAGE_TYPES:
        return None
    try:
        binascii.a2b_base64(data.encode("ascii"), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error):
        return None
    return f"data:{mime};base64,{data}"


# --- Markdown ---------------------------------------------------------------------------------

_MD_ENTITY = re.compile(r"&(?=[#A-Za-z])")
# Browsers drop tabs and newlines inside a URL and CommonMark turns `\:` into `:`, so the
# scheme is matched with whitespace and backslashes allowed between its letters.
_MD_SCRIPT_SCHEME = re.compile(
    "|".join(
        r"[\s\\]*".join(word) + r"[\s\\]*(?=:)" for word in ("javascript", "vbscript", "livescript")
    ),
    re.IGNORECASE,
)


def md_text(text: str) -> str:
    """Session text for the Markdown body (it keeps its own Markdown: emphasis, lists, links),
    made safe to render: ``<`` becomes ``&lt;`` (no raw HTML, no autolink), an ``&`` that could
    start an entity reference becomes ``&amp;``, and a ``javascript:`` (``vbscript:``,
    ``livescript:``) scheme gets a zero-width space before its colon, so a link made of it is
    not a script URL. Code spans inside ``text`` show such characters escaped: the price of
    not having to guess how each renderer parses them."""
    text = _MD_ENTITY.sub("&amp;", text).replace("<", "&lt;")
    return _MD_SCRIPT_SCHEME.sub(lambda m: m.group() + "&#8203;", text)


def md_code(text: str) -> str:
    """``text`` (whitespace runs made one space) as an inline code span, fenced with one more
    backtick than its longest run of them, so it cannot end the span early."""
    flat = " ".join(text.split())
    runs = [len(r) for r in re.findall("`+", flat)]
    ticks = "`" * (max(runs, default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def md_fence(text: str, lang: str = "") -> str:
    """``text`` as a fenced code block whose fence is longer than any backtick run inside, so
    no line of ``text`` can close it. ``lang`` is ours (``json``), never session text."""
    runs = [len(r) for r in re.findall("`+", text)]
    ticks = "`" * max(3, max(runs, default=0) + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"
