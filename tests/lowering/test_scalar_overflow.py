"""A Python number that an op converts to its result's dtype must fit it, as in eager: eager
raises "value cannot be converted to type int8_t without overflow" at the call. Scalar arguments
are runtime values keyed by type, so a value that overflows, after one that fits, is checked by
value (lazyxla/lowering/value_checks.py); it used to wrap (int8 300 -> 44)."""
import pytest
import torch

import lazyxla

D = lazyxla.device()


def _t(dtype):
    return torch.tensor([0, 1, 2, 3]).to(dtype)


# name -> (fn(x, v), the dtype of x, a value eager accepts, values eager rejects)
CASES = {
    "add_int8_alpha": (lambda x, v: torch.add(x, x, alpha=v), torch.int8, 100, [300, -200]),
    "sub_uint8_alpha": (lambda x, v: torch.sub(x, x, alpha=v), torch.uint8, 200, [300, 70000]),
    "add__int16_alpha": (lambda x, v: x.clone().add_(x, alpha=v), torch.int16, -300, [70000]),
    "add_scalar_int8_alpha": (lambda x, v: torch.ops.aten.add.Scalar(x, 2, alpha=v), torch.int8, 3, [128]),
    "add_int32_alpha": (lambda x, v: torch.add(x, x, alpha=v), torch.int32, 2 ** 20, [2 ** 40]),
    "add_float16_alpha": (lambda x, v: torch.add(x, x, alpha=v), torch.float16, 2, [70000, 1e10]),
    "add_int8_float_alpha": (lambda x, v: torch.add(x, x, alpha=v), torch.int8, 2, [1.5]),
    "add_float32_bool_alpha": (lambda x, v: torch.add(x, x, alpha=v), torch.float32, 2.5, [True]),
    "addcmul_int8_value": (lambda x, v: torch.addcmul(x, x, x, value=v), torch.int8, 100, [300, -200, 1e10]),
    "addcmul__uint8_value": (lambda x, v: x.clone().addcmul_(x, x, value=v), torch.uint8, 7, [256]),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_value_the_result_cannot_hold_raises_eagers_error_after_one_it_can(case):
    fn, dtype, good, bad = case
    x = _t(dtype)
    torch.testing.assert_close(fn(x.to(D), good).cpu(), fn(x, good))
    for v in bad:
        with pytest.raises(RuntimeError) as cpu:
            fn(x, v)
        with pytest.raises(RuntimeError) as dev:
            fn(x.to(D), v)  # at the call: no .cpu()
        assert str(dev.value) == str(cpu.value), v


@pytest.mark.parametrize("fn", [
    lambda x, v: torch.add(x, x, alpha=v),
    lambda x, v: torch.addcmul(x, x, x, value=v),
], ids=["add_alpha", "addcmul_value"])
def test_values_eager_accepts_stay_accepted(fn):
    """A uint8 takes negatives down to -255 wrapped, a bool result any int, float16 addcmul a
    value past its range (computed in float: inf), as eager does."""
    for dtype, v in ((torch.uint8, -200), (torch.bool, 300), (torch.int64, 2 ** 40),
                     (torch.float32, 1e30)):
        try:
            want = fn(_t(dtype), v)
        except (RuntimeError, NotImplementedError):  # (addcmul of bools: eager has no kernel)
            continue
        torch.testing.assert_close(fn(_t(dtype).to(D), v).cpu(), want)
    x16 = _t(torch.float16)
    torch.testing.assert_close(torch.addcmul(x16.to(D), x16.to(D), x16.to(D), value=70000).cpu(),
                               torch.addcmul(x16, x16, x16, value=70000))


@pytest.mark.parametrize("call", [
    lambda x: x == 2 ** 64 - 1,
    lambda x: x.clone().fill_(2 ** 63),
    lambda x: x & (2 ** 64 - 1),
    lambda x: torch.full((2,), 2 ** 64 - 1, dtype=torch.uint64, device=x.device),
    lambda x: x.long() + 2 ** 63,
], ids=["eq", "fill_", "and", "full", "add"])
def test_a_python_int_past_int64_raises_at_the_call_not_at_a_later_read(call):
    # lazyxla passes integer scalars as int64: the conversion failed when the program ran
    x = torch.tensor([1, 2]).to(torch.uint64).to(lazyxla.device())
    with pytest.raises(OverflowError, match="does not fit in int64"):
        call(x)
    assert (x.long() + 1).cpu().tolist() == [2, 3]  # nothing pending was left broken
