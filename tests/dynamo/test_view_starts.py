"""Tensor arguments that are views at a new start on every call (`step(x[i:i + 4])`, or a slice
the forward saves for the backward): one program fed the start (lazyxla/dynamo/view_starts.py),
where that is all the program does with the argument's buffer; else traced per start as before."""
import pytest
import torch

import lazyxla
from lazyxla import metrics
from lazyxla.dynamo.bridge import Bridge

D = lazyxla.device()
X = torch.arange(96.0).reshape(24, 4) / 7


def _extractions():
    return metrics.counter_value("DynamoExtractCompiledGraph") or 0


def _same(got, want, exact=True):
    """Values (bit for bit where `exact`), and eager's shape, strides and storage offset."""
    torch.testing.assert_close(got.cpu(), want, **({"rtol": 0, "atol": 0} if exact else {}))
    assert got.shape == want.shape and got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()


def _run(fn, starts, length=4, base=X, exact=True):
    """fn of a slice of `base` at each start, compiled against eager; the extractions per call."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="lazyxla")
    lazy_base, made = base.to(D), []
    for s in starts:
        before = _extractions()
        got = compiled(lazy_base[s:s + length])
        want = fn(base[s:s + length])
        for g, w in zip(got, want) if isinstance(want, tuple) else ((got, want),):
            _same(g, w, exact)
        made.append(_extractions() - before)
    return made


def test_a_slice_passed_at_a_new_start_is_fed_its_start():
    made = _run(lambda v: (v * 2).relu().sum(0), [0, 4, 8, 12, 3, 20, 0])
    assert made[:2] == [1, 1] and made[2:] == [0] * 5


def test_views_of_a_slice_argument_returned_are_eager_views_at_each_start():
    """Returned views of the argument are made from it at each call (outputs.VIEW_OF_INPUT), so
    their storage offsets follow its start."""
    made = _run(lambda v: (v[1:], v.t(), v[:, 2], v + 1), [0, 4, 9, 13, 2])
    assert made[2:] == [0, 0, 0]


def test_a_function_with_nothing_to_compute_makes_its_views_at_each_start():
    """No program: views of the slice argument are made from it on every call, so a new start
    extracts nothing, and each returned view aliases the buffer as eager's."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda v: (v[1:], v.t(), v.view(-1)[:2]), backend="lazyxla")
    base, lazy = X.clone(), X.to(D)
    made = []
    with torch.no_grad():
        for s in (0, 4, 8, 13, 2):
            before = _extractions()
            got = compiled(lazy[s:s + 4])
            made.append(_extractions() - before)
            for g, w in zip(got, (base[s + 1:s + 4], base[s:s + 4].t(), base[s:s + 4].view(-1)[:2])):
                _same(g, w)
            got[2].add_(100)  # a write through it reaches the buffer, as eager's
            base[s:s + 4].view(-1)[:2].add_(100)
            _same(lazy, base)
    assert made == [1, 0, 0, 0, 0]


def test_a_shorter_slice_or_another_length_is_a_program_of_its_own():
    """The last slice of 24 rows at 22 has 2 rows: another shape (Dynamo then compiles a graph
    with a dynamic length); once each length has been seen, no start extracts."""
    made = _run(lambda v: v.sum(0) * v[0], [0, 4, 8, 22, 12, 22, 16, 20, 22, 6], exact=False)
    assert made[2] == 0 and made[3] >= 1 and made[-3:] == [0, 0, 0]


def test_a_whole_tensor_between_slices_keeps_the_program_fed_their_starts():
    """Between slices of a dataset, a whole tensor of the same shape (Dynamo's same graph): a
    program of its own, and the fed one still serves every later start, with no extraction."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda v: v * 2, backend="lazyxla")
    lazy, whole = X.to(D), (X[:4] + 1).to(D)
    calls = [("slice", 0), ("slice", 4), ("whole", None), ("slice", 8), ("slice", 12),
             ("whole", None), ("slice", 1)]
    made = []
    for kind, s in calls:
        before = _extractions()
        if kind == "slice":
            _same(compiled(lazy[s:s + 4]), X[s:s + 4] * 2)
        else:
            _same(compiled(whole), (X[:4] + 1) * 2)
        made.append(_extractions() - before)
    assert made[:3] == [1, 1, 1] and made[3:] == [0, 0, 0, 0]


def test_a_slice_of_another_dataset_shape_is_traced_for_it():
    """The same slice of a longer buffer: the program's parameter is the buffer, so it is another
    program, and each keeps being fed."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda v: v * 3, backend="lazyxla")
    longer = torch.arange(200.0).reshape(50, 4)
    for base in (X, longer, X, longer):
        lazy = base.to(D)
        for s in (0, 4, 8):
            _same(compiled(lazy[s:s + 4]), base[s:s + 4] * 3)


@pytest.mark.parametrize("fn", [
    lambda v: v.as_strided((2, 2), (4, 1)) + 1,  # reads the storage at the view's offset
    lambda v: v.as_strided((2, 2), (4, 1), 8) * 2,  # at an offset of the storage's own
    lambda v: v.as_strided((2, 2), (4, 1)) + v[:2, :2],  # and through the view
    lambda v: (v.as_strided((2, 2), (4, 1)), v * 2),  # a view of the storage returned
], ids=["as_strided", "as_strided_at", "and_the_view", "returned"])
def test_a_view_read_through_its_storage_stays_traced_per_start(fn):
    """as_strided addresses the storage, not the view: the program reads the buffer at the traced
    offset (or the output is made from the buffer so), so that argument's start is never fed;
    every call is eager's."""
    made = _run(fn, [0, 4, 8, 12, 5])
    assert all(made)


def test_two_views_of_one_buffer_stay_traced_per_start():
    torch._dynamo.reset()
    fn = lambda a, b: a * 2 + b  # noqa: E731
    compiled = torch.compile(fn, backend="lazyxla")
    lazy = X.to(D)
    for s in (0, 4, 8, 3):
        _same(compiled(lazy[s:s + 4], lazy[s + 2:s + 6]), fn(X[s:s + 4], X[s + 2:s + 6]))


def test_a_slice_argument_written_in_place_writes_at_its_start():
    torch._dynamo.reset()

    def fn(v):
        v.mul_(2)
        return v.sum()
    compiled = torch.compile(fn, backend="lazyxla")
    base, lazy = X.clone(), X.to(D)
    for s in (0, 4, 8, 12, 3):
        _same(compiled(lazy[s:s + 4]), fn(base[s:s + 4]), exact=False)  # (a sum's order)
        _same(lazy, base)


def _view_then_write(v, k):
    t = v[:k]
    v[0:1].mul_(2)
    return t


def _view_of_written(v, k):  # (PyTorch's own backends, aot_eager and inductor, get this wrong)
    return (v[:k], v.mul_(2))[0]


def _select_then_write(v, k):
    t = v.select(0, k)
    v[:, 0].add_(1)
    return t


def _transposed_then_written(v, k):
    t = v.t()[:k]
    v[0].zero_()
    return t


def _view_then_write_around_a_cpu_op(v, k):
    """Partitioned: the view is made from the new value in the program after the CPU op."""
    t = v[:k]
    v[0:1].mul_(2)
    return t, torch.ops.lazyxla_test.cpu_only(v).amax()  # (conftest.py)


@pytest.mark.parametrize("fn", [_view_then_write, _view_of_written, _select_then_write,
                                _transposed_then_written, _view_then_write_around_a_cpu_op])
@pytest.mark.parametrize("grad", [True, False])
def test_a_returned_view_of_an_argument_the_function_writes_is_eagers_view(fn, grad):
    """aot_autograd (grad mode on) rebuilds a returned view of an argument from the graph's output,
    its strides and storage offset: where the function writes the argument, that output is a view
    of the value the program computes, which starts at 0, not at the argument's start. Once Dynamo
    recompiled for the int, such a view came back at the storage's start (row 0, not row s)."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="lazyxla")
    base, lazy = X.clone(), X.to(D)
    with torch.set_grad_enabled(grad):
        for s, k in ((2, 2), (5, 1), (9, 3), (3, 2)):
            got, want = compiled(lazy[s:s + 4], k), fn(base[s:s + 4], k)
            for g, w in zip(got, want) if isinstance(want, tuple) else ((got, want),):
                _same(g, w)
            _same(lazy, base)


def test_a_column_view_and_a_row_start_only_the_varying_start_is_fed():
    """x[s:s + 4, 1:3]: the row start varies, the column start stays; a call at another column
    start is another program."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda v: v * 2, backend="lazyxla")
    lazy = X.to(D)
    for s, c in ((0, 1), (4, 1), (8, 1), (12, 0), (16, 0), (2, 1)):
        before = _extractions()
        _same(compiled(lazy[s:s + 4, c:c + 2]), X[s:s + 4, c:c + 2] * 2)
        if s in (8, 16, 2):
            assert _extractions() == before


def test_returned_views_at_a_fed_index_are_eager_views_past_dynamos_guards(symint_graph):
    """Called with the numbers Dynamo would guard against: a negative index, a slice cut short at
    the end, an index out of range raise or give what eager gives."""
    fn = lambda x, i: (x[i], x[i:i + 3], x[i].sum() * 2)  # noqa: E731
    x = X.to(D)
    bridge = Bridge(symint_graph(fn, x))
    for i in [3, 4, 5, -3, 22, 0]:
        for got, want in zip(bridge(x, i), fn(X, i)):
            _same(got, want)
    with pytest.raises(IndexError, match="out of (bounds|range)"):
        bridge(x, 24)


def test_training_over_dataset_slices_matches_eager_and_extracts_a_bounded_number_of_times():
    """The loop of benchmarks/batch_slices.py: a compiled forward and loss of the batch at i (saved
    for the backward) and a compiled AdamW step, over two epochs; losses and weights as eager's,
    and the second epoch extracts nothing."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    y = torch.arange(24) % 3

    def run(device, compile_):
        m = __import__("copy").deepcopy(model).to(device)
        xs, ys = X.to(device), y.to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=0.01)

        def fwd(i):
            return torch.nn.functional.cross_entropy(m(xs[i:i + 4]), ys[i:i + 4])
        step = opt.step
        if compile_:
            fwd, step = torch.compile(fwd, backend="lazyxla"), torch.compile(opt.step, backend="lazyxla")
        losses, made = [], []
        for _ in range(2):
            before = _extractions()
            for i in range(0, 24, 4):
                loss = fwd(i)
                loss.backward()
                step()
                opt.zero_grad()
                losses.append(loss.detach().cpu())
            made.append(_extractions() - before)
        return torch.stack(losses), [p.detach().cpu() for p in m.parameters()], made
    want, weights, _ = run("cpu", False)
    got, lazy_weights, made = run(D, True)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for a, b in zip(lazy_weights, weights):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert made[1] == 0 and made[0] < 40
