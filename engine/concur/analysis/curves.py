"""The throughput curve's numbers: which throughput a concurrency sweep draws, what else the sweep
must compute for it, and where the KV pool fills.

Invariants: the curve is drawn only for a sweep over ``concurrency`` alone whose asked outputs are
decode throughputs (per GPU or per replica, per user, the roofline); the KV limit of a run is
``floor(kv_batch_limit)`` over its points (the most requests whose whole context the pool holds),
and the curve's point there is evaluated *at* that concurrency by one more sweep point, so the mark
sits where the pool really fills, not on the last swept point that happens to fit.
"""

from __future__ import annotations

import math
from typing import Any

from ..solver.roots import INTEGER_SNAP
from ..sweep.vector import sweep

__all__ = ["CURVE_INPUTS", "curve_y", "extra_outputs", "kv_limits"]

CURVE_INPUTS = ("tokens_per_s_per_user", "bound_tokens_per_s", "kv_batch_limit", "gpus")
_CURVE_Y = ("tokens_per_s_per_gpu", "tokens_per_s")


def curve_y(model: Any, over: dict[str, Any], outputs: list[str]) -> str | None:
    """The throughput the curve draws, or None for a line plot.

    The curve is drawn when concurrency is swept and every asked output is a decode throughput the curve
    shows (per GPU, per replica, per user, the roofline) with at least one of the first two;
    asking for anything else (t_step, ttft...) asks for that variable, so it gets the line plot.
    """
    if list(over) != ["concurrency"] or not all(v in model.variables for v in CURVE_INPUTS):
        return None
    if not set(outputs) <= {*_CURVE_Y, "tokens_per_s_per_user", "bound_tokens_per_s"}:
        return None
    return next((o for o in _CURVE_Y if o in outputs), None)


def extra_outputs(model: Any, over: dict[str, Any], outputs: list[str]) -> list[str]:
    """What the sweep must also compute for the picture (nothing for a line plot)."""
    if curve_y(model, over, outputs) is None:
        return []
    return [c for c in CURVE_INPUTS if c not in outputs and c not in over]


def kv_limits(
    model: Any, runs: list[tuple[str, dict[str, Any], Any]], y: str
) -> list[tuple[float | None, tuple[float, float] | None]]:
    """Each run's KV limit (None where no point fits) and (per-user, ``y``) at that concurrency."""
    import numpy as np

    out: list[tuple[float | None, tuple[float, float] | None]] = []
    for _label, given, res in runs:
        fits = np.floor(res["kv_batch_limit"] + INTEGER_SNAP)  # 63.9999999999 fits 64
        limit = float(np.nanmax(fits)) if np.isfinite(fits).any() else None
        out.append((limit or None, _kv_point(model, given, y, limit) if limit else None))
    return out


def _kv_point(model: Any, given: dict[str, Any], y: str, limit: float) -> tuple[float, float] | None:
    """(per-user, y) of the model at concurrency = ``limit``."""
    res = sweep(model, {"concurrency": [limit]}, given, ["tokens_per_s_per_user", y])
    px, py = float(res["tokens_per_s_per_user"][0]), float(res[y][0])
    return (px, py) if math.isfinite(px) and math.isfinite(py) else None
