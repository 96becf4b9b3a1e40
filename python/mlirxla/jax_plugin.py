"""JAX's entry point into mlirxla (the `jax_plugins` entry point group): JAX imports this
module while it discovers backends and calls `initialize`, which registers the PJRT plugin
library under the platform name `mlirxla`. Then `jax.devices("mlirxla")` lists its devices
and `JAX_PLATFORMS=mlirxla` makes it the default backend.

`MLIRXLA_NUM_DEVICES` (default 1) sets how many virtual CPU devices the client shows.
"""

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
