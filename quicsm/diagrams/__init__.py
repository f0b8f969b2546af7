"""State diagrams of annotated models, in the look of the IMC'17 figures, laid out by Graphviz.

``to_dot(model)`` gives DOT text (jinja2 templates in ``templates/``); ``write_diagram(model, "m.svg")``
draws it with ``dot`` into SVG/PNG/PDF; ``render_side_by_side`` puts several models next to each other
(the paper's Fig. 13); an :class:`Overlay` draws external values (a comparison's deltas) over a model.
"""

from quicsm.diagrams.dot import RANKDIRS, DotOptions, legend_facts, render_side_by_side, to_dot
from quicsm.diagrams.overlay import Delta, EdgeKey, NodeKey, Overlay
from quicsm.diagrams.render import FORMATS, find_dot, output_format, run_dot, write_diagram, write_picture
from quicsm.diagrams.style import FAMILY_STYLES, FamilyStyle, family_style

__all__ = [
    "DotOptions",
    "RANKDIRS",
    "to_dot",
    "render_side_by_side",
    "legend_facts",
    "Delta",
    "Overlay",
    "NodeKey",
    "EdgeKey",
    "FORMATS",
    "find_dot",
    "output_format",
    "run_dot",
    "write_picture",
    "write_diagram",
    "FAMILY_STYLES",
    "FamilyStyle",
    "family_style",
]
