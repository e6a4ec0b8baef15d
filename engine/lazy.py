"""Package names that load on first use (PEP 562), for :mod:`engine` and :mod:`projections`.

A package's ``__init__`` lists where each public name lives; :func:`lazy_names`
returns the module ``__getattr__`` that imports the home module the first time a
name is read and stores the value in the package, so later reads skip the hook.
This module imports nothing but :mod:`importlib`: ``engine/__init__`` runs before
every engine import, and the ``convlog`` command must start fast.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing before the handler
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_names(package: str, namespace: dict[str, Any],
               homes: Mapping[str, tuple[str, ...]]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: each name of ``homes[module]`` is read from
    ``module`` on first use and then kept in ``namespace`` (the package's globals)."""
    home = {name: module for module, names in homes.items() for name in names}

    def lookup(name: str) -> object:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    return lookup


__all__ = ["lazy_names"]
