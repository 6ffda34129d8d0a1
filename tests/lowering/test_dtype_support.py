"""Dtypes eager's CPU kernels do not implement raise eager's error at the call (they computed:
XLA orders complex numbers, multiplies bools, takes the gelu of integers). Half and bfloat16 stay
allowed where the CPU lacks them: accelerators compute them."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import lazyxla

C = torch.ones(2, 2, dtype=torch.complex64)
B = torch.tensor([[True, False], [False, True]])
I = torch.arange(4).view(2, 2)

REJECTED = {
    "lt_complex": lambda d: C.to(d) < 1,
    "maximum_complex": lambda d: torch.maximum(C.to(d), C.to(d)),
    "sort_complex": lambda d: torch.sort(C.to(d)),
    "clamp_complex": lambda d: torch.clamp(C.to(d), 0, 1),
    "argmax_complex": lambda d: torch.argmax(C.to(d)),
    "floor_complex": lambda d: C.to(d).floor(),
    "sub_bool": lambda d: torch.ones(2, device=d) - B[0].to(d),
    "rsub_bool": lambda d: torch.rsub(B.to(d), 1),
    "abs_bool": lambda d: B.to(d).abs(),
    "mm_bool": lambda d: B.to(d) @ B.to(d),
    "pow_bool": lambda d: B.to(d) ** B.to(d),
    "gelu_int": lambda d: F.gelu(I.to(d)),
    "hypot_int": lambda d: torch.hypot(I.to(d), I.to(d)),
}


@pytest.mark.parametrize("fn", REJECTED.values(), ids=REJECTED.keys())
def test_a_dtype_eager_rejects_raises_eagers_error_at_the_call(fn):
    with pytest.raises((NotImplementedError, RuntimeError)) as eager:
        fn("cpu")
    with pytest.raises(type(eager.value)) as lazy:
        fn(lazyxla.device())  # at the call: no read needed
    assert type(lazy.value) is type(eager.value)
    assert str(lazy.value).split("\n")[0] == str(eager.value).split("\n")[0]


def test_dtypes_eager_supports_are_unaffected():
    d = lazyxla.device()
    for fn in (lambda x: (x * 2 + 1j) * x.conj(), lambda x: x.abs() + x.real):
        torch.testing.assert_close(fn(C.to(d)).cpu(), fn(C))
    torch.testing.assert_close((B.to(d) & ~B.to(d)).cpu(), B & ~B)
    torch.testing.assert_close((I.to(d) // 2 - I.to(d)).cpu(), I // 2 - I)
    torch.testing.assert_close(torch.where(B.to(d), I.to(d), -I.to(d)).cpu(), torch.where(B, I, -I))


def test_half_and_bfloat16_stay_allowed_where_the_cpu_lacks_them():
    x = torch.full((2, 3), 0.5, dtype=torch.bfloat16)
    try:  # eager's CPU kernel may or may not implement it; lazyxla computes it either way
        torch.special.erfcx(x)
    except (NotImplementedError, RuntimeError):
        pass
    got = torch.special.erfcx(x.to(lazyxla.device())).cpu()
    torch.testing.assert_close(got, torch.special.erfcx(x.float()).bfloat16(), atol=1e-2, rtol=1e-2)


def test_the_probe_draws_nothing_from_the_cpu_generator_and_warns_nothing():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (I.to(lazyxla.device()) * 3 + 1).cpu()
        torch.bernoulli(torch.full((3,), 0.5, device=lazyxla.device())).cpu()
    torch.testing.assert_close(torch.rand(3), expected)
