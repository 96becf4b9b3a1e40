"""What the plugin's jax-side rules share (`jax_plugin.py`, `jax_dlpack.py`,
`jax_buffer_callback.py`): the platform's name, whether jax started its own cpu backend in
this process, and the emission of a host callback (a `custom_call @mlirxla.python_callback`
the cpu backend runs as a host call)."""

import functools

PLATFORM = "mlirxla"


def emit(context, arguments, function, name: str, has_side_effect: bool, result_avals=None) -> list:
    """A `custom_call @mlirxla.python_callback` calling `function` (arrays in, a list of arrays
    out) on the host, with the lowered primitive's results (or `result_avals`) as its results."""
    from jax._src.interpreters import mlir

    from mlirxla.runtime import callbacks

    identifier = callbacks.register(function, name)
    # jax keeps it with the executable, and dispatches a program with host callbacks on
    # its path that threads ordered effects' tokens (its ahead-of-time fast path does not)
    context.module_context.add_host_callback(function)
    avals = context.avals_out if result_avals is None else result_avals
    result_types = [mlir.aval_to_ir_type(context.module_context, aval) for aval in avals]
    call = mlir.custom_call(callbacks.TARGET, result_types=result_types, operands=list(arguments),
                            backend_config=str(identifier), has_side_effect=has_side_effect, api_version=1)
    return list(call.results)


def has_cpu_backend() -> bool:
    """Whether jax started its own cpu backend in this process."""
    from jax._src import xla_bridge

    try:
        xla_bridge.get_backend("cpu")
    except RuntimeError:
        return False
    return True


def callback_name(kind: str, callback) -> str:
    """How errors name a callback: its kind and the Python function jax wraps."""
    function = getattr(callback, "callback_func", callback)
    while isinstance(function, functools.partial):
        function = function.func
    return f"{kind} {getattr(function, '__qualname__', type(function).__name__)!r}"
