"""A cheaper ``__init__`` for the frozen, slotted dataclasses the fold makes per event.

A frozen dataclass's generated ``__init__`` sets each field with
``object.__setattr__(self, "name", value)``: a global lookup, an attribute
lookup and a call through the name per field. The fold makes a dozen such
values per event (triples, terms, the step, its status, the session's
state), so :func:`quick_init` gives their classes an ``__init__`` that calls
each slot's descriptor directly, bound once when the class is made (about a
third cheaper per object; BENCHMARKS.md, "Throughput, thirteenth pass").
Everything else is the dataclass's: the parameters and their defaults,
``__eq__``, ``__hash__``, ``__repr__``, ``dataclasses.replace`` and the frozen
``__setattr__`` after construction.

Example::

    >>> from dataclasses import dataclass
    >>> @quick_init
    ... @dataclass(frozen=True, slots=True)
    ... class Point:
    ...     x: int
    ...     y: int = 0
    >>> Point(1), Point(1, y=2) == Point(1, 2)
    (Point(x=1, y=0), True)
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def quick_init(cls: T) -> T:
    """Give ``cls``, a frozen dataclass with ``slots=True``, an ``__init__`` that fills its slots directly.

    :param cls: the class, already made by ``@dataclass(frozen=True, slots=True)``.
    :returns: ``cls`` itself, with the new ``__init__`` (same parameters and defaults).
    :raises TypeError: ``cls`` is not such a class, or needs what this ``__init__`` does not do
        (``__post_init__``, ``InitVar``, ``init=False`` fields, default factories).
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__")
    all_fields = cls.__dict__["__dataclass_fields__"]
    fields = dataclasses.fields(cls)
    if len(fields) != len(all_fields):
        raise TypeError(f"{cls.__name__} has InitVar or ClassVar pseudo-fields")
    args, setters, defaults = [], {}, {}
    for f in fields:
        if not f.init or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: init=False or a default factory")
        setters[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            args.append(f.name)
        else:
            defaults[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
    body = "".join(f"        _set_{f.name}(self, {f.name})\n" for f in fields) or "        pass\n"
    source = (f"def _make({', '.join([*setters, *defaults])}):\n"
              f"    def __init__(self, {', '.join(args)}):\n{body}"
              "    return __init__\n")
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # noqa: S102 - a fixed template over the class's own field names
    init = namespace["_make"](*setters.values(), *defaults.values())
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(cls.__dict__["__init__"].__annotations__)
    type.__setattr__(cls, "__init__", init)
    return cls
