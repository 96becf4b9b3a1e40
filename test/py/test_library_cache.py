"""The runtime library's objects persist across processes (`library_cache.py`): a second
process reads the object the first compiled and runs it without compiling; a short or edited
file is compiled again and rewritten; a cache folder that cannot be written leaves the library
working; the folder keeps its most recently used files.

The suite itself uses the default cache (`~/.cache/mlirxla/runtime-library`, which
`scripts/setup` fills): these tests point `MLIRXLA_LIBRARY_CACHE` at a temporary folder and
use im2col, whose compile takes milliseconds, rather than the row engine's seconds.
"""

import os
import subprocess
import sys

import numpy as np

from mlirxla.backends.cpu import build_library, library_cache, llvm_jit, runtime_library

IM2COL = runtime_library.IM2COL

# Run in a fresh process: im2col's object through `library_object`, with compiling forbidden
# when asked; its im2col of a 3x3 image with a 2x2 window (stride 1, no padding), printed with
# the object's SHA-256.
SECOND_PROCESS = f"""
import ctypes, hashlib, sys
import numpy as np
from mlirxla.backends.cpu import llvm_jit, object_archive
if sys.argv[1] == "forbid":
    def refuse(function):
        raise AssertionError("compiled " + function)
    llvm_jit.build_library_object = refuse
code = llvm_jit.library_object("{IM2COL}")
engine = llvm_jit.JitEngine(object_archive.pack([code]))
image = np.arange(9, dtype=np.float32)
rows = np.zeros(16, dtype=np.float32)
signature = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 13)
signature(engine.address("{IM2COL}"))(image.ctypes.data, rows.ctypes.data, 4, 1, 3, 3, 1, 2, 2, 2, 2, 1, 1, 0, 0)
print(hashlib.sha256(code).hexdigest(), " ".join(str(int(x)) for x in rows))
"""


def in_fresh_process(cache: str, mode: str) -> str:
    result = subprocess.run([sys.executable, "-c", SECOND_PROCESS, mode], env={**os.environ, library_cache.VARIABLE: cache},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def expected_rows() -> str:
    image = np.arange(9).reshape(3, 3)
    windows = [image[i:i + 2, j:j + 2].ravel() for i in range(2) for j in range(2)]
    return " ".join(str(x) for x in np.concatenate(windows))


def test_a_second_process_reads_the_object_without_compiling(tmp_path):
    cache = str(tmp_path / "library")
    first = in_fresh_process(cache, "compile")
    assert first.split(" ", 1)[1] == expected_rows()
    assert len(os.listdir(cache)) == 1
    assert in_fresh_process(cache, "forbid") == first


def built_counting(monkeypatch, tmp_path):
    """The cache in a temporary folder, and the list of functions compiled through it."""
    monkeypatch.setenv(library_cache.VARIABLE, str(tmp_path / "library"))
    built = []

    def build():
        built.append(IM2COL)
        return llvm_jit.build_library_object(IM2COL)

    return built, lambda: library_cache.cached_object(IM2COL, llvm_jit.toolchain(), build)


def test_a_short_or_edited_file_is_compiled_again_and_rewritten(monkeypatch, tmp_path):
    built, load = built_counting(monkeypatch, tmp_path)
    good = load()
    path = library_cache.path(IM2COL, llvm_jit.toolchain())
    whole = open(path, "rb").read()
    assert os.stat(path).st_mode & 0o777 == 0o644  # readable by a shared folder's other users
    for damaged in (whole[:len(whole) // 2], whole[:-1] + bytes([whole[-1] ^ 1]), b""):
        with open(path, "wb") as stream:
            stream.write(damaged)
        assert load() == good
        assert open(path, "rb").read() == whole
    assert len(built) == 4
    assert load() == good and len(built) == 4


def test_a_folder_that_cannot_be_written_leaves_the_library_working(monkeypatch, tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_bytes(b"")
    monkeypatch.setenv(library_cache.VARIABLE, str(blocker / "library"))  # under a file: never a folder, even for root
    built = []
    code = library_cache.cached_object(IM2COL, llvm_jit.toolchain(), lambda: built.append(1) or llvm_jit.build_library_object(IM2COL))
    assert code == llvm_jit.build_library_object(IM2COL) and built == [1]


def test_the_default_folder_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv(library_cache.VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert library_cache.directory() == os.path.join(str(tmp_path), "mlirxla", "runtime-library")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert library_cache.directory() == os.path.expanduser(os.path.join("~", ".cache", "mlirxla", "runtime-library"))


def test_the_folder_keeps_its_most_recently_used_files(monkeypatch, tmp_path):
    monkeypatch.setattr(library_cache, "LIMIT", 3)
    for index in range(5):
        path = tmp_path / f"{index}.o"
        path.write_bytes(b"x")
        os.utime(path, (index, index))
    library_cache.prune(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["2.o", "3.o", "4.o"]


def test_the_build_entry_point_builds_then_finds(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(library_cache.VARIABLE, str(tmp_path / "library"))
    monkeypatch.setattr(runtime_library, "FUNCTIONS", (IM2COL,))
    llvm_jit.library_object.cache_clear()
    try:
        build_library.main([])
        llvm_jit.library_object.cache_clear()
        build_library.main([])
    finally:
        llvm_jit.library_object.cache_clear()
    printed = capsys.readouterr().out
    assert f"runtime library cache: {tmp_path / 'library'}" in printed
    assert f"{IM2COL}: built" in printed and f"{IM2COL}: cached" in printed
