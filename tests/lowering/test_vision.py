import pytest
import torch
import torch.nn.functional as F

from lazyxla import metrics
from lazyxla.testing import check, check_grad

torch.manual_seed(0)
X2, G2 = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 7, 2) * 2.6 - 1.3  # some points outside
X3, G3 = torch.randn(1, 2, 3, 4, 5), torch.rand(1, 2, 3, 4, 3) * 2.6 - 1.3


def _grad_native(fn, *args):
    before = set(metrics.executed_fallback_ops())
    check_grad(fn, *args, atol=1e-4, rtol=1e-4)
    assert not set(metrics.executed_fallback_ops()) - before


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
def test_grid_sample_2d(mode, pad):
    for ac in (False, True):
        f = lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=pad, align_corners=ac)  # noqa: E731
        check(f, X2, G2)
        _grad_native(f, X2, G2)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
def test_grid_sample_3d(mode, pad):
    f = lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=pad, align_corners=pad == "border")  # noqa: E731
    check(f, X3, G3)
    _grad_native(f, X3, G3)


def test_affine_grid_then_sample():
    theta = torch.tensor([[[0.9, 0.2, 0.1], [-0.1, 1.1, 0.0]]]).repeat(2, 1, 1)
    check(lambda x, t: F.grid_sample(x, F.affine_grid(t, (2, 3, 4, 5), align_corners=False),
                                     align_corners=False), X2, theta)
