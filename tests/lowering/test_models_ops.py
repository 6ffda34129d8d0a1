"""Differential tests of lazyxla/lowering/models.py."""
import pytest
import torch

from lazyxla.testing import check


@pytest.mark.parametrize("invert", [False, True])
def test_isin_tensor_tensor(invert):
    x = torch.tensor([[3, 0, 7, 1], [0, 5, 5, 2]])
    check(lambda a, b: torch.isin(a, b, invert=invert), x, torch.tensor([0, 5]))
    check(lambda a, b: torch.isin(a, b, invert=invert), x, torch.tensor([[1], [7]]))
    check(lambda a, b: torch.isin(a, b, invert=invert), x.float(), torch.tensor(5.0))


@pytest.mark.parametrize("invert", [False, True])
def test_isin_scalars(invert):
    x = torch.tensor([[3, 0, 7, 1], [0, 5, 5, 2]])
    check(lambda a: torch.isin(a, 5, invert=invert), x)
    check(lambda b: torch.isin(5, b, invert=invert), x)
    check(lambda b: torch.isin(4, b, invert=invert), x)


def test_isin_out_and_any():
    # what transformers' generation does: torch.isin(input_ids, pad_token_id).any()
    x = torch.tensor([[3, 0, 7], [1, 2, 9]])
    check(lambda a, b: torch.isin(a, b).any(), x, torch.tensor(0))
    check(lambda a, b: torch.isin(a, b, out=torch.empty(a.shape, dtype=torch.bool, device=a.device)),
          x, torch.tensor([9, 3]))
