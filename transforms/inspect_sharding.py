"""xhlo-inspect-sharding: hand `jax.debug.inspect_array_sharding`'s callback the sharding
propagation chose for the value, then drop the call (XLA runs such a callback in its SPMD
partitioner, through the InspectSharding custom-call partitioner jaxlib registers).

jax lowers `inspect_array_sharding(x, callback=...)` in a program over several devices to
`custom_call @InspectSharding(x)`, returning x, whose backend config holds the bytes of a C
struct `{call, data}` (jaxlib's `encode_inspect_sharding_callback`): `call` is jaxlib's
function that turns a serialized `xla::OpSharding` into an `HloSharding` and calls the Python
object at `data`, jax's `_hlo_sharding_callback`, which jax keeps alive with the lowering.

Here the Python object is called directly with the `HloSharding` parsed by jaxlib from the
sharding of the call's result (propagation gives it its operand's, an identity), so no C
pointer is ever called. The object is found among the live objects of this process whose
id (in CPython, their address) is `data`: a module lowered in another process, or saved and
read back, names no live object and is refused in one line instead of following a dangling
pointer. What the callback raises ends the compile with its first line. Runs after
propagation, before the partitioner; a program of one partition has no such call (jax calls
the callback at lowering). Changed: any call dropped.
"""

import gc
import struct
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.errors import MlirxlaError, first_line, location_text
from mlirxla.ir_queries import ops_where
from mlirxla.mlir import ir

from .erasure import erase, live_ops
from .pass_base import ModulePass

TARGET = "InspectSharding"
SHARDING = "xhlo.sharding"
CALLBACK_STRUCT = struct.Struct("<QQ")  # {void (*call)(void *, Args *); void *data}


def is_inspection(op: ir.Operation) -> bool:
    return op.name == "xhlo.custom_call" and ir.StringAttr(op.attributes["call_target_name"]).value == TARGET


@dataclass(frozen=True)
class InspectShardingPass(ModulePass):
    """Calls each inspection's callback with its value's sharding and drops the call."""

    name: ClassVar[str] = "xhlo-inspect-sharding"
    summary: ClassVar[str] = "call jax's inspect_array_sharding callbacks with the propagated shardings"

    def run(self, module: ir.Module) -> bool:
        calls = list(live_ops(ops_where(module, is_inspection)))
        for call in calls:
            callback = live_callback(call)
            report(call, callback)
            call.results[0].replace_all_uses_with(call.operands[0])
            erase(call)
        return bool(calls)


def live_callback(call: ir.Operation):
    """The Python object the call's backend config points at, when it is alive here."""
    where = location_text(call.location)
    config = ir.StringAttr(call.attributes["backend_config"]).value_bytes if "backend_config" in call.attributes else b""
    if len(config) != CALLBACK_STRUCT.size:
        raise MlirxlaError(f"custom_call @{TARGET}: backend config of {len(config)} bytes, jaxlib's callback struct "
                           f"has {CALLBACK_STRUCT.size}", where)
    _, data = CALLBACK_STRUCT.unpack(config)
    found = next((obj for obj in gc.get_objects() if id(obj) == data and callable(obj)), None)
    if found is None:
        raise MlirxlaError(f"custom_call @{TARGET}: its callback is not alive in this process (the program was "
                           "lowered by jax in another process, or saved and read back)", where)
    return found


def report(call: ir.Operation, callback) -> None:
    try:
        from jax._src.lib import xla_client
    except ImportError:
        raise MlirxlaError(f"custom_call @{TARGET}: calling jax's callback needs jax", location_text(call.location)) from None
    text = ir.StringAttr(call.attributes[SHARDING]).value if SHARDING in call.attributes else "{replicated}"
    try:
        callback(xla_client.HloSharding.from_string(text))
    except Exception as error:  # the user's callback: its failure ends the compile, named
        raise MlirxlaError(f"custom_call @{TARGET}: the callback raised {type(error).__name__}: {first_line(str(error))}",
                           location_text(call.location)) from None
