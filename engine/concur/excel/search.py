"""Candidate-table sheets: a searched whole number that follows the inputs without Goal Seek.

How is this designed, and why?
------------------------------
A row of the plan with a :class:`~concur.excel.plan.Search` (built by
:mod:`concur.excel.live_search`) gets its own sheet, ``Search <variable>``:

* column A holds the candidates n = ``low`` .. ``high``, B whether each *passes* (and C, for
  a "largest" search, the *best so far*), so the verdicts print beside the candidates;
* the next columns recompute, row by row, every derived variable the acceptance test needs
  that depends on the searched variable -- the same column formulas as a sweep sheet
  (:func:`concur.excel.whatif.column_templates`), with ``does not fit`` where a value leaves
  its bounds or cannot be computed (``IFERROR``: a loop's singular point divides by zero);
* *passes* is the test itself (``service_level>=service_level_target-...``), TRUE or FALSE,
  or ``skip`` for a candidate the search passes over (a column that does not fit, a broken
  constraint such as ``MOD(attention_heads,tp)=0``); *best so far* carries the last passing
  candidate down the table.

The Model sheet's cell is then ``INDEX`` of the first TRUE (``MATCH(TRUE,passes,0)``) -- or,
for "largest", of *best so far* just above the first FALSE -- guarded by the *check* cell at
the top of the search sheet, which reads ``ok``, ``out of range`` (the answer would lie
outside the candidates: export again) or ``none passes``; while it is not ``ok`` the answer
is ``#N/A`` rather than a wrong number, and the check turns red on the Model sheet, the
search sheet and beside the answer on the Inputs sheet.

Worked example: ``queueing --find servers --set service_level=0.8`` (10 erlang, 20 s target)
writes ``Search servers`` with candidates 1..56 and columns p_wait and service_level; the
Model cell is ``IF('Search servers'!$B$3="ok",INDEX('Search servers'!$A$6:$A$61,
MATCH(TRUE,'Search servers'!$B$6:$B$61,0)),NA())`` and shows 14; typing 0.1111 request/s
into ``arrival_rate`` makes it 24, as ``concur solve`` says.

Non-goals: a candidate table inside sweeps or scenarios (they hold the answer), candidates
beyond :data:`concur.excel.live_search.MAX_CANDIDATES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openpyxl.styles import Alignment
from openpyxl.utils import get_column_letter

from . import style
from .cells import put_formula, put_number, put_text
from .plan import Derived, Search
from .whatif import DOES_NOT_FIT, ROW, column_templates, sheet_title
from .writer import Layout, over_display, print_formula, sheet_ref, unit_label

__all__ = ["SearchRef", "plan_searches", "write_searches"]

_CHECK_ROW = 3
_HEAD = 5  # header row of the candidate table
_SKIP = "skip"
_RIGHT = Alignment(horizontal="right")


@dataclass(frozen=True)
class SearchRef:
    """Where a searched variable's table lives: its sheet, the Model formula, the check reference."""

    title: str
    answer: str
    check: str
    note: str


def _columns(layout: Layout, found: Search) -> list[str]:
    return [d.var.name for d in layout.plan.derived if d.var.name in found.columns]


def _ranges(title: str, found: Search) -> tuple[str, str, str, int]:
    """(candidates, passes, best-so-far) ranges of ``found``'s table and its first model column.

    The verdicts sit right of the candidates (B, and C for "largest"), so they print beside
    them however many model columns follow.
    """
    first, last = _HEAD + 1, _HEAD + 1 + found.high - found.low
    passes, best = 2, 3
    ref = sheet_ref(title)

    def span(col: int) -> str:
        letter = get_column_letter(col)
        return f"{ref}!${letter}${first}:${letter}${last}"

    return span(1), span(passes), span(best), best + 1 if found.direction == "largest" else best


def _formulas(title: str, found: Search) -> tuple[str, str]:
    """(check cell formula, answer formula) of a table; the statuses of :func:`live_search.pick`."""
    cands, passes, best, _ = _ranges(title, found)
    low_is_floor = found.low == found.floor
    check_ref = f"{sheet_ref(title)}!$B${_CHECK_ROW}"
    if found.direction == "smallest":
        k = f"MATCH(TRUE,{passes},0)"
        inner = '"ok"' if low_is_floor else f'IF({k}=1,"out of range","ok")'
        check = f'IF(ISNA({k}),"out of range",{inner})'
        answer = f'IF({check_ref}="ok",INDEX({cands},{k}),NA())'
    else:
        k = f"MATCH(FALSE,{passes},0)"
        edge = '"none passes"' if low_is_floor else '"out of range"'
        check = f'IF(ISNA({k}),"out of range",IF({k}=1,{edge},IF(ISNUMBER(INDEX({best},{k}-1)),"ok",{edge})))'
        answer = f'IF({check_ref}="ok",INDEX({best},{k}-1),NA())'
    return check, answer


def plan_searches(wb: Any, layout: Layout) -> dict[str, SearchRef]:
    """Create (empty) one sheet per searched variable; return its references for the Model sheet."""
    out: dict[str, SearchRef] = {}
    for d in layout.plan.derived:
        found = d.search
        if found is None:
            continue
        title = sheet_title(wb, f"Search {d.var.name}")
        wb.create_sheet(title)
        _, answer = _formulas(title, found)
        note = (f"live: {found.about}, picked from the candidates {found.low:,}..{found.high:,} on sheet "
                f"'{title}'; the check reads \"out of range\" when the answer leaves them (export again)")
        out[d.var.name] = SearchRef(title, answer, f"{sheet_ref(title)}!$B${_CHECK_ROW}", note)
    return out


def write_searches(wb: Any, layout: Layout, refs: dict[str, SearchRef]) -> None:
    """Fill every sheet :func:`plan_searches` created (after the Model sheet set the number formats)."""
    for d in layout.plan.derived:
        if d.search is not None:
            _write(wb[refs[d.var.name].title], layout, d, d.search)


def _note(layout: Layout, d: Derived, found: Search) -> str:
    x = d.var.name
    answer = int(d.value)
    how = ("the first candidate marked TRUE under 'passes'" if found.direction == "smallest" else
           "the candidate in 'best so far' just above the first FALSE under 'passes'")
    span = (f"up to {found.high // max(answer, 1)} times the exported answer {answer:,}"
            if found.low == found.floor else f"a window around the exported answer {answer:,}")
    text = (f"{found.about[:1].upper()}{found.about[1:]}. Each row sets {x} to the candidate in column A "
            f"and reads every other value from the Inputs sheet; {x} on the Model sheet is {how}. "
            f"Candidates {found.low:,} to {found.high:,} ({span}): when the answer would fall outside them "
            f"the check reads \"out of range\" and {x} shows no number; export again to move the table.")
    if found.skip:
        text += (f' "{_SKIP}" marks a candidate the search passes over: a value outside its bounds '
                 f'("{DOES_NOT_FIT}") or a broken constraint.')
    return text


def _write(ws: Any, layout: Layout, d: Derived, found: Search) -> None:
    x = d.var.name
    where = f"search for '{x}'"
    columns = _columns(layout, found)
    _, _, _, first_col = _ranges(ws.title, found)
    templates, _, names = column_templates(layout, x, columns, where, first=first_col)
    reads = {s.name for e in (found.test, *found.checks) for s in e.free_symbols}
    guards = [f"ISNUMBER({names[c]})" for c in columns if c in reads]
    skip = f'"{_SKIP}"' if found.skip else "FALSE"
    body = print_formula(layout, over_display(layout, d, found.test), where, names)
    if found.checks:
        tests = [print_formula(layout, over_display(layout, d, c), where, names) for c in found.checks]
        body = f"IF({_all(tests)},{body},{skip})"
    if guards:
        body = f"IF({_all(guards)},{body},{skip})"
    passes_col, best_col = 2, 3
    last_col = first_col + len(columns) - 1
    check, _ = _formulas(ws.title, found)

    put_text(ws, 1, 1, f"{x}: the {found.direction} candidate that passes").font = style.TITLE_FONT
    ws.row_dimensions[1].height = 24
    note = _note(layout, d, found)
    put_text(ws, 2, 1, note).alignment = style.WRAP
    ws.cell(2, 1).font = style.NOTE_FONT
    put_text(ws, _CHECK_ROW, 1, "check").font = style.BOLD
    cell = put_formula(ws, _CHECK_ROW, 2, check)
    cell.border = style.BOX
    style.alert_unless_ok(ws, f"B{_CHECK_ROW}")

    labels = [f"{x} [{unit_label(d.var)}]" if unit_label(d.var) else x, "passes"]
    if found.direction == "largest":
        labels.append("best so far")
    labels += [f"{c} [{unit_label(layout.vars[c])}]" if unit_label(layout.vars[c]) else c for c in columns]
    for j, label in enumerate(labels, start=1):
        put_text(ws, _HEAD, j, label)
    style.style_header(ws, _HEAD, 1, last_col)
    passes = get_column_letter(passes_col)
    best = get_column_letter(best_col)
    first = _HEAD + 1
    for i, n in enumerate(range(found.low, found.high + 1)):
        row = first + i
        put_number(ws, row, 1, n).number_format = "#,##0"
        for j, (template, fmt) in enumerate(templates, start=first_col):
            # a candidate where the model cannot be evaluated (x/0 at a loop's singular point) does not fit
            body_j = f'IFERROR({template.replace(ROW, str(row))},"{DOES_NOT_FIT}")'
            cell = put_formula(ws, row, j, body_j)
            cell.number_format = fmt
            cell.alignment = _RIGHT
        put_formula(ws, row, passes_col, body.replace(ROW, str(row))).alignment = _RIGHT
        if found.direction == "largest":
            above = f"{best}{row - 1}" if i else '""'
            put_formula(ws, row, best_col, f"IF({passes}{row}=TRUE,$A{row},{above})").number_format = "#,##0"
    last = first + found.high - found.low

    widths = {1: style.fit_width([labels[0], "check", f"{found.high:,}"], minimum=12, maximum=22)}
    widths[passes_col] = style.fit_width(["out of range", "none passes", "passes"], minimum=10)
    if found.direction == "largest":
        widths[best_col] = style.fit_width(["best so far", f"{found.high:,}"], minimum=10)
    for j, label in enumerate(labels[first_col - 1:], start=first_col):
        widths[j] = style.fit_width([DOES_NOT_FIT, "-" + "8" * 10] + label.split(), minimum=13, maximum=20)
    for col, width in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = width
    # The note wraps inside the columns that fit on the first page (a wide table prints on more).
    span, total = 1, widths[1]
    while span < last_col and total + widths[span + 1] <= style.PAGE_WIDTH:
        span += 1
        total += widths[span]
    ws.merge_cells(start_row=2, start_column=1, end_row=2, end_column=max(span, 2))
    ws.row_dimensions[2].height = style.line_height(style.wrapped_lines(note, total))
    ws.row_dimensions[_HEAD].height = style.line_height(max(
        style.wrapped_lines(label, widths[j]) for j, label in enumerate(labels, start=1)))
    ws.freeze_panes = f"B{first}"
    ws.protection.sheet = True
    style.page_setup(ws, last_col, last, title_rows=f"{_HEAD}:{_HEAD}")


def _all(tests: list[str]) -> str:
    return tests[0] if len(tests) == 1 else f"AND({','.join(tests)})"
