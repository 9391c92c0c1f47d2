"""The editor schema (formulas/pack.schema.json) and the loader accept the same keys."""

from __future__ import annotations

import json
from pathlib import Path

from concur.lang import pack

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "formulas" / "pack.schema.json").read_text())


def test_schema_top_level_keys_match_loader():
    assert set(SCHEMA["properties"]) == pack._PACK_KEYS


def test_schema_variable_keys_match_loader():
    var_schema = SCHEMA["properties"]["variables"]["additionalProperties"]
    assert set(var_schema["properties"]) == pack._VAR_KEYS


def test_shipped_packs_use_only_schema_keys():
    from concur.lang.library import pack_paths
    from concur.lang.yamlsafe import load_yaml

    for path in pack_paths().values():
        data = load_yaml(path)
        assert set(data) <= set(SCHEMA["properties"]), path
        for name, spec in (data.get("variables") or {}).items():
            assert set(spec or {}) <= pack._VAR_KEYS, (path, name)
