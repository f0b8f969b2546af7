"""A registry of named plug-ins that live one per module in a package (patch targets, testbed stacks).

Each module of the package registers its plug-in when imported; the registry imports every module of
the package the first time it is asked for one, so adding a plug-in is adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, package: str, path: Iterable[str]) -> None:
        self.package = package
        self.path = list(path)
        self.items: dict[str, T] = {}
        self._loaded = False
        self.version = 0
        """Bumped by every :meth:`register`: what a caller derived from :attr:`items` is stale when it moves."""

    def register(self, name: str, item: T) -> T:
        self.items[name] = item
        self.version += 1
        return item

    def load(self) -> dict[str, T]:
        """Every plug-in, by name (the package's modules are imported once, those named ``_*`` excepted)."""
        if not self._loaded:
            self._loaded = True
            for mod in pkgutil.iter_modules(self.path):
                if not mod.name.startswith("_"):
                    importlib.import_module(f"{self.package}.{mod.name}")
        return self.items
