import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla import metrics


def dev():
    return lazyxla.device()


def _no_fallback(fn):
    before = metrics.executed_fallback_ops()
    out = fn()
    new = sorted(set(metrics.executed_fallback_ops()) - set(before))
    assert not new, f"ops fell back to the CPU: {new}"
    return out


def test_factories_shapes_dtypes_distributions():
    d = dev()
    torch.manual_seed(0)

    def run():
        return (torch.rand(4000, device=d), torch.randn(4000, device=d, dtype=torch.float64),
                torch.randint(3, 7, (4000,), device=d), torch.randint(5, (10,), device=d, dtype=torch.int32),
                torch.rand_like(torch.zeros(2, 3, device=d, dtype=torch.bfloat16)),
                torch.randn_like(torch.zeros(2, 3, device=d)), torch.randperm(50, device=d),
                torch.normal(2.0, 3.0, (4000,), device=d))
    u, n, ri, ri32, rl, rnl, perm, nrm = [t.cpu() for t in _no_fallback(run)]
    assert u.dtype == torch.float32 and u.shape == (4000,)
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.03
    assert n.dtype == torch.float64 and abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    assert ri.dtype == torch.int64 and ri.min() == 3 and ri.max() == 6
    assert ri32.dtype == torch.int32 and 0 <= ri32.min() and ri32.max() < 5
    assert rl.dtype == torch.bfloat16 and rl.shape == (2, 3)
    assert rnl.shape == (2, 3)
    assert sorted(perm.tolist()) == list(range(50)) and perm.dtype == torch.int64
    assert abs(nrm.mean() - 2) < 0.2 and abs(nrm.std() - 3) < 0.2


def test_inplace_random_ops():
    d = dev()

    def run():
        x = torch.empty(4000, device=d)
        return (x.clone().uniform_(-2, 3), x.clone().normal_(1, 0.5), x.clone().bernoulli_(0.25),
                x.clone().bernoulli_(torch.full((4000,), 0.75, device=d)), x.clone().exponential_(2.0),
                x.clone().random_(0, 10), torch.bernoulli(torch.full((4000,), 0.5, device=d)))
    u, n, b, bt, e, r, bd = [t.cpu() for t in _no_fallback(run)]
    assert -2 <= u.min() and u.max() < 3 and abs(u.mean() - 0.5) < 0.1
    assert abs(n.mean() - 1) < 0.05 and abs(n.std() - 0.5) < 0.05
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.03
    assert abs(bt.mean() - 0.75) < 0.03 and abs(bd.mean() - 0.5) < 0.03
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.05
    assert r.min() == 0 and r.max() == 9 and (r == r.round()).all()


def test_multinomial():
    d = dev()
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    s = _no_fallback(lambda: torch.multinomial(p.to(d), 3000, replacement=True)).cpu()
    assert s.shape == (2, 3000) and s.dtype == torch.int64
    assert (s[0] != 1).all()
    assert abs((s[0] == 2).float().mean() - 0.6) < 0.04
    w = _no_fallback(lambda: torch.multinomial(p.to(d), 3)).cpu()
    assert (w[0] != 1).all() and sorted(w[0].tolist()) == [0, 2, 3]
    assert len(set(w[1].tolist())) == 3


def test_fresh_samples_and_manual_seed_reproducible():
    d = dev()
    torch.manual_seed(123)
    a, b = torch.rand(5, device=d).cpu(), torch.rand(5, device=d).cpu()
    assert not torch.equal(a, b)
    torch.manual_seed(123)
    a2, b2 = torch.rand(5, device=d).cpu(), torch.rand(5, device=d).cpu()
    assert torch.equal(a, a2) and torch.equal(b, b2)


def test_dropout():
    d = dev()
    torch.manual_seed(0)
    x = torch.ones(2000, device=d, requires_grad=True)
    y = _no_fallback(lambda: F.dropout(x, 0.3, training=True))
    y.backward(torch.full((2000,), 2.0, device=d))
    yc, g = y.detach().cpu(), x.grad.cpu()
    kept = yc != 0
    assert torch.allclose(yc[kept], torch.tensor(1 / 0.7))
    assert abs(kept.float().mean() - 0.7) < 0.04
    assert torch.allclose(g[kept], torch.tensor(2 / 0.7)) and (g[~kept] == 0).all()
    # eval mode is the identity, p=1 zeroes everything, two calls draw different masks
    assert torch.equal(F.dropout(x, 0.3, training=False).detach().cpu(), torch.ones(2000))
    assert (F.dropout(x, 1.0, training=True).detach().cpu() == 0).all()
    m1 = F.dropout(x, 0.5).detach().cpu() != 0
    m2 = F.dropout(x, 0.5).detach().cpu() != 0
    assert not torch.equal(m1, m2)
    torch.manual_seed(7)
    r1 = F.dropout(x, 0.5).detach().cpu()
    torch.manual_seed(7)
    assert torch.equal(F.dropout(x, 0.5).detach().cpu(), r1)


def test_uniform_from_keyword():
    x = torch.empty(1000, device=lazyxla.device())
    y = torch.ops.aten.uniform(x, **{"from": -3.0, "to": -1.0}).cpu()
    assert y.min() >= -3.0 and y.max() <= -1.0 and y.std() > 0.3
    z = x.uniform_(2.0, 5.0).cpu()
    assert z.min() >= 2.0 and z.max() <= 5.0


GENERATED = {
    "randn": lambda d, g: torch.randn(3, device=d, generator=g),
    "rand": lambda d, g: torch.rand(3, device=d, generator=g),
    "randint": lambda d, g: torch.randint(0, 10, (5,), device=d, generator=g),
    "randperm": lambda d, g: torch.randperm(6, device=d, generator=g),
    "normal_tensor_mean": lambda d, g: torch.normal(torch.zeros(3, device=d), 1.0, generator=g),
    "normal_": lambda d, g: torch.empty(4, device=d).normal_(generator=g),
    "uniform_": lambda d, g: torch.empty(4, device=d).uniform_(generator=g),
    "bernoulli_": lambda d, g: torch.empty(8, device=d).bernoulli_(0.3, generator=g),
    "bernoulli_p": lambda d, g: torch.bernoulli(torch.empty(8, device=d), 0.4, generator=g),
    "bernoulli_tensor": lambda d, g: torch.bernoulli(torch.full((8,), 0.5, device=d), generator=g),
    "exponential_": lambda d, g: torch.empty(4, device=d).exponential_(generator=g),
    "random_": lambda d, g: torch.empty(4, device=d).random_(0, 5, generator=g),
    "multinomial": lambda d, g: torch.tensor([0.1, 0.2, 0.3, 0.4], device=d).multinomial(3, generator=g),
}


@pytest.mark.parametrize("fn", GENERATED.values(), ids=GENERATED.keys())
def test_a_cpu_generator_seeds_the_op(fn):
    """generator= was ignored (the device RNG drew): a generator seeded alike now gives the same
    values, and the device RNG is left alone."""
    import lazyxla
    d, g = lazyxla.device(), torch.Generator()
    g.manual_seed(7)
    state = torch.lazyxla.get_rng_state()
    first = fn(d, g).cpu()
    assert torch.equal(torch.lazyxla.get_rng_state(), state)
    g.manual_seed(7)
    torch.testing.assert_close(fn(d, g).cpu(), first)
    assert any(not torch.equal(fn(d, g.manual_seed(s)).cpu(), first) for s in range(8, 14))


def test_normal_with_default_std():
    """normal(mean_tensor, 1.0): the dispatcher drops std=1, which the lowering required."""
    import lazyxla
    torch.manual_seed(0)
    assert torch.normal(torch.zeros(1000, device=lazyxla.device()), 1.0).cpu().std() > 0.9


COMPLEX_SAMPLES = {  # eager samples a complex tensor as its view_as_real: (real, imag) moments
    "randn": (lambda d: torch.randn(6000, dtype=torch.complex64, device=d), (0, 0.5**0.5), (0, 0.5**0.5)),
    "randn_like_c128": (lambda d: torch.randn_like(torch.zeros(6000, dtype=torch.complex128, device=d)),
                        (0, 0.5**0.5), (0, 0.5**0.5)),
    "rand": (lambda d: torch.rand(6000, dtype=torch.complex64, device=d), (0.5, 12**-0.5), (0.5, 12**-0.5)),
    "uniform_": (lambda d: torch.zeros(6000, dtype=torch.complex64, device=d).uniform_(1, 3),
                 (2, 2 * 12**-0.5), (2, 2 * 12**-0.5)),
    # normal_(mean, std): both parts N(mean, std^2 / 2)
    "normal_": (lambda d: torch.zeros(6000, dtype=torch.complex64, device=d).normal_(1, 2),
                (1, 2**0.5), (1, 2**0.5)),
    # normal(complex mean, std): N(0, 1) complex times std, plus the mean
    "normal_tensor_mean": (lambda d: torch.normal(torch.full((6000,), 1 + 2j, device=d), 2.0),
                           (1, 2**0.5), (2, 2**0.5)),
    "normal_tensor_mean_std": (lambda d: torch.normal(torch.full((3000, 1), 1 + 2j, device=d),
                                                      torch.full((1, 2), 3.0, device=d)),
                               (1, 3 * 0.5**0.5), (2, 3 * 0.5**0.5)),
}


@pytest.mark.parametrize("fn,re,im", COMPLEX_SAMPLES.values(), ids=COMPLEX_SAMPLES.keys())
def test_complex_samples_have_eager_moments_in_both_parts(fn, re, im):
    z = _no_fallback(lambda: fn(dev())).cpu()
    assert z.dtype == fn("cpu").dtype and z.shape == fn("cpu").shape
    for part, (mean, std) in ((z.real, re), (z.imag, im)):
        assert abs(part.mean() - mean) < 0.1 * max(std, 0.5), (part.mean(), mean)
        assert abs(part.std() - std) < 0.06 * std, (part.std(), std)


def test_random__of_bfloat16_draws_integers_up_to_its_mantissa():
    r = torch.zeros(4000, dtype=torch.bfloat16, device=dev()).random_().cpu()
    assert r.dtype == torch.bfloat16 and (r == r.round()).all()
    assert r.min() >= 0 and r.max() <= 2 ** 8 and r.float().mean() > 50


def test_native_dropout_of_complex_as_eager_cpu():
    # eager's CPU kernel computes it (its meta kernel refuses complex): values kept are scaled
    x = torch.full((4000,), 1 + 1j, device=dev())
    y, mask = (t.cpu() for t in torch.native_dropout(x, 0.25, True))
    assert y.dtype == torch.complex64 and mask.dtype == torch.bool
    assert torch.equal(y, torch.where(mask, torch.tensor((1 + 1j) / 0.75), torch.tensor(0j)))
    assert abs(mask.float().mean() - 0.75) < 0.03


def test_a_new_generator_each_call_reuses_the_program_and_hashes_alike_in_every_process():
    # the generator object was an attribute of the node, so its identity and repr (an address)
    # were in the graph key: one compile per generator, and no persistent cache hit across processes
    import subprocess
    import sys
    from lazyxla import metrics
    dev = lazyxla.device()
    x = torch.ones(4, device=dev)
    lazyxla.sync()
    values = []
    for seed in (0, 1, 0, 1):
        (x + torch.randn(4, device=dev, generator=torch.Generator().manual_seed(seed))).cpu()
        before = metrics.counter_value("UncachedCompile") or 0
        values.append((x + torch.randn(4, device=dev, generator=torch.Generator().manual_seed(seed))).cpu())
        assert (metrics.counter_value("UncachedCompile") or 0) == before
    assert torch.equal(values[0], values[2]) and not torch.equal(values[0], values[1])
    probe = ("import torch, lazyxla\n"
             "g = torch.Generator().manual_seed(0)\n"
             "print(lazyxla.graph_hash([torch.randn(3, device=lazyxla.device(), generator=g) + 1]))")
    hashes = {subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             timeout=300).stdout.strip() for _ in range(2)}
    assert len(hashes) == 1 and "" not in hashes
