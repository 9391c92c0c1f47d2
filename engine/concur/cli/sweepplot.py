"""``concur sweep --plot``: which picture a sweep asks for, and the numbers it needs.

* A sweep over ``concurrency`` whose ``--find`` names only decode throughputs, one of them
  ``tokens_per_s_per_gpu`` or ``tokens_per_s``, draws the **throughput curve** (:func:`concur.analysis.plot.throughput_curve`):
  that throughput (per GPU, or per replica) against ``tokens_per_s_per_user``, its roofline, the
  concurrency of a few points, and the KV limit. The limit is ``floor(kv_batch_limit)`` from the
  solve -- the most requests whose whole context the KV pool holds; the sweep leaves the points
  beyond it NaN -- and the curve is evaluated *at* that concurrency, so the mark sits where the
  pool really fills, not on the last swept point that happens to fit.
* Anything else draws the ``--find`` variables against the swept one
  (:func:`concur.analysis.plot.line_plot`), one panel per variable (the runs of a --compare share it), every axis with its unit.

Titles say what was fixed (every --set), so a PNG read alone still means something.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import UsageError

__all__ = ["CURVE_INPUTS", "curve_y", "draw", "extra_outputs"]

CURVE_INPUTS = ("tokens_per_s_per_user", "bound_tokens_per_s", "kv_batch_limit", "gpus")
_CURVE_Y = ("tokens_per_s_per_gpu", "tokens_per_s")


def curve_y(model: Any, over: dict[str, Any], outputs: list[str]) -> str | None:
    """The throughput the curve draws, or None for a line plot.

    The curve is drawn when concurrency is swept and every --find is a decode throughput the curve
    shows (per GPU, per replica, per user, the roofline) with at least one of the first two;
    a --find of anything else (t_step, ttft...) asks for that variable, so it gets the line plot.
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


def _unit(model: Any, name: str) -> str:
    var = model.variables.get(name)
    return "" if var is None or var.choices else var.display.text


def _axis(model: Any, name: str, text: str | None = None) -> str:
    unit = _unit(model, name)
    return f"{text or name} [{unit}]" if unit else (text or name)


def _context(given: dict[str, Any]) -> str:
    """What the scenario fixed, for a title: ``model=llama-3.1-8b, gpu=h100-sxm-80gb, tp=2, ...`` (two lines at most)."""
    import textwrap

    text = ", ".join(f"{k}={v}" for k, v in given.items())
    return "\n".join(textwrap.wrap(text, width=95, max_lines=2, placeholder=" ..."))


def _kv_point(model: Any, given: dict[str, Any], y: str, limit: float) -> tuple[float, float] | None:
    """(per-user, y) of the model at concurrency = ``limit``."""
    from ..sweep.vector import sweep

    res = sweep(model, {"concurrency": [limit]}, given, ["tokens_per_s_per_user", y])
    px, py = float(res["tokens_per_s_per_user"][0]), float(res[y][0])
    return (px, py) if math.isfinite(px) and math.isfinite(py) else None


def draw(
    model: Any,
    runs: list[tuple[str, dict[str, Any], Any]],
    over: dict[str, Any],
    outputs: list[str],
    given: dict[str, Any],
    path: str,
    *,
    log: bool = False,
) -> str:
    """Write the PNG for ``runs`` to ``path``; return what was drawn ("throughput curve" or "line plot").

    ``log``: the swept values were log-spaced, so a line plot's x axis is logarithmic too.
    """
    import numpy as np

    from ..analysis.plot import Series, line_plot, throughput_curve

    y = curve_y(model, over, outputs)
    context = _context(given)
    if y is not None:
        series = []
        for label, g, res in runs:
            c = res["concurrency"]
            bound = res["bound_tokens_per_s"]
            fits = np.floor(res["kv_batch_limit"] + 1e-9)
            limit = float(np.nanmax(fits)) if np.isfinite(fits).any() else None
            point = _kv_point(model, g, y, limit) if limit else None
            per_gpu = y == "tokens_per_s_per_gpu"
            series.append(
                Series(
                    label,
                    c,
                    res["tokens_per_s_per_user"],
                    res[y],
                    bound / c,
                    bound / res["gpus"] if per_gpu else bound,
                    limit or None,
                    point,
                )
            )
        what = "per GPU" if y == "tokens_per_s_per_gpu" else "per replica"
        throughput_curve(
            series,
            path,
            x_label=_axis(model, "tokens_per_s_per_user", "decode speed per user"),
            y_label=_axis(model, y, f"decode throughput {what}"),
            title=f"Decode throughput {what} against speed per user (labels: concurrency c)"
            + (f"\n{context}" if context else ""),
        )
        return "throughput curve"
    name = next(iter(over))
    x = runs[0][2][name]
    if len(over) != 1 or x.ndim != 1 or x.dtype == object:
        raise UsageError("--plot draws one numeric --over variable (or concurrency for the throughput curve)")
    ys: dict[str, Any] = {}
    axes: dict[str, str] = {}
    for label, _g, res in runs:
        for o in outputs:
            if o in over:
                continue
            key = f"{o} ({label})" if len(runs) > 1 else o
            ys[key] = res[o].ravel()
            axes[key] = _axis(model, o)
    title = f"{', '.join(o for o in outputs if o not in over)} against {name}" + (f"\n{context}" if context else "")
    line_plot(x.ravel(), ys, path, _axis(model, name), axes, log_x=log, title=title)
    return "line plot"
