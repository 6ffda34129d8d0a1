"""The gamma-family samplers (torch.distributions' Gamma, Beta, Dirichlet, Chi2, Poisson, Binomial) run on
the device: eager's distributions, edge values, dtypes and errors."""
import warnings

import pytest
import torch
import torch.distributions as td

import lazyxla
from lazyxla import metrics

D = lazyxla.device()


@pytest.fixture(autouse=True)
def no_fallback():
    metrics.clear_counters()
    yield
    assert metrics.executed_fallback_ops() == []


def test_gamma_and_poisson_draws_have_their_distributions_moments():
    torch.manual_seed(0)
    alpha = torch.tensor([0.3, 3.0]).repeat(20000)
    g = torch._standard_gamma(alpha.to(D)).cpu().view(-1, 2)
    # Gamma(a, 1): mean a, variance a; 20000 draws: the mean within 5 standard errors
    for i, a in enumerate((0.3, 3.0)):
        assert abs(g[:, i].mean() - a) < 5 * (a / 20000) ** 0.5
        assert abs(g[:, i].var() / a - 1) < 0.1
    rate = torch.tensor([0.5, 30.0, 2000.0]).repeat(20000)
    p = torch.poisson(rate.to(D)).cpu().view(-1, 3)
    assert p.dtype == torch.float32 and torch.equal(p, p.round()) and p.min() >= 0
    for i, lam in enumerate((0.5, 30.0, 2000.0)):
        assert abs(p[:, i].mean() - lam) < 5 * (lam / 20000) ** 0.5
        assert abs(p[:, i].var() / lam - 1) < 0.1


def test_dirichlet_draws_lie_on_the_simplex_with_its_mean():
    torch.manual_seed(0)
    conc = torch.tensor([1.0, 2.0, 3.0])
    x = torch._sample_dirichlet(conc.expand(20000, 3).contiguous().to(D)).cpu()
    torch.testing.assert_close(x.sum(-1), torch.ones(20000))
    assert x.min() > 0
    torch.testing.assert_close(x.mean(0), conc / conc.sum(), atol=0.01, rtol=0)


def test_seeded_draws_repeat_and_successive_draws_differ():
    alpha = torch.full((64,), 2.0).to(D)
    torch.manual_seed(5)
    first = [torch._standard_gamma(alpha).cpu(), torch.poisson(alpha * 3).cpu()]
    torch.manual_seed(5)
    again = [torch._standard_gamma(alpha).cpu(), torch.poisson(alpha * 3).cpu()]
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    assert not torch.equal(first[0], torch._standard_gamma(alpha).cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gamma_edge_values_are_eagers(dtype):
    # eager: a shape that is not positive (or NaN) and an underflowing draw give the dtype's
    # smallest normal number, never 0; an infinite shape gives inf
    alpha = torch.tensor([0.0, -1.0, float("nan"), 1e-30, float("inf")], dtype=dtype)
    assert torch.equal(torch._standard_gamma(alpha.to(D)).cpu(), torch._standard_gamma(alpha))


def test_dirichlet_edge_values_shapes_and_dtypes_are_eagers():
    tiny64 = torch.finfo(torch.float64).tiny
    alpha = torch.tensor([[0.0, 1.0], [1e-30, 1e-30], [-1.0, 1.0]], dtype=torch.float64)
    got = torch._sample_dirichlet(alpha.to(D)).cpu()
    assert got.dtype == torch.float64
    assert torch.equal(got[1], torch.tensor([0.5, 0.5], dtype=torch.float64))
    for row in (0, 2):  # the invalid concentration's share: tiny / (a draw), at least tiny
        assert tiny64 <= got[row, 0] < 1e-300 and got[row, 1] == 1
    assert torch._sample_dirichlet(torch.tensor(2.0).to(D)).cpu() == 1  # eager: g / g
    assert torch._sample_dirichlet(torch.ones(3, 0).to(D)).shape == (3, 0)


def test_gamma_sample_gradient_matches_eager_and_broadcasts():
    alpha = torch.tensor([2.0, 0.5, 7.0])
    sample = torch.tensor([[1.0], [0.3], [9.0]])
    with warnings.catch_warnings():  # eager's kernel warns that it resizes its output
        warnings.simplefilter("ignore")
        want = torch._standard_gamma_grad(alpha, sample)
    torch.testing.assert_close(torch._standard_gamma_grad(alpha.to(D), sample.to(D)).cpu(), want,
                               rtol=1e-3, atol=1e-5)


def test_gamma_rsample_backward_is_the_reparameterized_gradient():
    torch.manual_seed(0)
    conc = torch.tensor([0.7, 2.0, 5.0]).to(D).requires_grad_()
    x = td.Gamma(conc, torch.ones(3).to(D)).rsample((4,))
    x.sum().backward()
    # d x / d a at the drawn x, by eager's kernel
    want = torch._standard_gamma_grad(torch.tensor([0.7, 2.0, 5.0]).expand(4, 3), x.detach().cpu())
    torch.testing.assert_close(conc.grad.cpu(), want.sum(0), rtol=1e-3, atol=1e-5)


def test_distributions_sample_on_the_device():
    torch.manual_seed(0)
    c = torch.tensor([0.5, 2.0]).to(D)
    for dist in (td.Gamma(c, c), td.Chi2(c), td.Beta(c, c), td.Dirichlet(c), td.Poisson(c),
                 td.Binomial(7, c / 4)):
        s = dist.sample((3,))
        assert s.device.type == "lazyxla" and s.shape == (3, 2)
        assert torch.isfinite(dist.log_prob(s).cpu()).all()


@pytest.mark.parametrize("op,kernel", [(torch._standard_gamma, "gamma_cpu"),
                                       (torch.poisson, "poisson_cpu"),
                                       (torch._sample_dirichlet, "dirichlet")])
@pytest.mark.parametrize("dtype,name", [(torch.int64, "Long"), (torch.bool, "Bool"),
                                        (torch.complex64, "ComplexFloat")])
def test_non_floating_inputs_raise_eagers_error(op, kernel, dtype, name):
    with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'{name}\''):
        op(torch.ones(2, dtype=dtype))
    with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'{name}\''):
        op(torch.ones(2, dtype=dtype).to(D))
    metrics.clear_counters()  # an error input may reach the CPU kernel, which words the error


def test_gamma_gradient_with_another_sample_dtype_raises_eagers_error():
    msg = "Found dtype Double but expected Float"
    with pytest.raises(RuntimeError, match=msg):
        torch._standard_gamma_grad(torch.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=msg):
        torch._standard_gamma_grad(torch.ones(2).to(D), torch.ones(2, dtype=torch.float64).to(D))


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_poisson_with_a_negative_or_nan_rate_raises_eagers_error(bad):
    rate = torch.tensor([1.0, bad])
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
        torch.poisson(rate)
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
        torch.poisson(rate.to(D)).cpu()


def test_binomial_draws_have_their_moments_and_eagers_edge_values():
    torch.manual_seed(0)
    n, p = torch.tensor([20.0, 1000.0]).repeat(20000), torch.tensor([0.3, 0.9]).repeat(20000)
    x = torch.binomial(n.to(D), p.to(D)).cpu().view(-1, 2)
    assert torch.equal(x, x.round())
    for i, (k, q) in enumerate(((20, 0.3), (1000, 0.9))):
        mean, var = k * q, k * q * (1 - q)
        assert abs(x[:, i].mean() - mean) < 5 * (var / 20000) ** 0.5
        assert abs(x[:, i].var() / var - 1) < 0.1
    # eager: a probability above 1 or below 0 is clamped, a NaN one gives NaN; a count of 0 gives 0
    count = torch.tensor([5.0, 5.0, 0.0, 4.0], dtype=torch.float64)
    prob = torch.tensor([1.5, -0.5, 0.5, float("nan")], dtype=torch.float64)
    torch.testing.assert_close(torch.binomial(count.to(D), prob.to(D)).cpu(),
                               torch.binomial(count, prob), equal_nan=True)
    # a count broadcasts against a probability as in eager
    assert torch.binomial(torch.tensor([3.0]).to(D), torch.tensor([0.5, 0.5]).to(D)).shape == (2,)


def test_binomial_with_a_negative_or_nan_count_gives_nan_where_eager_never_returns():
    got = torch.binomial(torch.tensor([-1.0, float("nan")]).to(D), torch.tensor([0.5, 0.5]).to(D))
    assert got.cpu().isnan().all()


@pytest.mark.parametrize("count,prob,error,msg", [
    (torch.tensor([3, 4]), torch.tensor([0.5, 0.5]), ValueError,
     "binomial only supports floating-point dtypes for count, got: Long"),
    (torch.tensor([3.0, 4.0]), torch.tensor([1, 0]), ValueError,
     "binomial only supports floating-point dtypes for prob, got: Long"),
    (torch.tensor([3.0, 4.0]), torch.tensor([0.5, 0.5], dtype=torch.float64), RuntimeError,
     "Found dtype Double but expected Float"),
])
def test_binomial_dtype_errors_are_eagers(count, prob, error, msg):
    with pytest.raises(error, match=msg):
        torch.binomial(count, prob)
    with pytest.raises(error, match=msg):
        torch.binomial(count.to(D), prob.to(D))
