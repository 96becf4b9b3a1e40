"""JAX's entry point into mlirxla (the `jax_plugins` entry point group): JAX imports this
module while it discovers backends and calls `initialize`, which registers the PJRT plugin
library under the platform name `mlirxla`. Then `jax.devices("mlirxla")` lists its devices
and `JAX_PLATFORMS=mlirxla` makes it the default backend.

`MLIRXLA_NUM_DEVICES` (default 1) sets how many virtual CPU devices the client shows.
"""

import functools
import json
import os

PLATFORM = "mlirxla"
# below jax's own cpu backend (0): installing mlirxla never changes jax's default device;
# JAX_PLATFORMS=mlirxla (or jax.devices("mlirxla")) asks for it
PRIORITY = -100


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
    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=path,
                               options={"num_devices": int(os.environ.get("MLIRXLA_NUM_DEVICES", "1"))})
    # jax keeps the platforms that honour donate_argnums in a private list, and drops donation
    # (with a warning) for any platform not in it; the plugin implements donation
    if PLATFORM not in mlir._platforms_with_donation:
        mlir._platforms_with_donation.append(PLATFORM)
    register_debug_callbacks()
    register_linear_algebra()


def register_debug_callbacks() -> None:
    """`jax.debug.print` and `jax.debug.callback` on mlirxla: jax lowers debug callbacks per
    platform, so the plugin gives its own rule. The callback is registered in this process
    (`mlirxla.runtime.callbacks`) and the program calls it through a side-effecting
    `custom_call @mlirxla.python_callback` carrying its id; an ordered callback passes its
    effect's token through (the schedule keeps side effects in program order)."""
    from jax._src import debugging
    from jax._src.interpreters import mlir

    from mlirxla.runtime import callbacks

    def callback_lowering(context, *arguments, effect, partitioned, callback, **parameters):
        identifier = callbacks.register(callback)
        mlir.custom_call(callbacks.TARGET, result_types=[], operands=list(arguments), backend_config=str(identifier),
                         has_side_effect=True, api_version=1)
        if effect in context.tokens_in.effects():
            context.set_tokens_out(mlir.TokenSet({effect: context.tokens_in.get(effect)}))
        return []

    def print_lowering(context, *arguments, fmt, ordered, partitioned, in_tree, static_args, np_printoptions,
                       has_placeholders, logging_record):
        # jax's own rule for cpu builds this formatting callback, then lowers it for cpu
        formatting = functools.partial(debugging._format_print_callback, fmt, dict(np_printoptions), has_placeholders,
                                       logging_record)
        callback = debugging._make_flat_callback(in_tree, formatting, static_args)
        effect = debugging.ordered_debug_effect if ordered else debugging.debug_effect
        return callback_lowering(context, *arguments, effect=effect, partitioned=partitioned, callback=callback)

    mlir.register_lowering(debugging.debug_callback_p, callback_lowering, platform=PLATFORM)
    mlir.register_lowering(debugging.debug_print_p, print_lowering, platform=PLATFORM)


def register_linear_algebra() -> None:
    """`jnp.linalg.eigh` and `svd` on mlirxla: jax lowers them per platform (LAPACK custom calls
    on cpu); on mlirxla they become `custom_call @mlirxla.eigh` / `@mlirxla.svd` with their
    flags as JSON, which the cpu backend runs as numpy host calls."""
    from jax._src.interpreters import mlir
    from jax._src.lax import linalg

    def host_call(target: str, flags: tuple[str, ...]):
        def lowering(context, operand, *, subset_by_index=None, **parameters):
            rank = min(context.avals_in[0].shape[-2:])
            if subset_by_index not in (None, (0, rank)):
                raise NotImplementedError(f"{target} with subset_by_index is not supported on mlirxla")
            config = json.dumps({flag: bool(parameters[flag]) for flag in flags})
            result_types = [mlir.aval_to_ir_type(context.module_context, aval) for aval in context.avals_out]
            return mlir.custom_call(target, result_types=result_types, operands=[operand], backend_config=config,
                                    api_version=1).results
        return lowering

    mlir.register_lowering(linalg.eigh_p, host_call("mlirxla.eigh", ("lower",)), platform=PLATFORM)
    mlir.register_lowering(linalg.svd_p, host_call("mlirxla.svd", ("full_matrices", "compute_uv")), platform=PLATFORM)
