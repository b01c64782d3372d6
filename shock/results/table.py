"""The HTML report's tables: `shock compare`'s comparison (every metric per run, its ratio to
the baseline) and how each run was made."""

from __future__ import annotations

import html
from collections.abc import Sequence

from shock.results.compare_tables import CompareTable
from shock.results.runs import SETUP_KEYS, RunView
from shock.results.table_formats import row_label

# At most this many runs side by side: a wider table continues below (the page wraps, it
# never overflows).
COLUMNS_PER_TABLE = 4


def comparison_html(tables: Sequence[CompareTable], columns: int = COLUMNS_PER_TABLE) -> str:
    """`shock compare`'s tables (the same units and ratios as the terminal's), each split
    into parts of at most `columns` runs."""
    parts = []
    for table in tables:
        for start in range(0, max(len(table.headers), 1), columns):
            parts.append(_html_table(table.columns(start, start + columns)))
        parts.append(f'<p class="note">{html.escape(table.note)}</p>')
    return "\n".join(parts)


def _html_table(table: CompareTable) -> str:
    head = [f"<th>{html.escape(table.corner)}</th>"]
    head += [f"<th>{html.escape(header)}</th>" for header in table.headers]
    rows = []
    for row in table.rows:
        cells = [f"<td>{html.escape(row_label(row))}</td>"]
        for cell in row.cells:
            text = html.escape(cell.value or "—")
            if cell.ratio_text:
                text += f' <span class="ratio">{html.escape(cell.ratio_text)}</span>'
            cells.append(f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="table-wrap"><table class="comparison">'
        f"<caption>{html.escape(table.title)}</caption>"
        f"<thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def setup_table(runs: Sequence[RunView]) -> str:
    """How each run was made, one row per run."""
    head = "".join(f"<th>{key}</th>" for key in SETUP_KEYS)
    rows = "".join(
        f"<tr><td>{html.escape(run.legend)}</td>"
        + "".join(f"<td>{html.escape(run.setup.get(key, '—'))}</td>" for key in SETUP_KEYS)
        + "</tr>"
        for run in runs
    )
    return (
        f'<table class="setup"><thead><tr><th>run</th>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )
