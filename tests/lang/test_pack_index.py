"""The shipped pack index (formulas/index.json): current, used while current, ignored when stale,
and a question naming no pack parses only the packs and catalogs in play."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from concur.api import packs_for
from concur.lang import index
from concur.lang.model import pack_index


def test_shipped_index_is_current():
    shipped = json.loads(index.index_path().read_text())
    assert index.build_index() == shipped, "stale: run python -m concur.lang.index and commit formulas/index.json"


def test_index_says_what_building_the_models_says():
    assert index._read() == pack_index()


def test_a_current_index_is_what_packs_for_reads(tmp_path, monkeypatch):
    """Tamper with the names while keeping the digest: packs_for follows the index, not the models."""
    data = json.loads(index.index_path().read_text())
    assert packs_for(("users",)) == ["llm_memory"]
    data["packs"]["llm_memory"]["variables"].remove("users")
    (tmp_path / "index.json").write_text(json.dumps(data))
    monkeypatch.setattr(index, "index_path", lambda: tmp_path / "index.json")
    assert packs_for(("users",)) != ["llm_memory"]


def test_a_stale_index_is_ignored(tmp_path, monkeypatch):
    data = json.loads(index.index_path().read_text())
    data["packs"]["llm_memory"]["variables"].remove("users")
    data["digest"] = "0" * 64  # what an edited pack file gives: the digests no longer match
    (tmp_path / "index.json").write_text(json.dumps(data))
    monkeypatch.setattr(index, "index_path", lambda: tmp_path / "index.json")
    assert index._read() is None
    assert index.shipped_index() == pack_index()
    assert packs_for(("users",)) == ["llm_memory"]
    (tmp_path / "index.json").write_text("{not json")
    assert index.shipped_index() == pack_index()


PARSED = """
import json, sys
import concur.lang.pack as pack
parsed = []
for name in ("load_pack", "load_catalog"):
    real = getattr(pack, name)
    def spy(path, *a, _real=real, **k):
        parsed.append(str(path).rsplit("/", 2)[-2:][-1])
        return _real(path, *a, **k)
    setattr(pack, name, spy)
import concur.lang.library as library
library.load_pack, library.load_catalog = pack.load_pack, pack.load_catalog
from concur.cli import main
try:
    main(["solve", "--find", sys.argv[1]])
except SystemExit as exc:
    assert exc.code == 0, exc.code
print(json.dumps(sorted(parsed)))
"""


def test_cold_question_parses_only_the_packs_and_catalogs_in_play(tmp_path):
    runs = {}
    for find in ("users", "replicas"):
        out = subprocess.run(
            [sys.executable, "-c", PARSED, find],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "CONCUR_CACHE_DIR": str(tmp_path / find)},
        )
        assert out.returncode == 0, out.stderr
        runs[find] = json.loads(out.stdout.strip().splitlines()[-1])
    assert runs["users"] == ["dtypes.yaml", "gpus.yaml", "llm_memory.yaml", "models.yaml"]
    assert {"llm_fleet.yaml", "llm_memory.yaml"} <= set(runs["replicas"])
    assert not {"queueing.yaml", "token_bucket.yaml", "data_loader.yaml", "worker_queue.yaml"} & set(runs["replicas"])
