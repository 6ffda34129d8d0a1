"""Runtime scalar arguments (norm orders, fill values, lambdas, exponents) are keyed by type, not
value: the meta kernel's checks run for the first value only. A value eager rejects, after one it
accepts, must still raise eager's error at the call (lazyxla/lowering/value_checks.py)."""
import math

import pytest
import torch
import torch.nn.functional as F

import lazyxla

D = lazyxla.device()
X = torch.tensor([[0.5, -1.25, 2.0], [-0.75, 1.5, -3.0]])
I8 = torch.tensor([[3, -4], [5, 6]], dtype=torch.int8)
EMPTY = torch.zeros(0, 3)

# name -> (fn(device, value), a value eager accepts, values eager rejects)
CASES = {
    "renorm_p": (lambda d, v: X.to(d).renorm(v, 0, 1.0), 2, [0, -1, math.nan]),
    "renorm_maxnorm": (lambda d, v: X.to(d).renorm(2, 0, v), 1.0, [-1.0, math.nan]),
    "renorm__p": (lambda d, v: X.clone().to(d).renorm_(v, 1, 1.0), 1, [-2]),
    "softshrink_lambda": (lambda d, v: F.softshrink(X.to(d), v), 0.5, [-1.0, math.inf, math.nan]),
    "vector_norm_of_empty": (lambda d, v: torch.linalg.vector_norm(EMPTY.to(d), v), 2.0, [-1.0, math.inf]),
    "vector_norm_of_empty_dim": (lambda d, v: torch.linalg.vector_norm(EMPTY.to(d), v, 0), 0.5, [-math.inf]),
    "norm_of_empty": (lambda d, v: torch.norm(EMPTY.to(d), v), 2, [-1, math.inf]),
    "foreach_norm_of_empty": (lambda d, v: torch._foreach_norm([EMPTY.to(d)], v)[0], 2.0, [math.inf, -1.0]),
    "pad_int8_value": (lambda d, v: F.pad(I8.to(d), (1, 1), value=v), 1, [300, -200]),
    "pad_long_value": (lambda d, v: F.pad(I8.long().to(d), (1, 1), value=v), 1.0, [math.nan, math.inf]),
    "scatter_int8_value": (lambda d, v: I8.to(d).scatter(0, torch.zeros(1, 2, dtype=torch.long, device=d), v), 1, [300]),
    "scatter_reduce_int8_value": (lambda d, v: I8.to(d).scatter(
        0, torch.zeros(1, 2, dtype=torch.long, device=d), v, reduce="add"), 1, [-300]),
    "scatter__int8_value": (lambda d, v: I8.clone().to(d).scatter_(1, torch.ones(2, 1, dtype=torch.long, device=d), v), 2, [1000]),
    "foreach_pow_int_negative": (lambda d, v: torch._foreach_pow([I8.long().to(d)], v)[0], 2, [-1]),
    "foreach_pow_int_negative_list": (lambda d, v: torch._foreach_pow(
        [I8.long().to(d), X.to(d)], [v, -1.0])[0], 2, [-3]),
    "foreach_clamp_min_int8": (lambda d, v: torch._foreach_clamp_min([I8.to(d)], v)[0], 1, [300, -300]),
    "foreach_maximum__int8_list": (lambda d, v: torch._foreach_maximum_(
        [I8.clone().to(d), X.to(d)], [v, 1.0])[0], 2, [300]),
    "foreach_pow_int8": (lambda d, v: torch._foreach_pow([I8.to(d)], v)[0], 2, [300]),
    "foreach_addcmul_int8_value": (lambda d, v: torch._foreach_addcmul([I8.to(d)], [I8.to(d)], [I8.to(d)], v)[0],
                                   2, [300, 1e20, math.nan]),
    "index_add_int8_alpha": (lambda d, v: I8.to(d).index_add(0, torch.tensor([1], device=d), I8[:1].to(d), alpha=v),
                             2, [300]),
    "mvlgamma_p": (lambda d, v: torch.mvlgamma(X.abs().to(d) + 3, v), 2, [0, -1]),
    "mvlgamma__p": (lambda d, v: (X.abs() + 3).to(d).mvlgamma_(v), 1, [0]),
    "pow_int_negative": (lambda d, v: I8.to(d).pow(v), 2, [-1]),
    # pow_'s overload is pow_.Scalar, not pow_.Tensor_Scalar: it was left unchecked (zeros)
    "pow__int_negative": (lambda d, v: I8.clone().to(d).pow_(v), 2, [-1, -2]),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_rejected_value_after_an_accepted_one_raises_eagers_error(case):
    fn, good, bad = case
    torch.testing.assert_close(fn(D, good).cpu(), fn("cpu", good))
    for v in bad:
        with pytest.raises(RuntimeError) as cpu:
            fn("cpu", v)
        with pytest.raises(RuntimeError) as dev:
            fn(D, v)  # at the call: no .cpu()
        assert str(dev.value) == str(cpu.value), v


def test_accepted_values_stay_accepted():
    # an order without identity over a tensor with elements, a zero fill, a float exponent
    torch.testing.assert_close(torch.linalg.vector_norm(X.to(D), -1).cpu(), torch.linalg.vector_norm(X, -1))
    torch.testing.assert_close(torch.linalg.vector_norm(torch.zeros(3, 0).to(D), math.inf, 0).cpu(),
                               torch.zeros(0))
    torch.testing.assert_close(F.pad(I8.to(D), (1, 1), value=-128).cpu(), F.pad(I8, (1, 1), value=-128))
    torch.testing.assert_close(F.softshrink(X.to(D), 0.0).cpu(), F.softshrink(X, 0.0))
    torch.testing.assert_close(torch._foreach_pow([X.to(D)], -1)[0].cpu(), X ** -1)


def test_integer_tensors_take_a_float_scalar_truncated_as_eager():
    """eager converts addcmul's value and index_add's alpha to an integer tensor's dtype
    (1.5 -> 1); the _foreach_addcmul lowering used 1.5, and PyTorch's meta kernel refused a
    float alpha for index_add."""
    i = torch.tensor([0, 1])
    cases = [
        lambda d: torch._foreach_addcmul([I8.to(d)], [I8.to(d)], [I8.to(d)], 1.5)[0],
        lambda d: torch._foreach_addcdiv([X.to(d)], [X.to(d)], [X.to(d)], [-1.5])[0],
        lambda d: I8.to(d).index_add(0, i.to(d), I8.to(d), alpha=1.5),
        lambda d: I8.clone().to(d).index_add_(1, i.to(d), I8.to(d), alpha=-2.5),
    ]
    for fn in cases:
        expected = fn("cpu")
        actual = fn(D).cpu()
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected)


def test_meta_assertions_raise_eagers_runtime_error():
    """PyTorch's meta kernel for linalg.inv asserts; eager raises a RuntimeError."""
    for fn in (torch.linalg.inv, torch.linalg.det):
        with pytest.raises(RuntimeError, match="at least 2 dimensions"):
            fn(torch.tensor(1.5).to(D))
