"""Fleet scale: each input file reduced to a small summary (distinct state sequences with counts and
per-state times), summaries merged in input order, optionally on a Dask cluster, inputs from fsspec URLs.

Memory follows the number of distinct behaviours, not the number of connections, and the merged summary
is the same whether files were reduced in this process or on Dask workers.
"""

from quicsm.fleet.run import summarize_inputs
from quicsm.fleet.summary import SequenceStats, Summary, summarize_traces

__all__ = ["SequenceStats", "Summary", "summarize_traces", "summarize_inputs"]
