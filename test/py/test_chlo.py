"""chlo compositions (frontdoor/chlo_rules.py) against jaxlib's chlo-legalize-to-stablehlo,
both evaluated by the StableHLO reference interpreter."""

import os

import numpy as np
import pytest

from .conftest import JAX_PROGRAMS

pytestmark = pytest.mark.jax
pytest.importorskip("jax")

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
TOLERANCE = {"f32": 1e-5, "f64": 1e-12, "f16": 1e-3, "bf16": 1e-2}
EDGES = [0.0, -0.0, 1e-5, 0.3, 0.5, -0.7, 0.999, 1.0, -1.0, 2.5, -3.7, 7.9, 8.1, 10.0, -12.5, 30.0, 100.0,
         np.inf, -np.inf, np.nan]
UNARY = ["erf", "erfc", "erf_inv", "lgamma", "digamma", "tan", "sinh", "cosh", "asin", "acos", "atan",
         "asinh", "acosh", "atanh", "bessel_i1e"]
PREDICATES = ["is_inf", "is_pos_inf", "is_neg_inf"]


def dtype_of(name):
    if name == "bf16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return ml_dtypes.bfloat16
    return DTYPES[name]


def module_text(op, in_types, out_types, attrs=""):
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(in_types))
    operands = ", ".join(f"%a{i}" for i in range(len(in_types)))
    outs = ", ".join(out_types)
    result = "%0" if len(out_types) == 1 else f"%0:{len(out_types)}"
    returned = "%0" if len(out_types) == 1 else ", ".join(f"%0#{i}" for i in range(len(out_types)))
    return (
        f"func.func @main({args}) -> ({outs}) {{\n"
        f'  {result} = "chlo.{op}"({operands}) {attrs} : ({", ".join(in_types)}) -> ({outs})\n'
        f"  return {returned} : {outs}\n}}\n"
    )


def run_both(text, args):
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.runtime import literals, oracle, reference

    data = text.encode()
    expected = oracle.evaluate(data, "t.mlir", "main", args)
    context = new_context()
    imported = frontdoor.import_bytes(data, "t.mlir", context)
    with context:
        outputs = reference.execute(imported.module, args).outputs
        actual = [literals.to_numpy(v) for v in outputs]
    return actual, expected


def assert_close(actual, expected, rtol, atol=0.0):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    assert np.array_equal(np.isnan(a), np.isnan(e))


@pytest.mark.parametrize("type_name", ["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("op", UNARY)
def test_unary(op, type_name):
    dtype = dtype_of(type_name)
    values = np.array(EDGES + list(np.linspace(-0.99, 0.99, 7)) + list(np.linspace(-6, 6, 13) + 0.1), dtype)
    tensor = f"tensor<{values.size}x{type_name}>"
    actual, expected = run_both(module_text(op, [tensor], [tensor]), [values])
    assert_close(actual[0], expected[0], TOLERANCE[type_name])


@pytest.mark.parametrize("type_name", ["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("op", PREDICATES)
def test_inf_predicates(op, type_name):
    values = np.array([0.0, -1.0, 3.0, np.inf, -np.inf, np.nan], dtype_of(type_name))
    actual, expected = run_both(module_text(op, [f"tensor<6x{type_name}>"], ["tensor<6xi1>"]), [values])
    np.testing.assert_array_equal(actual[0], expected[0])
    np.testing.assert_array_equal(actual[0], {"is_inf": np.isinf(values.astype(np.float64)),
                                              "is_pos_inf": values.astype(np.float64) == np.inf,
                                              "is_neg_inf": values.astype(np.float64) == -np.inf}[op])


def test_known_values():
    import math

    values = np.array([0.5, 2.0, -1.5, 3.25], np.float64)
    actual, _ = run_both(module_text("erf", ["tensor<4xf64>"], ["tensor<4xf64>"]), [values])
    np.testing.assert_allclose(actual[0], [math.erf(v) for v in values], rtol=1e-14)
    actual, _ = run_both(module_text("lgamma", ["tensor<4xf64>"], ["tensor<4xf64>"]), [values])
    np.testing.assert_allclose(actual[0], [math.lgamma(v) for v in values], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("type_name", ["f32", "f64", "f16", "bf16"])
def test_next_after(type_name):
    dtype = dtype_of(type_name)
    x = np.array([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, 1, 0, 3, 1e-3], dtype)
    y = np.array([1, -1, 2, 0, 0, np.inf, 1, np.nan, -0.0, 3, -5], dtype)
    tensor = f"tensor<{x.size}x{type_name}>"
    actual, expected = run_both(module_text("next_after", [tensor, tensor], [tensor]), [x, y])
    assert actual[0].tobytes() == expected[0].tobytes()
    if type_name in ("f32", "f64"):
        np.testing.assert_array_equal(actual[0], np.nextafter(x, y))


@pytest.mark.parametrize("type_name", ["f32", "f64", "f16"])
def test_zeta(type_name):
    dtype = dtype_of(type_name)
    x = np.array([2, 3, 1, 0.5, 4, 2, 2, 3, 1.5, 6, np.nan, 2, 2, -1, 20], dtype)
    q = np.array([1, 2, 0.5, 1, 3, -2, -1.5, -3, 0, 10, 1, np.inf, 1e-3, 2, 1.5], dtype)
    tensor = f"tensor<{x.size}x{type_name}>"
    actual, expected = run_both(module_text("zeta", [tensor, tensor], [tensor]), [x, q])
    assert_close(actual[0], expected[0], TOLERANCE[type_name])
    if type_name == "f64":
        np.testing.assert_allclose(actual[0][0], np.pi**2 / 6, rtol=1e-14)


@pytest.mark.parametrize("type_name", ["f32", "f64", "f16"])
def test_polygamma(type_name):
    dtype = dtype_of(type_name)
    n = np.array([0, 1, 2, 3, 1, 0, 4, 1.5, -1, 2, 1, 0, 5, 1], dtype)
    x = np.array([1, 2, 0.5, 1, -1.5, -2.5, 3, 2, 2, 10, np.nan, 0, 0.25, 1e3], dtype)
    tensor = f"tensor<{n.size}x{type_name}>"
    actual, expected = run_both(module_text("polygamma", [tensor, tensor], [tensor]), [n, x])
    assert_close(actual[0], expected[0], TOLERANCE[type_name])


@pytest.mark.parametrize("element", ["f32", "i32"])
def test_top_k(element):
    if element == "f32":
        values = np.array([[3, 1, np.nan, 1, -np.inf, 7], [0, -0.0, 5, 5, 2, -1]], np.float32)
    else:
        values = np.array([[3, 1, 9, 1, -4, 7], [0, 0, 5, 5, 2, -1]], np.int32)
    text = module_text(
        "top_k", [f"tensor<2x6x{element}>"], [f"tensor<2x3x{element}>", "tensor<2x3xi32>"], "{k = 3 : i64}"
    )
    actual, expected = run_both(text, [values])
    for a, e in zip(actual, expected):
        assert a.tobytes() == e.tobytes()


BROADCAST_CASES = [
    ("broadcast_add", ["tensor<2x5xf32>", "tensor<5xf32>"], "tensor<2x5xf32>", "{broadcast_dimensions = array<i64: 1>}"),
    ("broadcast_multiply", ["tensor<5xf32>", "tensor<2x5xf32>"], "tensor<2x5xf32>", ""),
    ("broadcast_maximum", ["tensor<2x5xf32>", "tensor<2x1xf32>"], "tensor<2x5xf32>", ""),
    ("broadcast_atan2", ["tensor<2x5xf32>", "tensor<f32>"], "tensor<2x5xf32>", ""),
    ("broadcast_next_after", ["tensor<2x5xf32>", "tensor<5xf32>"], "tensor<2x5xf32>", ""),
    ("broadcast_compare", ["tensor<2x5xf32>", "tensor<f32>"], "tensor<2x5xi1>",
     "{comparison_direction = #chlo<comparison_direction LT>, compare_type = #chlo<comparison_type FLOAT>}"),
]


@pytest.mark.parametrize("op,inputs,output,attrs", BROADCAST_CASES)
def test_broadcast(op, inputs, output, attrs):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(d) for d in t[7:-1].split("x")[:-1]]).astype(np.float32) for t in inputs]
    actual, expected = run_both(module_text(op, inputs, [output], attrs), args)
    assert actual[0].tobytes() == expected[0].tobytes()


def test_gelu_sample():
    from mlirxla.tools.run import main

    assert main([os.path.join(JAX_PROGRAMS, "02_scan_while_cond_gelu.stablehlo.mlir"), "--check"]) == 0
