"""`shock compare`'s tables as text for papers and programs: Markdown, LaTeX (booktabs), a
tidy CSV of the raw numbers, and the split of a wide table into parts that fit a width."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from shock.results.compare import Comparison
from shock.results.compare_tables import CompareTable, Row, metric_label

# Between two columns of the terminal's table: a blank rule and a space either side.
GAP = 3


def cell_text(value: str, ratio: str) -> str:
    return f"{value}  {ratio}" if value and ratio else value or "–"


def row_label(row: Row) -> str:
    return f"{row.label} ({row.unit})" if row.unit else row.label


def column_widths(table: CompareTable) -> tuple[int, list[int]]:
    """The row labels' width and each column's: its widest cell or header, unwrapped."""
    label_width = max([len(table.corner), *(len(row_label(r)) for r in table.rows)])
    widths = []
    for index, header in enumerate(table.headers):
        cells = [cell_text(r.cells[index].value, r.cells[index].ratio_text) for r in table.rows]
        widths.append(max([len(header), *(len(c) for c in cells)]))
    return label_width, widths


def split_to_width(table: CompareTable, width: int) -> list[CompareTable]:
    """The table as parts of consecutive columns, each fitting `width` characters with the
    row labels repeated (a single column wider than the page stays whole)."""
    label_width, widths = column_widths(table)
    parts, start, used = [], 0, label_width
    for index, column in enumerate(widths):
        if index > start and used + GAP + column > width:
            parts.append(table.columns(start, index))
            start, used = index, label_width
        used += GAP + column
    parts.append(table.columns(start, len(widths)))
    return parts


def table_width(table: CompareTable) -> int:
    label_width, widths = column_widths(table)
    return label_width + sum(GAP + w for w in widths)


def markdown(tables: Sequence[CompareTable]) -> str:
    parts = []
    for table in tables:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        lines = [f"**{table.title}**", "", line([table.corner, *table.headers])]
        lines.append("|" + "|".join([":---", *("---:" for _ in table.headers)]) + "|")
        for row in table.rows:
            cells = [cell_text(c.value, c.ratio_text) for c in row.cells]
            lines.append(line([row_label(row), *cells]))
        lines += ["", f"_{table.note}_"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    text = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
    return text.replace("±", r"$\pm$").replace("×", r"$\times$").replace("ρ", r"$\rho$")


def latex(tables: Sequence[CompareTable]) -> str:
    """booktabs tables (\\usepackage{booktabs}), one per table, captioned with its title."""
    parts = []
    for table in tables:
        spec = "l" + "r" * len(table.headers)
        lines = [
            r"\begin{table}[t]",
            r"\centering",
            rf"\caption{{{latex_escape(table.title)}. {latex_escape(table.note)}}}",
            rf"\begin{{tabular}}{{{spec}}}",
            r"\toprule",
            " & ".join(latex_escape(h) for h in (table.corner, *table.headers)) + r" \\",
            r"\midrule",
        ]
        for row in table.rows:
            cells = [latex_escape(cell_text(c.value, c.ratio_text)) for c in row.cells]
            lines.append(" & ".join([latex_escape(row_label(row)), *cells]) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def tidy_csv(comparison: Comparison, metrics: Sequence[str]) -> str:
    """One row per run (or sweep group) and metric, with the raw numbers (durations in
    seconds, shares as fractions): for pandas, R or a spreadsheet."""
    axes: list[str] = []
    for column in comparison.columns:
        axes.extend(a for a in column.axes if a not in axes)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        ["label", *axes, "metric", "metric_label", "runs", "mean", "sd", "min", "max",
         "baseline", "ratio"]
    )
    for column in comparison.columns:
        baseline = comparison.baseline_of(column)
        for name in metrics:
            value = column.metrics.get(name)
            if value is None:
                continue
            ratio = comparison.ratio(column, name)
            writer.writerow(
                [column.label, *(column.axes.get(a, "") for a in axes), name, metric_label(name),
                 column.runs, repr(value.mean), _number(value.stdev), _number(value.low),
                 _number(value.high), "" if baseline is None else baseline.label,
                 _number(ratio)]
            )
    return buffer.getvalue()


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)
