"""Plots of sweeps: the throughput curve (T2) and a line plot, each one a reader understands alone.

The throughput curve is the deliverable of T2: tokens/s per GPU (y, what the operator pays for)
against tokens/s per user (x, what the user feels), one point per concurrency.  Low concurrency
sits bottom-right (fast users, idle GPU), high concurrency top-left.  Each configuration is one
:class:`Series`:

* its bandwidth/compute roofline is drawn dashed beside the modelled curve;
* a few points carry their concurrency (``c=64``), so a reader can find the operating point;
* the **KV limit** -- the largest concurrency whose KV cache fits, from the solve, not the last
  swept point -- is marked where it really is (``kv_point``, the curve evaluated at the limit);
  swept points beyond it cannot be served and are drawn hollow; a limit beyond the swept range
  is named in the legend instead of stretching the axes;
* with several configurations, the servable points no other point beats on both axes form the
  Pareto front, drawn as a thick step line (a configuration off the front is never the right
  choice); with one configuration there is nothing to compare and no front is drawn.

Every axis carries its unit and every plot a title. Inputs are plain numpy arrays and labels (the
sweep computes them); matplotlib (the ``plot`` extra) is imported only inside the functions, with
the Agg backend, so ``import concur.analysis.plot`` stays cheap.  Files are written to a temporary
name and renamed, so a failure never leaves half a PNG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..extras import need
from ..writefile import output_path

__all__ = ["Series", "line_plot", "pareto_front", "pareto_plan", "pyplot", "save_png", "throughput_curve"]


@dataclass(frozen=True)
class Series:
    """One configuration swept over concurrency (arrays of equal length, same order).

    ``per_user``/``per_gpu``: modelled tok/s per user and per GPU; ``bound_per_user``/
    ``bound_per_gpu``: the roofline (optional); ``kv_limit``: largest concurrency whose
    KV cache fits (optional); ``kv_point``: (per_user, per_gpu) of the model at ``kv_limit``
    (optional: without it the limit is drawn at the last swept point that fits).
    """

    label: str
    concurrency: Any
    per_user: Any
    per_gpu: Any
    bound_per_user: Any = None
    bound_per_gpu: Any = None
    kv_limit: float | None = None
    kv_point: tuple[float, float] | None = None


def pareto_front(x: Any, y: Any) -> Any:
    """Boolean mask of the points not dominated when both ``x`` and ``y`` are to be maximised.

    A point is dominated when another is at least as good on both axes and better on one.
    Ties (identical points) are all kept.

    >>> pareto_front([1, 2, 3], [3, 2, 1]).tolist()
    [True, True, True]
    >>> pareto_front([1, 2, 1], [1, 2, 3]).tolist()
    [False, True, True]
    """
    import numpy as np

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise UsageError(f"pareto_front needs two 1-D arrays of equal length, got {xs.shape} and {ys.shape}")
    ge = (xs[None, :] >= xs[:, None]) & (ys[None, :] >= ys[:, None])
    gt = (xs[None, :] > xs[:, None]) | (ys[None, :] > ys[:, None])
    return ~np.any(ge & gt, axis=1)


def _check(series: Series) -> None:
    import numpy as np

    n = len(np.asarray(series.concurrency))
    for name in ("per_user", "per_gpu", "bound_per_user", "bound_per_gpu"):
        arr = getattr(series, name)
        if arr is not None and len(np.asarray(arr)) != n:
            raise UsageError(
                f"series '{series.label}': {name} has {len(np.asarray(arr))} values, concurrency has {n}",
                hint="give one value per concurrency",
            )
    if n == 0:
        raise UsageError(f"series '{series.label}' is empty")


def save_png(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` by :func:`concur.writefile.output_path` (no half-written PNG; a FIFO
    or device written in place, a symlink followed); return the path."""
    path = Path(path)
    with output_path(path, path.suffix or ".png") as tmp:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
    return path


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or the one-line error naming the ``plot`` extra."""
    matplotlib = need("matplotlib", "drawing a plot")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _number(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.3g}"


def label_indices(n: int, most: int = 8) -> list[int]:
    """Indices of at most ``most`` points spread evenly over ``n`` (always the first and the last).

    >>> label_indices(100, 5)
    [0, 25, 50, 74, 99]
    """
    if n <= most:
        return list(range(n))
    return sorted({round(i * (n - 1) / (most - 1)) for i in range(most)})


def throughput_curve(
    series: Sequence[Series],
    path: str | Path,
    *,
    title: str | None = None,
    log_y: bool = False,
    x_label: str = "decode speed per user [token/s]",
    y_label: str = "decode throughput per GPU [token/s]",
) -> Path:
    """Draw tok/s per GPU against tok/s per user for each series; write a PNG to ``path``.

    Returns the path.  Raises :class:`UsageError` for empty or mismatched arrays.
    """
    import numpy as np

    if not series:
        raise UsageError("throughput_curve needs at least one series")
    for s in series:
        _check(s)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5.8))
    try:
        all_x, all_y, labelled, beyond = [], [], [], False
        for i, s in enumerate(series):
            color = f"C{i % 10}"
            c = np.asarray(s.concurrency, dtype=float)
            x, y = np.asarray(s.per_user, dtype=float), np.asarray(s.per_gpu, dtype=float)
            fits = c <= s.kv_limit if s.kv_limit is not None else np.ones_like(c, dtype=bool)
            ax.plot(x, y, "-", color=color, lw=1.5, label=s.label)
            ax.plot(x[fits], y[fits], "o", color=color, ms=4)
            if (~fits).any():
                beyond = True
                ax.plot(x[~fits], y[~fits], "o", mfc="none", color=color, ms=4)
            labelled.append((c, x, y, color))
            if s.bound_per_user is not None and s.bound_per_gpu is not None:
                ax.plot(
                    np.asarray(s.bound_per_user, float),
                    np.asarray(s.bound_per_gpu, float),
                    "--",
                    color=color,
                    lw=1,
                    alpha=0.7,
                )
            _mark_kv_limit(ax, s, c, x, y, fits, color)
            all_x.append(x[fits])
            all_y.append(y[fits])
        if any(s.bound_per_user is not None for s in series):
            ax.plot([], [], "--", color="gray", lw=1, label="roofline (each colour's own)")
        if beyond:
            ax.plot([], [], "o", mfc="none", color="gray", ms=4, label="beyond the KV pool: cannot be served")
        xs, ys = np.concatenate(all_x), np.concatenate(all_y)
        keep = np.isfinite(xs) & np.isfinite(ys)
        if len(series) > 1 and keep.any():
            xs, ys = xs[keep], ys[keep]
            front = pareto_front(xs, ys)
            order = np.argsort(xs[front])
            ax.step(
                xs[front][order],
                ys[front][order],
                where="post",
                color="black",
                lw=3,
                alpha=0.35,
                label="Pareto front (best of all configurations)",
            )
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        if log_y:
            ax.set_yscale("log")
        _label_concurrency(ax, labelled)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        ax.set_title(title or "Decode throughput per GPU against speed per user (labels: concurrency c)", fontsize=10)
        return save_png(fig, path)
    finally:
        plt.close(fig)


def _label_concurrency(ax: Any, curves: list[tuple[Any, Any, Any, str]], spacing: float = 0.06) -> None:
    """``c=N`` beside a few points of each curve, skipping any that would crowd a label already placed
    (closer than ``spacing`` of the axes, in the axes' own scale)."""
    import numpy as np

    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    log_y = ax.get_yscale() == "log"
    placed: list[tuple[float, float]] = []
    for c, x, y, color in curves:
        for k in label_indices(len(c)):
            if not (np.isfinite(x[k]) and np.isfinite(y[k])) or (log_y and y[k] <= 0):
                continue
            u = (x[k] - x0) / ((x1 - x0) or 1.0)
            v = ((np.log(y[k]) - np.log(y0)) / (np.log(y1) - np.log(y0))) if log_y else (y[k] - y0) / ((y1 - y0) or 1.0)
            if any(abs(u - pu) < spacing and abs(v - pv) < spacing for pu, pv in placed):
                continue
            placed.append((u, v))
            ax.annotate(
                f"c={_number(c[k])}", (x[k], y[k]), textcoords="offset points", xytext=(4, -10), fontsize=7, color=color
            )


def _mark_kv_limit(ax: Any, s: Series, c: Any, x: Any, y: Any, fits: Any, color: str) -> None:
    """An X where the KV pool is full: at ``kv_point`` when given and inside the swept range."""
    import numpy as np

    if s.kv_limit is None:
        return
    text = f"KV pool full at c={_number(s.kv_limit)}"
    finite = c[np.isfinite(c)]
    inside = finite.size > 0 and finite.min() <= s.kv_limit <= finite.max()
    if s.kv_point is not None and inside:
        px, py = s.kv_point
    elif s.kv_point is None and fits.any():
        k = int(np.flatnonzero(fits)[np.argmax(c[fits])])
        px, py = x[k], y[k]
        text = f"last swept point that fits: c={_number(c[k])}"
    else:  # beyond the sweep: say so rather than stretch the axes
        ax.plot([], [], "X", color=color, ms=8, mec="black", label=f"{s.label}: {text} (beyond the sweep)")
        return
    ax.plot([px], [py], "X", color=color, ms=10, mec="black", label=f"{s.label}: {text}")


def line_plot(
    x: Any,
    ys: Mapping[str, Any],
    path: str | Path,
    xlabel: str,
    ylabel: str | Mapping[str, str],
    log_x: bool = False,
    *,
    title: str | None = None,
) -> Path:
    """One line per entry of ``ys`` (label -> array, same length as ``x``); write a PNG; return the path.

    ``ylabel`` is one axis label (with its unit) for every line, or label -> axis label: lines
    whose axis labels differ (different units) get a panel each, stacked over the shared x axis.
    The title defaults to "Y against X".
    """
    import numpy as np

    xs = np.asarray(x, dtype=float)
    if not ys:
        raise UsageError("line_plot needs at least one y series")
    for label, y in ys.items():
        if len(np.asarray(y)) != len(xs):
            raise UsageError(f"series '{label}' has {len(np.asarray(y))} values, x has {len(xs)}")
    axis_of = {label: ylabel if isinstance(ylabel, str) else ylabel.get(label, label) for label in ys}
    panels = list(dict.fromkeys(axis_of.values()))
    plt = pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.5, 3.2 + 1.8 * len(panels)), sharex=True, squeeze=False)
    try:
        for ax, panel in zip(axes[:, 0], panels):
            for label, y in ys.items():
                if axis_of[label] == panel:
                    ax.plot(xs, np.asarray(y, dtype=float), "-o", ms=3, label=label)
            if log_x:
                ax.set_xscale("log")
            ax.set_ylabel(panel)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        axes[-1, 0].set_xlabel(xlabel)
        axes[0, 0].set_title(title or f"{' and '.join(panels)} against {xlabel}", fontsize=10)
        fig.tight_layout()
        return save_png(fig, path)
    finally:
        plt.close(fig)


def pareto_points(result: Any) -> tuple[list[Any], Any, Any, Any]:
    """The feasible candidates of a plan at their operating point: ``(candidates, tokens/s per user
    (1 / ITL), output tokens/s per GPU, Pareto-front mask)`` -- what ``concur plan --plot`` and
    ``concur serve``'s plan explorer draw."""
    import numpy as np

    feasible = [c for c in result.feasible if c.itl and c.fleet_gpus]
    per_user = np.array([1.0 / c.itl for c in feasible])
    per_gpu = np.array([result.arrival_rate * result.output_tokens / c.fleet_gpus for c in feasible])
    front = pareto_front(per_gpu, per_user) if feasible else np.zeros(0, dtype=bool)
    return feasible, per_user, per_gpu, front


def pareto_plan(result: Any, path: str | Path) -> Path:
    """``concur plan --plot``: every feasible configuration at its operating point -- output tokens/s
    per GPU (what the fleet pays for) against tokens/s per user (what a user sees, 1 / ITL) --
    the Pareto front joined and each of its points labelled ``gpu tpN w/kv engine``."""
    import numpy as np

    plt = pyplot()
    feasible, per_user, per_gpu, front = pareto_points(result)
    if not feasible:
        raise UsageError("no feasible configuration to plot", hint="relax the SLAs or widen the grid")
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    disagg = np.array([getattr(c.config, "mode", "agg") == "disagg" for c in feasible], dtype=bool)
    ax.scatter(per_user[~front & ~disagg], per_gpu[~front & ~disagg], s=14, color="0.7", label="dominated")
    if disagg.any():  # --modes agg,disagg: the disaggregated rows marked apart
        ax.scatter(
            per_user[disagg],
            per_gpu[disagg],
            s=22,
            marker="s",
            facecolors="none",
            edgecolors="C1",
            label="disaggregated (xPyD)",
        )
    order = np.argsort(per_user[front])
    ax.plot(per_user[front][order], per_gpu[front][order], "o-", color="C0", label="Pareto front")
    for i in np.flatnonzero(front):
        c = feasible[i]
        split = f" {c.prefill_workers}P{c.replicas}D" if disagg[i] else ""
        split += f" (prefill on {c.config.prefill_gpu})" if getattr(c.config, "prefill_gpu", "") else ""
        ax.annotate(
            f"{c.config.gpu} {c.config.layout} {c.config.weight_dtype}/{c.config.kv_dtype} {c.config.engine}{split}",
            (per_user[i], per_gpu[i]),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel("tokens/s per user (1 / ITL) [token/s]")
    ax.set_ylabel("output tokens/s per GPU [token/s]")
    ax.set_title(
        f"{result.question.get('model')}: {len(feasible)} feasible configurations at {result.arrival_rate:g} request/s"
    )
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    out = save_png(fig, path)
    plt.close(fig)
    return out
