"""Fleet scale, as infrastructure: the executor (a domain package's task over batches of input files,
here or on a Dask cluster, results in order, merged in a tree) and the sources (fsspec URLs).

It knows no domain: the traces layer hands it its summary task, compare its rows task, parse its
store task. It imports no quicsm package but errors and files.
"""

from quicsm.fleet.run import Failure, map_tasks, tree_merge

__all__ = ["Failure", "map_tasks", "tree_merge"]
