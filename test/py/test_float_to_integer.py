"""Float to integer converts saturate as XLA's do (`backends/cpu/elemental_math.py`): NaN is 0,
+-inf and values beyond the integer's range its largest or smallest value, negative values 0
for unsigned integers; in range, the value truncated toward zero. LLVM's plain conversion
gave INT_MIN for NaN and wrapped bits for -2.7 to uint8 (254 where jax's cpu gives 0)."""

import ml_dtypes
import numpy as np
import pytest

from mlirxla.runtime.client import Client

VALUES = [np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, 1e20, -0.5, 255.9, 127.5, -128.9, 65535.5, -1e-30]
INTEGERS = {"i8": np.int8, "ui8": np.uint8, "i16": np.int16, "ui16": np.uint16, "i32": np.int32, "ui32": np.uint32,
            "i64": np.int64, "ui64": np.uint64}
FLOATS = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def saturated(values: np.ndarray, integer) -> np.ndarray:
    info = np.iinfo(integer)
    wide = values.astype(np.float64)
    result = [0 if np.isnan(v) else info.max if v >= info.max + 1.0 else info.min if v < info.min else int(np.trunc(v))
              for v in wide]
    return np.array(result, dtype=integer)


@pytest.mark.parametrize("source", list(FLOATS))
@pytest.mark.parametrize("target", list(INTEGERS))
def test_float_to_integer_saturates(source, target):
    n = len(VALUES)
    text = f"""func.func @main(%x: tensor<{n}x{source}>) -> tensor<{n}x{target}> {{
  %0 = stablehlo.convert %x : (tensor<{n}x{source}>) -> tensor<{n}x{target}>
  return %0 : tensor<{n}x{target}>
}}
"""
    with np.errstate(over="ignore"):
        x = np.array(VALUES, np.float64).astype(FLOATS[source])
    np.testing.assert_array_equal(Client().compile(text).execute_numpy([x])[0], saturated(x, INTEGERS[target]))
