"""`stablehlo.async_start` / `stablehlo.async_done` (jax's `psum_start(...).done()` and the other
`*_start` collectives) as the computation they wrap, in place.

XLA makes such a pair an asynchronous call (`call-start` / `call-done`) that its scheduler may
overlap with the work between them. mlirxla needs no such marker: the thunk runtime runs
every thunk as soon as what it reads is written (`runtime/executor.py`), so the wrapped
collective already overlaps with any independent work. The start's region moves in front of
it, its operands standing for the region's arguments, and each `async_done` is replaced by
the values the region returns for its future.
"""

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import ops_named
from mlirxla.transforms.erasure import erase

START, DONE = "stablehlo.async_start", "stablehlo.async_done"


def inline_async_regions(module) -> None:
    for start in ops_named(module, START):
        inline(start)


def inline(start) -> None:
    block = start.regions[0].blocks[0]
    operations = list(block.operations)
    values = list(operations[-1].operands)
    waits = [(use.owner, values_of_future(start, index, values)) for index, result in enumerate(start.results) for use in result.uses]
    for done, _ in waits:
        if done.name != DONE or len(done.operands) != 1:
            raise MlirxlaError(f"{location_text(done.location)}: '{done.name}' reads the future of an async_start; "
                               f"only stablehlo.async_done may")
    for argument, operand in zip(block.arguments, start.operands):
        argument.replace_all_uses_with(operand)
    for inner in operations[:-1]:
        inner.move_before(start)
    for done, carried in waits:
        for result, value in zip(done.results, carried, strict=True):
            result.replace_all_uses_with(value)
        erase(done)
    erase(start)


def values_of_future(start, index: int, values: list) -> list:
    """The region's results that future `index` of `start` carries: all of them for a single
    future, one each when there are as many futures as results."""
    if len(start.results) == 1:
        return values
    if len(start.results) == len(values):
        return [values[index]]
    raise MlirxlaError(f"{location_text(start.location)}: an async_start of {len(start.results)} futures over "
                       f"{len(values)} values: which future carries which value is not known")
