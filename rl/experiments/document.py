"""A small document model rendered twice: Markdown and one static HTML page.

`rl.experiments.paper_report` builds the report as a list of blocks
(`Block`); `to_markdown` writes them as Markdown with figures linked by
relative path, `to_html` as a self-contained page with every figure embedded
as a base64 PNG, so the page reads offline (read without following a link,
up to `MAX_FIGURE_BYTES`; a figure refused is named in its place). The only
inline markup is ``**bold**`` and ```code```; every other character is escaped.
Text read from files never becomes markup in the Markdown either: a code block
gets a fence longer than any run of backticks in it (`code_span` likewise), and
a table read from a file (``md``) has ``<``, ``[`` and ``]`` escaped (no tag,
link or image, so viewing the page fetches nothing).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl.runs.rundir import RunDirError, read_run_file

MAX_FIGURE_BYTES = 32 * 2**20
"""Largest figure embedded in the page; a larger one, a link or a FIFO is named, not read."""

Block = tuple[Any, ...]
"""One piece of the document: ``("h", level, text)``, ``("p", text)``, ``("quote", text)``,
``("ul", items)``, ``("table", header, rows)``, ``("img", path, alt)`` or ``("code", text)``."""


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


_MD_INERT = str.maketrans({"<": "&lt;", "[": "\\[", "]": "\\]"})
"""What keeps a Markdown table read from a file inert: no HTML tag, link or image starts."""


def _fence(text: str, shortest: int) -> str:
    """Return a run of backticks longer than any in ``text`` (at least ``shortest``)."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    return "`" * max(shortest, longest + 1)


def code_span(text: str) -> str:
    """Return ``text`` as a Markdown code span that no backtick in it can end early."""
    fence = _fence(text, 1)
    return f"{fence} {text} {fence}" if "`" in text else f"`{text}`"


def to_markdown(blocks: Sequence[Block]) -> str:
    """Render the document as Markdown (figures linked by relative path)."""
    parts = []
    for block in blocks:
        kind = block[0]
        if kind == "h":
            parts.append("#" * block[1] + " " + block[2])
        elif kind == "p":
            parts.append(block[1].rstrip())
        elif kind == "md":  # a table read from a file: no raw HTML, link or image gets through
            parts.append(block[1].rstrip().translate(_MD_INERT))
        elif kind == "quote":
            parts.append("> " + block[1])
        elif kind == "ul":
            parts.append("\n".join(f"- {item}" for item in block[1]))
        elif kind == "code":
            fence = _fence(block[1], 3)
            parts.append(f"{fence}\n{block[1].rstrip()}\n{fence}")
        elif kind == "img":
            parts.append(f"![{block[2]}]({block[1].as_posix()})")
        elif kind == "table":
            header, rows = block[1], block[2]
            lines = [
                "| " + " | ".join(_md_cell(h) for h in header) + " |",
                "|" + "---|" * len(header),
            ]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _inline(text: str) -> str:
    """Escape, then render the only inline markup the report uses: **bold** and `code`."""
    out, bold, code = [], False, False
    for index, piece in enumerate(html.escape(str(text)).replace("**", "\0").split("\0")):
        if index:
            out.append("</b>" if bold else "<b>")
            bold = not bold
        for j, chunk in enumerate(piece.split("`")):
            if j:
                out.append("</code>" if code else "<code>")
                code = not code
            out.append(chunk)
    return "".join(out)


def _md_table_to_html(text: str) -> str:
    lines = text.strip().splitlines()
    if not lines or not all(line.strip().startswith("|") for line in lines):
        return f"<pre>{html.escape(text)}</pre>"  # not a table: shown as it is
    rows = [line.strip().strip("|").split("|") for line in lines]
    body = [r for r in rows if not all(set(c.strip()) <= set("-:") for c in r)]
    if not body:
        return ""
    head = "".join(f"<th>{_inline(c.strip())}</th>" for c in body[0])
    cells = "".join(
        "<tr>" + "".join(f"<td>{_inline(c.strip())}</td>" for c in r) + "</tr>" for r in body[1:]
    )
    return f"<table><tr>{head}</tr>{cells}</table>"


def to_html(blocks: Sequence[Block], out: Path, title: str) -> str:
    """Render the document as one static HTML page, figures embedded as base64 PNG."""
    parts = []
    for block in blocks:
        kind = block[0]
        if kind == "h":
            parts.append(f"<h{block[1]}>{_inline(block[2])}</h{block[1]}>")
        elif kind == "p":
            parts.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "md":  # a Markdown table written by analysis.params
            parts.append(_md_table_to_html(block[1]))
        elif kind == "quote":
            parts.append(f"<blockquote>{_inline(block[1])}</blockquote>")
        elif kind == "ul":
            parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "code":
            parts.append(f"<pre>{html.escape(block[1])}</pre>")
        elif kind == "img":
            try:
                data = base64.b64encode(read_run_file(out / block[1], MAX_FIGURE_BYTES))
            except (RunDirError, OSError) as error:  # a link, a FIFO, a huge file: not embedded
                reason = " ".join(str(error).split())
                parts.append(f"<p>{html.escape(f'Figure {block[1]} not shown: {reason}')}</p>")
                continue
            parts.append(
                f'<figure><img alt="{html.escape(block[2])}" '
                f'src="data:image/png;base64,{data.decode("ascii")}"><figcaption>'
                f"{html.escape(block[2])}</figcaption></figure>"
            )
        elif kind == "table":
            head = "".join(f"<th>{_inline(h)}</th>" for h in block[1])
            rows = "".join(
                "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>"
                for row in block[2]
            )
            parts.append(f"<table><tr>{head}</tr>{rows}</table>")
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:auto;padding:1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
        "padding:2px 6px;vertical-align:top;font-size:90%}img{max-width:100%}"
        "blockquote{border-left:3px solid #999;margin-left:0;padding-left:1em}"
        "pre{background:#f4f4f4;padding:.5em;overflow-x:auto;font-size:80%}"
    )
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title><style>{style}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
