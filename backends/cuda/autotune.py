"""Tile parameters of the row, column and transpose emitters and where they come from: a results file the tuner
wrote on a GPU (XLA's autotune results file, `--xla_gpu_load_autotune_results_from`), or a
heuristic default.

A kernel's *fingerprint* is a hash of its bufferized IR (shapes included, its own symbol
left out), so that the same kernel in another program finds the same entry. The file is
JSON, keyed by GPU name (as `nvidia-smi` names it, "NVIDIA H200") then by fingerprint:

    {"format": "mlirxla-cuda-autotune", "version": 1,
     "results": {"NVIDIA H200": {"<fingerprint>": {"emitter": "row", "threads_per_row": 128, "rows_per_block": 1,
                                                   "ms": 0.021, "default_ms": 0.025, "candidates": 5}}}}

The compiler reads the file `MLIRXLA_CUDA_AUTOTUNE` names, or, when it is unset, the package's
own `autotune-results.json` (what the tuner measured on the GPUs lent to this project: an
H100's so far; `MLIRXLA_CUDA_AUTOTUNE=` empty reads none). An entry applies when its tiling
is valid for the kernel (a stale file cannot make a wrong kernel) and it was measured on a
GPU whose name contains the target's name ("H200"), or else on another GPU of the target's
SM architecture (an H100's entries serve an sm_90 compile with no H200 entry).
`scripts/gpu-check --tune` writes such a file from the candidates `scripts/gpu-pack`
compiled (`candidates`).
"""

import hashlib
import json
import os
import re
from dataclasses import dataclass, fields

from mlirxla.errors import MlirxlaError

ENVIRONMENT = "MLIRXLA_CUDA_AUTOTUNE"
# what the tuner measured on the GPUs lent to this project (`scripts/gpu-check --tune`)
PACKAGED_RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autotune-results.json")
# a results entry measured on one model serves another of its SM architecture (same SMs,
# shared memory and registers per SM; the H100 and H200 differ in HBM alone)
GPU_ARCHITECTURES = {"H100": "sm_90", "H200": "sm_90", "H800": "sm_90", "H20": "sm_90", "A100": "sm_80", "A800": "sm_80"}
FORMAT = "mlirxla-cuda-autotune"
MAX_BLOCK = 1024  # threads per block on sm_80 and sm_90
WARP = 32


@dataclass(frozen=True)
class RowTiling:
    """A row emitter launch: `threads_per_row` threads per row (a power of two, at most the
    shortest reduced length), `rows_per_block` rows per block."""

    threads_per_row: int
    rows_per_block: int
    kind = "row"

    @property
    def block(self) -> int:
        return self.threads_per_row * self.rows_per_block

    def valid_for(self, shortest_reduction: int) -> bool:
        t = self.threads_per_row
        return (t >= 1 and t & (t - 1) == 0 and t <= shortest_reduction and self.rows_per_block >= 1
                and self.block <= MAX_BLOCK and (t <= WARP or t % WARP == 0))

    def describe(self) -> str:
        return f"{self.threads_per_row} thread(s) per row, {self.rows_per_block} row(s) per block"


@dataclass(frozen=True)
class ColumnTiling:
    """A column emitter launch: 32 consecutive columns per block, `rows_per_pass` threads
    per column (a power of two, at most 32 and at most the reduced length), each folding
    every `rows_per_pass`-th row."""

    rows_per_pass: int
    kind = "column"

    @property
    def block(self) -> int:
        return WARP * self.rows_per_pass

    def valid_for(self, reduced_length: int) -> bool:
        r = self.rows_per_pass
        return r >= 1 and r & (r - 1) == 0 and r <= min(WARP, reduced_length)

    def describe(self) -> str:
        return f"32 columns per block, {self.rows_per_pass} thread(s) per column"


@dataclass(frozen=True)
class TransposeTiling:
    """A transpose emitter launch: a 32 x 32 tile per block, `rows_per_pass` threads per
    tile column (a power of two up to 32), each moving every `rows_per_pass`-th tile row."""

    rows_per_pass: int
    kind = "transpose"

    @property
    def block(self) -> int:
        return WARP * self.rows_per_pass

    def valid_for(self, _: int = 0) -> bool:
        r = self.rows_per_pass
        return r >= 1 and r & (r - 1) == 0 and r <= WARP

    def describe(self) -> str:
        return f"32 x 32 tiles, {self.rows_per_pass} tile row(s) per pass"


TILINGS = {"row": RowTiling, "column": ColumnTiling, "transpose": TransposeTiling}
DEFAULT_TRANSPOSE = TransposeTiling(8)  # XLA:GPU's 32 x 8 threads per 32 x 32 tile
TRANSPOSE_CANDIDATES = [TransposeTiling(r) for r in (2, 4, 8, 16, 32)]


@dataclass(frozen=True)
class Tunable:
    """A launch the tuner may time: its kernel's fingerprint, the default and the candidates
    (the default among them)."""

    fingerprint: str
    default: object
    candidates: tuple


def default_column_tiling(reduced_length: int) -> ColumnTiling:
    return ColumnTiling(min(WARP, power_of_two_at_most(reduced_length)))


def candidate_column_tilings(reduced_length: int) -> list[ColumnTiling]:
    top = min(WARP, power_of_two_at_most(reduced_length))
    return [ColumnTiling(1 << n) for n in range(top.bit_length()) if (1 << n) >= min(4, top)]


def power_of_two_at_most(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def default_row_tiling(rows: int, shortest_reduction: int) -> RowTiling:
    """About four elements per thread, at most 512 threads per row; short rows share a
    block of 256 threads, but a block holds no more rows than there are."""
    threads = min(512, power_of_two_at_most(-(-shortest_reduction // 4)), power_of_two_at_most(shortest_reduction))
    rows_per_block = max(1, 256 // threads)
    rows_per_block = min(rows_per_block, 1 << max(0, (rows - 1).bit_length()))
    return RowTiling(threads, rows_per_block)


def candidate_row_tilings(rows: int, shortest_reduction: int) -> list[RowTiling]:
    """What the tuner times: 1 to 1024 threads per row, blocks of 128 to 1024 threads for
    short rows (the default among them)."""
    found = {default_row_tiling(rows, shortest_reduction)}
    threads = 1
    while threads <= min(MAX_BLOCK, shortest_reduction):
        for block in (128, 256, 512, 1024):
            tiling = RowTiling(threads, max(1, min(block // threads, 1 << max(0, (rows - 1).bit_length()))))
            if tiling.valid_for(shortest_reduction):
                found.add(tiling)
        threads *= 2
    return sorted(found, key=lambda t: (t.threads_per_row, t.rows_per_block))


def fingerprint(kernel_text: str, symbol: str) -> str:
    """A hash of a kernel's IR with its symbol replaced (shapes are in its types)."""
    normalized = re.sub(rf"@{re.escape(symbol)}\b", "@kernel", kernel_text)
    return hashlib.sha256(normalized.encode()).hexdigest()[:24]


def read_cache(path: str) -> dict:
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise MlirxlaError(f"autotune results {path}: cannot be read ({error})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != 1:
        raise MlirxlaError(f"autotune results {path}: not an {FORMAT} version 1 file")
    return data.get("results", {})


def tiling_of(entry: dict):
    """The tiling a results entry names, or None when it names none this compiler knows."""
    kind = TILINGS.get(entry.get("emitter", "row"))
    try:
        return kind(**{f.name: int(entry[f.name]) for f in fields(kind)}) if kind else None
    except (KeyError, TypeError, ValueError):
        return None


def architecture(gpu: str) -> str | None:
    """The SM architecture of a GPU as nvidia-smi or a target names it."""
    return next((arch for model, arch in GPU_ARCHITECTURES.items() if model in gpu), None)


def results_path() -> str | None:
    """The results file compiles read: `MLIRXLA_CUDA_AUTOTUNE` when set (empty: none, every
    kernel's default tiling), else the package's own."""
    if ENVIRONMENT in os.environ:
        return os.environ[ENVIRONMENT] or None
    return PACKAGED_RESULTS if os.path.exists(PACKAGED_RESULTS) else None


def results_identity() -> str:
    """What the compile cache's key takes of the results file: a hash of its bytes."""
    path = results_path()
    if path is None:
        return "none"
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()[:16]
    except OSError:
        return "unreadable"


def tuned_tiling(print_: str, target_name: str, accepts, path: str | None = None):
    """The cached tiling for kernel `print_` and the GPU it was measured on, if one applies
    (`accepts(tiling)`: the emitter's validity check): measured on a GPU named like the
    target first, else on another GPU of the target's architecture. (None, None) otherwise.
    `path`: the results file (`results_path()`'s when None)."""
    path = path if path is not None else results_path()
    if not path:
        return None, None
    results = read_cache(path)
    same_model = [gpu for gpu in results if target_name in gpu]
    same_architecture = [gpu for gpu in results if gpu not in same_model and architecture(gpu) == architecture(target_name)]
    for gpu in same_model + same_architecture:
        entry = results[gpu].get(print_)
        tiling = tiling_of(entry) if entry is not None else None
        if tiling is not None and accepts(tiling):
            return tiling, gpu
    return None, None
