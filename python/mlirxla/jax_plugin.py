"""JAX's entry point into mlirxla (the `jax_plugins` entry point group): JAX imports this
module while it discovers backends and calls `initialize`, which registers the PJRT plugin
library under the platform name `mlirxla`. Then `jax.devices("mlirxla")` lists its devices
and `JAX_PLATFORMS=mlirxla` makes it the default backend.

`MLIRXLA_NUM_DEVICES` (default 1) sets how many virtual CPU devices the client shows (jax's
`jax_num_cpu_devices` is its cpu backend's alone); `jax.config.update(
"jax_pjrt_client_create_options", "num_devices:8")` before the first use of jax does too.
"""

import functools
import os

from mlirxla.jax_host_calls import PLATFORM, callback_name, emit, has_cpu_backend

# below jax's own cpu backend (0): installing mlirxla never changes jax's default device;
# JAX_PLATFORMS=mlirxla (or jax.devices("mlirxla")) asks for it
PRIORITY = -100
SPARSE_SOLVER_MODULE = "jax.experimental.sparse.linalg"


def library_path() -> str:
    """The plugin library next to the installed runtime package."""
    from mlirxla.runtime import pjrt

    return os.path.join(os.path.dirname(pjrt.__file__), "libmlirxla_pjrt.so")


def initialize() -> None:
    from jax._src import xla_bridge
    from jax._src.interpreters import mlir

    path = library_path()
    if not os.path.exists(path):
        raise RuntimeError(f"mlirxla's PJRT plugin is not built ({path} is missing): reinstall mlirxla")
    # read when jax creates the client, not at plugin discovery, so that a program may set it
    # after importing jax; jax adds `jax_pjrt_client_create_options` ("num_devices:8") on top
    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=path,
                               options=lambda: {"num_devices": int(os.environ.get("MLIRXLA_NUM_DEVICES", "1"))})
    # jax keeps the platforms that honour donate_argnums in a private list, and drops donation
    # (with a warning) for any platform not in it; the plugin implements donation
    if PLATFORM not in mlir._platforms_with_donation:
        mlir._platforms_with_donation.append(PLATFORM)
    register_host_callbacks()
    register_linear_algebra()
    register_dlpack()
    when_imported(SPARSE_SOLVER_MODULE, register_sparse_solver)
    when_imported("jax._src.checkify", register_check)
    when_imported("jax._src.buffer_callback", register_buffer_callback)


def register_dlpack() -> None:
    """DLPack exports of mlirxla arrays and imports onto mlirxla (`jax_dlpack.py`)."""
    from mlirxla import jax_dlpack

    jax_dlpack.register()


def register_host_callbacks() -> None:
    """`jax.debug.print`, `jax.debug.callback`, `jax.pure_callback` and `io_callback` on
    mlirxla: jax lowers host callbacks per platform, so the plugin gives its own rules. Each
    registers a host function in this process (`mlirxla.runtime.callbacks`) and emits a
    `custom_call @mlirxla.python_callback` carrying its id, with the callback's results as
    the call's results; side-effecting unless pure. An ordered callback passes its effect's
    token through (the schedule and the executor keep side effects in program order)."""
    from jax._src import callback as jax_callback
    from jax._src import debugging
    from jax._src.interpreters import mlir

    def pass_token(context, effect):
        if effect in context.tokens_in.effects():
            context.set_tokens_out(context.tokens_in.update_tokens(mlir.TokenSet({effect: context.tokens_in.get(effect)})))

    def debug_lowering(context, *arguments, effect, partitioned, callback):
        function = once_where_jax_runs_it_once(
            context, host_function(debugging.debug_callback_impl, callback, effect=effect, partitioned=partitioned))
        emit(context, arguments, function, "jax.debug.callback", has_side_effect=True)
        pass_token(context, effect)
        return []

    def print_lowering(context, *arguments, fmt, ordered, partitioned, in_tree, static_args, np_printoptions,
                       has_placeholders, logging_record):
        # jax's own rule for cpu builds this formatting callback, then lowers it for cpu
        formatting = functools.partial(debugging._format_print_callback, fmt, dict(np_printoptions), has_placeholders,
                                       logging_record)
        callback = debugging._make_flat_callback(in_tree, formatting, static_args)
        effect = debugging.ordered_debug_effect if ordered else debugging.debug_effect
        function = once_where_jax_runs_it_once(
            context, host_function(debugging.debug_callback_impl, callback, effect=effect, partitioned=partitioned))
        emit(context, arguments, function, f"jax.debug.print {fmt!r}", has_side_effect=True)
        pass_token(context, effect)
        return []

    def pure_lowering(context, *arguments, callback, sharding, result_avals, vmap_method):
        name = callback_name("jax.pure_callback", callback)
        function = once_where_jax_runs_it_once(context, host_function(
            jax_callback.pure_callback_impl, callback, result_avals=result_avals, sharding=None, vmap_method=vmap_method),
            sharding, name)
        return emit(context, arguments, function, name, has_side_effect=False)

    def io_lowering(context, *arguments, callback, sharding, result_avals, ordered):
        name = callback_name("io_callback", callback)
        function = once_where_jax_runs_it_once(context, host_function(
            jax_callback.io_callback_impl, callback, result_avals=result_avals, sharding=None, ordered=ordered),
            sharding, name)
        results = emit(context, arguments, function, name, has_side_effect=True)
        if ordered:
            pass_token(context, jax_callback._OrderedIOEffect)
        return results

    mlir.register_lowering(debugging.debug_callback_p, debug_lowering, platform=PLATFORM)
    mlir.register_lowering(debugging.debug_print_p, print_lowering, platform=PLATFORM)
    run_eagerly_without_a_cpu_backend(debugging)
    # not cacheable, as jax registers its own: every lowering registers its callback anew
    mlir.register_lowering(jax_callback.pure_callback_p, pure_lowering, platform=PLATFORM, cacheable=False)
    mlir.register_lowering(jax_callback.io_callback_p, io_lowering, platform=PLATFORM, cacheable=False)
    register_python_callback_emitter()


def register_python_callback_emitter() -> None:
    """`emit_python_callback` on mlirxla: jax's lowering helper for a Python function called
    from a program (public as `jax.interpreters.mlir.emit_python_callback`, used by
    `checkify.check`, jax's own rules and other libraries' primitives) refuses every platform
    but cpu, cuda, rocm and tpu. On mlirxla it emits the plugin's host callback; the function
    gets numpy arrays, as on every platform, and its results are checked against
    `result_avals`. A token passes through: the executor keeps side effects in program order."""
    import numpy as np
    from jax._src import callback as jax_callback
    from jax._src import dtypes
    from jax.interpreters import mlir as public_mlir

    jax_emit = jax_callback.emit_python_callback

    def emit_python_callback(context, callback, token, operands, operand_avals, result_avals, *, has_side_effect,
                             returns_token=True, partitioned=False, sharding=None):
        if tuple(context.module_context.platforms) != (PLATFORM,):
            return jax_emit(context, callback, token, operands, operand_avals, result_avals,
                            has_side_effect=has_side_effect, returns_token=returns_token, partitioned=partitioned,
                            sharding=sharding)
        if partitioned and result_avals:
            raise ValueError("Partitioned callback not supported with return values.")

        def run(*arrays):
            return [dtypes.canonicalize_value(np.asarray(result)) for result in callback(*arrays)]

        results = emit(context, operands, run, callback_name("Python callback", callback), has_side_effect,
                       result_avals=result_avals)
        return results, token, run

    jax_callback.emit_python_callback = public_mlir.emit_python_callback = emit_python_callback


def register_check(checkify) -> None:
    """`checkify.check` staged out under jax's unsafe runtime errors: jax's rule (registered for
    cpu and gpu) emits a Python callback, which `emit_python_callback` lowers on mlirxla."""
    from jax._src.interpreters import mlir

    mlir.register_lowering(checkify.check_p, checkify.check_lowering_rule, platform=PLATFORM)


def register_buffer_callback(module) -> None:
    """`jax.experimental.buffer_callback` on mlirxla (`jax_buffer_callback.py`)."""
    from mlirxla import jax_buffer_callback

    jax_buffer_callback.register(module)


def run_eagerly_without_a_cpu_backend(debugging) -> None:
    """`jax.debug.print` / `jax.debug.callback` outside jit: jax's implementation puts the
    arguments on the cpu device, and fails in a process without a cpu backend
    (JAX_PLATFORMS=mlirxla) where mlirxla is the default backend. There the callback gets the
    arguments on the first mlirxla device (`on_plugin_device`: Python scalars become jax
    arrays, as jax's put makes them) and runs in the caller as jax's does: what it raises
    reaches the caller unchanged (`jax.debug.breakpoint`'s quit is a SystemExit). jax's print
    implementation calls the module's `debug_callback_impl`, so replacing that covers both."""
    from jax._src import xla_bridge

    jax_impl = debugging.debug_callback_impl

    def impl(*arguments, callback, effect, partitioned):
        if has_cpu_backend() or xla_bridge.default_backend() != PLATFORM:
            return jax_impl(*arguments, callback=callback, effect=effect, partitioned=partitioned)
        on_plugin_device(callback, arguments)
        return ()

    debugging.debug_callback_impl = impl
    debugging.debug_callback_p.def_impl(impl)


def once_where_jax_runs_it_once(context, function, sharding=None, what: str = "a host callback"):
    """`function`, run by one device only when jax would run it once: in a jit over several
    devices with automatic sharding (jax's `ShardingContext`), jax gives a callback the
    sharding `{maximal device=i}`, device 0 unless the callback's `sharding` names another,
    so that XLA runs it once, on the whole value, and hands its results to every device. The
    partitioner hands every device the whole value (its fallback for custom calls); the other
    devices skip the call and take the results of the device that ran it from the
    execution's rendezvous (`runtime/collectives.py`). Under shard_map (each device its own
    program) and pmap, every device runs it, as with jax."""
    from jax._src import sharding_impls

    from mlirxla.runtime import collectives

    axis_context = context.module_context.axis_context
    if not isinstance(axis_context, sharding_impls.ShardingContext):
        return function
    runner = 0 if sharding is None else axis_context.device_assignment.index(next(iter(sharding.device_set)))

    def on_one_device(*arrays):
        device = collectives.current()
        if device.partition_count == 1:
            return function(*arrays)
        results = function(*arrays) if device.partition == runner else []
        if not context.avals_out:
            return results
        group = tuple(device.replica * device.partition_count + partition for partition in range(device.partition_count))
        return device.rendezvous.meet("host callback", device.device, group, results, what,
                                      lambda everyone: everyone[runner])
    return on_one_device


def host_function(jax_impl, callback, **parameters):
    """What the program calls: jax's own implementation of the callback primitive, which
    hands the callback jax arrays on the cpu device, as jax does on cpu; where this process
    has no cpu backend (JAX_PLATFORMS=mlirxla) and jax's would fail, jax arrays on the first
    mlirxla device, the default device while the callback runs (jax's implementation with
    that device for the cpu one). Results are canonicalized as jax's cpu callbacks
    canonicalize them (float64 is float32 without x64)."""
    import numpy as np
    from jax._src import dtypes

    def run(*arrays):
        if has_cpu_backend():
            results = jax_impl(*arrays, callback=callback, **parameters)
        else:
            results = on_plugin_device(callback, arrays)
        return [dtypes.canonicalize_value(np.asarray(result)) for result in results]
    return run


def on_plugin_device(callback, arrays):
    """`callback` called on `arrays` put on the first mlirxla device, that device the default
    one and no mesh around (a callback runs outside the program's sharding). The put goes
    through the plugin while it runs the program that calls back: the plugin takes it."""
    import jax
    from jax._src import config
    from jax._src import mesh as mesh_lib
    from jax._src import sharding_impls, xla_bridge

    device = xla_bridge.local_devices(backend=PLATFORM)[0]
    with (config.default_device(device), sharding_impls._internal_use_concrete_mesh(mesh_lib.empty_concrete_mesh),
          mesh_lib.use_abstract_mesh(mesh_lib.empty_abstract_mesh)):
        return callback(*jax.device_put(arrays, device))


# jax's linear-algebra primitives that jax lowers per platform, each on cpu to jaxlib's LAPACK custom calls
LINEAR_ALGEBRA_PRIMITIVES = ("cholesky_p", "eig_p", "eigh_p", "hessenberg_p", "householder_product_p", "ormqr_p", "lu_p",
                             "geqrf_p", "geqp3_p", "schur_p", "svd_p", "triangular_solve_p", "tridiagonal_p",
                             "tridiagonal_solve_p")


def register_linear_algebra() -> None:
    """jax's linear algebra on mlirxla as on jax's cpu backend: jax lowers eigh, svd, lu, qr,
    cholesky, eig, schur, hessenberg, tridiagonal, triangular and tridiagonal solves per
    platform, on cpu to jaxlib's LAPACK custom calls (`lapack_ssyevd_ffi`, ...), which the cpu
    backend runs as host calls of the same LAPACK routines (`runtime/lapack_ffi.py`). The
    plugin registers jax's own cpu rules for mlirxla, so a program gets what it gets on cpu:
    the same results bit for bit, custom calls `jax.export` guarantees stable, and the shape
    polymorphism and errors of jax's cpu rules. eigh and svd also take what the cpu rules
    refuse (`eigh_or_svd_beyond_cpu`)."""
    from jax._src.interpreters import mlir
    from jax._src.lax import linalg

    cpu_rules = mlir._platform_specific_lowerings["cpu"]
    for name in LINEAR_ALGEBRA_PRIMITIVES:
        primitive = getattr(linalg, name)
        if primitive not in (linalg.eigh_p, linalg.svd_p):
            entry = cpu_rules[primitive]
            mlir.register_lowering(primitive, entry.rule, platform=PLATFORM, inline=entry.inline)
    eigh_lowering, svd_lowering = eigh_or_svd_beyond_cpu(cpu_rules[linalg.eigh_p].rule, cpu_rules[linalg.svd_p].rule)
    mlir.register_lowering(linalg.eigh_p, eigh_lowering, platform=PLATFORM)
    mlir.register_lowering(linalg.svd_p, svd_lowering, platform=PLATFORM)


def eigh_or_svd_beyond_cpu(cpu_eigh, cpu_svd):
    """eigh and svd rules that take the algorithms and subsets jax's cpu rules refuse, as the
    platform-independent jax implementations do where jax has one: QDWH eigh and eigh of a
    subset of eigenvalues as jax's QDWH spectral divide and conquer, POLAR svd and svd of a
    subset as jax's polar svd (TPU's lowerings, made of jax ops only); a Jacobi eigh or svd,
    which only TPU's and cuSOLVER's libraries implement, as LAPACK's (the contract the
    results meet is the same). Without that, jax's own eigh tests would fail on mlirxla: off
    cpu and gpu they ask for every algorithm."""
    from jax._src.interpreters import mlir
    from jax._src.lax import linalg
    from jax._src.tpu.linalg import eigh as qdwh_eigh

    polar_svd = mlir._lowerings[linalg.svd_p].rule

    def eigh(context, operand, *, algorithm, subset_by_index, **parameters):
        if algorithm == linalg.EighImplementation.QDWH or subset_by_index is not None:
            return mlir.lower_fun(qdwh_eigh._eigh_qdwh_impl, multiple_results=True)(
                context, operand, subset_by_index=subset_by_index, **parameters)
        algorithm = None if algorithm == linalg.EighImplementation.JACOBI else algorithm
        return cpu_eigh(context, operand, algorithm=algorithm, subset_by_index=subset_by_index, **parameters)

    def svd(context, operand, *, algorithm=None, subset_by_index, **parameters):
        if algorithm == linalg.SvdAlgorithm.POLAR or subset_by_index is not None:
            return polar_svd(context, operand, subset_by_index=subset_by_index, **parameters)
        algorithm = None if algorithm == linalg.SvdAlgorithm.JACOBI else algorithm
        return cpu_svd(context, operand, algorithm=algorithm, subset_by_index=subset_by_index, **parameters)

    return eigh, svd


def register_sparse_solver(module) -> None:
    """`jax.experimental.sparse.linalg.spsolve` on mlirxla: jax lowers it for cpu as a Python
    callback of scipy's `spsolve` (and for cuda as cuSOLVER's QR) and for no other platform;
    here it is the same scipy call, through the plugin's host callbacks."""
    import scipy.sparse
    import scipy.sparse.linalg
    from jax._src.interpreters import mlir

    def solve(data, indices, indptr, b):
        matrix = scipy.sparse.csr_matrix((data, indices, indptr), shape=(b.size, b.size))
        return [scipy.sparse.linalg.spsolve(matrix, b).astype(b.dtype)]

    def lowering(context, data, indices, indptr, b, *, tol, reorder):
        return emit(context, (data, indices, indptr, b), solve, "jax.experimental.sparse.linalg.spsolve",
                    has_side_effect=False)

    mlir.register_lowering(module.spsolve_p, lowering, platform=PLATFORM)


def when_imported(name: str, then) -> None:
    """Call `then(module)` once the module `name` is imported: now if it is, else right after
    its import. jax's sparse solver module imports scipy.sparse (0.1-0.4 s), more than every
    jax process that finds the plugin should pay for a rule few programs use."""
    import sys

    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, AfterImport(name, then))


class AfterImport:
    """A meta path finder that finds nothing itself: when `name` is imported it takes the spec
    the other finders give and runs `then(module)` after the module's own code, then leaves."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        import sys

        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        loader, then = spec.loader, self.then

        def exec_module(module):
            del loader.exec_module  # the loader's own method again: a zip importer loads other modules too
            loader.exec_module(module)
            then(module)

        loader.exec_module = exec_module
        return spec
