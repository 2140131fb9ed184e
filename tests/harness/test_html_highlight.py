"""Code highlighting in exported and served pages is bounded in time (review 12, finding 2:
pygments' java lexer took 68 s on one 49,000-character fence of ``a a a``, so a 588 KB
session file held `harness export --format html` and every `harness serve` page load for
about 15 minutes). No timing is asserted: what is asserted is which blocks come out
highlighted, and that the hostile ones come out escaped and whole."""

from __future__ import annotations

from harness import AssistantMessage, MemorySessionRepo, TextContent, UserMessage
from harness._html.markdown import code_html, highlight_budget, markdown_html
from harness._html.page import export_page

SLOW_JAVA = "a " * 24_500  # under MAX_HIGHLIGHT_CHARS; quadratic for pygments' java lexer


def test_a_short_block_is_highlighted() -> None:
    out = code_html("def f(x):\n    return x < 1\n", "python")
    assert '<span class="k">def</span>' in out
    assert "&lt;" in out


def test_a_block_whose_highlighting_runs_long_is_shown_plain_and_whole() -> None:
    out = code_html(SLOW_JAVA, "java")
    assert "<span" not in out
    assert out == f'<pre class="code"><code>{SLOW_JAVA}</code></pre>'


def test_blocks_after_the_pages_budget_is_spent_are_shown_plain() -> None:
    with highlight_budget(0.0):
        out = markdown_html("```python\nx = 1 < 2\n```\n")
    assert "<span" not in out and "x = 1 &lt; 2" in out
    with highlight_budget():  # the default budget: a short block still highlights
        assert "<span" in markdown_html("```python\nx = 1\n```\n")


async def test_a_page_of_hostile_fences_renders_each_one_plain() -> None:
    """The reviewer's file: three replies of four such fences each, rendered as one page."""
    session = await MemorySessionRepo().create("/tmp/p")
    session.append_message(UserMessage(content="go"))
    fence = f"```java\n{SLOW_JAVA}\n```\n\n"
    for _ in range(3):
        session.append_message(AssistantMessage(content=[TextContent(text=fence * 4)]))
    session.append_message(UserMessage(content="```python\nprint(1)\n```"))
    page = export_page(session)
    assert page.count(SLOW_JAVA) == 12  # each block there, whole and unhighlighted
    assert '<span class="nb">print</span>' not in page  # the page's budget was spent before
