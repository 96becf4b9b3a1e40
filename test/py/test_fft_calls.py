"""FFTs as host calls (`runtime/host_calls.fft`): scipy's pocketfft, single precision kept,
threads only for transforms large enough to pay for the hand-off."""

import numpy as np
import pytest
import scipy.fft

from mlirxla.runtime import host_calls
from mlirxla.runtime.client import Client
from mlirxla.runtime.threads import cpu_threads

FFT = """func.func @main(%x: tensor<{rows}x{length}xcomplex<f32>>) -> tensor<{rows}x{length}xcomplex<f32>> {{
  %0 = stablehlo.fft %x, type = FFT, length = [{length}] : (tensor<{rows}x{length}xcomplex<f32>>) -> tensor<{rows}x{length}xcomplex<f32>>
  return %0 : tensor<{rows}x{length}xcomplex<f32>>
}}"""


@pytest.mark.parametrize("rows, length", [(16, 16), (512, 512)])
def test_an_fft_uses_threads_only_from_its_threshold(rows, length, monkeypatch):
    """A 16 x 16 transform runs on the calling thread (pocketfft's hand-off to another took
    70 us, four times the transform); one of 2^18 elements on the runtime's threads. The
    values are numpy's, in complex64."""
    workers = []
    transform = scipy.fft.fftn
    monkeypatch.setattr(scipy.fft, "fftn", lambda *args, **kwargs: workers.append(kwargs["workers"]) or transform(*args, **kwargs))
    executable = Client().compile(FFT.format(rows=rows, length=length))
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((rows, length)) + 1j * rng.standard_normal((rows, length))).astype(np.complex64)
    (got,) = executable.execute_numpy([x])
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, np.fft.fft(x), rtol=1e-4, atol=1e-3 * np.sqrt(length))
    expected = cpu_threads() if rows * length >= host_calls.FFT_THREADS_FROM else 1
    assert workers == [expected]
