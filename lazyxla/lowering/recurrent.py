"""Fused RNN cells: what nn.LSTM, nn.GRU, LSTMCell and GRUCell call on an accelerator.

For a PrivateUse1 device PyTorch's RNN code takes the fused cell kernels (CUDA-only in ATen, so
the CPU fallback cannot run them). Gates arrive as `x @ W_ih.T` and `h @ W_hh.T`, (batch, k*H)
with k gate blocks; the cell adds the biases, applies the gate nonlinearities, and returns a
workspace of saved activations that its backward reads (layout as in ATen's CUDA kernels).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .registry import aten, register


def _gates(input_gates, hidden_gates, input_bias, hidden_bias, k):
    gi = input_gates if input_bias is None else input_gates + input_bias
    gh = hidden_gates if hidden_bias is None else hidden_gates + hidden_bias
    return jnp.split(gi, k, axis=-1), jnp.split(gh, k, axis=-1)


@register(aten._thnn_fused_lstm_cell.default)
def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    (ii, fi, ci, oi), (ih, fh, ch, oh) = _gates(input_gates, hidden_gates, input_bias, hidden_bias, 4)
    i, f = jax.nn.sigmoid(ii + ih), jax.nn.sigmoid(fi + fh)
    g, o = jnp.tanh(ci + ch), jax.nn.sigmoid(oi + oh)
    cy = f * cx + i * g
    hy = o * jnp.tanh(cy)
    return hy, cy, jnp.concatenate([i, f, g, o], axis=-1)


@register(aten._thnn_fused_lstm_cell_backward_impl.default)
def lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = jnp.split(workspace, 4, axis=-1)
    tanh_cy = jnp.tanh(cy)
    grad_hy = jnp.zeros_like(cy) if grad_hy is None else grad_hy
    gc = grad_hy * o * (1 - tanh_cy * tanh_cy) + (0 if grad_cy is None else grad_cy)
    grad_gates = jnp.concatenate([gc * g * (1 - i) * i, gc * cx * (1 - f) * f,
                                  gc * i * (1 - g * g), grad_hy * tanh_cy * (1 - o) * o], axis=-1)
    return grad_gates, gc * f, jnp.sum(grad_gates, axis=0) if has_bias else None


@register(aten._thnn_fused_gru_cell.default)
def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    (ri, zi, ni), (rh, zh, nh) = _gates(input_gates, hidden_gates, input_bias, hidden_bias, 3)
    r, z = jax.nn.sigmoid(ri + rh), jax.nn.sigmoid(zi + zh)
    n = jnp.tanh(ni + r * nh)
    hy = n + z * (hx - n)
    return hy, jnp.concatenate([r, z, n, nh, hx], axis=-1)


@register(aten._thnn_fused_gru_cell_backward.default)
def gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, nh, hx = jnp.split(workspace, 5, axis=-1)
    gn = grad_hy * (1 - z) * (1 - n * n)
    gr = gn * nh * (1 - r) * r
    gz = grad_hy * (hx - n) * (1 - z) * z
    grad_input = jnp.concatenate([gr, gz, gn], axis=-1)
    grad_hidden = jnp.concatenate([gr, gz, gn * r], axis=-1)
    bias = (jnp.sum(grad_input, axis=0), jnp.sum(grad_hidden, axis=0)) if has_bias else (None, None)
    return (grad_input, grad_hidden, grad_hy * z) + bias


# Meta kernels: PyTorch has none for the GRU cell, and its LSTM one fails without biases.
def _lstm_meta(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    return cx.new_empty(cx.shape), cx.new_empty(cx.shape), input_gates.new_empty(input_gates.shape)


def _gru_meta(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    n, h = hx.shape
    return hx.new_empty(hx.shape), hx.new_empty((n, 5 * h))


def _gru_backward_meta(grad_hy, workspace, has_bias):
    n, h = grad_hy.shape
    gates = grad_hy.new_empty((n, 3 * h))
    bias = (grad_hy.new_empty((3 * h,)), grad_hy.new_empty((3 * h,))) if has_bias else (None, None)
    return (gates, grad_hy.new_empty((n, 3 * h)), grad_hy.new_empty((n, h))) + bias


_META = torch.library.Library("aten", "IMPL")
_META.impl("_thnn_fused_lstm_cell", _lstm_meta, "Meta", allow_override=True)
_META.impl("_thnn_fused_gru_cell", _gru_meta, "Meta")
_META.impl("_thnn_fused_gru_cell_backward", _gru_backward_meta, "Meta")
