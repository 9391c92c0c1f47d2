"""Sweeps: one compiled plan evaluated over numpy arrays (:mod:`concur.sweep.vector`), with the
partial evaluation that folds what does not vary (:mod:`concur.sweep.partial`)."""

from .vector import SweepResult, grid_product, range_values, sweep

__all__ = ["SweepResult", "grid_product", "range_values", "sweep"]
