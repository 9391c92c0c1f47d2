"""Safe YAML: plain data with positions, nothing constructed from tags.

The file is *composed* (ruamel.yaml builds a node graph, running no
constructor) and the nodes are converted here by hand, so no tag can ever
instantiate an object. Guarantees:

* only the core tags (str, int, float, bool, null, map, seq) are accepted;
  ``!!python/object`` and every other explicit tag is refused with file:line;
* duplicate keys are refused; non-string keys are refused;
* nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_NODES` nodes
  (alias bombs) or files over :data:`MAX_BYTES` are refused before any work;
* every mapping and list remembers where it and each of its items start, so
  later errors can say ``file:line:col``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import Location, PackError

__all__ = ["YMap", "YList", "load_yaml", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES"]

MAX_BYTES = 2_000_000
MAX_DEPTH = 24
MAX_NODES = 200_000
_CORE = "tag:yaml.org,2002:"


class YMap(dict):
    """A mapping that knows where it starts (``loc``) and where each key is (``key_loc``)."""

    loc: Location
    key_loc: dict[str, Location]

    def where(self, key: str | None = None) -> Location:
        if key is not None and key in self.key_loc:
            return self.key_loc[key]
        return self.loc


class YList(list):
    """A list that knows where it starts (``loc``) and where each item is (``item_loc``)."""

    loc: Location
    item_loc: list[Location]

    def where(self, index: int | None = None) -> Location:
        if index is not None and 0 <= index < len(self.item_loc):
            return self.item_loc[index]
        return self.loc


def _tag(node: Any) -> str:
    tag = node.tag
    return str(getattr(tag, "value", tag) or "")


def load_yaml(path: str | Path, *, text: str | None = None, label: str | None = None) -> Any:
    """Load one YAML document as plain data (YMap / YList / scalars).

    Raises :class:`PackError` with ``file:line:col`` for anything unsafe or malformed.
    """
    name = label or str(path)
    if text is None:
        try:
            size = Path(path).stat().st_size
        except OSError as exc:
            raise PackError(f"cannot read file: {exc.strerror}", where=Location(name)) from None
        if size > MAX_BYTES:
            raise PackError(f"file is {size:,} bytes; packs are limited to {MAX_BYTES:,}", where=Location(name),
                            hint="split it into several packs")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PackError(f"cannot read file as UTF-8: {exc}", where=Location(name)) from None
    elif len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise PackError(f"document is over {MAX_BYTES:,} bytes", where=Location(name))

    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt", pure=True)
    try:
        root = yaml.compose(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Location(name, mark.line + 1, mark.column + 1) if mark else Location(name)
        raise PackError(f"invalid YAML: {exc.problem or exc.context}", where=loc) from None
    except YAMLError as exc:
        raise PackError(f"invalid YAML: {exc}", where=Location(name)) from None
    if root is None:
        raise PackError("the file is empty", where=Location(name))
    counter = [0]
    return _convert(root, name, 0, counter)


def _loc(node: Any, name: str) -> Location:
    mark = node.start_mark
    return Location(name, mark.line + 1, mark.column + 1)


def _convert(node: Any, name: str, depth: int, counter: list[int]) -> Any:
    counter[0] += 1
    loc = _loc(node, name)
    if counter[0] > MAX_NODES:
        raise PackError(f"more than {MAX_NODES:,} YAML nodes (alias expansion?)", where=loc)
    if depth > MAX_DEPTH:
        raise PackError(f"nesting deeper than {MAX_DEPTH} levels", where=loc)
    tag = _tag(node)
    kind = type(node).__name__
    if not tag.startswith(_CORE):
        raise PackError(f"YAML tag '{tag}' is not allowed: packs are plain data", where=loc,
                        hint="remove the tag")
    if kind == "MappingNode":
        if tag != _CORE + "map":
            raise PackError(f"YAML tag '{tag}' is not allowed here", where=loc)
        out = YMap()
        out.loc, out.key_loc = loc, {}
        for knode, vnode in node.value:
            if _tag(knode) == _CORE + "merge":
                raise PackError("YAML merge keys ('<<') are not supported", where=_loc(knode, name))
            key = _convert(knode, name, depth + 1, counter)
            if not isinstance(key, str):
                raise PackError(f"mapping key {key!r} must be text", where=_loc(knode, name))
            if key in out:
                raise PackError(f"duplicate key '{key}' (first at line {out.key_loc[key].line})",
                                where=_loc(knode, name), hint="each key may appear once")
            out.key_loc[key] = _loc(knode, name)
            out[key] = _convert(vnode, name, depth + 1, counter)
        return out
    if kind == "SequenceNode":
        if tag != _CORE + "seq":
            raise PackError(f"YAML tag '{tag}' is not allowed here", where=loc)
        seq = YList()
        seq.loc, seq.item_loc = loc, []
        for item in node.value:
            seq.item_loc.append(_loc(item, name))
            seq.append(_convert(item, name, depth + 1, counter))
        return seq
    return _scalar(node, tag, loc)


def _scalar(node: Any, tag: str, loc: Location) -> Any:
    value = node.value
    kind = tag[len(_CORE):]
    if kind == "str":
        return value.replace("\a", "")  # ruamel leaves BEL markers in folded (>) scalars
    if kind == "null":
        return None
    if kind == "bool":
        return value.lower() in ("true", "yes", "on")
    if kind == "int":
        text = value.replace("_", "")
        try:
            return int(text, 0)
        except ValueError:
            try:
                return int(text, 10)
            except ValueError:
                raise PackError(f"invalid integer '{value}'", where=loc) from None
    if kind == "float":
        text = value.replace("_", "").lower()
        if text in (".inf", "+.inf"):
            return float("inf")
        if text == "-.inf":
            return float("-inf")
        if text == ".nan":
            return float("nan")
        try:
            return float(text)
        except ValueError:
            raise PackError(f"invalid number '{value}'", where=loc) from None
    raise PackError(f"YAML tag '{tag}' is not allowed", where=loc)
