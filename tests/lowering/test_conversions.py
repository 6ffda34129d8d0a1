"""Conversions and exact scalings whose values eager defines: floats to narrow integers wrap
through a wider integer (c10 converts to uint8 through int64), `ldexp` with an integer exponent
scales exactly, and float16's `pow` takes no sqrt shortcut. Lazy mode and torch.compile alike."""
import pytest
import torch

import lazyxla
import platform

D = lazyxla.device()

FLOATS = [-1.0, -2.5, 300.0, -129.0, 255.5, 70000.7, -70000.7, 127.9, -128.9, 65535.5, 0.5, -0.5,
          3000000007.0, -3000000007.0, 1e10, -1e10]
SPECIALS = [float("nan"), float("inf"), -float("inf")]


def _both(fn, *args):
    """fn's result in eager on the CPU, in lazy mode and under torch.compile."""
    on_device = [a.to(D) for a in args]
    compiled = torch.compile(fn, backend="lazyxla", dynamic=False)
    return fn(*args), fn(*on_device).cpu(), compiled(*on_device).cpu()


@pytest.mark.parametrize("source", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_floats_to_uint8_wrap_through_int64_as_c10_defines(source):
    # XLA saturates: -1.0 gave 0 and 300.0 gave 255; eager's 255 and 44 hold on every compiler
    x = torch.tensor(FLOATS + SPECIALS, dtype=torch.float64).to(source)
    eager, lazy, compiled = _both(lambda t: t.to(torch.uint8), x)
    assert lazy.tolist() == eager.tolist()
    assert compiled.tolist() == eager.tolist()


def test_image_scaled_past_its_range_converts_as_eager():
    img = torch.tensor([-0.01, 0.5, 1.02])
    assert ((img.to(D) * 255).to(torch.uint8)).cpu().tolist() == [254, 127, 4]
    assert torch.zeros(3, dtype=torch.uint8, device=D).copy_(img.to(D) * 255).cpu().tolist() == [254, 127, 4]


@pytest.mark.parametrize("target", [torch.int8, torch.int16, torch.uint16, torch.uint32])
def test_floats_to_other_narrow_integers_wrap_as_eagers_cpu_kernels(target):
    values = [v for v in FLOATS if target is not torch.uint32 or -2**31 < v < 2**32]
    x = torch.tensor(values + (SPECIALS if target is not torch.uint32 else []))
    eager, lazy, compiled = _both(lambda t: t.to(target), x)
    assert lazy.tolist() == eager.tolist()
    assert compiled.tolist() == eager.tolist()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86's conversion of NaN and out-of-range values")
@pytest.mark.parametrize("target", [torch.int32, torch.int64])
def test_nan_and_out_of_range_floats_give_the_least_integer_on_x86_as_eager(target):
    x = torch.tensor(SPECIALS + [1e10, -1e10, 1e30, 2.5, -2.5])
    eager, lazy, compiled = _both(lambda t: t.to(target), x)
    assert lazy.tolist() == eager.tolist()
    assert compiled.tolist() == eager.tolist()


@pytest.mark.parametrize("source", [torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2,
                                    torch.float8_e5m2fnuz])
@pytest.mark.parametrize("target", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_float8_to_integers_as_eager(source, target):
    # e4m3fn cannot hold the range's bounds (2**31 became NaN): every element read as outside,
    # -2**31 for int32, 0 for int8
    x = torch.tensor([0.0, 1.0, 2.5, -3.5, 100.0, -0.5, 7.0, -200.0]).to(source)
    eager, lazy, compiled = _both(lambda t: t.to(target), x)
    assert lazy.tolist() == eager.tolist()
    assert compiled.tolist() == eager.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_ldexp_with_an_integer_exponent_scales_exactly(dtype):
    # 2**e as a float is inf or 0 past the dtype's range: x * 2**e gave NaN for 0 * 2**128,
    # NaN for inf * 2**-150 and inf for 1e-30 * 2**128
    x = torch.tensor([0.0, float("inf"), 1e-30, 3.0, 1e-20, 1.5, float("nan"), -0.0, 3e38, -float("inf"), 5.0])
    e = torch.tensor([128, -150, 128, 2, 150, -30, 5, 300, -300, 10, 3000])
    eager, lazy, compiled = _both(torch.ldexp, x.to(dtype), e)
    assert lazy.dtype == eager.dtype == dtype
    torch.testing.assert_close(lazy, eager, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0, equal_nan=True)


def test_ldexp_of_other_operands_multiplies_by_a_power_of_two_as_eager():
    e = torch.tensor([3, -1, 200])
    for x, ex in ((torch.tensor([1, 2, 0]), e), (torch.tensor([1.5, -2.0, 0.0]), e.float() + 0.5)):
        eager, lazy, compiled = _both(torch.ldexp, x, ex)
        assert lazy.dtype == eager.dtype
        torch.testing.assert_close(lazy, eager, equal_nan=True)
        torch.testing.assert_close(compiled, eager, equal_nan=True)


def test_float16_powers_of_one_half_are_pows_not_square_roots():
    # eager's float16 kernel is the plain std::pow; float32's takes sqrt and rsqrt
    x = torch.tensor([-float("inf"), -0.0, 0.0, float("inf"), 4.0, -4.0, 0.3], dtype=torch.float16)
    for y in (0.5, -0.5):
        eager, lazy, compiled = _both(lambda t: t ** y, x)
        torch.testing.assert_close(lazy, eager, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(compiled, eager, rtol=0, atol=0, equal_nan=True)
        assert lazy.signbit().tolist() == eager.signbit().tolist()
    assert (x.float().to(D) ** 0.5).cpu()[0].isnan()  # float32's sqrt shortcut stays, as eager's


def test_ldexp_of_a_bool_exponent_raises_eagers_error():
    with pytest.raises(NotImplementedError, match="ldexp_cpu_exp"):
        torch.ldexp(torch.ones(2, device=D), torch.ones(2, dtype=torch.bool, device=D))


@pytest.mark.parametrize("source", [torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz,
                                    torch.float16, torch.bfloat16])
def test_every_narrow_float_to_float8_e4m3fn_as_eager(source):
    # the saturating clip ran in the source dtype: e4m3fnuz cannot hold 448, and every element
    # became NaN
    bits = torch.arange(2 ** (8 * source.itemsize), dtype=torch.int32)
    x = (bits.to(torch.uint8) if source.itemsize == 1 else bits.to(torch.int16)).view(source)
    keep = ~torch.isnan(x.float())  # (NaN's bit pattern is XLA's)
    eager, lazy, compiled = _both(lambda t: t.to(torch.float8_e4m3fn).view(torch.uint8), x)
    assert torch.equal(lazy[keep], eager[keep]) and torch.equal(compiled[keep], eager[keep])
