"""Complex and special-function numerics, held to closed forms and to XLA:CPU.

The cpu backend computes real expm1 and log1p, and complex expm1, log1p, tan and tanh, as XLA's
elemental IR emitter does, and complex log, sqrt and rsqrt after StableHLO's reference algorithms
(backends/cpu/elemental_math.py); the chlo inverse functions on complex operands are StableHLO's
decompositions (frontdoor/chlo_rules.py). The points are where naive formulas fail: tiny and huge
parts, near branch cuts, near -1 for log1p, near the unit circle for log.
"""

import numpy as np
import pytest

TINY = [1e-15 + 1e-15j, -1e-30 + 1e-30j, 4.5e-8 - 4.5e-8j, 1e-20 + 2j, 2 + 1e-20j, -1e-8 + 1e-4j]
HUGE = [7.7e30 + 1e-15j, -7.7e30 - 2j, 1e20 + 1e20j, 3e38 + 3e38j]
NEAR_BRANCH_CUTS = [1.5 + 1e-20j, -1.5 + 1e-20j, 1 + 1e-7j, 0.9999999 + 0j, 1e-20 + 1.5j, 1e-20 - 1.5j, -2 + 1e-30j]
SIGNED_ZERO_CUTS = [1.5 + 0j, complex(1.5, -0.0), complex(-0.0, -1.5), complex(-0.0, 1.5)]
# (XLA's complex log1p forms max(|1 + a|, |b|) - 1, which cancels where |b| is small and larger
# than |1 + a|: it is 27 ulp off at -1 + 1e-3i, and so are we.)
NEAR_MINUS_ONE = [-0.9999999 + 0j, -0.5 + 0.5j, -1 + 0.7j, -1.3 + 0.4j]
MODERATE = [0.5 + 0.5j, -2 - 2j, 3 + 4j, 50 + 1j, 1 + 50j, -20 - 0.3j]
POINTS = TINY + HUGE + NEAR_BRANCH_CUTS + NEAR_MINUS_ONE + MODERATE
EXTREMES_F64 = [1e-300 + 1e-300j, 1e300 + 1e-300j, 1.7e308 + 1.7e308j, -1 + 1e-150j]

REAL_POINTS = [1e-30, -1e-30, 1e-8, -1e-8, 1e-5, -1e-5, 0.3, -0.3, 0.41, -0.41, 0.5, -0.5, 0.51, -0.51,
               -0.9999, 0.999, -0.999, 1.0, 1 + 1e-3, 1.5, 2.0, 10.0, 80.0, -50.0, 1e10]
INVERSE_FUNCTIONS = {"asin": np.arcsin, "acos": np.arccos, "asinh": np.arcsinh, "acosh": np.arccosh,
                     "atan": np.arctan, "atanh": np.arctanh}
TYPE_NAMES = {np.float16: "f16", np.float32: "f32", np.float64: "f64", np.complex64: "complex<f32>",
              np.complex128: "complex<f64>"}
INTEGERS = {2: np.int16, 4: np.int32, 8: np.int64}


def ulps(actual, expected, flush_subnormals=True) -> np.ndarray:
    """|actual - expected| in units in the last place, the parts of complex values apart; values
    below the smallest normal count as 0 unless told otherwise (XLA:CPU flushes them); equal
    infinities and nans are 0."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.dtype.kind == "c":
        return np.maximum(ulps(actual.real, expected.real, flush_subnormals),
                          ulps(actual.imag, expected.imag, flush_subnormals))
    info = np.finfo(actual.dtype)
    integer = INTEGERS[actual.dtype.itemsize]

    def ordered(values):
        flushed = np.where(np.abs(values) < info.tiny, np.zeros_like(values), values) if flush_subnormals else values
        bits = flushed.view(integer).astype(np.int64)
        return np.where(bits < 0, np.iinfo(integer).min - bits, bits)

    expected = expected.astype(actual.dtype)
    distance = np.abs(ordered(actual) - ordered(expected)).astype(np.float64)
    both_nan = np.isnan(actual) & np.isnan(expected)
    same_infinity = np.isinf(actual) & (actual == expected)
    return np.where(both_nan | same_infinity, 0.0, distance)


def assert_within(actual, expected, points, max_ulps, what, flush_subnormals=True):
    distance = ulps(actual, expected, flush_subnormals)
    worst = int(np.argmax(distance))
    assert distance[worst] <= max_ulps, (
        f"{what}: {distance[worst]:.0f} ulp at {points[worst]!r}: {actual[worst]!r}, expected {expected[worst]!r}")


def unary_module(ops: list[str], dtype, size: int) -> str:
    """A module applying each op (`dialect.name`) to its one argument, one result per op."""
    tensor = f"tensor<{size}x{TYPE_NAMES[dtype]}>"
    body = "".join(f'  %{i} = "{op}"(%x) : ({tensor}) -> {tensor}\n' for i, op in enumerate(ops))
    results = ", ".join(f"%{i}" for i in range(len(ops)))
    types = ", ".join([tensor] * len(ops))
    return f"func.func @main(%x: {tensor}) -> ({types}) {{\n{body}  return {results} : {types}\n}}\n"


def real_points(dtype) -> np.ndarray:
    """REAL_POINTS that `dtype` can hold."""
    return np.array([p for p in REAL_POINTS if abs(p) <= float(np.finfo(dtype).max)], dtype)


def on_cpu_backend(ops: list[str], x: np.ndarray) -> dict[str, np.ndarray]:
    """The ops' results with gradual underflow: the points' tiny parts include denormals,
    which kernels flushing as XLA:CPU runs would read as zero (`denormal_flushing.py`)."""
    from mlirxla.runtime.client import Client, CompileOptions

    outputs = Client().compile(unary_module(ops, x.dtype.type, x.size), CompileOptions(flush_denormals=False)).execute_numpy([x])
    return dict(zip(ops, outputs))


# ---------------------------------------------------------------- the cpu backend, closed forms


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_real_expm1_and_log1p_near_zero_and_beyond(dtype):
    x = real_points(dtype)
    got = on_cpu_backend(["stablehlo.exponential_minus_one", "stablehlo.log_plus_one"], x)
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        assert_within(got["stablehlo.exponential_minus_one"], np.expm1(wide), x, 2, "expm1")
        assert_within(got["stablehlo.log_plus_one"], np.log1p(wide), x, 2, "log1p")


def test_f64_expm1_and_log1p_keep_tiny_arguments():
    x = np.array([1e-300, -1e-300, 1e-10, -1e-10, 1e-5, 0.2, -0.2, 0.5, 2.0, 1e100])
    got = on_cpu_backend(["stablehlo.exponential_minus_one", "stablehlo.log_plus_one"], x)
    wide = x.astype(np.longdouble)
    with np.errstate(over="ignore"):
        assert_within(got["stablehlo.exponential_minus_one"], np.expm1(wide), x, 4, "expm1")
    assert_within(got["stablehlo.log_plus_one"], np.log1p(wide), x, 4, "log1p")


def complex_expm1(z):
    """e^z - 1 = (expm1(a) cos b - 2 sin^2(b/2)) + i e^a sin b, in complex128."""
    a, b = z.real, z.imag
    return (np.expm1(a) * np.cos(b) - 2 * np.sin(b / 2) ** 2) + 1j * np.exp(a) * np.sin(b)


def complex_log1p(z):
    """log(1 + z) in complex128 for complex64 z: |1 + z|^2 - 1 = a (2 + a) + b^2 holds every
    digit there, except near -1, where 1 + a is exact and hypot is."""
    a, b = z.real, z.imag
    near_minus_one = np.abs(1 + z) < 0.5
    with np.errstate(invalid="ignore", divide="ignore"):
        magnitude = np.where(near_minus_one, np.log(np.hypot(1 + a, b)), 0.5 * np.log1p(a * (2 + a) + b * b))
    return magnitude + 1j * np.arctan2(b, 1 + a)


def test_complex_expm1_log1p_tan_tanh_match_closed_forms():
    z = np.array(TINY + NEAR_BRANCH_CUTS + NEAR_MINUS_ONE + MODERATE + HUGE, np.complex64)
    ops = ["stablehlo.exponential_minus_one", "stablehlo.log_plus_one", "stablehlo.tan", "stablehlo.tanh"]
    got = on_cpu_backend(ops, z)
    wide = z.astype(np.complex128)
    # beyond, e^a overflows (the closed form gives nan) or, below, vanishes next to expm1(a) + 1,
    # which is how XLA's algorithm forms it (its imaginary part is 0 there)
    finite = (wide.real < 80) & (wide.real > -10)
    assert_within(got[ops[0]][finite], complex_expm1(wide[finite]), z[finite], 2, "expm1")
    assert_within(got[ops[1]], complex_log1p(wide), z, 2, "log1p")
    assert_within(got[ops[2]], np.tan(wide), z, 2, "tan")
    assert_within(got[ops[3]], np.tanh(wide), z, 2, "tanh")


def test_complex_expm1_keeps_both_tiny_parts():
    """The MLIR lowering gave expm1(1e-8 + 1e-8j) a real part of -1e-16 (e^a cos b - 1)."""
    z = np.array([1e-8 + 1e-8j, 1e-15 - 1e-15j], np.complex64)
    got = on_cpu_backend(["stablehlo.exponential_minus_one"], z)["stablehlo.exponential_minus_one"]
    assert_within(got, complex_expm1(z.astype(np.complex128)), z, 1, "expm1")


LOG_SQRT_OPS = ["stablehlo.log", "stablehlo.sqrt", "stablehlo.rsqrt"]
NEAR_UNIT_CIRCLE = [0.6 + 0.8j, -0.8 + 0.6j, 0.800164491382204 + 0.5997508684571149j, -0.09697375 + 0.99528694j,
                    -1 + 1e-7j, 1e-20 - 0.99999994j]
NEGATIVE_REALS = [-1.5 + 0j, complex(-1.5, -0.0), -1e-30 + 0j, -3e38 + 0j, -1.5 - 1e-20j, -1e-20 - 1e-40j]


def stablehlo_math_failures(dtype) -> list[complex]:
    """Where StableHLO's math accuracy tests (stablehlo/tests/math) failed log and sqrt: |z|
    overflowed (log(-max - max i) was inf), log|z| of subnormal parts lost its log(2)/2, and
    the polar sqrt left a small part the rounding error of cos(pi/2) (sqrt(-1.5 - 9.5e-20i) had
    a real part of -5e-8; sqrt(max - 9.5e-20i) an imaginary part of 0)."""
    info = np.finfo(dtype)
    largest, least = float(info.max), float(info.smallest_subnormal)
    small = 9.5e-20 if dtype == np.complex64 else 1.3e-154
    return [complex(-largest, -largest), complex(largest, largest), complex(np.nextafter(-largest, 0), largest),
            complex(least, -least), complex(-least, least), complex(-1.5, -small), complex(-1.5, -least),
            complex(-largest, -1.5), complex(-largest, small), complex(largest, -small), complex(-small, -least),
            complex(-1.5, 0.0), complex(-largest, 0.0), complex(-least, 0.0)]


def log_sqrt_rsqrt_references(z: np.ndarray) -> dict[str, np.ndarray]:
    """log, sqrt and 1/sqrt from numpy in wider precision: complex128 for complex64, x87 extended
    for complex128 (its range holds f64's extremes and subnormals)."""
    wide = z.astype(np.complex128 if z.dtype == np.complex64 else np.clongdouble)
    root = np.sqrt(wide)
    return {"stablehlo.log": np.log(wide), "stablehlo.sqrt": root, "stablehlo.rsqrt": 1 / root}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_log_sqrt_rsqrt_match_numpy(dtype):
    """Huge, tiny, subnormal, negative-real and near-unit-circle points, the StableHLO math
    suite's failures among them, subnormal results counted (sqrt(max - 9.5e-20i) has one)."""
    if dtype == np.complex128 and np.finfo(np.longdouble).nmant < 63:
        pytest.skip("the complex128 references need x87 extended precision")
    points = (stablehlo_math_failures(dtype) + TINY + HUGE + NEAR_BRANCH_CUTS + NEAR_UNIT_CIRCLE + NEGATIVE_REALS
              + MODERATE)
    if dtype == np.complex128:
        points += EXTREMES_F64
    z = np.array(points, dtype)
    got = on_cpu_backend(LOG_SQRT_OPS, z)
    expected = log_sqrt_rsqrt_references(z)
    for op, max_ulps in zip(LOG_SQRT_OPS, (2, 2, 4)):
        assert_within(got[op], expected[op], z, max_ulps, op, flush_subnormals=False)


SPECIAL_PARTS = [0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan]


def assert_zero_and_infinity_signs_match(actual, expected, points, what):
    for part in ("real", "imag"):
        got, want = getattr(actual, part), getattr(expected, part)
        signed = (want == 0) | np.isinf(want)
        wrong = np.nonzero(signed & (np.signbit(got) != np.signbit(want)))[0]
        if wrong.size:
            first = wrong[0]
            raise AssertionError(f"{what}: the sign of the {part} part at {points[first]!r}: {actual[first]!r}, "
                                 f"expected {expected[first]!r}")


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_log_and_sqrt_special_values_are_c99s(dtype):
    """Signed zeros, infinities and nans give C99's values, as numpy (and the StableHLO
    interpreter's std::complex) do: sqrt(x - 0i) = conj(sqrt(x + 0i)), sqrt(-inf + yi) = +0 + inf i,
    sqrt(x + inf i) = inf + inf i even for nan x, log(+-0) = -inf, log(nan + inf i) = inf + nan i."""
    z = np.array([complex(a, b) for a in SPECIAL_PARTS for b in SPECIAL_PARTS], dtype)
    got = on_cpu_backend(["stablehlo.log", "stablehlo.sqrt"], z)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = {"stablehlo.log": np.log(z), "stablehlo.sqrt": np.sqrt(z)}
    for op, want in expected.items():
        assert_within(got[op], want, z, 1, op)
        assert_zero_and_infinity_signs_match(got[op], want, z, op)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_rsqrt_at_zero_and_infinity(dtype):
    """1/sqrt(z): inf + nan i at 0 (as XLA gives), and conj(sqrt(z)) / |z| = +0 -+ 0i, the sign
    of y flipped, where z is infinite."""
    inf, nan = np.inf, np.nan
    z = np.array([0j, complex(-0.0, -0.0), complex(inf, 1.5), complex(-inf, 1.5), complex(1.5, -inf),
                  complex(nan, inf), complex(-inf, -0.0)], dtype)
    expected = np.array([complex(inf, nan), complex(inf, nan), complex(0.0, -0.0), complex(0.0, -0.0),
                         complex(0.0, 0.0), complex(0.0, -0.0), complex(0.0, 0.0)], dtype)
    got = on_cpu_backend(["stablehlo.rsqrt"], z)["stablehlo.rsqrt"]
    assert_within(got, expected, z, 0, "rsqrt")
    assert_zero_and_infinity_signs_match(got, expected, z, "rsqrt")


def on_reference_interpreter(ops: list[str], x: np.ndarray) -> dict[str, np.ndarray]:
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.runtime import literals, reference

    context = new_context()
    module = frontdoor.import_bytes(unary_module(ops, x.dtype.type, x.size).encode(), "t.mlir", context).module
    with context:
        return dict(zip(ops, (literals.to_numpy(v) for v in reference.execute(module, [x]).outputs)))


def test_complex_inverse_functions_match_numpy():
    z = np.array(POINTS, np.complex64)
    ops = [f"chlo.{name}" for name in INVERSE_FUNCTIONS]
    got = on_reference_interpreter(ops, z)
    for name, reference in INVERSE_FUNCTIONS.items():
        assert_within(got[f"chlo.{name}"], reference(z.astype(np.complex128)), z, 2, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["asin", "atanh"])
def test_complex_inverse_functions_on_the_cpu_backend_match_numpy(name):
    """Hull et al.'s kernel (asin; acos, asinh and acosh only change signs) and the log1p form
    of atanh (atan rotates it), compiled: their log1p is the backend's."""
    z = np.array(POINTS, np.complex64)
    got = on_cpu_backend([f"chlo.{name}"], z)[f"chlo.{name}"]
    assert_within(got, INVERSE_FUNCTIONS[name](z.astype(np.complex128)), z, 2, name)


# ---------------------------------------------------------------- jaxlib and XLA:CPU


@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


def on_device(jax, device, function, x):
    with jax.default_device(device):
        return np.asarray(jax.jit(function)(x))


def complex_points(dtype):
    return np.array(POINTS + SIGNED_ZERO_CUTS + (EXTREMES_F64 if dtype == np.complex128 else []), dtype)


@pytest.mark.jax
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_chlo_compositions_match_jaxlib_legalization(jax, dtype):
    """Ours and jaxlib's chlo legalization, both on the reference interpreter."""
    from mlirxla.runtime import oracle

    z = complex_points(dtype)
    ops = [f"chlo.{name}" for name in INVERSE_FUNCTIONS] + ["chlo.square", "chlo.sinh", "chlo.cosh"]
    expected = oracle.evaluate(unary_module(ops, dtype, z.size).encode(), "t.mlir", "main", [z])
    actual = on_reference_interpreter(ops, z)
    for op, want in zip(ops, expected):
        assert_within(actual[op], want, z, 1, op)


def assert_matches_xla_cpu(jax, name, x, max_ulps):
    function = getattr(jax.numpy, name)
    ours = on_device(jax, jax.devices("mlirxla")[0], function, x)
    xla = on_device(jax, jax.devices("cpu")[0], function, x)
    assert_within(ours, xla, x, max_ulps, name)


# (jax hands complex asin and atanh to the plugin as jaxlib's decompositions, whose log1p is
# the backend's; acos, asinh, acosh and atan are the same algorithms with other signs)
@pytest.mark.jax
@pytest.mark.parametrize("name", ["expm1", "log1p", "tan", "tanh", "sin", "arcsin", "arctanh"])
def test_complex64_functions_match_xla_cpu(jax, name):
    assert_matches_xla_cpu(jax, name, complex_points(np.complex64), 2)


@pytest.mark.jax
@pytest.mark.parametrize("name", ["expm1", "log1p", "tan", "tanh", "sin"])
def test_complex128_functions_match_xla_cpu(jax, name):
    assert_matches_xla_cpu(jax, name, complex_points(np.complex128), 4)


@pytest.mark.jax
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", ["expm1", "log1p", "arccosh", "arctanh"])
def test_real_functions_match_xla_cpu(jax, name, dtype):
    """expm1, log1p and the functions built on them (acosh in f32 and log1p in f16 were
    millions of ulps off where log(1 + x) cancels)."""
    assert_matches_xla_cpu(jax, name, real_points(dtype), 4 if dtype == np.float64 else 2)


@pytest.mark.jax
def test_log1p_near_zero_within_one_ulp(jax):
    """JAX's LazyConstantTest.testLog1pNearOne: log1p(1e-5), real and complex, within 1 ulp."""
    with jax.default_device(jax.devices("mlirxla")[0]):
        real = np.asarray(jax.lax.log1p(np.float32(1e-5)))
        complex_ = np.asarray(jax.lax.log1p(np.complex64(1e-5)))
    expected = np.log1p(np.float32(1e-5))
    np.testing.assert_array_almost_equal_nulp(expected, real)
    np.testing.assert_array_almost_equal_nulp(expected.astype(np.complex64), complex_)
