"""concur.analysis.plot: PNGs are written whole, and the Pareto front is right."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from concur.analysis.plot import Series, line_plot, pareto_front, throughput_curve
from concur.errors import UsageError


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
    assert (
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONPATH": str(__import__("pathlib").Path(__import__("concur").__file__).parents[1])},
        ).returncode
        == 0
    )


# ---------------------------------------------------------------- what a reader sees


def test_kv_limit_is_drawn_where_the_pool_fills_not_at_the_last_fitting_point(drawn, tmp_path) -> None:
    s = _series("TP2 bf16", 2, 40)  # concurrency 1..128: the last swept point that fits is 32
    point = (123.0, 456.0)
    throughput_curve(
        [
            Series(
                *[
                    getattr(s, f)
                    for f in ("label", "concurrency", "per_user", "per_gpu", "bound_per_user", "bound_per_gpu")
                ],
                40,
                point,
            )
        ],
        tmp_path / "c.png",
    )
    (ax,) = drawn
    marks = [(x, y) for label, marker, x, y in ax["lines"] if marker == "X"]
    assert [(float(x[0]), float(y[0])) for x, y in marks] == [point]
    assert "TP2 bf16: KV pool full at c=40" in ax["legend"]
    assert "c=1" in ax["texts"] and "c=128" in ax["texts"]  # points carry their concurrency
    assert "[token/s]" in ax["xlabel"] and "[token/s]" in ax["ylabel"] and ax["title"]


def test_kv_limit_beyond_the_sweep_is_named_not_drawn(drawn, tmp_path) -> None:
    s = _series("TP8", 8, 1000)
    throughput_curve(
        [Series(s.label, s.concurrency, s.per_user, s.per_gpu, kv_limit=1000, kv_point=(1.0, 2.0))], tmp_path / "c.png"
    )
    (ax,) = drawn
    assert "TP8: KV pool full at c=1,000 (beyond the sweep)" in ax["legend"]
    assert all(not (len(x) and x[0] == 1.0) for _, m, x, _ in ax["lines"] if m == "X")


def test_pareto_front_only_when_configurations_are_compared(drawn, tmp_path) -> None:
    throughput_curve([_series("one", 2, None)], tmp_path / "a.png")
    throughput_curve([_series("one", 2, None), _series("two", 4, None)], tmp_path / "b.png")
    assert not any("Pareto" in t for t in drawn[0]["legend"])
    assert any("Pareto" in t for t in drawn[1]["legend"])


def test_line_plot_gives_each_unit_its_panel_and_a_title(drawn, tmp_path) -> None:
    x = np.arange(1.0, 5.0)
    line_plot(
        x,
        {"t_step": x, "itl": x, "tokens_per_s": x * 2},
        tmp_path / "l.png",
        "concurrency [request]",
        {"t_step": "t_step [ms]", "itl": "itl [ms]", "tokens_per_s": "tokens_per_s [token/s]"},
    )
    assert [ax["ylabel"] for ax in drawn] == ["t_step [ms]", "itl [ms]", "tokens_per_s [token/s]"]
    assert drawn[-1]["xlabel"] == "concurrency [request]" and "against concurrency" in drawn[0]["title"]
