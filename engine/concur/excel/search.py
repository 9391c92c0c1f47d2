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

* a column without a closed form -- a loop's :class:`~concur.excel.plan.Root`, such as the
  fleet's ``concurrency`` -- is solved in the row by iterations written out right of the
  printed table (not printed): for each iterate the root's value, every body row computed
  from it (the Model sheet's formulas) and ``x - g(x)``; the first iterates step ``x <- g(x)``,
  the rest are secant steps; a cell that cannot be computed reads "-". The column shows the
  last iterate where ``|x - g(x)| <= 1e-9 |x|``, else "no solution"; the Model sheet reads
  the root from the row of the answer (``INDEX(column, MATCH(replicas, candidates, 0))``).

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

The fleet workbook's ``Search replicas`` (50 request/s of Llama-3.1-70B on H100 TP4, ITL at most
50 ms) has candidates 1..16, thirteen model columns (concurrency, the step time's parts, ttft,
itl, in_flight, batch...) and 13 iterates of 11 cells each beside them; row 3 passes first.

Non-goals: a candidate table inside sweeps or scenarios (they hold the answer), candidates
beyond :data:`concur.excel.live_search.MAX_CANDIDATES`.
"""

from __future__ import annotations

from copy import copy
from dataclasses import dataclass
from typing import Any

from openpyxl.styles import Alignment
from openpyxl.utils import get_column_letter

from . import style
from .cells import MAX_FORMULA_LENGTH, UnprintableError, put_formula, put_number, put_text
from .layout import Layout, display_expr, over_display, print_formula, sheet_ref, unit_label
from .plan import Derived, Root, Search
from .sheet_rows import SheetRows
from .whatif import DOES_NOT_FIT, NO_SOLUTION, ROW, column_templates, sheet_title, table_names

__all__ = ["SearchRef", "plan_searches", "write_searches"]

_CHECK_ROW = 3
_HEAD = 5  # header row of the candidate table
_SKIP = "skip"
_FAILED = "-"  # an iterate that could not be computed
_BOOLEAN = '"TRUE";"TRUE";"FALSE"'  # LibreOffice may show a logical result as 1 in a General cell
_RIGHT = Alignment(horizontal="right")


@dataclass(frozen=True)
class SearchRef:
    """Where a searched variable's table lives: its sheet, the Model formula, the check reference."""

    title: str
    answer: str
    check: str
    note: str
    solved: dict[str, str]  # a root the table solves -> its Model formula (the root in the picked row)


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
        note = (
            f"live: {found.about}, picked from the candidates {found.low:,}..{found.high:,} on sheet "
            f"'{title}'; the check reads \"out of range\" when the answer leaves them (export again)"
        )
        check = f"{sheet_ref(title)}!$B${_CHECK_ROW}"
        cands = _ranges(title, found)[0]
        solved = {}
        for root in found.roots:
            column = _root_range(title, found, _columns(layout, found).index(root.variable))
            solved[root.variable] = f'IF({check}="ok",INDEX({column},MATCH({layout.names[d.var.name]},{cands},0)),NA())'
        out[d.var.name] = SearchRef(title, answer, check, note, solved)
    return out


def _root_range(title: str, found: Search, index: int) -> str:
    """The range of the ``index``-th model column of ``found``'s table."""
    letter = get_column_letter(_ranges(title, found)[3] + index)
    return f"{sheet_ref(title)}!${letter}${_HEAD + 1}:${letter}${_HEAD + 1 + found.high - found.low}"


def write_searches(wb: Any, layout: Layout, refs: dict[str, SearchRef]) -> list[SheetRows]:
    """Fill every sheet :func:`plan_searches` created (after the Model sheet set the number formats);
    the tables' rows kept as XML, for :func:`concur.excel.cells.save_atomically` to splice in."""
    return [
        _write(wb[refs[d.var.name].title], layout, d, d.search) for d in layout.plan.derived if d.search is not None
    ]


def _note(layout: Layout, d: Derived, found: Search) -> str:
    x = d.var.name
    answer = int(d.value)
    how = (
        "the first candidate marked TRUE under 'passes'"
        if found.direction == "smallest"
        else "the candidate in 'best so far' just above the first FALSE under 'passes'"
    )
    span = (
        f"up to {found.high // max(answer, 1)} times the exported answer {answer:,}"
        if found.low == found.floor
        else f"a window around the exported answer {answer:,}"
    )
    text = (
        f"{found.about[:1].upper()}{found.about[1:]}. Each row sets {x} to the candidate in column A "
        f"and reads every other value from the Inputs sheet; {x} on the Model sheet is {how}. "
        f"Candidates {found.low:,} to {found.high:,} ({span}): when the answer would fall outside them "
        f'the check reads "out of range" and {x} shows no number; export again to move the table.'
    )
    if found.skip:
        text += (
            f' "{_SKIP}" marks a candidate the search passes over: a value outside its bounds '
            f'("{DOES_NOT_FIT}") or a broken constraint.'
        )
    return text


_PASSES_COL, _BEST_COL = 2, 3  # the verdict column, and the largest search's "best so far"
_CELL_ROWS = 1  # rows of a candidate table written as openpyxl cells; the rest as XML (tests change it)


def _write(ws: Any, layout: Layout, d: Derived, found: Search) -> SheetRows:
    """The search sheet of derived ``d``: title, note and check, then one row per candidate
    (the model's columns, the verdict, the best so far, the loop iterations), sized to print;
    returns the rows kept as XML."""
    x = d.var.name
    where = f"search for '{x}'"
    columns = _columns(layout, found)
    _, _, _, first_col = _ranges(ws.title, found)
    last_col = first_col + len(columns) - 1
    base = table_names(layout, x, columns, first_col)
    iterations: list[tuple[int, str, str, str]] = []  # column, header, formula (ROW), number format
    solved: dict[str, tuple[str, str]] = {}
    for root in found.roots:
        cells, solved[root.variable] = _iterations(layout, root, base, last_col + 2 + len(iterations), where)
        iterations += cells
    templates, _, names = column_templates(layout, x, columns, where, first=first_col, roots=solved)
    body = _verdict(layout, d, found, names, columns, where)
    note = _note(layout, d, found)
    _write_head(ws, x, found, note)
    labels = [f"{x} [{unit_label(d.var)}]" if unit_label(d.var) else x, "passes"]
    if found.direction == "largest":
        labels.append("best so far")
    labels += [f"{c} [{unit_label(layout.vars[c])}]" if unit_label(layout.vars[c]) else c for c in columns]
    for j, label in enumerate(labels, start=1):
        put_text(ws, _HEAD, j, label)
    style.style_header(ws, _HEAD, 1, last_col)
    rows = _write_rows(ws, found, templates, first_col, body, iterations)
    _iteration_headers(ws, found.roots, iterations)
    _size(ws, found, labels, note, first_col, last_col)
    ws.freeze_panes = f"B{_HEAD + 1}"
    ws.protection.sheet = True
    style.page_setup(ws, last_col, _HEAD + 1 + found.high - found.low, title_rows=f"{_HEAD}:{_HEAD}")
    return rows


def _verdict(layout: Layout, d: Derived, found: Search, names: dict[str, str], columns: list[str], where: str) -> str:
    """The verdict formula of one row (``ROW`` stands for its number): the target test, inside
    the checks, inside a guard that every column it reads is a number; the skip text otherwise."""
    reads = {s.name for e in (found.test, *found.checks) for s in e.free_symbols}
    guards = [f"ISNUMBER({names[c]})" for c in columns if c in reads]
    skip = f'"{_SKIP}"' if found.skip else "FALSE"
    body = print_formula(layout, over_display(layout, d, found.test), where, names)
    if found.checks:
        tests = [print_formula(layout, over_display(layout, d, c), where, names) for c in found.checks]
        body = f"IF({_all(tests)},{body},{skip})"
    if guards:
        body = f"IF({_all(guards)},{body},{skip})"
    return body


def _write_head(ws: Any, x: str, found: Search, note: str) -> None:
    """Title, the note (row 2) and the sheet's check cell, red unless it says OK."""
    check, _ = _formulas(ws.title, found)
    put_text(ws, 1, 1, f"{x}: the {found.direction} candidate that passes").font = style.TITLE_FONT
    ws.row_dimensions[1].height = 24
    put_text(ws, 2, 1, note).alignment = style.WRAP
    ws.cell(2, 1).font = style.NOTE_FONT
    put_text(ws, _CHECK_ROW, 1, "check").font = style.BOLD
    cell = put_formula(ws, _CHECK_ROW, 2, check)
    cell.border = style.BOX
    style.alert_unless_ok(ws, f"B{_CHECK_ROW}")


_Cell = tuple[int, str, tuple[str, ...], dict[str, Any]]  # column, formula, style kind, attributes
_CANDIDATE, _ABOVE = "@@CANDIDATE@@", "@@ABOVE@@"  # a row template's tokens beside whatif.ROW


def _write_rows(
    ws: Any,
    found: Search,
    templates: list[tuple[str, str]],
    first_col: int,
    body: str,
    iterations: list[tuple[int, str, str, str]],
) -> SheetRows:
    """One row per candidate from ``found.low`` to ``found.high``: the candidate, the model's
    columns (a cell that cannot be evaluated does not fit), the verdict, the best so far, the
    iterations. The first :data:`_CELL_ROWS` rows are openpyxl cells, styled; the others are
    one row template with their styles, filled per row and kept as XML
    (:mod:`concur.excel.sheet_rows`), returned."""
    same = _SameStyle()
    rows = SheetRows(ws)
    styles: dict[int, str] = {}
    template = ""
    best = get_column_letter(_BEST_COL)
    for i, n in enumerate(range(found.low, found.high + 1)):
        row = _HEAD + 1 + i
        if i < _CELL_ROWS:
            put_number(ws, row, 1, n)
            above = f"{best}{row - 1}" if i else '""'
            for col, formula, kind, attributes in _row_cells(
                found, templates, first_col, body, iterations, str(row), above
            ):
                cell = ws.cell(row, col) if col == 1 else put_formula(ws, row, col, formula)
                same(cell, kind, **attributes)
                styles[col] = rows.style_of(cell)
            continue
        if not template:
            cells = _row_cells(found, templates, first_col, body, iterations, ROW, f"{best}{_ABOVE}")
            template = rows.template(
                [(c, f, styles[c]) for c, f, _, _ in sorted(cells, key=lambda c: c[0])], ROW, _CANDIDATE
            )
        rows.add(template, row, {ROW: row, _ABOVE: row - 1, _CANDIDATE: n})
    return rows


def _row_cells(
    found: Search,
    templates: list[tuple[str, str]],
    first_col: int,
    body: str,
    iterations: list[tuple[int, str, str, str]],
    row: str,
    above: str,
) -> list[_Cell]:
    """The cells of a candidate's row ``row`` (its number, or a token): (column, formula text, or
    the candidate's token in column A, style kind, the style attributes a kind's first cell gets),
    in the order the first row is styled (which decides the style indices). ``above``: the best
    so far of the row above."""
    cells: list[_Cell] = [(1, _CANDIDATE, ("count",), {"number_format": "#,##0"})]
    for j, (template, fmt) in enumerate(templates, start=first_col):
        # a candidate where the model cannot be evaluated (x/0 at a loop's singular point) does not fit
        body_j = f'IFERROR({template.replace(ROW, row)},"{DOES_NOT_FIT}")'
        cells.append((j, body_j, ("value", fmt), {"number_format": fmt, "alignment": _RIGHT}))
    verdict = body.replace(ROW, row)
    cells.append((_PASSES_COL, verdict, ("verdict",), {"alignment": _RIGHT, "number_format": _BOOLEAN}))
    if found.direction == "largest":
        passes = get_column_letter(_PASSES_COL)
        cells.append((_BEST_COL, f"IF({passes}{row}=TRUE,$A{row},{above})", ("count",), {}))
    for col, _, formula, fmt in iterations:
        cells.append(
            (col, formula.replace(ROW, row), ("iterate", fmt), {"number_format": fmt, "font": style.NOTE_FONT})
        )
    return cells


def _size(ws: Any, found: Search, labels: list[str], note: str, first_col: int, last_col: int) -> None:
    """Column widths that fit the labels and values; the note wraps inside the columns that fit
    on the first page (a wide table prints on more); the header row as tall as its labels wrap."""
    widths = {1: style.fit_width([labels[0], "check", f"{found.high:,}"], minimum=12, maximum=22)}
    widths[_PASSES_COL] = style.fit_width(["out of range", "none passes", "passes"], minimum=10)
    if found.direction == "largest":
        widths[_BEST_COL] = style.fit_width(["best so far", f"{found.high:,}"], minimum=10)
    for j, label in enumerate(labels[first_col - 1 :], start=first_col):
        widths[j] = style.fit_width([DOES_NOT_FIT, "-" + "8" * 10] + label.split(), minimum=13, maximum=20)
    for col, width in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = width
    span, total = 1, widths[1]
    while span < last_col and total + widths[span + 1] <= style.PAGE_WIDTH:
        span += 1
        total += widths[span]
    ws.merge_cells(start_row=2, start_column=1, end_row=2, end_column=max(span, 2))
    ws.row_dimensions[2].height = style.line_height(style.wrapped_lines(note, total))
    ws.row_dimensions[_HEAD].height = style.line_height(
        max(style.wrapped_lines(label, widths[j]) for j, label in enumerate(labels, start=1))
    )


_Iterations = tuple[list[tuple[int, str, str, str]], tuple[str, str]]


def _iterations(layout: Layout, root: Root, base: dict[str, str], start: int, where: str) -> _Iterations:
    """:func:`_printed_iterations`, through the layout's tape (one entry for all its formulas)."""

    def decode(entry: Any) -> _Iterations:
        cells, (value, solved) = entry
        return [(int(c), str(h), str(f), str(n)) for c, h, f, n in cells], (str(value), str(solved))

    return layout.tape.run(
        lambda: _printed_iterations(layout, root, base, start, where),
        lambda it: [[list(c) for c in it[0]], list(it[1])],
        decode,
    )


def _printed_iterations(layout: Layout, root: Root, base: dict[str, str], start: int, where: str) -> _Iterations:
    """The cells that solve ``root`` in a row, from column ``start`` on, and (value, solved) for its column.

    Iterate k has a column for the root's value x_k, one per row of the loop's body computed from
    it (the same formulas as the Model sheet, reading x_k), and f_k = x_k - g(x_k) in the root's
    unit: the torn equation's residual over its own slope. x_0 is ``root.start``; the next
    ``fixed_steps`` iterates are x - f (x <- g(x)), the ``secant_steps`` after them secant steps
    through the two previous iterates (the previous one kept when their f are equal). The root is
    the last iterate where ``|f| <= tolerance*|x|`` there; the Python twin is
    :func:`concur.excel.live_search.iterate_root`.
    """
    import sympy

    from .printer import exact

    derived = {dd.var.name: dd for dd in layout.plan.derived}
    d = derived[root.variable]
    fmt = layout.formats.get(root.variable, "General")
    cells: list[tuple[int, str, str, str]] = []
    col = start
    xs: list[str] = []
    fs: list[str] = []
    # Every iterate prints the same expressions, reading other cells: each is rescaled and printed
    # once (sympy's slow part) with a token for each cell that changes, filled per iterate.
    moving = [root.variable, *root.body]
    bodies = {
        b: _Template(layout, display_expr(layout, derived[b]), f"{where}, '{b}'", base, moving[: i + 2])
        for i, b in enumerate(root.body)
    }
    residual = display_expr(layout, d, root.residual, out_scale=exact(root.slope) * layout.scales[root.variable])
    f_template = _Template(layout, residual, f"{where}, '{root.variable}'", base, moving)
    for k in range(root.fixed_steps + root.secant_steps + 1):
        x_cell = f"{get_column_letter(col)}{ROW}"
        if k == 0:
            formula = print_formula(
                layout, sympy.Float(root.start) if root.start % 1 else sympy.Integer(int(root.start)), where
            )
        elif k <= root.fixed_steps:
            formula = f"{xs[-1]}-{fs[-1]}"
        else:
            x0, x1, f0, f1 = xs[-2], xs[-1], fs[-2], fs[-1]
            formula = f"IF({f1}={f0},{x1},{x1}-{f1}*({x1}-{x0})/({f1}-{f0}))"
        cells.append((col, f"{root.variable} #{k}", _quiet(formula), fmt))
        here = {root.variable: x_cell}
        col += 1
        for b in root.body:
            here[b] = f"{get_column_letter(col)}{ROW}"
            formula = bodies[b].fill(here, f" (iterate {k})")
            cells.append((col, f"{b} #{k}", _quiet(formula), layout.formats.get(b, "General")))
            col += 1
        f_cell = f"{get_column_letter(col)}{ROW}"
        cells.append((col, f"x - g(x) #{k}", _quiet(f_template.fill(here)), "0.00E+00"))
        col += 1
        xs.append(x_cell)
        fs.append(f_cell)
    tolerance = print_formula(layout, sympy.Float(root.tolerance), where)
    return cells, (xs[-1], f"IF(ISNUMBER({fs[-1]}),ABS({fs[-1]})<={tolerance}*ABS({xs[-1]}),FALSE)")


class _Template:
    """A formula printed once with a token for each of ``moving`` (names whose cell changes per
    iterate; the others read ``base``), filled by plain text replacement: the printer copies a
    name's cell reference verbatim, so filling gives the text printing with those cells would."""

    def __init__(self, layout: Layout, expr: Any, where: str, base: dict[str, str], moving: list[str]) -> None:
        self.tokens = {name: f"\x00{i}\x00" for i, name in enumerate(moving)}
        self.where = where
        self.text = print_formula(layout, expr, where, {**base, **self.tokens})

    def fill(self, cells: dict[str, str], iterate: str = "") -> str:
        text = self.text
        for name, token in self.tokens.items():
            if token in text:
                text = text.replace(token, cells[name])
        if len(text) + 1 > MAX_FORMULA_LENGTH:
            raise UnprintableError(
                f"{self.where}{iterate}: formula is {len(text) + 1} characters, over Excel's limit of "
                f"{MAX_FORMULA_LENGTH}",
                hint="split the equation into intermediate variables",
            )
        return text


def _quiet(formula: str) -> str:
    """An iteration cell: "-" instead of an error value (an overflow where the loop has no fixed
    point), which the next iterates carry on to the last; the column then reads "no solution"."""
    return f'IFERROR({formula},"{_FAILED}")'


class _SameStyle:
    """Style a table's cells: the first cell of each ``kind`` gets ``attributes`` set one by one;
    every later cell of that kind gets a copy of the first one's style record. Setting a style
    attribute makes openpyxl hash the style object to find its index (most of a 64-row table's
    time); the copy holds the same indices, so the file is byte for byte what setting gives."""

    def __init__(self) -> None:
        self.first: dict[tuple[Any, ...], Any] = {}

    def __call__(self, cell: Any, kind: tuple[Any, ...], **attributes: Any) -> None:
        known = self.first.get(kind)
        if known is not None:
            cell._style = copy(known)
            return
        for name, value in attributes.items():
            setattr(cell, name, value)
        self.first[kind] = cell._style


def _iteration_headers(ws: Any, roots: tuple[Root, ...], cells: list[tuple[int, str, str, str]]) -> None:
    """Labels over the iteration columns (right of the printed table) and a line saying what they do."""
    if not cells:
        return
    first = cells[0][0]
    for col, header, _, _ in cells:
        put_text(ws, _HEAD, col, header).font = style.NOTE_FONT
        ws.cell(_HEAD, col).alignment = style.WRAP
        ws.column_dimensions[get_column_letter(col)].width = style.fit_width(
            [header, "-8.888E+88"], minimum=11, maximum=16
        )
    texts = []
    for root in roots:
        texts.append(
            f"{root.variable} solved in each row (not printed): from {root.start:g}, {root.fixed_steps} "
            f"steps x <- g(x), then {root.secant_steps} secant steps; solved where |x - g(x)| <= "
            f'{root.tolerance:g} |x| at the last iterate, else "{NO_SOLUTION}".'
        )
    put_text(ws, _HEAD - 1, first, " ".join(texts)).font = style.NOTE_FONT


def _all(tests: list[str]) -> str:
    return tests[0] if len(tests) == 1 else f"AND({','.join(tests)})"
