"""Metric tables as files for a paper: CSV for analysis, LaTeX (booktabs) for print.

In LaTeX a value and its interval share one cell, as papers print them:
`0.62 [0.55, 0.69]`. Intervals are found in three shapes the views and pages use:
columns `x`, `x_lo`, `x_hi` (or `x lo`, `x hi`); `value`, `lo`, `hi`; and a text column
of intervals ("[0.55, 0.69]") right after the numeric column it belongs to.
"""

from __future__ import annotations

import html
import json
import math
import re

import pandas as pd

from . import __version__

MISSING = "--"  # LaTeX's en dash: how a paper's table shows a missing value
_INTERVAL_TEXT = re.compile(r"^\[\s*(-?[\d.]+(?:e[-+]?\d+)?),\s*(-?[\d.]+(?:e[-+]?\d+)?)\s*\]$")
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}
# Characters a default (pdf)LaTeX setup cannot typeset as text.
_LATEX_UNICODE = {
    "\u2014": "---",
    "\u2013": "--",
    "\u2212": "$-$",
    "\u00b1": r"$\pm$",
    "\u2265": r"$\geq$",
    "\u2264": r"$\leq$",
    "\u00b7": r"$\cdot$",
    "\u00d7": r"$\times$",
    "\u2026": r"\ldots{}",
    "\u0394": r"$\Delta$",
    "\u03b1": r"$\alpha$",
    "\u03b2": r"$\beta$",
    "\u03c1": r"$\rho$",
    "\u03c4": r"$\tau$",
    "\u03ba": r"$\kappa$",
}


def to_csv(df: pd.DataFrame) -> bytes:
    """Every column as it is (intervals stay separate columns), no index."""
    return df.to_csv(index=False).encode()


def latex_escape(text) -> str:
    out = []
    for ch in str(text):
        out.append(_LATEX_SPECIAL.get(ch) or _LATEX_UNICODE.get(ch) or ch)
    return "".join(out)


def _missing(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def format_number(v, fmt: str | None = None) -> str:
    """`fmt` is printf-style as the dashboard's column formats ("%.3f"); without one,
    whole numbers print as integers and others with three decimals."""
    if _missing(v):
        return MISSING
    if not _is_number(v):
        try:
            v = float(v)
        except (TypeError, ValueError):
            return str(v)
    if fmt:
        try:
            return fmt % v
        except (TypeError, ValueError):
            pass
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.3f}" if abs(v) < 1000 else f"{v:.1f}"


def find_intervals(df: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """column -> (lo column, hi column), or (interval-text column,)."""
    cols = list(df.columns)
    out: dict[str, tuple[str, ...]] = {}
    for c in cols:
        for lo, hi in ((f"{c}_lo", f"{c}_hi"), (f"{c} lo", f"{c} hi")):
            if lo in cols and hi in cols:
                out[c] = (lo, hi)
    if {"value", "lo", "hi"} <= set(cols) and "value" not in out:
        out["value"] = ("lo", "hi")
    for prev, c in zip(cols, cols[1:]):
        if prev in out or not pd.api.types.is_numeric_dtype(df[prev]):
            continue
        vals = [v for v in df[c] if not _missing(v)]
        if vals and all(isinstance(v, str) and _INTERVAL_TEXT.match(v.strip()) for v in vals):
            out[prev] = (c,)
    return out


def _interval(row, source: tuple[str, ...], fmt: str | None) -> str:
    if len(source) == 1:
        raw = row[source[0]]
        if _missing(raw):
            return ""
        lo, hi = (float(x) for x in _INTERVAL_TEXT.match(raw.strip()).groups())
    else:
        lo, hi = row[source[0]], row[source[1]]
        if _missing(lo) or _missing(hi):
            return ""
    return f" [{format_number(lo, fmt)}, {format_number(hi, fmt)}]"


def cells(
    df: pd.DataFrame,
    formats: dict[str, str] | None = None,
    intervals: dict[str, tuple[str, ...]] | None = None,
    missing: str = MISSING,
) -> tuple[list[str], list[bool], list[list[str]]]:
    """The table as printed: its columns (interval columns folded into their value's),
    which are numeric, and every cell as text (`0.62 [0.55, 0.69]`, `missing` when absent)."""
    formats = formats or {}
    intervals = find_intervals(df) if intervals is None else intervals
    folded = {c for src in intervals.values() for c in src}
    cols = [c for c in df.columns if c not in folded]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in cols]
    rows = []
    for _, row in df.iterrows():
        out = []
        for c, is_num in zip(cols, numeric):
            v = row[c]
            if _missing(v):
                out.append(missing)
            elif is_num or _is_number(v):
                text = format_number(v, formats.get(c))
                out.append(text + _interval(row, intervals[c], formats.get(c)) if c in intervals else text)
            else:
                out.append(str(v))
        rows.append(out)
    return [str(c) for c in cols], numeric, rows


def to_latex(
    df: pd.DataFrame,
    formats: dict[str, str] | None = None,
    intervals: dict[str, tuple[str, ...]] | None = None,
    provenance: dict | None = None,
) -> str:
    """A booktabs `tabular` (needs `\\usepackage{booktabs}`); `intervals` defaults to
    `find_intervals(df)`; the interval columns themselves are folded into their value's."""
    cols, numeric, rows = cells(df, formats, intervals, missing="\0")
    lines = []
    if provenance:
        lines.append("% " + json.dumps(provenance, sort_keys=True, default=str).replace("\n", " "))
    lines.append(f"% ConceptLens {__version__}; needs \\usepackage{{booktabs}}")
    spec = "".join("r" if n else "l" for n in numeric)
    lines += [f"\\begin{{tabular}}{{{spec}}}", "\\toprule"]
    lines.append(" & ".join(latex_escape(c) for c in cols) + r" \\")
    lines.append("\\midrule")
    for row in rows:
        lines.append(" & ".join(MISSING if v == "\0" else latex_escape(v) for v in row) + r" \\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


def to_html(df: pd.DataFrame, formats: dict[str, str] | None = None, missing: str = "\u2014") -> str:
    """A plain HTML table of the printed cells (the static report's tables)."""
    cols, numeric, rows = cells(df, formats, missing=missing)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"num" if n else "text"}">{html.escape(v)}</td>' for v, n in zip(row, numeric))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
