"""Matrix products and linear algebra: mm/bmm/addmm/baddbmm/addbmm/mv/addmv/dot, triu/tril/trace,
cross, and the LAPACK-backed ops (det, slogdet, inv, cholesky, solve, qr, svd, eigh) through
jax.numpy.linalg / jax.lax.linalg.

float32 products use Precision.HIGHEST (full f32 accumulation, as CPU BLAS); bfloat16/float16
products accumulate in float32. `beta`/`alpha` are traced Scalars; beta == 0 ignores `self`
entirely (NaN/inf there do not propagate), as in PyTorch."""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from lazyxla.jaxenv import np_dtype
from .exact_arith import rounder
from .pointwise import is_one
from . import registry
from .registry import CHECK_ERRORS, LU_PIVOTS, aten, check_values, register

_HI = lax.Precision.HIGHEST
# (float8 products accumulate in float32 too, and saturate to the dtype as eager's: XLA's float8
# product gave NaN past e4m3fn's 448)
_LOW_FLOATS = (np.dtype(jnp.bfloat16), np.dtype(np.float16),
               *(np_dtype(t) for t in (torch.float8_e4m3fn, torch.float8_e5m2,
                                       torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)))


def product_dtype(dtype):
    """The dtype a product of `dtype` operands accumulates in (float32 for the half dtypes; None,
    the operands', for bools)."""
    dtype = np.dtype(dtype)
    if dtype in _LOW_FLOATS:
        return np.dtype(np.float32)
    if dtype == np.dtype(np.bool_):
        return None
    return dtype


# einsum spec -> lax.dot_general's ((contracting a, contracting b), (batch a, batch b)). jnp.einsum
# plans a contraction path and traces a nested jit for every new shape: 0.78 ms per product traced
# for the first time (each first call, each new dynamic length), against 0.13 for dot_general.
_DIMS = {
    "ij,jk->ik": (((1,), (0,)), ((), ())),
    "bij,bjk->bik": (((2,), (1,)), ((0,), (0,))),
    "bij,bjk->ik": (((0, 2), (0, 1)), ((), ())),
    "ij,j->i": (((1,), (0,)), ((), ())),
    "i,i->": (((0,), (0,)), ((), ())),
}


def _mat(spec, a, b):
    dims = _DIMS.get(spec)
    if a.dtype == jnp.bool_:
        a, b = a.astype(jnp.int64), b.astype(jnp.int64)
        return (jnp.einsum(spec, a, b) if dims is None else lax.dot_general(a, b, dims)) != 0
    acc = product_dtype(a.dtype)
    a, b = _cpu_dot_operands(a, b, acc)
    if dims is None:  # (the batched "..." products of linalg_qr)
        return jnp.einsum(spec, a, b, precision=_HI, preferred_element_type=acc)
    return lax.dot_general(a, b, dims, precision=_HI, preferred_element_type=acc)


def _cpu_dot_operands(a, b, acc):
    """Half operands of a float32 product as float32 on the CPU backend: XLA's CPU runtime has no
    kernel for a bfloat16 x bfloat16 = float32 dot its library rewrite leaves over (a transposed
    batched product in attention's backward: "Unsupported element type for DotThunk"). The same
    values: a product of two half values is exact in float32, and the sum accumulates there."""
    if acc is not None and a.dtype != acc and a.dtype in _LOW_FLOATS and _on_cpu():
        return a.astype(acc), b.astype(acc)
    return a, b


@functools.cache
def _on_cpu() -> bool:
    return jax.default_backend() == "cpu"


def _add_scaled(self, prod, beta, alpha):
    """beta * self + alpha * prod, where beta == 0 drops self. Integer results take beta and alpha
    converted to their dtype (truncated, as PyTorch's CPU kernels do: beta=0.2 drops self)."""
    if jnp.issubdtype(prod.dtype, jnp.integer):
        to_int = lambda s: s if isinstance(s, int) else jnp.asarray(s).astype(prod.dtype)  # noqa: E731
        beta, alpha = to_int(beta), to_int(alpha)
    elif self.dtype != prod.dtype:
        # half inputs: beta * self joins the float32 product unrounded, one rounding at the end
        # (eager's gemm computes beta * c + alpha * (a @ b) in float32; Muon's Newton-Schulz steps,
        # beta -4.775, differed in 1 of 6 bfloat16 results)
        self = self.astype(prod.dtype)
    scaled = prod if is_one(alpha) else prod * alpha
    if is_one(beta):
        return scaled + self
    if isinstance(beta, (int, float)) and beta == 0:
        return scaled + jnp.zeros_like(self)
    term = jnp.where(beta == 0, jnp.zeros((), self.dtype), self * beta)
    return scaled + term


@register(aten.mm.default)
def mm(a, b):
    return _mat("ij,jk->ik", a, b)


@register(aten.bmm.default)
def bmm(a, b):
    return _mat("bij,bjk->bik", a, b)


@register(aten.mv.default)
def mv(a, v):
    return _mat("ij,j->i", a, v)


@register(aten.dot.default)
def dot(a, b):
    return _mat("i,i->", a, b)


@register(aten.vdot.default)
def vdot(a, b):
    return _mat("i,i->", jnp.conj(a), b)


@register(aten.addmm.default)
def addmm(self, a, b, beta=1, alpha=1):
    return _add_scaled(self, _mat("ij,jk->ik", a, b), beta, alpha)


@register(aten.baddbmm.default)
def baddbmm(self, a, b, beta=1, alpha=1):
    return _add_scaled(self, _mat("bij,bjk->bik", a, b), beta, alpha)


@register(aten.addbmm.default)
def addbmm(self, a, b, beta=1, alpha=1):
    if np.dtype(a.dtype) in _LOW_FLOATS and a.shape[0] > 1:
        # eager runs one addmm per batch (float32 accumulation), rounding to the dtype after each
        prods = _mat("bij,bjk->bik", a, b)
        first = _add_scaled(self, prods[0], beta, alpha).astype(a.dtype)
        out, _ = lax.scan(lambda acc, p: (_add_scaled(acc, p, 1, alpha).astype(a.dtype), None),
                          first, prods[1:])
        return out
    return _add_scaled(self, _mat("bij,bjk->ik", a, b), beta, alpha)


@register(aten.addmv.default)
def addmv(self, a, v, beta=1, alpha=1):
    return _add_scaled(self, _mat("ij,j->i", a, v), beta, alpha)


@register(aten.addr.default)
def addr(self, u, v, beta=1, alpha=1):
    if u.dtype == jnp.bool_:
        prod = u[:, None] & v[None, :]
        return prod | ((self != 0) & (beta != 0))
    if np.dtype(u.dtype) in _LOW_FLOATS:
        return _addr_low(self, u, v, beta, alpha)
    # eager's kernel: beta * self + (alpha * vec1) * vec2, each product in the dtype
    if not is_one(alpha):
        if not jnp.issubdtype(u.dtype, jnp.inexact):  # (converted to the dtype: truncated)
            alpha = alpha if isinstance(alpha, int) else jnp.asarray(alpha).astype(u.dtype)
        u = u * alpha
    return _add_scaled(self, u[:, None] * v[None, :], beta, 1)


def _addr_low(self, u, v, beta, alpha):
    """addr in float16 / bfloat16: eager's kernel, beta * self + (alpha * vec1) * vec2 with beta
    and alpha converted to the dtype, every operation rounded to it (in float32, rounded by
    `rounder`: XLA would fuse the product and the sum into one FMA in native float16)."""
    low, f32 = u.dtype, jnp.float32
    r = rounder(low)
    # (c10 converts a double scalar to the dtype through float)
    to_low = lambda s: r(jnp.asarray(s).astype(f32))  # noqa: E731
    u, v = u.astype(f32), v.astype(f32)
    if not is_one(alpha):
        u = r(u * to_low(alpha))
    prod = r(u[:, None] * v[None, :])
    self = self.astype(f32)
    if is_one(beta):
        out = r(prod + self)
    elif isinstance(beta, (int, float)) and beta == 0:
        out = prod + jnp.zeros_like(self)
    else:
        out = r(prod + jnp.where(beta == 0, jnp.zeros((), f32), r(self * to_low(beta))))
    return out.astype(low)


@register(aten.triu.default)
def triu(x, diagonal=0):
    return jnp.triu(x, diagonal)


@register(aten.tril.default)
def tril(x, diagonal=0):
    return jnp.tril(x, diagonal)


@register(aten.trace.default, meta=True)
def trace(x, _meta):
    (shape, dtype), = _meta
    return jnp.trace(x.astype(np_dtype(dtype)) if np_dtype(dtype) not in _LOW_FLOATS else
                     x.astype(jnp.float32))


@register(aten.diag_embed.default, meta=True)
def diag_embed(x, offset=0, dim1=-2, dim2=-1, _meta=None):
    (shape, dtype), = _meta
    nd = len(shape)
    d1, d2 = dim1 % nd, dim2 % nd
    n = x.shape[-1]
    m = n + abs(offset)
    eye = jnp.eye(m, m, offset, dtype=bool)                        # (m, m)
    r = jnp.arange(m)
    # on the diagonal j = i + offset, the element is x[..., min(i, j)]
    idx = jnp.clip(jnp.minimum(r[:, None], r[None, :]), 0, max(n - 1, 0))
    vals = jnp.take(x, idx.reshape(-1), axis=-1).reshape(x.shape[:-1] + (m, m)) if n else \
        jnp.zeros(x.shape[:-1] + (m, m), x.dtype)
    out = jnp.where(eye, vals, jnp.zeros((), x.dtype))             # (..., m, m) on dims -2, -1
    # move the two new dims into place
    rest = list(range(nd - 2))
    perm = [None] * nd
    others = [d for d in range(nd) if d not in (d1, d2)]
    for src, dst in zip(rest, others):
        perm[dst] = src
    perm[d1], perm[d2] = nd - 2, nd - 1
    return jnp.transpose(out, perm)


@register(aten.linalg_cross.default)
def linalg_cross(a, b, dim=-1):
    shape = jnp.broadcast_shapes(a.shape, b.shape)
    a, b = jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape)
    axis = dim % len(shape)
    if np.dtype(a.dtype) not in _LOW_FLOATS:
        return jnp.cross(a, b, axis=axis)
    # eager's kernel in the dtype: a1 * b2 - a2 * b1, each product and the difference rounded
    r, low = rounder(a.dtype), a.dtype
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    x, y = ([jnp.take(t, i, axis=axis) for i in range(3)] for t in (a, b))
    out = [r(r(x[i] * y[j]) - r(x[j] * y[i])) for i, j in ((1, 2), (2, 0), (0, 1))]
    return jnp.stack(out, axis=axis).astype(low)


# ------------------------------------------------------------------------------ LAPACK-backed ops

def _lu(a):
    """LAPACK getrf: (LU, 1-based int32 pivots, sign of the permutation). XLA's LU and LAPACK's
    part where a NaN or inf enters (a pivot, or the pivot search of a column holding a NaN), so
    a matrix whose factor is not finite is factored again by `_getf2` (the cost for the others:
    one isfinite pass over the factor and a conditional; a pivot's alone misses a NaN below)."""
    lu, piv, _ = lax.linalg.lu(a)
    if lu.size:
        nan = ~jnp.all(jnp.isfinite(lu), axis=(-2, -1))
        lu, piv = lax.cond(jnp.any(nan), lambda: _where_nan(nan, _getf2(a), (lu, piv)),
                           lambda: (lu, piv))
    n = piv.shape[-1]  # min(m, n)
    swaps = jnp.sum(piv != jnp.arange(n, dtype=piv.dtype), axis=-1)
    sign = jnp.where(swaps % 2 == 0, 1, -1).astype(a.dtype)
    return lu, (piv + 1).astype(jnp.int32), sign


def _where_nan(nan, exact, fast):
    return tuple(jnp.where(nan.reshape(nan.shape + (1,) * (x.ndim - nan.ndim)), x, y)
                 for x, y in zip(exact, fast))


def _getf2(a):
    """LAPACK's unblocked getf2, step by step: (LU, 0-based pivots). XLA's LU treats a NaN pivot
    as a zero one (its column is left unscaled, the trailing matrix stays finite and may get an
    exact zero pivot: info 2 and an inverse of infs for [[nan, 1], [1, 1]]); LAPACK divides by
    it, so the column and the trailing matrix become NaN and info counts exact zeros only (eager:
    inv and solve all NaN, info 0). The pivot is idamax's: the first largest magnitude, NaN never
    larger, except a NaN first, which no later element exceeds (|re| + |im| for complex)."""
    m, n = a.shape[-2:]
    rows, cols = jnp.arange(m), jnp.arange(n)

    def step(j, state):
        a, piv = state
        col = a[..., :, j]
        mag = jnp.abs(col.real) + jnp.abs(col.imag) if jnp.iscomplexobj(col) else jnp.abs(col)
        first_nan = jnp.isnan(jnp.take(mag, j, axis=-1))
        cand = jnp.where(rows >= j, jnp.where(jnp.isnan(mag), -1, mag), -2)
        p = jnp.where(first_nan, j, jnp.argmax(cand, axis=-1))
        swap = jnp.where(rows == j, p[..., None], jnp.where(rows == p[..., None], j, rows))
        a = jnp.take_along_axis(a, swap[..., :, None], axis=-2)
        pivot = jnp.take(a[..., j, :], j, axis=-1)[..., None]
        col = a[..., :, j]
        # (as LAPACK: times the reciprocal, divided where that would overflow)
        safe = jnp.where(pivot != 0, pivot, 1)
        quot = jnp.where(jnp.abs(pivot) < jnp.finfo(a.dtype).tiny, col / safe, col * (1 / safe))
        scaled = jnp.where((rows > j) & (pivot != 0), quot, col)
        trailing = (rows > j)[:, None] & (cols > j)[None, :]
        a = jnp.where(trailing, a - scaled[..., :, None] * a[..., j, None, :], a)
        a = jnp.where(cols == j, scaled[..., :, None], a)
        return a, piv.at[..., j].set(p.astype(piv.dtype))

    k = min(m, n)
    return lax.fori_loop(0, k, step, (a, jnp.zeros(a.shape[:-2] + (k,), jnp.int32)))


def _getrf_info(lu):
    """LAPACK getrf's info: the 1-based index of U's first pivot that is exactly zero, 0 if none
    (what eager's inv, solve and lu_factor raise on, through _linalg_check_errors)."""
    zero = jnp.diagonal(lu, axis1=-2, axis2=-1) == 0
    if zero.shape[-1] == 0:  # an empty matrix: nothing to pivot
        return jnp.zeros(zero.shape[:-1], jnp.int32)
    return jnp.where(jnp.any(zero, -1), jnp.argmax(zero, -1) + 1, 0).astype(jnp.int32)


def _det_lu_input(a):
    # PyTorch factors A^T for contiguous real A (det(A) = det(A^T)), and the backward's
    # lu_solve(adjoint=...) relies on the choice; the device kernel hands any other real A over
    # transposed (device/kernels.py, _lu_as_eager_factors), so this factors A itself then.
    return a if jnp.iscomplexobj(a) else jnp.swapaxes(a, -1, -2)


@register(aten._linalg_det.default)
def linalg_det(a):
    if a.shape[-1] == 0:
        return (jnp.ones(a.shape[:-2], a.dtype), a, jnp.zeros(a.shape[:-1], jnp.int32))
    lu, piv, sign = _lu(_det_lu_input(a))
    det = sign * jnp.prod(jnp.diagonal(lu, axis1=-2, axis2=-1), axis=-1)
    return det, lu, piv


@register(aten._linalg_slogdet.default)
def linalg_slogdet(a):
    if a.shape[-1] == 0:
        return (jnp.ones(a.shape[:-2], a.dtype), jnp.zeros(a.shape[:-2], a.dtype), a,
                jnp.zeros(a.shape[:-1], jnp.int32))
    lu, piv, sign = _lu(_det_lu_input(a))
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    s = sign * jnp.prod(jnp.sign(diag), axis=-1)
    return s, jnp.sum(jnp.log(jnp.abs(diag)), axis=-1), lu, piv


@register(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(a, pivot=True, check_errors=False):
    lu, piv, _ = _lu(a)
    return lu, piv, _getrf_info(lu)


def _unpack(lu, piv, _meta):
    """(P, L, U) with A = P L U from getrf's LU and 1-based pivots; an output PyTorch leaves empty
    (unpack_data/unpack_pivots False) is zeros of its meta shape."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    perm = lax.linalg.lu_pivots_to_permutation(piv.astype(jnp.int32) - 1, m)
    P = jnp.swapaxes(jax.nn.one_hot(perm, m, dtype=lu.dtype), -1, -2)
    L = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=lu.dtype)
    U = jnp.triu(lu[..., :k, :])
    return tuple(x if x.shape == tuple(shape) else jnp.zeros(shape, x.dtype)
                 for x, (shape, _) in zip((P, L, U), _meta))


@register(aten.lu_unpack.default, meta=True)
def lu_unpack(lu, piv, unpack_data=True, unpack_pivots=True, _meta=None):
    return _unpack(lu, piv, _meta)


@register(aten.linalg_lu.default, meta=True)
def linalg_lu(a, pivot=True, _meta=None):
    lu, piv, _ = _lu(a)
    return _unpack(lu, piv, _meta)


def _lu_solve_left(lu, piv, b, adjoint):
    """Solve A X = B (or A^H X = B) given getrf's LU and 1-based pivots of A."""
    n = lu.shape[-1]
    batch = jnp.broadcast_shapes(lu.shape[:-2], b.shape[:-2], piv.shape[:-1])
    lu = jnp.broadcast_to(lu, batch + lu.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    perm = lax.linalg.lu_pivots_to_permutation(jnp.broadcast_to(piv, batch + piv.shape[-1:]) - 1, n)
    tri = lax.linalg.triangular_solve
    if not adjoint:  # A[perm] = L U
        pb = jnp.take_along_axis(b, perm[..., :, None], axis=-2)
        y = tri(lu, pb, left_side=True, lower=True, unit_diagonal=True)
        return tri(lu, y, left_side=True, lower=False)
    # A^H = U^H L^H P, P X = Z  =>  X[perm] = Z
    y = tri(lu, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
    z = tri(lu, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True, conjugate_a=True)
    inv = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(z, inv[..., :, None], axis=-2)


def _lu_solve(lu, piv, b, left, adjoint):
    if left:
        return _lu_solve_left(lu, piv, b, adjoint)
    # X A = B  <=>  A^H X^H = B^H ;  X A^H = B  <=>  A X^H = B^H
    bh = jnp.conj(jnp.swapaxes(b, -1, -2))
    return jnp.conj(jnp.swapaxes(_lu_solve_left(lu, piv, bh, not adjoint), -1, -2))


@register(aten.linalg_lu_solve.default)
def linalg_lu_solve(lu, piv, b, left=True, adjoint=False):
    check_values((piv < 1) | (piv > lu.shape[-2]), LU_PIVOTS)  # getrf's are 1-based, <= n
    return _lu_solve(lu, piv, b, left, adjoint)


@register(aten.linalg_inv_ex.default)
def linalg_inv_ex(a, check_errors=False):
    # (from the one LU that gives info, as eager's getrf + getrs: NaN input gives all NaN)
    lu, piv, _ = _lu(a)
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return (_lu_solve_left(lu, piv, eye, False) if a.size else a), _getrf_info(lu)


def _cholesky_info(a):
    """LAPACK's info: the order of the first leading minor that is not positive definite (0: none).
    XLA's factor is all NaN on failure, so an unblocked factorization finds the failing pivot."""
    n = a.shape[-1]
    if n == 0:  # an empty matrix is positive definite (the loop body cannot even be traced)
        return jnp.zeros(a.shape[:-2], jnp.int32)

    def step(j, state):
        L, info = state
        row = L[..., j, :]  # L[j, :j]; the later columns are still 0
        d = jnp.real(a[..., j, j] - jnp.sum(row * jnp.conj(row), axis=-1))
        bad = ~(d > 0)  # NaN too
        info = jnp.where((info == 0) & bad, j + 1, info)
        ljj = jnp.sqrt(jnp.where(bad, 1, d)).astype(a.dtype)
        col = (a[..., :, j] - jnp.sum(L * jnp.conj(row)[..., None, :], axis=-1)) / ljj[..., None]
        col = jnp.where(jnp.arange(n) > j, col, 0).at[..., j].set(ljj)
        return L.at[..., :, j].set(col), info

    return lax.fori_loop(0, n, step, (jnp.zeros_like(a), jnp.zeros(a.shape[:-2], jnp.int32)))[1]


@register(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(a, upper=False, check_errors=False):
    L = jnp.linalg.cholesky(a)
    info = lax.cond(jnp.all(jnp.isfinite(L)), lambda: jnp.zeros(a.shape[:-2], jnp.int32),
                    lambda: _cholesky_info(a))
    if upper:
        L = jnp.conj(jnp.swapaxes(L, -1, -2))
    return L, info


@register(aten.cholesky.default)
def cholesky(a, upper=False):
    return linalg_cholesky_ex(a, upper)[0]


@register(aten._linalg_solve_ex.default, meta=True)
def linalg_solve_ex(a, b, left=True, check_errors=False, _meta=None):
    (rshape, _), = _meta[:1]
    vector = len(rshape) == a.ndim - 1
    if vector:
        b = b[..., None] if left else b[..., None, :]
    lu, piv, _ = _lu(a)  # (one LU: the solution's, the result's and info's)
    x = _lu_solve(lu, piv, b, left, False) if a.size else jnp.zeros(rshape, a.dtype)
    return x.reshape(rshape), lu, piv, _getrf_info(lu)


@register(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(a, b, upper, left=True, unitriangular=False):
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    return lax.linalg.triangular_solve(a, b, left_side=left, lower=not upper,
                                       unit_diagonal=unitriangular)


@register(aten.linalg_qr.default, meta=True)
def linalg_qr(a, mode="reduced", _meta=None):
    if mode == "r":
        r = jnp.linalg.qr(a, mode="r")
        return jnp.zeros(_meta[0][0], a.dtype), r
    return jnp.linalg.qr(a, mode=mode)


# ------------------------------------------------ errors of LAPACK's status, deferred (registry)
# Eager's svd and cholesky_inverse kernels read a status and raise; XLA computes regardless, so a
# deferred check reports eager's error at the next read: one flag per error eager can word
# (each failing batch element or diagonal index) up to _FLAGS, then one for any later.
_FLAGS = 16
_SVD_NAN = ("linalg.svd: {}The algorithm failed to converge because the input matrix contained "
            "non-finite values.")
_CHOLESKY_INVERSE_ZERO = ("cholesky_inverse: {}The diagonal element {} is zero, the inversion could "
                          "not be completed because the input matrix is singular.")


def _linalg_error(message):
    """A check kind (registry.CHECK_ERRORS) raising torch.linalg.LinAlgError(message)."""
    if message not in CHECK_ERRORS:
        CHECK_ERRORS[message] = (torch.linalg.LinAlgError, message + " (in {ops})", "InvalidInput")
    return message


def _check_first(code, count, message):
    """Flag which of `count` errors `code` (-1: none) names: eager's `message(c)` for c < _FLAGS,
    `message(None)` for any later one."""
    if registry.INDEX_CHECKS is None:
        return
    for c in range(min(count, _FLAGS)):
        check_values(code == c, _linalg_error(message(c)))
    if count > _FLAGS:
        check_values(code >= _FLAGS, _linalg_error(message(None)))


def _first_true(bad):
    """The flat index of the first true element of `bad`, -1 if none."""
    flat = bad.reshape(-1)
    return jnp.where(jnp.any(flat), jnp.argmax(flat), -1) if flat.size else jnp.int32(-1)


def _batch(c, matrix):
    return "" if matrix else f"(Batch element {c if c is not None else f'{_FLAGS} or later'}): "


@register(aten._linalg_svd.default, meta=True)
def linalg_svd(a, full_matrices=False, compute_uv=True, driver=None, _meta=None):
    # LAPACK's gesdd returns info -4 for a NaN (its max-norm is NaN; an inf alone passes)
    matrix = a.ndim == 2
    _check_first(_first_true(jnp.any(jnp.isnan(a), axis=(-2, -1))), math.prod(a.shape[:-2]),
                 lambda c: _SVD_NAN.format(_batch(c, matrix)))
    if not compute_uv:
        s = jnp.linalg.svd(a, compute_uv=False)
        return jnp.zeros(_meta[0][0], a.dtype), s, jnp.zeros(_meta[2][0], a.dtype)
    u, s, vh = jnp.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


@register(aten._linalg_eigh.default, meta=True)
def linalg_eigh(a, UPLO="L", compute_v=True, _meta=None):
    w, v = jnp.linalg.eigh(a, UPLO=UPLO, symmetrize_input=False)
    if not compute_v:
        return w, jnp.zeros(_meta[1][0], a.dtype)
    return w, v


def _cholesky_solve(b, L, upper):
    """Solves (L L^H) X = b for lower L, or (U^H U) X = b for upper U."""
    batch = jnp.broadcast_shapes(L.shape[:-2], b.shape[:-2])
    L = jnp.broadcast_to(L, batch + L.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    tri = lax.linalg.triangular_solve
    y = tri(L, b, left_side=True, lower=not upper, transpose_a=upper, conjugate_a=upper)
    return tri(L, y, left_side=True, lower=not upper, transpose_a=not upper, conjugate_a=not upper)


@register(aten._cholesky_solve_helper.default)
def cholesky_solve_helper(b, L, upper):
    return _cholesky_solve(b, L, upper)


@register(aten.cholesky_inverse.default)
def cholesky_inverse(L, upper=False):
    # LAPACK's potri: info, the first exactly zero diagonal element
    n, matrix = L.shape[-1], L.ndim == 2

    def message(c):
        if c is None:
            return _CHOLESKY_INVERSE_ZERO.format(_batch(None, matrix) if not matrix else "",
                                                 f"(from the {_FLAGS + 1}th on)")
        return _CHOLESKY_INVERSE_ZERO.format(_batch(c // n, matrix), c % n + 1)
    zero = jnp.diagonal(L, axis1=-2, axis2=-1) == 0
    if zero.size:  # (per batch element, only the first zero counts)
        zero = zero & (jnp.cumsum(zero.reshape(-1, n), axis=-1) == 1).reshape(zero.shape)
        first = jnp.argmax(jnp.any(zero, -1).reshape(-1))
        code = jnp.where(jnp.any(zero), first * n + jnp.argmax(zero.reshape(-1, n)[first]), -1)
        _check_first(code, zero.size, message)
    eye = jnp.broadcast_to(jnp.eye(L.shape[-1], dtype=L.dtype), L.shape)
    return _cholesky_solve(eye, L, upper)


@register(aten.triangular_solve.default, meta=True)
def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, _meta=None):
    batch = jnp.broadcast_shapes(A.shape[:-2], b.shape[:-2])
    A = jnp.broadcast_to(A, batch + A.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    x = lax.linalg.triangular_solve(A, b, left_side=True, lower=not upper, transpose_a=transpose,
                                    unit_diagonal=unitriangular)
    return x, jnp.broadcast_to(A, _meta[1][0])


@register(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(a):
    """float16 / bfloat16 in float32, rounded once: JAX's expm refuses them, and eager's CPU
    kernel in the dtype overflows to inf / NaN even for small standard-normal matrices."""
    if a.dtype in (jnp.float16, jnp.bfloat16):
        return jax.scipy.linalg.expm(a.astype(jnp.float32)).astype(a.dtype)
    return jax.scipy.linalg.expm(a)
