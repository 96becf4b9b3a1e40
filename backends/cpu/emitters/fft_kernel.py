"""An FFT as a kernel of its own, for targets that run no host calls (the cuda backend; on the
CPU it is a host call of numpy's pocketfft): the discrete Fourier transform by its
definition, one parallel iteration per output element.

Each output element sums the N = prod(fft_length) input elements of its batch, each times
e^(sign 2 pi i t / N), with t = sum over the transformed dimensions of (j_d k_d mod n_d) x
(N / n_d), reduced mod N: an exact integer, so the angle is rounded once however long the
transform (forward: sign -1; inverse: +1 and the sum divided by N). RFFT reads real input
and writes the first n/2 + 1 positions of the last dimension; IRFFT extends its half
spectrum by Hermitian symmetry (a position past n/2 of the last dimension reads the
conjugate of the element at every dimension's mirrored position) and keeps the real part,
which is what pocketfft's c2r computes (the imaginary parts of the zero and Nyquist
positions drop out). O(N) work per element, O(N^2) per transform: right for the short
transforms of the interpreter suite and of small programs, not for long ones, for which
XLA:GPU calls cuFFT."""

import itertools
import math

from mlirxla.mlir import ir

from .loop_kernels import gpu_kernel_or_host_call


def emit_fft(emitter, op: ir.Operation) -> list:
    return gpu_kernel_or_host_call(emitter, op, "FFT as a kernel, the transform by its definition, one thread per output element",
                                   lambda symbol: fft_text(symbol, op))


def fft_text(symbol: str, op: ir.Operation) -> str:
    operand, result = ir.RankedTensorType(op.operands[0].type), ir.RankedTensorType(op.results[0].type)
    kind = ir.StringAttr(op.attributes["fft_type"]).value
    lengths = list(ir.DenseI64ArrayAttr(op.attributes["fft_length"]))
    return dft_text(symbol, list(operand.shape), str(operand.element_type), list(result.shape), str(result.element_type),
                    kind, lengths)


def dft_text(symbol: str, in_shape: list[int], in_element: str, out_shape: list[int], out_element: str, kind: str,
             lengths: list[int]) -> str:
    rank, count = len(out_shape), len(lengths)
    batch = rank - count
    total = math.prod(lengths)
    real = out_element if kind == "IRFFT" else out_element[len("complex<"):-1]
    inverse = kind in ("IFFT", "IRFFT")
    lines, names = [], itertools.count()

    def value(text: str) -> str:
        name = f"%v{next(names)}"
        lines.append(f"{name} = {text}")
        return name

    def constant(number, kind_text: str = "index") -> str:
        return value(f"arith.constant {number} : {kind_text}")

    in_memref = f"memref<{'x'.join(map(str, in_shape))}x{in_element}>"
    out_memref = f"memref<{'x'.join(map(str, out_shape))}x{out_element}>"
    outputs = [f"%o{d}" for d in range(rank)]
    head = [f"func.func @{symbol}(%x: {in_memref}, %y: {out_memref}) {{",
            "  %c0 = arith.constant 0 : index",
            "  %c1 = arith.constant 1 : index",
            *(f"  %bound{d} = arith.constant {size} : index" for d, size in enumerate(out_shape)),
            f"  %zero = arith.constant 0.0 : {real}",
            f"  %terms = arith.constant {total} : index",
            f"  scf.parallel ({', '.join(outputs)}) = ({', '.join(['%c0'] * rank)}) to "
            f"({', '.join(f'%bound{d}' for d in range(rank))}) step ({', '.join(['%c1'] * rank)}) {{",
            "    %sum:2 = scf.for %j = %c0 to %terms step %c1 iter_args(%re = %zero, %im = %zero) -> (" + real + ", " + real + ") {"]
    # the input position j (delinearized over the transformed dimensions) and the twiddle's t
    positions, remaining = [], "%j"
    for d in reversed(range(count)):
        size = constant(lengths[d])
        positions.insert(0, value(f"arith.remui {remaining}, {size} : index"))
        remaining = value(f"arith.divui {remaining}, {size} : index")
    t = constant(0)
    modulus = constant(total)
    for d in range(count):
        product = value(f"arith.muli {positions[d]}, {outputs[batch + d]} : index")
        reduced = value(f"arith.remui {product}, {constant(lengths[d])} : index")
        t = value(f"arith.addi {t}, {value(f'arith.muli {reduced}, {constant(total // lengths[d])} : index')} : index")
    t = value(f"arith.remui {t}, {modulus} : index")
    as_integer = value(f"arith.index_cast {t} : index to i64")
    as_float = value(f"arith.sitofp {as_integer} : i64 to {real}")
    step = (1 if inverse else -1) * 2 * math.pi / total
    angle = value(f"arith.mulf {as_float}, {constant(repr(step), real)} : {real}")
    cosine, sine = value(f"math.cos {angle} : {real}"), value(f"math.sin {angle} : {real}")
    batch_indices = outputs[:batch]
    if kind == "RFFT":
        x_re, x_im = value(f"memref.load %x[{', '.join(batch_indices + positions)}] : {in_memref}"), "%zero"
    elif kind == "IRFFT":
        x_re, x_im = hermitian_element(value, constant, batch_indices, positions, lengths, in_memref, real)
    else:
        element = value(f"memref.load %x[{', '.join(batch_indices + positions)}] : {in_memref}")
        x_re, x_im = value(f"complex.re {element} : {in_element}"), value(f"complex.im {element} : {in_element}")
    real_part = value(f"arith.subf {value(f'arith.mulf {x_re}, {cosine} : {real}')}, "
                      f"{value(f'arith.mulf {x_im}, {sine} : {real}')} : {real}")
    imaginary_part = value(f"arith.addf {value(f'arith.mulf {x_re}, {sine} : {real}')}, "
                           f"{value(f'arith.mulf {x_im}, {cosine} : {real}')} : {real}")
    new_re, new_im = value(f"arith.addf %re, {real_part} : {real}"), value(f"arith.addf %im, {imaginary_part} : {real}")
    body = ["      " + line for line in lines] + [f"      scf.yield {new_re}, {new_im} : {real}, {real}", "    }"]
    lines.clear()
    re, im = "%sum#0", "%sum#1"
    if inverse:
        scale = constant(repr(1.0 / total), real)
        re, im = value(f"arith.mulf {re}, {scale} : {real}"), value(f"arith.mulf {im}, {scale} : {real}")
    stored = re if kind == "IRFFT" else value(f"complex.create {re}, {im} : {out_element}")
    lines.append(f"memref.store {stored}, %y[{', '.join(outputs)}] : {out_memref}")
    tail = ["    " + line for line in lines] + ["    scf.reduce", "  }", "  return", "}"]
    return "\n".join(head + body + tail)


def hermitian_element(value, constant, batch_indices, positions, lengths, in_memref, real) -> tuple[str, str]:
    """The full spectrum's element at `positions` from IRFFT's half spectrum: past n/2 of the
    last dimension, the conjugate of the element at every dimension's mirrored position."""
    last = len(lengths) - 1
    mirrored = value(f"arith.cmpi ugt, {positions[last]}, {constant(lengths[last] // 2)} : index")
    indices = []
    for d, (position, size) in enumerate(zip(positions, lengths)):
        flipped = value(f"arith.subi {constant(size)}, {position} : index")
        wrapped = value(f"arith.remui {flipped}, {constant(size)} : index")
        indices.append(value(f"arith.select {mirrored}, {wrapped}, {position} : index"))
    element = value(f"memref.load %x[{', '.join(batch_indices + indices)}] : {in_memref}")
    x_re = value(f"complex.re {element} : complex<{real}>")
    stored_im = value(f"complex.im {element} : complex<{real}>")
    x_im = value(f"arith.select {mirrored}, {value(f'arith.negf {stored_im} : {real}')}, {stored_im} : {real}")
    return x_re, x_im
