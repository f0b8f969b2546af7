"""The annotated model as a networkx graph, and as GraphML for other graph tools (Gephi, yEd, igraph).

Node and edge attributes are the documented model fields (docs/model-format.md): a node carries
``state``, ``kind``, ``visits``, ``time_us``, ``time_fraction``; an edge ``count`` and ``probability``.
The model-wide fields (engine, its parameters, traces, events) become graph attributes, parameters
as a JSON string since GraphML holds only scalars.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import networkx as nx

from quicsm.files import atomic_output
from quicsm.textsafe import xml

if TYPE_CHECKING:
    from quicsm.inference.annotate import AnnotatedModel

__all__ = ["to_networkx", "write_graphml"]


def to_networkx(am: AnnotatedModel) -> nx.DiGraph:
    """A ``DiGraph`` with one node per model node (by id) and one edge per taken model edge."""
    g = nx.DiGraph(
        engine=am.model.engine,
        params=json.dumps(am.model.params, sort_keys=True, default=str),
        traces=am.traces,
        events=am.events,
        total_time_us=am.total_time_us,
    )
    for n in am.nodes:
        g.add_node(n.id, state=n.state, kind=n.kind, visits=n.visits, time_us=n.time_us, time_fraction=n.time_fraction)
    for e in am.edges:
        g.add_edge(e.src, e.dst, count=e.count, probability=e.probability)
    return g


def write_graphml(am: AnnotatedModel, path: str) -> None:
    """Write the model as GraphML atomically (``-`` = stdout); a state name's characters that XML 1.0
    refuses (ESC, BEL, NUL) are written escaped, so every GraphML reader can read the file."""
    with atomic_output(path, binary=False) as fh:
        fh.write("<?xml version='1.0' encoding='utf-8'?>\n")
        fh.write(xml("\n".join(nx.generate_graphml(to_networkx(am)))) + "\n")
