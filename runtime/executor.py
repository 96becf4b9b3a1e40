"""Running a thunk sequence (XLA:CPU's ThunkExecutor).

Sequential fast path: chains and small sequences run in order on the calling thread (no
scheduling overhead). Otherwise the executor builds a dependency graph from each thunk's
declared reads and writes (an edge wherever one thunk writes a slice another reads or
writes, in sequence order), keeps a pending-input count per node, and runs ready nodes on
the thread pool: native kernels and BLAS calls release the GIL, so independent thunks do
run in parallel. A thread inside `without_pool` (a device of a grid that has as many
devices as the pool has workers) runs its executions in order and its sliced kernels whole:
the devices already keep every core busy, and a pool they all fed would only add hand-offs.

A sequence with a thunk that keeps every core busy by itself (a GEMM in parts, a kernel in
slices over the native pool: `spans_the_pool`) runs in order too: kernels run beside it took
cores from its parts, and the pool's helpers spin for their next job after each one
(`native_pool.SPIN_S`), so kernels run side by side between two such thunks shared the
cores with the spinning helpers. Against the same programs walked in order (blocks of ten
executions taking turns, each after a rest): a training step of a 7-layer MLP with its Adam
update took 1.24x the time as a graph, strided_convnet_grad 1.25x (a 32K-element column sum
beside a GEMM of transformer_grad took 0.22 ms, 0.008 alone); admitting such a thunk only
when nothing ran, and kernels side by side only while the helpers slept, still took 1.10x
and 1.07x. Programs of kernels alone keep the graph (adam: 0.6x the time in order).

A sequence that runs in order may have a native driver (`native_drivers.py`): one compiled
function that runs all of it, calling back into Python only for what it cannot run itself.
"""

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .threads import cpu_threads
from . import native_pool
from .thunks import BufferSlice, every_thunk, observer, run_sequence

SEQUENTIAL_BELOW = 8  # thunk sequences shorter than this always run in order
# thunk sequences whose thunks (those inside loops and conditionals too) read and write less
# than this in all run in order: each hand-off to a pool worker costs 10-80 us, more than
# such thunks take side by side (jnp.linalg.solve of 16 x 16, 19 KiB: 1.04 ms as a graph,
# its three LAPACK calls and pivot loop; of 128 x 128, 1.1 MiB)
SEQUENTIAL_BYTES_BELOW = 4 << 20


class _Alone(threading.local):
    alone = False  # this thread runs its executions without the pool


_local = _Alone()


@contextmanager
def without_pool(alone: bool = True):
    """When `alone`, this thread's executions within the body run without the pool."""
    previous = _local.alone
    _local.alone = alone or previous
    try:
        yield
    finally:
        _local.alone = previous


class ThreadPool:
    """A fixed pool of worker threads (`threads.cpu_threads()` by default: one per core, or
    MLIRXLA_CPU_THREADS) that runs independent thunks side by side; a sliced kernel's slices
    and a GEMM's parts run on the native pool's threads (`native_pool.py`)."""

    _shared: "ThreadPool | None" = None
    _lock = threading.Lock()

    def __init__(self, workers: int | None = None):
        self.workers = workers or cpu_threads()
        self.executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="mlirxla")

    @classmethod
    def shared(cls) -> "ThreadPool":
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared


def overlaps(a: BufferSlice, b: BufferSlice) -> bool:
    return a.allocation == b.allocation and a.offset < b.offset + b.size and b.offset < a.offset + a.size


@dataclass
class Node:
    thunk: object
    successors: list
    pending: int


def dependency_graph(thunks: list) -> list[Node]:
    """One node per thunk; an edge i -> j (i before j) when j reads what i writes, or writes
    what i reads or writes. Every pair of slices is compared at once in numpy: the pairs
    grow with the square of the program (a compile builds the graph), and compared one by
    one in Python they were a second of a 64-layer MLP's compile."""
    reads = [tuple(t.reads) for t in thunks]
    writes = [tuple(t.writes) for t in thunks]
    written = SliceTable.of(writes)
    # [i, j]: a write of i overlaps a read of j; [j, i]: a write of j overlaps an access of i
    write_read = written.overlapping(SliceTable.of(reads), len(thunks))
    write_access = written.overlapping(SliceTable.of([r + w for r, w in zip(reads, writes)]), len(thunks))
    conflicts = np.triu(write_read | write_access.T, k=1)
    # row by row: each node's successors in order (memory reused over time makes the edges
    # grow with the square of the program, so they are split into lists in numpy too)
    sources, targets = np.nonzero(conflicts)
    successors = np.split(targets, np.cumsum(np.bincount(sources, minlength=len(thunks)))[:-1])
    pending = np.bincount(targets, minlength=len(thunks)).tolist()
    return [Node(t, row.tolist(), count) for t, row, count in zip(thunks, successors, pending)]


@dataclass(frozen=True)
class SliceTable:
    """Slices side by side: the thunk each belongs to, its allocation, its byte range."""

    owner: np.ndarray
    allocation: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def of(cls, slices_per_thunk: list) -> "SliceTable":
        rows = [(index, s.allocation, s.offset, s.offset + s.size) for index, slices in enumerate(slices_per_thunk) for s in slices]
        columns = np.array(rows, dtype=np.int64).reshape(-1, 4).T
        return cls(*columns)

    def overlapping(self, other: "SliceTable", thunks: int) -> np.ndarray:
        """[a, b]: a slice of thunk a here overlaps one of thunk b in `other` (`overlaps`)."""
        hit = ((self.allocation[:, None] == other.allocation[None, :]) & (self.start[:, None] < other.end[None, :])
               & (other.start[None, :] < self.end[:, None]))
        mine, theirs = np.nonzero(hit)
        matrix = np.zeros((thunks, thunks), dtype=bool)
        matrix[self.owner[mine], other.owner[theirs]] = True
        return matrix


def is_chain(nodes: list[Node]) -> bool:
    return all(len(n.successors) <= 1 for n in nodes) and all(n.pending <= 1 for n in nodes)


def run_thunks(thunks: list, bases: list[int], pool: ThreadPool | None, graph: list[Node] | None = None,
               driver=None) -> None:
    """Run `thunks` in order, or as `graph` (from `plan_graph`) on the pool, or by their native
    `driver` (`native_drivers.py`) when they have one; through the observer when a profile
    records."""
    if _local.alone:
        pool = graph = None
    observing = observer()
    if observing is None:
        if driver is not None:
            driver.run(bases, pool)
        else:
            run_planned(thunks, bases, pool, graph)
    else:
        observing.execution(thunks, lambda: run_planned(thunks, bases, pool, graph))


def run_planned(thunks: list, bases: list[int], pool: ThreadPool | None, graph: list[Node] | None) -> None:
    if graph is None or pool is None or pool.workers < 2:
        run_sequence(thunks, bases, pool)
    else:
        run_graph(graph, bases, pool)


def spans_the_pool(thunk) -> bool:
    """Whether `thunk`, or a thunk inside it, runs on every thread of the pool by itself."""
    parts = cpu_threads()
    return any(t.kind == "gemm" and t.in_parts and native_pool.gemm_spans_the_pool(t.m, t.n, t.k, t.batch, parts)
               or t.kind == "sliced_kernel" and t.slices > 1 for t in every_thunk([thunk]))


def plan_graph(thunks: list) -> list[Node] | None:
    """The dependency graph worth running on the pool, or None for the sequential path (short
    sequences, chains, sequences moving few bytes, and sequences with a thunk that spans the
    pool)."""
    if (len(thunks) < SEQUENTIAL_BELOW or moved_bytes(thunks) < SEQUENTIAL_BYTES_BELOW
            or any(spans_the_pool(t) for t in thunks)):
        return None
    nodes = dependency_graph(thunks)
    return None if is_chain(nodes) else nodes


def moved_bytes(thunks: list) -> int:
    """The bytes `thunks` and the thunks inside them read and write, each access counted."""
    return sum(access.size for thunk in every_thunk(thunks) for access in (*thunk.reads, *thunk.writes))


def run_graph(nodes: list[Node], bases: list[int], pool: ThreadPool) -> None:
    pending = [n.pending for n in nodes]
    lock = threading.Lock()
    finished = threading.Event()
    remaining = [len(nodes)]
    errors: list[BaseException] = []
    observing = observer()

    def run(index: int | None) -> None:
        while index is not None:
            try:
                if observing is None:
                    nodes[index].thunk.run(bases, pool)
                else:
                    observing.run(nodes[index].thunk, bases, pool)
            except BaseException as error:  # reported to the caller after the graph stops
                errors.append(error)
            ready = []
            with lock:
                remaining[0] -= 1
                for successor in nodes[index].successors:
                    pending[successor] -= 1
                    if pending[successor] == 0:
                        ready.append(successor)
                if remaining[0] == 0:
                    finished.set()
            for other in ready[1:]:
                pool.executor.submit(run, other)
            index = ready[0] if ready else None

    roots = [i for i, count in enumerate(pending) if count == 0]
    for index in roots[1:]:
        pool.executor.submit(run, index)
    run(roots[0])
    finished.wait()
    if errors:
        raise errors[0]
