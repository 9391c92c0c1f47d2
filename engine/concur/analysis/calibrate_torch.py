"""``concur calibrate``: measure a synthetic decode step and fit ``efficiency`` and ``t_fixed``.

How it is designed, and why
---------------------------
The pack models a decode step as ``t_step = bytes / (efficiency x bandwidth) + t_fixed`` where
``bytes`` is what the step must read: every weight once plus the KV cache of every sequence.
Published measurements (:mod:`concur.analysis.calibration`) fit the two constants across engines; this
module fits them for *this* machine and software stack, from a step we build ourselves.

**The synthetic step.** Random weights in the model's shapes (from the models catalog: hidden,
heads, KV heads, head dim; the MLP width follows from the parameter count), for ``layers``
layers only -- a scaled-down model whose bytes are counted exactly, so the bound is exact for
what runs. One step for a batch ``B`` and context ``T`` is, per layer: the QKV projection of
``B`` tokens, grouped-query attention of each query over a KV cache of ``T`` positions
(``B x kv_heads x T x head_dim`` keys and values), the output projection, and a gated MLP.
Bytes per step: ``weight_bytes + B x T x kv_bytes_per_token``, the pack's ``memory_time``
numerator. Each batch size is timed as the median of ``repeats`` steps after a warm-up, with
the device synchronised around each step.

**The fit.** ``t = a x bytes + b`` by least squares over the batch sizes; ``efficiency =
1 / (a x bandwidth)`` and ``t_fixed = b`` (refitted through the origin when ``b`` comes out
negative: a fixed cost cannot be negative). Worked example (synthetic data): bandwidth
0.02 TB/s, samples (1 GB, 0.101 s) and (2 GB, 0.201 s) give ``a = 1e-10 s/B``, so
``efficiency = 1 / (1e-10 x 2e10) = 0.5`` and ``t_fixed = 1 ms``.

**Bandwidth.** Given with ``--bandwidth`` (TB/s; use the datasheet number for a GPU, or a
STREAM figure for a CPU), or measured with a large device-to-device copy (``2 x size / time``:
each byte is read and written). A measured copy bandwidth is below the datasheet, so the fitted
efficiency is relative to what the copy reached, and the entry says which one was used.

Consequences: the fitted entry describes the synthetic step with this stack's kernels (PyTorch
eager, no fused attention, no CUDA graphs) -- a floor for a real engine on this device, not its
value. Non-goals: prefill, tensor parallelism, MoE routing, quantised kernels. PyTorch is an
optional extra (``pip install 'concur[calibrate]'``); nothing else in concur imports it, and the
fit below needs only numpy.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..extras import need
from ..lang.library import get_catalog

__all__ = [
    "Sample",
    "Shapes",
    "StepFit",
    "catalog_entry",
    "fit_step_times",
    "measure",
    "measure_bandwidth",
    "require_torch",
    "shapes_for",
]

_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class Shapes:
    """One transformer layer's shapes and the number of layers run."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int

    def weight_params(self) -> int:
        """Parameters of the layers run (attention projections and gated MLP)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return self.layers * (attn + 3 * self.hidden * self.intermediate)

    def kv_values_per_token(self) -> int:
        """Cached numbers per token of context: K and V for every KV head of every layer."""
        return 2 * self.layers * self.kv_heads * self.head_dim


@dataclass(frozen=True)
class Sample:
    """One measured batch size: step time (s) and the bytes the step must read."""

    batch: int
    t_step: float
    bytes: float


@dataclass(frozen=True)
class StepFit:
    """``t_step = bytes / (efficiency x bandwidth) + t_fixed`` fitted on samples.

    ``median_abs_error``: relative, of the fitted step times (in-sample);
    ``loo_median_abs_error``: the same for each batch size predicted by a fit on the others.
    """

    efficiency: float
    t_fixed: float  # s
    bandwidth: float  # B/s
    median_abs_error: float
    loo_median_abs_error: float = float("nan")

    def predict(self, nbytes: float) -> float:
        return nbytes / (self.efficiency * self.bandwidth) + self.t_fixed


def _line(x: Any, y: Any) -> tuple[float, float]:
    """Slope and intercept of the least-squares line through (x, y), refitted through the
    origin when the intercept would be negative (a fixed cost is never negative)."""
    import numpy as np

    a, b = np.polyfit(x, y, 1)
    if b < 0:
        a, b = float(x @ y / (x @ x)), 0.0
    return float(a), float(b)


def fit_step_times(samples: Sequence[Sample], bandwidth: float) -> StepFit:
    """Fit efficiency and t_fixed (see the module essay). ``bandwidth`` in B/s.

    Raises ``UsageError`` with fewer than three distinct byte counts (two constants fit any
    two exactly, with an error of 0 that proves nothing), a non-positive bandwidth, or step
    times that do not grow with the bytes read (nothing to fit). Reports the in-sample error
    and the leave-one-batch-out error.

    >>> s = [Sample(1, 0.101, 1e9), Sample(2, 0.201, 2e9), Sample(4, 0.401, 4e9)]
    >>> f = fit_step_times(s, 2e10)
    >>> round(f.efficiency, 6), round(f.t_fixed, 6), round(f.loo_median_abs_error, 6)
    (0.5, 0.001, 0.0)
    """
    import numpy as np

    if not bandwidth > 0:
        raise UsageError(f"calibrate: bandwidth must be positive, got {bandwidth!r} B/s")
    x = np.asarray([s.bytes for s in samples], dtype=float)
    y = np.asarray([s.t_step for s in samples], dtype=float)
    distinct = sorted(set(x.tolist()))
    if len(distinct) < 3:
        raise UsageError(
            f"calibrate: two constants (efficiency, t_fixed) need step times at three or more batch sizes with "
            f"different bytes read, got {len(distinct)}; two fit any line exactly and show no error",
            hint="pass --batches 1,8,32,64",
        )
    a, b = _line(x, y)
    if not a > 0:
        raise UsageError(
            "calibrate: the measured step time does not grow with the bytes read; the step is not memory bound here",
            hint="use a larger --context or larger batches",
        )
    fit = StepFit(float(1.0 / (a * bandwidth)), float(b), float(bandwidth), 0.0)
    errors = [abs(fit.predict(s.bytes) / s.t_step - 1) for s in samples]
    held_out: list[float] = []
    for left in distinct:
        keep = x != left
        a_k, b_k = _line(x[keep], y[keep])
        held_out.extend(abs((a_k * s.bytes + b_k) / s.t_step - 1) for s in samples if s.bytes == left)
    return StepFit(
        fit.efficiency,
        fit.t_fixed,
        fit.bandwidth,
        float(statistics.median(errors)),
        float(statistics.median(held_out)),
    )


def shapes_for(model_id: str, layers: int) -> Shapes:
    """Shapes of ``layers`` layers of a catalog model (GQA models; the MLP width is derived from
    the parameter count: what is left after embeddings, LM head and attention, over 3 x hidden)."""
    cat = get_catalog("models")
    if model_id not in cat.entries:
        raise UsageError(f"calibrate: unknown model '{model_id}'", hint=f"one of: {', '.join(cat.entries)}")
    v = {k: val[0] for k, val in cat.entries[model_id].values.items()}
    if v.get("attention", "gqa") != "gqa" or v.get("active_params", v["params"]) != v["params"]:
        raise UsageError(
            f"calibrate: '{model_id}' is MLA or MoE; the synthetic step models dense GQA models",
            hint="use e.g. --model llama-3.1-8b",
        )
    hidden, heads, kv, hd, n = (int(v[k]) for k in ("hidden", "attention_heads", "kv_heads", "head_dim", "layers"))
    per_layer = (v["params"] - 2 * v["vocab"] * hidden) / n
    attn = hidden * hd * (2 * heads + 2 * kv)
    inter = max(1, round((per_layer - attn) / (3 * hidden)))
    if layers < 1 or layers > n:
        raise UsageError(f"calibrate: --layers must be between 1 and {n} for {model_id}, got {layers}")
    return Shapes(layers, hidden, heads, kv, hd, inter)


def require_torch() -> Any:
    """The ``torch`` module, or a one-line :class:`concur.errors.MissingDependencyError` (exit 2) naming the extra."""
    return need("torch", "concur calibrate")


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_bandwidth(device: str, size_bytes: int = 1 << 30, repeats: int = 5) -> float:
    """Copy bandwidth (B/s) on ``device``: best of ``repeats`` copies, counting read and write."""
    torch = require_torch()
    n = size_bytes // 4
    src = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(repeats):
        _sync(torch, device)
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync(torch, device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n * 4 / best


def measure(
    shapes: Shapes,
    context: int,
    batches: Sequence[int],
    *,
    device: str,
    dtype: str = "bf16",
    repeats: int = 5,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Sample]:
    """Time the synthetic decode step (module essay) for each batch size: one Sample each.

    ``progress(done, total)`` is called after each batch size."""
    torch = require_torch()
    if dtype not in _DTYPE_BYTES:
        raise UsageError(f"calibrate: --dtype must be one of {', '.join(_DTYPE_BYTES)}, got '{dtype}'")
    if context < 1 or not batches or min(batches) < 1 or repeats < 1:
        raise UsageError("calibrate: --context, --batches and --repeats must be positive")
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    s, size = shapes, _DTYPE_BYTES[dtype]

    def rand(*shape: int) -> Any:
        return (torch.randn(*shape, generator=gen) * 0.02).to(device=device, dtype=tdt)

    layers = [
        {
            "qkv": rand(s.hidden, (s.heads + 2 * s.kv_heads) * s.head_dim),
            "o": rand(s.heads * s.head_dim, s.hidden),
            "up": rand(s.hidden, 2 * s.intermediate),
            "down": rand(s.intermediate, s.hidden),
        }
        for _ in range(s.layers)
    ]
    samples = []
    for batch in batches:
        cache = [
            (rand(batch, s.kv_heads, context, s.head_dim), rand(batch, s.kv_heads, context, s.head_dim))
            for _ in range(s.layers)
        ]
        x0 = rand(batch, s.hidden)

        with torch.inference_mode():
            _step(torch, s, layers, cache, x0)
            times = []
            for _ in range(repeats):
                _sync(torch, device)
                t0 = time.perf_counter()
                _step(torch, s, layers, cache, x0)
                _sync(torch, device)
                times.append(time.perf_counter() - t0)
        nbytes = size * (s.weight_params() + batch * context * s.kv_values_per_token())
        samples.append(Sample(batch, statistics.median(times), float(nbytes)))
        del cache
        if progress is not None:
            progress(len(samples), len(batches))
    return samples


def _step(torch: Any, s: Shapes, layers: list[dict[str, Any]], cache: list[tuple[Any, Any]], x: Any) -> Any:
    """One synthetic decode step for the batch in ``x`` (module essay)."""
    batch, group = x.shape[0], s.heads // s.kv_heads
    for w, (k, v) in zip(layers, cache):
        qkv = x @ w["qkv"]
        q = qkv[:, : s.heads * s.head_dim].reshape(batch, s.kv_heads, group, s.head_dim)
        att = torch.softmax((q @ k.transpose(-1, -2)) * s.head_dim**-0.5, dim=-1) @ v
        x = x + att.reshape(batch, s.heads * s.head_dim) @ w["o"]
        gate, up = (x @ w["up"]).chunk(2, dim=-1)
        x = x + (torch.nn.functional.silu(gate) * up) @ w["down"]
    return x


def catalog_entry(entry_id: str, fit: StepFit, samples: Sequence[Sample], meta: dict[str, Any]) -> dict[str, Any]:
    """An engines-catalog document with one entry: the fit, its source, and the measurement."""
    how = (
        f"concur calibrate on {meta['device_name']}: synthetic decode step of {meta['model']} "
        f"({meta['layers']} layers, {meta['dtype']}, context {meta['context']}), bandwidth "
        f"{fit.bandwidth / 1e12:.4g} TB/s ({meta['bandwidth_source']}); median |error| "
        f"{100 * fit.median_abs_error:.1f}% in-sample, {100 * fit.loo_median_abs_error:.1f}% leaving one batch size out"
    )
    points = []
    for s in samples:
        bound = s.bytes / fit.bandwidth
        points.append(
            {
                "batch": s.batch,
                "t_step_ms": round(s.t_step * 1e3, 4),
                "bytes": s.bytes,
                "bound_ms": round(bound * 1e3, 4),
                "measured_over_bound": round(s.t_step / bound, 3),
            }
        )
    return {
        "catalog": "engines",
        "entries": {
            entry_id: {
                "name": f"synthetic decode step, {meta['device_name']}",
                "efficiency": {"value": round(fit.efficiency, 4), "source": how},
                "t_fixed": {"value": round(fit.t_fixed * 1e3, 4), "source": how},
                "measurement": {
                    **{
                        k: meta[k]
                        for k in (
                            "device",
                            "device_name",
                            "torch",
                            "model",
                            "layers",
                            "dtype",
                            "context",
                            "bandwidth_source",
                        )
                    },
                    "bandwidth_tb_s": round(fit.bandwidth / 1e12, 5),
                    "points": points,
                },
            }
        },
    }
