"""Optional dependencies and the extra that installs each: ``need("matplotlib")`` or one clear error.

``pip install concur`` installs what ``concur solve``, ``check``, ``sweep`` and ``simulate`` need
(click, ruamel.yaml, pint, sympy, numpy, rich). Everything else is an extra, so a CI job or a
pre-commit hook that only unit-checks packs does not install a plotting stack:

=========  ==========================  =============================================
extra      installs                    for
=========  ==========================  =============================================
excel      openpyxl                    ``concur export`` (live workbooks)
plot       matplotlib                  ``--plot`` of ``sweep`` and ``simulate``
calibrate  torch                       ``concur calibrate``
bench      the peers benchmarks race   ``concur bench`` (limits, simpy, pyworkforce...)
all        excel + plot                today's full set (``test`` includes it)
=========  ==========================  =============================================

A missing one is a :class:`concur.errors.MissingDependencyError` (exit 2, one line naming the
extra); :func:`extra_for` lets ``concur.cli.main`` give the same line for an import that slipped
past :func:`need`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

__all__ = ["EXTRAS", "extra_for", "need"]

# top-level module -> the extra that installs it
EXTRAS = {
    "openpyxl": "excel",
    "matplotlib": "plot",
    "torch": "calibrate",
    "simpy": "bench",
    "limits": "bench",
    "pyrate_limiter": "bench",
    "aiolimiter": "bench",
    "pyworkforce": "bench",
    "redis": "redis",
}


def extra_for(module: str | None) -> str | None:
    """The extra installing ``module`` (a dotted name is looked up by its top level), or None."""
    return EXTRAS.get((module or "").split(".")[0])


def need(module: str, purpose: str) -> ModuleType:
    """``import module``, or :class:`MissingDependencyError` saying that ``purpose`` needs it and which extra.

    >>> need("json", "reading JSON").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or module.split(".")[0] != exc.name.split(".")[0]:
            raise  # something *inside* the module is missing: a broken install, not an extra
        extra = extra_for(module) or "all"
        raise MissingDependencyError(
            f"{purpose} needs {module.split('.')[0]}, which is not installed", extra=extra
        ) from None
