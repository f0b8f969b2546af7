"""The annotated model as networkx graph and GraphML (``quicsm infer -o model.graphml``)."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
from click.testing import CliRunner

from quicsm.cli.main import cli

FIG13 = Path(__file__).parent.parent.parent / "traces" / "fig13" / "mobile"


def _infer(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    r = CliRunner().invoke(cli, ["infer", str(FIG13), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    return out


def test_graphml_holds_the_model_json(tmp_path: Path) -> None:
    model = json.loads(_infer(tmp_path, "m.json").read_text())
    g = nx.read_graphml(_infer(tmp_path, "m.graphml"), node_type=int)
    assert g.graph["engine"] == model["engine"] == "synoptic"
    assert json.loads(g.graph["params"]) == model["params"]
    assert g.graph["events"] == model["events"] > 0
    assert {n: d["state"] for n, d in g.nodes(data=True)} == {n["id"]: n["state"] for n in model["nodes"]}
    assert {n: d["visits"] for n, d in g.nodes(data=True)} == {n["id"]: n["visits"] for n in model["nodes"]}
    edges = {(e["src"], e["dst"]): (e["count"], e["probability"]) for e in model["edges"]}
    assert {(s, d): (a["count"], a["probability"]) for s, d, a in g.edges(data=True)} == edges
    assert len(edges) > len(model["nodes"])  # a real model, not an empty file


def test_to_networkx_keeps_probabilities_per_source(tmp_path: Path) -> None:
    from quicsm.inference.annotate import load_model
    from quicsm.inference.graphs import to_networkx

    am = load_model(str(_infer(tmp_path, "m.json")))
    g = to_networkx(am)
    assert g.number_of_nodes() == len(am.nodes) and g.number_of_edges() == len(am.edges)
    for node in g:
        out = [d["probability"] for _, _, d in g.out_edges(node, data=True)]
        if out:
            assert abs(sum(out) - 1.0) < 1e-6
    assert nx.has_path(g, am.model.initial, am.model.terminal)
