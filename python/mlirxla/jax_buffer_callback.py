"""`jax.experimental.buffer_callback` on mlirxla.

jax lowers a buffer callback to an XLA FFI custom call that hands the Python function the
device buffers themselves (jaxlib's `Buffer`), for cpu, cuda and rocm only. On mlirxla it
becomes the plugin's host callback (`mlirxla.python_callback`), which passes the operands
as numpy arrays and takes the results back as numpy arrays; here those arrays are wrapped as
buffers: the inputs read-only, the outputs fresh writable arrays that the function fills in
place (an output aliased to an input by `input_output_aliases` starts as that input's values
and is the same memory the input buffer shows, as XLA gives it). The execution context has
the execute stage and no stream, as on cpu.
"""

import numpy as np

from mlirxla.jax_host_calls import PLATFORM, callback_name, emit


class HostBuffer:
    """What the callback gets for each operand and result: jaxlib's `Buffer` on cpu, over a
    numpy array (`__array__`, `__dlpack__`, shape, dtype, writeable)."""

    def __init__(self, array: np.ndarray, writeable: bool):
        self._array = array if writeable else array.view()
        if not writeable:
            self._array.flags.writeable = False
        self.writeable = writeable

    @property
    def shape(self):
        return self._array.shape

    @property
    def dtype(self):
        return self._array.dtype

    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self._array, dtype=dtype)
        return self._array if dtype is None else self._array.astype(dtype, copy=False)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self._array.__dlpack__(max_version=max_version, copy=copy)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class HostExecutionContext:
    """The callback's execution context on a host platform: the execute stage, no stream."""

    def __init__(self, stage):
        self.stage = stage

    @property
    def stream(self):
        import jax

        raise jax.errors.JaxRuntimeError("XLA FFI GPU context is not available")


def register(module) -> None:
    """The buffer callback's lowering rule for mlirxla (`module` is jax's `_src.buffer_callback`)."""
    from jax._src import tree_util
    from jax._src.interpreters import mlir

    def lowering(context, *arguments, callback, in_tree, out_tree, has_side_effect, input_output_aliases, **_):
        source_of_output = {output: operand for operand, output in input_output_aliases}
        result_avals = list(context.avals_out)

        def run(*operands):
            inputs = [np.asarray(operand) for operand in operands]
            outputs = [inputs[source_of_output[index]].copy() if index in source_of_output
                       else np.zeros(aval.shape, aval.dtype) for index, aval in enumerate(result_avals)]
            aliased_inputs = {operand: outputs[output] for output, operand in source_of_output.items()}
            in_buffers = [HostBuffer(aliased_inputs.get(index, array), writeable=False)
                          for index, array in enumerate(inputs)]
            out_buffers = [HostBuffer(array, writeable=True) for array in outputs]
            positional, keywords = tree_util.tree_unflatten(in_tree, in_buffers)
            returned = callback(HostExecutionContext(module.ExecutionStage.EXECUTE),
                                tree_util.tree_unflatten(out_tree, out_buffers), *positional, **keywords)
            if returned is not None:
                raise ValueError("buffer_callback callback must not return any values.")
            return outputs

        return emit(context, arguments, run, callback_name("buffer_callback", callback), has_side_effect)

    mlir.register_lowering(module.buffer_callback_p, lowering, platform=PLATFORM)
