"""Fixtures shared across the suite: a private cache key, and what the plot functions would save."""

from __future__ import annotations

import pytest


@pytest.fixture
def drawn(monkeypatch):
    """What the plot functions would save, one dict per axes: labels, title, legend entries, texts,
    lines (label, marker, x, y) and the X marks ((x, y) of each marker 'X' with data)."""
    import concur.analysis.plot as plot

    seen: list[dict] = []

    def capture(fig, path):
        for ax in fig.axes:
            legend = ax.get_legend()
            lines = [(ln.get_label(), ln.get_marker(), ln.get_xdata(), ln.get_ydata()) for ln in ax.get_lines()]
            seen.append(
                {
                    "xlabel": ax.get_xlabel(),
                    "ylabel": ax.get_ylabel(),
                    "title": ax.get_title(),
                    "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
                    "texts": [t.get_text() for t in ax.texts],
                    "lines": lines,
                    "marks": [(float(x[0]), float(y[0])) for _, m, x, y in lines if m == "X" and len(x)],
                }
            )
        return path

    monkeypatch.setattr(plot, "save_png", capture)
    return seen


@pytest.fixture
def own_cache_key(tmp_path, monkeypatch):
    """This test (and the concur it runs in-process or as a child) keys the cache with a key of its
    own, kept under ``tmp_path/config``: never the user's key, never one an earlier test made."""
    from concur import cache as cachefiles

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(cachefiles, "_KEY", None)
    monkeypatch.setattr(cachefiles, "_KEY_DURABLE", False)
