"""Frozen records: dataclasses whose methods are written once here, not compiled per class.

``@dataclass(frozen=True)`` writes the source of six methods for every class (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``) and compiles it when
the module is imported: about 1 ms for a class of a dozen fields, and the packs, catalogs and
plans are two dozen such classes that every ``concur solve`` imports -- a third of a warm start.

:func:`record` makes the same kind of class without compiling anything: a real dataclass (its
fields come from :func:`dataclasses.dataclass` with every generated method turned off, so
``dataclasses.fields``, ``replace`` and ``asdict`` work), frozen, compared and hashed by its
fields, printed like a dataclass, constructed positionally or by keyword with the declared
defaults and ``field(default_factory=...)``. The shared ``__init__`` loops over the fields, so a
record costs a microsecond or two more to build than a dataclass: records are for classes with
tens or hundreds of instances in a run (packs, variables, plans); expression nodes and trace
steps, built by the thousand, stay plain dataclasses.

Non-goals: ``order``, ``slots``, ``kw_only``, ``InitVar``, ``__post_init__`` (a class that needs
one of these is a dataclass).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

__all__ = ["record"]

T = TypeVar("T")
_MISSING = dataclasses.MISSING


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """Decorator: ``cls`` as a frozen dataclass, built without compiling code (see the module docstring)."""
    for method in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__post_init__"):
        if method in cls.__dict__:
            raise TypeError(f"{cls.__name__} defines {method}: make it a dataclass")
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)  # the fields, nothing generated
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = tuple(f.name for f in fields)
    defaults: dict[str, tuple[bool, Any]] = {}  # name -> (is a factory, default or factory)
    for f in fields:
        if f.default_factory is not _MISSING:
            defaults[f.name] = (True, f.default_factory)
        elif f.default is not _MISSING:
            defaults[f.name] = (False, f.default)
    shown = tuple(f.name for f in fields if f.repr)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))

    count = len(names)
    setter = object.__setattr__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if not kwargs and len(args) == count:  # every field by position
            for name, value in zip(names, args):
                setter(self, name, value)
            return
        if not args and len(kwargs) == count and all(name in kwargs for name in names):  # every field by name
            for name in names:
                setter(self, name, kwargs[name])
            return
        if len(args) > count:
            raise TypeError(f"{cls.__name__}() takes {count} positional arguments but {len(args)} were given")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name in values:
                raise TypeError(f"{cls.__name__}() got multiple values for argument '{name}'")
            if name not in names:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument '{name}'")
            values[name] = value
        for name in names:
            if name in values:
                setter(self, name, values[name])
            elif name in defaults:
                factory, default = defaults[name]
                setter(self, name, default() if factory else default)
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: '{name}'")

    def __repr__(self: Any) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, n) for n in compared) == tuple(getattr(other, n) for n in compared)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in hashed))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field '{name}'")

    def __delattr__(self: Any, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field '{name}'")

    methods: dict[str, Callable[..., Any]] = {
        "__init__": __init__,
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
    }
    for name, fn in methods.items():
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, fn)
    return cls
