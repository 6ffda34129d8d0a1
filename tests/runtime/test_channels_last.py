"""Programs with convolutions on the CPU backend are evaluated channels-last (runtime/
channels_last.py): the same values as the program as written, convolutions reading and writing
batch-spatial-feature data, the layouts carried through elementwise ops, reductions, slices, pads,
reverses, concatenations, transposes and matrix products, and the program's outputs in their
logical layout; a result that a reshape reads whole, or that meets a large logical input, stays
logical."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from jax import lax
from jax._src.interpreters import partial_eval as pe

import lazyxla
from lazyxla.jaxenv import x64
from lazyxla.runtime import channels_last, executor


def _conv(x, w, stride=1, padding=1):
    nd = x.ndim - 2  # (channels-first: lax's default dimension numbers)
    return lax.conv_general_dilated(x, w, (stride,) * nd, [(padding, padding)] * nd)


def _rand(*shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def _same(fn, *args):
    """channels_last(fn) gives fn's outputs (within float32 rounding: XLA's convolution kernels
    may sum in another order in another layout); returns its jaxpr."""
    with x64(True):  # (as lazyxla's programs are traced)
        want = jax.jit(fn)(*args)
        got = jax.jit(channels_last.channels_last(fn))(*args)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=2e-6)
    with x64(True):
        closed = jax.make_jaxpr(channels_last.channels_last(fn))(*args)
    return pe.dce_jaxpr(closed.jaxpr, True)[0]  # (without a discarded first evaluation)


def _conv_specs(jaxpr):
    return [e.params["dimension_numbers"] for e in jaxpr.eqns
            if e.primitive.name == "conv_general_dilated"]


X, W, W2 = _rand(2, 3, 6, 5), _rand(4, 3, 3, 3, seed=1), _rand(4, 4, 3, 3, seed=2)


def test_a_convolution_reads_and_writes_batch_spatial_feature_data():
    jaxpr = _same(lambda x, w, v: _conv(jax.nn.relu(_conv(x, w)) * 2.0, v), X, W, W2)
    first, second = _conv_specs(jaxpr)
    assert first.out_spec == (0, 3, 1, 2)  # NHWC out
    assert second.lhs_spec == (0, 3, 1, 2)  # reads the NHWC value as it is: no transpose between
    kinds = [e.primitive.name for e in jaxpr.eqns]
    assert kinds.count("transpose") == 1  # only the output goes back to NCHW


def test_one_dimensional_and_grouped_convolutions():
    x, w = _rand(2, 4, 9), _rand(6, 2, 3, seed=3)

    def fn(x, w):
        y = lax.conv_general_dilated(x, w, (2,), [(1, 1)], feature_group_count=2)
        return jnp.tanh(y) + y.sum(axis=2, keepdims=True)
    assert _conv_specs(_same(fn, x, w))[0].out_spec == (0, 2, 1)


def test_reductions_map_their_axes_and_keep_the_layout_of_what_remains():
    def fn(x, w):
        y = _conv(x, w)
        return (y.sum(axis=(0, 2, 3)), y.max(axis=1), y.mean(axis=(2, 3)), jnp.argmax(y, axis=1),
                jnp.argmin(y, axis=3), y.sum())
    _same(fn, X, W)


def test_slices_pads_reverses_and_concatenations_keep_the_layout():
    def fn(x, w):
        y = _conv(x, w)
        z = jnp.concatenate([y[:, :2, ::2], jnp.flip(y, axis=(1, 3))[:, :2, ::2]], axis=1)
        return jnp.pad(z, ((0, 0), (1, 0), (0, 2), (1, 1)), constant_values=-1.0), y[1:, :, 1:-1]
    _same(fn, X, W)


def test_a_concatenation_of_a_logical_and_a_channels_last_value():
    _same(lambda x, w: jnp.concatenate([_conv(x, w), jnp.ones((2, 1, 6, 5))], axis=1), X, W)


def test_transposes_move_no_data_and_compose():
    def fn(x, w):
        y = _conv(x, w)
        t = jnp.transpose(y, (2, 0, 3, 1))
        return t * 3.0, jnp.transpose(t, (1, 3, 0, 2)) - y
    jaxpr = _same(fn, X, W)
    assert [e.primitive.name for e in jaxpr.eqns].count("transpose") == 2  # the outputs'


def test_a_transposed_broadcast_meets_a_result_and_a_reshape():
    def fn(x, w):
        t = jnp.transpose(jnp.full((2, 6, 5, 4), 2.0), (0, 3, 1, 2))  # NHWC data viewed as NCHW
        return (_conv(x, w) + t).reshape(2, -1), t.reshape(-1)
    _same(fn, X, W)


def test_elementwise_ops_with_broadcasts_scalars_and_selects():
    def fn(x, w, b):
        y = _conv(x, w) + b.reshape(1, -1, 1, 1)
        y = jnp.where(y > 0, y, 0.1 * y)  # select_n on a mask computed in the layout
        return jnp.clip(y, -1.0, 1.0), (y ** 2).astype(jnp.float64), y.astype(jnp.int32)
    _same(fn, X, W, _rand(4, seed=4))


def test_matrix_products_contract_in_any_layout():
    def fn(x, w, m):
        y, z = _conv(x, w), _conv(x, w * 2.0)
        return (jnp.einsum("nchw,ndhw->cd", y, z), jnp.einsum("nchw,ce->nhwe", y, m),
                jnp.einsum("nchw,nchw->nc", y, z), jnp.einsum("nchw,hk->nkcw", y, x[0, 0]))
    _same(fn, X, W, _rand(4, 3, seed=5))


def test_other_primitives_get_logical_operands():
    def fn(x, w):
        y = _conv(x, w)  # reshape, cumsum, gather, sort: logical layout
        return y.reshape(2, -1) * 2.0, jnp.cumsum(y, axis=1), y[:, jnp.array([3, 0])], jnp.sort(y, axis=2)
    _same(fn, X, W)


def test_calls_and_custom_derivatives_are_evaluated_in_place():
    @jax.custom_vjp
    def f(y):
        return jnp.sin(y)
    f.defvjp(lambda y: (jnp.sin(y), y), lambda y, g: (g * jnp.cos(y),))

    def fn(x, w):
        y = _conv(x, w)
        return jax.jit(lambda a: jax.nn.relu(a) * 2.0)(y), f(y), jax.nn.gelu(y)
    jaxpr = _same(fn, X, W)
    # the bodies are inlined, so the layouts flow through them: no transpose but the outputs'
    assert [e.primitive.name for e in jaxpr.eqns].count("transpose") == 3


def test_convolution_gradients_and_a_training_step():
    def loss(w, v, x):
        y = jax.nn.relu(_conv(x, w, stride=2))
        y = (y - y.mean(axis=(0, 2, 3), keepdims=True)) / jnp.sqrt(y.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
        return jnp.sum(_conv(y, v) ** 2)

    def step(w, v, x):
        gw, gv = jax.grad(loss, argnums=(0, 1))(w, v, x)
        return w - 0.1 * gw, v - 0.1 * gv
    _same(step, W, W2, X)


def _group_norm(y, groups=2):
    z = y.reshape(y.shape[0], groups, -1)
    z = (z - z.mean(axis=2, keepdims=True)) / jnp.sqrt(z.var(axis=2, keepdims=True) + 1e-5)
    return z.reshape(y.shape)


def test_a_result_that_a_reshape_reads_whole_stays_logical():
    # XLA would run the GELU between a channels-last result and the reshape with strided
    # access, in the forward and the backward (a 1-d convolution's training step took 2.2x)
    def step(x, w):
        return jax.grad(lambda w: jnp.sum(jax.nn.gelu(_group_norm(_conv(x, w))) ** 2))(w)
    forward, weight_grad = _conv_specs(_same(step, X, W))
    assert forward.out_spec == (0, 1, 2, 3)


def test_it_gives_up_after_its_attempts(monkeypatch):
    monkeypatch.setattr(channels_last, "_ATTEMPTS", 1)  # the conflict found, no second attempt

    def fn(x, w, v):
        y = _conv(x, w)
        return _conv(jax.nn.gelu(y), v), jnp.sin(y).reshape(2, -1)
    jaxpr = _same(fn, X, W, W2)
    assert [dn.out_spec for dn in _conv_specs(jaxpr)] == [(0, 1, 2, 3)] * 2  # as written
    assert "transpose" not in [e.primitive.name for e in jaxpr.eqns]


def test_a_result_that_meets_a_large_program_input_stays_logical():
    # (a backward program under torch.compile: cotangents times the saved activations, its inputs;
    # transposing each input in full cost more than the channels-last convolutions saved)
    def fn(x, w, saved, scale):
        y = _conv(x, w)
        return jnp.sum(y * saved, axis=(0, 2, 3)), y * scale + 1.0
    jaxpr = _same(fn, X, W, _rand(2, 4, 6, 5, seed=3), _rand(1, 4, 1, 1, seed=4))
    assert _conv_specs(jaxpr)[0].out_spec == (0, 1, 2, 3)
    # a small one (per channel) is transposed to match
    jaxpr = _same(lambda x, w, scale: _conv(x, w) * scale + 1.0, X, W, _rand(1, 4, 1, 1, seed=4))
    assert _conv_specs(jaxpr)[0].out_spec == (0, 3, 1, 2)


def test_a_reshape_of_a_reduced_result_does_not_count():
    def fn(x, w, m):  # global average pooling, flattened, then a linear layer
        y = jax.nn.relu(_conv(x, w))
        return y.mean(axis=(2, 3), keepdims=True).reshape(2, 4) @ m
    assert _conv_specs(_same(fn, X, W, _rand(4, 3, seed=5)))[0].out_spec == (0, 3, 1, 2)


def test_a_reshape_of_a_quarter_of_a_result_counts():
    def fn(x, w):
        y = _conv(x, w)
        return y.sum(axis=0, keepdims=True).reshape(4, -1), y[:, :, :3, :3].reshape(2, -1)
    jaxpr = _same(fn, _rand(4, 3, 6, 6), W)
    assert _conv_specs(jaxpr)[0].out_spec == (0, 1, 2, 3)


def _batch_norm(y):
    return (y - y.mean(axis=(0, 2, 3), keepdims=True)) / jnp.sqrt(y.var(axis=(0, 2, 3), keepdims=True) + 1e-5)


def test_a_residual_block_trains_with_a_quarter_of_the_transposes():
    def block(x, w, v, u):
        y = jax.nn.relu(_batch_norm(_conv(x, w)))
        z = _batch_norm(_conv(jax.nn.relu(_batch_norm(_conv(y, v, stride=2))), u))
        return jax.nn.relu(z + _batch_norm(_conv(y, u[:, :, 1:2, 1:2], stride=2, padding=0)))

    def step(x, w, v, u):
        return jax.grad(lambda *ws: jnp.sum(block(x, *ws) ** 2), argnums=(0, 1, 2))(w, v, u)
    args = (_rand(2, 4, 8, 8), _rand(4, 4, 3, 3, seed=1), W2, _rand(4, 4, 3, 3, seed=6))
    _same(step, *args)

    def transposes(f):  # (XLA's: 62, then 15 on jax 0.10.2)
        return len(re.findall(r" transpose\(", jax.jit(f).lower(*args).compile().as_text()))
    assert transposes(channels_last.channels_last(step)) * 3 < transposes(step)


def _specs_of(fn, *tensors, monkeypatch):
    """The GraphSpecs lazyxla runs for fn on lazyxla tensors."""
    specs, executable_for = [], executor.executable_for

    def spy(spec):
        specs.append(spec)
        return executable_for(spec)
    monkeypatch.setattr(executor, "executable_for", spy)
    fn(*(t.to(lazyxla.device()) for t in tensors)).cpu()
    monkeypatch.setattr(executor, "executable_for", executable_for)
    return specs


def test_it_applies_to_programs_with_convolutions_unless_turned_off(monkeypatch):
    x, w = torch.randn(2, 3, 7, 7), torch.randn(5, 3, 3, 3)
    *_, conv = _specs_of(lambda a, b: F.conv2d(a, b).relu(), x, w, monkeypatch=monkeypatch)
    *_, plain = _specs_of(lambda a, b: a.sin() * 3, x, w, monkeypatch=monkeypatch)
    assert channels_last.applies(conv) and not channels_last.applies(plain)
    monkeypatch.setenv("LAZYXLA_CHANNELS_LAST", "0")
    assert not channels_last.applies(conv)
    monkeypatch.setenv("LAZYXLA_CHANNELS_LAST", "maybe")
    with pytest.warns(UserWarning, match="LAZYXLA_CHANNELS_LAST"):
        assert channels_last.applies(conv)


def test_group_norm_keeps_a_convolution_channels_last():
    from lazyxla.lowering import norms
    x, w = _rand(2, 4, 6, 5), _rand(4, 4, 3, 3, seed=7)
    gamma, beta = _rand(4, seed=8), _rand(4, seed=9)

    def step(x, w):  # conv, group norm (2 groups), GELU, a loss; the gradients by hand
        y = _conv(x, w)
        out, mean, rstd = norms.native_group_norm(y, gamma, beta, 2, 4, 30, 2, 1e-5)
        g = jax.grad(lambda o: jnp.sum(jax.nn.gelu(o) ** 2))(out)
        gy, gg, gb = norms.native_group_norm_backward(g, y, mean, rstd, gamma, 2, 4, 30, 2, [True] * 3)
        return out, gy, gg, gb
    assert _conv_specs(_same(step, x, w))[0].out_spec == (0, 3, 1, 2)
