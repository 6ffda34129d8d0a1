"""Histograms: torch.histogram (a bin count, or given edges) and torch.histogramdd, bit for bit as
PyTorch's CPU kernels compute them (torch.histc is lowered in numeric.py).

Bin counts: the outer edges are the range, or the data's min and max (widened by 0.5 each way
when equal; [0, 1] for no data), and the edges are linspace in the input dtype, which PyTorch's CPU
kernel computes as one fused multiply-add per edge (start + step * i for the lower half,
end - step * (n - 1 - i) for the upper half): here an exact FMA (error-free sums, rounding to odd).
An element's bin follows the kernel's rule, not a formula of our own: a linear estimate
(x - lo) * bins / (hi - lo) in the input dtype, corrected by an upper_bound search of the edges
around it. Given edges: the same upper_bound binary search over all of them (on unsorted edges it
lands where its probes lead, as eager's does). Everything outside [first edge, last edge] (and NaN)
is dropped, the last bin is closed on the right, weights are summed, and density divides by the
total and by each bin's width. Half and bfloat16 round after every operation, as c10's Half
arithmetic does. Edges fixed by a given range are computed on the host (numpy) with the same code.

PyTorch has no meta kernels for these ops: they are registered here, with the CPU kernels' argument
checks. The data's own range (no range given) must be finite too: a deferred check (as histc's)
raises eager's error at the next read.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from lazyxla.jaxenv import cpp_type_name, type_name
from .exact_arith import Arith, linspace
from .registry import CHECK_ERRORS, aten, check_values, register

# ---------------------------------------------------------------- bin selection

def _upper_bound(edges, x, first, last, longest):
    """std::upper_bound(edges + first, edges + last, x) - edges for each x: libstdc++'s binary
    search step for step (first/last arrays like x, last - first <= longest), so unsorted edges
    give eager's answer too."""
    n = edges.shape[0]
    count = last - first
    for _ in range(int(longest).bit_length()):
        half = count >> 1
        mid = first + half
        v = edges[jnp.clip(mid, 0, n - 1)]
        active = count > 0
        right = active & ~(x < v)
        first = jnp.where(right, mid + 1, first)
        count = jnp.where(active, jnp.where(right, count - half - 1, half), 0)
    return first


def _bin_positions(ar: Arith, x, edges, linear):
    """Each element's bin along one dimension (the kernel's rule) and whether it is counted."""
    n = edges.shape[0]
    left, right = edges[0], edges[n - 1]
    inside = (x >= left) & (x <= right)
    if linear:
        # (x - left) * bins / (right - left) in the dtype, truncated; NaN (equal edges) gives 0
        est = ar.r(ar.div(ar.r(ar.r(x - left) * ar.r(jnp.asarray(n - 1, jnp.float64))), ar.r(right - left)))
        est = jnp.where(inside & ~jnp.isnan(est), est, 0).astype(jnp.int64)
        first = jnp.maximum(est - 1, 0)
        last = jnp.minimum(est + 2, n)
        ub = _upper_bound(edges, x, first, last, 3)
    else:
        ub = _upper_bound(edges, x, jnp.zeros(x.shape, jnp.int64), jnp.full(x.shape, n, jnp.int64), n)
    pos = ub - 1
    pos = jnp.where(pos == n - 1, pos - 1, pos)  # the last bin includes its right edge
    return pos, inside


def _histogramdd(ar: Arith, x, edges, weight, density, linear, out_dtype):
    """hist over the (M, D) points x with per-dimension edges (arrays in ar's computing dtype)."""
    d = x.shape[1]
    sizes = [e.shape[0] - 1 for e in edges]
    total = math.prod(sizes)
    flat = jnp.zeros(x.shape[0], jnp.int64)
    keep = jnp.ones(x.shape[0], bool)
    for k in range(d):
        pos, inside = _bin_positions(ar, x[:, k], edges[k], linear)
        flat = flat + pos * (math.prod(sizes[k + 1:]))
        keep &= inside
    # eager writes at the flat offset it computed; one that falls outside the histogram is dropped
    flat = jnp.where(keep & (flat >= 0) & (flat < total), flat, total)
    w = jnp.ones(x.shape[0], ar.cd) if weight is None else weight.reshape(-1).astype(ar.cd)
    # (half and bfloat16 sum in float32, rounded once: eager sums in the dtype per thread and
    # adds the threads' histograms, so its counts past 256 (bfloat16) or 2048 (half) in one bin
    # depend on its thread count)
    hist = ar.r(jnp.zeros(total, ar.cd).at[flat].add(w, mode="drop")).reshape(sizes)
    if density:
        s = jnp.sum(hist.astype(jnp.float64 if ar.dtype == np.float64 else jnp.float32))
        hist = ar.r(ar.div(hist, ar.r(s)))
        for k in range(d):
            width = ar.r(edges[k][1:] - edges[k][:-1])
            shape = [1] * d
            shape[k] = sizes[k]
            hist = ar.r(ar.div(hist, width.reshape(shape)))
    return hist.astype(out_dtype)


def _outer_edges(ar: Arith, x2):
    """(lo, hi) per dimension in the dtype: the data's min/max (in float64, as eager holds them),
    widened by 0.5 each way where equal; [0, 1] for no data."""
    d = x2.shape[1]
    if x2.shape[0] == 0:
        lo, hi = jnp.zeros(d, jnp.float64), jnp.ones(d, jnp.float64)
    else:
        lo = jnp.min(x2, axis=0).astype(jnp.float64)
        hi = jnp.max(x2, axis=0).astype(jnp.float64)
        bad = ~(jnp.isfinite(lo) & jnp.isfinite(hi))  # (eager refuses a NaN or inf in the data)
        for k in range(d):
            check_values(bad[k], _range_kind(k))
    same = lo == hi
    lo = jnp.where(same, lo - 0.5, lo)
    hi = jnp.where(same, hi + 0.5, hi)
    return ar.from_double(lo), ar.from_double(hi)


def _range_kind(k):
    """The check kind (registry.CHECK_ERRORS) of eager's error for dimension k's data range (its
    min and max, known only when the program has run, so not in the words)."""
    kind = f"histogramdd_range_{k}"
    if kind not in CHECK_ERRORS:
        CHECK_ERRORS[kind] = (RuntimeError, f"torch.histogramdd: dimension {k}'s range [min, max] is not "
                              "finite (the data's own range holds a NaN or inf, in {ops})", "InvalidInput")
    return kind


def _edges_from_counts(ar: Arith, x2, bins, range_):
    """Each dimension's edges; from a given range they are constants, computed on the host."""
    if range_ is None:
        lo, hi = _outer_edges(ar, x2)
        return [linspace(ar, lo[k], hi[k], b + 1) for k, b in enumerate(bins)]
    host = Arith(ar.dtype, np)
    edges = []
    with np.errstate(all="ignore"):
        for k, b in enumerate(bins):
            lo, hi = float(range_[2 * k]), float(range_[2 * k + 1])
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            edges.append(jnp.asarray(linspace(host, host.from_double(lo), host.from_double(hi), b + 1)))
    return edges


def _input(x, d=None):
    """x as (M, D) points in the computing dtype."""
    ar = Arith(x.dtype)
    x2 = x.reshape(-1, 1) if d is None else x.reshape(-1, d)
    return ar, x2.astype(ar.cd)


# ---------------------------------------------------------------- lowerings

@register(aten.histogram.bin_ct)
def histogram_bin_ct(x, bins=100, *, range=None, weight=None, density=False):
    ar, x2 = _input(x)
    edges = _edges_from_counts(ar, x2, [bins], range)
    hist = _histogramdd(ar, x2, edges, weight, density, True, ar.dtype)
    return hist, edges[0].astype(ar.dtype)


@register(aten.histogram.bins_tensor)
def histogram_bins_tensor(x, bins, *, weight=None, density=False):
    ar, x2 = _input(x)
    e = bins.astype(ar.cd)
    return _histogramdd(ar, x2, [e], weight, density, False, ar.dtype), bins


@register(aten._histogramdd_bin_edges.default)
def histogramdd_bin_edges(x, bins, *, range=None, weight=None, density=False):
    ar, x2 = _input(x, x.shape[-1])
    return tuple(e.astype(ar.dtype) for e in _edges_from_counts(ar, x2, bins, range))


@register(aten._histogramdd_from_bin_cts.default)
def histogramdd_from_bin_cts(x, bins, *, range=None, weight=None, density=False):
    ar, x2 = _input(x, x.shape[-1])
    edges = _edges_from_counts(ar, x2, bins, range)
    return _histogramdd(ar, x2, edges, weight, density, True, ar.dtype)


@register(aten._histogramdd_from_bin_tensors.default)
def histogramdd_from_bin_tensors(x, bins, *, weight=None, density=False):
    ar, x2 = _input(x, x.shape[-1])
    return _histogramdd(ar, x2, [b.astype(ar.cd) for b in bins], weight, density, False, ar.dtype)


# ---------------------------------------------------------------- meta kernels (and eager's checks)

_KERNEL_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _not_implemented(name, dt):
    raise NotImplementedError(f'"{name}" not implemented for \'{type_name(dt)}\'')


def _shape_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _check_range(n, range_, x_numel, dtype):
    """select_outer_bin_edges' checks (on the range; the data's min/max cannot be checked)."""
    if range_ is not None:
        if len(range_) != 2 * n:
            raise RuntimeError(f"torch.histogramdd: for a {n}-dimensional histogram range should have "
                               f"{2 * n} elements, but got {len(range_)}")
        for k in range(n):
            lo, hi = float(range_[2 * k]), float(range_[2 * k + 1])
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise RuntimeError(f"torch.histogramdd: dimension {k}'s range [{lo:g}, {hi:g}] is not finite")
            if not lo <= hi:
                raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} "
                                   f"max {hi:g} for dimension {k}")
    elif x_numel > 0 and dtype not in (torch.float32, torch.float64):
        _not_implemented("histogramdd", dtype)


def _check_inputs(x_shape, dtype, bins_specs, weight):
    """histogramdd_check_inputs on the (M, N) view of the input; bins_specs: (dim, numel, dtype)."""
    if len(x_shape) < 2:
        raise RuntimeError(f"torch.histogramdd: input tensor should have at least 2 dimensions, but got "
                           f"{len(x_shape)}")
    n = x_shape[-1]
    if len(bins_specs) != n:
        raise RuntimeError(f"torch.histogramdd: expected {n} sequences of bin edges for a {n}-dimensional "
                           f"histogram but got {len(bins_specs)}")
    for k, (bdim, bnumel, bdt) in enumerate(bins_specs):
        if bdt != dtype:
            raise RuntimeError("torch.histogramdd: input tensor and bins tensors should have the same "
                               f"dtype, but got input with dtype {cpp_type_name(dtype)} and bins "
                               f"for dimension {k} with dtype {cpp_type_name(bdt)}")
        if bdim != 1:
            raise RuntimeError("torch.histogramdd: bins tensor should have one dimension, but got "
                               f"{bdim} dimensions in the bins tensor for dimension {k}")
        if bnumel <= 0:
            raise RuntimeError("torch.histogramdd: bins tensor should have at least 1 element, but got "
                               f"{bnumel} elements in the bins tensor for dimension {k}")
    if weight is not None:
        if weight.dtype != dtype:
            raise RuntimeError("torch.histogramdd: if weight tensor is provided, input tensor and weight "
                               f"tensor should have the same dtype, but got input("
                               f"{cpp_type_name(dtype)}), and weight("
                               f"{cpp_type_name(weight.dtype)})")
        wshape = list(weight.shape) or [1]
        if list(x_shape[:-1]) != wshape:
            raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the same "
                               "shape as the input tensor excluding its innermost dimension, but got "
                               f"input with shape {_shape_str(x_shape)} and weight with shape "
                               f"{_shape_str(weight.shape)}")


def _check_counts(bins):
    for k, b in enumerate(bins):
        if b <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {b} for dimension {k}")


def _check_kernel_dtype(dtype):
    if dtype not in _KERNEL_DTYPES:
        _not_implemented("histogram_cpu", dtype)


def _flat_weight(weight):
    return None if weight is None else weight.reshape(-1)


def _meta_bin_ct(x, bins=100, *, range=None, weight=None, density=False):
    _check_counts([bins])
    _check_range(1, range, x.numel(), x.dtype)
    _check_inputs((x.numel(), 1), x.dtype, [(1, bins + 1, x.dtype)], _flat_weight(weight))
    _check_kernel_dtype(x.dtype)
    return x.new_empty((bins,)), x.new_empty((bins + 1,))


def _meta_bins_tensor(x, bins, *, weight=None, density=False):
    _check_inputs((x.numel(), 1), x.dtype, [(bins.dim(), bins.numel(), bins.dtype)], _flat_weight(weight))
    _check_counts([bins.numel() - 1])
    _check_kernel_dtype(x.dtype)
    return x.new_empty((bins.numel() - 1,)), bins.new_empty(bins.shape)


def _dd_bins_check(x, bins):
    if x.dim() < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    if len(bins) != x.shape[-1]:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of "
                           "the input.")


def _meta_dd_bin_edges(x, bins, *, range=None, weight=None, density=False):
    _dd_bins_check(x, bins)
    _check_range(x.shape[-1], range, x.numel(), x.dtype)
    _check_kernel_dtype(x.dtype)  # (eager makes integer edges here, then fails counting)
    return [x.new_empty((b + 1,)) for b in bins]


def _meta_dd_from_bin_cts(x, bins, *, range=None, weight=None, density=False):
    _dd_bins_check(x, bins)
    _check_range(x.shape[-1], range, x.numel(), x.dtype)
    _check_inputs(tuple(x.shape), x.dtype, [(1, b + 1, x.dtype) for b in bins], weight)
    _check_counts(bins)
    _check_kernel_dtype(x.dtype)
    return x.new_empty(tuple(bins))


def _meta_dd_from_bin_tensors(x, bins, *, weight=None, density=False):
    _check_inputs(tuple(x.shape), x.dtype, [(b.dim(), b.numel(), b.dtype) for b in bins], weight)
    _check_counts([b.numel() - 1 for b in bins])
    _check_kernel_dtype(x.dtype)
    return x.new_empty(tuple(b.numel() - 1 for b in bins))


_META = torch.library.Library("aten", "IMPL")
_META.impl("histogram.bin_ct", _meta_bin_ct, "Meta")
_META.impl("histogram.bins_tensor", _meta_bins_tensor, "Meta")
_META.impl("_histogramdd_bin_edges", _meta_dd_bin_edges, "Meta")
_META.impl("_histogramdd_from_bin_cts", _meta_dd_from_bin_cts, "Meta")
_META.impl("_histogramdd_from_bin_tensors", _meta_dd_from_bin_tensors, "Meta")
