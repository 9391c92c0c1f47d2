"""Plots of sweeps: the throughput curve (T2) and a generic line plot.

The throughput curve is the deliverable of T2: tokens/s per GPU (y, what the operator pays for)
against tokens/s per user (x, what the user feels), one point per concurrency.  Low concurrency
sits bottom-right (fast users, idle GPU), high concurrency top-left.  Each configuration is one
:class:`Series`; its bandwidth/compute roofline is drawn dashed beside the modelled curve, and the
point where the KV pool is full (the largest concurrency that fits) is marked: points beyond it
cannot be served and are drawn hollow.  Across every series, the servable points no other point
beats on both axes form the Pareto front, drawn as a thick step line: a configuration off the
front is never the right choice.

Inputs are plain numpy arrays and labels (the sweep computes them); matplotlib is imported only
inside the functions, with the Agg backend, so ``import concur.analysis.plot`` stays cheap.  Files are
written to a temporary name and renamed, so a failure never leaves half a PNG.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import UsageError

__all__ = ["Series", "pareto_front", "throughput_curve", "line_plot", "pyplot", "save_png"]


@dataclass(frozen=True)
class Series:
    """One configuration swept over concurrency (arrays of equal length, same order).

    ``per_user``/``per_gpu``: modelled tok/s per user and per GPU; ``bound_per_user``/
    ``bound_per_gpu``: the roofline (optional); ``kv_limit``: largest concurrency whose
    KV cache fits (optional).
    """

    label: str
    concurrency: Any
    per_user: Any
    per_gpu: Any
    bound_per_user: Any = None
    bound_per_gpu: Any = None
    kv_limit: float | None = None


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
            raise UsageError(f"series '{series.label}': {name} has {len(np.asarray(arr))} values, "
                             f"concurrency has {n}", hint="give one value per concurrency")
    if n == 0:
        raise UsageError(f"series '{series.label}' is empty")


def save_png(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` through a temporary name (no half-written PNG); return the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or the one-line error naming the ``plot`` extra."""
    from ..extras import need

    matplotlib = need("matplotlib", "drawing a plot")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def throughput_curve(series: Sequence[Series], path: str | Path, *, title: str | None = None,
                     log_y: bool = False) -> Path:
    """Draw tok/s per GPU against tok/s per user for each series; write a PNG to ``path``.

    Returns the path.  Raises :class:`UsageError` for empty or mismatched arrays.
    """
    import numpy as np

    if not series:
        raise UsageError("throughput_curve needs at least one series")
    for s in series:
        _check(s)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    try:
        all_x, all_y = [], []
        for i, s in enumerate(series):
            color = f"C{i % 10}"
            c = np.asarray(s.concurrency, dtype=float)
            x, y = np.asarray(s.per_user, dtype=float), np.asarray(s.per_gpu, dtype=float)
            fits = c <= s.kv_limit if s.kv_limit is not None else np.ones_like(c, dtype=bool)
            ax.plot(x, y, "-", color=color, lw=1.5, label=f"{s.label} (model)")
            ax.plot(x[fits], y[fits], "o", color=color, ms=4)
            if (~fits).any():
                ax.plot(x[~fits], y[~fits], "o", mfc="none", color=color, ms=4)
            if s.bound_per_user is not None and s.bound_per_gpu is not None:
                ax.plot(np.asarray(s.bound_per_user, float), np.asarray(s.bound_per_gpu, float), "--",
                        color=color, lw=1, alpha=0.7, label=f"{s.label} (roofline)")
            if s.kv_limit is not None and fits.any():
                k = int(np.flatnonzero(fits)[np.argmax(c[fits])])
                ax.plot([x[k]], [y[k]], "X", color=color, ms=10, mec="black")
                ax.annotate(f"KV full: {c[k]:g}", (x[k], y[k]), textcoords="offset points", xytext=(6, 6),
                            fontsize=8, color=color)
            all_x.append(x[fits])
            all_y.append(y[fits])
        xs, ys = np.concatenate(all_x), np.concatenate(all_y)
        if xs.size:
            front = pareto_front(xs, ys)
            order = np.argsort(xs[front])
            ax.step(xs[front][order], ys[front][order], where="post", color="black", lw=3, alpha=0.35,
                    label="Pareto front")
        ax.set_xlabel("tokens/s per user")
        ax.set_ylabel("tokens/s per GPU")
        if log_y:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(title or "Decode throughput: per GPU against per user (one point per concurrency)")
        return save_png(fig, path)
    finally:
        plt.close(fig)


def line_plot(x: Any, ys: Mapping[str, Any], path: str | Path, xlabel: str, ylabel: str,
              log_x: bool = False, *, title: str | None = None) -> Path:
    """One line per entry of ``ys`` (label -> array, same length as ``x``); write a PNG; return the path."""
    import numpy as np

    xs = np.asarray(x, dtype=float)
    if not ys:
        raise UsageError("line_plot needs at least one y series")
    for label, y in ys.items():
        if len(np.asarray(y)) != len(xs):
            raise UsageError(f"series '{label}' has {len(np.asarray(y))} values, x has {len(xs)}")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    try:
        for label, y in ys.items():
            ax.plot(xs, np.asarray(y, dtype=float), "-o", ms=3, label=label)
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        if title:
            ax.set_title(title)
        return save_png(fig, path)
    finally:
        plt.close(fig)
