"""One run of IREE's compiler (`iree-compile`, in a child process, so that a crash in it is an
error here): StableHLO text in, a `.vmfb` out, with the dispatch list read off IREE's
scheduling statistics and, when dumping, its phase dumps and executables.

Flags, in order: the target's, the backend's own (StableHLO input; f64 kept f64 as in XLA,
where IREE would demote it), then the user's (`--iree-flag`, `iree_flags`); a user flag
replaces a flag of the same name before it, since iree-compile takes each flag once.
"""

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field

from mlirxla.errors import MlirxlaError, first_line

from .toolchain import Target

OWN_FLAGS = ("--iree-input-type=stablehlo", "--iree-input-demote-f64-to-f32=false")
DISPATCHES = re.compile(r"^//\s*Dispatches: (\d+)", re.MULTILINE)
EXPORT = re.compile(r"^// stream\.executable\.export @[\w$.-]+::@([\w$.-]+)", re.MULTILINE)
INPUT_DUMP = "iree-input.stablehlo.mlir"  # the dump file (suffix) of the text IREE compiles
PHASE = re.compile(r"^.*?\.(\d+)\.([\w-]+\.mlir)$")
DIAGNOSTIC = re.compile(r"^(.*?):(\d+):(\d+): error: (.*)$", re.MULTILINE)


@dataclass
class IreeModule:
    """What iree-compile made: the module, its dispatch list, and (when dumping) the files of
    its phase dumps and executables by name."""

    vmfb: bytes
    dispatch_count: int  # dispatch ops in the program's command buffers (loop bodies once)
    dispatches: list[str]  # the executables' entry points
    statistics: str
    artifacts: dict[str, bytes] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)


def flag_name(flag: str) -> str:
    return flag.split("=", 1)[0]


def merged_flags(ours: tuple[str, ...], users: tuple[str, ...]) -> list[str]:
    """Our flags, less those the user sets again, then the user's."""
    for flag in users:
        if not flag.startswith("-"):
            raise MlirxlaError(f"--iree-flag takes a flag of iree-compile ('--name=value'), got '{flag}'")
    replaced = {flag_name(flag) for flag in users}
    return [flag for flag in ours if flag_name(flag) not in replaced] + list(users)


def compile_text(text: str, target: Target, user_flags: tuple[str, ...] = (), dumping: bool = False) -> IreeModule:
    from iree.compiler.tools.binaries import find_tool

    with tempfile.TemporaryDirectory(prefix="mlirxla-iree-") as work:
        paths = {name: os.path.join(work, name) for name in ("input.mlir", "module.vmfb", "statistics.txt", "phases", "executables")}
        with open(paths["input.mlir"], "w") as stream:
            stream.write(text)
        observing = ["--iree-scheduling-dump-statistics-format=verbose", f"--iree-scheduling-dump-statistics-file={paths['statistics.txt']}"]
        if dumping:
            observing += [f"--dump-compilation-phases-to={paths['phases']}", f"--iree-hal-dump-executable-files-to={paths['executables']}"]
        flags = merged_flags(target.flags + OWN_FLAGS, user_flags)
        command = [find_tool("iree-compile"), paths["input.mlir"], *flags, *observing, "-o", paths["module.vmfb"]]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise refusal(done.stderr, done.returncode, paths["input.mlir"])
        with open(paths["module.vmfb"], "rb") as stream:
            vmfb = stream.read()
        statistics = read_text(paths["statistics.txt"])
        artifacts = phase_dumps(paths["phases"]) | collected_files(paths["executables"]) if dumping else {}
    count = DISPATCHES.search(statistics)
    return IreeModule(vmfb, int(count.group(1)) if count else 0, EXPORT.findall(statistics), statistics, artifacts,
                      ["iree-compile", "input.mlir", *flags, "-o", "module.vmfb"])


def read_text(path: str) -> str:
    try:
        with open(path) as stream:
            return stream.read()
    except OSError:
        return ""


def collected_files(folder: str) -> dict[str, bytes]:
    """The files IREE dumped under `folder`, by name."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in sorted(names):
            with open(os.path.join(root, name), "rb") as stream:
                found[os.path.relpath(os.path.join(root, name), folder)] = stream.read()
    return found


def phase_dumps(folder: str) -> dict[str, bytes]:
    """IREE's phase dumps (`<module>.<N>.<phase>.mlir`) as `phase<NN>.<phase>.mlir`, in order."""
    renamed = {}
    for name, data in collected_files(folder).items():
        match = PHASE.match(name)
        renamed[f"phase{int(match.group(1)):02d}.{match.group(2)}" if match else name] = data
    return renamed


def refusal(stderr: str, status: int, input_path: str) -> MlirxlaError:
    """IREE's first error as ours: its message at the op's location in the input (the text
    carries the source's locations, so they name the user's file)."""
    diagnostic = DIAGNOSTIC.search(stderr)
    if diagnostic is None:
        how = f"exit status {status}" if status > 0 else f"killed by signal {-status}"
        return MlirxlaError(f"IREE's compiler failed ({how}): {first_line(stderr) or 'no message'}")
    path, line, column, message = diagnostic.groups()
    file = INPUT_DUMP if path == input_path else path  # an op without a source location: where it is in the dump
    return MlirxlaError(f"IREE's compiler: {message}", f"{file}:{line}:{column}")
