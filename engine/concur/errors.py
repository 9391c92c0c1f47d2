"""One exception tree for concur.

Every error a *user* can cause derives from :class:`ConcurError`, carries the
exit code the CLI maps it to, and knows how to render itself as one line:
``file:line:col: what went wrong (variable): what to do``.
The library never prints or exits; only ``concur.cli.main`` does.

Exit codes (the contract other teams' CI relies on):

* 0 -- success
* 1 -- a check failed (unit mismatch, contradictory givens, a pack that does not load)
* 2 -- usage or input error (unknown variable, bad unit, non-number, bad option)
* 3 -- the scenario is impossible: it does not fit, or the system saturates
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict, Unpack

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_INFEASIBLE",
    "EXIT_OK",
    "EXIT_USAGE",
    "MAX_HINT",
    "MAX_MESSAGE",
    "BudgetError",
    "ConcurError",
    "ContradictionError",
    "InfeasibleError",
    "Location",
    "MissingDependencyError",
    "PackError",
    "SolveError",
    "UnderdeterminedError",
    "UnitError",
    "UnknownNameError",
    "UnsafeExpressionError",
    "UsageError",
    "clip",
]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_INFEASIBLE = 3


@dataclass(frozen=True)
class Location:
    """Where something came from: a file and a 1-based line and column."""

    file: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        text = self.file
        if self.line is not None:
            text += f":{self.line}"
            if self.col is not None:
                text += f":{self.col}"
        return text


class _ErrorContext(TypedDict, total=False):
    """The keyword arguments every :class:`ConcurError` takes besides its message."""

    where: Location | None
    variable: str | None
    hint: str | None
    kind: str | None
    field: str | None


MAX_MESSAGE = 400
MAX_HINT = 320


def clip(text: str, limit: int) -> str:
    """``text`` cut in the middle to at most ``limit`` characters (an ellipsis marks the cut, and
    the length says how much was left out): an error echoing a 5 MB value stays one short line.

    >>> clip("a" * 20, 12)
    'a…(20 ch)aaa'
    """
    if len(text) <= limit:
        return text
    note = f"…({len(text):,} ch)"
    head = max(0, limit - len(note) - limit // 4)
    tail = max(0, limit - len(note) - head)
    return text[:head] + note + (text[-tail:] if tail else "")


class ConcurError(Exception):
    """Root of every error concur raises for bad input or an impossible question.

    ``where`` locates the cause, ``variable`` names the variable concerned and
    ``hint`` says what to do next.  ``str(err)`` is the full one-line message.

    Two fields are data for a presenter and never rendered: ``kind`` names the remedy in words
    of no interface (``"given_and_asked"``, ``"count_too_small"``: the command line's hint table,
    :mod:`concur.cli.hints`, words each as a ``--set``/``--find``/``--over``), and ``field`` the
    input the error concerns when it is not a variable (an option's or a definition key's name).
    No layer below the command line writes option text into a message or a hint.
    """

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        where: Location | None = None,
        variable: str | None = None,
        hint: str | None = None,
        kind: str | None = None,
        field: str | None = None,
    ) -> None:
        self.message = clip(message, MAX_MESSAGE)
        self.where = where
        self.variable = variable
        self.hint = None if hint is None else clip(hint, MAX_HINT)
        self.kind = kind
        self.field = field
        super().__init__(self.render())

    def reword(self, hint: str | None) -> None:
        """Replace the hint (a presenter saying the remedy in its own words) and the rendered line."""
        self.hint = None if hint is None else clip(hint, MAX_HINT)
        self.args = (self.render(),)

    def render(self) -> str:
        prefix = f"{self.where}: " if self.where is not None else ""
        return prefix + self.render_body()

    def render_body(self) -> str:
        """The message without its location."""
        parts = [self.message]
        if self.variable and f"'{self.variable}'" not in self.message:
            parts.append(f" (variable '{self.variable}')")
        if self.hint:
            parts.append(f"; {self.hint}")
        return "".join(parts)


class PackError(ConcurError, ValueError):
    """A pack or catalog file is malformed (YAML, schema or expression syntax)."""

    exit_code = EXIT_CHECK_FAILED


class UnsafeExpressionError(PackError):
    """A formula uses a construct outside the whitelist (calls, attributes, huge powers...)."""


class UnitError(ConcurError, ValueError):
    """A unit is unknown, or an equation or value is dimensionally inconsistent."""

    exit_code = EXIT_CHECK_FAILED


class UsageError(ConcurError, ValueError):
    """The command line or API call is malformed (bad value, unknown option)."""

    exit_code = EXIT_USAGE


class UnknownNameError(UsageError, KeyError):
    """A variable, pack, preset or catalog entry that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.render()


class UnderdeterminedError(UsageError):
    """Not enough givens: ``missing`` lists the values that would determine the target."""

    def __init__(self, message: str, *, missing: tuple[str, ...] = (), **kw: Unpack[_ErrorContext]) -> None:
        self.missing = missing
        super().__init__(message, **kw)


class ContradictionError(ConcurError, ValueError):
    """Over-determined givens that disagree with an equation."""

    exit_code = EXIT_CHECK_FAILED


class InfeasibleError(ConcurError, ValueError):
    """The question has no admissible answer: it does not fit, or the system saturates.

    ``constraint`` is the text of the pack constraint that failed, when one did.
    """

    exit_code = EXIT_INFEASIBLE

    def __init__(self, message: str, *, constraint: str | None = None, **kw: Unpack[_ErrorContext]) -> None:
        self.constraint = constraint
        super().__init__(message, **kw)


class SolveError(ConcurError, RuntimeError):
    """The solver could not find a root although the system looks well-posed."""

    exit_code = EXIT_CHECK_FAILED


class BudgetError(ConcurError, TimeoutError):
    """A numeric search or symbolic step ran past the solve budget: no answer within it (exit 3).

    Raised instead of running on, so every question ends within seconds; the message names what
    could not be solved and what to give instead (a value, or a tighter bound).
    """

    exit_code = EXIT_INFEASIBLE


class MissingDependencyError(UsageError):
    """An optional dependency is not installed; ``extra`` names the ``pip install 'concur[EXTRA]'``."""

    def __init__(self, message: str, *, extra: str, **kw: Unpack[_ErrorContext]) -> None:
        self.extra = extra
        kw.setdefault("hint", f"pip install 'concur[{extra}]'")
        super().__init__(message, **kw)
