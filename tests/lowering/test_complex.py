"""Complex numbers against eager: real results of complex inputs, conjugate and negative bits
carried by views, vdot's conjugation, the log-add-exp family's complex rule, the conjugates in
complex backward kernels (each of these computed a wrong value)."""
import math

import pytest
import torch

import lazyxla
from lazyxla import metrics
from lazyxla.testing import check, check_grad

torch.manual_seed(0)
A = torch.randn(3, 3, dtype=torch.complex64)
B = torch.randn(3, 3, dtype=torch.complex64)
# large imaginary parts: results whose imaginary part leaves (-pi, pi] show a wrong branch of log
W = torch.randn(3, 6, dtype=torch.complex64) * 4

CASES = {
    "abs": lambda a, b: a.abs(),
    "abs_complex128": lambda a, b: a.to(torch.complex128).abs(),
    "vdot_conjugates_its_first_argument": lambda a, b: torch.vdot(a[0], b[0]),
    "imag_of_conj_is_negated": lambda a, b: a.conj().imag * 2,
    "slice_of_conj": lambda a, b: a.conj()[1:] * 1,
    "transpose_of_conj": lambda a, b: a.conj().T @ b,
    "select_of_conj_cloned": lambda a, b: a.conj()[0].clone(),
    "conj_of_a_conj_view": lambda a, b: a.conj()[1:].conj() * 1,
    "column_of_conj_resolved": lambda a, b: a.conj()[:, 1].resolve_conj(),
    "select_of_neg_view": lambda a, b: torch._neg_view(torch.view_as_real(a)).select(-1, 1) * 1,
}


@pytest.mark.parametrize("name", list(CASES))
def test_complex_values_as_eager(name):
    check(CASES[name], A, B, atol=1e-5, rtol=1e-5)


def test_eig_gradient_through_complex_ops():
    """linalg.eig's backward is complex arithmetic on the device (eig itself runs on the CPU)."""
    def f(a):
        w, v = torch.linalg.eig(a)
        return w.abs().sum() + v.abs().sum()
    check_grad(f, torch.randn(3, 3), atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------ log-add-exp family
# Eager's complex rule (ATen native/cpu/LogAddExp.h, _log_add_exp_helper): order the arguments by
# real part, result = log1p(exp(min - max)) + max; NaN anywhere gives NaN + NaN j; equal infinite
# real parts give min at -inf and log(exp(min) + exp(max)) at +inf.

_S = [0.0, -2.5, 3.0, math.inf, -math.inf, math.nan]
_SPECIAL = torch.tensor([complex(r, i) for r in _S for i in (0.0, 1.0, -2.0, math.inf, math.nan)],
                        dtype=torch.complex64)


def test_logaddexp_complex_orders_by_real_part():
    check(torch.logaddexp, W, W.flip(1), atol=1e-5, rtol=1e-5)
    check(torch.logaddexp, W.to(torch.complex128), W.flip(0).to(torch.complex128))


def test_logaddexp_complex_with_a_real_argument():
    check(torch.logaddexp, W, W.real.flip(1) * 2, atol=1e-5, rtol=1e-5)


def test_logaddexp_complex_infinities_and_nans():
    """Every pair of special values (inf, -inf, NaN in either part), as eager's C++ complex math."""
    x = _SPECIAL.repeat_interleave(len(_SPECIAL))
    y = _SPECIAL.repeat(len(_SPECIAL))
    check(lambda a, b: torch.view_as_real(torch.logaddexp(a, b)), x, y, atol=1e-5, rtol=1e-5)


def test_logsumexp_complex_shifts_by_the_max_real_part():
    """The imaginary part is the angle of the sum, in (-pi, pi] (a complex shift moved it 2*pi)."""
    check(lambda a: torch.logsumexp(a, 1), W, atol=1e-5, rtol=1e-5)
    check(lambda a: torch.logsumexp(a, (0, 1), keepdim=True), W, atol=1e-5, rtol=1e-5)


def test_logcumsumexp_complex_folds_in_order():
    """Eager folds element by element (in complex128); a tree-ordered scan ends 2*pi away."""
    check(lambda a: torch.logcumsumexp(a, 1), W, atol=1e-5, rtol=1e-5)
    check(lambda a: torch.logcumsumexp(a, 0), W.T.contiguous(), atol=1e-5, rtol=1e-5)


def test_logcumsumexp_complex_infinities_and_nans():
    x = _SPECIAL.reshape(5, 6)
    check(lambda a: torch.view_as_real(torch.logcumsumexp(a, 1)), x, atol=1e-5, rtol=1e-5)
    check(lambda a: torch.view_as_real(torch.logcumsumexp(a, 0)), x, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------ complex gradients

def check_complex_grad(fn, *args, atol=1e-4, rtol=1e-4):
    """Gradients w.r.t. every complex input of the real loss sum(w * view_as_real(fn(*args))),
    fixed weights w, agree on the CPU and on lazyxla, with no op on the CPU fallback."""
    def grads(dev):
        ins = [a.detach().to(dev).requires_grad_(True) for a in args]
        out = fn(*ins)
        r = torch.view_as_real(out) if out.is_complex() else out
        w = torch.linspace(-1.0, 2.0, r.numel()).reshape(r.shape).to(dev)
        return [g.cpu() for g in torch.autograd.grad((r * w).sum(), ins)]
    expected = grads("cpu")
    before = set(metrics.executed_fallback_ops())
    actual = grads(lazyxla.device())
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
    new = sorted(set(metrics.executed_fallback_ops()) - before)
    assert not new, f"ops fell back to the CPU: {new}"


GRADS = {
    # backward kernels of complex inputs conjugate the derivative: grad * conj(1 - tanh^2)
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "tanhshrink": torch.nn.functional.tanhshrink,
    "logaddexp": lambda a: torch.logaddexp(a, a.flip(1)),
    "logsumexp": lambda a: torch.logsumexp(a, 1),
    "logcumsumexp": lambda a: torch.logcumsumexp(a, 1),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_complex_gradient_as_eager(name):
    check_complex_grad(GRADS[name], W / 4)


# ------------------------------------------------------------------------ eigh

@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_complex_up_to_the_sign_of_each_eigenvector(uplo):
    """Eigenvalues as eager; eigenvectors as eager up to a sign per column. Both sides run LAPACK
    heevd on the same column-major input (the UPLO triangle, the diagonal's imaginary part ignored,
    this input is not Hermitian): the same Householder reduction gives the same complex phases,
    and the real tridiagonal eigenvectors' signs are the LAPACK build's own (eager's MKL; JAX's
    LAPACK gives scipy.linalg.eigh(driver="evd")'s signs), so eager's signs cannot be reproduced."""
    a = torch.randn(5, 5, dtype=torch.complex64)
    w, v = torch.linalg.eigh(a, UPLO=uplo)
    wd, vd = (t.cpu() for t in torch.linalg.eigh(a.to(lazyxla.device()), UPLO=uplo))
    torch.testing.assert_close(wd, w, atol=1e-5, rtol=1e-5)
    phase = (v.conj() * vd).sum(0)  # <v_k, vd_k> per column
    torch.testing.assert_close(phase.abs(), torch.ones(5), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(phase.imag, torch.zeros(5), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(vd, v * phase.real.sign(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_cholesky_of_empty_matrices(shape):
    """Found by the complex64 sweep, not complex-specific: the info computation could not trace
    for n = 0 (eager: an empty factor, info 0)."""
    a = torch.empty(shape, dtype=torch.complex64)
    check(lambda x: torch.linalg.cholesky_ex(x, upper=True), a)
    check(torch.linalg.cholesky, a.real.contiguous())


def test_complex_numbers_built_from_parts_keep_inf_nan_and_signed_zero_parts():
    # `re + 1j * im` computed (0+1j)*(im+0j): 0 * inf made the real part NaN, and zeros lost signs
    inf, nan = math.inf, math.nan
    v = torch.tensor([[1.0, inf], [1.0, nan], [-0.0, 2.0], [3.0, -0.0], [-inf, -0.0]])
    a, t = torch.tensor([inf, inf, 2.0, 0.0]), torch.tensor([0.0, 1.5707964, -0.0, -1.0])
    cases = [lambda v: torch.view_as_complex(v), lambda v: torch.complex(v[:, 0], v[:, 1]),
             lambda v: torch.polar(a.to(v.device), t.to(v.device))]
    cases.append(torch.compile(lambda v: torch.view_as_complex(v).clone(), backend="lazyxla"))
    for fn in cases:
        got, want = fn(v.to(lazyxla.device())).cpu(), fn(v)
        torch.testing.assert_close(got, want, equal_nan=True)
        assert torch.equal(torch.view_as_real(got).signbit(), torch.view_as_real(want).signbit())
