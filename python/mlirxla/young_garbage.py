"""Pausing Python's cyclic garbage collector while a pass builds and drops a large graph of
Python objects, so that the graph dies young.

Priority fusion and multi-output fusion decide on graphs of the block (`fusion_graph.py`,
`multi_output_graph.py`): thousands of nodes, values and tuples that reference each other and
live exactly as long as the pass. Allocating them ran about twenty young collections per
pass on the Adam update, each of which found the graph alive and promoted it, so that it
reached the oldest generation; the interpreter then collects that generation whenever what
was promoted there grows by a quarter of what it holds, which in a process holding jax (some
200,000 objects) came every four or five compiles and cost 70 ms quiet, 160-300 ms on a
loaded machine (an average of 15-45 ms a compile, on no particular pass). Paused, the graph
is still young when the pass ends: the first young collection after it frees it, and nothing
of it is promoted. What is compiled does not change; the collector's state is restored (a
caller that had it disabled keeps it disabled), and other threads allocating meanwhile only
see their collections put off by the pass's few tens of milliseconds.
"""

import contextlib
import gc


@contextlib.contextmanager
def collection_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
