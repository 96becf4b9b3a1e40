"""numpy arrays <-> MLIR dense elements attributes (XLA's Literal), for every element type.

numpy's own dtypes go through the buffer protocol; bf16 and the float8 family through
ml_dtypes and their bit patterns; narrow integers (i2, i4, ui2, ui4) and anything else
element by element.
"""

import json

import ml_dtypes
import numpy as np

from mlirxla.mlir import ir

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
}
_COMPLEX_TYPES = {"complex<f32>": np.complex64, "complex<f64>": np.complex128}
_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SIGNED = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


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
    """A numpy dtype wide enough for `element`'s values (narrow integers widen to 8 bits)."""
    dtype = numpy_dtype(element)
    if dtype is not None:
        return dtype
    if isinstance(element, ir.IntegerType):
        return np.dtype(np.uint8 if ir.IntegerType(element).is_unsigned else np.int8)
    raise TypeError(f"no numpy dtype for element type {element}")


def to_numpy(attr: ir.Attribute) -> np.ndarray:
    """The values of a dense elements attribute as a numpy array of `storage_dtype`."""
    shaped = ir.ShapedType(attr.type)
    element, shape = shaped.element_type, list(shaped.shape)
    dtype = storage_dtype(element)
    if attr.is_splat:
        return np.full(shape, scalar_value(attr.get_splat_value()), dtype=dtype)
    try:
        return np.array(attr, copy=True).reshape(shape).astype(dtype, copy=False)
    except (TypeError, ValueError, RuntimeError):
        values = ir.DenseIntElementsAttr(attr) if isinstance(element, ir.IntegerType) else ir.DenseFPElementsAttr(attr)
        return np.array([values[i] for i in range(len(values))], dtype=dtype).reshape(shape)


def scalar_value(attr: ir.Attribute):
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value
    if isinstance(attr, ir.BoolAttr):
        return ir.BoolAttr(attr).value
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    return complex(str(attr).split(":")[0].strip().replace("(", "").replace(")", "").replace(",", "+") + "j")


def to_attribute(array: np.ndarray, tensor_type: ir.Type) -> ir.Attribute:
    """A dense elements attribute of `tensor_type` holding `array` (shape and dtype must match)."""
    shaped = ir.RankedTensorType(tensor_type)
    element = shaped.element_type
    dtype = numpy_dtype(element)
    if dtype is None:
        return ir.Attribute.parse(f"dense<{json.dumps(np.asarray(array).astype(int).tolist())}> : {tensor_type}")
    array = np.ascontiguousarray(array, dtype=dtype).reshape(list(shaped.shape))
    if dtype == np.bool_:
        return ir.DenseElementsAttr.get(array.astype(np.uint8), type=element)
    if dtype.kind in "biufc" and dtype.type not in (np.float16,):
        return ir.DenseElementsAttr.get(array, type=element)
    return ir.DenseElementsAttr.get(array.view(np.dtype(f"u{dtype.itemsize}")), type=element)
