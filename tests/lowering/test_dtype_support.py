"""Dtypes eager's CPU kernels do not implement raise eager's error at the call (they computed:
XLA orders complex numbers, multiplies bools, takes the gelu of integers). Half and bfloat16 stay
allowed where the CPU lacks them: accelerators compute them; so does an integer histc, which
libraries pick off the CPU."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import lazyxla

C = torch.ones(2, 2, dtype=torch.complex64)
B = torch.tensor([[True, False], [False, True]])
I = torch.arange(4).view(2, 2)
F32 = torch.ones(2, 2)

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
    # integer-only ops of floats (they raised JAX's TypeError when the program compiled)
    "bitwise_and_float": lambda d: F32.to(d) & F32.to(d),
    "bitwise_xor_float_int": lambda d: torch.bitwise_xor(F32.to(d), I.to(d)),
    "lshift_float": lambda d: F32.to(d) << 1,
    "rshift_float": lambda d: torch.bitwise_right_shift(F32.to(d), F32.to(d)),
    "gcd_float": lambda d: torch.gcd(F32.to(d), F32.to(d)),
    "lcm_double": lambda d: torch.lcm(F32.double().to(d), F32.double().to(d)),
    # a gap float32 shares is no half-only gap of the CPU's: not allowed for half either
    "bitwise_and_half": lambda d: F32.half().to(d) & F32.half().to(d),
    "lshift_bfloat16": lambda d: F32.bfloat16().to(d) << 1,
}



def _of(dtype, *shape):
    return lambda d: torch.ones(*shape, dtype=dtype, device=d)


L, BO, CF = torch.long, torch.bool, torch.complex64
# ops whose kernels need shapes that agree: probed on zeros of the call's own shapes
REJECTED.update({
    "conv2d_bool": lambda d: F.conv2d(_of(BO, 1, 1, 4, 4)(d), _of(BO, 1, 1, 2, 2)(d)),
    "avg_pool2d_bool": lambda d: F.avg_pool2d(_of(BO, 1, 1, 4, 4)(d), 2),
    "adaptive_avg_pool2d_long": lambda d: F.adaptive_avg_pool2d(_of(L, 1, 1, 4, 4)(d), 2),
    "hardswish_long": lambda d: F.hardswish(_of(L, 4)(d)),
    "glu_long": lambda d: F.glu(_of(L, 4)(d)),
    "logsigmoid_long": lambda d: F.logsigmoid(_of(L, 4)(d)),
    "batch_norm_complex": lambda d: F.batch_norm(_of(CF, 2, 3)(d), None, None, training=True),
    "mse_loss_complex": lambda d: F.mse_loss(_of(CF, 4)(d), _of(CF, 4)(d)),
    "mse_loss_complex_target": lambda d: F.mse_loss(_of(torch.float32, 4)(d), _of(CF, 4)(d)),
    "nll_loss_long_input": lambda d: F.nll_loss(_of(L, 3, 4)(d), torch.zeros(3, dtype=L, device=d)),
    "grid_sample_long": lambda d: F.grid_sample(_of(L, 1, 1, 4, 4)(d), _of(L, 1, 2, 2, 2)(d),
                                                align_corners=False),
    "topk_bool_k2": lambda d: torch.topk(_of(BO, 4)(d), 2),
    "kthvalue_complex_k2": lambda d: torch.kthvalue(_of(CF, 4)(d), 2),
    "histc_bool": lambda d: torch.histc(_of(BO, 4)(d)),  # (integers: CUDA's, test_histogram.py)
    "cumsum_to_bool": lambda d: torch.cumsum(_of(BO, 4)(d), 0, dtype=BO),
    "cumprod_of_floats_to_bool": lambda d: torch.cumprod(_of(torch.float32, 4)(d), 0, dtype=BO),
    "signbit_complex": lambda d: torch.signbit(_of(CF, 4)(d)),
    "layer_norm_long": lambda d: F.layer_norm(_of(L, 2, 3)(d), (3,)),
    "batch_norm_eval_bool": lambda d: F.batch_norm(_of(BO, 2, 3)(d), _of(BO, 3)(d), _of(BO, 3)(d)),
    "batch_norm_running_stats_long": lambda d: F.batch_norm(_of(L, 2, 3)(d), _of(L, 3)(d),
                                                            _of(L, 3)(d), training=True),
    "logcumsumexp_long": lambda d: torch.logcumsumexp(_of(L, 3)(d), 0),
    "lu_factor_long": lambda d: torch.linalg.lu_factor(_of(L, 3, 3)(d)),
    "soft_margin_loss_long": lambda d: F.soft_margin_loss(_of(L, 4)(d), _of(L, 4)(d)),
    "bce_with_logits_bool": lambda d: F.binary_cross_entropy_with_logits(_of(BO, 3)(d), _of(BO, 3)(d)),
    "cross_bool": lambda d: torch.linalg.cross(_of(BO, 3)(d), _of(BO, 3)(d)),
    "complex_of_longs": lambda d: torch.complex(_of(L, 3)(d), _of(L, 3)(d)),
    # decomposed ops (no lowering of their own): checked once per signature too
    "floor_divide_complex": lambda d: torch.floor_divide(_of(CF, 3)(d), 2),
    "unfold_long": lambda d: F.unfold(_of(L, 1, 1, 4, 4)(d), 2),
    # out= tensors of a dtype the kernel does not write (PyTorch's meta kernels cast to any)
    "clamp_out_double": lambda d: torch.clamp(F32.to(d), 0, 1, out=_of(torch.float64, 2, 2)(d)),
    "round_out_half": lambda d: torch.round(F32.to(d), out=_of(torch.float16, 2, 2)(d)),
    "neg_out_long": lambda d: torch.neg(F32.to(d), out=_of(L, 2, 2)(d)),
    "lerp_out_of_halves_float": lambda d: torch.lerp(F32.half().to(d), F32.half().to(d),
                                                     F32.half().to(d), out=_of(torch.float32, 2, 2)(d)),
    "nan_to_num_out_half": lambda d: torch.nan_to_num(I.to(d), out=_of(torch.float16, 2, 2)(d)),
    "amax_out_double": lambda d: torch.amax(F32.to(d), 0, out=_of(torch.float64, 2)(d)),
    "heaviside_out_half": lambda d: torch.heaviside(F32.to(d), F32.to(d), out=_of(torch.float16, 2, 2)(d)),
    # inputs whose dtypes must agree or convert
    "index_fill_complex_0dim_value": lambda d: I.to(d).index_fill(0, torch.tensor([0], device=d),
                                                                  torch.tensor(1j, device=d)),
    "cross_byte_bool": lambda d: torch.linalg.cross(_of(torch.uint8, 2, 3)(d), _of(BO, 2, 3)(d)),
    "cross_float_double": lambda d: torch.cross(_of(torch.float32, 2, 3)(d),
                                                _of(torch.float64, 2, 3)(d), dim=1),
    "lerp_int8_int32": lambda d: torch.lerp(_of(torch.int8, 3)(d), _of(torch.int32, 3)(d), 0.5),
    "lerp_out_int8_int32_double": lambda d: torch.lerp(_of(torch.int8, 3)(d), _of(torch.int32, 3)(d),
                                                       _of(torch.float64, 3)(d), out=_of(L, 3)(d)),
    "lerp_int64_half_weight": lambda d: torch.lerp(_of(L, 3)(d), _of(L, 3)(d), _of(torch.half, 3)(d)),
    # index tensors of a dtype the kernel does not take (computed, or JAX's TypeError at sync)
    "index_add_int8_index": lambda d: F32.to(d).index_add(0, torch.tensor([0], dtype=torch.int8, device=d),
                                                           F32[:1].to(d)),
    "index_fill_int32_index": lambda d: F32.to(d).index_fill(0, torch.tensor([0], dtype=torch.int32, device=d), 1.0),
    "index_copy_bool_index": lambda d: F32.to(d).index_copy(0, torch.tensor([True], device=d), F32[:1].to(d)),
    "put_int32_index": lambda d: F32.to(d).put(torch.tensor([0], dtype=torch.int32, device=d), F32[0, :1].to(d)),
    "index_reduce_float_index": lambda d: F32.to(d).index_reduce(0, torch.tensor([0.0], device=d),
                                                                  F32[:1].to(d), "prod"),
    # random ops never run on stand-ins: their own checks
    "geometric_bool": lambda d: _of(BO, 3)(d).geometric_(0.5),
    "geometric_complex": lambda d: _of(CF, 3)(d).geometric_(0.5),
    "log_normal_long": lambda d: _of(L, 3)(d).log_normal_(),
    # promotions eager refuses: uint16/32/64 with another dtype, float8 with another dtype (the
    # meta kernels promote them: `u16 + i64` wrapped around in uint16)
    "uint16_add_int64": lambda d: _of(torch.uint16, 3)(d) + _of(L, 3)(d),
    "uint32_mul_int32": lambda d: _of(torch.uint32, 3)(d) * _of(torch.int32, 3)(d),
    "uint16_add_uint32": lambda d: _of(torch.uint16, 3)(d) + _of(torch.uint32, 3)(d),
    "uint64_eq_int64": lambda d: _of(torch.uint64, 3)(d) == _of(L, 3)(d),
    "uint16_add_int64_in_place": lambda d: _of(torch.uint16, 3)(d).add_(_of(L, 3)(d)),
    "uint16_cat_int32": lambda d: torch.cat([_of(torch.uint16, 3)(d), _of(torch.int32, 3)(d)]),
    "float8_add_float": lambda d: _of(torch.float8_e4m3fn, 3)(d) + _of(torch.float32, 3)(d),
    "float8_cat_float": lambda d: torch.cat([_of(torch.float8_e5m2, 3)(d), _of(torch.float32, 3)(d)]),
    # no random kernel draws float8 values
    **{f"float8_{name}": fn for name, fn in {
        "rand": lambda d: torch.rand(3, dtype=torch.float8_e4m3fn, device=d),
        "randn": lambda d: torch.randn(3, dtype=torch.float8_e5m2, device=d),
        "uniform_": lambda d: _of(torch.float8_e4m3fn, 3)(d).uniform_(),
        "normal_": lambda d: _of(torch.float8_e4m3fnuz, 3)(d).normal_(),
        "bernoulli_": lambda d: _of(torch.float8_e4m3fn, 3)(d).bernoulli_(0.5),
        "random_": lambda d: _of(torch.float8_e4m3fn, 3)(d).random_(),
        "random_to": lambda d: _of(torch.float8_e4m3fn, 3)(d).random_(0, 3),
        "exponential_": lambda d: _of(torch.float8_e5m2fnuz, 3)(d).exponential_(),
        "cauchy_": lambda d: _of(torch.float8_e4m3fn, 3)(d).cauchy_(),
        "log_normal_": lambda d: _of(torch.float8_e4m3fn, 3)(d).log_normal_(),
        "geometric_": lambda d: _of(torch.float8_e4m3fn, 3)(d).geometric_(0.5),
        "multinomial": lambda d: torch.multinomial(_of(torch.float8_e4m3fn, 3)(d), 1),
        "randint": lambda d: torch.randint(0, 3, (3,), dtype=torch.float8_e4m3fn, device=d),
        "randperm": lambda d: torch.randperm(3, dtype=torch.float8_e4m3fn, device=d),
    }.items()},
})


@pytest.mark.parametrize("fn", REJECTED.values(), ids=REJECTED.keys())
def test_a_dtype_eager_rejects_raises_eagers_error_at_the_call(fn):
    with pytest.raises((NotImplementedError, RuntimeError, IndexError)) as eager:
        fn("cpu")
    with pytest.raises(type(eager.value)) as lazy:
        fn(lazyxla.device())  # at the call: no read needed
    assert type(lazy.value) is type(eager.value)
    assert str(lazy.value).split("\n")[0] == str(eager.value).split("\n")[0]


def test_dtypes_eager_supports_are_unaffected():
    d = lazyxla.device()
    out = _of(torch.float64, 2, 2)(d)  # an out= tensor eager's add casts into
    torch.testing.assert_close(torch.add(F32.to(d), 1, out=out).cpu(), F32.double() + 1)
    for fn in (lambda x: (x * 2 + 1j) * x.conj(), lambda x: x.abs() + x.real):
        torch.testing.assert_close(fn(C.to(d)).cpu(), fn(C))
    torch.testing.assert_close((B.to(d) & ~B.to(d)).cpu(), B & ~B)
    torch.testing.assert_close((I.to(d) // 2 - I.to(d)).cpu(), I // 2 - I)
    torch.testing.assert_close(torch.where(B.to(d), I.to(d), -I.to(d)).cpu(), torch.where(B, I, -I))


def test_shaped_probes_leave_float_inputs_and_integer_targets_alone():
    d = lazyxla.device()
    x, t = torch.randn(3, 4), torch.tensor([0, 3, 1])
    torch.testing.assert_close(F.cross_entropy(x.to(d), t.to(d)).cpu(), F.cross_entropy(x, t))
    w = torch.randn(2, 1, 2, 2)
    got = F.conv2d(x.view(1, 1, 3, 4).to(d), w.to(d)).cpu()
    torch.testing.assert_close(got, F.conv2d(x.view(1, 1, 3, 4), w))
    torch.testing.assert_close(torch.topk(I.to(d).flatten(), 2).values.cpu(), torch.topk(I.flatten(), 2).values)


def test_a_shaped_call_above_the_limit_is_not_probed(monkeypatch):
    from lazyxla.lowering import dtype_support
    x = torch.ones(1, 1, 2, 2, dtype=torch.bool).to(lazyxla.device())
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        F.avg_pool2d(x, 2)
    monkeypatch.setattr(dtype_support, "_SHAPED_LIMIT", 3)  # (the probe would allocate them)
    assert F.avg_pool2d(x, 2).cpu().tolist() == [[[[True]]]]  # computed, as the README says


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


@pytest.mark.parametrize("name, fn", [
    ("rsub_bool_tensor", lambda d: torch.rsub(I.to(d), torch.tensor(True, device=d))),
    ("addmm_activation_bool", lambda d: torch._addmm_activation(B[0].to(d), B.to(d), B.to(d))),
    ("weight_norm_complex", lambda d: torch._weight_norm(C.to(d), C[:, :1].to(d))),
    ("weight_norm_int", lambda d: torch._weight_norm(I.to(d), I[:, :1].to(d))),
    ("arange_bool", lambda d: torch.arange(0, 3, dtype=torch.bool, device=d)),
    ("arange_complex", lambda d: torch.arange(3, dtype=torch.complex64, device=d)),
    ("tril_indices_int8", lambda d: torch.tril_indices(3, 3, dtype=torch.int8, device=d)),
    ("triu_indices_float", lambda d: torch.triu_indices(3, 3, dtype=torch.float32, device=d)),
])
def test_ops_without_a_pointwise_tag_reject_dtypes_as_eager(name, fn):
    """Ops PyTorch tags neither pointwise nor reduction were not probed (rsub.Tensor,
    _addmm_activation, _weight_norm_interface), and factories took dtypes eager's kernels lack or
    raised the meta kernel's RuntimeError where eager raises NotImplementedError."""
    with pytest.raises((RuntimeError, NotImplementedError)) as want:
        fn("cpu")
    with pytest.raises(type(want.value)) as got:
        fn(lazyxla.device())
    assert str(got.value) == str(want.value)


HALVES = torch.ones(2, dtype=torch.half)
COMPLEX32_MAKERS = {
    "half * 1j": lambda h: h * 1j,
    "to(complex32)": lambda h: h.to(torch.complex32),
    "polar": lambda h: torch.polar(h, h),
    "complex": lambda h: torch.complex(h, h),
}


@pytest.mark.parametrize("name", COMPLEX32_MAKERS)
def test_a_complex32_result_raises_at_the_call(name):
    with pytest.raises(RuntimeError, match="^lazyxla does not support dtype torch.complex32$"):
        COMPLEX32_MAKERS[name](HALVES.to("lazyxla"))


def test_a_quantized_result_of_the_cpu_fallback_raises_instead_of_staying_on_the_cpu():
    with pytest.raises(RuntimeError, match="quantize_per_tensor makes a tensor of dtype torch.quint8"):
        torch.quantize_per_tensor(torch.ones(2, device="lazyxla"), 0.1, 0, torch.quint8)
