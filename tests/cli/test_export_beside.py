"""``concur export DEF.yaml`` writes DEF.xlsx beside the definition only as a regular file.

A definition's folder comes from a checkout (other teams' pull requests run ``concur export`` in
CI), so a link planted there as DEF.xlsx must not be written through to what it points at.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from concur.cli import cli
from concur.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def _definition(tmp_path: Path) -> Path:
    definition = tmp_path / "rate_limit.yaml"
    shutil.copy(ROOT / "workbooks" / "rate_limit.yaml", definition)
    return definition


def test_a_link_beside_the_definition_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    definition = _definition(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "rate_limit.xlsx").symlink_to(victim)
    result = CliRunner().invoke(cli, ["export", str(definition)])
    error = result.exception
    assert isinstance(error, UsageError) and error.exit_code == 2  # the CLI prints it as one line
    assert "not a regular file" in str(error) and "rate_limit.xlsx" in str(error)
    assert victim.read_text() == "keep me\n"
    assert (tmp_path / "rate_limit.xlsx").is_symlink()


def test_a_regular_file_beside_it_is_replaced_and_o_follows_a_link_as_named(tmp_path: Path) -> None:
    definition = _definition(tmp_path)
    (tmp_path / "rate_limit.xlsx").write_bytes(b"old")
    assert CliRunner().invoke(cli, ["export", str(definition)]).exit_code == 0
    assert (tmp_path / "rate_limit.xlsx").read_bytes()[:2] == b"PK"
    target = tmp_path / "elsewhere.xlsx"
    (tmp_path / "named.xlsx").symlink_to(target)
    assert CliRunner().invoke(cli, ["export", str(definition), "-o", str(tmp_path / "named.xlsx")]).exit_code == 0
    assert target.read_bytes()[:2] == b"PK" and (tmp_path / "named.xlsx").is_symlink()
