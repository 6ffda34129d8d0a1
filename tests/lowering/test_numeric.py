"""Complex construction, number theory, incomplete gamma, mvlgamma, frexp, renorm, histc, equal."""
import pytest
import torch

import lazyxla
from lazyxla.testing import check, check_grad

A, B = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), torch.randn(3, 4)


def test_complex_and_polar():
    check(torch.complex, A, B)
    check(torch.polar, A.abs(), B)
    check(torch.view_as_complex, torch.randn(3, 2))


def test_view_as_complex_aliases():
    def f(x):
        c = torch.view_as_complex(x)
        return c * 2, x
    check(f, torch.randn(4, 2))


def test_gcd_lcm_int64():
    i, j = torch.randint(-50, 50, (20,)), torch.randint(-50, 50, (20,))
    check(torch.gcd, i, j)
    check(torch.lcm, i, j)


def test_incomplete_gamma_and_mvlgamma():
    check(torch.igamma, A.abs() + 0.1, B.abs())
    check(torch.igammac, A.abs() + 0.1, B.abs())
    for p in (1, 3, 5):
        check(lambda x: torch.mvlgamma(x, p), A.abs() + 2)
    check_grad(lambda x: torch.mvlgamma(x, 2), A.abs() + 2)


def test_frexp():
    check(torch.frexp, torch.tensor([0.0, 1.0, -3.5, 1e-30, 1e30, float("inf")]))


@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 0.5), (float("inf"), 1, 0.3)])
def test_renorm(p, dim, maxnorm):
    check(lambda x: torch.renorm(x, p, dim, maxnorm), A)


def test_histc():
    check(lambda x: torch.histc(x, 7), A)
    check(lambda x: torch.histc(x, 5, -1, 1), A)
    check(lambda x: torch.histc(x, 3), torch.ones(4))  # an empty range widens by 1


def test_equal_reads_one_bool():
    check(lambda x, y: torch.equal(x, y), A, A.clone())
    check(lambda x, y: torch.equal(x, y), A, A + 1)
    assert not torch.equal(A.to(lazyxla.device()), A[:2].to(lazyxla.device()))


def test_arange_out():
    d = lazyxla.device()
    o = torch.empty(0, dtype=torch.int64, device=d)
    torch.arange(2, 9, 2, out=o)
    assert o.cpu().tolist() == [2, 4, 6, 8]
