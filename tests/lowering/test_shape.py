import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla.testing import check, check_grad


def test_cat_stack():
    a, b = torch.randn(2, 3), torch.randn(1, 3)
    check(lambda a, b, e: torch.cat([a, b, e]), a, b, torch.empty(0))
    check(lambda a, b: torch.cat([a, b.int()], 0), a, b)
    check(lambda a, b: torch.cat([a, a.double()], 1), a, b)
    check(lambda a, b: torch.stack([a, a * 2], 1), a, b)
    check_grad(lambda a, b: torch.cat([a, b]) * 3, a, b)


def test_flip_roll_repeat():
    x = torch.randn(3, 4)
    check(lambda x: x.flip(0, 1), x)
    check(lambda x: x.roll(1, 0) + x.roll(-2), x)
    check(lambda x: x.repeat(2, 1, 3), x)
    check(lambda x: x.repeat_interleave(2, dim=1), x)
    check(lambda x, r: x.repeat_interleave(r, dim=0), x, torch.tensor([1, 0, 2]), allow_fallback=True)


def test_padding():
    x = torch.randn(2, 3, 5)
    check(lambda x: F.pad(x, (1, 2)) + 0, x)
    check(lambda x: F.pad(x, (1, -2, 0, 1), value=3.0), x)
    check(lambda x: F.pad(x, (2, 1), mode="reflect"), x)
    check(lambda x: F.pad(x[None], (2, 1, 1, 2), mode="reflect"), x)
    check(lambda x: F.pad(x, (2, 1), mode="replicate"), x)
    check(lambda x: F.pad(x[None], (2, 1, 1, 2), mode="replicate"), x)
    for mode in ("reflect", "replicate"):
        check_grad(lambda x, w: F.pad(x, (2, 1), mode=mode) * w, x, torch.arange(8.))
        check_grad(lambda x, w: F.pad(x[None], (2, 1, 1, 2), mode=mode) * w, x, torch.arange(8.))
    check_grad(lambda x, w: F.pad(x, (1, 2)) * w, x, torch.arange(8.))


def test_factories():
    d = lazyxla.device()
    for dev_fn in [lambda dev: torch.arange(10, device=dev), lambda dev: torch.arange(1, 3, 0.1, device=dev),
                   lambda dev: torch.arange(-5, 7, 3, dtype=torch.int64, device=dev),
                   lambda dev: torch.linspace(-1, 2, 7, device=dev), lambda dev: torch.linspace(0, 10, 4, dtype=torch.int64, device=dev),
                   lambda dev: torch.logspace(0, 2, 5, device=dev), lambda dev: torch.eye(3, 4, device=dev),
                   lambda dev: torch.linspace(1.5, 2.5, 1, dtype=torch.int32, device=dev),  # one step: start
                   lambda dev: torch.linspace(-3, 7, 1, device=dev),
                   lambda dev: torch.tril_indices(4, 3, -1, device=dev), lambda dev: torch.triu_indices(3, 4, 1, device=dev)]:
        torch.testing.assert_close(dev_fn(d).cpu(), dev_fn("cpu"))


@pytest.mark.parametrize("start,end,steps,base,dtype", [
    (0, 1.2, 2, 10.0, torch.int64),        # integers: start and end truncated first (10, not 15)
    (-1.5, 2.7, 5, 2.0, torch.int32),
    (1.2, 0.7, 4, 10.0, torch.uint8),       # the difference of small integers does not wrap
    (1.5, 3, 1, 10.0, torch.int64),         # one step: base ** start, start not truncated
    (0, 4, 4, 10.0, torch.bfloat16),        # exponents in double, not in the dtype
    (1.2, 4, 3, 10.0, torch.float16),       # end - start rounded to the dtype (a tie, to even)
    (0.1, 0.7, 33, 3.7, torch.float32),
    (-2, 3, 6, -2.0, torch.float64),
])
def test_logspace_bit_exact_as_eagers_kernel(start, end, steps, base, dtype):
    """PyTorch's CPU kernel casts start and end to the dtype, takes their difference there and
    computes exponents and powers in double (OpInfo's full sweep: int64 gave 15 for 10)."""
    got = torch.logspace(start, end, steps, base=base, dtype=dtype, device=lazyxla.device()).cpu()
    assert torch.equal(got, torch.logspace(start, end, steps, base=base, dtype=dtype))


LINSPACES = [(-3.3, 7.1, 50), (1e-3, 5, 100), (-59.201944810753204, -41.33766896673898, 242), (2, -5, 33),
             (float("inf"), 1, 3), (1e308, -1e308, 5), (0, float("nan"), 3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_linspace_equals_eager_bit_for_bit(dtype):
    """Eager computes each element as one fused multiply-add (start + step * i for the lower half,
    end - step * (n - 1 - i) above): a plain multiply and add is an ulp off in a third of them."""
    for start, end, steps in LINSPACES:
        try:
            expected = torch.linspace(start, end, steps, dtype=dtype)
        except RuntimeError as e:  # 1e308 overflows the narrower dtypes
            with pytest.raises(RuntimeError, match=str(e)):
                torch.linspace(start, end, steps, dtype=dtype, device=lazyxla.device())
            continue
        got = torch.linspace(start, end, steps, dtype=dtype, device=lazyxla.device()).cpu()
        torch.testing.assert_close(got, expected, atol=0, rtol=0, equal_nan=True)


def test_scatters_and_view_backwards():
    x = torch.randn(4, 4)
    check(lambda x, s: torch.slice_scatter(x, s, 0, 1, 3), x, torch.zeros(2, 4))
    check(lambda x, s: torch.select_scatter(x, s, 1, -1), x, torch.ones(4))
    check(lambda x, s: torch.diagonal_scatter(x, s, 1), x, torch.ones(3))
    check(lambda x, s: torch.as_strided_scatter(x, s, (2, 2), (4, 1), 1), x, torch.ones(2, 2))
    check_grad(lambda x: x[1:3, ::2] * 2 + x[:, 1].sum() + x.diagonal().sum(), x)


def test_search_and_grid():
    s = torch.tensor([1.0, 2.0, 2.0, 5.0])
    v = torch.tensor([[0.5, 2.0], [5.0, 7.0]])
    check(lambda s, v: torch.searchsorted(s, v), s, v)
    check(lambda s, v: torch.searchsorted(s, v, right=True, out_int32=True), s, v)
    check(lambda s, v: torch.searchsorted(torch.stack([s, s * 2]), v, side="right"), s, v)
    check(lambda s, v: torch.bucketize(v, s) + torch.bucketize(v, s, right=True), s, v)
    check(lambda s, v: torch.meshgrid(s, v[0], indexing="ij"), s, v)


def test_searchsorted_of_empty_batched_sequences():
    """A (0, 0) sequence with (0, 0) values (OpInfo's full sweep): the batched reshape of an empty
    sequence raised ZeroDivisionError while lowering."""
    check(lambda s, v: torch.searchsorted(s, v), torch.empty(0, 0), torch.empty(0, 0))
    check(lambda s, v: torch.searchsorted(s, v), torch.empty(2, 0), torch.ones(2, 3))


def test_searchsorted_with_nan_and_unsorted_input_as_eager():
    """eager's binary search compares with !(x >= v) and !(x > v): a NaN value lands past the end
    and a NaN in the sequence counts as below any value; jnp.searchsorted ordered NaN last (a NaN
    value gave len - 1 against a sequence ending in NaN). On an unsorted sequence, eager's result
    is whatever its steps find: the same steps give the same answer."""
    nan = float("nan")
    v = torch.tensor([nan, 2.5, 0.0, 4.0, float("inf")])
    for s in (torch.tensor([1.0, 2.0, 3.0, nan]), torch.tensor([nan, 1.0, nan, 2.0, 3.0]),
              torch.tensor([3.0, -1.0, 2.0, 0.0, 5.0, 1.0]), torch.tensor([nan])):
        for right in (False, True):
            check(lambda s, v: torch.searchsorted(s, v, right=right), s, v)
            check(lambda s, v: torch.bucketize(v, s, right=right), s, v)
    check(lambda s, v: torch.searchsorted(s, v), torch.tensor([[1.0, nan], [nan, nan]]),
          torch.tensor([[nan, 1.0], [0.0, 1.0]]))


def test_a_0d_value_is_searched_for_in_the_dtype_eager_promotes_to():
    """A Scalar or a 0-d tensor takes the boundaries' dtype where its kind is not higher, as
    PyTorch's promotion gives: 300 against int8 boundaries is 44, 50.50000001 against float32 ones
    is 50.5; a float Scalar against integer boundaries is compared as float32. lazyxla compared
    in JAX's promotion of the two dtypes (int64, float64) and gave other buckets."""
    b8, b32 = torch.tensor([-100, 1, 50, 100], dtype=torch.int8), torch.tensor([1.5, 50.5, 100.5])
    bi = torch.tensor([1, 5, 16777217], dtype=torch.int32)
    for b, v in ((b8, 300), (b8, -129), (b32, 50.50000001), (bi, 16777216.5), (b8, 2.5), (b8, True)):
        for right in (False, True):
            check(lambda b: torch.bucketize(v, b, right=right), b)
            check(lambda b: torch.searchsorted(b, v, right=right), b)
            check(lambda b, t: torch.bucketize(t, b, right=right), b, torch.tensor(v))
            check(lambda b, t: torch.searchsorted(b, t.reshape(1), right=right), b, torch.tensor(v))
    check(lambda b, t: torch.bucketize(t, b), b8, torch.tensor(300.5, dtype=torch.float64))
    check(lambda b, t: torch.bucketize(t, b), b8, torch.tensor([300, 2]))


def test_replicate_pad_negative():
    # Cropping beyond the replicated border: every output reads the clamped input position.
    for x, pad in ((torch.randn(5, 3, 4, 4), (-4, 5, 0, 0)), (torch.randn(6, 2, 4, 4), (0, 0, 2, -4)),
                   (torch.randn(5, 6, 4, 4), (5, -4, -4, 3)), (torch.randn(2, 3, 5), (-1, 2))):
        check(lambda a: F.pad(a, pad, mode="replicate"), x)
        check_grad(lambda a: F.pad(a, pad, mode="replicate"), x)


@pytest.mark.parametrize("view, src", [
    (lambda x: x[2], torch.tensor([1.5, -2.0, 3.25, 7.0])),           # a row: one start
    (lambda x: x[1:4, 1], torch.tensor(2.5)),                          # broadcast from 0-dim
    (lambda x: x.t(), torch.arange(24, dtype=torch.int64).reshape(4, 6)),  # cast, transposed
    (lambda x: x.t()[1:], torch.ones(3, 6, dtype=torch.float64)),     # transposed, offset
])
def test_functional_copy_is_src_in_the_views_shape_and_dtype(view, src):
    """aten.copy (functionalization's copy_: how a compiled graph writes through a view) gives
    src broadcast and cast to the view's shape and dtype, as eager; its result is a fresh tensor
    at offset 0 (eager clones the view's storage window, whose offset is the view's start)."""
    x = torch.randn(6, 4)
    want, got = check(lambda x, s: torch.ops.aten.copy.default(view(x), s), x, src)
    assert got.dtype == want.dtype == torch.float32 and got.shape == want.shape
    lazy = torch.ops.aten.copy.default(view(x.to(lazyxla.device())), src.to(lazyxla.device()))
    assert lazy.storage_offset() == 0
    if want.storage_offset() == 0:
        assert lazy.stride() == want.stride()
