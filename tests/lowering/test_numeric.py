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


@pytest.mark.parametrize("dt", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_gcd_lcm_of_the_dtype_extremes_end_and_wrap_as_eager(dt):
    # jnp.gcd loops forever on the dtype's minimum (its abs stays negative); eager's lcm of
    # narrow ints computes |x / g * y| in int, then truncates
    info = torch.iinfo(dt)
    v = torch.tensor([0, 1, -1, 6, -12, 35, 120, -100, info.max, info.min, info.min + 1])
    a, b = (t.reshape(-1) for t in torch.meshgrid(v.clamp(info.min, info.max).unique().to(dt),
                                                   v.clamp(info.min, info.max).unique().to(dt),
                                                   indexing="ij"))
    check(torch.gcd, a, b)
    if dt in (torch.int32, torch.int64):  # eager's vectorized lcm dies (SIGFPE) at the minimum
        keep = (a != info.min) & (b != info.min)
        a, b = a[keep], b[keep]
    check(torch.lcm, a, b)
    check(torch.gcd, torch.tensor([[-1, -4, 1]], dtype=torch.int16),
          torch.tensor([-3, -2 ** 31, 3], dtype=torch.int32))  # mixed dtypes, broadcast


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


@pytest.mark.parametrize("make", [
    lambda d: torch.arange(4, out=torch.empty(0, dtype=torch.complex64, device=d)),
    lambda d: torch.arange(4, out=torch.empty(0, dtype=torch.bool, device=d)),
    lambda d: torch.fft.fftfreq(5, dtype=torch.complex64, device=d),
    lambda d: torch.hann_window(5, dtype=torch.complex64, device=d)],
    ids=["out_complex", "out_bool", "fftfreq", "hann_window"])
def test_arange_into_an_out_of_a_dtype_eager_has_no_range_for_raises(make):
    # the check read dtype= only: through out= (fftfreq, windows) a complex range was made
    with pytest.raises(NotImplementedError) as eager:
        make("cpu")
    with pytest.raises(NotImplementedError) as lazy:
        make(lazyxla.device())
    assert str(lazy.value) == str(eager.value)
