"""Tensors with no elements: eager's results (empty, or the reduction's identity) and errors."""
import math

import pytest
import torch
import torch.nn.functional as F

import lazyxla

D = lazyxla.device()


def _idx(d, *v):
    return torch.tensor(v, device=d)


# name -> fn(device): each on a tensor with a zero-size dim
SAME_AS_EAGER = {
    "renorm_rows_of_nothing": lambda d: torch.zeros(3, 0, device=d).renorm(2, 0, 1.0),
    "renorm_of_no_rows": lambda d: torch.zeros(0, 3, device=d).renorm(2, 1, 1.0),
    "cdist_inf_over_no_coordinates": lambda d: torch.cdist(torch.zeros(3, 0, device=d), torch.zeros(2, 0, device=d), math.inf),
    "conv1d_of_no_input_channels": lambda d: F.conv1d(torch.zeros(2, 0, 3, device=d), torch.ones(2, 0, 1, device=d)),
    "sum_over_nothing": lambda d: torch.zeros(2, 0, device=d).sum(1),
    "prod_over_nothing": lambda d: torch.zeros(2, 0, device=d).prod(1),
    "logsumexp_over_nothing": lambda d: torch.zeros(2, 0, device=d).logsumexp(1),
    "norm_inf_of_empty_rows": lambda d: torch.linalg.vector_norm(torch.zeros(3, 0, device=d), math.inf, 0),
    "mean_over_nothing": lambda d: torch.zeros(2, 0, device=d).mean(1),
    "cat_legacy_empty_1d": lambda d: torch.cat([torch.zeros(0, device=d), torch.ones(2, 3, device=d)]),
    "matmul_inner_zero": lambda d: torch.zeros(3, 0, device=d) @ torch.zeros(0, 2, device=d),
    "round_decimals_of_empty": lambda d: torch.zeros(0, 2, device=d).round(decimals=2),
    # eager's index kernels copy no element of an empty tensor, so check no index
    "index_out_of_range_into_empty_rows": lambda d: torch.zeros(3, 0, device=d)[_idx(d, 5)],
    "index_out_of_range_of_no_rows": lambda d: torch.zeros(0, 3, device=d)[:, _idx(d, 5)],
    "index_put_out_of_range_into_empty_rows": lambda d: torch.zeros(3, 0, device=d).index_put_(
        (_idx(d, 5),), torch.tensor(1.0, device=d)),
    "index_add_out_of_range_into_empty_rows": lambda d: torch.zeros(3, 0, device=d).index_add(
        0, _idx(d, 5), torch.zeros(1, 0, device=d)),
    "index_copy_out_of_range_into_empty_rows": lambda d: torch.zeros(3, 0, device=d).index_copy(
        0, _idx(d, 5), torch.zeros(1, 0, device=d)),
    "index_fill_out_of_range_into_empty_rows": lambda d: torch.zeros(3, 0, device=d).index_fill(0, _idx(d, 5), 1.0),
}


@pytest.mark.parametrize("fn", SAME_AS_EAGER.values(), ids=SAME_AS_EAGER.keys())
def test_empty_tensors_as_eager(fn):
    expected = fn("cpu")
    actual = fn(D).cpu()
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, equal_nan=True)


RAISE_AS_EAGER = {
    "amax_over_nothing": lambda d: torch.zeros(2, 0, device=d).amax(1),
    "argmax_over_nothing": lambda d: torch.zeros(2, 0, device=d).argmax(1),
    "amax_over_nothing_all": lambda d: torch.zeros(0, 3, device=d).amax(),
    "index_out_of_range_of_nonempty": lambda d: torch.zeros(3, 2, device=d)[_idx(d, 5)],
    "index_into_a_zero_size_dim": lambda d: torch.zeros(3, 0, device=d)[:, _idx(d, 0)],
}


@pytest.mark.parametrize("fn", RAISE_AS_EAGER.values(), ids=RAISE_AS_EAGER.keys())
def test_empty_tensor_errors_as_eager(fn):
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value)):
        fn(D).cpu()
