"""A problem statement (Markdown, as the terminal shows it) as HTML for the browser.

Raw HTML in a statement is shown as text, never run (a problem pack may come from anyone);
links to ``javascript:`` and the like are dropped by markdown-it. TeX between ``$...$`` or
``$$...$$`` (outside code), or in a ```` ```math ```` fence, is taken out before Markdown sees it
(so ``a_i b_j`` is not read as emphasis) and put back as ``<span class="math">`` for the page to
typeset with the vendored KaTeX.
"""

from __future__ import annotations

import functools
import html
import re

_PIECES = re.compile(
    r"^```math[ \t]*\n(?P<fence>.*?)\n```[ \t]*$"
    r"|(?P<code>```.*?```|`[^`\n]*`|^(?: {4}|\t)[^\n]*$)"
    r"|\$\$(?P<display>.+?)\$\$"
    r"|(?<![\\$\w])\$(?=\S)(?P<inline>[^$\n]+?)(?<=\S)\$(?![\w$])",
    re.S | re.M,
)


@functools.lru_cache(maxsize=128)  # statements and hints change rarely: each is rendered once
def statement_html(markdown: str) -> str:
    from markdown_it import MarkdownIt  # comes with rich

    maths: list[tuple[str, bool]] = []

    def hold(m: re.Match) -> str:
        if m.group("code") is not None:
            return m.group("code")
        if m.group("fence") is not None:  # its own paragraph
            maths.append((m.group("fence").strip(), True))
            return f"\nTCMATH{len(maths) - 1}X\n"
        display = m.group("display") is not None
        maths.append(((m.group("display") if display else m.group("inline")).strip(), display))
        return f"TCMATH{len(maths) - 1}X"

    text = _PIECES.sub(hold, markdown)
    out = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)

    def put_back(m: re.Match) -> str:
        n = int(m.group(1))
        if n >= len(maths):  # the statement's own text, not a placeholder
            return m.group(0)
        tex, display = maths[n]
        return f'<span class="math{" display" if display else ""}">{html.escape(tex)}</span>'

    return re.sub(r"TCMATH(\d+)X", put_back, out)
