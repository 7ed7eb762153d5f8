"""The report page (``index.html``): a title, an intro line, sections of figures with their readings, tables, links.

The page is self-contained: plain HTML and CSS (no script), images are files next to
it, links are relative.  Every number shown goes through :func:`fmt`, which never
prints ``nan`` or ``None``: a value that is not available reads "n/a".
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1080px;margin:1.5em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
p.intro{font-size:1.02em;margin-top:.3em}
.verdict{padding:.6em .9em;border-radius:6px;margin:.8em 0;background:#eef6ee;border-left:5px solid #3a3}
.verdict.warn{background:#fff6e5;border-left-color:#e90}
figure{margin:.6em 0 1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.95em;color:#333;margin-top:.3em}
.reading{font-size:.97em;margin:.2em 0 .8em 0;padding:.35em .7em;background:#f4f6fa;border-radius:4px}
table{border-collapse:collapse;margin:.5em 0 1em 0;font-size:.93em}
th,td{border:1px solid #d8d8d8;padding:3px 9px;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
thead th{background:#f3f3f3}
ul.findings{margin:.3em 0 1em 0;padding-left:1.3em;font-size:.93em}
ul.findings li.error{color:#a00}ul.findings li.warning{color:#8a5a00}
.cols{display:flex;gap:1.5em;flex-wrap:wrap}.cols>div{flex:1 1 420px;min-width:0}
code{background:#f4f4f4;padding:1px 4px;border-radius:3px}
"""


def fmt(value: Any, digits: int = 2, *, signed: bool = False) -> str:
    """A number for a reader: fixed ``digits`` decimals, thousands separated; "n/a" when missing or NaN."""
    if value is None:
        return "n/a"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    x = round(x, digits) + 0.0  # no "-0.00"
    text = f"{x:+,.{digits}f}" if signed else f"{x:,.{digits}f}"
    return text.replace("-", "−")


def fmt_count(value: Any) -> str:
    """A count or an ESS: a whole number with thousands separated ("n/a" when missing)."""
    return fmt(value, 0)


class Fragment:
    """A piece of a page built block by block (escaped text, figures, tables, lists)."""

    def __init__(self):
        self._parts: list[str] = []

    def html(self) -> str:
        return "\n".join(self._parts)

    def verdict(self, text: str, ok: bool = True) -> None:
        cls = "verdict" if ok else "verdict warn"
        self._parts.append(f'<div class="{cls}">{html.escape(text)}</div>')

    def heading(self, text: str, anchor: str) -> None:
        self._parts.append(f'<h2 id="{html.escape(anchor)}">{html.escape(text)}</h2>')

    def paragraph(self, text: str) -> None:
        self._parts.append(f"<p>{html.escape(text)}</p>")

    def figure(self, src: str, alt: str, reading: str) -> None:
        """An image (a file next to the page) with its one-line reading under it."""
        self._parts.append(
            f'<figure><img src="{html.escape(src)}" alt="{html.escape(alt)}">'
            f'<figcaption class="reading">{html.escape(reading)}</figcaption></figure>'
        )

    def table(self, header: Sequence[str] | None, rows: Sequence[Sequence[Any]], numeric_from: int = 1) -> None:
        """A table; cells from column ``numeric_from`` on are right-aligned."""
        head = ""
        if header:
            head = "<thead><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr></thead>"
        body = []
        for row in rows:
            cells = []
            for i, cell in enumerate(row):
                tag = "th" if i == 0 else "td"
                cls = ' class="num"' if 0 < numeric_from <= i else ""
                cells.append(f"<{tag}{cls}>{html.escape(str(cell))}</{tag}>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        self._parts.append(f"<table>{head}<tbody>{''.join(body)}</tbody></table>")

    def findings(self, items: Sequence[tuple[str, str]]) -> None:
        """A list of ``(severity, text)``; errors and warnings are coloured."""
        lis = "".join(f'<li class="{html.escape(s)}">{html.escape(t)}</li>' for s, t in items)
        self._parts.append(f'<ul class="findings">{lis}</ul>')

    def columns(self, fragments: Sequence[Fragment]) -> None:
        """Fragments side by side (stacked on a narrow screen)."""
        inner = "".join(f"<div>{f.html()}</div>" for f in fragments)
        self._parts.append(f'<div class="cols">{inner}</div>')

    def links(self, items: Sequence[tuple[str, str]]) -> None:
        """``(file, what it is)`` pairs as a list of relative links."""
        lis = "".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a>: {html.escape(d)}</li>' for f, d in items)
        self._parts.append(f"<ul>{lis}</ul>")

    def code(self, text: str, lead: str) -> None:
        self._parts.append(f"<p>{html.escape(lead)} <code>{html.escape(text)}</code></p>")


class Page(Fragment):
    """The whole document: a title and an intro line, then blocks; :meth:`render` returns the HTML."""

    def __init__(self, title: str, intro: str):
        super().__init__()
        self.title = title
        self._parts += [f"<h1>{html.escape(title)}</h1>", f'<p class="intro">{html.escape(intro)}</p>']

    def render(self) -> str:
        return (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + self.html()
            + "\n</body></html>\n"
        )
