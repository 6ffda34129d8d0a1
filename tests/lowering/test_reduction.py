"""Reductions, scans, softmax, sorting and selection against eager CPU PyTorch."""
import math
import re

import pytest
import torch

import lazyxla
from lazyxla.testing import check, check_grad

from _grad import grad_check  # shared by the reduction and linalg tests (tests/lowering/_grad.py)

torch.manual_seed(0)

F32, F64, BF16, I64, BOOL = torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool


def make(shape, dtype=F32, nan=False, ties=False):
    if dtype == BOOL:
        return torch.randint(0, 2, shape).bool()
    if not dtype.is_floating_point:
        return torch.randint(-4, 5, shape, dtype=dtype)
    x = torch.randint(-3, 4, shape).to(dtype) if ties else torch.randn(shape, dtype=dtype)
    if nan and x.numel() > 1:
        x.view(-1)[1] = float("nan")
    return x


# ----------------------------------------------------------------------------- sum / mean / prod

@pytest.mark.parametrize("dtype", [F32, F64, BF16, I64, BOOL])
def test_sum_all(dtype):
    check(lambda x: x.sum(), make((3, 4), dtype), atol=1e-2 if dtype == BF16 else None,
          rtol=1e-2 if dtype == BF16 else None)


@pytest.mark.parametrize("dim,keepdim", [(1, False), (-1, True), ((0, 1), False), ((0, -1), True), (0, False)])
@pytest.mark.parametrize("dtype", [F32, I64])
def test_sum_dim(dim, keepdim, dtype):
    check(lambda x: x.sum(dim, keepdim=keepdim), make((2, 3, 4), dtype))


def test_sum_dtype_and_edge():
    x = make((3, 4))
    check(lambda x: x.sum(1, dtype=torch.float64), x)
    check(lambda x: x.sum(dtype=torch.float64), make((3, 4), I64))
    check(lambda x: torch.ops.aten.sum.dim_IntList(x, []), x)
    check(lambda x: x.sum(0), torch.tensor(2.5))
    check(lambda x: x.sum(1), torch.zeros(3, 0))
    check(lambda x: x.sum(1), make((3, 4), BF16), atol=1e-2, rtol=1e-2)
    check(lambda x: x.nansum(), make((3, 4), nan=True))
    check(lambda x: x.nansum(1, keepdim=True), make((3, 4), nan=True))


@pytest.mark.parametrize("fn", [lambda x: x.sum(), lambda x: x.sum(-1), lambda x: x.sum(0, keepdim=True),
                                lambda x: x.nansum(), lambda x: x.mean(), lambda x: x.cumsum(-1),
                                lambda x: x.sum(dtype=torch.float64), lambda x: x.half().sum(),
                                lambda x: x.to(torch.complex64).sum(0)],
                         ids=["sum", "sum_dim", "sum_keepdim", "nansum", "mean", "cumsum", "sum_f64",
                              "sum_f16", "sum_complex"])
@pytest.mark.parametrize("values", [[[-0.0]], [[-0.0], [-0.0]], [[-0.0, -0.0]], [[-0.0, 2.0]]],
                         ids=["one", "column", "row", "mixed"])
def test_sum_of_one_negative_zero_is_positive_zero_as_eager(fn, values):
    """Eager adds the one term to 0.0; XLA's reduction of one element is the element itself."""
    x = torch.tensor(values)
    expected, actual = fn(x), fn(x.to(lazyxla.device())).cpu()
    torch.testing.assert_close(actual, expected)
    assert torch.equal(torch.view_as_real(actual).signbit() if actual.is_complex() else actual.signbit(),
                       torch.view_as_real(expected).signbit() if expected.is_complex() else expected.signbit())


def test_sum_of_a_zero_dim_negative_zero_matches_eager():
    x = torch.tensor(-0.0)
    for fn in (lambda x: x.sum(), lambda x: x.mean(), lambda x: x.cumsum(0)):
        expected, actual = fn(x), fn(x.to(lazyxla.device())).cpu()
        assert actual.signbit() == expected.signbit(), (expected, actual)


@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (-1, True), ((0, 2), False)])
def test_mean(dim, keepdim):
    x = make((2, 3, 4))
    check(lambda x: x.mean() if dim is None else x.mean(dim, keepdim=keepdim), x)


def test_mean_edge():
    check(lambda x: x.mean(dtype=torch.float32), make((3, 4), I64))
    check(lambda x: x.mean(0), make((3, 4), BF16), atol=1e-2, rtol=1e-2)
    check(lambda x: x.mean(), torch.zeros(0))
    check(lambda x: x.mean(1), make((3, 4), nan=True))
    with pytest.raises(RuntimeError):
        check(lambda x: x.mean(), make((3,), I64))


@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
def test_prod(dtype):
    x = make((3, 4), dtype)
    check(lambda x: x.prod(), x)
    check(lambda x: x.prod(-1, keepdim=True), x)
    check(lambda x: x.prod(0, dtype=torch.float64), x)


# ---------------------------------------------------------------------------- amax / max / arg*

@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
def test_amax_amin(dtype, nan):
    if nan and dtype != F32:
        pytest.skip("no NaN")
    x = make((3, 4), dtype, nan=nan)
    check(lambda x: (x.amax(), x.amin(), x.amax(1), x.amin(-1, keepdim=True), x.amax((0, 1))), x)


@pytest.mark.parametrize("ties,nan", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (-1, True), (1, False)])
def test_max_min_dim(dim, keepdim, ties, nan):
    x = make((3, 5), ties=ties, nan=nan)
    check(lambda x: (x.max(dim, keepdim), x.min(dim, keepdim)), x)
    check(lambda x: (x.argmax(dim, keepdim), x.argmin(dim, keepdim)), x)


@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
def test_max_min_full_and_arg(dtype):
    x = make((3, 4), dtype, ties=True)
    check(lambda x: (x.max(), x.min()), x)
    if dtype != BOOL:
        check(lambda x: (x.argmax(), x.argmin(), x.argmax(keepdim=True), x.max(1)), x)
    check(lambda x: (x.aminmax(), x.aminmax(dim=0), x.aminmax(dim=-1, keepdim=True)), x)


def test_max_nan_full_and_0d():
    x = make((3, 4), nan=True)
    check(lambda x: (x.max(), x.min(), x.argmax(), x.aminmax()), x)
    s = torch.tensor(3.0)
    check(lambda s: (s.max(0), s.argmax(), s.amax(), s.sum(-1)), s)


# ------------------------------------------------------------------------------------- var / std

@pytest.mark.parametrize("dim,corr,keepdim", [(None, 1, False), (1, 0, False), ((0, 2), 1, True),
                                              (-1, 2, False), (None, 0, True)])
def test_var_std(dim, corr, keepdim):
    x = make((2, 3, 4))
    check(lambda x: (x.var(dim, correction=corr, keepdim=keepdim), x.std(dim, correction=corr, keepdim=keepdim),
                     torch.var_mean(x, dim, correction=corr, keepdim=keepdim),
                     torch.std_mean(x, dim, correction=corr, keepdim=keepdim)), x)


def test_var_edge():
    check(lambda x: (x.var(unbiased=False), x.std(1, unbiased=True)), make((3, 4), F64))
    check(lambda x: x.var(1), make((3, 4), BF16), atol=2e-2, rtol=2e-2)
    check(lambda x: x.var(), torch.tensor([1.5]))  # N - correction == 0: nan
    check(lambda x: x.std(1), make((3, 4), nan=True))


_STD_VAR = {"std": torch.std, "var": torch.var, "std_mean": torch.std_mean, "var_mean": torch.var_mean}


def _dof_warnings(fn):
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [str(w.message).split(" Correction")[0] for w in seen if "degrees of freedom" in str(w.message)]


@pytest.mark.parametrize("name", sorted(_STD_VAR))
def test_std_var_record_without_a_spurious_warning(name):
    # the dtype probe runs eager's kernel on one-element stand-ins; its C++ warning ("degrees of
    # freedom is <= 0") reached the user's call
    x = torch.randn(7, 3).to(lazyxla.device())
    assert _dof_warnings(lambda: _STD_VAR[name](x, 0)) == []


@pytest.mark.parametrize("name", sorted(_STD_VAR))
@pytest.mark.parametrize("shape,dim,kw", [((1, 9), 0, {}), ((2, 11), (0, 1), {"correction": 22}),
                                          ((1, 1, 1), None, {}), ((0, 5), 1, {}), ((1, 6), 0, {"correction": 0})])
def test_std_var_warn_as_eager_where_degrees_of_freedom_are_not_positive(name, shape, dim, kw):
    x = torch.randn(shape)
    fn = _STD_VAR[name]
    expected = _dof_warnings(lambda: fn(x, dim, **kw))
    assert _dof_warnings(lambda: fn(x.to(lazyxla.device()), dim, **kw)) == expected
    assert expected == ([] if kw.get("correction") == 0 else [f"{name}(): degrees of freedom is <= 0."])


# --------------------------------------------------------------------------------------- all/any

@pytest.mark.parametrize("dtype", [BOOL, F32, I64])
def test_all_any(dtype):
    x = make((3, 4), dtype)
    if dtype == F32:
        x[0, 0] = 0
    check(lambda x: (x.all(), x.any(), x.all(1), x.any(-1, keepdim=True),
                     torch.all(x, dim=(0, 1)), torch.any(x, dim=(0,), keepdim=True)), x)
    check(lambda x: (torch.ops.aten.all.dims(x, []), torch.ops.aten.any.dims(x, None)), x)


def test_all_any_empty_and_uint8():
    check(lambda x: (x.all(), x.any(), x.all(0)), torch.zeros(0, 3, dtype=BOOL))
    check(lambda x: (x.all(), x.any(1)), torch.tensor([[0, 3], [1, 1]], dtype=torch.uint8))


def test_count_nonzero():
    x = make((3, 4), I64)
    check(lambda x: (x.count_nonzero(), x.count_nonzero(1), x.count_nonzero((0, 1))), x)


# ------------------------------------------------------------------------------------------ norms

@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, -1, math.inf, -math.inf])
def test_vector_norm(ord):
    x = make((3, 4))
    x[0, 1] = 0
    check(lambda x: (torch.linalg.vector_norm(x, ord), torch.linalg.vector_norm(x, ord, dim=1, keepdim=True)), x)


def test_norm_variants():
    x = make((3, 4))
    check(lambda x: (x.norm(), x.norm(p=1, dim=1), torch.norm(x, p="fro"), x.norm(dim=(0, 1)),
                     torch.linalg.vector_norm(x, dtype=torch.float64),
                     torch.ops.aten.norm.Scalar(x, 3), torch.ops.aten.norm.ScalarOpt_dim(x, None, [1])), x)
    check(lambda x: torch.linalg.vector_norm(x), make((5,), BF16), atol=2e-2, rtol=2e-2)
    check(lambda x: torch.linalg.vector_norm(x, dim=0), make((4, 3), nan=True))
    check(lambda x: torch.linalg.matrix_norm(x), x)


@pytest.mark.parametrize("dim,keepdim", [(1, False), ((0, 1), True), (-1, True)])
def test_logsumexp(dim, keepdim):
    x = make((3, 4))
    x[0] = -math.inf
    x[1, 2] = math.inf
    check(lambda x: x.logsumexp(dim, keepdim=keepdim), x)
    check(lambda x: x.logsumexp(1), make((3, 4), I64))
    check(lambda x: x.logsumexp(1), make((3, 4), nan=True))


# ---------------------------------------------------------------------------------------- softmax

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dim):
    x = make((3, 4))
    check(lambda x: (x.softmax(dim), x.log_softmax(dim)), x)


def test_softmax_edge():
    x = make((3, 4), nan=True)
    x[2] = -math.inf
    check(lambda x: (x.softmax(1), x.log_softmax(1)), x)
    check(lambda x: (x.softmax(1), x.log_softmax(1)), make((3, 4), BF16), atol=1e-2, rtol=1e-2)
    check(lambda x: x.softmax(1, dtype=torch.float32), make((3, 4), BF16))
    check(lambda x: (x.softmax(0), x.log_softmax(-1)), torch.tensor(1.5))
    check(lambda x: x.softmax(1), torch.zeros(2, 0))


@pytest.mark.parametrize("fn", [lambda x, w: x.softmax(1) * w, lambda x, w: x.log_softmax(-1) * w,
                                lambda x, w: (x.softmax(0) * x).sum(0)])
def test_softmax_grad(fn):
    grad_check(fn, make((3, 4)), make((4,)))


def test_softmax_backward_ops():
    g, y = make((3, 4)), make((3, 4)).softmax(1)
    check(lambda g, y, ly: (torch.ops.aten._softmax_backward_data(g, y, 1, torch.float32),
                            torch.ops.aten._log_softmax_backward_data(g, ly, -1, torch.float32)), g, y, y.log())


# ------------------------------------------------------------------------------------------ scans

@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
@pytest.mark.parametrize("dim", [0, -1])
def test_cumsum_cumprod(dtype, dim):
    x = make((3, 4), dtype)
    check(lambda x: (x.cumsum(dim), x.cumprod(dim)), x)


def test_scans_edge():
    check(lambda x: (x.cumsum(0, dtype=torch.float64), x.cumsum(1)), make((3, 4), BF16), atol=5e-2, rtol=2e-2)
    check(lambda x: (x.cumsum(0), x.cumprod(0), x.logcumsumexp(0)), torch.tensor(2.0))
    check(lambda x: x.cumsum(1), torch.zeros(2, 0))
    x = make((3, 5))
    x[0, 2] = -math.inf
    x[1, :] = -math.inf
    x[2, 3] = math.inf
    check(lambda x: (x.logcumsumexp(1), x.logcumsumexp(0)), x)


@pytest.mark.parametrize("ties,nan", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("dtype", [F32, I64])
def test_cummax_cummin(ties, nan, dtype):
    if dtype != F32 and nan:
        pytest.skip("no NaN")
    x = make((3, 6), dtype, ties=ties, nan=nan)
    if nan:
        x[2, 4] = math.nan
    check(lambda x: (x.cummax(1), x.cummin(1), x.cummax(0), x.cummin(-1)), x)


# ----------------------------------------------------------------------------------------- sorting

@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [F32, I64, BOOL])
@pytest.mark.parametrize("dim", [0, -1])
def test_sort_stable(dtype, descending, dim):
    x = make((4, 7), dtype, ties=True)
    check(lambda x: x.sort(dim=dim, descending=descending, stable=True), x)
    check(lambda x: x.argsort(dim=dim, descending=descending, stable=True), x)


def test_sort_nan_and_signed_zero():
    x = torch.tensor([[1.0, math.nan, -0.0, 0.0, -1.0, math.nan, math.inf, -math.inf]])
    check(lambda x: (x.sort(), x.sort(descending=True), x.sort(stable=True, descending=True)), x)
    check(lambda x: (x.sort(0), x.msort()), make((5,), ties=True))
    check(lambda x: x.sort(), torch.tensor(1.0))


@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest):
    x = make((3, 8))
    x[1, 3] = math.nan
    check(lambda x: (x.topk(3, largest=largest), x.topk(2, dim=0, largest=largest)), x)
    # ties: CPU index order is an nth_element artifact (unspecified); values must match and the
    # indices must point at them
    xi = make((3, 8), I64, ties=True)
    check(lambda x: x.topk(3, largest=largest).values, xi)
    got = torch.topk(xi.to("lazyxla"), 3, largest=largest)
    torch.testing.assert_close(xi.gather(1, got.indices.cpu()), got.values.cpu())
    # sorted=False: same set of values
    exp = torch.topk(x, 3, largest=largest, sorted=False).values.sort(1).values
    got = torch.topk(x.to("lazyxla"), 3, largest=largest, sorted=False).values.cpu().sort(1).values
    torch.testing.assert_close(got, exp, equal_nan=True)


def test_kthvalue():
    x = make((3, 6))
    check(lambda x: (x.kthvalue(2), x.kthvalue(1, 0, keepdim=True), x.kthvalue(6, -1)), x)


def test_median():
    x = make((3, 6))
    check(lambda x: (x.median(), x.median(1), x.median(0, keepdim=True), x.nanmedian(), x.nanmedian(1)), x)
    y = make((3, 5), I64)
    check(lambda y: (y.median(), y.nanmedian()), y)
    z = make((4, 5))
    z[0, 1] = z[0, 3] = math.nan
    z[3, 0] = math.nan
    check(lambda z: (z.median(), z.median(1), z.nanmedian(), z.nanmedian(1)), z)
    z[2, :] = math.nan  # all-NaN row: value NaN (the CPU index there is unspecified)
    check(lambda z: (z.median(), z.median(1), z.nanmedian(), z.nanmedian(1).values), z)


def test_mode():
    x = torch.tensor([[1, 3, 3, 2, 2, 5], [4, 4, 4, 1, 4, 0], [7, 6, 5, 4, 3, 2]])
    check(lambda x: (x.mode(), x.mode(0), x.mode(1, keepdim=True)), x)
    check(lambda x: x.mode(), x.float())


# -------------------------------------------------------------------------------------- gradients

@pytest.mark.parametrize("name,fn", [
    ("sum", lambda x: x.sum(1)),
    ("mean", lambda x: x.mean((0, 1), keepdim=True)),
    ("amax", lambda x: x.amax(1)),
    ("max_dim", lambda x: x.max(1).values * 2),
    ("var", lambda x: x.var(1)),
    ("std", lambda x: x.std()),
    ("norm", lambda x: torch.linalg.vector_norm(x, dim=1)),
    ("logsumexp", lambda x: x.logsumexp(1)),
    ("cumsum", lambda x, w: x.cumsum(1) * w),
    ("cumprod", lambda x: x.cumprod(0)),
    ("prod", lambda x: x.prod(1)),
    ("sort", lambda x, w: x.sort(1).values * w),
    ("topk", lambda x: x.topk(2).values),
])
def test_reduction_grads(name, fn):
    if fn.__code__.co_argcount == 2:
        grad_check(fn, make((3, 4)), make((4,)))
    else:
        grad_check(fn, make((3, 4)))


def test_logcumsumexp_grad_large_values():
    # the CPU kernel accumulates float32 in double; at 1e4 a float32 scan loses ~1e-3 in exp()
    from lazyxla.testing import check_grad
    x = torch.full((4, 3), 10000.0)
    x[1] = 1.0
    w = torch.tensor([1.0, -2.0, 0.5])
    check_grad(lambda t, w: torch.logcumsumexp(t, 0) * w, x, w)


_EMPTY_REDUCTIONS = {
    "max": lambda x: x.max(), "min": lambda x: x.min(), "amax": lambda x: x.amax(),
    "argmax": lambda x: x.argmax(), "max_dim": lambda x: x.max(0), "aminmax": lambda x: torch.aminmax(x),
    "kthvalue": lambda x: x.kthvalue(1, 0), "argmin_dim": lambda x: x.argmin(0),
}


@pytest.mark.parametrize("fn", _EMPTY_REDUCTIONS.values(), ids=_EMPTY_REDUCTIONS.keys())
def test_reduction_with_no_identity_over_empty_input_raises_eager_error_at_the_call(fn):
    """Eager raises at the call; XLA would only fail at sync, far from it."""
    with pytest.raises(Exception) as cpu:
        fn(torch.zeros(0, 3))
    with pytest.raises(type(cpu.value), match=re.escape(str(cpu.value).splitlines()[0])):
        fn(torch.zeros(0, 3, device=lazyxla.device()))


def test_reductions_over_empty_input_that_eager_allows_record():
    x = torch.zeros(0, 3)
    for fn in (lambda t: t.sum(), lambda t: t.max(1).values, lambda t: t.prod(0), lambda t: t.amax(1),
               lambda t: t.median(), lambda t: t.nanmedian(), lambda t: t.long().median(),
               lambda t: t.kthvalue(1).values):
        torch.testing.assert_close(fn(x.to(lazyxla.device())).cpu(), fn(x), equal_nan=True)


def test_variance_beside_a_large_mean_keeps_float32_accuracy():
    """The rounded mean's error entered the squares' sum n times: values 3e4 + U(0, 1) had a
    variance 3.4e-5 off (eager, which accumulates in double: 9e-7); the corrected two-pass form
    removes it."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(100000, generator=g) + 30000
    cols = torch.randn(4096, 64, generator=g) * 0.01 + 1000
    for t, dim in ((x, None), (cols, 0)):
        ref = t.double().var(dim)
        got = torch.var(t.to("lazyxla"), dim).cpu().double()
        assert ((got - ref).abs() / ref).max() < 2e-6
        std, mean = torch.std_mean(t.to("lazyxla"), dim)
        torch.testing.assert_close(std.cpu().double(), ref.sqrt(), rtol=2e-6, atol=0)


@pytest.mark.parametrize("scan", ["cumsum", "cumprod"])
def test_float32_scans_accumulate_in_double_as_eager(scan):
    """A float32 cumprod of 5000 values near 1 was 70 ulp off (eager's: half an ulp)."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(5000, generator=g) * 0.02 + 0.99
    got = getattr(x.to("lazyxla"), scan)(0).cpu()
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, getattr(x, scan)(0), rtol=1.2e-7, atol=0)


_INT_DTYPE_REDUCTIONS = {
    "sum": lambda t, d: t.sum(dtype=d), "sum_dim": lambda t, d: t.sum(0, dtype=d),
    "nansum": lambda t, d: t.nansum(dtype=d), "prod": lambda t, d: t.prod(dtype=d),
    "prod_dim": lambda t, d: t.prod(0, dtype=d), "cumsum": lambda t, d: t.cumsum(0, dtype=d),
    "cumprod": lambda t, d: t.cumprod(0, dtype=d)}


@pytest.mark.parametrize("fn", _INT_DTYPE_REDUCTIONS.values(), ids=_INT_DTYPE_REDUCTIONS.keys())
@pytest.mark.parametrize("x, dtype", [(torch.tensor([-1.0, 2.0, 300.0]), torch.uint8),
                                      (torch.tensor([-1.0, 2.0, 300.0]), torch.int8),
                                      (torch.tensor([60000.0, 3.0], dtype=torch.float16), torch.int8)])
def test_float_input_with_an_integer_dtype_wraps_as_eager(fn, x, dtype):
    """Eager converts the input to the dtype with its conversion (-1.0 -> 255 as uint8, 300.0 ->
    44); XLA's saturates (sum(dtype=uint8) was 1 for eager's 45)."""
    check(lambda a: fn(a, dtype), x, atol=0, rtol=0)


_HALF_DTYPE_REDUCTIONS = dict(_INT_DTYPE_REDUCTIONS, mean=lambda t, d: t.mean(dtype=d),
                              mean_dim=lambda t, d: t.mean(0, dtype=d))


@pytest.mark.parametrize("fn", _HALF_DTYPE_REDUCTIONS.values(), ids=_HALF_DTYPE_REDUCTIONS.keys())
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("values", [[2049, 1, 1, -7], [70000, -70000], [257, 1, 1]])
def test_integer_input_with_a_half_dtype_rounds_to_it_first(fn, dtype, values):
    """sum/prod/scans round the input to the half dtype first (2049 -> 2048; 70000 -> inf, so
    [70000, -70000] sums to NaN), then accumulate in float32; eager's CPU mean sums the input in
    float32 unrounded ([70000, -70000] -> 0)."""
    check(lambda a: fn(a, dtype), torch.tensor(values, dtype=torch.int32), atol=0, rtol=0)


@pytest.mark.parametrize("dim", [(), []])
@pytest.mark.parametrize("keepdim", [False, True])
def test_nansum_and_nanmean_over_an_empty_dim_list_reduce_every_dim(dim, keepdim):
    """Eager reduces every dim for dim=() (PyTorch's meta kernel of nansum reduced none: the
    lowering's 0-d result did not fit its (2, 2) shape)."""
    x = torch.tensor([[1.0, float("nan")], [3.0, 4.0]])
    check(lambda a: (torch.nansum(a, dim, keepdim), torch.nanmean(a, dim, keepdim),
                     torch.nansum(a.int(), dim, keepdim), torch.nansum(a, dim, keepdim, dtype=F64)),
          x, atol=0, rtol=0)
    assert torch.nansum(x.to(lazyxla.device()), dim=()).shape == ()


_SEARCH_ERRORS = {
    "bucketize_2d": lambda v, b: torch.bucketize(v, b.reshape(2, 2)),
    "bucketize_0d": lambda v, b: torch.bucketize(v, b[0]),
    "bucketize_scalar_0d": lambda v, b: torch.bucketize(0.5, b[0]),
    "bucketize_out_int32": lambda v, b: torch.bucketize(v, b, out=torch.empty(0, dtype=torch.int32, device=v.device)),
    "searchsorted_0d": lambda v, b: torch.searchsorted(b[0], v),
    "searchsorted_0d_0d": lambda v, b: torch.searchsorted(b[0], v[0]),
    "searchsorted_2d_scalar": lambda v, b: torch.searchsorted(b.reshape(2, 2), 0.5),
    "searchsorted_2d_vs_3d": lambda v, b: torch.searchsorted(b.reshape(2, 2), v.reshape(2, 1, 1)),
    "sorter_int32": lambda v, b: torch.searchsorted(b, v, sorter=torch.arange(4, dtype=torch.int32, device=v.device)),
    "sorter_float_2d": lambda v, b: torch.searchsorted(b.reshape(2, 2), v.reshape(2, 1), sorter=b.reshape(2, 2)),
    "sorter_size": lambda v, b: torch.searchsorted(b, v, sorter=torch.arange(3, device=v.device)),
    "side_opposite": lambda v, b: torch.searchsorted(b, v, side="left", right=True),
    "out_int32": lambda v, b: torch.searchsorted(b, v, out=torch.empty(0, dtype=torch.int32, device=v.device)),
    "out_int64_with_out_int32": lambda v, b: torch.searchsorted(b, v, out_int32=True, out=torch.empty(2, dtype=torch.int64, device=v.device)),
    "out_float_scalar": lambda v, b: torch.searchsorted(b, 0.5, out=torch.empty((), device=v.device)),
}


@pytest.mark.parametrize("fn", _SEARCH_ERRORS.values(), ids=_SEARCH_ERRORS.keys())
def test_searchsorted_and_bucketize_argument_errors_match_eager(fn):
    """searchsorted_pre_check's errors (and bucketize's 1-d boundaries), in eager's words: they
    gave values, JAX errors or an IndexError."""
    v, b = torch.tensor([0.5, 1.5]), torch.tensor([0.0, 1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError) as cpu:
        fn(v, b)
    with pytest.raises(RuntimeError) as dev:
        fn(v.to(lazyxla.device()), b.to(lazyxla.device()))
        lazyxla.sync()
    assert str(dev.value) == str(cpu.value)
