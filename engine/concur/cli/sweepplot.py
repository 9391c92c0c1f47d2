"""``concur sweep --plot``: which picture a sweep asks for, and the numbers it needs.

* A sweep over ``concurrency`` whose ``--find`` names only decode throughputs, one of them
  ``tokens_per_s_per_gpu`` or ``tokens_per_s`` (:func:`concur.analysis.curves.curve_y`), draws the
  **throughput curve** (:func:`concur.analysis.plot.throughput_curve`):
  that throughput (per GPU, or per replica) against ``tokens_per_s_per_user``, its roofline, the
  concurrency of a few points, and the KV limit. The limit is ``floor(kv_batch_limit)`` from the
  solve -- the most requests whose whole context the KV pool holds; the sweep leaves the points
  beyond it NaN -- and the curve is evaluated *at* that concurrency, so the mark sits where the
  pool really fills, not on the last swept point that happens to fit.
* Anything else draws the ``--find`` variables against the swept one
  (:func:`concur.analysis.plot.line_plot`), one panel per variable (the runs of a --compare share it), every axis with its unit.

Titles say what was fixed (every --set), so a PNG read alone still means something. This module
draws what it is given: the sweep's results and the KV points the command computed
(:func:`concur.analysis.curves.kv_limits`); it runs nothing.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError

__all__ = ["draw"]


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


def draw(
    model: Any,
    runs: list[tuple[str, dict[str, Any], Any]],
    over: dict[str, Any],
    outputs: list[str],
    given: dict[str, Any],
    path: str,
    *,
    log: bool = False,
    kv: list[tuple[float | None, tuple[float, float] | None]] | None = None,
) -> str:
    """Write the PNG for ``runs`` to ``path``; return what was drawn ("throughput curve" or "line plot").

    ``log``: the swept values were log-spaced, so a line plot's x axis is logarithmic too. ``kv``:
    for the throughput curve, each run's KV limit and the curve's point there
    (:func:`concur.analysis.curves.kv_limits`).
    """
    from ..analysis.curves import curve_y
    from ..analysis.plot import Series, line_plot, throughput_curve

    y = curve_y(model, over, outputs)
    context = _context(given)
    if y is not None:
        assert kv is not None and len(kv) == len(runs), "the throughput curve needs each run's KV limit"
        series = []
        for (label, _g, res), (limit, point) in zip(runs, kv, strict=True):
            c = res["concurrency"]
            bound = res["bound_tokens_per_s"]
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
