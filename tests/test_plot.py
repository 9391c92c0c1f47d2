"""concur.analysis.plot: PNGs are written whole, and the Pareto front is right."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from concur.errors import UsageError
from concur.analysis.plot import Series, line_plot, pareto_front, throughput_curve


def test_pareto_front_small_example() -> None:
    # (per_user, per_gpu): (1,5) and (4,2) and (3,4) are on the front; (2,3) is beaten by (3,4);
    # (1,1) by everything; (4,2) duplicated stays (a tie is not domination)
    x = [1, 2, 3, 4, 1, 4]
    y = [5, 3, 4, 2, 1, 2]
    assert pareto_front(x, y).tolist() == [True, False, True, True, False, True]


def test_pareto_front_rejects_mismatched_arrays() -> None:
    with pytest.raises(UsageError):
        pareto_front([1, 2], [1])


def _series(label: str, scale: float, kv_limit: float | None) -> Series:
    c = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=float)
    step = 0.005 + 0.0001 * c * scale
    return Series(label, c, 1 / step, c / step / scale, 1 / (0.8 * step), c / (0.8 * step) / scale, kv_limit)


def test_throughput_curve_writes_png(tmp_path) -> None:
    out = throughput_curve([_series("TP2 bf16", 2, 40), _series("TP4 fp8", 4, None)], tmp_path / "curve.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert [p.name for p in tmp_path.iterdir()] == ["curve.png"]  # no temporary left behind


def test_throughput_curve_refuses_bad_input_without_writing(tmp_path) -> None:
    bad = Series("x", [1, 2, 3], [1, 2], [1, 2, 3])
    with pytest.raises(UsageError, match="per_user has 2 values"):
        throughput_curve([bad], tmp_path / "bad.png")
    with pytest.raises(UsageError):
        throughput_curve([], tmp_path / "none.png")
    assert list(tmp_path.iterdir()) == []


def test_line_plot_writes_png(tmp_path) -> None:
    x = np.geomspace(1, 1024, 11)
    out = line_plot(x, {"a": np.sqrt(x), "b": np.log(x)}, tmp_path / "sweep.png", "batch", "tok/s", log_x=True)
    assert out.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(UsageError):
        line_plot(x, {"a": x[:3]}, tmp_path / "bad.png", "x", "y")


def test_import_is_light() -> None:
    import subprocess

    code = "import sys, concur.analysis.plot; sys.exit('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(__import__("pathlib").Path(
        __import__("concur").__file__).parents[1])}).returncode == 0
