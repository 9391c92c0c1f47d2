"""Units: one pint registry, parsed once per unit text, cached on disk.

Invariants:

* Every value inside the engine is a float in **base units** (pint's base:
  ``bit`` for information, ``second`` for time, one ``token`` for tokens...).
  A :class:`UnitInfo` carries the factor that turns one unit of its text into
  base units and the dimension as a sorted tuple of ``(dimension, exponent)``.
* pint is imported only on a cache miss: a warm ``concur solve`` reads unit
  facts from the cache written by earlier runs, so it never pays pint's ~0.3 s.
* Counting dimensions (:data:`COUNT_DIMENSIONS`) have base factor 1, which is
  what makes ``floor``/``ceil`` of a count meaningful in base units.

* pint's definitions are patched (``bit = [information]``) *in memory* and handed to pint as
  lines: no definitions file is written or read outside pint's own package, so no folder
  anyone else can write to can change what a unit means.
* The unit-fact cache is JSON (:mod:`concur.cache`) keyed by the content of its inputs (pint's
  version, ``data/units.txt``, the shipped table); every row is checked (a finite positive
  factor, dimensions named ``[name]``) and a file that fails is ignored.

* A unit text is bounded before pint sees it (:func:`unit_problem`): pint evaluates ``**`` on
  integers exactly, so ``m**(9**9**9)`` would never end. At most :data:`MAX_UNIT_CHARS`
  characters, :data:`MAX_UNIT_PARTS` parts and :data:`MAX_UNIT_DEPTH` levels of brackets;
  an exponent is a plain number (or a fraction such as ``(1/2)``) of magnitude at most
  :data:`MAX_UNIT_EXPONENT`, never an expression or another power; a number has at most 24
  characters. Every unit string goes through :func:`unit_info`, so packs, ``[unit]`` literals,
  ``--set``, scenarios, workbook definitions and calibration files all meet the same bound.

Pitfalls refused or warned about: ``b`` is a barn, ``Gb`` a gilbert, ``KB`` is undefined;
offset units (``degC``) are refused; pint's angles (``revolution``, ``turn``, ``cycle``) are refused,
and its ``rpm``/``rps`` (revolutions, x 2 pi) are shadowed: ``data/units.txt`` defines this field's rate
words (``rps``, ``qps``, ``rpm``, ``rph`` request rates; ``tps``, ``tpm`` token rates).
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..cache import cache_dir, digest, read_json, write_json
from ..errors import UnitError, UsageError
from ..records import record

__all__ = [
    "COUNT_DIMENSIONS",
    "DIMENSIONLESS",
    "UnitInfo",
    "check_given_units",
    "dims_mul",
    "dims_pow",
    "format_dims",
    "parse_quantity",
    "quantity_unit",
    "registry",
    "save_cache",
    "unit_info",
    "unit_problem",
]

Dims = tuple[tuple[str, float], ...]
DIMENSIONLESS: Dims = ()
COUNT_DIMENSIONS = frozenset(
    {"[token]", "[request]", "[user]", "[parameter]", "[gpu]", "[replica]", "[flop]", "[block]", "[currency]"}
)
_REFUSED = {
    "b": "'b' is the barn (an area); write 'bit' or 'B' (byte)",
    "Gb": "'Gb' is the gilbert; write 'Gbit' or 'GB'",
    "Mb": "write 'Mbit' or 'MB'",
    "Kb": "write 'kbit' or 'kB'",
    "KB": "'KB' is undefined; write 'kB' (1000 B) or 'KiB' (1024 B)",
    "pct": "'pct' is the picocarat; write 'percent'",
}
# pint's angle words: an angle is dimensionless to pint, so "30 revolution/s" would pass for a rate of
# requests at x 2 pi. This field counts requests and tokens, never turns: the words are refused.
_ANGLES = (
    "revolution",
    "revolutions",
    "revolutions_per_minute",
    "revolutions_per_second",
    "turn",
    "turns",
    "cycle",
    "cycles",
    "circle",
    "circles",
    "radian",
    "radians",
    "rad",
    "degree",
    "degrees",
    "deg",
)
_REFUSED.update(
    {
        word: f"'{word}' is an angle in pint; a request rate is 'request/s' (rps), a token rate 'token/s' (tps)"
        for word in _ANGLES
    }
)
# pint's definitions of the field's rate words, removed so that data/units.txt defines them.
_SHADOWED = {
    "revolutions_per_minute = revolution / minute = rpm": "revolutions_per_minute = revolution / minute",
    "revolutions_per_second = revolution / second = rps": "revolutions_per_second = revolution / second",
}
_TOKEN_RE = re.compile(r"[A-Za-z_]+")
MAX_UNIT_CHARS = 120
MAX_UNIT_PARTS = 40
MAX_UNIT_DEPTH = 4
MAX_UNIT_EXPONENT = 12
_UNIT_PART = re.compile(
    r"\s+|(?P<pow>\*\*|\^)|(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<op>[*/()+-])"
)
_EXPONENT = re.compile(r"\s*(\(\s*)?([-+]?\s*\d+(?:\.\d+)?(?:\s*/\s*\d+)?)\s*(?(1)\))")


@record
class UnitInfo:
    """A parsed unit: ``text`` as written, base ``factor`` and ``dims``."""

    text: str
    factor: float
    dims: Dims

    @property
    def dimensionless(self) -> bool:
        return not self.dims


_MEMO: dict[str, UnitInfo] = {}
_SEEN: set[str] = set()  # every unit text asked for (to build the shipped table)
_DISK_LOADED = False
_DISK_DIRTY = False
_REGISTRY: Any = None


def registry() -> Any:
    """The one pint ``UnitRegistry`` of the process (built on first use)."""
    global _REGISTRY
    if _REGISTRY is None:
        import pint

        reg: Any = pint.UnitRegistry(_definitions_with_information_dimension(pint))
        reg.load_definitions(str(_UNITS_TXT))
        _REGISTRY = reg
    return _REGISTRY


def _definitions_with_information_dimension(pint: Any) -> list[str]:
    """pint's default definitions, as lines, with ``bit = [information]`` instead of ``bit = []``
    and without pint's ``rpm``/``rps`` aliases (revolutions), which ``data/units.txt`` redefines as
    request rates.

    pint ships the bit as dimensionless, which would let ``GiB + s`` pass a unit check. The
    patched text never touches the disk: pint parses the lines given to it, and the one
    ``@import constants_en.txt`` is replaced by that file's lines (read from pint's package).
    """
    source = Path(pint.__file__).with_name("default_en.txt")
    text = source.read_text(encoding="utf-8")
    if "\nbit = []\n" not in text or text.count("@import constants_en.txt") != 1:
        raise UnitError("this pint version defines 'bit' unexpectedly; concur needs pint>=0.24")
    constants = source.with_name("constants_en.txt").read_text(encoding="utf-8")
    text = text.replace("\nbit = []\n", "\nbit = [information]\n").replace("@import constants_en.txt", constants)
    for theirs, ours in _SHADOWED.items():
        if text.count(theirs) != 1:
            raise UnitError(f"this pint version defines {theirs.split()[0]} unexpectedly; concur needs pint>=0.24")
        text = text.replace(theirs, ours)
    return text.splitlines()


_UNITS_TXT = Path(__file__).with_name("data") / "units.txt"


@lru_cache(maxsize=1)
def _facts_key() -> str:
    """Digest of everything a unit fact derives from: pint's version, units.txt, the shipped table,
    and the spellings refused or shadowed here (a cached fact never outlives a new refusal)."""
    rules = repr((sorted(_REFUSED.items()), sorted(_SHADOWED.items()))).encode()
    return digest(_pint_version(), _UNITS_TXT.read_bytes(), SHIPPED_TABLE.read_bytes(), rules)[:24]


def _pint_version() -> str:
    """pint's installed version, from the name of its ``dist-info`` folder when there is one: a warm
    run must not import pint, and ``importlib.metadata`` alone costs ~30 ms of start-up."""
    from importlib.util import find_spec

    spec = find_spec("pint")
    if spec is not None and spec.origin:
        infos = sorted(Path(spec.origin).parent.parent.glob("[Pp]int-*.dist-info"))
        if len(infos) == 1:
            return infos[0].name[len("pint-") : -len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pint")
    except PackageNotFoundError:
        return "?"


def _disk_path() -> Path:
    return cache_dir() / f"units-{_facts_key()}.json"


SHIPPED_TABLE = Path(__file__).with_name("data") / "units-table.json"
COMMON_UNITS = (
    "B",
    "kB",
    "MB",
    "GB",
    "TB",
    "KiB",
    "MiB",
    "GiB",
    "TiB",
    "bit",
    "Gbit",
    "s",
    "ms",
    "us",
    "ns",
    "minute",
    "hour",
    "day",
    "month",
    "year",
    "percent",
    "token",
    "request",
    "user",
    "parameter",
    "gpu",
    "replica",
    "flop",
    "block",
    "usd",
    "erlang",
    "1/s",
    "request/s",
    "request/minute",
    "rps",
    "qps",
    "rpm",
    "rph",
    "tps",
    "tpm",
    "req/s",
    "req/min",
    "tok/s",
    "tokens/s",
    "requests/s",
    "token/s",
    "token/request",
    "token/user",
    "B/s",
    "GB/s",
    "MB/s",
    "TB/s",
    "Gbit/s",
    "B/token",
    "B/parameter",
    "Tflop/s",
    "usd/hour",
    "usd/month",
    "usd/gpu/hour",
    "gpu/replica",
    "request/replica",
    "user/gpu",
    "Gparameter",
    "kilotoken",
    "Mtok",
    "s*replica/request",
    "ms*replica/request",
)


_DIM_RE = re.compile(r"^\[[a-z_]{1,40}\]$")


def _rows(raw: Any) -> dict[str, UnitInfo]:
    """Validated ``{text: [factor, [[dimension, exponent], ...]]}`` rows; ValueError on any odd row."""
    if not isinstance(raw, dict):
        raise ValueError("unit table must be an object")
    out = {}
    for text, row in raw.items():
        factor, dims = row
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0 and isinstance(dims, list)):
            raise ValueError(f"unit row {text!r}")
        pairs = []
        for d, e in dims:
            if not (isinstance(d, str) and _DIM_RE.match(d) and isinstance(e, (int, float)) and math.isfinite(e)):
                raise ValueError(f"dimension in unit row {text!r}")
            pairs.append((d, float(e)))
        out[text] = UnitInfo(text, float(factor), tuple(pairs))
    return out


def _load_disk() -> None:
    """Unit facts without pint: the table shipped with concur (checked against pint by the
    tests), then this user's cache of units parsed earlier (ignored unless every row is valid)."""
    global _DISK_LOADED
    if _DISK_LOADED:
        return
    _DISK_LOADED = True
    for table in (_rows(json.loads(SHIPPED_TABLE.read_text())), read_json(_disk_path(), "units", _rows) or {}):
        for text, info in table.items():
            _MEMO.setdefault(text, info)


def parse_with_pint(text: str) -> UnitInfo:
    """Parse ``text`` with pint itself, bypassing every table (the reference for the shipped table)."""
    reg = registry()
    unit = reg.parse_units(text)
    base = reg.Quantity(1.0, unit).to_base_units()
    dims = tuple(sorted((str(d), float(e)) for d, e in dict(base.dimensionality).items()))
    return UnitInfo(text, float(base.magnitude), dims)


def table_rows(texts: list[str]) -> dict[str, Any]:
    """JSON rows for :data:`SHIPPED_TABLE` (``python -m concur.lang.unit_table`` regenerates it)."""
    rows = {}
    for text in sorted(set(texts)):
        info = parse_with_pint(text)
        rows[text] = [info.factor, [list(d) for d in info.dims]]
    return rows


def save_cache() -> None:
    """Persist newly parsed units (atomic replace; failures are ignored: it is a cache)."""
    global _DISK_DIRTY
    if not _DISK_DIRTY:
        return
    data = {t: [u.factor, [list(d) for d in u.dims]] for t, u in _MEMO.items()}
    if write_json(_disk_path(), "units", data):
        _DISK_DIRTY = False


def unit_problem(text: str) -> str | None:
    """Why ``text`` is refused before pint reads it (None when it may be parsed): see the module doc."""
    if len(text) > MAX_UNIT_CHARS:
        return f"is {len(text):,} characters long (at most {MAX_UNIT_CHARS})"
    parts = depth = pos = 0
    while pos < len(text):
        m = _UNIT_PART.match(text, pos)
        if m is None:
            return f"has {text[pos]!r} at character {pos + 1}, which no unit uses"
        pos = m.end()
        if m.group().isspace():
            continue
        parts += 1
        if parts > MAX_UNIT_PARTS:
            return f"has more than {MAX_UNIT_PARTS} parts"
        if m.group("num") and len(m.group("num")) > 24:
            return f"has a number of {len(m.group('num')):,} characters (at most 24)"
        op = m.group("op")
        depth += (op == "(") - (op == ")")
        if depth > MAX_UNIT_DEPTH:
            return f"nests brackets deeper than {MAX_UNIT_DEPTH} levels"
        if m.group("pow"):
            exp = _EXPONENT.match(text, pos)
            if exp is None or text[exp.end() :].lstrip().startswith(("**", "^")):
                return (
                    f"has an exponent at character {pos + 1} that is not a plain number (write m**2, s**-1, m**(1/2))"
                )
            num, _, den = exp.group(2).replace(" ", "").partition("/")
            value = abs(float(num) / float(den or 1)) if float(den or 1) else math.inf
            if value > MAX_UNIT_EXPONENT:
                return f"has an exponent of magnitude {value:g} (at most {MAX_UNIT_EXPONENT})"
            pos = exp.end()
    return None


def unit_info(text: str | None, *, where: Any = None, variable: str | None = None) -> UnitInfo:
    """Parse a unit expression (``"B/token"``, ``"request/s"``; empty = dimensionless).

    Raises :class:`UnitError` naming the unit and suggesting a spelling.
    """
    global _DISK_DIRTY
    key = (text or "").strip()
    _SEEN.add(key)
    if key in ("", "1", "dimensionless"):
        return UnitInfo(key, 1.0, DIMENSIONLESS)
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    _load_disk()
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    problem = unit_problem(key)
    if problem is not None:
        shown = key if len(key) <= 60 else f"{key[:40]}...{key[-12:]}"
        raise UnitError(
            f"unit '{shown}' {problem}",
            where=where,
            variable=variable,
            hint="write a unit such as 'GiB', 'B/token', 'request/s' or 'm**2'",
        )
    for token in _TOKEN_RE.findall(key):
        if token in _REFUSED:
            raise UnitError(
                f"ambiguous unit '{token}' in '{key}'", where=where, variable=variable, hint=_REFUSED[token]
            )
    reg = registry()
    try:
        unit = reg.parse_units(key)
    except Exception as exc:  # pint raises several unrelated classes here
        raise UnitError(
            f"unknown unit '{key}' ({type(exc).__name__}: {exc})",
            where=where,
            variable=variable,
            hint="use pint spellings such as 'GiB', 'GB', 'B/token', 'request/s', 'usd/gpu/hour'",
        ) from None
    if not reg.Quantity(1, unit)._is_multiplicative:
        raise UnitError(
            f"offset unit '{key}' cannot be used in equations",
            where=where,
            variable=variable,
            hint="use a delta unit such as 'delta_degC'",
        )
    base = reg.Quantity(1.0, unit).to_base_units()
    dims = tuple(sorted((str(d), float(e)) for d, e in dict(base.dimensionality).items()))
    info = UnitInfo(key, float(base.magnitude), dims)
    _MEMO[key] = info
    _DISK_DIRTY = True
    return info


# A comma only groups thousands ("1,000,000"); "0,5" is not 5 (a decimal comma is refused).
_NUMBER_RE = re.compile(
    r"^\s*([-+]?(?:\d{1,3}(?:,\d{3})+(?![\d,_])\.?\d*|\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?:(Ki|Mi|Gi|[kKMG])(?=\s|/|$))?\s*(.*)$"
)
_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30}
_PER_RE = re.compile(r"(?:^|\s+)per\s+")


def parse_quantity(text: str, *, variable: str | None = None) -> tuple[float, UnitInfo]:
    """Split ``"8192 token"``, ``"8k token"``, ``"4 GiB"``, ``"0.9"``, ``"300/hour"`` into (number, unit).

    A multiplier glued to the number is decimal (``k``/``M``/``G``: ``8k`` = 8,000) or binary
    (``Ki``/``Mi``/``Gi``: ``8Ki`` = 8,192); the unit follows. ``"300/hour"`` and ``"300 per hour"``
    are 300 per hour (the counted unit is left to the variable). Raises :class:`UnitError` or
    ``ValueError``.

    >>> parse_quantity("8Ki token")[0], parse_quantity("300 per hour")[1].text
    (8192.0, '1/hour')
    """
    m = _NUMBER_RE.match(text)
    if not m:
        raise ValueError(f"'{text}' is not a number with an optional unit")
    unit = quantity_unit(text) or ""
    if m.group(3).startswith(","):
        raise ValueError(f"'{text.strip()}': a comma only groups thousands (1,000); write a decimal point (0.5)")
    number = float(m.group(1).replace("_", "").replace(",", ""))
    if not math.isfinite(number):
        raise ValueError(f"'{text}' is not a finite number")
    number *= _SUFFIX[m.group(2) or ""]
    return number, unit_info(unit, variable=variable)


def quantity_unit(text: str) -> str | None:
    """The unit text of ``"NUMBER UNIT"`` as :func:`parse_quantity` reads it (None: not a number)."""
    m = _NUMBER_RE.match(text)
    if not m:
        return None
    unit = _PER_RE.sub("/", " " + m.group(3)).strip()
    return "1" + unit if unit.startswith("/") else unit


def check_given_units(given: Any, label: str) -> None:
    """Refuse, at its ``file:line``, a text value of ``given`` (a scenario's or a workbook
    definition's mapping) whose unit is over the bounds every unit text meets before pint reads
    it (:func:`concur.lang.units.unit_problem`); everything else about a value is the solver's."""
    for name, value in given.items():
        unit = quantity_unit(value) if isinstance(value, str) else None
        problem = unit_problem(unit) if unit else None
        if unit and problem is not None:
            where = given.where(name) if hasattr(given, "where") else label
            shown = unit if len(unit) <= 60 else f"{unit[:40]}...{unit[-12:]}"
            raise UsageError(f"{where}: unit '{shown}' of '{name}' {problem}")


def decimal_multiplier(text: str) -> str | None:
    """The decimal multiplier (``k``, ``M``, ``G``) glued to the number in ``text``, if any."""
    m = _NUMBER_RE.match(text)
    suffix = m.group(2) if m else None
    return suffix if suffix in ("k", "K", "M", "G") else None


def dims_mul(a: Dims, b: Dims, sign: float = 1.0) -> Dims:
    """Dimension of a*b (or a/b with ``sign=-1``)."""
    out = dict(a)
    for d, e in b:
        out[d] = out.get(d, 0.0) + sign * e
    return tuple(sorted((d, e) for d, e in out.items() if abs(e) > 1e-12))


def dims_pow(a: Dims, p: float) -> Dims:
    return tuple(sorted((d, e * p) for d, e in a if abs(e * p) > 1e-12))


def format_dims(dims: Dims) -> str:
    """``(('[information]', 1), ('[token]', -1))`` -> ``'[information] / [token]'``."""
    if not dims:
        return "dimensionless"
    num = [d if e == 1 else f"{d}^{e:g}" for d, e in dims if e > 0]
    den = [d if e == -1 else f"{d}^{-e:g}" for d, e in dims if e < 0]
    text = " * ".join(num) or "1"
    if den:
        text += " / " + " / ".join(den)
    return text


def units_asked() -> set[str]:
    """Every unit text looked up since :func:`forget_units_asked` (what the shipped table must cover)."""
    return set(_SEEN)


def forget_units_asked() -> None:
    _SEEN.clear()
