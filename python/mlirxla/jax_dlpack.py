"""DLPack on mlirxla: `np.from_dlpack(x)`, `jnp.from_dlpack(t)`, `torch.from_dlpack(x)`.

jax exchanges arrays through DLPack only on its own platforms: jaxlib names a buffer's DLPack
device by its client's platform (an mlirxla buffer "cannot be used as a DLPack device"), and
`from_dlpack` looks up jax's `cpu` backend for a tensor in host memory (there is none under
`JAX_PLATFORMS=mlirxla`). The plugin's buffers are host memory, so an mlirxla array is a
DLPack CPU tensor:

- exporting hands out numpy's zero-copy view of the buffer. That view is read-only, which
  only DLPack 1.0 can say; a consumer asking for an older version gets a copy (or a
  BufferError with `copy=False`), since jax arrays must not be written through;
- importing a CPU tensor takes numpy's view of it and puts that on the mlirxla device, which
  keeps host memory without a copy when it is aligned, as for any host array. This happens
  where jax's own path cannot: the caller asks for an mlirxla device, or asks for none while
  mlirxla is the default backend and jax has no cpu backend. Everything else is jax's own.

The plugin takes these over when jax starts its backends (the first jax operation, or
`jax.devices()`): jax finds plugins only then, so a process whose very first jax call is
`jnp.from_dlpack` under `JAX_PLATFORMS=mlirxla` still meets jax's own import.
"""

import numpy as np

from mlirxla.jax_host_calls import PLATFORM, has_cpu_backend

VERSION_THAT_MARKS_READ_ONLY = (1, 0)


def register() -> None:
    """Route DLPack exports of mlirxla arrays, and imports onto mlirxla, through numpy."""
    import jax.dlpack
    from jax._src import array as jax_array
    from jax._src import dlpack as jax_dlpack
    from jax._src.typing import DLDeviceType

    jax_to_dlpack, jax_from_dlpack = jax_dlpack.to_dlpack, jax_dlpack.from_dlpack
    jax_dlpack_device = jax_array.ArrayImpl.__dlpack_device__

    def to_dlpack(x, stream=None, src_device=None, dl_device=None, max_version=None, copy=None):
        if platform_of(x, src_device) != PLATFORM:
            return jax_to_dlpack(x, stream=stream, src_device=src_device, dl_device=dl_device,
                                 max_version=max_version, copy=copy)
        if dl_device is not None and tuple(dl_device) != (DLDeviceType.kDLCPU, 0):
            raise BufferError(f"an mlirxla array is a DLPack CPU tensor; it cannot be exported to {dl_device}")
        return export(x, max_version, copy)

    def dlpack_device(self):
        if platform_of(self) == PLATFORM:
            return DLDeviceType.kDLCPU, 0
        return jax_dlpack_device(self)

    def from_dlpack(external_array, device=None, copy=None):
        if device is None and isinstance(external_array, jax.Array) and platform_of(external_array) == PLATFORM:
            device, = external_array.sharding.device_set  # jax's rule: back onto the device it came from
        if not imports_onto_mlirxla(external_array, device, DLDeviceType.kDLCPU):
            return jax_from_dlpack(external_array, device=device, copy=copy)
        host = np.from_dlpack(external_array, copy=copy)
        # without a device, uncommitted on the default one, as jnp.asarray leaves a host array
        imported = jax.device_put(host, device)
        if copy is False and not np.may_share_memory(np.asarray(imported), host):
            raise ValueError("Specified input which requires a copy, since mlirxla keeps host memory without one "
                             "only when it is row-major and aligned to its elements. However copy=False. Set "
                             "copy=True or copy=None to perform the requested operation.")
        return imported

    jax_dlpack.to_dlpack = to_dlpack
    jax_dlpack.from_dlpack = jax.dlpack.from_dlpack = from_dlpack
    jax_array.ArrayImpl.__dlpack_device__ = dlpack_device


def platform_of(x, device=None) -> str | None:
    """The platform of the one device `x` lives on (`device` when given), None when several."""
    if device is None:
        devices = x.sharding.device_set
        if len(devices) != 1:
            return None
        device, = devices
    return device.platform


def export(x, max_version, copy):
    """The DLPack capsule of numpy's view of `x`'s buffer (of a copy where `copy` asks or
    the consumer's DLPack version cannot mark the view read-only)."""
    view = np.asarray(x)
    if copy:
        view = view.copy()
    marks_read_only = max_version is not None and tuple(max_version) >= VERSION_THAT_MARKS_READ_ONLY
    if view.flags.writeable or marks_read_only:
        return view.__dlpack__(max_version=max_version)
    if copy is False:
        raise BufferError(f"an mlirxla array exports a read-only view, which DLPack {max_version or 'before 1.0'} "
                          "cannot mark; ask for version 1.0, or allow a copy")
    return view.copy().__dlpack__(max_version=max_version)


def imports_onto_mlirxla(external_array, device, cpu_device_type) -> bool:
    """Whether a DLPack import goes to mlirxla: `device` (a device or a one-device sharding)
    is mlirxla's, or there is none and a CPU tensor has nowhere else to go."""
    from jax._src import xla_bridge
    from jax.sharding import Sharding

    if isinstance(device, Sharding):
        devices = device.device_set
        return len(devices) == 1 and next(iter(devices)).platform == PLATFORM
    if device is not None:
        return device.platform == PLATFORM
    if not hasattr(external_array, "__dlpack_device__") or external_array.__dlpack_device__()[0] != cpu_device_type:
        return False
    return xla_bridge.default_backend() == PLATFORM and not has_cpu_backend()
