"""The arguments of `mlirxla-run --inputs x.npz`: an .npz archive (a zip of .npy arrays).

Arrays named arg0, arg1, ... go to those parameters; arrays named otherwise go in file
order. Every array's header (its dtype and shape) is checked against its parameter before
its data is read, so that an archive claiming 2^40 elements, or holding pickled Python
objects, is refused without allocating or unpickling anything.
"""

import re
import zipfile
import zlib
from dataclasses import dataclass

import numpy as np

from mlirxla.errors import MlirxlaError, first_line

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"
ARGUMENT_NAME = re.compile(r"arg(\d+)")
# what reading a damaged zip member raises: a bad CRC, a bad deflate stream, a short file,
# an encrypted or unsupported member
READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)


@dataclass(frozen=True)
class Parameter:
    """What the entry function takes at one position."""

    index: int
    dtype: np.dtype
    shape: tuple[int, ...]
    type_text: str  # tensor<2x3xf32>
    spec: str  # f32[2,3]


@dataclass(frozen=True)
class Header:
    dtype: np.dtype
    shape: tuple[int, ...]


def read_arguments(path: str, parameters: list[Parameter], entry: str) -> list[np.ndarray]:
    with open_archive(path) as archive:
        members = array_members(archive, path)
        if len(members) != len(parameters):
            raise MlirxlaError(f"the entry function takes {len(parameters)} arguments, got {len(members)} arrays", path)
        ordered = in_parameter_order(members, path)
        headers = [read_header(archive, member, path) for member in ordered]
        for parameter, member, header in zip(parameters, ordered, headers):
            check_header(parameter, header, entry, array_name(member), path)
        return [read_array(archive, member, parameter, path) for parameter, member in zip(parameters, ordered)]


def open_archive(path: str) -> zipfile.ZipFile:
    try:
        with open(path, "rb") as stream:
            start = stream.read(len(NPY_MAGIC))
        if not start.startswith(ZIP_MAGIC):
            raise MlirxlaError(not_an_archive(start), path)
        return zipfile.ZipFile(path)
    except OSError as error:
        raise MlirxlaError(f"cannot read inputs: {error.strerror}", path) from None
    except (zipfile.BadZipFile, ValueError, EOFError) as error:
        raise MlirxlaError(f"cannot read inputs as .npz: {first_line(error)}", path) from None


def not_an_archive(start: bytes) -> str:
    if not start:
        return "the inputs file is empty; expected an .npz archive (a zip of .npy arrays)"
    if start.startswith(NPY_MAGIC):
        return "a single .npy array, not an .npz archive of the arguments (np.savez writes one)"
    return "not an .npz archive (a zip of .npy arrays, as np.savez writes)"


def array_members(archive: zipfile.ZipFile, path: str) -> list[str]:
    members = []
    for member in archive.namelist():
        if member.endswith("/"):
            continue
        if not member.endswith(".npy"):
            raise MlirxlaError(f"the archive holds '{member}', which is not a .npy array", path)
        members.append(member)
    return members


def array_name(member: str) -> str:
    return member.removesuffix(".npy")


def in_parameter_order(members: list[str], path: str) -> list[str]:
    """The members by parameter: by their argN names when every array has one, else in file order."""
    numbered = [ARGUMENT_NAME.fullmatch(array_name(member)) for member in members]
    if not all(numbered):
        if any(numbered):
            names = ", ".join(array_name(member) for member in members)
            raise MlirxlaError(f"the arrays are named {names}: name them all arg0, arg1, ... or none of them", path)
        return members
    by_index = {int(match.group(1)): member for match, member in zip(numbered, members)}
    expected = list(range(len(members)))
    if sorted(by_index) != expected:
        names = ", ".join(array_name(member) for member in members)
        raise MlirxlaError(f"the arrays are named {names}; expected arg0 to arg{len(members) - 1}", path)
    return [by_index[index] for index in expected]


def read_header(archive: zipfile.ZipFile, member: str, path: str) -> Header:
    try:
        with archive.open(member) as stream:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
            else:
                raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except READ_ERRORS as error:
        raise MlirxlaError(f"cannot read array '{array_name(member)}': {first_line(error)}", path) from None
    return Header(dtype, tuple(shape))


def check_header(parameter: Parameter, header: Header, entry: str, name: str, path: str) -> None:
    where = f"argument #{parameter.index} of @{entry} (array '{name}')"
    if header.dtype.hasobject:
        raise MlirxlaError(f"{where} holds Python objects (a pickle), which are never loaded; expected {parameter.type_text}", path)
    if header.shape != parameter.shape:
        raise MlirxlaError(f"{where}: expected shape {list(parameter.shape)} ({parameter.type_text}), got {list(header.shape)}", path)
    if not same_dtype(header.dtype, parameter.dtype):
        raise MlirxlaError(f"{where}: expected dtype {parameter.dtype} ({parameter.type_text}), got {header.dtype}", path)


def same_dtype(stored: np.dtype, expected: np.dtype) -> bool:
    """Whether the stored dtype holds the parameter's values: the same dtype, or raw bytes of
    its size for the ml_dtypes types (bfloat16, float8, int4), which np.save writes as void."""
    if stored == expected:
        return True
    return stored.kind == "V" and stored.names is None and expected.kind == "V" and stored.itemsize == expected.itemsize


def read_array(archive: zipfile.ZipFile, member: str, parameter: Parameter, path: str) -> np.ndarray:
    try:
        with archive.open(member) as stream:
            array = np.lib.format.read_array(stream, allow_pickle=False)
    except READ_ERRORS as error:
        raise MlirxlaError(f"cannot read array '{array_name(member)}': {first_line(error)}", path) from None
    return array if array.dtype == parameter.dtype else array.view(parameter.dtype)
