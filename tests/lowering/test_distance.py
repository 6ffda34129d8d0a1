"""cdist and pdist, forward and backward, lowered (they ran through the CPU fallback)."""
import pytest
import torch
import torch.nn.functional as F

from lazyxla import metrics
from lazyxla.testing import check, check_grad

torch.manual_seed(0)
A, B = torch.randn(2, 5, 3), torch.randn(2, 4, 3)
P = [0.0, 1.0, 1.5, 2.0, 3.0, float("inf")]


def _no_fallback(fn):
    before = set(metrics.executed_fallback_ops())
    fn()
    assert not set(metrics.executed_fallback_ops()) - before


@pytest.mark.parametrize("p", P)
def test_cdist(p):
    check(lambda a, b: torch.cdist(a, b, p=p), A, B, atol=1e-5, rtol=1e-5)
    _no_fallback(lambda: check_grad(lambda a, b: torch.cdist(a, b, p=p), A, B, atol=1e-4, rtol=1e-4))


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist",
                                  "use_mm_for_euclid_dist_if_necessary"])
def test_cdist_euclidean_methods_as_eager(mode):
    big1, big2 = torch.randn(30, 3), torch.randn(27, 3)  # > 25 rows: the matrix-product method
    check(lambda a, b: torch.cdist(a, b, compute_mode=mode), big1, big2, atol=1e-5, rtol=1e-5)
    check_grad(lambda a, b: torch.cdist(a, b, compute_mode=mode), big1, big2, atol=1e-4, rtol=1e-4)


def test_cdist_broadcast_batch_and_zero_distance():
    check_grad(torch.cdist, torch.randn(1, 5, 3), torch.randn(3, 4, 3), atol=1e-4, rtol=1e-4)
    check_grad(lambda a: torch.cdist(a, a.detach().clone()), A, atol=1e-4, rtol=1e-4)  # 0 there


def test_cdist_grad_of_an_empty_batch_has_each_inputs_shape():
    """x1 (0, 4, 5) against x2 (3, 5): PyTorch's backward kernel gives zeros of x2's own shape
    for x2's gradient (the lowering gave the broadcast (0, 3, 5) and failed)."""
    check_grad(lambda a, b: torch.cdist(a, b, p=0.0), torch.randn(0, 4, 5), torch.randn(3, 5))
    check_grad(lambda a, b: torch.cdist(a, b), torch.randn(2, 0, 5), torch.randn(3, 5))


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0, float("inf")])
def test_pdist(p):
    x = torch.randn(5, 3)
    check(lambda t: F.pdist(t, p), x, atol=1e-5, rtol=1e-5)
    _no_fallback(lambda: check_grad(lambda t: F.pdist(t, p), x, atol=1e-4, rtol=1e-4))
