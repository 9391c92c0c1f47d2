"""Safe YAML: plain data with positions, built from the parser's event stream under hard limits.

Pack files are attacker-controlled input (``concur check`` runs on other teams' pull
requests), so loading one must be bounded in time and memory *before* any work that grows
with the input. The design:

* **The file.** :func:`read_source` opens it without blocking and reads at most
  :data:`MAX_BYTES` + 1 bytes from a *regular* file (:mod:`concur.readfile`): FIFOs,
  devices (``/dev/zero``), directories and oversized files are refused at once.
* **The events, not a tree.** ruamel.yaml's parser yields events (scalar, start/end of a
  mapping or list, alias) one at a time. This module builds the result from them itself,
  counting as it goes: the :data:`MAX_NODES` + 1-th node or the :data:`MAX_DEPTH` + 1-th
  level of nesting stops the parse on the spot, so a 1,000-deep ``[[[`` or a million-item
  flow list costs a few thousand events, not a tree built and then measured. The loop is
  iterative (an explicit stack), so nesting can never raise ``RecursionError``. An alias
  reuses the anchored value (no copy) but counts its nodes and depth again, so an alias bomb
  hits the same limits.
* **Nothing constructed from tags.** No YAML constructor runs: only the core tags (str, int,
  float, bool, null, map, seq) are accepted, ``!!python/object`` and every other explicit
  tag, and merge keys (``<<``), are refused with file:line:col.
* Duplicate and non-text keys and multi-document streams are refused; every mapping and list
  remembers where it and each item starts, so later errors can say ``file:line:col``.

The limits are 4-7x the largest shipped file (the model catalog: 64 kB, some 3,000 nodes, 4
levels deep; the deepest pack has 5). The pure-Python parser handles some 20,000 events (or
300 kB of the slowest scalar syntax) a second on a small CI machine, so the worst file under
the limits is refused or loaded in about a second; libyaml, used when installed
(:func:`uses_libyaml`), is some 15x faster.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from ..compiled import table
from ..errors import Location, PackError
from ..readfile import FileRefused, FileTooLarge, read_regular

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "YList", "YMap", "load_yaml", "read_source", "uses_libyaml"]

MAX_BYTES = 256 * 1024
MAX_DEPTH = 24
MAX_NODES = 20_000
_CORE = "tag:yaml.org,2002:"
_SCALAR_KINDS = ("str", "int", "float", "bool", "null")


class YMap(dict[str, Any]):
    """A mapping that knows where it starts (``loc``) and where each key is (``key_loc``)."""

    loc: Location
    key_loc: dict[str, Location]

    def where(self, key: str | None = None) -> Location:
        if key is not None and key in self.key_loc:
            return self.key_loc[key]
        return self.loc


class YList(list[Any]):
    """A list that knows where it starts (``loc``) and where each item is (``item_loc``)."""

    loc: Location
    item_loc: list[Location]

    def where(self, index: int | None = None) -> Location:
        if index is not None and 0 <= index < len(self.item_loc):
            return self.item_loc[index]
        return self.loc


def read_source(path: str | Path, *, label: str | None = None) -> bytes:
    """The bytes of a pack, catalog or scenario file; :class:`PackError` (no contents quoted)
    when it is not a regular file of at most :data:`MAX_BYTES` bytes."""
    name = label or str(path)
    try:
        return read_regular(path, MAX_BYTES)
    except FileTooLarge:
        raise _too_large(name) from None
    except FileRefused as exc:
        raise PackError(exc.reason, where=Location(name)) from None


def _too_large(name: str) -> PackError:
    return PackError(
        f"file is over {MAX_BYTES:,} bytes: packs, catalogs and scenarios are limited to that",
        where=Location(name),
        hint="split it into several packs",
    )


def load_yaml(path: str | Path, *, text: str | bytes | None = None, label: str | None = None) -> Any:
    """Load one YAML document as plain data (YMap / YList / scalars).

    ``text`` (the file's content, already read) is used instead of reading ``path``.
    Raises :class:`PackError` with ``file:line:col`` for anything unsafe, malformed or over a limit.
    """
    name = label or str(path)
    raw = read_source(path, label=name) if text is None else text
    if isinstance(raw, bytes):
        if len(raw) > MAX_BYTES:
            raise _too_large(name)
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise PackError(f"is not UTF-8 text (byte 0x{raw[exc.start]:02x})", where=Location(name, line)) from None
    elif len(raw) > MAX_BYTES:
        raise _too_large(name)
    else:
        text = raw
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    fast = uses_libyaml(text)
    key = (name, digest, fast, MAX_DEPTH, MAX_NODES)  # what decides the refusal
    refused: PackError | None = table("yaml refused", 16).get(key)
    if refused is not None:  # concur check loads a pack again to collect its problems: not the YAML
        raise refused.with_traceback(None)
    try:
        return _parse(name, text, fast, key)
    except PackError as exc:
        table("yaml refused", 16).put(key, exc)
        raise


# Process tables (concur.compiled):
# "yaml refused": texts refused in this process, by (label, digest, parser, limits): the same text is
# refused again without parsing it again (up to 20,000 nodes of a hostile file, three times over in
# ``concur check``). At most 16 are kept.
# "yaml events": the event streams of texts parsed whole in this process, by the same key:
# ``concur check`` loads a pack that fails validation again to collect every problem, and the pure
# parser's scan (some 20,000 events a second) is what costs, so the second load replays the events
# into a fresh tree (never a shared one: callers own what they get). At most 4 are kept.


def _recorded(events: Any, into: list[Any]) -> Any:
    """``events`` as they are consumed, each also appended to ``into``."""
    for event in events:
        into.append(event)
        yield event


def _parse(name: str, text: str, fast: bool, key: tuple[str, bytes, bool, int, int] | None = None) -> Any:
    """``text`` as plain data, parsed by libyaml when ``fast`` (:func:`uses_libyaml`)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError
    from ruamel.yaml.reader import ReaderError

    yaml = YAML(typ="safe", pure=not fast)
    replay = table("yaml events", 4).get(key) if key is not None else None
    events = yaml.parse(text) if replay is None else None
    seen: list[Any] = []
    try:
        root = _Builder(name, yaml.resolver).run(iter(replay) if replay is not None else _recorded(events, seen))
        if key is not None and replay is None:
            table("yaml events", 4).put(key, seen)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Location(name, mark.line + 1, mark.column + 1) if mark else Location(name)
        raise PackError(f"invalid YAML: {exc.problem or exc.context}", where=loc) from None
    except ReaderError as exc:
        at = exc.position if isinstance(exc.position, int) else 0
        raise PackError(
            f"invalid YAML: {exc.reason} (character #x{_ord(exc.character):04x})",
            where=Location(name, text.count("\n", 0, at) + 1),
        ) from None
    except YAMLError as exc:
        raise PackError(f"invalid YAML: {type(exc).__name__}", where=Location(name)) from None
    finally:
        if events is not None:
            events.close()  # a parse stopped at a limit ends here, not in a later garbage collection
    if root is None:
        raise PackError("the file is empty", where=Location(name))
    return root


def uses_libyaml(text: str) -> bool:
    """Whether to parse ``text`` with libyaml (``ruamel.yaml.clib``, some 15x the pure parser's
    speed, which matters on a cold ``concur check``) rather than ruamel's pure-Python parser.

    Both yield the same event classes with the same 0-based marks, and this module builds the
    data either way, under the same limits. libyaml is used when it is installed (it is a
    dependency wherever a wheel exists) and ``text`` has no NEL, LINE or PARAGRAPH SEPARATOR:
    libyaml counts those as line breaks, editors do not, so their line numbers would disagree.
    libyaml accepts a tab where YAML 1.2 allows one as a separator (``key:<TAB>value``), which
    the pure parser refuses. ``CONCUR_PURE_YAML=1`` forces the pure parser.
    """
    from ruamel.yaml import main

    if getattr(main, "CParser", None) is None or os.environ.get("CONCUR_PURE_YAML"):
        return False
    if "\x85" in text or "\u2028" in text or "\u2029" in text:
        return False
    try:
        text.encode("utf-8")  # a lone surrogate cannot reach libyaml
    except UnicodeEncodeError:
        return False
    return True


def _ord(character: Any) -> int:
    if isinstance(character, bytes):
        return character[0] if character else 0
    return ord(character) if isinstance(character, str) and len(character) == 1 else 0


class _Frame:
    """A mapping or list being filled; for a mapping, the key waiting for its value."""

    __slots__ = ("anchor", "height", "key", "key_loc", "nodes", "value")

    def __init__(self, value: YMap | YList, anchor: str | None, nodes: int) -> None:
        self.value = value
        self.anchor = anchor
        self.nodes = nodes  # node count when this collection started (its size = count - nodes)
        self.height = 0  # deepest nesting below it
        self.key: str | None = None
        self.key_loc: Location | None = None


class _Builder:
    """Turns one document's events into YMap/YList/scalars, enforcing every limit as it goes."""

    def __init__(self, name: str, resolver: Any) -> None:
        self.name = name
        self.resolver = resolver
        self.count = 0
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int, int]] = {}  # anchor -> (value, nodes, height)
        self.root: Any = None
        self.done = False

    def loc(self, event: Any) -> Location:
        mark = event.start_mark
        return Location(self.name, mark.line + 1, mark.column + 1) if mark is not None else Location(self.name)

    def run(self, events: Any) -> Any:
        from ruamel.yaml.events import (
            AliasEvent,
            DocumentStartEvent,
            MappingEndEvent,
            MappingStartEvent,
            ScalarEvent,
            SequenceEndEvent,
            SequenceStartEvent,
        )

        for event in events:
            if isinstance(event, ScalarEvent):
                self.grow(event, 1, 0)
                value = self.scalar(event)
                self.remember(event.anchor, value, 1, 0)
                self.add(value, event)
            elif isinstance(event, (MappingStartEvent, SequenceStartEvent)):
                self.grow(event, 1, 1)
                mapping = isinstance(event, MappingStartEvent)
                self.check_tag(event, "map" if mapping else "seq")
                container: YMap | YList = YMap() if mapping else YList()
                if isinstance(container, YMap):
                    container.loc, container.key_loc = self.loc(event), {}
                else:
                    container.loc, container.item_loc = self.loc(event), []
                self.stack.append(_Frame(container, event.anchor, self.count))
            elif isinstance(event, (MappingEndEvent, SequenceEndEvent)):
                frame = self.stack.pop()
                if self.stack:
                    self.stack[-1].height = max(self.stack[-1].height, frame.height + 1)
                self.remember(frame.anchor, frame.value, self.count - frame.nodes + 1, frame.height + 1)
                self.add(frame.value, event, frame.value.loc)
            elif isinstance(event, AliasEvent):
                if event.anchor not in self.anchors:
                    raise PackError("alias to an undefined anchor", where=self.loc(event))
                value, nodes, height = self.anchors[event.anchor]
                self.grow(event, nodes, height)
                self.add(value, event)
            elif isinstance(event, DocumentStartEvent) and self.done:
                raise PackError("only one YAML document is allowed per file", where=self.loc(event))
        return self.root

    def grow(self, event: Any, nodes: int, height: int) -> None:
        """Count ``nodes`` more nodes reaching ``height`` levels below the current depth."""
        self.count += nodes
        if self.count > MAX_NODES:
            raise PackError(
                f"more than {MAX_NODES:,} YAML nodes (alias expansion?)",
                where=self.loc(event),
                hint="split it into several packs",
            )
        if len(self.stack) + height > MAX_DEPTH:
            raise PackError(f"nesting deeper than {MAX_DEPTH} levels", where=self.loc(event))
        if self.stack:
            self.stack[-1].height = max(self.stack[-1].height, height)

    def remember(self, anchor: str | None, value: Any, nodes: int, height: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, nodes, height)

    def add(self, value: Any, event: Any, loc: Location | None = None) -> None:
        """Put a finished value into the collection being filled (or make it the document)."""
        loc = loc or self.loc(event)
        if not self.stack:
            self.root, self.done = value, True
            return
        frame = self.stack[-1]
        if isinstance(frame.value, YList):
            frame.value.item_loc.append(loc)
            frame.value.append(value)
            return
        mapping = frame.value
        if frame.key_loc is None:  # this value is a key
            if not isinstance(value, str):
                raise PackError("a mapping key must be text", where=loc)
            if value in mapping:
                raise PackError(
                    f"duplicate key '{value}' (first at line {mapping.key_loc[value].line})",
                    where=loc,
                    hint="each key may appear once",
                )
            frame.key, frame.key_loc = value, loc
            return
        assert frame.key is not None
        mapping.key_loc[frame.key] = frame.key_loc
        mapping[frame.key] = value
        frame.key, frame.key_loc = None, None

    def check_tag(self, event: Any, default: str) -> None:
        """A collection may carry no tag, the non-specific ``!`` or its own core tag."""
        tag = _explicit_tag(event)
        if tag is not None and tag != _CORE + default:
            raise PackError(
                f"YAML tag '{tag}' is not allowed: packs are plain data", where=self.loc(event), hint="remove the tag"
            )

    def scalar(self, event: Any) -> Any:
        from ruamel.yaml.nodes import ScalarNode

        tag = _explicit_tag(event) or str(self.resolver.resolve(ScalarNode, event.value, event.implicit))
        kind = tag[len(_CORE) :] if tag.startswith(_CORE) else ""
        if kind == "merge":
            raise PackError("YAML merge keys ('<<') are not supported", where=self.loc(event))
        if kind not in _SCALAR_KINDS:
            raise PackError(
                f"YAML tag '{tag}' is not allowed: packs are plain data", where=self.loc(event), hint="remove the tag"
            )
        return _scalar(event.value, kind, self.loc(event))


def _explicit_tag(event: Any) -> str | None:
    tag = None if event.ctag is None else str(event.ctag)
    return None if tag in (None, "!") else tag


def _scalar(value: str, kind: str, loc: Location) -> Any:
    if kind == "str":
        return value
    if kind == "null":
        return None
    if kind == "bool":
        return value.lower() in ("true", "yes", "on")
    if kind == "int":
        text = value.replace("_", "")
        try:
            number = int(text, 0)
        except ValueError:
            try:
                number = int(text, 10)
            except ValueError:  # also more digits than Python converts (sys.get_int_max_str_digits)
                raise PackError("invalid integer", where=loc) from None
        if abs(number) > 1e308:
            raise PackError("integer is too large for a number", where=loc)
        return number
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
            raise PackError("invalid number", where=loc) from None
    raise PackError(f"YAML tag '{_CORE}{kind}' is not allowed", where=loc)
