"""``moe_gemm_efficiency``: the rate an engine's MoE kernels run the routed experts' matmuls at.

A prefill's routed experts are grouped GEMMs: each expert multiplies only the tokens routed to it
(tokens x topk / experts of them), so a fine-grained MoE runs hundreds of small matmuls where a dense
layer runs one large one. Silicon measurements of the engines' own MoE ops at prefill sizes
(``tests/data/moe_kernels.yaml``: 8,192 and 16,384 tokens, where the matmuls and not the weights' read
set the time) put them well below a dense prefill's rate. For one measured row::

    flops      = 2 x tokens x topk x 3 x hidden x moe_intermediate / (tp x ep)   (gate, up, down; one GPU)
    efficiency = flops / latency / (peak x flops_fraction x efficiency_prefill)

with the GPU's dense peak of the weights' format (FP8 for fp8 and fp8_block rows, BF16 for bfloat16)
and its flops_fraction from the gpus catalog, and the engines' efficiency_prefill (a dense prefill's
fraction of that peak). ``efficiency`` is the grouped GEMMs' rate as a fraction of a dense prefill's:
the pack divides the routed experts' prefill FLOPs by it. An engine's value is the median over its
rows of one layout (every GPU, model shape and format measured): ``one`` where every expert sits whole
on one GPU (tp 1, ep 1), ``tp`` where the experts are sliced tensor-parallel (every GPU multiplies a
slice of every expert, matmuls narrower by tp), ``ep`` where whole experts are spread over the GPUs
(ep > 1). The kernels differ by layout as much as by engine: one GPU's matmuls carry eight times the
work of a GPU of eight and fill it better, and TensorRT-LLM's expert-parallel path is twice its
tensor-parallel one. The ``default`` entry's is the median over every engine's rows of the layout.
Invariant: a value is in (0, 1] (a row faster than a dense prefill counts as 1).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..lang.library import get_catalog
from ..lang.yamlsafe import load_yaml

__all__ = ["LAYOUTS", "MOE_KERNELS_LABEL", "MoeGemmFit", "fit_moe_gemm", "row_efficiency"]

MOE_KERNELS_LABEL = "tests/data/moe_kernels.yaml"


@dataclass(frozen=True)
class MoeGemmFit:
    """One engine's moe_gemm_efficiency: the median over ``n`` rows and the rows' quartiles."""

    value: float
    n: int
    q25: float
    q75: float


def _gpu_value(gpu: Any, name: str, default: float | None = None) -> float:
    """A gpus catalog value in base units (flop/s for peaks); ``default`` where the entry has none."""
    if name not in gpu.values:
        if default is None:
            raise KeyError(f"gpus catalog entry {gpu.id} has no {name}")
        return default
    return float(gpu.values[name][0]) * get_catalog("gpus").fields[name].unit.factor


def row_efficiency(row: dict[str, Any], shape: dict[str, Any], efficiency_prefill: float) -> float:
    """One measured row's grouped-GEMM rate over a dense prefill's on the same GPU and format, capped at 1."""
    gpu = get_catalog("gpus").entries[row["gpu"]]
    peak_name = "peak_flops_fp8" if str(row["dtype"]).startswith("fp8") else "peak_flops_bf16"
    peak = _gpu_value(gpu, peak_name)
    dense = peak * _gpu_value(gpu, "flops_fraction", 1.0) * efficiency_prefill
    flops = (
        2 * row["tokens"] * shape["topk"] * 3 * shape["hidden"] * shape["moe_intermediate"] / (row["tp"] * row["ep"])
    )
    return min(1.0, float(flops) / (float(row["latency_ms"]) * 1e-3) / dense)


LAYOUTS = ("one", "tp", "ep")


def fit_moe_gemm(path: str | Path, efficiency_prefill: float) -> dict[tuple[str, str], MoeGemmFit]:
    """Per (engine, layout) -- and (``default``, layout) over every engine -- the median of
    :func:`row_efficiency`; layout ``ep`` for rows with ep > 1, ``tp`` for tp > 1, else ``one``."""
    data = load_yaml(Path(path))
    shapes = data["shapes"]
    per: dict[tuple[str, str], list[float]] = {}
    for row in data["rows"]:
        eff = row_efficiency(row, shapes[row["shape"]], efficiency_prefill)
        layout = "ep" if row["ep"] > 1 else "tp" if row["tp"] > 1 else "one"
        per.setdefault((str(row["engine"]), layout), []).append(eff)
        per.setdefault(("default", layout), []).append(eff)
    out = {}
    for key, values in per.items():
        q = statistics.quantiles(values, n=4)
        out[key] = MoeGemmFit(round(statistics.median(values), 3), len(values), q[0], q[2])
    return out
