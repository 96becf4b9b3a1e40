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
is still young when the pass ends, and a young collection then frees it (a fraction of a
millisecond: the young generation holds what the pass made), so nothing of it is promoted and
none of it is left for the caller's next collection to find (jax's core_test checks that a
jit leaves no garbage in cycles). What is compiled does not change; the collector's state is
restored (a caller that had it disabled keeps it disabled, and its garbage), and other
threads allocating meanwhile only see their collections put off by the pass's few tens of
milliseconds.
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
            gc.collect(0)
