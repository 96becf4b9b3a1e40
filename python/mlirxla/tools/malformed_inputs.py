"""A corpus of malformed inputs for the tools, and a runner that holds every case to the
README's promise: bad input ends in one line `tool: error: ...` and exit status 2, within
30 seconds and 2 GiB of address space, never a traceback, a crash, a hang or an
"internal error".

    python -m mlirxla.tools.malformed_inputs --all        # the whole corpus (what scripts/fuzz runs)
    python -m mlirxla.tools.malformed_inputs              # the fast slice the default suite runs
    python -m mlirxla.tools.malformed_inputs -k npz -v    # the cases whose name holds `npz`, each printed

The corpus is deterministic from its seed: the repository's example module truncated after
every token, its bytecode and portable artifact with random byte flips and truncations,
artifacts claiming versions this build does not read, tensors of 2^40 elements, regions and
brackets nested 10,000 deep, ops, types and attributes of unknown dialects, and bad `.npz`
inputs for `mlirxla-run --inputs` (wrong names, dtypes, shapes, pickles, not a zip, empty, a
directory, missing). A case that happens to be valid (a truncation that still parses) may
exit 0 or 1; cases built to be wrong must fail.
"""

import argparse
import io
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlirxla.context import new_context
from mlirxla.mlir import ir, stablehlo

TIMEOUT_SECONDS = 30
ADDRESS_SPACE_BYTES = 2 << 30
DEFAULT_SEED = 0
TOOL_MODULES = {"mlirxla-opt": "mlirxla.tools.opt", "mlirxla-run": "mlirxla.tools.run"}
SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mlp_softmax.stablehlo.mlir"
HUGE = 1 << 40  # elements: 4 TiB of f32
DEEP = 10_000
FLIPPED_COPIES = 64  # per serialized form, in the whole corpus
DIRECTORY = object()  # a `files` value: make a directory of that name


@dataclass(frozen=True)
class Case:
    """One run of one tool: the files it finds in its working directory and its arguments.
    `must_fail`: the input is wrong by construction, so only exit status 2 will do."""

    name: str
    tool: str
    arguments: tuple[str, ...]
    files: dict = field(default_factory=dict, hash=False)
    must_fail: bool = True


@dataclass(frozen=True)
class Outcome:
    case: Case
    verdict: str  # "error" or "accepted" (both fine), else the failure: see `classify`
    detail: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.verdict in ("error", "accepted")


# ----------------------------------------------------------------------------- the lexer

_TOKEN = re.compile(r"""
    //[^\n]*                                   # a comment (skipped)
  | \s+                                        # white space (skipped)
  | "(?:[^"\\\n]|\\.)*"?                       # a string (an unterminated one runs to the line end)
  | [%@#!^][A-Za-z0-9_$.\-]*                   # %value, @symbol, #attribute, !type, ^block
  | [-+]?0x[0-9A-Fa-f]+                        # hexadecimal integer
  | [-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?        # integer or float
  | [A-Za-z_][A-Za-z0-9_$.]*                   # bare identifier or keyword
  | ->|::|\.\.\.                               # multi-character punctuation
  | .                                          # any other punctuation
""", re.VERBOSE | re.DOTALL)


def token_ends(text: str) -> list[int]:
    """The offsets just after each token of `text` (comments and white space are no tokens)."""
    ends = []
    for match in _TOKEN.finditer(text):
        if not match.group().isspace() and not match.group().startswith("//"):
            ends.append(match.end())
    return ends


# ----------------------------------------------------------------------------- serialized forms


def sample_text() -> str:
    return SAMPLE.read_text()


def bytecode_of(text: str) -> bytes:
    with new_context():
        module = ir.Module.parse(text)
        stream = io.BytesIO()
        module.operation.write_bytecode(stream)
        return stream.getvalue()


def portable_artifact_of(text: str) -> bytes:
    with new_context():
        module = ir.Module.parse(text)
        return stablehlo.serialize_portable_artifact(module, stablehlo.get_current_version())


def flipped(data: bytes, rng: random.Random) -> bytes:
    """`data` with one to four bytes xor-ed with random non-zero values (the magic included)."""
    mutable = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        mutable[rng.randrange(len(mutable))] ^= rng.randint(1, 255)
    return bytes(mutable)


def with_producer(artifact: bytes, producer: bytes) -> bytes:
    """A portable artifact whose NUL-terminated producer string (after the magic and the
    bytecode version) is replaced by `producer`."""
    start = artifact.index(b"StableHLO_v")
    end = artifact.index(b"\x00", start)
    return artifact[:start] + producer + artifact[end:]


# ----------------------------------------------------------------------------- the cases


def truncation_cases(text: str) -> Iterator[Case]:
    for index, end in enumerate(token_ends(text)):
        must_fail = end < len(text.rstrip())
        yield Case(f"truncated-text-{index:04d}", "mlirxla-opt", ("input.mlir",), {"input.mlir": text[:end].encode()}, must_fail)


def serialized_forms(text: str) -> dict[str, tuple[str, bytes]]:
    """name -> (file name, bytes) of the sample's bytecode and portable artifact."""
    return {
        "bytecode": ("input.mlirbc", bytecode_of(text)),
        "artifact": ("input.vhlo.bc", portable_artifact_of(text)),
    }


def flip_cases(forms: dict[str, tuple[str, bytes]], seed: int) -> Iterator[Case]:
    """Random byte flips in each form; every other copy is also compiled and run, so that a
    flip the importer takes (another shape, another constant) reaches the backend."""
    for form, (file_name, data) in forms.items():
        rng = random.Random(f"{seed}:{form}")
        for index in range(FLIPPED_COPIES):
            tool = "mlirxla-run" if index % 2 else "mlirxla-opt"
            yield Case(f"flipped-{form}-{index:03d}", tool, (file_name,), {file_name: flipped(data, rng)}, must_fail=False)


def truncated_binary_cases(forms: dict[str, tuple[str, bytes]]) -> Iterator[Case]:
    for form, (file_name, data) in forms.items():
        for length in (3, 4, 5, 8, 16, 32, len(data) // 4, len(data) // 2, len(data) - 1):
            yield Case(f"truncated-{form}-{length:05d}", "mlirxla-opt", (file_name,), {file_name: data[:length]})


def version_cases(text: str) -> Iterator[Case]:
    """Artifacts claiming versions this build does not read, or no readable version at all."""
    artifact = portable_artifact_of(text)
    producers = {
        "future": b"StableHLO_v99.0.0",
        "ancient": b"StableHLO_v0.1.0",
        "huge-number": b"StableHLO_v1.99999999999999999999999999.0",
        "no-number": b"StableHLO_vX.Y.Z",
        "empty": b"",
    }
    for name, producer in producers.items():
        yield Case(f"version-{name}", "mlirxla-run", ("input.vhlo.bc",), {"input.vhlo.bc": with_producer(artifact, producer)})
    bytecode_version_at = len(b"ML\xefR")
    for version in (0, 0x7F):
        patched = artifact[:bytecode_version_at] + bytes([version]) + artifact[bytecode_version_at + 1:]
        yield Case(f"version-bytecode-{version}", "mlirxla-opt", ("input.vhlo.bc",), {"input.vhlo.bc": patched})
    minimum = stablehlo.get_minimum_version()
    old_claim = with_producer(artifact, f"StableHLO_v{minimum}".encode())
    yield Case("version-old-claim-new-content", "mlirxla-opt", ("input.vhlo.bc",), {"input.vhlo.bc": old_claim}, must_fail=False)


HUGE_PROGRAMS = {
    "huge-argument": f"""func.func @main(%a: tensor<{HUGE}xf32>) -> tensor<{HUGE}xf32> {{
  %0 = stablehlo.add %a, %a : tensor<{HUGE}xf32>
  return %0 : tensor<{HUGE}xf32>
}}
""",
    "huge-result": f"""func.func @main(%a: tensor<f32>) -> tensor<{HUGE}xf32> {{
  %0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<{HUGE}xf32>
  return %0 : tensor<{HUGE}xf32>
}}
""",
    "huge-constant": f"""func.func @main() -> tensor<{HUGE}xf32> {{
  %0 = stablehlo.constant dense<1.0> : tensor<{HUGE}xf32>
  return %0 : tensor<{HUGE}xf32>
}}
""",
    # sorted, the intermediate must exist whole (a slice of an elementwise op alone is computed sliced)
    "huge-intermediate": f"""func.func @main(%a: tensor<f32>) -> tensor<1xf32> {{
  %0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<{HUGE}xf32>
  %1 = stablehlo.sqrt %0 : tensor<{HUGE}xf32>
  %s = "stablehlo.sort"(%1) ({{
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %c = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}) {{dimension = 0 : i64, is_stable = false}} : (tensor<{HUGE}xf32>) -> tensor<{HUGE}xf32>
  %2 = stablehlo.slice %s [0:1] : (tensor<{HUGE}xf32>) -> tensor<1xf32>
  %3 = stablehlo.add %2, %2 : tensor<1xf32>
  return %3 : tensor<1xf32>
}}
""",
    "overflowing-shape": """func.func @main(%a: tensor<4611686018427387904x8xf32>) -> tensor<4611686018427387904x8xf32> {
  return %a : tensor<4611686018427387904x8xf32>
}
""",
}


def huge_shape_cases() -> Iterator[Case]:
    for name, text in HUGE_PROGRAMS.items():
        files = {"input.mlir": text.encode()}
        yield Case(name, "mlirxla-run", ("input.mlir",), files)
        yield Case(f"{name}-reference", "mlirxla-run", ("input.mlir", "--backend", "reference"), files)
        yield Case(f"{name}-cpu-pipeline", "mlirxla-opt", ("input.mlir", "--pipeline=cpu"), files, must_fail=False)


def nested_modules(depth: int) -> str:
    return "module {\n" * depth + "}\n" * depth


def nested_whiles(depth: int) -> str:
    """`depth` stablehlo.while loops, each in the body of the one around it (generic form)."""
    opening, closing = [], []
    for level in range(depth):
        value = f"%v{level}"
        opening.append(
            f'%r{level} = "stablehlo.while"({value}) ({{\n^bb0(%c{level}: tensor<i32>):\n'
            f'%p{level} = "stablehlo.compare"(%c{level}, %c{level}) <{{comparison_direction = #stablehlo<comparison_direction LT>}}>'
            f' : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"stablehlo.return"(%p{level}) : (tensor<i1>) -> ()\n'
            f'}}, {{\n^bb0(%v{level + 1}: tensor<i32>):\n')
        closing.append(f'"stablehlo.return"(%r{level + 1}) : (tensor<i32>) -> ()\n}}) : (tensor<i32>) -> tensor<i32>\n')
    innermost = f'%r{depth} = "stablehlo.add"(%v{depth}, %v{depth}) : (tensor<i32>, tensor<i32>) -> tensor<i32>\n'
    return ('"func.func"() <{function_type = (tensor<i32>) -> tensor<i32>, sym_name = "main"}> ({\n^bb0(%v0: tensor<i32>):\n'
            + "".join(opening) + innermost + "".join(reversed(closing))
            + '"func.return"(%r0) : (tensor<i32>) -> ()\n}) : () -> ()\n')


def nested_funcs(depth: int) -> str:
    """A function in a module in a module ... `depth` modules deep."""
    function = "func.func @main(%a: tensor<f32>) -> tensor<f32> {\n  return %a : tensor<f32>\n}\n"
    return "module {\n" * depth + function + "}\n" * depth


def nested_array_attribute(depth: int) -> str:
    return ("func.func @main(%a: tensor<f32>) -> tensor<f32> attributes {deep = " + "[" * depth + "]" * depth + "} {\n"
            "  return %a : tensor<f32>\n}\n")


def nested_tuple_type(depth: int) -> str:
    deep_type = "tuple<" * depth + "tensor<f32>" + ">" * depth
    return f"func.func @main(%a: {deep_type}) -> {deep_type} {{\n  return %a : {deep_type}\n}}\n"


def nested_parentheses(depth: int) -> str:
    return "func.func @main(%a: tensor<f32>) -> " + "(" * depth + "tensor<f32>" + ")" * depth + " {\n  return %a : tensor<f32>\n}\n"


DEEP_PROGRAMS = {
    "deep-modules": nested_modules,
    "deep-whiles": nested_whiles,
    "deep-funcs": nested_funcs,
    "deep-array-attribute": nested_array_attribute,
    "deep-tuple-type": nested_tuple_type,
    "deep-parentheses": nested_parentheses,
}


def deep_nesting_cases() -> Iterator[Case]:
    for name, generate in DEEP_PROGRAMS.items():
        files = {"input.mlir": generate(DEEP).encode()}
        yield Case(name, "mlirxla-run", ("input.mlir",), files)
        yield Case(f"{name}-opt", "mlirxla-opt", ("input.mlir",), files)
    bytecode = nested_bytecode(DEEP)
    yield Case("deep-modules-bytecode", "mlirxla-run", ("input.mlirbc",), {"input.mlirbc": bytecode})


def nested_bytecode(depth: int) -> bytes:
    """The nested-modules program as bytecode, built op by op: parsing it as text is what
    the corpus checks the tools refuse, so the generator must not parse it either."""
    with new_context(), ir.Location.unknown():
        outermost = ir.Module.create()
        body = outermost.body
        for _ in range(depth - 1):
            with ir.InsertionPoint(body):
                inner = ir.Operation.create("builtin.module", regions=1)
            inner.regions[0].blocks.append()
            body = inner.regions[0].blocks[0]
        stream = io.BytesIO()
        outermost.operation.write_bytecode(stream)
        return stream.getvalue()


UNKNOWN_DIALECT_PROGRAMS = {
    "unknown-op-generic": '''func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "foo.bar"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
''',
    "unknown-op-custom": '''func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = foo.bar %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
''',
    "unknown-type": '''func.func @main(%a: !foo.tensor<2xf32>) -> !foo.tensor<2xf32> {
  return %a : !foo.tensor<2xf32>
}
''',
    "unknown-element-type": '''func.func @main(%a: tensor<2x!foo.element>) -> tensor<2x!foo.element> {
  %0 = stablehlo.add %a, %a : tensor<2x!foo.element>
  return %0 : tensor<2x!foo.element>
}
''',
    "unknown-attribute": '''func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a {foo.attribute = #foo.thing<1, 2>} : tensor<2xf32>
  return %0 : tensor<2xf32>
}
''',
    "unknown-top-level-op": '''"foo.module"() ({
  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
    return %a : tensor<2xf32>
  }
}) : () -> ()
''',
    "unknown-op-in-region": '''func.func @main(%a: tensor<2xf32>) -> tensor<f32> {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %init) across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
   reducer(%x: tensor<f32>, %y: tensor<f32>) {
    %s = "foo.add"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  return %0 : tensor<f32>
}
''',
    "unknown-dialect-function": '''foo.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  foo.return %a : tensor<2xf32>
}
''',
}


# Attributes of unknown dialects are kept (JAX's modules carry sdy, mhlo and jax ones), and a
# function that only passes a value of an unknown type along imports: mlirxla-run refuses it
# when it has to make the value.
RUNNABLE = {"unknown-attribute"}
IMPORTABLE = {"unknown-attribute", "unknown-type"}


def unknown_dialect_cases() -> Iterator[Case]:
    for name, text in UNKNOWN_DIALECT_PROGRAMS.items():
        files = {"input.mlir": text.encode()}
        yield Case(name, "mlirxla-run", ("input.mlir",), files, must_fail=name not in RUNNABLE)
        yield Case(f"{name}-opt", "mlirxla-opt", ("input.mlir",), files, must_fail=name not in IMPORTABLE)
    bytecode = bytecode_of(UNKNOWN_DIALECT_PROGRAMS["unknown-op-generic"])
    yield Case("unknown-op-bytecode", "mlirxla-run", ("input.mlirbc",), {"input.mlirbc": bytecode})


TWO_ARGUMENTS = b"""func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""


def npz_bytes(**arrays) -> bytes:
    stream = io.BytesIO()
    np.savez(stream, **arrays)
    return stream.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return stream.getvalue()


def npy_header_claiming(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    """An .npy file whose header claims `shape` but that holds 16 bytes of data."""
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, header)
    return stream.getvalue() + bytes(16)


def bad_npz_files() -> dict[str, object]:
    good = np.ones((2, 3), np.float32)
    good_npz = npz_bytes(arg0=good, arg1=good)
    return {
        "names-shifted.npz": npz_bytes(arg1=good, arg2=good),
        "names-mixed.npz": npz_bytes(arg0=good, weights=good, arg5=good),
        "dtype-int32.npz": npz_bytes(arg0=good.astype(np.int32), arg1=good),
        "dtype-float64.npz": npz_bytes(arg0=good, arg1=good.astype(np.float64)),
        "dtype-complex.npz": npz_bytes(arg0=good.astype(np.complex64), arg1=good),
        "dtype-string.npz": npz_bytes(arg0=np.full((2, 3), "abc"), arg1=good),
        "dtype-structured.npz": npz_bytes(arg0=np.zeros((2, 3), [("x", np.float32)]), arg1=good),
        "dtype-bytes.npz": npz_bytes(arg0=np.full((2, 3), b"ab"), arg1=good),
        "shape-transposed.npz": npz_bytes(arg0=good.T.copy(), arg1=good),
        "shape-scalar.npz": npz_bytes(arg0=np.float32(1.0), arg1=good),
        "shape-empty.npz": npz_bytes(arg0=np.zeros((0, 3), np.float32), arg1=good),
        "too-few.npz": npz_bytes(arg0=good),
        "too-many.npz": npz_bytes(arg0=good, arg1=good, arg2=good),
        "no-arrays.npz": npz_bytes(),
        "object-array.npz": npz_bytes(arg0=np.array([{"a": 1}, None], dtype=object), arg1=good),
        "pickle.npz": b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x04arg0\x94K\x01s.",
        "npy-not-npz.npz": npy_bytes(good),
        "text.npz": b"arg0 = [1, 2, 3]\n",
        "empty.npz": b"",
        "truncated.npz": good_npz[: len(good_npz) // 2],
        "corrupt-member.npz": corrupt_member(good_npz),
        "zip-of-text.npz": zip_bytes({"arg0.txt": b"1 2 3", "arg1.txt": b"4 5 6"}),
        "zip-of-garbage-npy.npz": zip_bytes({"arg0.npy": b"\x93NUMPY garbage", "arg1.npy": b"??"}),
        "huge-header.npz": zip_bytes({"arg0.npy": npy_header_claiming((HUGE,)), "arg1.npy": npy_bytes(good)}),
        "huge-2d-header.npz": zip_bytes({"arg0.npy": npy_header_claiming((1 << 20, 1 << 20)), "arg1.npy": npy_bytes(good)}),
        "negative-shape-header.npz": zip_bytes({"arg0.npy": npy_header_claiming((-2, 3)), "arg1.npy": npy_bytes(good)}),
        "pickled-member.npz": zip_bytes({"arg0.npy": npy_header_claiming((2, 3), "|O"), "arg1.npy": npy_bytes(good)}),
        "a-directory.npz": DIRECTORY,
    }


def npy_bytes(array: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.save(stream, array)
    return stream.getvalue()


def corrupt_member(npz: bytes) -> bytes:
    """The archive with a byte of its first member's data changed, so its CRC fails."""
    mutable = bytearray(npz)
    mutable[120] ^= 0xFF
    return bytes(mutable)


def npz_cases() -> Iterator[Case]:
    for file_name, content in bad_npz_files().items():
        name = "npz-" + file_name.removesuffix(".npz")
        yield Case(name, "mlirxla-run", ("program.mlir", "--inputs", file_name), {"program.mlir": TWO_ARGUMENTS, file_name: content})
    yield Case("npz-missing", "mlirxla-run", ("program.mlir", "--inputs", "absent.npz"), {"program.mlir": TWO_ARGUMENTS})


def other_input_cases() -> Iterator[Case]:
    yield Case("input-missing", "mlirxla-run", ("absent.mlir",))
    yield Case("input-directory", "mlirxla-opt", ("folder.mlir",), {"folder.mlir": DIRECTORY})
    yield Case("input-empty-run", "mlirxla-run", ("input.mlir",), {"input.mlir": b""})
    yield Case("input-not-utf8", "mlirxla-opt", ("input.mlir",), {"input.mlir": b"\xff\xfe\x00module {}"})
    yield Case("input-nul-bytes", "mlirxla-opt", ("input.mlir",), {"input.mlir": b"module {\x00}\n"})
    yield Case("input-magic-only", "mlirxla-opt", ("input.mlirbc",), {"input.mlirbc": b"ML\xefR"})


def corpus(seed: int = DEFAULT_SEED) -> list[Case]:
    """Every case, in a fixed order."""
    text = sample_text()
    forms = serialized_forms(text)
    return [
        *truncation_cases(text),
        *flip_cases(forms, seed),
        *truncated_binary_cases(forms),
        *version_cases(text),
        *huge_shape_cases(),
        *deep_nesting_cases(),
        *unknown_dialect_cases(),
        *npz_cases(),
        *other_input_cases(),
    ]


FAST_TRUNCATION_STRIDE = 60
FAST_FLIP_STRIDE = 16
FAST_CASES = frozenset({
    "truncated-bytecode-00005", "truncated-artifact-00032",
    "version-future", "version-no-number", "version-bytecode-127",
    *HUGE_PROGRAMS, "huge-argument-reference",
    *DEEP_PROGRAMS, "deep-modules-bytecode",
    "unknown-op-custom", "unknown-element-type", "unknown-top-level-op", "unknown-op-bytecode",
    "npz-names-shifted", "npz-dtype-int32", "npz-shape-transposed", "npz-object-array", "npz-pickle",
    "npz-empty", "npz-huge-header", "npz-a-directory",
    "input-missing", "input-not-utf8", "input-nul-bytes",
})


def fast_slice(cases: list[Case]) -> list[Case]:
    """A few dozen cases for the default suite: every family, the large ones sampled."""
    return [case for case in cases if case.name in FAST_CASES or sampled(case.name)]


def sampled(name: str) -> bool:
    number = name.rpartition("-")[2]
    if name.startswith("truncated-text-"):
        return int(number) % FAST_TRUNCATION_STRIDE == 0
    if name.startswith("flipped-"):
        return int(number) % FAST_FLIP_STRIDE == 0
    return False


# ----------------------------------------------------------------------------- the runner


def limit_resources() -> None:
    """In the child, before the tool starts: at most 2 GiB of address space, and no core file."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def materialize(case: Case, directory: Path) -> None:
    for name, content in case.files.items():
        if content is DIRECTORY:
            (directory / name).mkdir()
        else:
            (directory / name).write_bytes(content)


def run_case(case: Case) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="mlirxla-malformed-") as folder:
        materialize(case, Path(folder))
        command = [sys.executable, "-m", TOOL_MODULES[case.tool], *case.arguments]
        started = time.monotonic()
        try:
            done = subprocess.run(command, cwd=folder, capture_output=True, timeout=TIMEOUT_SECONDS,
                                  preexec_fn=limit_resources, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return Outcome(case, "timeout", f"no answer within {TIMEOUT_SECONDS} s", time.monotonic() - started)
        seconds = time.monotonic() - started
    verdict, detail = classify(case, done.returncode, done.stderr.decode(errors="replace"))
    return Outcome(case, verdict, detail, seconds)


EXIT_ERROR = 2


def classify(case: Case, status: int, stderr: str) -> tuple[str, str]:
    """(verdict, detail): "error" and "accepted" are fine, every other verdict is a failure."""
    lines = stderr.strip().splitlines()
    last = shortened(lines[-1]) if lines else ""
    if status < 0:
        return "crash", f"killed by signal {-status}; stderr ends: {last}"
    if "Traceback" in stderr:
        return "traceback", last
    if "internal error" in stderr:
        return "internal error", last
    if status != EXIT_ERROR:
        if status in (0, 1) and not case.must_fail:
            return "accepted", f"exit {status}"
        return "wrong exit status", f"exit {status}; stderr: {last}"
    if len(lines) != 1:
        return "several lines", f"{len(lines)} lines on stderr; the last: {last}"
    if not lines[0].startswith(f"{case.tool}: error: "):
        return "not a tool error", shortened(lines[0])
    return "error", shortened(lines[0])


DETAIL_CHARACTERS = 400


def shortened(line: str) -> str:
    """A line of a tool's stderr as an outcome's detail: an error quoting a 10,000-deep type
    would otherwise fill the report."""
    return line if len(line) <= DETAIL_CHARACTERS else line[:DETAIL_CHARACTERS] + f"... ({len(line)} characters)"


def run_cases(cases: list[Case], jobs: int, on_outcome=None) -> list[Outcome]:
    outcomes = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for outcome in pool.map(run_case, cases):
            outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    counts = Counter(outcome.verdict for outcome in outcomes)
    seconds = sum(outcome.seconds for outcome in outcomes)
    failed = sum(1 for outcome in outcomes if not outcome.ok)
    parts = ", ".join(f"{verdict} {count}" for verdict, count in sorted(counts.items()))
    return f"{len(outcomes)} cases: {parts}; {failed} failed ({seconds:.0f} s of tool time)"


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="python -m mlirxla.tools.malformed_inputs", description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="run the whole corpus (default: the fast slice)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the byte flips (default 0)")
    parser.add_argument("-k", "--filter", help="only the cases whose name holds this text")
    parser.add_argument("-j", "--jobs", type=int, default=min(4, os.cpu_count() or 1), help="cases run at once")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every outcome, not only failures")
    parser.add_argument("--list", action="store_true", help="list the cases' names and stop")
    parser.add_argument("--write-to", metavar="DIR", help="write each case's files and command to DIR/<case>/ and stop")
    return parser.parse_args(argv)


def write_cases(cases: list[Case], root: Path) -> None:
    """Each case as a folder holding its files and `command` (the line that runs it there)."""
    for case in cases:
        folder = root / case.name
        folder.mkdir(parents=True, exist_ok=True)
        materialize(case, folder)
        (folder / "command").write_text(" ".join([case.tool, *case.arguments]) + "\n")


def selected_cases(arguments) -> list[Case]:
    cases = corpus(arguments.seed)
    if not arguments.all:
        cases = fast_slice(cases)
    if arguments.filter:
        cases = [case for case in cases if arguments.filter in case.name]
    return cases


def main(argv=None) -> int:
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    cases = selected_cases(arguments)
    if arguments.list:
        print("\n".join(case.name for case in cases))
        return 0
    if arguments.write_to:
        write_cases(cases, Path(arguments.write_to))
        print(f"{len(cases)} cases written to {arguments.write_to}/")
        return 0
    print(f"{len(cases)} cases ({'the whole corpus' if arguments.all else 'the fast slice'}, seed {arguments.seed})", flush=True)

    def report(outcome: Outcome) -> None:
        if arguments.verbose or not outcome.ok:
            print(f"{outcome.verdict:>18}  {outcome.case.name} ({outcome.seconds:.1f} s): {outcome.detail}", flush=True)

    outcomes = run_cases(cases, arguments.jobs, report)
    print(summary(outcomes))
    return 0 if all(outcome.ok for outcome in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
