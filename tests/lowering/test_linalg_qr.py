"""Householder QR (geqrf, householder_product, ormqr), least squares (linalg_lstsq) and LDL
(ldl_factor_ex, ldl_solve) against eager CPU PyTorch. They ran through the CPU fallback."""
import pytest
import torch

import lazyxla
from lazyxla import metrics
from lazyxla.testing import check as _check

F32, F64, C64 = torch.float32, torch.float64, torch.complex64
DEV = "lazyxla"


def check(fn, *args, **kw):
    """lazyxla.testing.check, with all of fn's results computed by one program: reading outputs
    one by one would compile a program per output, each recomputing the factorization."""
    def synced(*a):
        out = fn(*a)
        lazyxla.sync()
        return out
    return _check(synced, *args, **kw)


def rand(*shape, dtype=F64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def grads_native(fn, *args, atol=None, rtol=None):
    """Gradients of fn(*args).sum() agree with eager's, and neither the forward nor the backward ran
    an op on the CPU (as lazyxla.testing.check_grad, with the gradients read by one program)."""
    def grads(dev):
        inputs = [x.detach().clone().to(dev).requires_grad_() for x in args]
        fn(*inputs).sum().backward()
        if dev == DEV:
            lazyxla.sync()
        return [x.grad.cpu() for x in inputs]
    expected = grads("cpu")
    metrics.clear_counters()
    torch.testing.assert_close(grads(DEV), expected, atol=atol, rtol=rtol)
    assert not metrics.executed_fallback_ops(), metrics.executed_fallback_ops()


def lstsq_all(driver):
    """All four outputs of lstsq (rank and singular values are empty for some drivers)."""
    return lambda a, b: tuple(torch.linalg.lstsq(a, b, driver=driver))


# ------------------------------------------------------------------------------ Householder QR

def test_geqrf_householder_product():
    tall, wide, batch = rand(5, 3), rand(3, 4, seed=1), rand(2, 4, 4, seed=2)
    def fn(t, w, b):
        (r, tau), (rb, taub) = torch.geqrf(t), torch.geqrf(b)
        return (r, tau, torch.geqrf(w), rb, taub, torch.linalg.householder_product(r, tau),
                torch.linalg.householder_product(r, tau[:2]), torch.orgqr(rb, taub))
    check(fn, tall, wide, batch)


def test_geqrf_float32_and_complex():
    a, c = rand(4, 3, dtype=F32), rand(3, 3, dtype=C64, seed=1)
    check(lambda a, c: (torch.geqrf(a), torch.linalg.householder_product(*torch.geqrf(c))), a, c,
          atol=1e-5, rtol=1e-5)


def test_ormqr():
    refl, tau = torch.geqrf(rand(2, 4, 3))
    check(lambda r, t, c, d: tuple(torch.ormqr(r, t, c if left else d, left=left, transpose=tr)
                                   for left in (True, False) for tr in (False, True)),
          refl, tau, rand(2, 4, 2, seed=1), rand(2, 2, 4, seed=2))


def test_ormqr_rejects_a_tau_eager_rejects():
    r, t = torch.geqrf(rand(5, 3))
    with pytest.raises(RuntimeError, match="must be equal to min"):
        torch.ormqr(r.to(DEV), t[:2].to(DEV), rand(5, 2).to(DEV)).cpu()


def test_householder_product_ormqr_grads():
    refl, tau = torch.geqrf(rand(3, 2))
    grads_native(torch.linalg.householder_product, refl, tau)
    grads_native(lambda r, t, c: torch.ormqr(r, t, c, left=False, transpose=True), refl, tau,
                 rand(2, 3, seed=1))


# ------------------------------------------------------------------------------- least squares

@pytest.mark.parametrize("driver,shapes", [
    (None, [((5, 3), (5, 2)), ((2, 4), (2, 3)), ((1, 4, 3), (2, 4, 1)), ((2, 4, 3), (2, 4))]),
    ("gels", [((5, 3), (5, 2)), ((2, 2, 4), (2, 2, 3))]),
])
def test_lstsq_full_rank(driver, shapes):
    """Tall, wide, batched with a broadcast batch, vector right-hand side (square: below). The
    default driver is gelsy, as on the CPU."""
    args = [rand(*s, seed=i) for i, sh in enumerate(shapes) for s in sh]
    fn = lambda *ab: tuple(tuple(torch.linalg.lstsq(ab[i], ab[i + 1], driver=driver))  # noqa: E731
                           for i in range(0, len(ab), 2))
    check(fn, *args)


def test_lstsq_svd_drivers_not_tall():
    """gelsd/gelss: singular values and rank; no residuals for square and wide input."""
    a, w, b, bw = rand(2, 3, 3), rand(2, 4), rand(2, 3, 2, seed=1), rand(2, 2, seed=2)
    check(lambda a, w, b, bw: (lstsq_all("gelsd")(a, b), lstsq_all("gelss")(w, bw)), a, w, b, bw)


def test_lstsq_float32():
    a, b = rand(2, 4, 3, dtype=F32), rand(2, 4, 2, dtype=F32, seed=1)
    check(lstsq_all(None), a, b, atol=1e-5, rtol=1e-5)


def test_lstsq_rank_deficient_minimum_norm():
    """Exactly rank-deficient input: the rank, and the minimum-norm solution, as LAPACK's."""
    low = rand(3, 1) @ rand(1, 4, seed=1)                         # rank 1, wide
    sq = torch.stack([torch.ones(3, 3), torch.eye(3)]).to(F64)    # ranks 1 and 3
    b, bs = rand(3, 2, seed=2), rand(2, 3, 2, seed=3)
    check(lambda low, sq, b, bs: (lstsq_all("gelsy")(low, b), lstsq_all("gelsd")(low, b),
                                  lstsq_all("gelsy")(sq, bs),
                                  lstsq_all("gelsy")(torch.zeros_like(low), b)), low, sq, b, bs)


def test_lstsq_empty():
    """LAPACK's quick returns: gels zeroes b (zero residuals), gelsd keeps it."""
    check(lambda a, b, c, d: (lstsq_all("gels")(a, b), lstsq_all("gelsd")(a, b),
                              lstsq_all(None)(c, d)),
          rand(4, 0), rand(4, 2), rand(0, 3), rand(0, 2))


def test_lstsq_tall_svd_drivers_run_on_the_cpu():
    """gelsd/gelss give residuals on tall input only when every matrix has full rank: a shape
    that depends on values."""
    metrics.clear_counters()
    check(lstsq_all("gelsd"), rand(4, 3), rand(4, 2, seed=1), allow_fallback=True)
    assert metrics.executed_fallback_ops() == ["linalg_lstsq"]


def test_lstsq_errors_as_eager():
    cases = [((3,), (3,), {}), ((3, 2), (4, 2), {}), ((3, 2), (2, 3, 2), {}),
             ((2, 4, 3), (3, 4, 2), {}), ((3, 2), (3, 2), {"driver": "foo"})]
    for sa, sb, kw in cases:
        with pytest.raises(RuntimeError) as eager:
            torch.linalg.lstsq(torch.zeros(sa), torch.zeros(sb), **kw)
        with pytest.raises(RuntimeError) as dev:
            torch.linalg.lstsq(torch.zeros(sa, device=DEV), torch.zeros(sb, device=DEV), **kw)
        assert str(dev.value) == str(eager.value)


def test_lstsq_grads():
    grads_native(lambda a, b: torch.linalg.lstsq(a, b).solution, rand(4, 3), rand(4, 2, seed=1))


# ----------------------------------------------------------------------------------------- LDL

def symmetric(n, batch=(), dtype=F64, seed=0):
    m = rand(*batch, n, n, dtype=dtype, seed=seed)
    return m + m.mT


def test_ldl_factor_pivots_as_lapack():
    """Indefinite matrices take 1x1 and 2x2 Bunch-Kaufman pivots; a zero column sets info."""
    a = symmetric(5, (6,))
    a[::2].diagonal(dim1=-2, dim2=-1).mul_(0.01)      # small diagonal: 2x2 pivots
    a[1, :, 2] = 0
    a[1, 2, :] = 0                                    # info = 3
    f32, empty = symmetric(4, dtype=F32, seed=1), torch.zeros(0, 0)
    expected, _ = check(lambda *xs: tuple(torch.linalg.ldl_factor_ex(x) for x in xs), a, f32, empty,
                        atol=1e-5, rtol=1e-5)
    assert (expected[0].pivots < 0).any() and expected[0].info[1] == 3


def test_ldl_solve():
    a = symmetric(4, (2,))
    a[0].diagonal().mul_(0.01)
    ld, piv = torch.linalg.ldl_factor(a)
    assert (piv < 0).any()
    check(lambda ld, piv, b: torch.linalg.ldl_solve(ld, piv, b), ld, piv, rand(4, 2, seed=1))


def test_ldl_complex_hermitian_runs_on_the_cpu():
    metrics.clear_counters()
    m = rand(3, 3, dtype=C64)
    check(lambda a: torch.linalg.ldl_factor_ex(a, hermitian=True), m + m.mH, allow_fallback=True)
    assert metrics.executed_fallback_ops() == ["linalg_ldl_factor_ex"]
