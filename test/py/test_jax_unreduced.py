"""Unreduced and reduced sharding axes (`P(..., unreduced={'y'})`, `P(reduced={'x'})`) through
jax.jit and jax.shard_map on 8 plugin devices, against jax's cpu backend on 8 devices.

An unreduced array holds partial sums: each device's shard is a summand, so the test keeps
every device's shard (in device order), not only the logical value, and both sides must
agree on each: a dot's partial sums where its contraction is sharded, a segment sum's
where its data is, a value made unreduced kept where its source tile was and zeros
elsewhere. Each side runs in a fresh
process (jax creates its clients once).
"""

import numpy as np
import pytest

from .conftest import EIGHT_DEVICE_PROGRAM, saved_on_mlirxla_and_cpu

pytest.importorskip("jax")

pytestmark = pytest.mark.jax

PROGRAMS = EIGHT_DEVICE_PROGRAM + r'''
from jax.sharding import AxisType, PartitionSpec as P, reshard
results = {}


def keep(name, array):
    results[name + " value"] = np.asarray(reshard(array, P(*([None] * array.ndim))))
    shards = sorted(array.addressable_shards, key=lambda s: s.device.id)
    results[name + " shards"] = np.stack([np.asarray(s.data) for s in shards])


mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2, devices=jax.devices(platform))
rng = np.random.default_rng(0)
a = rng.standard_normal((8, 16)).astype(np.float32)
b = rng.standard_normal((16, 4)).astype(np.float32)
with jax.set_mesh(mesh):
    x, w = jax.device_put(a, P("x", "y")), jax.device_put(b, P("y", None))
    dot = jax.jit(lambda x, w: jnp.einsum("ij,jk->ik", x, w, out_sharding=P("x", None, unreduced={"y"})))
    partial = dot(x, w)
    assert partial.sharding.spec.unreduced == {"y"}
    keep("dot left unreduced", partial)
    keep("unreduced input doubled, then summed", jax.jit(lambda u: reshard(u + u, P("x", None)))(partial))
    summed = jax.jit(lambda x: jax.lax.reduce_sum(x, axes=(1,), out_sharding=P("x", unreduced={"y"})))(x)
    keep("reduce_sum left unreduced", summed)
    keep("sharded made unreduced", reshard(jax.device_put(a, P("x", "y")), P(None, None, unreduced={"x", "y"})))
    keep("replicated made unreduced", reshard(jax.device_put(a, P()), P("x", None, unreduced={"y"})))
    keep("scalar made unreduced", reshard(jnp.float32(3), P(unreduced={"x"})))
    reduced = jax.device_put(a[:, :4], P("x", None, reduced={"y"}))
    keep("unreduced times reduced", jax.jit(lambda u, r: u * r)(partial, reduced))

    @jax.jit
    @jax.shard_map(in_specs=(P("x", "y"), P("y", None)), out_specs=P("x", None, unreduced={"y"}))
    def local_products(x, w):
        return x @ w

    keep("shard_map out_specs unreduced", local_products(x, w))
    keep("grad of a sum over a row-sharded batch", jax.jit(jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w))))(
        jax.device_put(b, P(reduced={"x"})), jax.device_put(a, P("x", None))))
    data = jax.device_put(np.arange(8, dtype=np.int32), P("y"))
    segments = jax.device_put(np.array([0, 0, 1, 1, 1, 2, 2, 3]), P("y"))
    keep("segment_sum of sharded data, unreduced", jax.jit(
        lambda d, s: jax.ops.segment_sum(d, s, num_segments=4, out_sharding=P(unreduced={"y"})))(data, segments))

    def accumulate(ws, xs):
        """Gradients of microbatches summed unreduced through a scan, reduced once after it."""
        def body(total, batch):
            grads = jax.grad(lambda ws: jnp.sum(jnp.tanh(batch @ ws[0]) @ ws[1]))(ws)
            return jax.tree.map(jnp.add, total, grads), None

        total = reshard(jax.tree.map(jnp.zeros_like, ws), P(unreduced={"x"}))
        total, _ = jax.lax.scan(body, total, xs)
        return jax.tree.map(lambda g: reshard(g, P()), total)

    ws = tuple(jax.device_put(rng.standard_normal((4, 4)).astype(np.float32), P(reduced={"x"})) for _ in range(2))
    xs = jax.device_put(rng.standard_normal((3, 8, 4)).astype(np.float32), P(None, "x", None))
    for k, g in enumerate(jax.jit(accumulate)(ws, xs)):
        keep(f"scan accumulating unreduced gradients/{k}", g)
np.savez(path, **results)
print("ok")
'''


def test_unreduced_values_and_shards_match_jax_cpu_on_8_devices(tmp_path):
    got, want = saved_on_mlirxla_and_cpu(PROGRAMS, tmp_path)
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)
    a = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    # every device keeps its own tile of a sharded value made unreduced, zeros elsewhere
    assert np.count_nonzero(got["sharded made unreduced shards"]) == a.size
    np.testing.assert_allclose(got["sharded made unreduced shards"].sum(axis=0), a, rtol=1e-6)
