import torch

from lazyxla.testing import check, check_grad


def test_arith_chain():
    check(lambda x, y: (x * 2 + y).relu() - y / 3, torch.randn(3, 4), torch.randn(3, 4))


def test_grad_of_mul_exp():
    check_grad(lambda x: (x * x).exp(), torch.randn(5))
