"""Gradients of prod and cumprod on the device: eager's values with no, one or several zeros, with
no host read and no CPU fallback (PyTorch's own formulas look at the zeros on the host)."""
import math

import pytest
import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()

VALUES = {
    "no zero": [[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]],
    "one zero": [[1.5, 0.0, 3.0], [0.5, 4.0, -1.0]],
    "zeros in a row": [[0.0, 0.0, 3.0], [0.5, 4.0, -1.0]],
    "zeros apart": [[0.0, 2.0, 3.0], [0.5, 0.0, -1.0]],
    "zeros last": [[1.0, 2.0, 0.0], [0.0, 3.0, 0.0]],
}
REDUCTIONS = {
    "all": lambda x: x.prod(),
    "dim 1": lambda x: x.prod(1),
    "dim 0 keepdim": lambda x: x.prod(0, keepdim=True),
    "dim -1": lambda x: x.prod(-1),
    "dtype": lambda x: x.prod(1, dtype=torch.float64),
    "cumprod 1": lambda x: x.cumprod(1),
    "cumprod 0": lambda x: x.cumprod(0),
    "cumprod -1 dtype": lambda x: x.cumprod(-1, dtype=torch.float64),
}


def _grads(values, reduce, device, create_graph):
    """The gradient of sum(w * reduce(x)) (w a fixed ramp), and with create_graph the gradient of
    the gradient's squared norm."""
    x = torch.tensor(values).to(device).requires_grad_()
    y = reduce(x)
    w = torch.linspace(0.5, 2.0, y.numel()).reshape(y.shape).to(device=device, dtype=y.dtype)
    g, = torch.autograd.grad((y * w).sum(), x, create_graph=create_graph)
    if not create_graph:
        return (g,)
    gg, = torch.autograd.grad((g * g).sum(), x)
    return g.detach(), gg


@pytest.mark.parametrize("create_graph", [False, True], ids=["grad", "grad of grad"])
@pytest.mark.parametrize("reduction", list(REDUCTIONS))
@pytest.mark.parametrize("case", list(VALUES))
def test_gradients_of_products_match_eager_without_reading_the_device(case, reduction, create_graph):
    lazyxla.sync()
    reads = metrics.metric_count("TransferFromDeviceTime")
    fallbacks = set(metrics.executed_fallback_ops())
    got = _grads(VALUES[case], REDUCTIONS[reduction], D, create_graph)
    lazyxla.sync()
    assert metrics.metric_count("TransferFromDeviceTime") == reads
    assert set(metrics.executed_fallback_ops()) == fallbacks
    got = [t.cpu() for t in got]
    want = _grads(VALUES[case], REDUCTIONS[reduction], "cpu", create_graph)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)


def test_prod_gradient_of_a_scalar_and_of_an_empty_tensor():
    x = torch.tensor(3.0).to(D).requires_grad_()
    x.prod().backward()
    assert x.grad.cpu().item() == 1.0
    e = torch.zeros(0, 3).to(D).requires_grad_()
    e.prod(1).sum().backward()
    assert e.grad.shape == (0, 3)
    e2 = torch.zeros(2, 0).to(D).requires_grad_()
    e2.prod(1).sum().backward()  # prod over an empty dim is 1: no elements to differentiate
    assert e2.grad.shape == (2, 0)


@pytest.mark.parametrize("reduce", [lambda x: x.prod(), lambda x: x.cumprod(0)], ids=["prod", "cumprod"])
def test_gradients_of_complex_products_match_eager(reduce):
    vals = torch.tensor([1 + 2j, 0.5 - 1j, 0j, -3 + 0j])
    x, xd = vals.clone().requires_grad_(), vals.to(D).requires_grad_()
    reduce(x).abs().sum().backward()
    reduce(xd).abs().sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_cumprod_gradient_of_a_scalar_and_of_single_elements():
    x = torch.tensor(3.0).to(D).requires_grad_()
    x.cumprod(0).backward()
    assert x.grad.cpu().item() == 1.0
    r = torch.tensor([[2.0], [0.0]]).to(D).requires_grad_()
    (r.cumprod(1) * 3).sum().backward()
    assert r.grad.cpu().tolist() == [[3.0], [3.0]]


def test_prod_without_grad_records_plainly():
    x = torch.tensor([2.0, 3.0]).to(D)
    assert x.prod().cpu().item() == 6.0
    with torch.no_grad():
        assert x.requires_grad_().prod(0).cpu().item() == 6.0


def test_compiled_product_gradients_match_eager():
    def f(x, w):
        return (x * w).prod(1).sum() + x.prod() + (x.cumprod(1) * w).sum()
    compiled = torch.compile(f, backend="lazyxla")
    w = torch.tensor([0.5, 2.0])
    for values in ([[1.5, -2.0], [3.0, 0.5]], [[0.0, 2.0], [3.0, 0.5]]):
        x, xd = torch.tensor(values, requires_grad=True), torch.tensor(values).to(D).requires_grad_()
        f(x, w).backward()
        compiled(xd, w.to(D)).backward()
        torch.testing.assert_close(xd.grad.cpu(), x.grad)


def _no_reads_grads(fn, tensors, device):
    """Gradients of sum(w * fn(*tensors)) with respect to the float tensors, on `device`; on the
    device, asserts that nothing was read back and nothing ran on the CPU."""
    moved = [t.to(device).requires_grad_() if t.is_floating_point() else t.to(device) for t in tensors]
    lazyxla.sync()
    reads, fallbacks = metrics.metric_count("TransferFromDeviceTime"), set(metrics.executed_fallback_ops())
    out = fn(*moved)
    w = torch.linspace(-1.0, 2.0, out.numel()).reshape(out.shape).to(device)
    leaves = [t for t in moved if t.requires_grad]
    grads = torch.autograd.grad((out * w).sum(), leaves)
    if device != "cpu":
        lazyxla.sync()
        assert metrics.metric_count("TransferFromDeviceTime") == reads
        assert set(metrics.executed_fallback_ops()) == fallbacks
    return [g.cpu() for g in grads]


TIES = torch.tensor([[1.0, 5.0, -2.0], [5.0, 0.5, 5.0]])
NAN = torch.tensor([[1.0, float("nan"), -2.0], [float("nan"), 0.5, 3.0]])


@pytest.mark.parametrize("values", [TIES, -TIES, NAN], ids=["ties", "negated ties", "nan"])
@pytest.mark.parametrize("op", ["max", "min", "median", "nanmedian"])
def test_whole_tensor_selection_gradients_match_eager(op, values):
    fn = lambda x: getattr(x, op)()  # noqa: E731
    got = _no_reads_grads(fn, [values], D)
    want = _no_reads_grads(fn, [values], "cpu")
    torch.testing.assert_close(got, want, equal_nan=True)


MASK = torch.tensor([[True, False, True], [False, True, True]])


@pytest.mark.parametrize("mask, source_shape, x_shape", [
    (MASK, (2, 3), (2, 3)),            # source larger than the mask's count: its tail gets 0
    (MASK, (4,), (2, 3)),              # exactly the count
    (MASK[0], (2, 2), (2, 3)),         # the mask broadcast over x
    (MASK, (5,), (3,)),                # x broadcast over the mask
    (torch.zeros(2, 3, dtype=torch.bool), (3,), (2, 3)),
], ids=["spare source", "exact", "mask broadcast", "x broadcast", "nothing selected"])
def test_masked_scatter_gradients_match_eager(mask, source_shape, x_shape):
    x = torch.linspace(-1.0, 1.0, math.prod(x_shape)).reshape(x_shape)
    source = torch.linspace(2.0, 3.0, math.prod(source_shape)).reshape(source_shape)
    fn = lambda x, m, s: x.masked_scatter(m, s)  # noqa: E731
    got = _no_reads_grads(fn, [x, mask, source], D)
    want = _no_reads_grads(fn, [x, mask, source], "cpu")
    torch.testing.assert_close(got, want)


def test_masked_fill_with_a_tensor_value_that_needs_grad_matches_eager():
    fn = lambda x, m, v: x.masked_fill(m, v) * 2  # noqa: E731
    args = [torch.linspace(-1.0, 1.0, 6).reshape(2, 3), MASK, torch.tensor(0.75)]
    torch.testing.assert_close(_no_reads_grads(fn, args, D), _no_reads_grads(fn, args, "cpu"))


def test_compiled_selection_gradients_match_eager():
    def f(x, m, s):
        return x.max() * x.min() + x.masked_scatter(m, s).sum() * x.median()
    compiled = torch.compile(f, backend="lazyxla")
    args = [TIES, MASK, torch.arange(6.0)]
    want = _no_reads_grads(f, args, "cpu")
    got = _no_reads_grads(compiled, args, D)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dim, index", [(0, [1, 1]), (1, [0, -1]), (-1, [2])],
                         ids=["repeated index", "negative index", "last dim"])
def test_index_fill_with_a_tensor_value_that_needs_grad_matches_eager(dim, index):
    """(Eager's own backward fails on a negative index, `INDICES element is out of DATA bounds`:
    the reference runs it wrapped.)"""
    def fill(idx):
        return lambda x, v: x.index_fill(dim, torch.tensor(idx, device=x.device), v) * 3
    args = [torch.linspace(-1.0, 1.0, 6).reshape(2, 3), torch.tensor(0.75)]
    wrapped = [i % args[0].shape[dim] for i in index]
    torch.testing.assert_close(_no_reads_grads(fill(index), args, D),
                               _no_reads_grads(fill(wrapped), args, "cpu"))


ROWS = torch.tensor([[True, False, True, True], [False, False, True, False]])  # 4 selected


def _put(index, value_shape, accumulate=False, inplace=True):
    """h = x * 2 (a non-leaf); h[index] = v (index_put_), or index_put's functional form."""
    def fn(x, v):
        h = x * 2
        idx = tuple(i if i is None or isinstance(i, slice) else i.to(x.device) for i in index)
        if inplace and not accumulate:
            h[idx] = v
            return h
        full = [None if isinstance(i, slice) else i for i in idx]
        return h.index_put_(full, v, accumulate) if inplace else torch.index_put(h, full, v, accumulate)
    x = torch.linspace(-1.0, 1.0, 2 * 4 * 3).reshape(2, 4, 3)
    v = torch.linspace(0.5, 1.5, math.prod(value_shape)).reshape(value_shape)
    return fn, [x, v]


@pytest.mark.parametrize("index, value_shape, accumulate, inplace", [
    ((ROWS,), (3,), False, True),          # one row for every selected element (wav2vec2)
    ((ROWS,), (), False, True),            # one number
    ((ROWS,), (4, 3), False, True),        # a row per selected element
    ((ROWS,), (4, 1), False, True),        # a number per selected element
    ((ROWS,), (3,), True, True),           # accumulate
    ((ROWS,), (4, 3), False, False),       # functional index_put
    ((slice(None), ROWS[0]), (2, 1, 3), False, True),  # a mask after a slice: x[:, mask] = v
    ((torch.zeros(2, 4, dtype=torch.bool),), (3,), False, True),  # nothing selected
], ids=["row", "number", "rows", "numbers", "accumulate", "functional", "after a slice", "empty"])
def test_index_put_with_a_mask_gradients_match_eager(index, value_shape, accumulate, inplace):
    fn, args = _put(index, value_shape, accumulate, inplace)
    torch.testing.assert_close(_no_reads_grads(fn, args, D), _no_reads_grads(fn, args, "cpu"))


def test_index_put_with_integer_indices_keeps_pytorchs_formula():
    fn, args = _put((torch.tensor([1, 0, 1]), torch.tensor([3, 2, 3])), (3, 3), accumulate=True)
    torch.testing.assert_close(_no_reads_grads(fn, args, D), _no_reads_grads(fn, args, "cpu"))


def test_compiled_index_put_with_a_mask_matches_eager():
    fn, args = _put((ROWS,), (3,))
    compiled = torch.compile(fn, backend="lazyxla")
    torch.testing.assert_close(_no_reads_grads(compiled, args, D), _no_reads_grads(fn, args, "cpu"))


def test_index_put_with_indices_on_the_cpu_keeps_its_gradient():
    """Indexing takes CPU indices with device tensors (`h[cpu_mask] = ...`): so does the backward."""
    def fn(x, v):
        h = x * 1
        h[torch.tensor([0, 2]), torch.tensor([1, 3])] = v
        mask = torch.tensor([True, False, True])
        h[mask] = v[1] * 2
        h[mask, 1:] = v[0]
        return h
    args = [torch.arange(12.0).reshape(3, 4), torch.tensor([5.0, 6.0])]
    torch.testing.assert_close(_no_reads_grads(fn, args, D), _no_reads_grads(fn, args, "cpu"))


@pytest.mark.parametrize("write", ["masked_scatter", "masked_fill"])
def test_masked_writes_with_a_0_dim_cpu_mask_keep_their_gradients(write):
    """A 0-dim CPU tensor goes with any device, as a mask too."""
    def fn(x, s):
        mask = torch.tensor(True)
        return x.masked_scatter(mask, s) if write == "masked_scatter" else x.masked_fill(mask, s[0])
    args = [torch.linspace(-1.0, 1.0, 6).reshape(2, 3), torch.linspace(2.0, 3.0, 6)]
    torch.testing.assert_close(_no_reads_grads(fn, args, D), _no_reads_grads(fn, args, "cpu"))


def _setitem(x):
    h = x * 1
    h[x > 0] = x[1]
    return h.sum()


FUNC_CASES = {
    "max": lambda x: x.max(), "median": lambda x: x.median(), "prod": lambda x: x.prod(),
    "cumprod": lambda x: x.cumprod(0).sum(),
    "masked_scatter": lambda x: x.masked_scatter(x > 0, x * 2).sum(),
    "masked_fill": lambda x: x.masked_fill(x > 0, x[0]).sum(),
    "index_fill": lambda x: x.index_fill(0, torch.tensor([1, 3], device=x.device), x[4]).sum(),
    "setitem": _setitem,
}


@pytest.mark.parametrize("case", list(FUNC_CASES))
def test_torch_func_transforms_take_these_gradients(case):
    """torch.func.grad, vmap of it and hessian: the kernels run inside the transforms' levels."""
    f = FUNC_CASES[case]
    x = torch.tensor([0.5, -2.0, 0.0, 3.0, 1.5])

    def outcome(transform):
        try:
            return transform().cpu()
        except RuntimeError as e:  # (vmap refuses a boolean mask's index, on every device)
            return type(e), str(e).split(".")[0]
    results = []
    for dev in ("cpu", D):
        xd = x.to(dev)
        results.append([outcome(lambda: torch.func.grad(f)(xd)),
                        outcome(lambda: torch.func.vmap(torch.func.grad(f))(torch.stack([xd, xd * 2]))),
                        outcome(lambda: torch.func.hessian(f)(xd))])
    for got, want in zip(results[1], results[0]):
        if isinstance(want, tuple):
            assert got == want
        else:
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("mask", [False, True])
def test_an_indexed_write_bumps_the_version_once(mask):
    index = torch.tensor([True, False, True, False, False]) if mask else torch.tensor([0, 2])
    versions = []
    for dev in ("cpu", "lazyxla"):
        a = torch.randn(5, device=dev, requires_grad=True) * 1
        a[index.to(dev)] = 1.0
        versions.append(a._version)
    assert versions[1] == versions[0] == 1


@pytest.mark.parametrize("mask", [False, True])
def test_an_indexed_write_into_a_leaf_raises_eagers_error(mask):
    index = torch.tensor([True, False, True, False, False]) if mask else torch.tensor([0, 2])
    a = torch.randn(5, device="lazyxla", requires_grad=True)
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used in an "
                                           "in-place operation.$"):
        a[index.to("lazyxla")] = 1.0
