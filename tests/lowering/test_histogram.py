import numpy as np
import pytest
import torch

import lazyxla
from lazyxla.testing import check

EXACT = dict(atol=0, rtol=0)


def _with_edges(x, edges):
    """x plus every edge and its float neighbours: the values whose bin depends on the rule."""
    e = edges.to(x.dtype)
    up = torch.nextafter(e, torch.full_like(e, float("inf")))
    down = torch.nextafter(e, torch.full_like(e, -float("inf")))
    v = torch.cat([x, e, up, down])
    return v[torch.randperm(v.numel(), generator=torch.Generator().manual_seed(0))]


def test_bin_count_edges_and_boundary_values():
    torch.manual_seed(0)
    x = torch.randn(40)
    # edges from the data: 7 bins (min/max are data points, so every edge value is in range)
    data = _with_edges(x, torch.histogram(x, 7).bin_edges)
    check(lambda a: torch.histogram(a, 7), data, **EXACT)
    # a range whose edges are inexact in float32; NaN and infinities are never counted
    rng = (-1.1, 0.7)
    data = _with_edges(x, torch.histogram(x, 9, range=rng).bin_edges)
    data = torch.cat([data, torch.tensor([float("nan"), float("inf"), -float("inf")])])
    check(lambda a: torch.histogram(a, 9, range=rng), data, **EXACT)


def test_bin_count_float64_weight_density():
    torch.manual_seed(1)
    x = _with_edges(torch.randn(31, dtype=torch.float64),
                    torch.histogram(torch.zeros(1, dtype=torch.float64), 6, range=(-0.3, 1.9)).bin_edges)
    w = torch.rand(x.shape, dtype=torch.float64)
    check(lambda a, b: torch.histogram(a.reshape(-1, 2), 6, range=(-0.3, 1.9), weight=b.reshape(2, -1),
                                       density=True), x, w)


def test_given_edges_sorted_repeated_and_unsorted():
    torch.manual_seed(2)
    x = torch.randn(60)
    sorted_edges = torch.tensor([-1.0, -0.2, 0.1, 0.1, 0.5, 2.0])
    x = _with_edges(x, sorted_edges)
    f = lambda a, e, w: torch.histogram(a, e, weight=w)  # noqa: E731
    check(f, x, sorted_edges, torch.rand(x.shape), **EXACT)
    # unsorted edges: eager's binary search lands where its probes lead; so must ours
    check(f, x, torch.tensor([-1.5, 0.8, -0.3, 0.2, 3.0, 0.1, 2.0]), torch.ones(x.shape), **EXACT)


def test_histogramdd_counts_range_weight_density_and_edges():
    torch.manual_seed(3)
    pts = torch.randn(40, 3)
    pts[:3] = torch.tensor([[float("nan"), 0.0, 0.0], [0.0, float("inf"), 0.0], [5.0, 5.0, 5.0]])
    w = torch.rand(40)

    def dd(a, b):
        h1, e1 = torch.histogramdd(a[3:], [3, 4, 2])
        h2, e2 = torch.histogramdd(a, [2, 3, 4], range=[-1.0, 1.0, 0.0, 2.0, -3.0, 0.3], weight=b,
                                   density=True)
        return h1, e1, h2, e2
    check(dd, pts, w)
    e0, e1 = torch.tensor([-1.0, 0.0, 0.4, 1.0]), torch.tensor([-2.0, 0.5, 1.0, 3.0])
    check(lambda a, b, c: torch.histogramdd(a[:, :2], [b, c]), pts, e0, e1, **EXACT)


def test_degenerate_ranges():
    # equal min and max: widened by 0.5 each way; so far from 0 that the widening rounds away
    # (all edges equal), eager's division by zero puts everything in bin 1 (the only bin of one)
    def f(two, big, empty, x):
        return (torch.histogram(two, 4), torch.histogram(big, 4), torch.histogram(big, 1),
                torch.histogram(empty, 3),  # no data: edges over [0, 1]
                torch.histogram(x, 4, range=(0.5, 0.5)))
    check(f, torch.full((3,), 2.0), torch.full((3,), 1e8), torch.zeros(0), torch.tensor([0.1, 0.5, 0.9]),
          **EXACT)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_and_bfloat16(dtype):
    torch.manual_seed(4)
    rng = (-0.37, 1.21)
    x = _with_edges(torch.randn(50).to(dtype), torch.histogram(torch.zeros(1, dtype=dtype), 11,
                                                                range=rng).bin_edges)

    def f(a, e):
        return torch.histogram(a, 11, range=rng), torch.histogram(a, e)
    check(f, x, torch.tensor([-1.0, -0.1, 0.3, 2.0]).to(dtype), **EXACT)


def _raises_like_eager(fn, *args):
    with pytest.raises(Exception) as expected:
        fn(*args)
    dev = lazyxla.device()
    with pytest.raises(type(expected.value)) as actual:
        fn(*[a.to(dev) if isinstance(a, torch.Tensor) else a for a in args])
    assert str(actual.value) == str(expected.value)


@pytest.mark.parametrize("case", [
    lambda x, y: torch.histogram(x, 0),
    lambda x, y: torch.histogram(x, 3, range=(0.0, 1.0, 2.0)),
    lambda x, y: torch.histogram(x, 3, range=(0.0, float("inf"))),
    lambda x, y: torch.histogram(x, 3, range=(2.0, 1.0)),
    lambda x, y: torch.histogram(x, 3, weight=torch.ones(5, device=x.device)),
    lambda x, y: torch.histogram(x, 3, weight=y),
    lambda x, y: torch.histogram(x.long(), 3),
    lambda x, y: torch.histogram(x.long(), 3, range=(0.0, 1.0)),
    lambda x, y: torch.histogram(x.half(), 3),
    lambda x, y: torch.histogram(x, y),
    lambda x, y: torch.histogram(x, x[:1]),
    lambda x, y: torch.histogram(x, x.reshape(2, 3)),
    lambda x, y: torch.histogramdd(x, [3]),
    lambda x, y: torch.histogramdd(x.reshape(3, 2), [3]),
    lambda x, y: torch.histogramdd(x.reshape(3, 2), [3, 3], range=[0.0, 1.0]),
    lambda x, y: torch.histogramdd(x.reshape(3, 2), [3, 3], weight=x.reshape(2, 3)),
    lambda x, y: torch.histogramdd(x.reshape(3, 2), [x[:3], y[:3]]),
    lambda x, y: torch.histc(x, 4, 0.0, float("inf")),
    lambda x, y: torch.histc(x, 4, float("nan"), 1.0),
    lambda x, y: torch.histc(x, 4, 2.0, 1.0),
])
def test_argument_errors_match_eager(case):
    _raises_like_eager(case, torch.arange(6.0), torch.ones(6, dtype=torch.float64))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_histc_of_data_with_a_nan_or_inf_and_no_range_raises_at_the_read(bad):
    # eager takes the data's own range, and refuses it when it is not finite
    x = torch.tensor([1.0, bad, 2.0])
    with pytest.raises(RuntimeError, match="range of .* is not finite"):
        torch.histc(x, 4)
    out = torch.histc(x.to(lazyxla.device()), 4)  # computed at the call, checked at the read
    with pytest.raises(RuntimeError, match=r"torch.histc: range of \[min, max\] is not finite"):
        out.cpu()
    check(lambda a: torch.histc(a, 4, 0.0, 3.0), x, **EXACT)  # a given range counts the finite


def test_histc_random_data():
    torch.manual_seed(5)
    x = torch.randn(200)
    check(lambda a: (torch.histc(a, 7), torch.histc(a, 5, -1.0, 0.8)), x, **EXACT)


def test_histc_boundary_values():
    """XLA turns a division by a scalar into a multiplication by its reciprocal, which moved
    values on a bin boundary to the neighbouring bin."""
    lo, hi, bins = np.float32(-0.13787562), np.float32(0.34955005), 5
    x = torch.from_numpy((lo + (hi - lo) * np.arange(bins) / bins).astype(np.float32))
    check(lambda a: torch.histc(a, bins, float(lo), float(hi)), x, **EXACT)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int16])
@pytest.mark.parametrize("args", [(7, 0, 7), (4, 0, 7), (5, 1, 5), (3,), (4, 0.5, 6.9)],
                         ids=["bins=range", "4 bins", "inner range", "data range", "fractional range"])
def test_integer_histc_counts_as_cuda_does(dtype, args):
    """The CPU has no integer histc; CUDA's computes each bin as (x - min) * bins // (max - min)
    in integers, over the range truncated to the dtype, counts in the input dtype. For these
    small integers that is the float64 histogram of the truncated range."""
    x = torch.randint(0, 7, (50,), generator=torch.Generator().manual_seed(len(args))).to(dtype)
    lo, hi = (int(args[1]), int(args[2])) if len(args) > 1 else (0, 0)
    got = torch.histc(x.to(lazyxla.device()), *args).cpu()
    assert got.dtype == dtype
    assert torch.equal(got, torch.histc(x.double(), args[0], lo, hi).to(dtype))


def test_integer_histc_of_expert_ids_is_their_bincount():
    """Hugging Face's MoE layers count tokens per expert this way on every device but the CPU."""
    experts = torch.randint(0, 8, (64, 2), generator=torch.Generator().manual_seed(0))
    got = torch.histc(experts.reshape(-1).int().to(lazyxla.device()), bins=8, min=0, max=8).cpu()
    assert torch.equal(got, torch.bincount(experts.reshape(-1), minlength=8).int())
    one_value = torch.full((5,), 3, dtype=torch.int32)  # an empty range widened by 1 each way
    assert torch.histc(one_value.to(lazyxla.device()), 4).cpu().tolist() == [0, 0, 5, 0]


def test_bool_histc_raises_eagers_error():
    _raises_like_eager(lambda x, y: torch.histc(x.bool(), 4), torch.arange(6.0), None)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("case", [
    lambda x: torch.histogram(x[:, 1], 3),
    lambda x: torch.histogramdd(x, [2, 3]),
    lambda x: torch.ops.aten._histogramdd_bin_edges(x, [2, 3]),
])
def test_histogram_of_data_with_a_nan_or_inf_and_no_range_raises_at_the_read(case, bad):
    """Eager refuses the data's own range when it is not finite; lazyxla gave NaN edges and zero
    counts. Checked when the program has run, as histc's (the range's values are not in the words)."""
    x = torch.tensor([[1.0, 2.0], [0.0, bad], [3.0, 1.0]])
    with pytest.raises(RuntimeError, match="range .* is not finite") as cpu:
        case(x)
    words = str(cpu.value).split(" range ")[0]  # (torch.histogramdd: dimension k's)
    out = case(x.to(lazyxla.device()))
    with pytest.raises(RuntimeError) as dev:
        lazyxla.sync()
    assert str(dev.value).startswith(words + " range [min, max] is not finite"), (dev.value, out)
    check(lambda a: torch.histogramdd(a, [2, 3], range=[0.0, 3.0, 0.0, 3.0]), x, **EXACT)  # a range is fine
