"""Hostile pack and scenario files: each attack ends in one line, a location, the right exit
code and little time -- never a traceback, a hang, a leaked file or a rewritten terminal.

No test times itself (CI shares 2 cores): each command runs under a generous subprocess timeout
(60 s) that pins a case which used to take minutes or forever (a 2 MB flow list: 139 s;
``--scenario`` a FIFO: never ended), and the early stop shows in what the error names -- the
column where nesting passed 24 levels, the node where the count passed 20,000.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from concur.errors import UnknownNameError
from concur.lang.library import get_catalog

SECRET = "db_password: hunter2\napi_key: sk-0123456789\n"
BASE = "pack: base\nvariables:\n  a: {unit: s}\n  b: {unit: s}\nequations:\n  - b = 2 * a\n"


def concur(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``concur ARGS`` in a subprocess; a hang fails the test through the timeout."""
    return subprocess.run(
        [sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def one_line_error(out: subprocess.CompletedProcess) -> str:
    text = out.stdout + out.stderr
    assert "Traceback" not in text, text
    return text


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- limits while parsing


def test_thousand_deep_nesting_is_refused_at_the_25th_level(tmp_path):
    deep = "[" * 1000 + "]" * 1000 + "\n"
    pack = write(tmp_path, "deep.yaml", deep)
    out = concur("check", str(pack))
    assert out.returncode == 1, out.stdout
    assert f"{pack}:1:25: error: nesting deeper than 24 levels" in one_line_error(out)
    out = concur("solve", "--find", "users", "--scenario", str(pack))
    assert out.returncode == 2
    assert f"error: {pack}:1:25: nesting deeper than 24 levels" in one_line_error(out)


def test_two_megabyte_flow_list_is_refused_before_it_is_parsed(tmp_path):
    big = write(tmp_path, "big.yaml", "[" + ",".join(["1"] * 1_000_000) + "]\n")
    out = concur("check", str(big))
    assert out.returncode == 1
    assert f"{big}: error: file is over 262,144 bytes" in one_line_error(out)
    # under the byte limit, the node limit stops the parser long before the end of the list
    many = write(tmp_path, "many.yaml", "[" + ",".join(["1"] * 120_000) + "]\n")
    out = concur("check", str(many))
    assert out.returncode == 1
    assert f"{many}:1:40000: error: more than 20,000 YAML nodes" in one_line_error(out)


def test_alias_bomb_is_refused(tmp_path):
    rows = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for prev, name in zip("abcdefg", "bcdefgh"):
        rows.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    out = concur("check", str(write(tmp_path, "bomb.yaml", "\n".join(rows) + "\n")))
    assert out.returncode == 1
    assert "more than 20,000 YAML nodes (alias expansion?)" in one_line_error(out)


@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_scenario_must_be_a_regular_file(tmp_path, kind):
    if kind == "device":
        path, word = Path("/dev/zero"), "character device"
    elif kind == "fifo":
        path, word = tmp_path / "fifo.yaml", "FIFO"
        os.mkfifo(path)
    else:
        path, word = tmp_path, "directory"
    out = concur("solve", "--find", "users", "--scenario", str(path))
    assert out.returncode == 2
    assert f"error: {path}: is a {word}" in one_line_error(out)


def test_fifo_among_packs_of_a_folder_does_not_hang_check(tmp_path):
    write(tmp_path, "base.yaml", BASE)
    os.mkfifo(tmp_path / "pipe.yaml")
    out = concur("check", str(tmp_path))
    assert out.returncode == 1
    assert f"{tmp_path / 'pipe.yaml'}: error: is a FIFO (named pipe), not a regular file" in one_line_error(out)


# ---------------------------------------------------------------- packs stay in their folder


def test_uses_of_a_system_file_is_refused_without_echo(tmp_path):
    pack = write(tmp_path / "team", "p.yaml", BASE.replace("pack: base", "pack: p\nuses: [/etc/passwd]"))
    for extra in ((), ("--pack-path", "/etc")):
        out = concur("check", *extra, str(pack))
        text = one_line_error(out)
        assert out.returncode == 1
        assert f"{pack}:2:8: error: uses '/etc/passwd', which is neither a pack name nor a .yaml file" in text
        assert "root:" not in text


def test_uses_outside_the_folder_is_refused_and_never_echoes_the_file(tmp_path):
    write(tmp_path, "secret.yaml", SECRET)
    pack = write(tmp_path / "team", "p.yaml", BASE.replace("pack: base", "pack: p\nuses: [../secret.yaml]"))
    out = concur("check", str(pack))
    text = one_line_error(out)
    assert out.returncode == 1 and "outside the pack's folder" in text and "--pack-path" in text
    # allowed by --pack-path: read, found not to be a pack, and still not quoted (no keys, no values)
    out = concur("check", "--pack-path", str(tmp_path), str(pack))
    text = one_line_error(out)
    assert out.returncode == 1 and "not a concur pack" in text
    assert "db_password" not in text and "hunter2" not in text and "api_key" not in text


def test_uses_outside_the_folder_works_with_pack_path(tmp_path):
    write(tmp_path / "common", "base.yaml", BASE)
    pack = write(
        tmp_path / "team",
        "top.yaml",
        "pack: top\nuses: [../common/base.yaml]\nvariables:\n  c: {unit: s}\nequations:\n  - c = b + a\n",
    )
    out = concur("solve", str(pack), "--find", "c", "--set", "a=1")
    assert out.returncode == 1 and "outside the pack's folder" in one_line_error(out)
    out = concur("solve", "--pack-path", str(tmp_path / "common"), str(pack), "--find", "c", "--set", "a=1")
    assert out.returncode == 0 and "c  3 s" in out.stdout, out.stdout + out.stderr
    out = concur("check", "--pack-path", str(tmp_path / "common"), str(pack))
    assert out.returncode == 0, out.stdout


def test_uses_resolves_beside_the_pack_not_in_the_working_directory(tmp_path):
    write(tmp_path / "team", "base.yaml", BASE)
    write(tmp_path / "elsewhere", "base.yaml", BASE.replace("2 * a", "100 * a"))  # must not be picked up
    pack = write(tmp_path / "team", "top.yaml", "pack: top\nuses: [base, ./base.yaml]\n")
    out = concur("solve", str(pack), "--find", "b", "--set", "a=1", cwd=tmp_path / "elsewhere")
    assert out.returncode == 0 and "b  2 s" in out.stdout, out.stdout + out.stderr


def test_symlink_out_of_the_folder_is_not_followed(tmp_path):
    team = tmp_path / "team"
    write(team, "base.yaml", BASE)
    (team / "evil.yaml").symlink_to("/etc/passwd")
    out = concur("check", str(team))
    text = one_line_error(out)
    assert out.returncode == 1 and "link to a file outside the folder" in text and "root:" not in text
    (team / "evil.yaml").unlink()
    (team / "link.yaml").symlink_to(tmp_path / "secret.yaml")
    write(tmp_path, "secret.yaml", SECRET)
    pack = write(team, "p.yaml", "pack: p\nuses: [link.yaml]\n")
    out = concur("check", str(pack))
    assert out.returncode == 1 and "outside the pack's folder" in one_line_error(out)


def test_scenario_packs_resolve_like_uses(tmp_path):
    scenario = write(tmp_path, "plan.yaml", "packs: [/etc/passwd]\nfind: [users]\ngiven: {}\n")
    out = concur("solve", "--scenario", str(scenario))
    assert out.returncode == 2 and "neither a pack name nor a .yaml file" in one_line_error(out)


def test_catalog_names_are_names_not_paths(tmp_path):
    pack = write(
        tmp_path, "cat.yaml", BASE.replace("pack: base", "pack: cat\npresets:\n  gpu: {catalog: ../../etc/passwd}")
    )
    out = concur("check", str(pack))
    assert out.returncode == 1 and "'../../etc/passwd' is not a valid catalog name" in one_line_error(out)
    with pytest.raises(UnknownNameError):
        get_catalog("../catalogs/gpus")


# ---------------------------------------------------------------- bounded functions


def test_erlang_of_a_billion_servers_is_refused_by_its_range(tmp_path):
    pack = write(
        tmp_path,
        "erl.yaml",
        "pack: erl\nvariables:\n  a: {unit: ''}\n  c: {unit: ''}\nequations:\n  - c = erlang_b(1e9, 1e9) * a\n",
    )
    out = concur("check", str(pack))
    assert out.returncode == 1
    assert (
        f"{pack}:6:5: error: erlang_b() servers = 1e+09 is outside its admissible range [0, 1,000,000]"
        in one_line_error(out)
    )
    out = concur("solve", str(pack), "--find", "c", "--set", "a=2")  # solve refuses a pack that fails check
    assert out.returncode == 1
    assert "erlang_b() servers = 1e+09 is outside its admissible range" in one_line_error(out)


def test_function_range_is_enforced_when_a_variable_feeds_it(tmp_path):
    pack = write(
        tmp_path,
        "erl.yaml",
        "pack: erl\nvariables:\n  n: {unit: ''}\n  c: {unit: ''}\n"
        "equations:\n  - c = erlang_c(n, 0.9 * n) + exp(n / 1000)\n",
    )
    assert concur("check", str(pack)).returncode == 0  # nothing constant to flag
    out = concur("solve", str(pack), "--find", "c", "--set", "n=2e6")
    assert out.returncode == 3 and "erlang_c() servers = 2e+06" in one_line_error(out)
    out = concur("solve", str(pack), "--find", "c", "--set", "n=100")
    assert out.returncode == 0, out.stderr


# ---------------------------------------------------------------- text hygiene


@pytest.mark.parametrize("where", ["formula", "variable"])
def test_full_width_identifier_is_refused(tmp_path, where):
    text = BASE.replace("b = 2 * a", "b = 2 * \uff41") if where == "formula" else BASE.replace("  a:", "  \uff41:")
    out = concur("check", str(write(tmp_path, "base.yaml", text)))
    assert out.returncode == 1
    assert "'\uff41' is not ASCII (NFKC, as Python reads it, makes it 'a')" in one_line_error(out)


def test_escape_sequences_in_pack_text_never_reach_the_terminal(tmp_path):
    fake_ok = "\\x1b[2J\\x1b[1;1Hok: 10 pack(s) unit-consistent\\r"
    pack = write(
        tmp_path,
        "esc.yaml",
        f'pack: esc\ndoc: "pack{fake_ok}"\nvariables:\n'
        f'  a: {{unit: s, doc: "title\\x1b]0;pwned\\x07"}}\n'
        "equations:\n  - a = 2 * [s]\n",
    )
    bad = write(
        tmp_path, "bad.yaml", 'pack: bad\nvariables:\n  a: {unit: s}\nequations:\n  - "a = 2 * [s] + \\"\\x1b[31m\\""\n'
    )
    show = concur("show", str(pack))
    outs = (show, concur("check", str(bad)), concur("show", str(bad)))
    for out in outs:
        text = one_line_error(out)
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert "pack\\x1b[2J\\x1b[1;1Hok: 10 pack(s)" in show.stdout and "title\\x1b]0;pwned\\x07" in show.stdout
    assert [o.returncode for o in outs] == [0, 1, 1]
    assert "\\x1b[31m" in outs[1].stdout and "\\x1b[31m" in outs[2].stderr


@pytest.mark.parametrize(
    "snippet, message",
    [
        ("  k: {choices: [x, y, x]}", "choice 'x' of 'k' is listed twice"),
        ('  k: {choices: ["a,b", c]}', "choice 1 of 'k' contains ','"),
        ("  k: {choices: [ok, 'say \"hi\"']}", "choice 2 of 'k' contains '\"'"),
        ("  k: {choices: [ok, '=1+1']}", "choice 2 of 'k' must not start with = + - @"),
        ("  k: {choices: [ok, '@SUM(A1)']}", "choice 2 of 'k' must not start with = + - @"),
    ],
)
def test_check_refuses_choices_that_break_a_dropdown(tmp_path, snippet, message):
    pack = write(tmp_path, "base.yaml", BASE.replace("variables:\n", f"variables:\n{snippet}\n"))
    out = concur("check", str(pack))
    assert out.returncode == 1 and message in one_line_error(out)


def test_check_refuses_a_constraint_that_is_not_a_condition(tmp_path):
    out = concur("check", str(write(tmp_path, "base.yaml", BASE + "constraints:\n  - {check: a + b, doc: x}\n")))
    assert out.returncode == 1 and "check 'a + b' is not a condition" in one_line_error(out)
    ok = BASE + "constraints:\n  - {check: a <= b and not (a < 0), doc: x}\n"
    assert concur("check", str(write(tmp_path, "base.yaml", ok))).returncode == 0


def test_a_constraints_violation_message_names_only_the_checks_variables(tmp_path):
    """A constraint's own failure message fills {name} from the values its failure holds, so it may name
    only variables the check names; a solve that breaks it prints the message, not the check's text."""
    bad = BASE + "constraints:\n  - {check: 'b <= [1 s]', violation: 'b {b} exceeds {c}', doc: x}\n"
    out = concur("check", str(write(tmp_path, "base.yaml", bad)))
    assert out.returncode == 1 and "the violation message names c, which the check does not" in one_line_error(out)
    good = BASE + "constraints:\n  - {check: 'b <= [1 s]', violation: 'b is {b}, more than a second', doc: x}\n"
    pack = write(tmp_path, "base.yaml", good)
    assert concur("check", str(pack)).returncode == 0
    out = concur("solve", str(pack), "--set", "a=2", "--find", "b")
    assert out.returncode == 3 and "b is 4 s, more than a second" in one_line_error(out), out.stderr


def test_check_refuses_catalog_ids_that_break_a_dropdown(tmp_path):
    cat = "catalog: gear\nfields:\n  mass: {{unit: kg}}\nentries:\n  {id}:\n    mass: {{value: 1, source: scale}}\n"
    write(tmp_path / "catalogs", "gear.yaml", cat.format(id='"a,b"'))
    out = concur("check", str(tmp_path))
    assert out.returncode == 1 and "gear.yaml:5:3: error: entry id contains ','" in one_line_error(out)
    write(tmp_path / "catalogs", "gear.yaml", cat.format(id="ok").replace("catalog: gear", "catalog: other"))
    out = concur("check", str(tmp_path))
    assert out.returncode == 1 and "catalog name 'other' must equal the file name 'gear'" in one_line_error(out)


# ---------------------------------------------------------------- one confinement rule, invisible characters


@pytest.mark.parametrize("ref", ["../secret/base.yaml", "ABSOLUTE"])
def test_a_workbook_definition_cannot_name_a_pack_outside_its_folder(tmp_path, ref):
    """The same rule as a pack's uses: and a scenario's packs: (concur.lang.library.find_used_pack)."""
    secret = write(tmp_path / "secret", "base.yaml", BASE + "# db_password: hunter2\n")
    ref = str(secret) if ref == "ABSOLUTE" else ref
    definition = write(tmp_path / "wb", "d.yaml", f"title: t\npacks: ['{ref}']\ngiven: {{a: 1}}\nfind: [b]\n")
    out = concur("export", str(definition), "-o", str(tmp_path / "wb" / "d.xlsx"))
    assert out.returncode == 2, out.stderr
    assert f"{definition}:2:9: uses '{ref}', which is outside the workbook definition's folder" in one_line_error(out)
    assert not (tmp_path / "wb" / "d.xlsx").exists()
    scenario = write(tmp_path / "wb", "s.yaml", f"packs: ['{ref}']\ngiven: {{a: 1}}\nfind: [b]\n")
    out = concur("solve", "--scenario", str(scenario))
    assert out.returncode == 2 and f"uses '{ref}', which is outside the scenario's folder" in one_line_error(out)
    allowed = concur("export", "--pack-path", str(tmp_path / "secret"), str(definition), "-o", str(tmp_path / "d.xlsx"))
    assert allowed.returncode == 0, allowed.stderr


@pytest.mark.parametrize(
    "char, name",
    [("\u202e", "RIGHT-TO-LEFT OVERRIDE"), ("\u200b", "ZERO WIDTH SPACE"), ("\u2066", "LEFT-TO-RIGHT ISOLATE")],
)
def test_choices_and_ids_refuse_invisible_and_bidi_characters(tmp_path, char, name):
    pack = write(
        tmp_path, "base.yaml", BASE.replace("variables:\n", f"variables:\n  k: {{choices: [ok, 'a{char}b']}}\n")
    )
    out = concur("check", str(pack))
    assert out.returncode == 1 and f"choice 2 of 'k' contains U+{ord(char):04X} ({name})" in one_line_error(out)
    assert char not in out.stdout + out.stderr
    cat = (
        "catalog: gear\nfields:\n  mass: {unit: kg}\nentries:\n  'a"
        + char
        + "b':\n    mass: {value: 1, source: scale}\n"
    )
    write(tmp_path / "cats" / "catalogs", "gear.yaml", cat)
    out = concur("check", str(tmp_path / "cats"))
    assert out.returncode == 1 and f"entry id contains U+{ord(char):04X}" in one_line_error(out)
    out = concur("calibrate", "--from", str(pack), "--id", f"my{char}id", "--set", "model=x", "--set", "gpu=y")
    assert out.returncode == 2 and f"--id contains U+{ord(char):04X}" in one_line_error(out)
