"""Adds the CMake build of the PJRT plugin to setuptools; all metadata lives in pyproject.toml."""

import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    """A library that CMake builds from CMakeLists.txt.

    `sources` names what CMake reads only so that an sdist carries it; setuptools never
    compiles them itself.
    """

    def __init__(self, name: str, sources: list[str]):
        super().__init__(name, sources=sources)


class CMakeBuild(build_ext):
    def get_ext_filename(self, fullname: str) -> str:
        # The plugin is dlopen'ed by path (it is no Python module), so its file name carries
        # no CPython tag. setuptools asks both with the full dotted name and its last part.
        if isinstance(self.ext_map.get(fullname), CMakeExtension):
            return os.path.join(*fullname.split(".")) + ".so"
        return super().get_ext_filename(fullname)

    def build_extension(self, ext: Extension) -> None:
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        # setuptools copies the result into the source tree itself for editable installs.
        output_dir = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        build_dir = os.path.abspath(self.build_temp)
        subprocess.run(
            ["cmake", "-S", ROOT, "-B", build_dir,
             f"-DMLIRXLA_PJRT_OUTPUT_DIR={output_dir}",
             f"-DPython3_EXECUTABLE={sys.executable}",
             "-DCMAKE_BUILD_TYPE=Release"],
            check=True)
        subprocess.run(["cmake", "--build", build_dir], check=True)


setup(
    ext_modules=[
        CMakeExtension(
            "mlirxla.runtime.pjrt.libmlirxla_pjrt",
            sources=["CMakeLists.txt", "runtime/pjrt/mlirxla_pjrt.c",
                     "runtime/pjrt/fetch_pjrt_header.py"]),
    ],
    cmdclass={"build_ext": CMakeBuild},
)
