"""float16 / bfloat16 follow eager CPU's kernels: where they accumulate (float32 "opmath" or the
dtype itself) and where they round intermediates back to the dtype. Results agree with eager
within the default float16 / bfloat16 tolerances (one rounding step apart fails them)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla.lowering.exact_arith import rounder
from lazyxla.testing import check, check_grad, to_cpu

LOW = [torch.float16, torch.bfloat16]
torch.manual_seed(0)
G2 = torch.rand(2, 4, 6, 2) * 2.6 - 1.3
G3 = torch.rand(1, 3, 4, 5, 3) * 2.6 - 1.3


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def R(*shape, dtype=torch.float16, scale=3.0):
    return (torch.randn(*shape) * scale).to(dtype)


# ---------------------------------------------------------------- rounding to the dtype

def _halves_and_midpoints():
    """Every finite float16 as float32, the midpoints between neighbours (ties), and values just
    off those midpoints, both signs; plus overflow, inf and NaN."""
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    mid = (h[:-1].astype(np.float64) + h[1:]) / 2
    off = np.concatenate([mid, np.nextafter(mid.astype(np.float32), np.float32(np.inf)),
                          np.nextafter(mid.astype(np.float32), np.float32(0))]).astype(np.float32)
    v = np.concatenate([h, off, np.float32([65504, 65519.996, 65520, 1e5, np.inf, np.nan, 1e-30])])
    return np.concatenate([v, -v])


def test_the_float16_rounder_is_numpys_conversion_everywhere():
    """rounder(float16) rounds to nearest, ties to even, keeps subnormals and overflows to inf,
    as a conversion to half does."""
    v = _halves_and_midpoints()
    got = np.asarray(jax.jit(rounder(jnp.float16))(v))
    with np.errstate(over="ignore"):
        want = v.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_the_bfloat16_rounder_is_the_conversion_everywhere():
    """rounder(bfloat16) (reduce_precision, which LLVM cannot narrow to native bfloat16 arithmetic
    the way it narrows a conversion round trip) rounds as the conversion does: every finite
    bfloat16, the midpoints and their neighbours, 200000 random float32 bit patterns (NaNs among
    them), overflow, subnormals."""
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    h = np.arange(0, 0x7F80, dtype=np.uint16).view(bf).astype(np.float32)
    mid = ((h[:-1].astype(np.float64) + h[1:]) / 2).astype(np.float32)
    bits = np.random.default_rng(0).integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    v = np.concatenate([h, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(0)),
                        bits.view(np.float32), np.float32([3.4e38, 3.39e38, np.inf, np.nan, 1e-45])])
    v = np.concatenate([v, -v])
    got = np.asarray(jax.jit(rounder(bf))(v))
    with np.errstate(over="ignore", invalid="ignore"):
        want = v.astype(bf).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    nan = np.isnan(want)
    assert np.array_equal(np.signbit(got)[~nan], np.signbit(want)[~nan])


def test_a_rounded_product_is_not_fused_into_the_sum():
    """r(r(a * b) + c) rounds twice. With a float16 round trip XLA fused it into one FMA on CPUs
    with native float16 arithmetic (AVX512-FP16): 1129 of 4096 results a rounding step off."""
    rng = np.random.default_rng(0)
    a, b, c = [(rng.standard_normal(4096) * 3).astype(np.float16) for _ in range(3)]
    r = rounder(jnp.float16)
    got = jax.jit(lambda a, b, c: r(r(a.astype(jnp.float32) * b.astype(jnp.float32))
                                    + c.astype(jnp.float32)))(a, b, c)
    np.testing.assert_array_equal(np.asarray(got), ((a * b) + c).astype(np.float32))


# ---------------------------------------------------------------- normalization

@pytest.mark.parametrize("dtype", LOW)
def test_batch_norm_training_normalises_with_rounded_statistics(dtype):
    """Saved mean and invstd are rounded to the dtype and the output uses the rounded values
    (bfloat16 also keeps the variance in bfloat16); the running stats update in float32 and
    round once."""
    x, w, b = R(8, 3, 16, dtype=dtype) + 1, R(3, dtype=dtype), R(3, dtype=dtype)
    rm, rv = R(3, dtype=dtype), R(3, dtype=dtype).abs() + 0.5

    def f(x, w, b, rm, rv):
        rm, rv = rm.clone(), rv.clone()
        return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3, eps=1e-5), rm, rv
    check(f, x, w, b, rm, rv)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_gradients_follow_eagers_kernel(dtype, training):
    """The backward is eager's kernel in float32 from the saved (rounded) statistics. A half
    batch norm's backward raised before: in training a JAX type error (its cotangent was fed in
    the dtype, the float32 forward's expected float32), in evaluation eager's own dtype check
    (the empty saved statistics were float32, eager's are the parameters' dtype)."""
    x, g = R(4, 8, 16, dtype=dtype) + 1, R(4, 8, 16, dtype=dtype)
    w, b = R(8, dtype=dtype), R(8, dtype=dtype)
    rm, rv = R(8, dtype=dtype), R(8, dtype=dtype).abs() + 0.5

    def grads(x, g, w, b, rm, rv):
        x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
        y = F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=training)
        return torch.autograd.grad(y, (x, w, b), g)
    check(grads, x, g, w, b, rm, rv, atol=0, rtol=0)
    check(lambda x, g: grads(x, g, torch.ones(8, dtype=dtype, device=x.device),
                             torch.zeros(8, dtype=dtype, device=x.device), rm.to(x.device),
                             rv.to(x.device))[0], x, g, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_batch_norm_with_update_backward_takes_its_empty_reserve(dtype):
    """batch_norm_backward's cuDNN `reserve` is always empty: lazyxla took it for an empty input
    and ran eager's CPU kernel on stand-ins, which refused the float32 saved statistics beside
    half running stats (a RuntimeError on every half backward of _batch_norm_with_update)."""
    x, g = R(4, 3, 5, dtype=dtype) + 1, R(4, 3, 5, dtype=dtype)
    w, rm, rv = R(3, dtype=dtype), R(3, dtype=dtype), R(3, dtype=dtype).abs() + 0.5

    def grads(x, g, w, rm, rv):
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        out = torch.ops.aten._batch_norm_with_update(x, w, None, rm.clone(), rv.clone(), 0.1, 1e-5)
        return torch.autograd.grad(out[0], (x, w), g)
    check(grads, x, g, w, rm, rv, atol=0, rtol=0)


def test_batch_norm_with_float32_parameters_keeps_float32_statistics():
    x = R(4, 3, 6) + 1
    check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x,
          torch.randn(3), torch.randn(3))


@pytest.mark.parametrize("fn", [
    lambda x: torch.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
    lambda x: torch.native_layer_norm(x, [6], None, None, 1e-5),
], ids=["batch_norm", "layer_norm"])
def test_saved_statistics_are_float32_with_eager_values(fn):
    """Eager CPU returns float16 statistics, the meta kernel (and CUDA) float32: lazyxla keeps the
    meta kernel's float32, holding the values eager computes."""
    x = R(4, 3, 6) + 1
    expected = fn(x)
    actual = to_cpu(fn(x.to(lazyxla.device())))
    torch.testing.assert_close(actual[0], expected[0])
    for a, e in zip(actual[1:], expected[1:]):
        assert a.dtype == torch.float32 and e.dtype == torch.float16
        torch.testing.assert_close(a.half(), e)


# ---------------------------------------------------------------- pooling

def test_avg_pool2d_sums_and_divides_in_float32():
    check(lambda x: F.avg_pool2d(x, 3), R(2, 4, 12, 12))

def test_adaptive_avg_pool2d_accumulates_in_float32():
    check(lambda x: F.adaptive_avg_pool2d(x, (3, 4)), R(2, 3, 7, 9))


@pytest.mark.parametrize("dtype", LOW)
def test_adaptive_avg_pool3d_accumulates_in_the_dtype(dtype):
    """AdaptiveAveragePooling3d.cpp sums in the dtype (every addition rounded), then divides by
    each window extent in turn, rounding each quotient."""
    check(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), R(2, 5, 7, 5, dtype=dtype))


# ---------------------------------------------------------------- convolution

def test_conv_adds_the_bias_before_the_one_rounding():
    """Eager accumulates in float32 onto the bias and rounds once (round(x * w + b), not
    round(round(x * w) + b))."""
    check(lambda x, w, b: F.conv3d(x, w, b), R(1, 1, 4, 4, 4), R(1, 1, 1, 1, 1), R(1))
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1), R(2, 3, 5, 5), R(4, 3, 3, 3), R(4))


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("kw", [dict(stride=2, padding=2, output_padding=1), dict(dilation=2, groups=2)])
def test_conv_transpose_rounds_once(kw, dtype):
    """A transposed convolution accumulates in float32 and rounds once, as eager's oneDNN kernel.
    Eager on a host without oneDNN support for the dtype runs col2im, which rounds after every
    kernel offset; which one runs depends on the host, so lazyxla does not follow it."""
    x, w, b = R(2, 4, 4, 5, dtype=dtype), R(4, 3, 3, 3, dtype=dtype), R(6 if kw.get("groups") else 3, dtype=dtype)
    expected = F.conv_transpose2d(x.float(), w.float(), b.float(), **kw).to(dtype)
    D = lazyxla.device()
    actual = F.conv_transpose2d(x.to(D), w.to(D), b.to(D), **kw).cpu()
    torch.testing.assert_close(actual, expected)  # (col2im's roundings differ by percents)


# ---------------------------------------------------------------- upsampling

@pytest.mark.parametrize("dtype", LOW)
def test_linear_trilinear_bicubic_weights_are_in_the_dtype(dtype):
    """The generic upsampling kernel stores its interpolation weights in the input dtype (linear:
    lambda1 rounded, lambda0 = 1 - lambda1 rounded) and sums in float32."""
    check(lambda x: F.interpolate(x, size=13, mode="linear"), R(2, 3, 6, dtype=dtype))
    check(lambda x: F.interpolate(x, scale_factor=1.7, mode="trilinear", align_corners=True),
          R(1, 2, 3, 4, 5, dtype=dtype))
    check(lambda x: F.interpolate(x, scale_factor=(1.3, 1.7), mode="bicubic"),
          R(1, 3, 6, 9, dtype=dtype))


def test_bilinear_weight_precision_depends_on_output_size():
    """Outputs with out_h + out_w <= 128 take eager's vectorised kernel (float32 weights), larger
    ones the generic kernel (float16 weights)."""
    x = R(1, 2, 9, 11)
    check(lambda x: F.interpolate(x, size=(7, 13), mode="bilinear"), x)
    check(lambda x: F.interpolate(x, size=(70, 70), mode="bilinear"), x)


# ---------------------------------------------------------------- grid sampling


@pytest.mark.parametrize("mode,pad", [("bilinear", "zeros"), ("bilinear", "reflection"),
                                      ("nearest", "border"), ("bicubic", "zeros")])
def test_grid_sample_2d_rounds_every_operation(mode, pad):
    """grid_sampler_2d computes in Vectorized<Half>: every operation rounds to float16."""
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=False),
          R(2, 3, 5, 7), G2.half())


def test_grid_sample_3d_rounds_every_operation():
    """grid_sampler_3d runs scalar c10::Half arithmetic, with its own weight formulas."""
    check(lambda x, g: F.grid_sample(x, g, padding_mode="border", align_corners=True),
          R(1, 2, 3, 4, 5), G3.half())


# ---------------------------------------------------------------- losses, embedding_bag

def test_huber_loss_computes_in_float32():
    a, b = R(256) * 2, R(256) * 2
    check(lambda a, b: F.huber_loss(a, b, reduction="none", delta=8.7), a, b)


def test_binary_cross_entropy_rounds_every_operation():
    x, y, w = torch.rand(256).half(), torch.rand(256).half(), torch.rand(256).half() * 2
    check(lambda x, y, w: F.binary_cross_entropy(x, y, w, reduction="none"), x, y, w)


def test_embedding_bag_accumulates_in_float32():
    w, idx = R(10, 5), torch.tensor([1, 4, 4, 7, 2, 9, 0, 3])
    off, psw = torch.tensor([0, 3, 5]), torch.rand(8).half() * 2
    check(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p), w, idx, off, psw)
    check(lambda w, i, o: F.embedding_bag(i, w, o, mode="mean"), w, idx, off)


@pytest.mark.parametrize("dtype", LOW)
def test_matrix_exp_computes_in_float32(dtype):
    """JAX's expm refuses reduced dtypes; eager's kernel in the dtype overflows to inf / NaN on
    standard-normal matrices. lazyxla computes in float32 and rounds once."""
    a = torch.randn(2, 3, 3).to(dtype)
    expected = torch.linalg.matrix_exp(a.float()).to(dtype)
    actual = torch.linalg.matrix_exp(a.to(lazyxla.device())).cpu()
    assert actual.dtype == dtype
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("eps", [None, 0.05])
def test_logit_rounds_every_step(eps):
    """Eager computes log(x / (1 - x)) in the dtype: 1 - x and the quotient are rounded."""
    x = torch.rand(500).half() * 1.2 - 0.1
    check(lambda x: torch.logit(x, eps), x, atol=0, rtol=0)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addbmm_rounds_after_each_batch(beta, alpha):
    """Eager's addbmm is one addmm per batch: float32 accumulation, rounded after each."""
    check(lambda m, a, b: torch.addbmm(m, a, b, beta=beta, alpha=alpha), R(5, 10), R(4, 5, 7), R(4, 7, 10),
          atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_scalars_the_kernel_converts_to_the_dtype(dtype):
    """add's and sub's alpha and pow's exponent are converted to the dtype before the float32
    arithmetic (`alpha.to<scalar_t>()`: 1.7 is 1.703125 in bfloat16); mul's scalar is not."""
    a, b = R(256, dtype=dtype), R(256, dtype=dtype)
    check(lambda a, b: (torch.add(a, b, alpha=1.7), torch.sub(a, b, alpha=-0.3),
                        torch.rsub(a, b, alpha=0.3), a.abs().pow(1.7), a.abs() ** -2.3, a * 0.3),
          a, b, atol=0, rtol=0)


# values a float16 / bfloat16 rounding moves: 1.0004 (1.0 in float16), 1.003 (1.0 in bfloat16),
# 2049 (2048 in both), 1000.7 (1000.5 / 1000)
_UNROUNDED = [1.0004, 1.003, 2049.0, 2049, 1000.7, 3.0001, 257.0]


@pytest.mark.parametrize("dtype", LOW)
def test_a_0d_operand_is_rounded_to_the_dtype_where_eagers_kernel_rounds_it(dtype):
    """eager's TensorIterator converts a Python number or a 0-d tensor (of any float dtype) to a
    float16 / bfloat16 result's dtype before the kernel reads it: x + 2049 adds 2048, 2048 % 2049
    is 0, xlogy(x, 1.0004) is 0 in float16. mul's and div's second operand and lerp's Scalar
    weight are read unrounded (`original_scalar_value`); lazyxla read every one unrounded."""
    x = torch.tensor([2047.0, 3.0, 1000.0, -7.0, 2048.0, 0.5, 1.0, -2048.0, 0.0]).to(dtype)
    ops = [torch.add, torch.sub, torch.rsub, torch.mul, torch.div, torch.remainder, torch.fmod,
           lambda a, b: torch.add(a, b, alpha=2), lambda a, b: torch.div(a, b, rounding_mode="floor"),
           lambda a, b: a.clone().sub_(b), lambda a, b: a.clone().mul_(b)]
    tensor_ops = [torch.atan2, torch.hypot, torch.logaddexp, torch.logaddexp2]
    for v in _UNROUNDED:
        for t in (v, torch.tensor(v), torch.tensor(v, dtype=torch.float32)):
            for op in ops + (tensor_ops if isinstance(t, torch.Tensor) else []):
                check(lambda x: op(x, t), x, atol=0, rtol=0)
            check(lambda x: torch.xlogy(x, t), x, atol=0, rtol=0)
            check(lambda x: torch.special.xlog1py(x, t), x, atol=0, rtol=0)
            check(lambda x: x.abs().pow(t), x, atol=0, rtol=0)
            check(lambda x: torch.lerp(x, torch.zeros_like(x), t), x, atol=0, rtol=0)
            if isinstance(t, torch.Tensor):  # the 0-d tensor first, on the device
                for op in (torch.add, torch.sub, torch.mul, torch.div, torch.remainder,
                           torch.atan2, torch.pow):
                    check(lambda x, t: op(t, x.abs() + 1), x, t, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_xlogy_and_xlog1py_round_the_logarithm_to_the_dtype(dtype):
    """eager's kernels compute `x * std::log(y)` on Half / BFloat16 values, whose log is one of
    the dtype too: the logarithm is rounded before the product (78 of 3001 float16 elements and
    1568 bfloat16 ones were an ulp off)."""
    x = torch.linspace(-6, 6, 3001).to(dtype)
    check(lambda x: (torch.xlogy(x, x.abs() * 3 + 0.1), torch.special.xlog1py(x, x.abs() * 3),
                     torch.special.xlog1py(x, 1.0004)),
          x, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_entr_mvlgamma_and_bfloat16_small_powers_round_as_eagers_kernels(dtype):
    """entr's log is one of the dtype (PyTorch's reference decomposition computed in float32:
    741 of 3003 float16 elements off); mvlgamma is eager's composite, each op in the dtype (861
    off); bfloat16's pow by 3 and -2 multiplies x * x in the dtype first (644 off)."""
    x = torch.linspace(-6, 6, 3003).to(dtype)
    check(lambda x: (torch.special.entr(x), x.pow(3), x.pow(-2), x.pow(2), x ** 3.0), x, atol=0,
          rtol=0)
    want, got = torch.mvlgamma(x.abs() + 2, 2), torch.mvlgamma(x.to(lazyxla.device()).abs() + 2, 2)
    assert (want != got.cpu()).sum() <= 2  # (XLA's lgamma itself is an ulp off on 2 of them)


@pytest.mark.parametrize("dtype", LOW)
def test_floor_and_trunc_division_round_each_step_unless_the_divisor_is_one_element(dtype):
    """eager's kernels divide by a one-element divisor in float32 with its unrounded value, and by
    any other (and a 0-d dividend's) in the dtype's arithmetic, each step rounded: lazyxla
    computed every case in float32 (11.6% of bfloat16 floor quotients and 19.6% of trunc ones
    differed)."""
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(4000, generator=g) * 3000).to(dtype), (torch.randn(4000, generator=g) * 7).to(dtype)
    b[::97], a[::89] = 0, 0
    check(lambda a, b: (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                        torch.floor_divide(a, b), torch.div(a, 0.3, rounding_mode="floor"),
                        torch.div(a, b[1:2], rounding_mode="trunc"),
                        torch.div(torch.tensor(2049.0, device=a.device), b, rounding_mode="floor")),
          a, b, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_addr_is_beta_self_plus_alpha_vec1_times_vec2(dtype):
    """Eager's addr kernel: beta * self + (alpha * vec1) * vec2, each operation in the dtype."""
    check(lambda m, u, v: (torch.addr(m, u, v, beta=0.7, alpha=-1.1), torch.addr(m, u, v, alpha=3.3),
                           torch.addr(m, u, v, beta=0)), R(16, 12, dtype=dtype), R(16, dtype=dtype),
          R(12, dtype=dtype), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_cross_rounds_each_product_and_the_difference(dtype):
    """Eager's cross kernel: a1 * b2 - a2 * b1 in the dtype, every operation rounded."""
    a, b = R(64, 3, dtype=dtype), R(64, 3, dtype=dtype)
    check(lambda a, b: (torch.linalg.cross(a, b), torch.linalg.cross(a.T, b.T, dim=0),
                        torch.linalg.cross(a, b[:1])), a, b, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_renorm_multiplies_by_a_factor_stored_in_the_dtype(dtype):
    """Eager's renorm computes each slice's norm and factor maxnorm / (norm + 1e-7) in float32,
    stores the factor in the input's dtype, then multiplies: lazyxla multiplied by the float32
    factor (191 of 1200 float16 elements and 175 bfloat16 ones an ulp off)."""
    check(lambda x: (x.renorm(2, 1, 5.0), x.renorm(1, 0, 20.0), x.renorm(float("inf"), 1, 2.0),
                     x.renorm(3, 0, 4.0)), R(4, 300, dtype=dtype), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_silu_and_mish_backward_compute_in_float32_once(dtype):
    """PyTorch's composite silu_backward / mish_backward (which a device without its own kernel
    gets) compute op by op in the dtype; eager's CPU kernels compute in float32 and round once:
    lazyxla now has those kernels (197 of 512 float16 silu gradients differed, 38 beyond
    float16's tolerance)."""
    g = (torch.arange(512.).reshape(32, 16) % 7 - 3).to(dtype)
    check(lambda g, x: (torch.ops.aten.silu_backward(g, x), torch.ops.aten.mish_backward(g, x)),
          g, R(32, 16, dtype=dtype, scale=2.0), atol=0, rtol=0)
    check_grad(lambda x: (F.silu(x) * 3 + F.mish(x)), R(32, 16, dtype=dtype, scale=2.0), atol=0, rtol=0)


def test_silu_and_mish_keep_their_double_backward():
    x = torch.randn(6, 5, dtype=torch.float64)

    def second(x, f):
        x = x.detach().requires_grad_()
        g, = torch.autograd.grad(f(x).sum(), x, create_graph=True)
        return torch.autograd.grad((g * g).sum(), x)[0]
    for f in (F.silu, F.mish):
        torch.testing.assert_close(to_cpu(second(x.to(lazyxla.device()), f)), second(x, f))


@pytest.mark.parametrize("dtype", LOW)
def test_logsumexp_rounds_each_step_of_eagers_composite(dtype):
    """eager's logsumexp is x - max, exp, sum, log and + max, each an op of the dtype: lazyxla
    computed it in float32 (6 of 32 float16 rows an ulp off, and the gradient exp(x - lse)
    then beyond tolerance on 31 of 512 elements)."""
    check(lambda x: (x.logsumexp(-1), x.logsumexp(0), x.logsumexp((0, 1))),
          R(32, 16, dtype=dtype, scale=2.0), atol=0, rtol=0)
    check_grad(lambda x: x.logsumexp(-1), R(32, 16, dtype=dtype, scale=2.0), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_layer_norm_input_gradient_follows_eagers_kernel(dtype):
    """eager keeps mean and rstd in the dtype (with a weight and bias of it too) and computes
    the input's gradient as rstd * dy * w + b * x + c per row: lazyxla used float32 statistics
    and another formula (183 of 512 float16 gradients differed, 24 beyond tolerance). The
    weight's and bias's gradients are summed over rows in float32 (eager: in the dtype, in an
    order that depends on its thread count)."""
    x, g = R(32, 16, dtype=dtype, scale=2.0), R(32, 16, dtype=dtype)

    def dx(x, g, w, b):
        x = x.detach().requires_grad_()
        return torch.autograd.grad(F.layer_norm(x, (16,), w, b), x, g)[0]
    # (XLA sums the rows in another order than eager: an ulp of float32, which the cancellation
    # in b * x + c can carry into a rounding of the dtype on an element or so: within tolerance)
    check(lambda x, g: (dx(x, g, None, None), F.layer_norm(x, (16,))), x, g)
    w, b = R(16, dtype=dtype), R(16, dtype=dtype)
    check(lambda x, g, w, b: dx(x, g, w, b), x, g, w, b)


@pytest.mark.parametrize("dtype", LOW)
def test_log_softmax_over_the_last_dim_rounds_the_sum_and_its_log(dtype):
    """eager's log_softmax kernel over the last dim keeps the sum of exps and its log in the
    dtype; over another dim it computes in float32 throughout. lazyxla computed both in float32
    (66 of 512 float16 elements an ulp off over the last dim, and the gradient beyond float16's
    tolerance on 4); cross_entropy's gradient follows."""
    x = R(32, 16, dtype=dtype, scale=2.0)
    check(lambda x: (x.log_softmax(-1), x.log_softmax(0), x[:, :1].log_softmax(0),
                     x.reshape(4, 8, 16).log_softmax(1)), x, atol=0, rtol=0)
    check_grad(lambda x: x.log_softmax(-1) * torch.arange(16, device=x.device), x, atol=0, rtol=0)
    t = torch.arange(32) % 16
    check_grad(lambda x, t: F.cross_entropy(x, t), x, t, atol=0, rtol=0)


def test_float16_sigmoid_backward_rounds_each_step():
    """eager's float16 sigmoid_backward runs on Vectorized<Half>, each operation rounded:
    grad * (1 - y) * y (1283 of 4000 elements differed); bfloat16's computes in float32."""
    g = torch.Generator().manual_seed(0)
    for dtype in LOW:
        y, gy = torch.rand(4000, generator=g).to(dtype), (torch.randn(4000, generator=g) * 3).to(dtype)
        check(lambda gy, y: torch.ops.aten.sigmoid_backward(gy, y), gy, y, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_logit_and_glu_backward_round_as_eagers_kernels(dtype):
    """logit_backward runs on Vectorized<Half / BFloat16>, each op rounded: dy / (x * (1 - x))
    (944 of 4000 float16 elements differed, eps as the dtype's); glu_backward stores sigmoid of
    the second half in the dtype before its float32 products (27 of 512 float16 gradients
    were beyond tolerance)."""
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(4000, generator=g) * 1.2 - 0.1).to(dtype)
    x[:4] = torch.tensor([0, 1, 0.5, 1e-3])
    dy = (torch.randn(4000, generator=g) * 3).to(dtype)
    check(lambda dy, x: [torch.ops.aten.logit_backward(dy, x, eps) for eps in (None, 0.05, -1.0)],
          dy, x, atol=0, rtol=0)
    check(lambda dy, x: (torch.ops.aten.glu_backward(dy, x, -1),
                         torch.ops.aten.glu_backward(dy.T.contiguous(), x.T.contiguous(), 0)),
          R(64, 20, dtype=dtype), R(64, 40, dtype=dtype), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_log_sigmoid_backward_reads_the_buffer_in_the_dtype(dtype):
    """eager's forward stores exp(-|x|) in the dtype, which its backward reads: lazyxla's
    recomputed buffer was float32 (54 of 512 float16 gradients an ulp off)."""
    check_grad(lambda x: F.logsigmoid(x) * torch.arange(16, device=x.device), R(32, 16, dtype=dtype),
               atol=0, rtol=0)


def test_float16_gradients_through_rounded_partial_sums_near_zero():
    """adaptive_avg_pool3d's backward is the VJP of its forward, which rounds each step of
    eager's float16 window sum; the rounding's subnormal branch (jnp.round) had a zero
    derivative, so a window whose partial sum passed near zero dropped its gradient (8 of 4096
    elements up to 0.27 off). Now the cotangent is rounded alike, as eager's backward
    accumulates: equal to eager's."""
    torch.manual_seed(0)
    x = torch.randn(8, 8, 8, 8).half() * 3
    g = torch.randn(8, 5, 7, 4).half() * 3

    def grad(x, g):
        x = x.detach().requires_grad_()
        return torch.autograd.grad(F.adaptive_avg_pool3d(x, (5, 7, 4)), x, g)[0]
    check(grad, x, g, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
def test_scatter_sums_and_products_accumulate_in_float32(dtype):
    """eager's CPU scatter kernels (scatter_add, scatter(reduce=), scatter_reduce sum / prod /
    mean, and index_add without an alpha above one dim) add or multiply a half dtype in float32
    and round once: lazyxla added in the dtype (57 of 128 float16 elements differed, 13 beyond
    tolerance). index_add with an alpha, or of one dim, goes slice by slice in the dtype, as
    does index_put with accumulate."""
    g = torch.Generator().manual_seed(0)
    x, base = (torch.randn(32, 16, generator=g) * 2).to(dtype), torch.randn(8, 16, generator=g).to(dtype)
    idx = torch.arange(32) % 8
    check(lambda b, x, i, i2: (b.scatter_add(0, i2, x), b.scatter(0, i2, x, reduce="add"),
                               b.scatter_add(1, i2[:8] % 16, x[:8]),
                               b.scatter_reduce(0, i2, x, "sum", include_self=False),
                               b.scatter_reduce(0, i2, x, "mean"),
                               b.scatter_reduce(0, i2, x * 0.1 + 1, "prod"), b.index_add(0, i, x),
                               b.index_add(0, i, x, alpha=0.3), b[:, 0].index_add(0, i, x[:, 0]),
                               b.index_put((i,), x, accumulate=True)),
          base, x, idx, idx[:, None].expand(32, 16).contiguous(), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_adaptive_avg_pool2d_backward_is_eagers_loop(dtype):
    """eager's kernel adds each output's grad / kh / kw (a half dtype rounding each division)
    into its window's input gradient in the dtype, in (oh, ow) order: lazyxla's float32 VJP
    put 21 of 512 float16 elements beyond tolerance (155 differing), and float32 an ulp off on
    51 (XLA folded / kh / kw into one division)."""
    torch.manual_seed(0)
    for (ih, iw), out in [((8, 8), (5, 5)), ((5, 6), (8, 13)), ((8, 8), (3, 7))]:
        x, g = (torch.randn(2, 4, ih, iw) * 2).to(dtype), (torch.randn(2, 4, *out) * 3).to(dtype)

        def grad(x, g):
            x = x.detach().requires_grad_()
            return torch.autograd.grad(F.adaptive_avg_pool2d(x, out), x, g)[0]
        check(grad, x, g, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("mode,shape,size", [("nearest", (2, 4, 8, 8), (16, 16)),
                                             ("nearest-exact", (2, 4, 8, 8), (13, 11)),
                                             ("nearest", (1, 2, 4, 5, 6), (9, 7, 13))])
def test_nearest_upsampling_backward_sums_in_float32(dtype, mode, shape, size):
    """eager sums the gradient of a nearest upsampling of a half dtype in float32 and rounds
    once: lazyxla's VJP scattered it in the dtype (154 of 512 float16 elements differed)."""
    torch.manual_seed(0)
    x = (torch.randn(shape) * 2).to(dtype)
    g = (torch.randn(shape[:2] + size) * 3).to(dtype)

    def grad(x, g):
        x = x.detach().requires_grad_()
        return torch.autograd.grad(F.interpolate(x, size=size, mode=mode), x, g)[0]
    check(grad, x, g, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("args", [(3, 1, 0, 1, (8, 8)), (3, 2, 1, 2, (9, 7)), ((2, 3), 1, (1, 0), (1, 2), (6, 9))])
def test_fold_adds_kernel_offsets_in_the_dtype(dtype, args):
    """eager's col2im (F.fold) adds each kernel offset's block into the image in the dtype, one
    offset after another, each addition rounded; PyTorch's decomposition summed in float32
    once (121 of 512 float16 elements differed)."""
    ks, dil, pad, st, size = args
    k = ks * ks if isinstance(ks, int) else ks[0] * ks[1]
    blocks = F.unfold(torch.zeros(1, 1, *size), ks, dil, pad, st).shape[-1]
    x = R(2, 3 * k, blocks, dtype=dtype, scale=2.0)
    check(lambda x: (F.fold(x, size, ks, dil, pad, st), F.fold(x[0], size, ks, dil, pad, st)), x,
          atol=0, rtol=0)


def test_bfloat16_attention_backward_after_a_convolution_runs_as_eager():
    # XLA's CPU runtime left a transposed batched bf16 x bf16 = f32 dot it has no kernel for
    # ("Unsupported element type for DotThunk::Execute"): half operands of a float32 product are
    # float32 on the CPU backend
    def run(dev):
        torch.manual_seed(0)
        conv = torch.nn.Conv2d(1, 4, 3, padding=1).to(dev, torch.bfloat16)
        mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).to(dev, torch.bfloat16)
        x = torch.randn(3, 6, 16).to(dev, torch.bfloat16)
        c = conv(x[:, None])[:, 0]
        mha(c, c, c)[0].float().sum().backward()
        return mha.in_proj_weight.grad.float().cpu(), conv.weight.grad.float().cpu()
    for got, want in zip(run(lazyxla.device()), run("cpu")):
        torch.testing.assert_close(got, want, atol=0.05, rtol=0.02)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_matrix_products_equal_eagers(dtype):
    a, b = torch.randn(4, 5, 6).to(dtype), torch.randn(4, 6, 3).to(dtype)
    check(torch.bmm, a, b)
    check(lambda a, b: a.mT @ b.mT.mT, a, a)
    check(torch.mm, a[0], b[0])
