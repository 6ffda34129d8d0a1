"""Reductions, scans, sorting and selection (sum/mean/var/amax/max.dim/softmax/cumsum/sort/topk...).

Conventions used throughout: `meta=True` gives the output shapes and dtypes, so a lowering reduces
with keepdims=False and reshapes to the meta shape (that handles keepdim, dim=None and 0-d inputs
alike) and accumulates in the output dtype (float32 for bfloat16/float16). Semantics follow eager
CPU PyTorch: NaN propagates through max/min, arg-reductions pick the first occurrence, sorting is
stable with NaN largest, integer sums promote to int64 (the meta dtype says so)."""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from lazyxla.ir import meta
from lazyxla.jaxenv import np_dtype
from .arithmetic import log_add_exp_complex
from .pointwise import in_dtype_of
from .registry import aten, astype, register

_LOW_FLOATS = (np.dtype(jnp.bfloat16), np.dtype(np.float16))


# ----------------------------------------------------------------------------------------- helpers

def _dims(dim, ndim, empty_is_all=True):
    """Normalised reduction axes. None (and [] when empty_is_all) means every axis; on a 0-d
    tensor dims 0/-1 mean nothing to reduce."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    dim = list(dim)
    if not dim:
        return tuple(range(ndim)) if empty_is_all else ()
    n = max(ndim, 1)
    return tuple(sorted({d % n for d in dim if ndim > 0}))


def _dim1(dim, ndim):
    return dim % max(ndim, 1)


def _acc(dtype):
    """Accumulation dtype for an output dtype: float32 for half types."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in _LOW_FLOATS else dtype


def _out(_meta, i=0):
    shape, dtype = _meta[i]
    return tuple(shape), np_dtype(dtype)


def _is_float(x):
    return jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.complexfloating)


def _isnan(x):
    return jnp.isnan(x) if _is_float(x) else jnp.zeros(x.shape, bool)


def _as_acc(x, _meta, i=0, rounded=True):
    """x in the accumulation dtype. Eager converts the input to the result dtype first, with its
    conversion rules (-1.0 is 255 as uint8; int 2049 is 2048 as float16; a complex `z` summed with
    dtype=float32 keeps its real part), then accumulates; not `rounded`: straight to the
    accumulation dtype (eager's CPU mean with a half dtype sums the input as float32)."""
    shape, dtype = _out(_meta, i)
    acc = _acc(dtype)
    if x.dtype != dtype and rounded:
        x = astype(x, dtype)
    return (x if x.dtype == acc else astype(x, acc)), shape


def _move_last(x, dim):
    """x with axis `dim` moved last (a 0-d x becomes shape (1,))."""
    if x.ndim == 0:
        return x.reshape(1)
    return jnp.moveaxis(x, dim, -1)


def _flat_last(x, dims):
    """Move `dims` to the end and merge them into one trailing axis."""
    rest = [d for d in range(x.ndim) if d not in dims]
    x = jnp.transpose(x, rest + list(dims))
    return x.reshape(x.shape[:len(rest)] + (-1,))


# -------------------------------------------------------------------------------------- sum & co

def _one_term(x, axes) -> bool:
    """Whether a sum over `axes` adds a single float element: eager adds it to 0.0 (-0.0 gives
    0.0), where XLA returns the element itself (a reduction of one is a copy)."""
    return _is_float(x) and math.prod([x.shape[d] for d in axes]) == 1


def _unsigned_zero(r):
    """r with -0.0 as 0.0 (each part of a complex), by a select: XLA folds `r + 0.0` to r."""
    if jnp.iscomplexobj(r):
        return lax.complex(_unsigned_zero(r.real), _unsigned_zero(r.imag))
    return jnp.where(r == 0, jnp.zeros((), r.dtype), r)


@register(aten.sum.default, aten.sum.dim_IntList, meta=True)
def sum_(x, dim=None, keepdim=False, dtype=None, _meta=None):
    x, shape = _as_acc(x, _meta)
    axes = _dims(dim, x.ndim)
    out = jnp.sum(x, axis=axes)
    return (_unsigned_zero(out) if _one_term(x, axes) else out).reshape(shape)


@register(aten.nansum.default, meta=True)
def nansum(x, dim=None, keepdim=False, dtype=None, _meta=None):
    x = jnp.where(_isnan(x), jnp.zeros((), x.dtype), x)
    return sum_(x, dim, keepdim, dtype, _meta=_meta)


def _nansum_meta(x, dim=None, keepdim=False, dtype=None):
    # eager reduces every dim for dim=() or [], as sum does; PyTorch's meta kernel reduces none
    return aten.nansum.default(x, None if isinstance(dim, (list, tuple)) and not dim else dim,
                               keepdim, dtype=dtype)


meta.META_KERNELS[aten.nansum.default] = _nansum_meta


@register(aten.mean.default, aten.mean.dim, meta=True)
def mean(x, dim=None, keepdim=False, dtype=None, _meta=None):
    x, shape = _as_acc(x, _meta, rounded=False)
    axes = _dims(dim, x.ndim)
    out = jnp.mean(x, axis=axes)
    return (_unsigned_zero(out) if _one_term(x, axes) else out).reshape(shape)


@register(aten.prod.default, meta=True)
def prod(x, dtype=None, _meta=None):
    x, shape = _as_acc(x, _meta)
    return jnp.prod(x).reshape(shape)


@register(aten.prod.dim_int, meta=True)
def prod_dim(x, dim, keepdim=False, dtype=None, _meta=None):
    x, shape = _as_acc(x, _meta)
    return jnp.prod(x, axis=_dims(dim, x.ndim)).reshape(shape)


def _max(x, axis):
    # lax.reduce_max propagates NaN on every backend, as torch does; bool via uint8.
    if x.dtype == jnp.bool_:
        return jnp.max(x.astype(jnp.uint8), axis=axis).astype(jnp.bool_)
    out = jnp.max(x, axis=axis)
    if _is_float(x):
        out = jnp.where(jnp.any(jnp.isnan(x), axis=axis), jnp.nan, out)
    return out


def _min(x, axis):
    if x.dtype == jnp.bool_:
        return jnp.min(x.astype(jnp.uint8), axis=axis).astype(jnp.bool_)
    out = jnp.min(x, axis=axis)
    if _is_float(x):
        out = jnp.where(jnp.any(jnp.isnan(x), axis=axis), jnp.nan, out)
    return out


@register(aten.amax.default, meta=True)
def amax(x, dim=(), keepdim=False, _meta=None):
    return _max(x, _dims(dim, x.ndim)).reshape(_out(_meta)[0])


@register(aten.amin.default, meta=True)
def amin(x, dim=(), keepdim=False, _meta=None):
    return _min(x, _dims(dim, x.ndim)).reshape(_out(_meta)[0])


@register(aten.max.default, meta=True)
def max_(x, _meta=None):
    return _max(x, None).reshape(_out(_meta)[0])


@register(aten.min.default, meta=True)
def min_(x, _meta=None):
    return _min(x, None).reshape(_out(_meta)[0])


@register(aten.aminmax.default, meta=True)
def aminmax(x, dim=None, keepdim=False, _meta=None):
    axes = _dims(dim, x.ndim)
    return _min(x, axes).reshape(_out(_meta, 0)[0]), _max(x, axes).reshape(_out(_meta, 1)[0])


def _first_index(x, value, axis):
    """Index along `axis` of the first element equal to `value` (keepdims'd), NaN matching NaN."""
    match = x == value
    if _is_float(x):
        match = match | (jnp.isnan(x) & jnp.isnan(value))
    return jnp.argmax(match, axis=axis)


def _arg_reduce(x, dim, reducer):
    if dim is None:
        x = x.reshape(-1)
        axis = 0
    elif x.ndim == 0:
        x = x.reshape(1)
        axis = 0
    else:
        axis = _dim1(dim, x.ndim)
    value = reducer(x, axis)
    return value, _first_index(x, jnp.expand_dims(value, axis), axis)


@register(aten.max.dim, meta=True)
def max_dim(x, dim, keepdim=False, _meta=None):
    v, i = _arg_reduce(x, dim, _max)
    return v.reshape(_out(_meta, 0)[0]), i.reshape(_out(_meta, 1)[0])


@register(aten.min.dim, meta=True)
def min_dim(x, dim, keepdim=False, _meta=None):
    v, i = _arg_reduce(x, dim, _min)
    return v.reshape(_out(_meta, 0)[0]), i.reshape(_out(_meta, 1)[0])


@register(aten.argmax.default, meta=True)
def argmax(x, dim=None, keepdim=False, _meta=None):
    return _arg_reduce(x, dim, _max)[1].reshape(_out(_meta)[0])


@register(aten.argmin.default, meta=True)
def argmin(x, dim=None, keepdim=False, _meta=None):
    return _arg_reduce(x, dim, _min)[1].reshape(_out(_meta)[0])


# ------------------------------------------------------------------------------------- var / std

def _var_mean(x, dim, correction, acc):
    x = x.astype(acc)
    axes = _dims(dim, x.ndim)
    n = 1
    for a in axes:
        n *= x.shape[a]
    mean = jnp.mean(x, axis=axes, keepdims=True)
    c = 1 if correction is None else correction
    d = x - mean
    if jnp.issubdtype(acc, jnp.complexfloating):
        sq = jnp.real(d * jnp.conj(d))
    else:
        sq = d * d
    denom = jnp.maximum(jnp.asarray(n, sq.dtype) - c, 0).astype(sq.dtype)
    # less the square of the deviations' sum over n (the corrected two-pass form): the rounded
    # mean's error, n * err^2 in the squares' sum, would dominate a variance small beside the
    # mean (values 3e4 + U(0, 1): 38x eager's error, which accumulates in double)
    s = jnp.sum(d, axis=axes)
    s2 = jnp.real(s * jnp.conj(s)) if jnp.iscomplexobj(s) else s * s
    var = jnp.maximum(jnp.sum(sq, axis=axes) - s2 / n, 0) / denom
    return var, jnp.squeeze(mean, axes)


@register(aten.var.correction, meta=True)
def var(x, dim=None, correction=None, keepdim=False, _meta=None):
    shape, dtype = _out(_meta)
    return _var_mean(x, dim, correction, _acc(x.dtype))[0].reshape(shape)


@register(aten.std.correction, meta=True)
def std(x, dim=None, correction=None, keepdim=False, _meta=None):
    shape, dtype = _out(_meta)
    return jnp.sqrt(_var_mean(x, dim, correction, _acc(x.dtype))[0]).reshape(shape)


@register(aten.var_mean.correction, meta=True)
def var_mean(x, dim=None, correction=None, keepdim=False, _meta=None):
    v, m = _var_mean(x, dim, correction, _acc(x.dtype))
    return v.reshape(_out(_meta, 0)[0]), m.reshape(_out(_meta, 1)[0])


@register(aten.std_mean.correction, meta=True)
def std_mean(x, dim=None, correction=None, keepdim=False, _meta=None):
    v, m = _var_mean(x, dim, correction, _acc(x.dtype))
    return jnp.sqrt(v).reshape(_out(_meta, 0)[0]), m.reshape(_out(_meta, 1)[0])


# --------------------------------------------------------------------------------------- all/any

@register(aten.all.default, aten.all.dim, aten.all.dims, meta=True)
def all_(x, dim=None, keepdim=False, _meta=None):
    axes = _dims(dim, x.ndim, empty_is_all=False)
    return jnp.all(x != 0, axis=axes).reshape(_out(_meta)[0])


@register(aten.any.default, aten.any.dim, aten.any.dims, meta=True)
def any_(x, dim=None, keepdim=False, _meta=None):
    axes = _dims(dim, x.ndim, empty_is_all=False)
    return jnp.any(x != 0, axis=axes).reshape(_out(_meta)[0])


@register(aten.count_nonzero.dim_IntList, aten.count_nonzero.default, meta=True)
def count_nonzero(x, dim=None, _meta=None):
    return jnp.sum((x != 0).astype(jnp.int64), axis=_dims(dim, x.ndim)).reshape(_out(_meta)[0])


# ------------------------------------------------------------------------------------------ norms

def _vector_norm(x, ord, axes, acc):
    """sum(|x|^ord)^(1/ord) with the special orders 0, 1, 2, inf, -inf. `ord` is a traced Scalar,
    so the branch is picked at run time by lax.switch (only one branch executes)."""
    a = jnp.abs(x.astype(acc)) if not jnp.issubdtype(x.dtype, jnp.complexfloating) else jnp.abs(x)
    a = a.astype(_acc(a.dtype))
    if isinstance(ord, (int, float)):
        ord = jnp.asarray(ord, jnp.float64)
    ordf = jnp.asarray(ord).astype(jnp.float64)
    branches = [
        lambda a: jnp.sqrt(jnp.sum(a * a, axis=axes)),
        lambda a: jnp.sum(a, axis=axes),
        (lambda a: _max(a, axes)) if a.size else (lambda a: jnp.sum(a, axis=axes)),
        (lambda a: _min(a, axes)) if a.size else (lambda a: jnp.sum(a, axis=axes)),
        lambda a: jnp.sum((a != 0).astype(a.dtype), axis=axes),
        lambda a: jnp.power(jnp.sum(jnp.power(a, ordf.astype(a.dtype)), axis=axes),
                            (1.0 / ordf).astype(a.dtype)),
    ]
    idx = jnp.select([ordf == 2, ordf == 1, ordf == jnp.inf, ordf == -jnp.inf, ordf == 0],
                     [0, 1, 2, 3, 4], 5)
    return lax.switch(idx, branches, a)


@register(aten.linalg_vector_norm.default, meta=True)
def linalg_vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None, _meta=None):
    shape, out = _out(_meta)
    if dtype is not None:
        x = x.astype(np_dtype(dtype))
    return _vector_norm(x, ord, _dims(dim, x.ndim), _acc(out)).reshape(shape)


@register(aten.norm.Scalar, aten.norm.ScalarOpt_dtype, meta=True)
def norm_all(x, p=2, dtype=None, _meta=None):
    return linalg_vector_norm(x, 2 if p is None else p, None, False, dtype, _meta=_meta)


@register(aten.norm.ScalarOpt_dim, aten.norm.ScalarOpt_dim_dtype, meta=True)
def norm_dim(x, p, dim, keepdim=False, dtype=None, _meta=None):
    return linalg_vector_norm(x, 2 if p is None else p, dim, keepdim, dtype, _meta=_meta)


@register(aten.logsumexp.default, meta=True)
def logsumexp(x, dim, keepdim=False, _meta=None):
    x, shape = _as_acc(x, _meta)
    axes = _dims(dim, x.ndim)
    if x.size == 0:
        return jnp.log(jnp.sum(jnp.exp(x), axis=axes)).reshape(shape)
    # eager shifts by the max of the real parts (a real number, so the imaginary part of a complex
    # result is the angle of the sum, in (-pi, pi]); an infinite max shifts by 0
    m = _max(jnp.real(x), axes)
    m = jnp.where(jnp.isinf(m), jnp.zeros((), m.dtype), m)
    mk = jnp.expand_dims(m, axes)
    # eager's composite runs each step as an op of the dtype: a float16 / bfloat16 one rounds
    # x - max, its exp, the (float32-accumulated) sum, its log and the final add
    r = functools.partial(in_dtype_of, _meta)
    return r(r(jnp.log(r(jnp.sum(r(jnp.exp(r(x - mk))), axis=axes)))) + m).reshape(shape)


# ---------------------------------------------------------------------------------------- softmax

def _sm_prep(x, dim, _meta):
    shape, dtype = _out(_meta)
    x = x.astype(_acc(dtype))
    if x.ndim == 0:
        return x.reshape(1), 0, shape
    return x, _dim1(dim, x.ndim), shape


@register(aten._softmax.default, meta=True)
def softmax(x, dim, half_to_float=False, _meta=None):
    x, d, shape = _sm_prep(x, dim, _meta)
    if x.size == 0:
        return x.reshape(shape)
    e = jnp.exp(x - jnp.max(x, axis=d, keepdims=True))
    return (e / jnp.sum(e, axis=d, keepdims=True)).reshape(shape)


@register(aten._log_softmax.default, meta=True)
def log_softmax(x, dim, half_to_float=False, _meta=None):
    last = x.ndim > 0 and dim % x.ndim == x.ndim - 1
    x, d, shape = _sm_prep(x, dim, _meta)
    if x.size == 0:
        return x.reshape(shape)
    s = x - jnp.max(x, axis=d, keepdims=True)
    # eager's kernel over the last dim keeps the sum of exps and its log in the dtype (float16 /
    # bfloat16: each rounded); over any other dim, float32 throughout
    r = functools.partial(in_dtype_of, _meta) if last else (lambda v: v)  # noqa: E731
    return (s - r(jnp.log(r(jnp.sum(jnp.exp(s), axis=d, keepdims=True))))).reshape(shape)


@register(aten._softmax_backward_data.default, meta=True)
def softmax_backward(grad, out, dim, input_dtype, _meta=None):
    shape, dtype = _out(_meta)
    acc = _acc(jnp.promote_types(grad.dtype, out.dtype))
    g, y = grad.astype(acc), out.astype(acc)
    if g.ndim == 0:
        return (y * (g - g * y)).reshape(shape)
    d = _dim1(dim, g.ndim)
    return (y * (g - jnp.sum(g * y, axis=d, keepdims=True))).reshape(shape)


@register(aten._log_softmax_backward_data.default, meta=True)
def log_softmax_backward(grad, out, dim, input_dtype, _meta=None):
    shape, dtype = _out(_meta)
    acc = _acc(jnp.promote_types(grad.dtype, out.dtype))
    g, y = grad.astype(acc), out.astype(acc)
    if g.ndim == 0:
        return (g - jnp.exp(y) * g).reshape(shape)
    d = _dim1(dim, g.ndim)
    return (g - jnp.exp(y) * jnp.sum(g, axis=d, keepdims=True)).reshape(shape)


# ------------------------------------------------------------------------------------------ scans

# eager's CPU scans accumulate float32 and complex64 in double (acc_type<float> is double): a
# float32 cumprod of 5000 values near 1 was 70 ulp off, eager's half an ulp
_SCAN_ACC = {np.dtype(np.float32): jnp.float64, np.dtype(np.complex64): jnp.complex128}


def _as_scan_acc(x, _meta):
    x, shape = _as_acc(x, _meta)
    wide = _SCAN_ACC.get(_out(_meta)[1])  # (a half result accumulates in float32, as eager's)
    return (x if wide is None else x.astype(wide)), shape


@register(aten.cumsum.default, meta=True)
def cumsum(x, dim, dtype=None, _meta=None):
    x, shape = _as_scan_acc(x, _meta)
    if x.ndim == 0:  # (eager's cumsum of a 0-d tensor is a copy: -0.0 stays)
        return x
    axis = _dim1(dim, x.ndim)
    out = jnp.cumsum(x, axis=axis)
    return (_unsigned_zero(out) if _one_term(x, (axis,)) else out).reshape(shape)


@register(aten.cumprod.default, meta=True)
def cumprod(x, dim, dtype=None, _meta=None):
    x, shape = _as_scan_acc(x, _meta)
    if x.ndim == 0:
        return x
    return jnp.cumprod(x, axis=_dim1(dim, x.ndim)).reshape(shape)


@register(aten.logcumsumexp.default, aten._logcumsumexp.default, meta=True)
def logcumsumexp(x, dim, _meta=None):
    x, shape = _as_scan_acc(x, _meta)
    if x.ndim == 0 or x.size == 0:
        return x.reshape(shape)
    d = _dim1(dim, x.ndim)
    if jnp.iscomplexobj(x):
        return _logcumsumexp_complex(x, d).reshape(shape)
    return lax.associative_scan(jnp.logaddexp, x, axis=d).reshape(shape)


def _logcumsumexp_complex(x, d):
    """Eager's CPU loop: cum = -inf + 0j, then cum = _log_add_exp_helper(x[i], cum) for each i in
    order, in complex128 (acc_type of complex64). The helper's log1p(exp(min - max)) + max is not
    associative in the imaginary part (it is never wrapped, so a tree-ordered scan can end 2*pi
    away): fold sequentially, as eager does."""
    x = x.astype(jnp.complex128)
    xs = jnp.moveaxis(x, d, 0)

    def step(cum, xi):
        cum = log_add_exp_complex(xi, cum)
        return cum, cum

    init = jnp.full(xs.shape[1:], complex(-np.inf, 0.0), x.dtype)
    _, out = lax.scan(step, init, xs)
    return jnp.moveaxis(out, 0, d)


def _cum_extreme(x, dim, greater):
    """cummax/cummin as torch's CPU loop: take the new element when it is NaN, or when the running
    value is not NaN and the new element is >= (<=) it, so ties and NaNs give the latest index."""
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = _dim1(dim, x.ndim)
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    idx = jnp.broadcast_to(jnp.arange(x.shape[d], dtype=jnp.int64).reshape(shape), x.shape)
    key = x.astype(jnp.uint8) if x.dtype == jnp.bool_ else x

    def combine(a, b):
        av, ai = a
        bv, bi = b
        take = (bv >= av) if greater else (bv <= av)
        if _is_float(key):
            take = jnp.isnan(bv) | (~jnp.isnan(av) & take)
        return jnp.where(take, bv, av), jnp.where(take, bi, ai)

    if x.size == 0:
        return x, idx
    v, i = lax.associative_scan(combine, (key, idx), axis=d)
    return v.astype(x.dtype), i


@register(aten.cummax.default)
def cummax(x, dim):
    return _cum_extreme(x, dim, True)


@register(aten.cummin.default)
def cummin(x, dim):
    return _cum_extreme(x, dim, False)


# -------------------------------------------------------------------------------- sort & selection

def _stable_sort_last(x, descending=False):
    """Stable sort along the last axis with NaN largest (and -0.0 == 0.0); returns (values,
    int64 indices). Descending is stable too: sort the reversed row ascending, reverse back."""
    n = x.shape[-1]
    key = x.astype(jnp.uint8) if x.dtype == jnp.bool_ else x
    if descending:
        key = jnp.flip(key, -1)
    idx = lax.broadcasted_iota(jnp.int64, key.shape, key.ndim - 1)
    v, i = lax.sort((key, idx), dimension=key.ndim - 1, is_stable=True, num_keys=1)
    if descending:
        v, i = jnp.flip(v, -1), (n - 1) - jnp.flip(i, -1)
    return v.astype(x.dtype), i


def _sort(x, dim, descending):
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = _dim1(dim, x.ndim)
    v, i = _stable_sort_last(jnp.moveaxis(x, d, -1), descending)
    return jnp.moveaxis(v, -1, d), jnp.moveaxis(i, -1, d)


@register(aten.sort.default)
def sort(x, dim=-1, descending=False):
    return _sort(x, dim, descending)


@register(aten.sort.stable)
def sort_stable(x, stable=None, dim=-1, descending=False):
    return _sort(x, dim, descending)


@register(aten.topk.default, meta=True)
def topk(x, k, dim=-1, largest=True, sorted=True, _meta=None):
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = _dim1(dim, x.ndim)
    v, i = _stable_sort_last(jnp.moveaxis(x, d, -1), descending=largest)
    return jnp.moveaxis(v[..., :k], -1, d), jnp.moveaxis(i[..., :k], -1, d)


@register(aten.kthvalue.default, meta=True)
def kthvalue(x, k, dim=-1, keepdim=False, _meta=None):
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    d = _dim1(dim, x.ndim)
    v, i = _stable_sort_last(jnp.moveaxis(x, d, -1))
    return v[..., k - 1].reshape(_out(_meta, 0)[0]), i[..., k - 1].reshape(_out(_meta, 1)[0])


def _median_last(x, ignore_nan):
    """Lower median along the last axis: (values, indices). With NaNs: median returns the first
    NaN; nanmedian takes the median of the non-NaN values (NaN if all are NaN)."""
    n = x.shape[-1]
    v, i = _stable_sort_last(x)
    nan = _isnan(x)
    if ignore_nan:
        cnt = n - jnp.sum(nan, axis=-1, keepdims=True)
        k = jnp.maximum(cnt - 1, 0) // 2
    else:
        k = jnp.full(x.shape[:-1] + (1,), (n - 1) // 2)
    val = jnp.take_along_axis(v, k, axis=-1)[..., 0]
    ind = jnp.take_along_axis(i, k, axis=-1)[..., 0]
    if not ignore_nan and _is_float(x):
        has = jnp.any(nan, axis=-1)
        val = jnp.where(has, jnp.nan, val)
        ind = jnp.where(has, jnp.argmax(nan, axis=-1).astype(ind.dtype), ind)
    return val, ind


def _empty_median(x):
    # eager fills NaN (cast to an integer dtype on x86: its minimum)
    return jnp.array(jnp.nan if _is_float(x) else jnp.iinfo(x.dtype).min, x.dtype)


@register(aten.median.default, meta=True)
def median(x, _meta=None):
    if x.size == 0:
        return _empty_median(x)
    return _median_last(x.reshape(-1), False)[0].reshape(_out(_meta)[0])


@register(aten.nanmedian.default, meta=True)
def nanmedian(x, _meta=None):
    if x.size == 0:
        return _empty_median(x)
    return _median_last(x.reshape(-1), True)[0].reshape(_out(_meta)[0])


def _median_dim(x, dim, ignore_nan, _meta):
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    v, i = _median_last(jnp.moveaxis(x, _dim1(dim, x.ndim), -1), ignore_nan)
    return v.reshape(_out(_meta, 0)[0]), i.reshape(_out(_meta, 1)[0])


@register(aten.median.dim, meta=True)
def median_dim(x, dim, keepdim=False, _meta=None):
    return _median_dim(x, dim, False, _meta)


@register(aten.nanmedian.dim, meta=True)
def nanmedian_dim(x, dim, keepdim=False, _meta=None):
    return _median_dim(x, dim, True, _meta)


@register(aten.mode.default, meta=True)
def mode(x, dim=-1, keepdim=False, _meta=None):
    """Most frequent value (the smallest among equally frequent ones) and the index of its last
    occurrence, as torch's CPU kernel gives (sort, then scan runs of equal values)."""
    if x.ndim == 0:
        return x, jnp.zeros((), jnp.int64)
    v, i = _stable_sort_last(jnp.moveaxis(x, _dim1(dim, x.ndim), -1))
    n = v.shape[-1]
    pos = lax.broadcasted_iota(jnp.int64, v.shape, v.ndim - 1)
    differ = v[..., 1:] != v[..., :-1]
    start = jnp.concatenate([jnp.ones(v.shape[:-1] + (1,), bool), differ], axis=-1)
    end = jnp.concatenate([differ, jnp.ones(v.shape[:-1] + (1,), bool)], axis=-1)
    run_start = lax.cummax(jnp.where(start, pos, 0), axis=v.ndim - 1)
    freq = jnp.where(end, pos - run_start + 1, -1)
    best = jnp.argmax(freq, axis=-1)[..., None]
    val = jnp.take_along_axis(v, best, axis=-1)[..., 0]
    ind = jnp.take_along_axis(i, best, axis=-1)[..., 0]
    del n
    return val.reshape(_out(_meta, 0)[0]), ind.reshape(_out(_meta, 1)[0])
