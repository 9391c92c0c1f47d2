"""Helpers shared by the test folders: the system tools a test needs, the published queueing cases, and
the engine simulators' reference step.

A missing system tool (LibreOffice, poppler, redis-server, openssl) skips the test locally and
fails it under ``CI=true`` (CI installs them all: ``.ci/run``).

Importable as ``helpers`` from every test module: ``tests/`` is on ``sys.path`` because
``tests/conftest.py`` lives there (pytest's default import mode).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

#: The measured and published data the tests compare against, each with its source.
DATA = Path(__file__).resolve().parent / "data"

#: T10's headline question (docs/t10-fleet-planning.md), as `concur plan` takes it.
T10_QUESTION: dict[str, Any] = {
    "model": "llama-3.1-70b",
    "arrival_rate": 50,
    "input_tokens": 1000,
    "output_tokens": 400,
    "ttft_slo": "2 s",
    "itl_slo": "50 ms",
}

#: T11's disaggregated fleet (docs/t11-serving-modes.md): Llama-3.1-70B bf16 on H100, vLLM, prefill
#: and decode workers of TP4, the KV cache over one 400 Gb/s InfiniBand NIC per GPU.
T11_DISAGG: dict[str, Any] = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "engine": "vllm",
    "prefill_tp": 4,
    "tp": 4,
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "kv_link": "ib-ndr-400g",
}


def ci_enabled() -> bool:
    """True when running in CI, where a missing tool must fail rather than skip."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(message: str, package: str) -> None:
    """Fail (CI=true: ``install PACKAGE``) or skip the calling test because of ``message``."""
    if ci_enabled():
        pytest.fail(f"{message} and CI=true: install {package}", pytrace=False)
    pytest.skip(message)


def require_tool(name: str, package: str | None = None) -> str:
    """Path of executable ``name``; skip the test when missing, fail it when CI=true."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not on PATH", package or name)
    assert path is not None
    return path


def require_soffice() -> None:
    """Skip (locally) or fail (CI=true) when LibreOffice is not installed."""
    if not (shutil.which("soffice") or shutil.which("libreoffice")):
        missing("LibreOffice (soffice) is not on PATH", "libreoffice-calc-nogui")


def require_poppler() -> None:
    """Skip (locally) or fail (CI=true) when pdftotext/pdftoppm (poppler-utils) are missing."""
    if not (shutil.which("pdftotext") and shutil.which("pdftoppm")):
        missing("pdftotext/pdftoppm (poppler-utils) are not on PATH", "poppler-utils")


# --------------------------------------------------------------------------- published queueing cases
# tests/data/queueing_cases.yaml is checked twice: through concur.maths.erlang (tests/maths) and
# through the packs as a user asks (tests/formulas). Each test file has its own evaluators (one per
# case id, returning {expected key: value}); the reading, the tolerance rule and the bookkeeping
# that no entry of the file is silently ignored live here, once.

QUEUEING_CASES: dict[str, dict[str, Any]] = {
    c["id"]: c for c in YAML(typ="safe").load((DATA / "queueing_cases.yaml").read_text(encoding="utf-8"))["cases"]
}


def case_input(case: dict[str, Any], name: str) -> float:
    """The number of input ``name`` of a queueing case."""
    return float(case["inputs"][name]["value"])


def check_tolerance(got: float, expected: dict[str, Any]) -> None:
    """``got`` is within the case's stated tolerance of ``expected`` (abs, or rel; rel 1e-9 when none)."""
    want, tol = float(expected["value"]), expected.get("tol", {})
    if "abs" in tol:
        assert abs(got - want) <= float(tol["abs"]) + 1e-15, (got, want, tol)
    else:
        rel = float(tol.get("rel", 1e-9))
        assert abs(got - want) <= rel * abs(want) + 1e-15, (got, want, tol)


def covered_cases(evaluators: Mapping[str, object], excluded: Mapping[str, str]) -> list[tuple[str, str]]:
    """Every (case id, expected key) an evaluator runs, less the ``case/key`` entries excluded."""
    return [
        (cid, key) for cid in evaluators for key in QUEUEING_CASES[cid]["expected"] if f"{cid}/{key}" not in excluded
    ]


def assert_every_case_accounted_for(
    evaluate: Callable[[str], dict[str, float]], evaluators: Mapping[str, object], excluded: Mapping[str, str]
) -> None:
    """Every case is evaluated or excluded whole (never both); every expected entry of an evaluated
    case is produced or excluded (never both); every exclusion names an entry of the file."""
    for cid, case in QUEUEING_CASES.items():
        if cid in excluded:
            assert cid not in evaluators, f"{cid} is both evaluated and excluded"
            continue
        assert cid in evaluators, f"{cid}: neither evaluated nor excluded"
        produced = evaluate(cid)
        for key in case["expected"]:
            listed = f"{cid}/{key}" in excluded
            assert (key in produced) != listed, f"{cid}/{key}: produced {key in produced}, excluded {listed}"
    for entry in excluded:
        cid, _, key = entry.partition("/")
        assert cid in QUEUEING_CASES and (not key or key in QUEUEING_CASES[cid]["expected"]), f"stale entry {entry}"


def flat_step() -> Any:
    """The engine simulators' reference step: 10 ms, plus 0.1 ms per prompt token of compute
    (decode-bound batches, prefill visible); no weights, KV or communication cost."""
    from concur.analysis.step_model import StepModel

    return StepModel(
        weights_time=0.0,
        active_fraction=1.0,
        expert_decay=1.0,
        kv_time_per_token=0.0,
        token_time=1e-4,
        attn_time=0.0,
        efficiency=1.0,
        efficiency_prefill=1.0,
        comm_fixed=0.0,
        comm_per_token=0.0,
        t_fixed=0.01,
    )


def concur_child(*args: str) -> subprocess.CompletedProcess[str]:
    """``concur ARGS`` in a child process (the interpreter running the tests), its output as text."""
    return subprocess.run([sys.executable, "-m", "concur", *args], capture_output=True, text=True, timeout=300)


def one_error_line(res: subprocess.CompletedProcess[str]) -> str:
    """The one ``error: ...`` line a refused command printed on stderr (nothing on stdout); asserts it."""
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and res.stdout == "", res.stderr
    return lines[0]
