"""Fleet scale, as infrastructure: the executor (a domain package's task over batches of input files,
here or on a Dask cluster, results in order, merged in a tree) and the sources (fsspec URLs).

It knows no domain: the traces layer hands it its summary task, compare its rows task, parse its
store task. It imports no quicsm package but errors and files.

The executor's names load on first use: every command imports :mod:`quicsm.fleet.malloc` at start-up,
and that must not import the executor.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Failure", "map_tasks", "tree_merge"]

if TYPE_CHECKING:
    from quicsm.fleet.run import Failure, map_tasks, tree_merge


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("quicsm.fleet.run"), name)
    raise AttributeError(f"module 'quicsm.fleet' has no attribute {name!r}")
