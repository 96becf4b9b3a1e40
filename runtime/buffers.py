"""What lives on a device: `Device` (one of a client's) and `Buffer` (an immutable array in
host memory on one device), apart from the client so that sharded arrays
(`runtime/sharded.py`), which the client executes, hold buffers without importing it."""

from dataclasses import dataclass, field

import numpy as np

from mlirxla.errors import MlirxlaError


@dataclass(frozen=True)
class Device:
    id: int
    client: object = field(repr=False, compare=False)  # the runtime.client.Client it belongs to
    platform: str = "cpu"
    device_kind: str = "cpu"
    process_index: int = 0  # the process that holds it, in a client across processes

    def __str__(self) -> str:
        return f"mlirxla:{self.platform}:{self.id}"


class Buffer:
    """An immutable array on a device (host memory)."""

    def __init__(self, array: np.ndarray, device: Device):
        self._array = array
        self.device = device

    @property
    def shape(self) -> tuple[int, ...]:
        return self._live().shape

    @property
    def dtype(self) -> np.dtype:
        return self._live().dtype

    def to_numpy(self) -> np.ndarray:
        return self._live()

    def delete(self) -> None:
        self._array = None

    def is_deleted(self) -> bool:
        return self._array is None

    def _live(self) -> np.ndarray:
        if self._array is None:
            raise MlirxlaError("the buffer was deleted (donated or deleted explicitly)")
        return self._array

    def __repr__(self) -> str:
        return "Buffer(deleted)" if self._array is None else f"Buffer({self._array.dtype}{list(self._array.shape)} on {self.device})"
