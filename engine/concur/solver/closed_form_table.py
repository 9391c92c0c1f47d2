"""Regenerate the shipped closed forms: ``python -m concur.solver.closed_form_table``.

:mod:`concur.solver.closed_forms` answers inversions and loops from a cache; the closed forms
the shipped packs' examples need ship in ``solver/data/closed-forms.json``, so ``concur check``
runs every example without importing sympy. This tool solves each shipped pack's examples from
scratch (no cached plan) with :mod:`concur.solver.closed_forms` recording, and writes what they
used. It sits above the solver it drives; ``tests/solver/test_pack_examples.py`` fails when the
table is stale, naming this command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..lang.library import get_pack, pack_paths
from ..lang.model import build_model
from . import closed_forms
from .examples import failures_in
from .plan import forget_plans

__all__ = ["write_shipped_table"]


def write_shipped_table() -> Path:
    """Solve every shipped pack's examples from scratch and write the closed forms they needed."""
    forget_plans()  # a cached plan would skip the closed forms this table must record
    out: dict[str, Any] = {}
    try:
        for name in pack_paths():
            model = build_model([name])
            closed_forms.start_recording(model)
            list(failures_in(get_pack(name), model))
            recorded = closed_forms.stop_recording()
            if recorded is not None:
                out[model.key] = recorded
    finally:
        closed_forms.stop_recording()
    target: Path = closed_forms.SHIPPED
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return target


if __name__ == "__main__":
    print(f"wrote {write_shipped_table()}")
