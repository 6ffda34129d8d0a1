import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla import metrics
from lazyxla.testing import check, check_grad

EXACT = dict(atol=0, rtol=0)


def _one_program(fn):
    """fn, with every output of a device call computed by one program (one compile)."""
    def run(*args):
        out = fn(*args)
        if any(isinstance(a, torch.Tensor) and a.device.type == "lazyxla" for a in args):
            lazyxla.sync()
        return out
    return run


def _pool2d(a, s, kernel, out):
    return F.fractional_max_pool2d(a, kernel, output_size=out, return_indices=True, _random_samples=s)


def _samples(*shape, dtype=torch.float32):
    s = torch.rand(*shape)
    s.view(-1)[:4] = torch.tensor([0.0, 0.5, 0.25, 0.9999])[:s.numel()]  # ends of [0, 1), halves
    return s.to(dtype)


def test_fractional_max_pool2d_and_3d_given_samples():
    torch.manual_seed(0)
    x, s = torch.randn(2, 3, 9, 8), _samples(2, 3, 2)
    x3, s3 = torch.randn(2, 2, 6, 7, 5), _samples(2, 2, 3)

    def f(a, b, a3, b3):
        return (_pool2d(a, b, 2, (4, 5)),
                _pool2d(a, b, (3, 2), (7, 1)),  # output size 1: the one window at the end
                _pool2d(a[0], b[:1], 2, (8, 7)),  # unbatched; neighbouring windows overlap
                F.fractional_max_pool3d(a3, (2, 3, 2), output_size=(3, 4, 3), return_indices=True,
                                        _random_samples=b3))
    check(_one_program(f), x, s, x3, s3, **EXACT)


def test_ties_nan_infinity_and_other_dtypes():
    # ties: the first maximum in row-major window order; NaN wins (the last one in its window)
    torch.manual_seed(1)
    x = torch.randint(0, 3, (1, 2, 7, 7)).float()
    x[0, 0, 2, 3] = x[0, 0, 3, 2] = float("nan")
    x[0, 1] = float("-inf")
    y = torch.randn(1, 4, 11, 9)
    s = _samples(1, 4, 2)

    def f(a, b, yd, ys):
        return (_pool2d(a, b[:, :2], 3, (3, 3)),
                *[_pool2d(yd.to(dt), ys.to(dt), 2, (5, 4))
                  for dt in (torch.float64, torch.float16, torch.bfloat16)])
    check(_one_program(f), x, s, y, s, **EXACT)


def test_backward():
    torch.manual_seed(2)
    x2, s2 = torch.randn(2, 3, 9, 8), _samples(2, 3, 2)
    x3, s3 = torch.randn(1, 2, 6, 7, 5), _samples(1, 2, 3)

    def f(a, b):
        return (F.fractional_max_pool2d(a, 3, output_size=(5, 4), _random_samples=s2.to(a.device)).sum()
                + F.fractional_max_pool3d(b, 2, output_size=(4, 5, 3), _random_samples=s3.to(b.device)).sum())
    before = set(metrics.executed_fallback_ops())
    check_grad(f, x2, x3)
    assert not set(metrics.executed_fallback_ops()) - before


def test_samples_drawn_on_device():
    torch.manual_seed(3)
    x = torch.randn(2, 3, 10, 10)
    before = set(metrics.executed_fallback_ops())
    out, idx = F.fractional_max_pool2d(x.to(lazyxla.device()), 3, output_ratio=(0.5, 0.5),
                                       return_indices=True)
    lazyxla.sync()
    out, idx = out.cpu(), idx.cpu()
    assert not set(metrics.executed_fallback_ops()) - before
    assert out.shape == idx.shape == (2, 3, 5, 5)
    # every output is the input at its index; the last window of each row and column ends at the
    # input's edge, and windows start in order
    assert torch.equal(out, x.flatten(2).gather(2, idx.flatten(2)).view_as(out))
    rows, cols = idx // 10, idx % 10
    assert (rows[..., -1, :] >= 7).all() and (cols[..., :, -1] >= 7).all()
    assert (rows.amin(-1).diff(dim=-1) >= -2).all()


def test_empty_batch():
    x = torch.randn(0, 2, 5, 5)
    check(lambda a, b: _pool2d(a, b, 2, (3, 3)), x, torch.rand(0, 2, 2))
    check_grad(lambda a: F.fractional_max_pool2d(a, 2, output_size=3,
                                                 _random_samples=torch.zeros(0, 2, 2, device=a.device)), x)


@pytest.mark.parametrize("shape", [(2, 2), (1, 2, 3), (1, 3, 2)])
def test_sample_shape_errors(shape):
    x = torch.randn(1, 2, 5, 5)
    with pytest.raises(RuntimeError):
        _pool2d(x, torch.rand(*shape), 2, (3, 3))
    d = lazyxla.device()
    with pytest.raises(RuntimeError):
        _pool2d(x.to(d), torch.rand(*shape).to(d), 2, (3, 3))
