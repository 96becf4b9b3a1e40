"""A heap simulator packing buffers with known live ranges into one slab (XLA's HeapSimulator
with GlobalDecreasingSizeBestFitHeap).

Each buffer has a size and an inclusive live range [start, end] in schedule time. Buffers are
placed one at a time, in a global order, at the smallest free gap (best fit) among the buffers
already placed whose live ranges overlap its own; when no gap fits, at the lowest offset above
them. Two orders are tried, as XLA does: spatial (decreasing size, then longer live range,
then earlier start) and temporal (earlier start, then decreasing size); the smaller slab wins.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    start: int
    end: int  # inclusive

    def overlaps(self, other: "Buffer") -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass
class HeapResult:
    order: str
    size: int = 0
    offsets: dict[str, int] = field(default_factory=dict)


def align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def spatial_key(buffer: Buffer):
    return (-buffer.size, -(buffer.end - buffer.start), buffer.start, buffer.name)


def temporal_key(buffer: Buffer):
    return (buffer.start, -buffer.size, buffer.end, buffer.name)


ORDERS = {"spatial": spatial_key, "temporal": temporal_key}


def best_fit(buffers: list[Buffer], order: str = "spatial", alignment: int = 1) -> HeapResult:
    """Place `buffers` in `order`; each goes to the tightest gap free over its live range."""
    result = HeapResult(order)
    placed: list[tuple[Buffer, int]] = []
    for buffer in sorted(buffers, key=ORDERS[order]):
        if buffer.size == 0:
            result.offsets[buffer.name] = 0
            continue
        busy = sorted((offset, offset + other.size) for other, offset in placed if other.overlaps(buffer))
        best = None  # (gap size, offset)
        cursor = 0
        for low, high in busy:
            gap_start = align_up(cursor, alignment)
            if low - gap_start >= buffer.size and (best is None or low - gap_start < best[0]):
                best = (low - gap_start, gap_start)
            cursor = max(cursor, high)
        offset = best[1] if best is not None else align_up(cursor, alignment)
        placed.append((buffer, offset))
        result.offsets[buffer.name] = offset
        result.size = max(result.size, offset + buffer.size)
    return result


def pack(buffers: list[Buffer], alignment: int = 1) -> tuple[HeapResult, dict[str, int]]:
    """Run every order and keep the smallest slab: (chosen result, {order: slab size})."""
    results = {name: best_fit(buffers, name, alignment) for name in ORDERS}
    chosen = min(results.values(), key=lambda r: (r.size, list(ORDERS).index(r.order)))
    return chosen, {name: r.size for name, r in results.items()}


def peak_live(buffers: list[Buffer]) -> int:
    """The most bytes live at one time: a lower bound on any packing."""
    times = sorted({b.start for b in buffers})
    return max((sum(b.size for b in buffers if b.start <= t <= b.end) for t in times), default=0)
