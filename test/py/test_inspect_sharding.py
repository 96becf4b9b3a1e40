"""`jax.debug.inspect_array_sharding` inside a program over several devices
(`transforms/inspect_sharding.py`): the callback gets the sharding jax's cpu backend gives it,
found by the id the backend config carries; a config naming no live object is refused in one
line, not followed."""

import struct

import pytest

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client

from .conftest import printed_by_jax_on

INSPECTED = """func.func @main(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {{
  %y = stablehlo.sine %x : tensor<8x4xf32>
  %z = stablehlo.custom_call @InspectSharding(%y) {{backend_config = "{config}", has_side_effect = true}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %z : tensor<8x4xf32>
}}"""


def escaped(data: bytes) -> str:
    return "".join(f"\\{byte:02X}" for byte in data)


def test_a_callback_not_alive_here_is_refused():
    dangling = escaped(struct.pack("<QQ", 0x1234, 0x10))  # no object lives at 0x10
    with pytest.raises(MlirxlaError, match=r"<text>:3:8: custom_call @InspectSharding: its callback is not alive in "
                                           r"this process"):
        Client().compile(INSPECTED.format(config=dangling))


def test_a_config_that_is_not_jaxlibs_struct_is_refused():
    with pytest.raises(MlirxlaError, match=r"custom_call @InspectSharding: backend config of 3 bytes"):
        Client().compile(INSPECTED.format(config="abc"))


INSPECT_IN_JAX = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((4, 2), ("x", "y"))
seen = []
@jax.jit
def f(x):
    y = jnp.sin(x)
    jax.debug.inspect_array_sharding(y, callback=lambda s: seen.append(str(s.spec)))
    jax.debug.inspect_array_sharding(y.sum(axis=1), callback=lambda s: seen.append(str(s.spec)))
    return y * 2
x = jax.device_put(jnp.arange(32.0).reshape(8, 4), NamedSharding(mesh, P("x", "y")))
out = f(x)
print(seen, out.sharding.spec)
"""


@pytest.mark.jax
@pytest.mark.parametrize("platform", ["cpu", "mlirxla"])
def test_the_callback_gets_the_propagated_sharding_as_on_cpu(platform):
    pytest.importorskip("jax")
    assert printed_by_jax_on(platform, 8, INSPECT_IN_JAX)[-1] == "[\"P('x', 'y')\", \"P('x',)\"] P('x', 'y')"
