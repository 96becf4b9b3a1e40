"""The malformed-input corpus (`mlirxla.tools.malformed_inputs`): its fast slice runs here, each
case in a subprocess limited to 30 s and 2 GiB, and every case must end in one line
`tool: error: ...` with exit status 2 (or, for a case that happens to be valid, exit 0 or 1);
`python -m mlirxla.tools.malformed_inputs --all` runs the whole corpus. The guards the corpus
needed (nesting, strings that are not UTF-8, memory sizes, .npz headers) are tested in process.
"""

import io
import os
import re

import ml_dtypes
import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.errors import MlirxlaError
from mlirxla.frontdoor import nesting
from mlirxla.runtime import memory
from mlirxla.tools import malformed_inputs, npz_inputs


@pytest.fixture(scope="module")
def outcomes() -> dict[str, malformed_inputs.Outcome]:
    cases = malformed_inputs.fast_slice(malformed_inputs.corpus())
    jobs = min(4, os.cpu_count() or 1)
    return {outcome.case.name: outcome for outcome in malformed_inputs.run_cases(cases, jobs)}


def test_every_case_of_the_fast_slice_fails_cleanly(outcomes):
    failures = [f"{o.case.name}: {o.verdict}: {o.detail}" for o in outcomes.values() if not o.ok]
    assert not failures, "\n".join(failures)
    assert len(outcomes) >= 40


def test_the_fast_slice_covers_every_family(outcomes):
    families = {"truncated-text", "flipped-bytecode", "flipped-artifact", "truncated-bytecode", "version", "huge",
                "overflowing", "deep", "unknown", "npz", "input"}
    assert {family for family in families if any(name.startswith(family) for name in outcomes)} == families


# (case, fragments its error line must hold)
MESSAGES = {
    "huge-argument": ["the argument f32[1099511627776] needs 4 TiB"],
    "huge-argument-reference": ["the argument f32[1099511627776] needs 4 TiB"],
    "huge-result": ["one execution needs 4 TiB (the output f32[1099511627776] alone 4 TiB)"],
    "huge-constant": ["f32[1099511627776] needs 4 TiB"],
    "overflowing-shape": ["input.mlir:1:21", "more elements than 64-bit sizes count"],
    "deep-whiles": [re.compile(r"input\.mlir:\d+:\d+: brackets nest 20005 deep; mlirxla reads at most 512 levels")],
    "deep-modules-bytecode": ["regions nest more than 64 deep"],
    "flipped-artifact-000": ["producer 'StableHLO_v\\x08.19.0' names no StableHLO version"],
    "input-nul-bytes": ["input.mlir:1:9: the text holds a NUL character"],
    "npz-names-shifted": ["the arrays are named arg1, arg2; expected arg0 to arg1"],
    "npz-object-array": ["argument #0 of @main (array 'arg0') holds Python objects"],
    "npz-huge-header": ["expected shape [2, 3] (tensor<2x3xf32>), got [1099511627776]"],
    "npz-pickle": ["not an .npz archive"],
    "npz-empty": ["the inputs file is empty"],
    "npz-a-directory": ["a-directory.npz", "Is a directory"],
}


@pytest.mark.parametrize("case", list(MESSAGES))
def test_errors_name_the_problem(outcomes, case):
    line = outcomes[case].detail
    for fragment in MESSAGES[case]:
        if isinstance(fragment, re.Pattern):
            assert fragment.search(line), line
        else:
            assert fragment in line, line


def test_token_boundaries():
    """Tokens as MLIR's lexer takes them: `2xf32` is the integer 2 and the identifier xf32
    (the parser of a shape splits the x off)."""
    text = 'func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> // a comment\n  "x" 1.5e3'
    tokens = ["func.func", "@main", "(", "%a", ":", "tensor", "<", "2", "xf32", ">", ")", "->", "tensor", "<", "2", "xf32", ">",
              '"x"', "1.5e3"]
    ends = malformed_inputs.token_ends(text)
    assert len(ends) == len(tokens)
    assert all(text[:end].endswith(token) for end, token in zip(ends, tokens))


def test_the_flips_follow_the_seed():
    forms = malformed_inputs.serialized_forms(malformed_inputs.sample_text())
    first = [case.files for case in malformed_inputs.flip_cases(forms, seed=0)]
    assert first == [case.files for case in malformed_inputs.flip_cases(forms, seed=0)]
    assert first != [case.files for case in malformed_inputs.flip_cases(forms, seed=1)]


CASE = malformed_inputs.Case("example", "mlirxla-run", ("input.mlir",))
MAYBE_VALID = malformed_inputs.Case("example", "mlirxla-run", ("input.mlir",), must_fail=False)


@pytest.mark.parametrize("case, status, stderr, verdict", [
    (CASE, 2, "mlirxla-run: error: input.mlir:1:2: bad\n", "error"),
    (MAYBE_VALID, 0, "", "accepted"),
    (MAYBE_VALID, 1, "", "accepted"),
    (CASE, 0, "", "wrong exit status"),
    (CASE, -11, "", "crash"),
    (CASE, 2, "Traceback (most recent call last):\n  File ...\nValueError: x\n", "traceback"),
    (CASE, 2, "mlirxla-run: internal error: MemoryError: \n", "internal error"),
    (CASE, 2, "mlirxla-run: error: one\nanother line\n", "several lines"),
    (CASE, 2, "Segmentation fault\n", "not a tool error"),
])
def test_outcomes_are_classified(case, status, stderr, verdict):
    assert malformed_inputs.classify(case, status, stderr)[0] == verdict


def test_sizes_in_words():
    assert memory.human(12) == "12 bytes"
    assert memory.human(1536 << 20) == "1.5 GiB"
    assert memory.human(4 << 40) == "4 TiB"
    assert memory.human((1 << 62) * 32) == "128 EiB"
    assert memory.tensor_bytes((4611686018427387904, 8), 4) == 1 << 67


def test_an_execution_too_large_says_how_much_it_needs(monkeypatch):
    from mlirxla.runtime.client import Client

    executable = Client().compile("""func.func @main(%a: tensor<f32>) -> tensor<33554432xf32> {
  %0 = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<33554432xf32>
  return %0 : tensor<33554432xf32>
}
""")
    monkeypatch.setattr(memory, "available", lambda: (100 << 20, "the test allows 100 MiB"))
    with pytest.raises(MlirxlaError) as raised:
        executable.execute_numpy([np.float32(1)])
    assert str(raised.value) == "one execution needs 128 MiB (the output f32[33554432] alone 128 MiB); the test allows 100 MiB"


def test_regions_nest_up_to_the_limit():
    limit = nesting.MAX_REGION_DEPTH
    frontdoor.import_bytes(malformed_inputs.nested_bytecode(limit + 1), "deep.mlirbc", new_context())
    with pytest.raises(MlirxlaError, match=f"regions nest more than {limit} deep"):
        frontdoor.import_bytes(malformed_inputs.nested_bytecode(limit + 2), "deep.mlirbc", new_context())


def test_text_nesting_is_measured_outside_strings_and_comments():
    brackets = "[" * 600 + "]" * 600
    text = f'func.func @main(%a: tensor<f32>) -> tensor<f32> attributes {{note = "{brackets}"}} {{\n  // {brackets}\n  return %a : tensor<f32>\n}}\n'
    frontdoor.import_text(text, "quoted.mlir", new_context())
    escaped = f'\\"{brackets}\\\\'  # an escaped quote, brackets, an escaped backslash: all inside one string
    frontdoor.import_text(text.replace(f'"{brackets}"', f'"{escaped}"'), "escaped.mlir", new_context())
    with pytest.raises(MlirxlaError, match=r"deep\.mlir:1:\d+: brackets nest 60\d deep"):
        frontdoor.import_text(malformed_inputs.nested_array_attribute(600), "deep.mlir", new_context())


def test_strings_that_are_not_utf8_are_refused_with_their_attribute():
    text = 'func.func @main(%a: tensor<f32>) -> tensor<f32> attributes {note = "\\FF\\FE"} {\n  return %a : tensor<f32>\n}\n'
    with pytest.raises(MlirxlaError) as raised:
        frontdoor.import_text(text, "bytes.mlir", new_context())
    assert str(raised.value) == "bytes.mlir:1:1: func.func: attribute 'note' holds a string that is not UTF-8"


def npz_file(tmp_path, **arrays) -> str:
    path = tmp_path / "inputs.npz"
    np.savez(path, **arrays)
    return str(path)


def parameter(index: int, dtype, shape: tuple[int, ...], type_text: str) -> npz_inputs.Parameter:
    return npz_inputs.Parameter(index, np.dtype(dtype), shape, type_text, type_text)


def test_npz_arrays_of_ml_dtypes_read_back(tmp_path):
    """np.save writes bfloat16 as two raw bytes (void): such an array is read as the parameter's dtype."""
    values = np.array([1.5, -2.0, 3.25], ml_dtypes.bfloat16)
    path = npz_file(tmp_path, arg0=values)
    [array] = npz_inputs.read_arguments(path, [parameter(0, ml_dtypes.bfloat16, (3,), "tensor<3xbf16>")], "main")
    assert array.dtype == ml_dtypes.bfloat16 and np.array_equal(array, values)


def test_npz_arrays_named_otherwise_go_in_file_order(tmp_path):
    path = npz_file(tmp_path, weights=np.ones(2, np.float32), bias=np.zeros(3, np.float32))
    parameters = [parameter(0, np.float32, (2,), "tensor<2xf32>"), parameter(1, np.float32, (3,), "tensor<3xf32>")]
    weights, bias = npz_inputs.read_arguments(path, parameters, "main")
    assert weights.shape == (2,) and bias.shape == (3,)


def test_npz_names_are_all_numbered_or_none(tmp_path):
    path = npz_file(tmp_path, arg0=np.ones(2, np.float32), weights=np.ones(2, np.float32))
    parameters = [parameter(i, np.float32, (2,), "tensor<2xf32>") for i in range(2)]
    with pytest.raises(MlirxlaError, match="named arg0, weights: name them all arg0, arg1, ... or none of them"):
        npz_inputs.read_arguments(path, parameters, "main")


def test_a_single_npy_file_is_named_for_what_it_is(tmp_path):
    path = tmp_path / "inputs.npz"
    stream = io.BytesIO()
    np.save(stream, np.ones(2, np.float32))
    path.write_bytes(stream.getvalue())
    with pytest.raises(MlirxlaError, match="a single .npy array, not an .npz archive"):
        npz_inputs.read_arguments(str(path), [parameter(0, np.float32, (2,), "tensor<2xf32>")], "main")
