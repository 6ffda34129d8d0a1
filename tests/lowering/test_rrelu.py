import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla import metrics
from lazyxla.testing import check, check_grad

SPECIAL = torch.tensor([0.0, -0.0, float("nan"), -float("inf"), float("inf")])


def _x(n=2000, dtype=torch.float32):
    torch.manual_seed(0)
    return torch.cat([SPECIAL, torch.randn(n)]).to(dtype)


def _no_fallback(fn):
    before = set(metrics.executed_fallback_ops())
    out = fn()
    lazyxla.sync()
    assert not set(metrics.executed_fallback_ops()) - before
    return out


def test_eval_mode_matches_eager():
    x = _x(200)
    check(lambda a: (F.rrelu(a, 0.1, 0.3), F.rrelu(a.double()), F.rrelu(a.bfloat16(), 0.2, 0.7)), x)
    check_grad(lambda a: F.rrelu(a, 0.1, 0.3, training=False), x[5:])
    check_grad(lambda a: F.rrelu(a * 1, 0.1, 0.3, training=False, inplace=True), x[5:])
    # eval mode leaves the noise tensor alone
    check(lambda a, n: (torch.ops.aten.rrelu_with_noise(a, n, 0.1, 0.3, False), n), x, torch.full_like(x, 7.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_training_contract(dtype):
    """Slopes uniform in [lower, upper] for x <= 0 (0 included, as eager), written to noise;
    noise is 1 for x > 0 and NaN; out = x * noise; the gradient is the noise."""
    lo, hi = 0.1, 0.3
    x = _x(dtype=dtype)
    d = lazyxla.device()
    xd = x.to(d).requires_grad_()
    noise = torch.empty_like(xd, requires_grad=False)

    def run():
        out = torch.ops.aten.rrelu_with_noise(xd, noise, lo, hi, True)
        out.float().sum().backward()
        return out
    out = _no_fallback(run).detach().cpu()
    n, g = noise.cpu(), xd.grad.cpu()
    assert out.dtype == n.dtype == dtype
    neg = x <= 0
    slopes = n[neg].double()
    tol = 2e-3 if dtype == torch.bfloat16 else 0  # (bfloat16 rounds the slopes)
    assert slopes.min() >= lo - tol and slopes.max() <= hi + tol
    assert abs(slopes.mean() - (lo + hi) / 2) < 0.01 and slopes.std() > 0.04  # spread over the range
    assert (n[~neg] == 1).all() and n[2] == 1  # NaN is not <= 0
    fin = torch.isfinite(x)
    if dtype == torch.bfloat16:
        torch.testing.assert_close(out[fin], (x * n)[fin], atol=0, rtol=1e-2)
    else:
        assert torch.equal(out[fin], (x * n)[fin])
    assert torch.isnan(out[2]) and out[3] == -float("inf") and out[4] == float("inf")
    assert torch.equal(g, n.to(g.dtype))


def test_functional_module_inplace_and_fresh_noise():
    d = lazyxla.device()
    x = _x(1000)
    neg = x <= 0

    def run():
        torch.manual_seed(1)
        a = F.rrelu(x.to(d), 0.2, 0.4, training=True)
        b = torch.nn.RReLU(0.2, 0.4).train()(x.to(d))
        y = x.to(d)
        c = F.rrelu(y, 0.2, 0.4, training=True, inplace=True)
        assert c is y
        return a, b, y
    a, b, y = [t.cpu() for t in _no_fallback(run)]
    for t in (a, b, y):
        ratio = (t / x)[neg][5:]
        assert ratio.min() >= 0.2 and ratio.max() <= 0.4
        assert torch.equal(t[~neg & torch.isfinite(x)], x[~neg & torch.isfinite(x)])
    fin = torch.isfinite(x)
    assert not torch.equal(a[fin], b[fin])  # a fresh draw per call
    torch.manual_seed(1)
    a2 = F.rrelu(x.to(d), 0.2, 0.4, training=True).cpu()
    assert torch.equal(a[fin], a2[fin])  # torch.manual_seed reproduces it


def test_backward_op_eval_and_training():
    x, g, n = _x(100), torch.randn(105), torch.rand(105)
    f = torch.ops.aten.rrelu_with_noise_backward
    check(lambda a, b, c: (f(b, a, c, 0.1, 0.3, False, False), f(b, a, c, 0.1, 0.3, True, False)), x, g, n)


def test_half_training_raises_like_eager():
    x = torch.randn(4).half()
    with pytest.raises(NotImplementedError) as e:
        F.rrelu(x, training=True)
    with pytest.raises(NotImplementedError) as e2:
        F.rrelu(x.to(lazyxla.device()), training=True)
    assert str(e.value) == str(e2.value)


def test_noise_shape_error_like_eager():
    x, n = torch.randn(4), torch.empty(3)
    d = lazyxla.device()
    for training in (False, True):
        with pytest.raises(RuntimeError) as e:
            torch.ops.aten.rrelu_with_noise(x, n, 0.1, 0.3, training)
        with pytest.raises(RuntimeError) as e2:
            torch.ops.aten.rrelu_with_noise(x.to(d), n.to(d), 0.1, 0.3, training)
        assert str(e.value) == str(e2.value)
