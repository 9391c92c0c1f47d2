"""concur calibrate: the fit on synthetic data (no torch), the CLI without torch, and the torch
path on the CPU with a tiny model (skipped when torch is not installed)."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from concur.analysis import calibrate_torch as ct
from concur.analysis.calibrate_torch import (
    Sample,
    Shapes,
    catalog_entry,
    fit_step_times,
    shapes_for,
)
from concur.cli import cli, main
from concur.errors import UsageError

TINY = Shapes(layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128)


def _samples(eff: float, t_fixed: float, bw: float, sizes=(1e9, 2e9, 4e9, 8e9)) -> list[Sample]:
    return [Sample(i + 1, b / (eff * bw) + t_fixed, b) for i, b in enumerate(sizes)]


@pytest.mark.parametrize("eff, t_fixed", [(0.5, 1e-3), (0.83, 0.0), (0.12, 4e-3)])
def test_fit_recovers_efficiency_and_fixed_cost(eff, t_fixed):
    fit = fit_step_times(_samples(eff, t_fixed, 3.35e12), 3.35e12)
    assert fit.efficiency == pytest.approx(eff, rel=1e-9)
    assert fit.t_fixed == pytest.approx(t_fixed, abs=1e-12)
    assert fit.median_abs_error == pytest.approx(0, abs=1e-9)


def test_fit_never_returns_a_negative_fixed_cost():
    # times that extrapolate below zero at zero bytes: refitted through the origin
    samples = [Sample(1, 0.9e-3, 1e9), Sample(2, 2.1e-3, 2e9), Sample(4, 4.3e-3, 4e9)]
    fit = fit_step_times(samples, 1e12)
    assert fit.t_fixed == 0.0
    xy = 0.9e-3 * 1e9 + 2.1e-3 * 2e9 + 4.3e-3 * 4e9
    assert fit.efficiency == pytest.approx(1 / (xy / 21e18 * 1e12))


def test_fit_with_noise_reports_its_error():
    samples = _samples(0.6, 2e-3, 2e12)
    noisy = [Sample(s.batch, s.t_step * (1.05 if i % 2 else 0.95), s.bytes) for i, s in enumerate(samples)]
    fit = fit_step_times(noisy, 2e12)
    assert 0.5 < fit.efficiency < 0.7 and 0 < fit.median_abs_error < 0.1
    # each batch size predicted by a line through the others: worse than in-sample, never better
    assert fit.median_abs_error < fit.loo_median_abs_error < 0.3


@pytest.mark.parametrize(
    "samples, bw, match",
    [
        ([Sample(1, 1e-3, 1e9), Sample(2, 2e-3, 1e9)], 1e12, "three or more batch sizes"),
        # two sizes: a line through them fits exactly (error 0) and proves nothing
        (
            [Sample(1, 1e-3, 1e9), Sample(2, 2e-3, 2e9)],
            1e12,
            "three or more batch sizes with different bytes read, got 2",
        ),
        ([Sample(1, 1e-3, 1e9), Sample(2, 2e-3, 2e9), Sample(4, 4e-3, 4e9)], 0.0, "bandwidth must be positive"),
        ([Sample(1, 3e-3, 1e9), Sample(2, 1e-3, 2e9), Sample(4, 0.5e-3, 4e9)], 1e12, "does not grow"),
    ],
)
def test_fit_refuses_what_it_cannot_fit(samples, bw, match):
    with pytest.raises(UsageError, match=match):
        fit_step_times(samples, bw)


def test_shapes_from_the_catalog():
    s = shapes_for("llama-3.1-8b", 32)
    assert (s.hidden, s.heads, s.kv_heads, s.head_dim, s.intermediate) == (4096, 32, 8, 128, 14336)
    # 32 layers + embeddings + LM head reproduce the catalog's parameter count
    assert s.weight_params() + 2 * 128256 * 4096 == pytest.approx(8.030e9, rel=1e-3)
    assert s.kv_values_per_token() * 2 == 131072  # bf16: the pack's kv_per_token
    for bad, match in (
        (("llama-3.1-8b", 0), "--layers"),
        (("deepseek-v3", 1), "MLA or MoE"),
        (("no-such-model", 1), "unknown model"),
    ):
        with pytest.raises(UsageError, match=match):
            shapes_for(*bad)


def test_catalog_entry_carries_the_measurement():
    samples = _samples(0.5, 1e-3, 1e12, sizes=(1e9, 3e9, 5e9))
    fit = fit_step_times(samples, 1e12)
    meta = {
        "device": "cpu",
        "device_name": "cpu (2 cores)",
        "torch": "x",
        "model": "llama-3.1-8b",
        "layers": 2,
        "dtype": "bf16",
        "context": 1024,
        "bandwidth_source": "given",
    }
    doc = catalog_entry("calibrated-cpu", fit, samples, meta)
    entry = doc["entries"]["calibrated-cpu"]
    assert doc["catalog"] == "engines"
    assert entry["efficiency"]["value"] == 0.5 and entry["t_fixed"]["value"] == 1.0  # t_fixed in ms
    assert "synthetic decode step" in entry["efficiency"]["source"]
    # 1 GB at 1 TB/s: bound 1 ms, step 2 + 1 ms; 3 GB: bound 3 ms, step 6 + 1 ms; 5 GB: 10 + 1 ms
    assert [p["measured_over_bound"] for p in entry["measurement"]["points"]] == [3.0, 2.333, 2.2]
    assert "0.0% leaving one batch size out" in entry["efficiency"]["source"]


def test_cli_without_torch_is_a_one_line_usage_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(SystemExit) as stop:
        main(["calibrate"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        "error: concur calibrate needs torch, which is not installed; pip install 'concur[calibrate]'\n"
    )


def test_measure_on_cpu_with_a_tiny_model():
    pytest.importorskip("torch")
    samples = ct.measure(TINY, 64, [1, 8], device="cpu", dtype="fp32", repeats=2)
    assert [s.batch for s in samples] == [1, 8]
    assert all(s.t_step > 0 for s in samples)
    kv = 4 * TINY.kv_values_per_token() * 64
    assert samples[1].bytes - samples[0].bytes == 7 * kv
    assert ct.measure_bandwidth("cpu", 1 << 22, repeats=2) > 0


def test_cli_on_cpu_writes_a_catalog_entry(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(ct, "shapes_for", lambda model, layers: TINY)
    # a fake bandwidth so low that the tiny step is memory bound and the fit is well posed
    monkeypatch.setattr(ct, "measure", lambda *a, **k: _samples(0.4, 2e-4, 1e9, sizes=(1e6, 4e6, 9e6)))
    out = tmp_path / "engine.yaml"
    res = CliRunner().invoke(cli, ["calibrate", "--bandwidth", "0.001", "--device", "cpu", "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = YAML(typ="safe").load(out.read_text())
    entry = doc["entries"]["calibrated-cpu"]
    assert entry["efficiency"]["value"] == pytest.approx(0.4, rel=1e-3)
    assert entry["t_fixed"]["value"] == pytest.approx(0.2, rel=1e-3)
    assert entry["measurement"]["bandwidth_source"] == "given" and len(entry["measurement"]["points"]) == 3


def test_cli_end_to_end_on_cpu(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(ct, "shapes_for", lambda model, layers: TINY)
    res = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--device",
            "cpu",
            "--dtype",
            "fp32",
            "--context",
            "256",
            "--batches",
            "1,16,64",
            "--repeats",
            "3",
            "--bandwidth",
            "0.05",
        ],
    )
    # a tiny model on a busy CPU may not be memory bound; then the fit refuses (exit 2), never crashes
    if res.exit_code == 0:
        assert "catalog: engines" in res.output and "measured/bound" in res.output
    else:
        assert isinstance(res.exception, UsageError) and res.exception.exit_code == 2, res.output
        assert "does not grow" in str(res.exception)


def test_cli_json_with_a_stand_in_torch(tmp_path, monkeypatch):
    """--json prints the fit as one object (the design's shape); the YAML entry goes to -o FILE only."""
    import json
    import types

    fake = types.SimpleNamespace(__version__="0-test", cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(ct, "shapes_for", lambda model, layers: TINY)
    monkeypatch.setattr(ct, "measure", lambda *a, **k: _samples(0.4, 2e-4, 1e9, sizes=(1e6, 4e6, 9e6)))
    res = CliRunner().invoke(cli, ["calibrate", "--bandwidth", "0.001", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["efficiency"] == pytest.approx(0.4, rel=1e-9) and doc["t_fixed"]["unit"] == "ms"
    assert doc["t_fixed"]["value"] == pytest.approx(0.2, rel=1e-9) and doc["efficiency_prefill"] is None
    assert len(doc["points"]) == 3 and doc["median_abs_error"] == pytest.approx(0, abs=1e-9) and "wrote" not in doc
    out = tmp_path / "engine.yaml"
    res = CliRunner().invoke(cli, ["calibrate", "--bandwidth", "0.001", "--json", "-o", str(out)])
    assert json.loads(res.stdout)["wrote"] == str(out)
    assert YAML(typ="safe").load(out.read_text())["catalog"] == "engines"
