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


def test_isin_compares_in_the_dtype_pytorch_promotes_to():
    """eager casts both to result_type(elements, test_elements): a 0-d int64 300 against int8
    elements is 44, -5 against uint8 ones 251; a 1-d int64 test set promotes the elements."""
    i8, u8 = torch.tensor([44, -1, 127, -128], dtype=torch.int8), torch.tensor([0, 44, 255, 251], dtype=torch.uint8)
    for x in (i8, u8, torch.tensor([50.5, 2048.0, -3.0], dtype=torch.float16)):
        for v in (300, -5, 256, 2049, 50.5):
            check(lambda x, t: torch.isin(x, t), x, torch.tensor(v))
            check(lambda x, t: torch.isin(x, t), x, torch.tensor([v, 1]))
            check(lambda x: torch.isin(x, v), x)
