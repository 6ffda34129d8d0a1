"""Complex numbers against eager: real results of complex inputs, conjugate and negative bits
carried by views, vdot's conjugation (each of these computed a wrong value)."""
import pytest
import torch

from lazyxla.testing import check, check_grad

torch.manual_seed(0)
A = torch.randn(3, 3, dtype=torch.complex64)
B = torch.randn(3, 3, dtype=torch.complex64)

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
