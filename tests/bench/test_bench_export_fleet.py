"""``concur bench export --plan fleet`` reports wall and CPU against ``import openpyxl`` and the
1.5 s target for both warm exports (fake samples: no timing is asserted)."""

from __future__ import annotations

import pytest

from concur.bench import export


def test_the_fleet_report_names_the_peer_both_clocks_and_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    samples = {
        export._BARE: [(0.02, 0.02)],
        export._PEER: [(0.2, 0.25)],
        "concur export llm_fleet.yaml (cold cache)": [(3.0, 3.1)],
        export._PRINTED: [(1.6, 1.5)],
        export._WARM: [(0.6, 0.5)],
    }
    export._report_fleet(1, samples)
    out = capsys.readouterr().out
    assert "peer: python -c 'import openpyxl'" in out and "wall" in out and "CPU" in out
    assert "llm_fleet.yaml (warm) <= 1.5 s wall: 0.60 s wall, 0.50 s CPU, met (3.0x" in out
    assert "llm_fleet.yaml (printed) <= 1.5 s wall: 1.60 s wall, 1.50 s CPU, MISSED (8.0x" in out
    assert "6.0x CPU" in out  # 1.5 s / 0.25 s
