"""numpy arrays <-> MLIR dense elements attributes (XLA's Literal), for every element type.

numpy's own dtypes go through the buffer protocol; bf16, the float8/6/4 family (ml_dtypes),
complex, and narrow integers (i2, i4, ui2, ui4: ml_dtypes' int2, int4, uint2, uint4, one byte
per element with the value in its low bits, as the kernels store them and jax hands them) through the
attribute's text: its elements (decimal, hex bit patterns, `(re,im)` pairs, true/false) or
its hex blob. This build's bindings cannot read those through the buffer protocol, and
cannot even hand back a complex dense attribute (its downcast raises), which
`install_dense_caster` repairs once per process.
"""

import json
import re

import ml_dtypes
import numpy as np

from mlirxla.mlir import ir

from . import memory

_FLOAT_TYPES = {
    "bf16": ml_dtypes.bfloat16,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz,
    "f8E3M4": ml_dtypes.float8_e3m4,
    "f8E4M3": ml_dtypes.float8_e4m3,
    "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
    "f6E2M3FN": ml_dtypes.float6_e2m3fn,
    "f6E3M2FN": ml_dtypes.float6_e3m2fn,
    "f4E2M1FN": ml_dtypes.float4_e2m1fn,
}
# bit widths of the types whose numpy dtype is wider than the MLIR type
_FLOAT_BITS = {"f6E2M3FN": 6, "f6E3M2FN": 6, "f4E2M1FN": 4}
_COMPLEX_TYPES = {"complex<f32>": np.complex64, "complex<f64>": np.complex128}
_UNSIGNED = {2: ml_dtypes.uint2, 4: ml_dtypes.uint4, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SIGNED = {2: ml_dtypes.int2, 4: ml_dtypes.int4, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
# dtypes the bindings' buffer protocol reads and writes exactly
_BUFFER_KINDS = "biuf"


def install_dense_caster() -> None:
    """Make the bindings hand back complex (and other unusual) dense elements attributes.

    The registered downcast of dense int-or-float elements attributes raises "Can't cast
    unknown element type" for complex elements, so that no API can return one (parse,
    op.attributes, eval_module). This caster keeps the usual DenseIntElementsAttr /
    DenseFPElementsAttr results and falls back to DenseElementsAttr. It picks the class by the
    element type, as those classes' own checks do (integers and index; floats): trying each
    class in turn raised an error for every float constant read, whose message prints the
    whole attribute, a fifth of a kernel's lowering for one holding a large constant.
    """
    global _CASTER_INSTALLED
    if _CASTER_INSTALLED:
        return
    with ir.Context():
        typeid = ir.Attribute.parse("dense<[1.0]> : tensor<1xf32>").typeid

    def cast(attr):
        element = ir.ShapedType(attr.type).element_type
        if isinstance(element, (ir.IntegerType, ir.IndexType)):
            return ir.DenseIntElementsAttr(attr)
        if isinstance(element, ir.FloatType):
            return ir.DenseFPElementsAttr(attr)
        return ir.DenseElementsAttr(attr)

    ir.register_type_caster(typeid, replace=True)(cast)
    _CASTER_INSTALLED = True


_CASTER_INSTALLED = False


def numpy_dtype(element: ir.Type):
    """The numpy dtype that holds `element`, or None for types numpy cannot hold exactly."""
    text = str(element)
    if text in _FLOAT_TYPES:
        return np.dtype(_FLOAT_TYPES[text])
    if text in _COMPLEX_TYPES:
        return np.dtype(_COMPLEX_TYPES[text])
    if isinstance(element, ir.IntegerType):
        integer = ir.IntegerType(element)
        if integer.width == 1:
            return np.dtype(np.bool_)
        table = _UNSIGNED if integer.is_unsigned else _SIGNED
        return np.dtype(table[integer.width]) if integer.width in table else None
    if isinstance(element, ir.IndexType):
        return np.dtype(np.int64)
    return None


def storage_dtype(element: ir.Type):
    """The numpy dtype that holds `element`'s values."""
    dtype = numpy_dtype(element)
    if dtype is not None:
        return dtype
    raise TypeError(f"no numpy dtype for element type {element}")


def _integer_info(element: ir.Type) -> tuple[int, bool] | None:
    if isinstance(element, ir.IntegerType):
        integer = ir.IntegerType(element)
        return integer.width, not integer.is_unsigned
    if isinstance(element, ir.IndexType):
        return 64, True
    return None


def to_numpy(attr: ir.Attribute) -> np.ndarray:
    """The values of a dense elements attribute as a numpy array of `storage_dtype`."""
    shaped = ir.ShapedType(attr.type)
    element, shape = shaped.element_type, list(shaped.shape)
    dtype = storage_dtype(element)
    memory.require(memory.tensor_bytes(shape, dtype.itemsize), f"the value {element}[{','.join(map(str, shape))}]")
    exact = numpy_dtype(element)
    if exact is not None and exact.kind in _BUFFER_KINDS and exact.itemsize * 8 == _bits(element, exact):
        try:
            if ir.DenseElementsAttr(attr).is_splat:
                return np.full(shape, _scalar(ir.DenseElementsAttr(attr).get_splat_value()), dtype=dtype)
            return np.array(attr, copy=True).reshape(shape).astype(dtype, copy=False)
        except (TypeError, ValueError, RuntimeError):
            pass
    return parse_dense(str(attr), element, shape)


def _bits(element: ir.Type, dtype: np.dtype) -> int:
    text = str(element)
    if text in _FLOAT_BITS:
        return _FLOAT_BITS[text]
    info = _integer_info(element)
    if info is not None:
        return info[0] if info[0] != 1 else 8
    return dtype.itemsize * 8


def _scalar(attr: ir.Attribute):
    if isinstance(attr, ir.BoolAttr):
        return ir.BoolAttr(attr).value
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    raise TypeError(f"cannot read {attr}")


# ----------------------------------------------------------------- the attribute's text

_TOKEN = re.compile(
    r"\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)"  # (re, im)
    r"|(true|false)"
    r"|(0x[0-9A-Fa-f]+)"
    r"|([-+]?(?:inf|nan|\d+\.?\d*(?:[eE][-+]?\d+)?))"
)


def _dense_body(text: str) -> str:
    start = text.index("dense<") + len("dense<")
    end = text.rindex("> : ")
    return text[start:end].strip()


def _float_of(token: str, element: ir.Type, dtype: np.dtype):
    """One float element in `dtype`: hex tokens are bit patterns of the MLIR type."""
    if token.lower().startswith("0x"):
        bits = int(token, 16)
        if dtype.itemsize == 1:
            return np.array([bits], dtype=np.uint8).view(dtype)[0]
        return np.array([bits], dtype=np.dtype(f"u{dtype.itemsize}")).view(dtype)[0]
    return dtype.type(float(token))


def _complex_part_dtype(element: ir.Type) -> np.dtype:
    return np.dtype(np.float32 if str(element) == "complex<f32>" else np.float64)


def _narrow(values: np.ndarray, width: int, signed: bool, dtype: np.dtype) -> np.ndarray:
    """Raw two's-complement patterns of `width` bits -> values of `dtype`."""
    raw = values.astype(np.uint64) & np.uint64((1 << width) - 1) if width < 64 else values.astype(np.uint64)
    if signed and width < 64:
        as_int = raw.astype(np.int64)
        as_int = np.where(as_int >= (1 << (width - 1)), as_int - (1 << width), as_int)
        return as_int.astype(dtype)
    return raw.astype(dtype)


def parse_dense(text: str, element: ir.Type, shape: list[int]) -> np.ndarray:
    """The values of a printed dense elements attribute (`dense<...> : tensor<...>`)."""
    dtype = storage_dtype(element)
    count = int(np.prod(shape)) if shape else 1
    body = _dense_body(text)
    if body.startswith('"'):
        return _from_hex_blob(body.strip('"'), element, dtype, shape, count)
    values = []
    info = _integer_info(element)
    for match in _TOKEN.finditer(body):
        real, imaginary, boolean, hexadecimal, number = match.groups()
        if real is not None:
            part = _complex_part_dtype(element)
            values.append(complex(_float_of(real, element, part), _float_of(imaginary, element, part)))
        elif boolean is not None:
            values.append(boolean == "true")
        else:
            token = hexadecimal or number
            if info is not None:
                values.append(int(token, 0) if hexadecimal is None else int(token, 16))
            else:
                values.append(_float_of(token, element, dtype))
    if info is not None and info[0] > 1:
        array = _narrow(np.array([int(v) for v in values], dtype=object).astype(np.uint64) if values and min(values) >= 0 else np.array(values, dtype=np.int64), info[0], info[1], dtype)
    else:
        array = np.array(values, dtype=dtype)
    if array.size == 1 and count != 1:
        return np.full(shape, array.reshape(()), dtype=dtype)
    return array.reshape(shape)


def _from_hex_blob(hex_text: str, element: ir.Type, dtype: np.dtype, shape: list[int], count: int) -> np.ndarray:
    data = bytes.fromhex(hex_text.removeprefix("0x"))
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    per_element = len(data) // count if len(data) >= count else 0
    if dtype == np.bool_:
        if per_element >= 1:
            array = np.frombuffer(data, dtype=np.uint8)[: count * per_element : per_element] != 0
        else:
            array = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")[:count].astype(np.bool_)
    elif len(data) == dtype.itemsize:  # a splat
        array = np.full(count, np.frombuffer(data, dtype=_raw_dtype(element, dtype))[0])
    else:
        array = np.frombuffer(data, dtype=_raw_dtype(element, dtype))[:count].copy()
    info = _integer_info(element)
    if info is not None and info[0] > 1 and info[0] < dtype.itemsize * 8:
        array = _narrow(array, info[0], info[1], dtype)
    return array.astype(dtype, copy=False).reshape(shape)


def _raw_dtype(element: ir.Type, dtype: np.dtype) -> np.dtype:
    info = _integer_info(element)
    if info is not None and info[0] < 8:
        return np.dtype(np.uint8)
    return dtype


# ----------------------------------------------------------------- numpy -> attribute


def _element_text(value, element: ir.Type, dtype: np.dtype) -> str:
    if dtype == np.bool_:
        return "true" if value else "false"
    if dtype.kind in "iu" or _integer_info(element) is not None:
        return str(int(value))
    if dtype.kind == "c":
        part = _complex_part_dtype(element)
        return f"({_float_text(part.type(value.real), part)}, {_float_text(part.type(value.imag), part)})"
    return _float_text(value, dtype)


def _float_text(value, dtype: np.dtype) -> str:
    """A float as the hex bit pattern of its type: exact for every float format."""
    raw = np.array([value], dtype=dtype).view(np.dtype(f"u{dtype.itemsize}"))[0]
    return hex(int(raw))


def to_attribute(array: np.ndarray, tensor_type: ir.Type) -> ir.Attribute:
    """A dense elements attribute of `tensor_type` holding `array` (shape and dtype must match)."""
    shaped = ir.RankedTensorType(tensor_type)
    element = shaped.element_type
    dtype = storage_dtype(element)
    array = np.ascontiguousarray(np.asarray(array).astype(dtype, copy=False)).reshape(list(shaped.shape))
    exact = numpy_dtype(element)
    if exact is not None and exact.kind in _BUFFER_KINDS and exact.itemsize * 8 == _bits(element, exact):
        try:
            if dtype == np.bool_:
                return ir.DenseElementsAttr.get(array.astype(np.uint8), type=element)
            if dtype.kind in "iuf" and dtype.type in (np.float32, np.float64) or dtype.kind in "iu":
                return ir.DenseElementsAttr.get(array, type=element)
            return ir.DenseElementsAttr.get(array.view(np.dtype(f"u{dtype.itemsize}")), type=element)
        except (TypeError, ValueError, RuntimeError):
            pass
    if array.size == 0:  # nested empty lists would imply a different shape
        return ir.Attribute.parse(f"dense<> : {tensor_type}")
    body = json.dumps(_nested(array, element, dtype)).replace('"', "")
    return ir.Attribute.parse(f"dense<{body}> : {tensor_type}")


def _nested(array: np.ndarray, element: ir.Type, dtype: np.dtype):
    if array.ndim == 0:
        return _element_text(array[()], element, dtype)
    return [_nested(item, element, dtype) for item in array]
