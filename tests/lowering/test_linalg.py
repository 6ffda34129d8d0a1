"""Matrix products and linear algebra against eager CPU PyTorch."""
import math
import re

import pytest
import torch

from lazyxla.testing import check, check_grad, to_cpu

from _grad import grad_check  # shared by the reduction and linalg tests (tests/lowering/_grad.py)

torch.manual_seed(0)

F32, F64, BF16, I64 = torch.float32, torch.float64, torch.bfloat16, torch.int64
DEV = "lazyxla"


def make(shape, dtype=F32):
    if not dtype.is_floating_point:
        return torch.randint(-4, 5, shape, dtype=dtype)
    return torch.randn(shape, dtype=dtype)


def spd(n, dtype=F32, batch=()):
    a = torch.randn(*batch, n, n, dtype=dtype)
    return a @ a.transpose(-1, -2) + n * torch.eye(n, dtype=dtype)


# ----------------------------------------------------------------------------------------- products

@pytest.mark.parametrize("dtype", [F32, F64, I64])
def test_products(dtype):
    a, b, v = make((3, 4), dtype), make((4, 2), dtype), make((4,), dtype)
    bb1, bb2 = make((2, 3, 4), dtype), make((2, 4, 2), dtype)
    check(lambda a, b, v, bb1, bb2: (a @ b, a.mm(b), bb1 @ bb2, torch.bmm(bb1, bb2), a @ v, a.mv(v),
                                     v @ v, torch.dot(v, v), torch.vdot(v, v), bb1 @ b), a, b, v, bb1, bb2)


def test_products_bf16():
    a, b = make((3, 8), BF16), make((8, 2), BF16)
    check(lambda a, b: (a @ b, a.mm(b)), a, b, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1.5)])
def test_add_products(beta, alpha):
    m, a, b = make((3, 2)), make((3, 4)), make((4, 2))
    if beta == 0:
        m[0, 0] = math.nan  # beta == 0 ignores self entirely
    bm, b1, b2 = make((2, 3, 2)), make((2, 3, 4)), make((2, 4, 2))
    v3, v4 = make((3,)), make((4,))
    if beta == 0:
        v3[1] = math.inf
    check(lambda m, a, b, bm, b1, b2, v3, v4: (
        torch.addmm(m, a, b, beta=beta, alpha=alpha),
        torch.baddbmm(bm, b1, b2, beta=beta, alpha=alpha),
        torch.addbmm(m, b1, b2, beta=beta, alpha=alpha),
        torch.addmv(v3, a, v4, beta=beta, alpha=alpha),
        torch.addr(a, v3, v4, beta=beta, alpha=alpha),
        torch.outer(v3, v4), torch.nn.functional.linear(a, b.T, v3[:2]),
    ), m, a, b, bm, b1, b2, v3, v4)


def test_half_add_products_round_once():
    """beta * self + alpha * (a @ b) in float32, rounded once, as eager's gemm: Muon's
    Newton-Schulz step (beta -4.775, alpha 2.0315) differed from eager in 1 of 6 bfloat16
    results when beta * self was rounded to bfloat16 first."""
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g).to(BF16)  # noqa: E731
    m, a, b, bm, b1 = r(16, 24), r(16, 32), r(32, 24), r(3, 16, 16), r(3, 16, 16)
    check(lambda m, a, b, bm, b1: (torch.addmm(m, a, b, beta=-4.775, alpha=2.0315),
                                   torch.baddbmm(bm, b1, b1.mT, beta=-4.775, alpha=2.0315),
                                   torch.addmm(m, a, b, beta=0.5, alpha=1.3)),
          m, a, b, bm, b1, atol=0, rtol=0)


def test_add_products_int_and_broadcast():
    m, a, b = make((1, 2), I64), make((3, 4), I64), make((4, 2), I64)
    check(lambda m, a, b: (torch.addmm(m, a, b), torch.addmm(m, a, b, beta=2, alpha=3)), m, a, b)
    check(lambda v, a, b: torch.addmm(v, a, b), make((2,)), make((3, 4)), make((4, 2)))


def test_einsum_tensordot_kron():
    a, b = make((2, 3)), make((3, 4))
    check(lambda a, b: (torch.einsum("ij,jk->ik", a, b), torch.tensordot(a, b, 1), torch.kron(a, b)), a, b)


@pytest.mark.parametrize("name,fn,shapes", [
    ("mm", lambda a, b: a @ b, [(3, 4), (4, 2)]),
    ("bmm", lambda a, b: torch.bmm(a, b), [(2, 3, 4), (2, 4, 2)]),
    ("addmm", lambda m, a, b: torch.addmm(m, a, b, beta=0.5, alpha=2.0), [(3, 2), (3, 4), (4, 2)]),
    ("baddbmm", lambda m, a, b: torch.baddbmm(m, a, b), [(2, 3, 2), (2, 3, 4), (2, 4, 2)]),
    ("mv", lambda a, v: a @ v, [(3, 4), (4,)]),
    ("dot", lambda u, v: u @ v, [(4,), (4,)]),
    ("linear", lambda x, w, b: torch.nn.functional.linear(x, w, b), [(2, 4), (3, 4), (3,)]),
    ("matmul3d", lambda a, b: a @ b, [(2, 3, 4), (4, 2)]),
])
def test_product_grads(name, fn, shapes):
    grad_check(fn, *[make(s) for s in shapes])


# --------------------------------------------------------------------------------- triangular & co

@pytest.mark.parametrize("k", [0, 1, -1, 5])
@pytest.mark.parametrize("dtype", [F32, I64, torch.bool])
def test_triu_tril(k, dtype):
    x = make((2, 3, 4), dtype) if dtype != torch.bool else torch.rand(2, 3, 4) > 0.5
    check(lambda x: (x.triu(k), x.tril(k)), x)


@pytest.mark.parametrize("dtype", [F32, I64])
def test_trace_diag(dtype):
    x = make((3, 4), dtype)
    check(lambda x: (x.trace(), torch.diag(x), torch.diag(x[0]), torch.diag(x[0], 1)), x)


@pytest.mark.parametrize("offset,d1,d2", [(0, -2, -1), (1, 0, 2), (-2, 2, 0)])
def test_diag_embed(offset, d1, d2):
    x = make((2, 3))
    check(lambda x: torch.diag_embed(x, offset, d1, d2), x)


def test_cross():
    a, b = make((4, 3)), make((4, 3))
    check(lambda a, b: (torch.linalg.cross(a, b), torch.cross(a, b, dim=1), torch.linalg.cross(a, b[:1])), a, b)
    check(lambda a, b: torch.linalg.cross(a, b, dim=0), make((3, 2)), make((3, 2)))
    grad_check(lambda a, b: torch.linalg.cross(a, b), a, b)


def test_triu_trace_grads():
    grad_check(lambda x: x.triu(1) * 2, make((3, 3)))
    grad_check(lambda x: x.trace(), make((3, 3)))


# ----------------------------------------------------------------------------------------- LAPACK

@pytest.mark.parametrize("dtype", [F32, F64])
def test_det_inv_solve(dtype):
    a = make((3, 3), dtype) + 3 * torch.eye(3, dtype=dtype)
    ab = make((2, 3, 3), dtype) + 3 * torch.eye(3, dtype=dtype)
    b, v = make((3, 2), dtype), make((3,), dtype)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == F32 else {}
    check(lambda a, ab, b, v: (torch.linalg.det(a), torch.linalg.det(ab), torch.det(a),
                               torch.linalg.slogdet(ab),
                               torch.linalg.inv(a), torch.linalg.inv(ab), torch.inverse(a),
                               torch.linalg.solve(a, b), torch.linalg.solve(a, v), torch.linalg.solve(ab, b),
                               torch.linalg.solve(a, b.T, left=False)), a, ab, b, v, **tol)


def test_det_singular_and_empty():
    check(lambda a: (torch.linalg.det(a), torch.linalg.slogdet(a)), torch.ones(3, 3), atol=1e-5, rtol=1e-5)
    check(lambda a: (torch.linalg.det(a), torch.linalg.slogdet(a)), torch.zeros(0, 0))


def test_cholesky_info_names_the_first_leading_minor_that_is_not_positive_definite():
    batch = torch.stack([torch.tensor([[1.0, 2.0], [2.0, 1.0]]), torch.tensor([[4.0, 2.0], [2.0, 3.0]]),
                         torch.tensor([[-1.0, 0.0], [0.0, 1.0]])])
    diag = torch.diag(torch.tensor([1.0, 2.0, -1.0, 5.0]))
    check(lambda b, d: (torch.linalg.cholesky_ex(b).info, torch.linalg.cholesky_ex(d).info), batch, diag)
    with pytest.raises(torch.linalg.LinAlgError, match="order 2"):
        torch.linalg.cholesky(batch[0].to(DEV)).cpu()


SINGULAR = [torch.zeros(2, 2), torch.tensor([[1.0, 2.0], [2.0, 4.0]]),
            torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 1.0]]),
            torch.stack([torch.eye(2), torch.zeros(2, 2)])]


def test_empty_and_regular_matrices_have_info_zero():
    for a in (torch.zeros(0, 0), torch.zeros(3, 0, 0), torch.eye(3) * 2):
        b = torch.ones(a.shape[:-1])
        check(lambda a, b: (torch.linalg.inv_ex(a), torch.linalg.solve_ex(a, b), torch.linalg.lu_factor_ex(a)), a, b)


@pytest.mark.parametrize("a", SINGULAR, ids=["zeros", "rank1", "zero_pivot_2", "batch_1"])
def test_singular_matrices_give_eagers_info_and_errors(a):
    """info names U's first zero pivot, as LAPACK's getrf does (it was always 0: inv and solve of a
    singular matrix returned inf/NaN where eager raises)."""
    b = torch.ones(a.shape[:-1])
    check(lambda a, b: (torch.linalg.inv_ex(a).info, torch.linalg.solve_ex(a, b).info,
                        torch.linalg.lu_factor_ex(a).info), a, b)
    ops = (torch.linalg.inv, lambda a: torch.linalg.solve(a, torch.ones(a.shape[:-1], device=a.device)),
           torch.linalg.lu_factor)
    for op in ops:
        with pytest.raises(RuntimeError) as eager:
            op(a)
        with pytest.raises(type(eager.value), match=re.escape(str(eager.value))):
            op(a.to(DEV))


def test_cholesky_triangular():
    a, ab = spd(3, F64), spd(3, F64, (2,))
    b = make((3, 2), F64)
    check(lambda a, ab, b: (torch.linalg.cholesky(a), torch.linalg.cholesky(ab, upper=True), torch.cholesky(a),
                            torch.linalg.cholesky_ex(a).info,
                            torch.linalg.solve_triangular(a.tril(), b, upper=False),
                            torch.linalg.solve_triangular(a.triu(), b, upper=True),
                            torch.linalg.solve_triangular(a.tril(), b.T, upper=False, left=False),
                            torch.linalg.solve_triangular(a.tril(), b, upper=False, unitriangular=True)),
          a, ab, b)


def _to_dev_call(fn, *args):
    return to_cpu(fn(*[x.to(DEV) for x in args]))


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 4, 3)])
def test_qr(mode, shape):
    a = make(shape, F64)
    q, r = _to_dev_call(lambda a: torch.linalg.qr(a, mode=mode), a)
    qe, re = torch.linalg.qr(a, mode=mode)
    assert q.shape == qe.shape and r.shape == re.shape
    torch.testing.assert_close(r.abs(), re.abs())  # up to the signs of R's rows
    if mode != "r":
        torch.testing.assert_close(q @ r, a)


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
def test_svd(full, shape):
    a = make(shape, F64)
    u, s, vh = _to_dev_call(lambda a: torch.linalg.svd(a, full_matrices=full), a)
    ue, se, vhe = torch.linalg.svd(a, full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (ue.shape, se.shape, vhe.shape)
    torch.testing.assert_close(s, se)
    k = s.shape[-1]
    torch.testing.assert_close((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a)
    check(lambda a: torch.linalg.svdvals(a), a)
    check(lambda a: torch.linalg.matrix_norm(a, "nuc"), a)


def test_eigh():
    a = spd(4, F64)
    w, v = _to_dev_call(lambda a: torch.linalg.eigh(a), a)
    we, ve = torch.linalg.eigh(a)
    torch.testing.assert_close(w, we)
    torch.testing.assert_close((v * w[None, :]) @ v.T, a)
    torch.testing.assert_close(torch.abs(v), torch.abs(ve))
    check(lambda a: (torch.linalg.eigvalsh(a), torch.linalg.eigvalsh(a, UPLO="U")), a)


def test_lu_factor_solve():
    a, b = make((2, 3, 3), F64), make((2, 3, 2), F64)
    check(lambda a, b: (torch.linalg.lu_factor(a),
                        torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b),
                        torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True),
                        torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False),
                        torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False, adjoint=True)), a, b)


def test_linalg_grads():
    a = make((3, 3), F64) + 3 * torch.eye(3, dtype=F64)
    grad_check(lambda a: torch.linalg.det(a), a)
    grad_check(lambda a: torch.linalg.slogdet(a).logabsdet, a)
    grad_check(lambda a: torch.linalg.inv(a), a)
    grad_check(lambda a, b: torch.linalg.solve(a, b), a, make((3, 2), F64))
    grad_check(lambda a: torch.linalg.cholesky(a @ a.T), a)


def test_lu_non_square_and_unpack():
    from lazyxla.testing import check, check_grad
    g = torch.Generator().manual_seed(1)
    for shape in [(3, 5), (5, 3), (2, 4, 4)]:
        a = torch.randn(*shape, generator=g)
        check(lambda t: torch.linalg.lu_factor(t), a, atol=1e-5, rtol=1e-5)
        check(lambda t: torch.linalg.lu(t), a, atol=1e-5, rtol=1e-5)
        check(lambda t: torch.lu_unpack(*torch.linalg.lu_factor(t)), a, atol=1e-5, rtol=1e-5)
    check_grad(lambda t: torch.linalg.lu(t)[1], torch.randn(3, 5, generator=g), atol=1e-4, rtol=1e-4)


def test_integer_addmv_truncates_float_scalars():
    from lazyxla.testing import check
    g = torch.Generator().manual_seed(2)
    s, a, v = (torch.randint(-9, 9, sh, generator=g) for sh in [(5,), (5, 10), (10,)])
    check(lambda s, a, v: torch.addmv(s, a, v, beta=0.2, alpha=0.6), s, a, v)
    check(lambda s, a, v: torch.addmv(s, a, v, beta=2, alpha=3), s, a, v)


def test_cholesky_solve_inverse_triangular_solve_matrix_exp_lowered():
    """They ran through the CPU fallback."""
    m = make((3, 4, 4))
    lower = torch.linalg.cholesky(m @ m.mT + 4 * torch.eye(4))
    b = make((3, 4, 2))
    for upper in (False, True):
        factor = lower.mT.contiguous() if upper else lower
        check(lambda x, f: torch.cholesky_solve(x, f, upper=upper), b, factor, atol=1e-4, rtol=1e-4)
        check_grad(lambda x, f: torch.cholesky_solve(x, f, upper=upper), b, factor, atol=1e-3, rtol=1e-3)
        check(lambda f: torch.cholesky_inverse(f, upper=upper), factor[0], atol=1e-4, rtol=1e-4)
        for transpose in (False, True):
            fn = lambda x, f: torch.triangular_solve(x, f, upper=upper, transpose=transpose)  # noqa: E731
            check(fn, b, factor, atol=1e-4, rtol=1e-4)
            check_grad(fn, b, factor, atol=1e-3, rtol=1e-3)
    check(torch.linalg.matrix_exp, make((2, 3, 3)) * 0.5, atol=1e-5, rtol=1e-5)
    check_grad(torch.linalg.matrix_exp, make((2, 3, 3)) * 0.5, atol=1e-4, rtol=1e-4)


def test_nonzero_static_lowered():
    x = torch.tensor([[0, 1, 0], [2, 0, 3]])
    check(lambda t: torch.nonzero_static(t, size=6), x)
    check(lambda t: torch.nonzero_static(t, size=2, fill_value=7), x)


# ------------------------------------------------------------------ NaN input, LAPACK's statuses

NAN = torch.tensor([[math.nan, 1.0], [1.0, 1.0]])
NAN_BATCH = torch.stack([torch.eye(2), NAN, torch.tensor([[math.inf, 1.0], [1.0, 1.0]]),
                         torch.tensor([[2.0, 1.0], [1.0, 3.0]])])


@pytest.mark.parametrize("a", [NAN, NAN_BATCH, torch.tensor([[1.0, 1.0, 2.0], [-3.0, math.inf, 1.0],
                                                             [-2.0, -3.0, 0.0]])],
                         ids=["nan", "batch", "inf_pivot"])
def test_lu_of_non_finite_matrices_is_lapacks(a):
    """LAPACK divides by a NaN pivot (NaN column and trailing matrix; info counts exact zeros
    only): eager's inv and solve are all NaN. XLA's LU left the column unscaled, so a later pivot
    was exactly 0: info 2, and inv raised "The diagonal element 2 is zero"."""
    b = torch.ones(a.shape[:-1])
    check(lambda a, b: (torch.linalg.inv(a), torch.linalg.inv_ex(a), torch.inverse(a),
                        torch.linalg.solve(a, b), torch.linalg.solve_ex(a, b),
                        torch.linalg.solve(a, b[..., None].mT, left=False),
                        torch.linalg.lu_factor(a), torch.linalg.lu_factor_ex(a), torch.linalg.lu(a),
                        torch.linalg.matrix_power(a, -1), torch.linalg.det(a)), a, b)
    if a.dim() == 2:
        check(lambda a: torch.linalg.tensorinv(a, 1), a)


def _raises_like_eager(fn, a):
    """fn(a) raises on the CPU; on lazyxla, the error (deferred: raised by the read) is of the
    same type and begins with eager's message."""
    with pytest.raises(RuntimeError) as eager:
        fn(a)
    with pytest.raises(type(eager.value), match="^" + re.escape(str(eager.value))):
        to_cpu(fn(a.to(DEV)))


SVD_OPS = [torch.linalg.svdvals, torch.linalg.svd, torch.svd, torch.linalg.matrix_rank,
           torch.linalg.pinv, torch.linalg.cond, lambda a: torch.linalg.matrix_norm(a, "nuc")]


@pytest.mark.parametrize("a", [NAN, NAN_BATCH], ids=["matrix", "batch"])
def test_svd_of_nan_raises_eagers_error(a):
    """(svdvals gave NaN, matrix_rank 0, silently)"""
    for fn in SVD_OPS:
        _raises_like_eager(fn, a)
    inf = torch.tensor([[math.inf, 1.0], [1.0, 1.0]])  # gesdd refuses NaN only
    check(lambda a: (torch.linalg.svdvals(a), torch.linalg.matrix_rank(a)), inf)


def test_cholesky_inverse_of_a_zero_diagonal_raises_eagers_error():
    """(it gave infs)"""
    L = torch.tensor([[1.0, 0.0], [2.0, 0.0]])
    _raises_like_eager(torch.cholesky_inverse, L)
    _raises_like_eager(lambda x: torch.cholesky_inverse(x, upper=True), L.mT.contiguous())
    _raises_like_eager(torch.cholesky_inverse, torch.stack([torch.eye(3), torch.eye(3).flip(0),
                                                            torch.diag(torch.tensor([1.0, 0.0, 0.0]))]))
    check(torch.cholesky_inverse, torch.eye(3) * 2)


HALF_LINALG = {
    "qr": torch.linalg.qr, "svd": torch.linalg.svd, "svdvals": torch.linalg.svdvals,
    "eigh": torch.linalg.eigh, "eigvalsh": torch.linalg.eigvalsh, "det": torch.linalg.det,
    "slogdet": torch.linalg.slogdet, "solve": lambda a: torch.linalg.solve(a, a),
    "lu_factor": torch.linalg.lu_factor, "lu": torch.linalg.lu, "cond": torch.linalg.cond,
    "cholesky": torch.linalg.cholesky, "inv": torch.linalg.inv, "inv_ex": torch.linalg.inv_ex,
    "solve_triangular": lambda a: torch.linalg.solve_triangular(a, a, upper=True),
    "triangular_solve": lambda a: torch.triangular_solve(a, a),
    "cholesky_solve": lambda a: torch.cholesky_solve(a, a),
    "cholesky_inverse": torch.cholesky_inverse,
    "lu_solve": lambda a: torch.linalg.lu_solve(a, torch.ones(2, dtype=torch.int32, device=a.device), a),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("dtype", [torch.float16, BF16])
@pytest.mark.parametrize("name", list(HALF_LINALG))
def test_half_linalg_raises_eagers_error_at_the_call(name, dtype):
    """(JAX's LAPACK bindings failed at sync: KeyError 'Unsupported dtype bfloat16'; the
    triangular solves computed)"""
    fn, a = HALF_LINALG[name], (torch.eye(2) * 2).to(dtype)
    with pytest.raises((RuntimeError, NotImplementedError)) as eager:
        fn(a)
    with pytest.raises(type(eager.value), match="^" + re.escape(str(eager.value).split("\n")[0]) + "$"):
        fn(a.to(DEV))  # no read: at the call


VIEWED = {  # det and slogdet of views that are not contiguous, and one that is
    "det of A.t()": lambda x: torch.linalg.det(x[:, :3].t()),
    "det of A[:, :3]": lambda x: torch.linalg.det(x[:, :3]),
    "det of a batch of transposes": lambda x: torch.linalg.det(x[:, :3].expand(2, 3, 3).mT).sum(),
    "slogdet of A.t()": lambda x: torch.linalg.slogdet(x[:, :3].t()).logabsdet,
    "slogdet of A[:, :3]": lambda x: torch.linalg.slogdet(x[:, :3]).logabsdet,
    "det of a contiguous copy": lambda x: torch.linalg.det(x[:, :3].contiguous()),
}


@pytest.mark.parametrize("name", VIEWED)
def test_det_and_slogdet_derivatives_of_views_are_eagers(name):
    # PyTorch's derivative formulas read det's LU as the LU of A^T when A.is_contiguous(), of A
    # otherwise; the lowering always gave A^T's, so the gradient through A.t() was transposed
    from torch.func import jvp
    f = VIEWED[name]
    g = torch.Generator().manual_seed(0)
    x, tangent = torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g, dtype=torch.float64)
    grads, tangents = [], []
    for device in ("cpu", DEV):
        a = x.clone().to(device).requires_grad_()
        f(a).backward()
        grads.append(a.grad.cpu())
        tangents.append(jvp(f, (x.to(device),), (tangent.to(device),))[1].cpu())
    torch.testing.assert_close(grads[1], grads[0])
    torch.testing.assert_close(tangents[1], tangents[0])
