"""The fusion graph after fusion, as the executable runs it: one node per thunk (kernels,
library calls, copies; a loop's or a conditional's thunks in a cluster of their own), the
program's parameters and outputs, and the values flowing between them as edges. Laid out by
Graphviz (`dot`, through the `graphviz` package) as SVG for the page; each thunk's node has
the id `thunk-N` and the classes `thunk <category>`, which the page's script binds to.
"""

import subprocess

from mlirxla.errors import MlirxlaError

from .thunk_facts import Flow, ThunkFacts
from .units import human_bytes, human_seconds

STYLES = {
    "kernel": {"shape": "box", "style": "rounded,filled", "fillcolor": "#dbe9f6"},
    "library": {"shape": "box3d", "style": "filled", "fillcolor": "#fde2c4"},
    "copy": {"shape": "cds", "style": "filled", "fillcolor": "#e6e6e6"},
    "io": {"shape": "ellipse", "style": "filled", "fillcolor": "#ffffff", "fontsize": "10"},
}
WHY_NO_LAYOUT = "the graph needs Graphviz: the `graphviz` Python package and Debian's `graphviz` (scripts/setup report)"
# Graphviz's layout time grows much faster than the graph: random thunk graphs of 100, 200,
# 300 and 473 nodes took 0.6, 4, 10 and 42 s, and a GPT training step's 473 thunks (long
# edges from its parameters to every layer) ran past ten minutes, with every compile of a
# jax program dumping its report. Larger graphs are left out, and any layout is cut off.
LAYOUT_THUNKS = 200
LAYOUT_TIMEOUT_S = 30.0


def node_id(node: int | str) -> str:
    return f"thunk-{node}" if isinstance(node, int) else node.replace(" ", "-")


def node_label(fact: ThunkFacts) -> str:
    lines = [fact.name, f"{fact.kind.replace('_', ' ')}: {fact.routine}" if fact.routine else fact.kind]
    if fact.shape:
        lines.append(fact.shape if len(fact.shape) <= 48 else fact.shape[:45] + "...")
    lines.append(f"in {human_bytes(fact.bytes_in)}, out {human_bytes(fact.bytes_out)}")
    if fact.estimate_s is not None:
        lines.append(f"estimated {human_seconds(fact.estimate_s)}")
    return "\n".join(lines)


def dot_source(graphviz, facts: list[ThunkFacts], flows: list[Flow]):
    """The graphviz.Digraph of the thunks and flows (`graphviz`: the package, optional)."""
    graph = graphviz.Digraph("fusion_graph", graph_attr={"rankdir": "TB", "fontname": "Helvetica", "nodesep": "0.25",
                                                         "ranksep": "0.35", "bgcolor": "transparent"},
                             node_attr={"fontname": "Helvetica", "fontsize": "11", "margin": "0.12,0.05"},
                             edge_attr={"fontname": "Helvetica", "fontsize": "9", "color": "#555555"})
    clusters = {fact.index: graphviz.Digraph(f"cluster_{fact.index}") for fact in facts if fact.category == "control"}
    for index, cluster in clusters.items():
        kind, name = facts[index].kind, facts[index].name
        cluster.attr(label=kind if name == kind else f"{kind} {name}", style="rounded,dashed", color="#888888")
    for fact in facts:
        if fact.category == "control":
            continue
        owner = clusters.get(fact.parent, graph)
        owner.node(node_id(fact.index), node_label(fact), id=node_id(fact.index), tooltip=fact.name,
                   **{"class": f"thunk {fact.category}"}, **STYLES[fact.category])
    for index in sorted(clusters, reverse=True):  # inner clusters first, into their parents
        parent = facts[index].parent
        (clusters[parent] if parent in clusters else graph).subgraph(clusters[index])
    endpoints = {end for flow in flows for end in (flow.producer, flow.consumer) if isinstance(end, str)}
    for end in sorted(endpoints):
        graph.node(node_id(end), end, id=node_id(end), **{"class": "io"}, **STYLES["io"])
    for number, flow in enumerate(flows):
        size = human_bytes(flow.size)
        graph.edge(node_id(flow.producer), node_id(flow.consumer), label=f"{flow.label}\n{size}" if flow.label else size,
                   id=f"flow-{number}", tooltip=f"{flow.label}: {size}" if flow.label else size)
    return graph


def render_svg(facts: list[ThunkFacts], flows: list[Flow]) -> str:
    """The laid-out graph as an inline <svg> element; MlirxlaError, saying why, when Graphviz
    is missing, the graph is too large for it, or its layout runs out of time."""
    thunks = sum(fact.category != "control" for fact in facts)
    if thunks > LAYOUT_THUNKS:
        raise MlirxlaError(f"the graph of {thunks} thunks is left out: Graphviz lays out at most {LAYOUT_THUNKS} in a "
                           "report (its time grows much faster than the graph); the thunk sequence dump lists them all")
    try:
        import graphviz
    except ImportError:
        raise MlirxlaError(WHY_NO_LAYOUT) from None
    source = dot_source(graphviz, facts, flows).source
    try:
        laid_out = subprocess.run(["dot", "-Kdot", "-Tsvg"], input=source, capture_output=True, encoding="utf-8",
                                  timeout=LAYOUT_TIMEOUT_S, check=True)
    except FileNotFoundError:
        raise MlirxlaError(WHY_NO_LAYOUT) from None
    except subprocess.TimeoutExpired:
        raise MlirxlaError(f"the graph of {thunks} thunks is left out: Graphviz's layout took over "
                           f"{LAYOUT_TIMEOUT_S:g} s") from None
    except subprocess.CalledProcessError as error:
        reason = (error.stderr or "").strip().splitlines() or [f"exit status {error.returncode}"]
        raise MlirxlaError(f"Graphviz could not lay out the graph: {reason[0]}") from None
    return laid_out.stdout[laid_out.stdout.index("<svg"):]
