"""Self-contained HTML: figures embedded as base64 PNG, inline CSS, no external assets."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["FigureBlock", "Section", "figure_to_data_uri", "new_figure", "render_page", "table"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 60rem;
       margin: 2rem auto; padding: 0 1rem; color: #1d1d1f; line-height: 1.45; }
h1 { font-size: 1.7rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.35rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.1rem; margin-top: 1.6rem; }
figure { margin: 1.2rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #333; margin-top: 0.4rem; }
table { border-collapse: collapse; font-size: 0.88rem; margin: 0.6rem 0 1.2rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.55rem; text-align: right; }
th { background: #f5f5f7; }
td:first-child, th:first-child { text-align: left; }
.meta { font-size: 0.85rem; color: #555; }
.note { background: #f7f7fa; border-left: 3px solid #8a8ab5; padding: 0.5rem 0.8rem; }
.summary { background: #eef5ee; border-left: 4px solid #3c8a3c; padding: 0.55rem 0.9rem;
           margin: 0.8rem 0 1.2rem; }
.summary p { margin: 0.3rem 0; }
.look { font-weight: 600; }
.details { display: block; color: #555; font-size: 0.84rem; margin-top: 0.25rem; }
.glance li { margin: 0.25rem 0; }
code { font-size: 0.9em; }
"""


def new_figure(width: float = 7.5, height: float = 3.6) -> Figure:
    """A matplotlib figure drawn by the Agg canvas (no pyplot, no display needed)."""
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure_to_data_uri(fig: Figure) -> str:
    """Render ``fig`` to PNG and return it as a ``data:image/png;base64,...`` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


@dataclass(frozen=True)
class FigureBlock:
    """One embedded figure with its caption (plain text, escaped on rendering).

    ``look`` is the caption's first, plain-language part: what the reader should look at
    and what it shows. ``caption`` holds the details (setting, seed, privacy), shown below
    it in a smaller font.
    """

    ident: str
    title: str
    data_uri: str
    caption: str
    look: str = ""


@dataclass
class Section:
    """A report section: intro paragraphs, figures and tables in order, plus raw numbers."""

    ident: str
    title: str
    blocks: list[str] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    summaries: list[str] = field(default_factory=list)

    def summary(self, text: str) -> None:
        """Add a plain-language sentence to the box shown right under the section title
        (whenever it is added: a summary can quote numbers computed further down)."""
        self.summaries.append(text)

    def paragraph(self, text: str, *, note: bool = False) -> None:
        """Append an escaped paragraph."""
        cls = ' class="note"' if note else ""
        self.blocks.append(f"<p{cls}>{html.escape(text)}</p>")

    def heading(self, text: str) -> None:
        """Append a sub-heading."""
        self.blocks.append(f"<h3>{html.escape(text)}</h3>")

    def figure(self, block: FigureBlock) -> None:
        """Append an embedded figure (what to look at first, then the details)."""
        look = (f'<span class="look">What to look at: </span>{html.escape(block.look)}'
                f'<span class="details">{html.escape(block.caption)}</span>'
                if block.look else html.escape(block.caption))
        self.blocks.append(
            f'<figure id="{html.escape(block.ident)}"><img alt="{html.escape(block.title)}" '
            f'src="{block.data_uri}"><figcaption><b>{html.escape(block.title)}.</b> '
            f"{look}</figcaption></figure>"
        )

    def raw(self, fragment: str) -> None:
        """Append an already-escaped HTML fragment (tables from :func:`table`)."""
        self.blocks.append(fragment)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An HTML table; cells are escaped, floats printed with 4 significant digits."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return html.escape(f"{v:.4g}")
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _summary_box(lines: Sequence[str]) -> str:
    inner = "".join(f"<p>{html.escape(t)}</p>" for t in lines)
    return f'<div class="summary"><p><b>In short.</b></p>{inner}</div>'


def render_page(
    title: str,
    meta: Sequence[str],
    sections: Sequence[Section],
    intro: Sequence[str] = (),
) -> str:
    """The complete HTML document.

    ``intro``: plain-language paragraphs at the top; then one line per section (its
    title, linked, and its first summary sentence), then the sections, each opening with
    its summary box.
    """
    glance = "".join(
        f'<li><a href="#{html.escape(s.ident)}">{html.escape(s.title)}</a>'
        + (f": {html.escape(s.summaries[0])}" if s.summaries else "")
        + "</li>"
        for s in sections
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        '<p class="meta">' + "<br>".join(html.escape(m) for m in meta) + "</p>",
        *(f"<p>{html.escape(p)}</p>" for p in intro),
        f'<h2 id="at-a-glance">At a glance</h2><ul class="glance">{glance}</ul>',
    ]
    for s in sections:
        parts.append(f'<section id="{html.escape(s.ident)}"><h2>{html.escape(s.title)}</h2>')
        if s.summaries:
            parts.append(_summary_box(s.summaries))
        parts.extend(s.blocks)
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
