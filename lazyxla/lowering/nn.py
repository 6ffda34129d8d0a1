"""Neural-network ops: convolution, pooling, embedding (normalization: norms.py; upsampling:
upsample.py).

Backward ops are the VJP of the forward lowering (jax.vjp), so they match the forward exactly;
ops whose PyTorch schema mutates arguments it does not declare (native_batch_norm updates the
running statistics) get a direct kernel here that records functional ops and copies the results."""
from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch
from jax import lax

from lazyxla.ir import meta

from . import conv3d, conv_grad
from .exact_arith import Arith, rounder
from .registry import aten, check_index, register
from .unpool import pool_grad

HIGHEST = lax.Precision.HIGHEST


def _tup(v, n):
    if isinstance(v, (list, tuple)):
        v = tuple(v)
        return v * n if len(v) == 1 else v
    return (v,) * n


def _vjp(fwd, primals, cotangent, mask):
    """Gradients of fwd w.r.t. primals (None entries stay None) for the positions in mask."""
    idx = [i for i, p in enumerate(primals) if p is not None]
    def f(*xs):
        full = list(primals)
        for i, x in zip(idx, xs):
            full[i] = x
        return fwd(*full)
    value, pull = jax.vjp(f, *[primals[i] for i in idx])
    # (the cotangent in the dtype fwd computes in: a float16 batch norm's is float32, opmath)
    gs = pull(cotangent.astype(value.dtype) if cotangent is not None else None)
    out = [None] * len(primals)
    for i, g in zip(idx, gs):
        out[i] = g
    return [o if m else None for o, m in zip(out, mask)]


# ---------------------------------------------------------------- convolution

def _conv(x, w, stride, padding, dilation, transposed, output_padding, groups, acc=None):
    """acc: the accumulation / result dtype (preferred_element_type), None for the input's."""
    nd = x.ndim - 2
    stride, padding, dilation = _tup(stride, nd), _tup(padding, nd), _tup(dilation, nd)
    if _by_depth_taps(x, w, stride, padding, dilation, transposed, output_padding):
        w = w.astype(x.dtype) if w.dtype != x.dtype else w
        if transposed:  # (sums of 2-d convolutions on the CPU backend: conv3d.py)
            return conv3d.conv_transpose3d_by_depth_taps(x, w, stride, padding, _tup(output_padding, nd),
                                                         dilation, groups, HIGHEST)
        return conv3d.conv3d_by_depth_taps(x, w, stride, padding, dilation, groups, HIGHEST, acc)
    if not transposed:
        return lax.conv_general_dilated(
            x, w.astype(x.dtype) if w.dtype != x.dtype else w, window_strides=stride,
            padding=[(p, p) for p in padding], rhs_dilation=dilation,
            feature_group_count=groups, precision=HIGHEST, preferred_element_type=acc)
    output_padding = _tup(output_padding, nd)
    cin, coutg = w.shape[0], w.shape[1]
    k = w.shape[2:]
    # (Cin, Cout/g, k) -> (Cout, Cin/g, k), spatially flipped.
    wt = w.reshape((groups, cin // groups, coutg) + k)
    wt = jnp.swapaxes(wt, 1, 2).reshape((groups * coutg, cin // groups) + k)
    wt = jnp.flip(wt, axis=tuple(range(2, 2 + nd)))
    pads = [(d * (kk - 1) - p, d * (kk - 1) - p + op)
            for kk, p, d, op in zip(k, padding, dilation, output_padding)]
    return lax.conv_general_dilated(
        x, wt, window_strides=(1,) * nd, padding=pads, lhs_dilation=stride, rhs_dilation=dilation,
        feature_group_count=groups, precision=HIGHEST, preferred_element_type=acc)


def _by_depth_taps(x, w, stride, padding, dilation, transposed, output_padding) -> bool:
    nd = x.ndim - 2
    if not conv3d.applies(x, w, nd):
        return False
    return not transposed or conv3d.transposes_exactly(
        x, w, _tup(stride, nd), _tup(padding, nd), _tup(output_padding, nd), _tup(dilation, nd))


def _bias_shape(b, nd):
    return b.reshape((1, -1) + (1,) * nd)


@register(aten.convolution.default)
def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """float16 / bfloat16 accumulate in float32 and add the bias before the one rounding, as eager
    CPU's kernels do (im2col + a float32-accumulating gemm onto the bias, or oneDNN). A transposed
    one in float16 on a host without float16 oneDNN support runs eager's col2im kernel, which rounds
    after each kernel offset: that depends on the host, so lazyxla keeps the one rounding."""
    low = x.dtype if x.dtype in (jnp.float16, jnp.bfloat16) else None
    # (float16 products are exact in float32: the inputs stay float16, the accumulator is float32)
    out = _conv(x, w, stride, padding, dilation, transposed, output_padding, groups,
                jnp.float32 if low is not None else None)
    if bias is not None:
        out = out + _bias_shape(bias, x.ndim - 2).astype(out.dtype)
    return out.astype(x.dtype) if low is not None else out


def _conv_output_layout(out, x, w, *args):
    """Eager's 2-d convolutions (oneDNN on the CPU, cuDNN) give a channels-last result when the
    input or the weight is channels-last (and not also contiguous); the meta kernel gives a
    contiguous one. (Checked against eager CPU over 768 cases: dtypes, groups, strides,
    dilations, 1x1 kernels, transposed. Eager's 3-d ones pick by backend heuristics: left to the
    meta kernel.)"""
    cl = torch.channels_last
    if out.dim() == 4 and any(t.is_contiguous(memory_format=cl) and not t.is_contiguous()
                              for t in (x, w)):
        return out.contiguous(memory_format=cl)
    return out


meta.OUTPUT_FIXES[aten.convolution.default] = _conv_output_layout


@register(aten.convolution_backward.default)
def convolution_backward(g, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                         groups, output_mask):
    def fwd(a, b):
        return _conv(a, b, stride, padding, dilation, transposed, output_padding, groups)
    if not (output_mask[1] and conv_grad.applies(x)):
        gi, gw = _vjp(fwd, [x, w], g, output_mask[:2])
    else:  # the weight gradient in the form XLA's CPU runtime computes fastest (conv_grad.py)
        gi = _vjp(lambda a: fwd(a, w), [x], g, [True])[0] if output_mask[0] else None
        nd = x.ndim - 2
        if conv_grad.is_pointwise(w, _tup(padding, nd), groups, transposed):
            gw = conv_grad.pointwise_weight_grad(x, w, g, _tup(stride, nd))
        elif transposed and _by_depth_taps(x, w, stride, padding, dilation, transposed, output_padding):
            # <g, convT(x, w)> = <conv(g, w), x>: the forward convolution's weight gradient with
            # g as its input and x as its output's cotangent
            def conv(a, b):
                return _conv(a, b, stride, padding, dilation, False, 0, groups)
            gw = conv_grad.chunked_weight_grad(
                lambda gs, xs: _vjp(lambda b: conv(gs, b), [w], xs, [True])[0], g, x,
                conv_grad.batch_chunk(g, w, x, False))
        else:
            # (3-d: only as conv3d.py's 2-d convolutions; XLA's 3-d one gained nothing from chunks)
            chunk = conv_grad.batch_chunk(x, w, g, transposed) if nd == 2 or (
                not transposed and _by_depth_taps(x, w, stride, padding, dilation, False, 0)) \
                else x.shape[0]
            gw = conv_grad.chunked_weight_grad(
                lambda xs, gs: _vjp(lambda b: fwd(xs, b), [w], gs, [True])[0], x, g, chunk)
    gb = None
    if output_mask[2]:
        gb = jnp.sum(g, axis=(0,) + tuple(range(2, g.ndim)))
    return gi, gw, gb


# ---------------------------------------------------------------- pooling

def _pool_out(n, k, s, p, d, ceil):
    span = n + 2 * p - d * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return max(o, 0)


def _windows(x, kernel, stride, padding, dilation, ceil, fill):
    """Gather pooling windows over the last len(kernel) dims.
    -> (windows (..., O1..On, K1*..*Kn), flat input index of each window element, valid mask)."""
    nd = len(kernel)
    sp = x.shape[-nd:]
    outs = [_pool_out(n, k, s, p, d, ceil) for n, k, s, p, d in zip(sp, kernel, stride, padding, dilation)]
    # per dim: (O, K) positions
    pos = [np.arange(o)[:, None] * s - p + np.arange(k)[None, :] * d
           for o, k, s, p, d in zip(outs, kernel, stride, padding, dilation)]
    # broadcast to (O1..On, K1..Kn)
    full_pos, valid = [], np.ones(tuple(outs) + tuple(kernel), bool)
    for i, ps in enumerate(pos):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = ps.shape
        b = np.broadcast_to(ps.reshape(shape), tuple(outs) + tuple(kernel))
        valid &= (b >= 0) & (b < sp[i])
        full_pos.append(np.clip(b, 0, sp[i] - 1))
    flat = np.zeros(tuple(outs) + tuple(kernel), np.int64)
    for i, b in enumerate(full_pos):
        flat = flat * sp[i] + b
    kk = int(np.prod(kernel))
    flat = flat.reshape(tuple(outs) + (kk,))
    valid = valid.reshape(tuple(outs) + (kk,))
    xf = x.reshape(x.shape[:-nd] + (int(np.prod(sp)),))  # not -1: an empty batch has no size to infer
    win = jnp.take(xf, jnp.asarray(flat.reshape(-1)), axis=-1).reshape(x.shape[:-nd] + tuple(outs) + (kk,))
    if fill is not None:
        win = jnp.where(jnp.asarray(valid), win, jnp.asarray(fill, win.dtype))
    return win, flat, valid, outs


def _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, nd):
    kernel = _tup(kernel_size, nd)
    stride = _tup(stride, nd) if stride else kernel
    padding, dilation = _tup(padding, nd), _tup(dilation, nd)
    neg = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    outs = [_pool_out(n, k, s, p, d, ceil_mode)
            for n, k, s, p, d in zip(x.shape[-nd:], kernel, stride, padding, dilation)]
    if x.size and all(outs):
        return _max_pool_by_offsets(x, kernel, stride, padding, dilation, outs, neg)
    win, flat, _, outs = _windows(x, kernel, stride, padding, dilation, ceil_mode, neg)
    am = jnp.argmax(win, axis=-1)
    val = jnp.take_along_axis(win, am[..., None], axis=-1)[..., 0]
    flat_j = jnp.broadcast_to(jnp.asarray(flat), win.shape)
    idx = jnp.take_along_axis(flat_j, am[..., None], axis=-1)[..., 0]
    return val, idx.astype(jnp.int64)


def _max_pool_by_offsets(x, kernel, stride, padding, dilation, outs, neg):
    """Max pooling as a running maximum over the kernel's offsets, each a strided slice of the
    padded input: eager's scan (the first largest value, but the last NaN; a window of -inf gives
    its first valid index). Slices and selects keep a channels-last input so
    (runtime/channels_last.py), where gathering windows needs it logical."""
    nd, lead = len(kernel), x.ndim - len(kernel)
    sizes = x.shape[lead:]
    high = [max(0, (o - 1) * s + (k - 1) * d + 1 - p - n)
            for n, k, s, p, d, o in zip(sizes, kernel, stride, padding, dilation, outs)]
    xp = lax.pad(x, jnp.asarray(neg, x.dtype), [(0, 0, 0)] * lead + [(p, h, 0) for p, h in zip(padding, high)])
    plane_strides = [math.prod(sizes[i + 1:]) for i in range(nd)]
    best = index = have = None
    for offset in itertools.product(*map(range, kernel)):
        pos = [np.arange(o) * s - p + f * d for o, s, p, f, d in zip(outs, stride, padding, offset, dilation)]
        valid, flat = np.ones(tuple(outs), bool), np.zeros(tuple(outs), np.int64)
        for i, q in enumerate(pos):
            shape = [1] * nd
            shape[i] = -1
            valid = valid & ((q >= 0) & (q < sizes[i])).reshape(shape)
            flat = flat + (q * plane_strides[i]).reshape(shape)
        if not valid.any():
            continue
        start = [0] * lead + [f * d for f, d in zip(offset, dilation)]
        limit = list(x.shape[:lead]) + [b + (o - 1) * s + 1 for b, o, s in zip(start[lead:], outs, stride)]
        v = lax.slice(xp, start, limit, [1] * lead + list(stride))
        if best is None:
            best, index, have = jnp.where(valid, v, neg), jnp.where(valid, flat, 0), valid
            continue
        take = v > best
        if jnp.issubdtype(x.dtype, jnp.floating):
            take = take | jnp.isnan(v)
        take = valid & (take | ~have)
        best, index, have = jnp.where(take, v, best), jnp.where(take, flat, index), have | valid
    return best, index


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, 2)


@register(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, 3)


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(g, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return pool_grad(g, x, indices, 2)


@register(aten.max_pool3d_with_indices_backward.default)
def max_pool3d_with_indices_backward(g, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return pool_grad(g, x, indices, 3)


def _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nd):
    kernel = _tup(kernel_size, nd)
    stride = _tup(stride, nd) if stride else kernel
    padding = _tup(padding, nd)
    win, _, valid, outs = _windows(x, kernel, stride, padding, (1,) * nd, ceil_mode, 0)
    # float16 / bfloat16: the window sum and the division in float32 (opmath), one rounding
    total = jnp.sum(_acc(win), axis=-1)
    if divisor_override:
        div = np.full(tuple(outs), float(divisor_override))
    elif count_include_pad:
        # window clipped to the padded input, as PyTorch counts it
        sp = x.shape[-nd:]
        div = np.ones(tuple(outs))
        for i in range(nd):
            o = np.arange(outs[i])
            start = o * stride[i] - padding[i]
            end = np.minimum(start + kernel[i], sp[i] + padding[i])
            shape = [1] * nd
            shape[i] = outs[i]
            div = div * (end - start).reshape(shape)
    else:
        div = valid.sum(-1).astype(np.float64)
    return (total / jnp.asarray(div, total.dtype)).astype(x.dtype)


@register(aten.avg_pool2d.default)
def avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2)


@register(aten.avg_pool3d.default)
def avg_pool3d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3)


@register(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(g, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return _vjp(lambda a: _avg_pool(a, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                    divisor_override, 2), [x], g, [True])[0]


@register(aten.avg_pool3d_backward.default)
def avg_pool3d_backward(g, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return _vjp(lambda a: _avg_pool(a, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                    divisor_override, 3), [x], g, [True])[0]


def _adaptive_bounds(n, o):
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


def _adaptive_matrix(n, o):
    """(o, n) 0/1 matrix: which inputs each adaptive window sums."""
    s, e = _adaptive_bounds(n, o)
    m = np.zeros((o, n))
    for i in range(o):
        m[i, s[i]:e[i]] = 1.0
    return m


def _adaptive_avg(x, output_size, nd):
    """Eager CPU: the window sum accumulated in float32 (opmath), divided by each window extent in
    turn (sum / kh / kw), rounded once to the input dtype. adaptive_avg_pool3d is the exception
    (_adaptive_avg_half_3d)."""
    outs = _tup(output_size, nd)
    if nd == 3 and x.dtype in (jnp.float16, jnp.bfloat16):
        return _adaptive_avg_half_3d(x, outs)
    out = _acc(x)
    for i, o in enumerate(outs):
        ax = x.ndim - nd + i
        m = jnp.asarray(_adaptive_matrix(x.shape[ax], o), out.dtype)
        out = jnp.moveaxis(jnp.tensordot(jnp.moveaxis(out, ax, -1), m.T, axes=1, precision=HIGHEST), -1, ax)
    for i, o in enumerate(outs):
        s, e = _adaptive_bounds(x.shape[x.ndim - nd + i], o)
        shape = [1] * nd
        shape[i] = o
        out = out / jnp.asarray((e - s).reshape(shape), out.dtype)
    return out.astype(x.dtype)


def _adaptive_avg_half_3d(x, outs):
    """Eager CPU's adaptive_avg_pool3d (AdaptiveAveragePooling3d.cpp) accumulates in the input's
    float16 / bfloat16 itself: `scalar_t sum = 0; sum += x` over the window in (t, h, w) order,
    each addition rounded, then `sum / kT / kH / kW` with every division rounded (c10::Half
    arithmetic divides by the extent converted to the same dtype)."""
    low = x.dtype
    rnd = rounder(low)
    win, _, valid = _adaptive_windows(x, outs, 3)
    win = jnp.moveaxis(win.astype(jnp.float32), -1, 0)
    valid = jnp.moveaxis(jnp.asarray(valid), -1, 0)

    def step(acc, wv):
        w, v = wv
        return jnp.where(v, rnd(acc + w), acc), None
    acc, _ = lax.scan(step, jnp.zeros(win.shape[1:], jnp.float32), (win, valid))
    ml = ml_dtypes.bfloat16 if low == jnp.bfloat16 else np.float16
    for i, o in enumerate(outs):
        s, e = _adaptive_bounds(x.shape[x.ndim - 3 + i], o)
        shape = [1] * 3
        shape[i] = o
        acc = rnd(acc / jnp.asarray((e - s).astype(ml).astype(np.float32).reshape(shape)))
    return acc.astype(low)


@register(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(x, output_size):
    return _adaptive_avg(x, output_size, 2)


@register(aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool3d(x, output_size):
    return _adaptive_avg(x, output_size, 3)


@register(aten._adaptive_avg_pool2d_backward.default)
def adaptive_avg_pool2d_backward(g, x):
    if x.size and g.size and jnp.issubdtype(x.dtype, jnp.floating):
        return _adaptive_avg2d_backward(g, x)
    return _vjp(lambda a: _adaptive_avg(a, g.shape[-2:], 2), [x], g, [True])[0]


def _adaptive_avg2d_backward(g, x):
    """eager's CPU kernel: each output's grad / kh / kw (a float16 / bfloat16 one rounding each
    division) added into its window's input gradient in the dtype, output after output in
    row-major order: every input element sums its windows in (oh, ow) order."""
    low = x.dtype in (jnp.float16, jnp.bfloat16)
    rnd, cd = (rounder(x.dtype), jnp.float32) if low else ((lambda v: v), x.dtype)
    (ih, iw), (oh, ow) = x.shape[-2:], g.shape[-2:]
    (sh, eh), (sw, ew) = _adaptive_bounds(ih, oh), _adaptive_bounds(iw, ow)
    div = Arith(cd).div  # (a division: XLA would multiply by a rounded reciprocal)
    # (the barrier: XLA would fold (g / kh) / kw into g / (kh * kw), which rounds otherwise)
    per_row = lax.optimization_barrier(rnd(div(g.astype(cd), (eh - sh)[:, None].astype(cd))))
    delta = rnd(div(per_row, (ew - sw)[None, :].astype(cd)))

    def covering(s, e, n):  # the windows over each input index, ascending, padded with -1
        i = np.arange(n)
        lo, hi = np.searchsorted(e, i, side="right"), np.searchsorted(s, i, side="right")
        o = lo[:, None] + np.arange(max(int(np.max(hi - lo)), 1))[None, :]
        return np.where(o < hi[:, None], o, -1)
    ch, cw = covering(sh, eh, ih), covering(sw, ew, iw)
    acc = jnp.zeros(x.shape, cd)
    for a in range(ch.shape[1]):
        rows = jnp.take(delta, np.maximum(ch[:, a], 0), axis=-2)
        for b in range(cw.shape[1]):
            d = jnp.take(rows, np.maximum(cw[:, b], 0), axis=-1)
            ok = (ch[:, a] >= 0)[:, None] & (cw[:, b] >= 0)[None, :]
            acc = jnp.where(ok, rnd(acc + d), acc)
    return acc.astype(x.dtype)


@register(aten._adaptive_avg_pool3d_backward.default)
def adaptive_avg_pool3d_backward(g, x):
    return _vjp(lambda a: _adaptive_avg(a, g.shape[-3:], 3), [x], g, [True])[0]


def _adaptive_windows(x, outs, nd):
    """Gather the adaptive windows of the last nd dims, padded to the largest window:
    -> (windows (..., O1..On, K), flat input index of each element, valid mask (O1..On, K)); the K
    elements of a window run in row-major order (the order eager's loops visit them)."""
    sp = x.shape[-nd:]
    bounds = [_adaptive_bounds(n, o) for n, o in zip(sp, outs)]
    kmax = [int(np.max(e - s)) if o else 1 for (s, e), o in zip(bounds, outs)]
    full_pos, valid = [], np.ones(tuple(outs) + tuple(kmax), bool)
    for i, (s, e) in enumerate(bounds):
        ps = s[:, None] + np.arange(kmax[i])[None, :]
        ok = ps < e[:, None]
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = ps.shape
        full_pos.append(np.broadcast_to(np.minimum(ps, sp[i] - 1).reshape(shape), tuple(outs) + tuple(kmax)))
        valid &= np.broadcast_to(ok.reshape(shape), valid.shape)
    flat = np.zeros(valid.shape, np.int64)
    for i, b in enumerate(full_pos):
        flat = flat * sp[i] + b
    kk = int(np.prod(kmax))
    flat, valid = flat.reshape(tuple(outs) + (kk,)), valid.reshape(tuple(outs) + (kk,))
    xf = x.reshape(x.shape[:-nd] + (int(np.prod(sp)),))  # not -1: an empty batch has no size to infer
    win = jnp.take(xf, jnp.asarray(flat.reshape(-1)), axis=-1).reshape(x.shape[:-nd] + tuple(outs) + (kk,))
    return win, flat, valid


def _adaptive_max(x, output_size, nd):
    outs = _tup(output_size, nd)
    win, flat, valid = _adaptive_windows(x, outs, nd)
    neg = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    win = jnp.where(jnp.asarray(valid), win, jnp.asarray(neg, win.dtype))
    am = jnp.argmax(win, axis=-1)
    val = jnp.take_along_axis(win, am[..., None], axis=-1)[..., 0]
    idx = jnp.take_along_axis(jnp.broadcast_to(jnp.asarray(flat), win.shape), am[..., None], axis=-1)[..., 0]
    return val, idx.astype(jnp.int64)


@register(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(x, output_size):
    return _adaptive_max(x, output_size, 2)


@register(aten.adaptive_max_pool3d.default)
def adaptive_max_pool3d(x, output_size):
    return _adaptive_max(x, output_size, 3)


@register(aten.adaptive_max_pool2d_backward.default)
def adaptive_max_pool2d_backward(g, x, indices):
    return pool_grad(g, x, indices, 2)


@register(aten.adaptive_max_pool3d_backward.default)
def adaptive_max_pool3d_backward(g, x, indices):
    return pool_grad(g, x, indices, 3)


def _acc(x):
    """Statistics are accumulated in float32 at least (PyTorch's opmath type)."""
    return x.astype(jnp.float32) if x.dtype in (jnp.float16, jnp.bfloat16) else x


# ---------------------------------------------------------------- embedding

@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    check_index(indices, weight.shape[0], negative=False)
    return jnp.take(weight, indices, axis=0, mode="clip")


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(g, indices, num_weights, padding_idx, scale_grad_by_freq):
    idx = indices.reshape(-1)
    gf = g.reshape(idx.shape[0], -1)
    if padding_idx >= 0:
        gf = jnp.where((idx == padding_idx)[:, None], jnp.zeros((), gf.dtype), gf)
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), gf.dtype).at[idx].add(1)
        gf = gf / counts[idx][:, None]
    return jnp.zeros((num_weights, gf.shape[1]), gf.dtype).at[idx].add(gf)
