"""Lists of values of different types (while's carried values, returns, tuples) are optional
slots in xhlo (`dialects/xhlo/ops.py`): 256 by default, more with `MLIRXLA_XHLO_SLOTS`. A
training loop carrying a model's parameters and optimizer state needs a few hundred."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mlirxla.dialects.xhlo.ops import DEFAULT_WIDE
from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client


def while_loop(carried: int) -> str:
    """A loop of three steps carrying a counter and `carried` tensors of different shapes,
    each step computing x * 1.5 + 1 of every one."""
    types = [f"tensor<{1 + i % 7}xf32>" for i in range(carried)]
    all_types = ", ".join(["tensor<i32>", *types])
    body = "\n".join(f"    %c{i} = stablehlo.constant dense<1.5> : {t}\n    %one{i} = stablehlo.constant dense<1.0> : {t}\n"
                     f"    %s{i} = stablehlo.multiply %b{i}, %c{i} : {t}\n    %n{i} = stablehlo.add %s{i}, %one{i} : {t}"
                     for i, t in enumerate(types))
    return f"""func.func @main({", ".join(f"%x{i}: {t}" for i, t in enumerate(types))}) -> ({", ".join(types)}) {{
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:{carried + 1} = stablehlo.while(%i = %zero, {", ".join(f"%b{i} = %x{i}" for i in range(carried))}) : {all_types}
  cond {{
    %three = stablehlo.constant dense<3> : tensor<i32>
    %more = stablehlo.compare LT, %i, %three : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %more : tensor<i1>
  }} do {{
    %step = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %step : tensor<i32>
{body}
    stablehlo.return %next, {", ".join(f"%n{i}" for i in range(carried))} : {all_types}
  }}
  return {", ".join(f"%r#{i + 1}" for i in range(carried))} : {", ".join(types)}
}}
"""


def inputs(carried: int) -> list[np.ndarray]:
    return [np.full(1 + i % 7, i, np.float32) for i in range(carried)]


def test_a_loop_carrying_two_hundred_values_runs():
    results = Client().compile(while_loop(200)).execute_numpy(inputs(200))
    for value, result in zip(inputs(200), results):
        np.testing.assert_allclose(result, ((value * 1.5 + 1) * 1.5 + 1) * 1.5 + 1)


def test_more_values_than_slots_name_the_setting_that_raises_the_limit():
    with pytest.raises(MlirxlaError, match=f"exceed the {DEFAULT_WIDE} slots of 'values' \\(MLIRXLA_XHLO_SLOTS=301 or more"):
        Client().compile(while_loop(300))


def test_the_setting_raises_the_limit():
    script = f"""import sys
sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_wide_value_lists import inputs, while_loop
from mlirxla.runtime.client import Client
print(Client().compile(while_loop(300)).execute_numpy(inputs(300))[299][0])
"""
    environment = {**os.environ, "MLIRXLA_XHLO_SLOTS": "320"}
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) == ((299 * 1.5 + 1) * 1.5 + 1) * 1.5 + 1


def test_a_concatenate_of_more_inputs_than_slots_joins_them_in_groups():
    """jax's `scan(..., unroll=True)` of 300 steps stacks its 300 outputs in one concatenate:
    the front door joins them in groups of at most the slots (algsimp does not flatten them
    back past it); numpy's concatenate."""
    count = DEFAULT_WIDE + 44
    arguments = ", ".join(f"%x{i}: tensor<2x{1 + i % 3}xf32>" for i in range(count))
    total = sum(1 + i % 3 for i in range(count))
    text = f"""func.func @main({arguments}) -> tensor<2x{total}xf32> {{
  %0 = stablehlo.concatenate {", ".join(f"%x{i}" for i in range(count))}, dim = 1 : ({", ".join(f"tensor<2x{1 + i % 3}xf32>" for i in range(count))}) -> tensor<2x{total}xf32>
  return %0 : tensor<2x{total}xf32>
}}"""
    parts = [np.full((2, 1 + i % 3), i, np.float32) for i in range(count)]
    (joined,) = Client().compile(text).execute_numpy(parts)
    np.testing.assert_array_equal(joined, np.concatenate(parts, axis=1))
