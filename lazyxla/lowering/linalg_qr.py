"""Householder QR, least squares and the symmetric-indefinite (LDL) factorization: geqrf,
linalg_householder_product, ormqr, linalg_lstsq, linalg_ldl_factor_ex and linalg_ldl_solve, which
ran through the CPU fallback.

geqrf, householder_product and ormqr map onto XLA's LAPACK-style primitives, so the packed
reflectors are LAPACK's. linalg_lstsq follows the CPU drivers' rules for which of residuals, rank
and singular values are present (default driver gelsy, as on the CPU); its solution comes from a QR
(tall) or LQ (wide) solve when the matrix has full rank, else from the SVD truncated at the
driver's threshold (the minimum-norm solution). gelsd/gelss give residuals on tall input only when
every matrix has full rank, a shape that depends on values: that case runs on the CPU.
ldl_factor_ex is LAPACK's sytf2 step by step (lower storage, Bunch-Kaufman pivoting, LAPACK's
operation order), so LD and the pivots are eager's, except on exact pivot ties: XLA fuses a + x*t
into one rounding (FMA) where LAPACK rounds twice, so a tie (integer-valued input, ~0.1% of such
matrices) may pivot the other way; ldl_solve is LAPACK's sytrs. Complex Hermitian
LDL (hermitian=True, LAPACK hetrf) stays on the CPU.

PyTorch has no meta kernels for geqrf and linalg_lstsq: they are registered at the end."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from lazyxla.jaxenv import type_name
from .checks import _require, check
from .linalg import _mat
from .registry import aten, register

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lapack_dtype(dtype) -> bool:
    return dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128)


def _cpu_rejects(name):
    """A check sending dtypes that eager's LAPACK kernel refuses ("<kernel>" not implemented for
    'Half') to the CPU fallback, which raises eager's error."""
    def fn(x, *args, **kwargs):
        if not _lapack_dtype(x.dtype):
            raise NotImplementedError(f"lazyxla: {name} on {x.dtype}")
    return fn


# ------------------------------------------------------------------------------- Householder QR

@register(aten.geqrf.default)
def geqrf(a):
    h, tau = jnp.linalg.qr(a, mode="raw")  # geqrf, its reflectors transposed (column-major)
    return jnp.swapaxes(h, -1, -2), tau


@register(aten.linalg_householder_product.default)
def linalg_householder_product(a, tau):
    return lax.linalg.householder_product(a, tau)


@register(aten.ormqr.default)
def ormqr(a, tau, other, left=True, transpose=False):
    return lax.linalg.ormqr(a, tau, other, left=left, transpose=transpose)


check(aten.linalg_householder_product.default)(_cpu_rejects("householder_product"))


@check(aten.ormqr.default)
def _ormqr_check(a, tau, other, left=True, transpose=False):
    _cpu_rejects("ormqr")(a)
    if a.dim() >= 2 and other.dim() >= 2 and tau.dim() >= 1:  # else the meta kernel's errors
        side = -2 if left else -1
        if tau.shape[-1] != min(other.shape[side], a.shape[-1]):
            raise RuntimeError("torch.ormqr: tau.shape[-1] must be equal to "
                               f"min(other.shape[{side}], input.shape[-1])")


def _geqrf_meta(x):
    if x.dim() < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    _cpu_rejects("geqrf")(x)
    m, n = x.shape[-2:]
    return x.new_empty(x.shape), x.new_empty(x.shape[:-2] + (min(m, n),))


def _geqrf_out_meta(x, *, a, tau):
    r, t = _geqrf_meta(x)
    return a.resize_(r.shape), tau.resize_(t.shape)


# -------------------------------------------------------------------------------- least squares

def _broadcast_batch(x, y):
    """Broadcast two batch shapes, with eager's error."""
    nd = max(len(x), len(y))
    x, y = (1,) * (nd - len(x)) + tuple(x), (1,) * (nd - len(y)) + tuple(y)
    for i, (a, b) in enumerate(zip(x, y)):
        if a != b and a != 1 and b != 1:
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b ({b}) "
                               f"at non-singleton dimension {i}")
    return tuple(b if a == 1 else a for a, b in zip(x, y))


def _lstsq_layout(a_shape, b_shape, driver):
    """Eager's argument checks, and (vector, batch, m, n, k). b is a vector right-hand side when it
    is 1-d or has exactly a's shape less its last dim; a b of one dim less that is no vector
    broadcasts all its dims but the last against a's batch (as eager does)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if len(b_shape) < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    vector = len(b_shape) == 1 or (len(a_shape) - 1 == len(b_shape) and b_shape == a_shape[:-1])
    if not 0 <= len(a_shape) - len(b_shape) <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    if a_shape[-2] != b_shape[-1 if vector else -2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match "
                           f"other.size({-1 if vector else -2})")
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    rest = b_shape[:-2] if len(a_shape) == len(b_shape) else b_shape[:-1]
    m, n = a_shape[-2:]
    return vector, _broadcast_batch(a_shape[:-2], rest), m, n, 1 if vector else b_shape[-1]


def _lstsq_specs(a, b, driver):
    """The four outputs' (shape, dtype) by the CPU's rules: residuals only for m > n and a driver
    other than gelsy (for gelsd/gelss only if every matrix has full rank: NotImplementedError, as
    that depends on values), rank for all drivers but gels, singular values for gelsd/gelss."""
    if not (_lapack_dtype(a.dtype) and a.dtype == b.dtype):
        raise NotImplementedError("lazyxla: linalg_lstsq dtypes")  # the CPU raises eager's error
    vector, batch, m, n, k = _lstsq_layout(a.shape, b.shape, driver)
    real, a_batch = a.dtype.to_real(), tuple(a.shape[:-2])
    residuals = (0,)
    if m > n and driver != "gelsy":
        if driver in ("gelsd", "gelss") and n > 0 and math.prod(a_batch) > 0:
            raise NotImplementedError("lazyxla: the residuals of linalg_lstsq with gelsd/gelss "
                                      "exist only for full-rank input: a shape that depends on "
                                      "values")
        residuals = batch + (k,)
    return ((batch + ((n,) if vector else (n, k)), a.dtype), (residuals, real),
            ((0,) if driver == "gels" else a_batch, torch.int64),
            (a_batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,), real))


def _lstsq_meta(a, b, rcond=None, *, driver=None):
    specs = _lstsq_specs(a, b, driver or "gelsy")
    return tuple(torch.empty(s, dtype=d, device="meta") for s, d in specs)


def _lstsq_out_meta(a, b, rcond=None, *, driver=None, solution, residuals, rank, singular_values):
    outs = (solution, residuals, rank, singular_values)
    for o, r in zip(outs, _lstsq_meta(a, b, rcond, driver=driver)):
        o.resize_(r.shape)
    return outs


def _full_rank_solve(a, b):
    """LAPACK gels: the least-squares (m >= n, from A = QR) or minimum-norm (m < n, from A^H = QR)
    solution of a full-rank system, and for m >= n the squared residual norms (the norms of the
    last m - n rows of Q^H b). a and b share their batch shape."""
    m, n = a.shape[-2:]
    tri = lax.linalg.triangular_solve
    if m >= n:
        q, r = jnp.linalg.qr(a, mode="complete" if m > n else "reduced")
        c = _mat("...mi,...mk->...ik", jnp.conj(q), b)
        x = tri(r[..., :n, :], c[..., :n, :], left_side=True, lower=False)
        return x, jnp.sum(jnp.abs(c[..., n:, :]) ** 2, axis=-2)
    q, r = jnp.linalg.qr(jnp.conj(jnp.swapaxes(a, -1, -2)))  # A = R^H Q^H, q (n, m)
    y = tri(r, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
    return _mat("...nm,...mk->...nk", q, y), None


def _svd_solve(a, b, rcond, driver):
    """The minimum-norm solution from the SVD truncated at the driver's threshold, the rank and the
    singular values. a has its own batch shape, b the broadcast one."""
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    s1 = s[..., :1]
    finfo = np.finfo(np.dtype(s.dtype))
    if driver == "gelss":  # rcond < 0 means eps; the threshold is at least the safe minimum
        keep = s > jnp.maximum((finfo.eps if rcond < 0 else rcond) * s1, float(finfo.tiny))
    elif driver == "gelsd":  # rcond outside (0, 1) means eps
        keep = s > (finfo.eps if not 0 < rcond < 1 else rcond) * s1
    else:  # gelsy estimates the condition of the pivoted R's leading blocks; here the SVD's
        keep = (s >= rcond * s1) & (s1 > 0)
    sinv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(a.dtype)
    c = _mat("...mi,...mk->...ik", jnp.conj(u), b)
    x = _mat("...in,...ik->...nk", jnp.conj(vh), sinv[..., None] * c)
    return x, jnp.sum(keep, axis=-1), s


def _fit(x, shape, dtype):
    """x where the output has its shape, else the (empty) output PyTorch gives."""
    return x if x is not None and tuple(x.shape) == tuple(shape) else jnp.zeros(shape, dtype)


@register(aten.linalg_lstsq.default, meta=True)
def linalg_lstsq(a, b, rcond=None, *, driver=None, _meta=None):
    driver = driver or "gelsy"
    vector, batch, m, n, k = _lstsq_layout(a.shape, b.shape, driver)
    real = np.dtype(jnp.zeros((), a.dtype).real.dtype)
    b = jnp.broadcast_to(b[..., None] if vector else b, batch + (m, k))
    if rcond is None:
        rcond = float(np.finfo(real).eps) * max(m, n)
    rank = s = None
    if m == 0 or n == 0:  # LAPACK's quick return: gels zeroes b, gelsd/gelss leave it
        x = jnp.zeros(batch + (n, k), a.dtype)
        res = jnp.sum(jnp.abs(b) ** 2, axis=-2) * (driver != "gels")
        rank = jnp.zeros(a.shape[:-2], jnp.int64)
    elif driver == "gels":
        x, res = _full_rank_solve(jnp.broadcast_to(a, batch + (m, n)), b)
    else:
        x_svd, rank, s = _svd_solve(a, b, rcond, driver)
        x, res = _full_rank_solve(jnp.broadcast_to(a, batch + (m, n)), b)
        full = jnp.broadcast_to((rank == min(m, n))[..., None, None], x.shape)
        x = jnp.where(full, x, x_svd)
        if driver == "gelsy" and k == 0:  # gelsy's quick return without right-hand sides
            rank = jnp.zeros_like(rank)
    (sol, _), (res_shape, _), (rank_shape, _), (sv_shape, _) = _meta
    return (x.reshape(sol), _fit(res, res_shape, real), _fit(rank, rank_shape, jnp.int64),
            _fit(s, sv_shape, real))


# ------------------------------------------------------------------------------------------ LDL
# Both loops run over the pivot index k, shared by a flattened batch (B, n, n). Per-matrix
# positions (the pivot row, the interchange) are read with take_along_axis and written with
# selects: XLA compiles that much faster than vmapped dynamic slices and scatters.

_ALPHA = (1 + math.sqrt(17.0)) / 8  # Bunch-Kaufman's bound


def _abs1(x):
    """LAPACK's magnitude for pivoting: |re| + |im| for complex (CABS1, IxAMAX)."""
    return jnp.abs(x.real) + jnp.abs(x.imag) if jnp.iscomplexobj(x) else jnp.abs(x)


def _row(x, i):
    """x[b, i[b], :] for a per-matrix index i (B,)."""
    return jnp.take_along_axis(x, i[:, None, None], axis=1)[:, 0, :]


def _at(v, i):
    """v[b, i[b]]."""
    return jnp.take_along_axis(v, i[:, None], axis=1)[:, 0]


def _swap_rows(x, i, j, r):
    """x (B, n, m) with rows i[b] and j[b] exchanged."""
    ri, rj = _row(x, i), _row(x, j)
    return jnp.where((r == i[:, None])[..., None], rj[:, None, :],
                     jnp.where((r == j[:, None])[..., None], ri[:, None, :], x))


def _index(x, i, axis):
    return lax.dynamic_index_in_dim(x, i, axis=axis, keepdims=False)


def _pick(c, x, y):
    """x where the per-matrix flag c (B,) is set, else y."""
    return jnp.where(c.reshape(c.shape + (1,) * (x.ndim - 1)), x, y)


def _sytf2(a):
    """LAPACK ?sytf2 (UPLO='L') on a batch (B, n, n): LD (zero upper triangle), 1-based pivots
    (negative for 2x2 blocks), info. Each step picks a 1x1 or 2x2 pivot by Bunch-Kaufman's tests,
    swaps it into place in the trailing matrix and updates that with LAPACK's operations."""
    bsz, n = a.shape[0], a.shape[-1]
    if n == 0:
        return a, jnp.zeros((bsz, 0), jnp.int32), jnp.zeros((bsz,), jnp.int32)
    r = jnp.arange(n)
    lower = r[:, None] >= r[None, :]

    def set_col(x, c, v):
        return jnp.where(r == c, v[:, :, None], x)

    def step(k, state):
        a, ipiv, info, skip = state  # skip: k is the second column of a 2x2 pivot
        # the pivot: 1x1 at k, 1x1 at imax (swapped to k), or 2x2 at k, imax (swapped to k + 1)
        sym = jnp.tril(a) + jnp.swapaxes(jnp.tril(a, -1), -1, -2)  # LAPACK reads the lower half
        col = _index(sym, k, 2)
        absakk = _abs1(_index(col, k, 1))
        colabs = jnp.where(r > k, _abs1(col), -1)
        imax = jnp.argmax(colabs, axis=1)  # the first largest, as IxAMAX
        colmax = jnp.maximum(_at(colabs, imax), 0)
        zero = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
        row_i = _abs1(_row(sym, imax))  # row imax left of the diagonal, column imax below it
        rowmax = jnp.max(jnp.where((r >= k) & (r != imax[:, None]), row_i, 0), axis=1)
        keep = zero | (absakk >= _ALPHA * colmax) | \
            (absakk >= _ALPHA * colmax * (colmax / jnp.where(rowmax == 0, 1, rowmax)))
        kp = jnp.where(keep, k, imax)
        two = ~keep & ~(_at(row_i, imax) >= _ALPHA * rowmax)
        kk = jnp.where(two, k + 1, k)
        # symmetric interchange of kk and kp in the trailing matrix a[k:, k:]
        perm = jnp.where(r == kk[:, None], kp[:, None], jnp.where(r == kp[:, None], kk[:, None], r))
        sym = jnp.take_along_axis(sym, perm[:, :, None], axis=1)
        sym = jnp.take_along_axis(sym, perm[:, None, :], axis=2)
        a = jnp.where(lower & (r[:, None] >= k) & (r[None, :] >= k), sym, a)
        # 1x1 pivot d: A22 += x (-x / d)^T, then x /= d (SYR, SCAL). 2x2 pivot: the multipliers
        # wk, wkp1 of both columns, then A22 -= ck wk^T + ck1 wkp1^T
        k1 = jnp.minimum(k + 1, n - 1)
        col, col1 = _index(a, k, 2), _index(a, k1, 2)
        tw = two[:, None]
        akk = _index(col, k, 1)[:, None]
        d11 = 1 / jnp.where(tw | zero[:, None], 1, akk)
        d21 = jnp.where(tw, _index(col, k1, 1)[:, None], 1)
        e11 = _index(col1, k1, 1)[:, None] / d21
        e22 = akk / d21
        d21 = (1 / (e11 * e22 - 1)) / d21
        below = r > jnp.where(tw, k + 1, k)  # below the pivot block
        ck = jnp.where(below, col, 0)
        ck1 = jnp.where(below & tw, col1, 0)
        wk = d21 * (e11 * ck - ck1)
        wkp1 = d21 * (e22 * ck1 - ck)
        v = jnp.where(tw, -wk, -d11 * ck)
        v1 = jnp.where(tw, -wkp1, 0)  # a 1x1 pivot adds 0 * 0
        upd = a + ck[:, :, None] * v[:, None, :] + ck1[:, :, None] * v1[:, None, :]
        region = lower & below[:, :, None] & below[:, None, :] & ~zero[:, None, None]
        new = jnp.where(region, upd, a)
        new = set_col(new, k, jnp.where(below & ~zero[:, None], jnp.where(tw, wk, d11 * ck), col))
        new = set_col(new, k1, jnp.where(below & tw, wkp1, _index(new, k1, 2)))
        p = (kp + 1).astype(jnp.int32)[:, None]
        new_ipiv = jnp.where(r == k, jnp.where(tw, -p, p), ipiv)
        new_ipiv = jnp.where((r == k + 1) & tw, -p, new_ipiv)
        new_info = jnp.where((info == 0) & zero, (k + 1).astype(jnp.int32), info)
        return (_pick(skip, state[0], new), _pick(skip, ipiv, new_ipiv),
                jnp.where(skip, info, new_info), ~skip & two)

    init = (jnp.tril(a), jnp.zeros((bsz, n), jnp.int32), jnp.zeros((bsz,), jnp.int32),
            jnp.zeros((bsz,), bool))
    ld, ipiv, info, _ = lax.fori_loop(0, n, step, init)
    return ld, ipiv, info


def _sytrs(ld, ipiv, b):
    """LAPACK ?sytrs (UPLO='L') on a batch: X with A X = B, from sytf2's LD (B, n, n) and pivots
    (B, n); b is (B, n, nrhs)."""
    bsz, n = ld.shape[0], ld.shape[-1]
    if n == 0:
        return b
    r = jnp.arange(n)

    def set_row(x, i, v):
        return jnp.where(r[:, None] == i, v[:, None, :], x)

    def swap(x, i, j):  # rows i (shared) and j (per matrix) exchanged
        return _swap_rows(x, jnp.full((bsz,), i), jnp.clip(j, 0, n - 1), r)

    def ldcol(c, below):  # column c of LD below row `below`, 0 elsewhere: (B, n, 1)
        return jnp.where(r > below, _index(ld, c, 2), 0)[..., None]

    def entry(i, j):  # LD[:, i, j] as (B, 1)
        return _index(_index(ld, j, 2), i, 1)[:, None]

    def forward(k, state):  # L D Y = P B, from the first pivot block to the last
        b, skip = state
        p = _index(ipiv, k, 1)
        k1 = jnp.minimum(k + 1, n - 1)
        b1 = swap(b, k, p - 1)
        b1 = b1 + ldcol(k, k) * (-_index(b1, k, 1))[:, None, :]
        b1 = set_row(b1, k, _index(b1, k, 1) * (1 / entry(k, k)))
        b2 = swap(b, k1, -p - 1)
        b2 = b2 + ldcol(k, k + 1) * (-_index(b2, k, 1))[:, None, :]
        b2 = b2 + ldcol(k1, k + 1) * (-_index(b2, k1, 1))[:, None, :]
        akm1k = entry(k1, k)
        akm1, ak = entry(k, k) / akm1k, entry(k1, k1) / akm1k
        denom = akm1 * ak - 1
        bkm1, bk = _index(b2, k, 1) / akm1k, _index(b2, k1, 1) / akm1k
        b2 = set_row(set_row(b2, k, (ak * bkm1 - bk) / denom), k1, (akm1 * bk - bkm1) / denom)
        return _pick(skip, b, _pick(p > 0, b1, b2)), ~skip & (p < 0)

    def backward(i, state):  # L^T X = Y, from the last pivot block to the first
        b, skip = state
        k = n - 1 - i
        p = _index(ipiv, k, 1)
        km1 = jnp.maximum(k - 1, 0)
        b1 = set_row(b, k, _index(b, k, 1) - jnp.sum(ldcol(k, k) * b, axis=1))
        b2 = set_row(b1, km1, _index(b1, km1, 1) - jnp.sum(ldcol(km1, k) * b, axis=1))
        new = _pick(p > 0, swap(b1, k, p - 1), swap(b2, k, -p - 1))
        return _pick(skip, b, new), ~skip & (p < 0)

    y, _ = lax.fori_loop(0, n, forward, (b, jnp.zeros((bsz,), bool)))
    return lax.fori_loop(0, n, backward, (y, jnp.zeros((bsz,), bool)))[0]


def _flat(x, batch):
    return jnp.broadcast_to(x, batch + x.shape[-2:]).reshape((math.prod(batch),) + x.shape[-2:])


@register(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(a, *, hermitian=False, check_errors=False):
    batch = a.shape[:-2]
    ld, ipiv, info = _sytf2(_flat(a, batch))
    return ld.reshape(a.shape), ipiv.reshape(a.shape[:-1]), info.reshape(batch)


@register(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(ld, pivots, b, *, hermitian=False):
    batch = jnp.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    piv = _flat(pivots.astype(jnp.int32)[..., None], batch)[..., 0]
    return _sytrs(_flat(ld, batch), piv, _flat(b, batch)).reshape(batch + b.shape[-2:])


@check(aten.linalg_ldl_factor_ex.default)
def _ldl_factor_check(a, *, hermitian=False, check_errors=False):
    if a.dim() < 2:
        raise RuntimeError("torch.linalg.ldl_factor_ex: The input tensor A must have at least 2 "
                           "dimensions.")
    if a.dtype.is_floating_point:
        _cpu_rejects("ldl_factor")(a)
    if hermitian and a.dtype.is_complex:
        raise NotImplementedError("lazyxla: complex Hermitian LDL (LAPACK hetrf) runs on the CPU")


@check(aten.linalg_ldl_solve.default)
def _ldl_solve_check(ld, pivots, b, *, hermitian=False):
    if ld.dtype.is_floating_point:
        _cpu_rejects("ldl_solve")(ld)
    if hermitian and ld.dtype.is_complex:
        raise NotImplementedError("lazyxla: complex Hermitian LDL solve (LAPACK hetrs) runs on "
                                  "the CPU")


# ------------------------------------------------------------------ meta kernels PyTorch lacks

_META = torch.library.Library("aten", "IMPL")
for _name, _fn in (("geqrf", _geqrf_meta), ("geqrf.a", _geqrf_out_meta),
                   ("linalg_lstsq", _lstsq_meta), ("linalg_lstsq.out", _lstsq_out_meta)):
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{_name}", "Meta"):
        _META.impl(_name, _fn, "Meta")


# ------------------------------------------------------- half dtypes: LAPACK kernels have none

# op -> the CPU kernel whose "not implemented for 'Half'" eager raises, at the call (once per
# signature: checks.py), where JAX's LAPACK bindings would fail at sync (KeyError: Unsupported
# dtype) or compute what eager refuses (triangular solves). CUDA's kernels lack them too: every
# backend raises.
_HALF_KERNELS = {
    aten.linalg_qr.default: "geqrf_cpu", aten._linalg_svd.default: "linalg_svd_cpu",
    aten._linalg_eigh.default: "linalg_eigh_cpu", aten._linalg_det.default: "lu_cpu",
    aten._linalg_solve_ex.default: "lu_cpu", aten.linalg_lu_factor_ex.default: "lu_cpu",
    aten.linalg_lu.default: "lu_cpu", aten.linalg_lu_solve.default: "linalg.lu_solve_cpu",
    aten.linalg_cholesky_ex.default: "cholesky_cpu", aten.cholesky.default: "cholesky_cpu",
    aten.linalg_solve_triangular.default: "triangular_solve_cpu",
    aten.triangular_solve.default: "triangular_solve_cpu",
    aten._cholesky_solve_helper.default: "cholesky_solve_cpu",
    aten.cholesky_inverse.default: "cholesky_inverse_out_cpu",
}
# ops eager refuses in its own words (the meta kernels word these "linalg.inv_ex: ... Got
# torch.bfloat16")
_LOW_PRECISION = {aten.linalg_inv_ex.default: "linalg.inv",
                  aten._linalg_slogdet.default: "linalg.slogdet"}
_HALVES = (torch.float16, torch.bfloat16)


def _half_kernel(kernel):
    def fn(x, *args, **kwargs):
        _require(x.dtype, kernel, lambda d: d not in _HALVES)
    return fn


def _low_precision(name):
    def fn(x, *args, **kwargs):
        if x.dtype in _HALVES:
            raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {type_name(x.dtype)}")
    return fn


for _op, _kernel in _HALF_KERNELS.items():
    check(_op)(_half_kernel(_kernel))
for _op, _name in _LOW_PRECISION.items():
    check(_op)(_low_precision(_name))
