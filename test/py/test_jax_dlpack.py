"""DLPack on the plugin (`python/mlirxla/jax_dlpack.py`): mlirxla arrays export as DLPack CPU
tensors and CPU tensors import onto mlirxla, with and without jax's own cpu backend in the
process, compared with the numpy arrays they came from."""

import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax._src.typing import DLDeviceType  # noqa: E402

pytestmark = pytest.mark.jax

HOST = np.arange(12, dtype=np.float32).reshape(3, 4) / 7


@pytest.fixture(scope="module")
def mlirxla():
    try:
        return jax.devices("mlirxla")[0]
    except RuntimeError as error:
        pytest.fail(f"the mlirxla plugin did not register: {error}")


def test_an_mlirxla_array_exports_to_numpy_without_a_copy(mlirxla):
    x = jax.device_put(HOST, mlirxla) * 2
    assert x.__dlpack_device__() == (DLDeviceType.kDLCPU, 0)
    exported = np.from_dlpack(x)
    np.testing.assert_array_equal(exported, HOST * 2)
    assert np.shares_memory(exported, np.asarray(x))
    assert not exported.flags.writeable  # a jax array is never written through


def test_consumers_of_dlpack_before_1_0_get_a_copy_or_a_refusal(mlirxla):
    x = jax.device_put(HOST, mlirxla)
    np.testing.assert_array_equal(np.from_dlpack(Legacy(x)), HOST)
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__(copy=False)


def test_a_numpy_array_imports_onto_an_mlirxla_device(mlirxla):
    imported = jnp.from_dlpack(HOST, device=mlirxla)
    assert imported.devices() == {mlirxla}
    np.testing.assert_array_equal(np.asarray(imported), HOST)
    assert np.asarray(imported).dtype == HOST.dtype


def test_an_mlirxla_array_imports_back_onto_its_device(mlirxla):
    x = jax.device_put(HOST, mlirxla)
    imported = jax.dlpack.from_dlpack(x)
    assert imported.devices() == {mlirxla}
    np.testing.assert_array_equal(np.asarray(imported), HOST)


def test_copy_false_refuses_memory_mlirxla_must_copy(mlirxla):
    unaligned = np.frombuffer(np.zeros(17, np.uint8).tobytes(), np.uint8)[1:].view(np.float32)
    with pytest.raises(ValueError, match="requires a copy"):
        jnp.from_dlpack(unaligned, device=mlirxla, copy=False)
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(unaligned, device=mlirxla)), unaligned)


class Legacy:
    """A producer as numpy sees one written before DLPack 1.0: it hands on no max_version."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


WITHOUT_CPU = """
import jax, jax.numpy as jnp, numpy as np
host = np.arange(6, dtype=np.int32).reshape(2, 3)
jax.devices()  # the plugin takes over DLPack when jax starts its backends
imported = jnp.from_dlpack(host)
assert imported.devices() == set(jax.devices()), imported.devices()
exported = np.from_dlpack(imported + 1)
print(exported.tolist(), jax.dlpack.from_dlpack(imported).platform())
"""


def test_dlpack_without_a_cpu_backend():
    """Under JAX_PLATFORMS=mlirxla jax's own import looks for a cpu backend that is not there."""
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", WITHOUT_CPU], env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[[1, 2, 3], [4, 5, 6]] mlirxla"
