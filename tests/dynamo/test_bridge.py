"""The dynamo bridge, mechanism by mechanism, as the seed describes it."""
import logging

import copy

import pytest
import torch

import lazyxla
from lazyxla import metrics

D = lazyxla.device()


@pytest.fixture(autouse=True)
def _reset_dynamo():
    torch._dynamo.reset()
    yield


def _count(name):
    return metrics.counter_value(name) or 0


def _executions():
    d = metrics.metric_data("ExecuteTime")
    return 0 if d is None else d[0]


def test_same_shapes_extract_once_compile_once_run_every_call(fresh_metrics):
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))
    xc = torch.randn(5, 8)
    with torch.no_grad():
        expected = m(xc)
    m.to(D)
    x = xc.to(D)
    cm = torch.compile(m, backend="lazyxla")
    with torch.no_grad():
        lazyxla.sync()
        metrics.clear_all()
        for _ in range(100):
            y = cm(x)
    assert _count("DynamoExtractCompiledGraph") == 1
    assert _count("UncachedCompile") == 1
    assert _count("RunCachedGraph") == 100
    assert _executions() == 100
    torch.testing.assert_close(y.cpu(), expected)
    before = _executions()
    lazyxla.sync()  # nothing is left pending by a compiled call
    assert _executions() == before
    assert metrics.executed_fallback_ops() == []


def test_dynamic_lengths_one_warm_up_compile_each_then_none(fresh_metrics):
    def f(x):
        return (x * 2).sum(-1) + x.mean()
    cf = torch.compile(f, backend="lazyxla", dynamic=True)
    lengths = list(range(3, 103))  # 100 distinct sequence lengths
    xs = {n: torch.randn(2, n) for n in lengths}
    for n in lengths:
        cf(xs[n].to(D))
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert _count("UncachedCompile") == 100
    assert _count("DynamoRetrace") == 99
    for n in lengths[:10] + lengths[-10:]:
        torch.testing.assert_close(cf(xs[n].to(D)).cpu(), f(xs[n]))
    with lazyxla.assert_no_recompile():
        for n in lengths:
            cf(xs[n].to(D))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == frames, "dynamo recompiled"


def test_dynamic_layer_norm_is_one_program_per_length_and_keyed_by_eps(fresh_metrics):
    """Under dynamic=True Dynamo passes LayerNorm's eps as a 0-dim CPU tensor read with .item():
    one program per length (no partition around the .item()), and a changed eps re-extracts."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(8), torch.nn.LayerNorm(8)
            self.qkv = torch.nn.Linear(8, 24)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).split(8, dim=2)
            return self.ln2(x + torch.nn.functional.scaled_dot_product_attention(q, k, v))
    ln = Block()
    ln_d = copy.deepcopy(ln).to(D)
    cf = torch.compile(ln_d, backend="lazyxla", dynamic=True)
    xs = {n: torch.randn(1, n, 8) for n in (3, 4, 5)}
    with torch.no_grad():
        for n, x in xs.items():
            torch.testing.assert_close(cf(x.to(D)).cpu(), ln(x))
        assert _count("UncachedCompile") == 3
        assert _count("DynamoExtractCompiledGraph") == 3  # one whole program per length
        ln.ln1.eps = ln_d.ln1.eps = 0.5
        torch.testing.assert_close(cf(xs[4].to(D)).cpu(), ln(xs[4]))


@pytest.mark.parametrize("then_add", [False, True], ids=["copy", "copy_then_add"])
def test_a_read_before_a_whole_copy_into_an_input_sees_the_old_value(then_add):
    """Tracing `a.copy_(b)` points a at b's device data (no pending IR); undoing the trace must
    still give a its own data back, or the first call computes `a * 2` from b."""
    def f(a, b):
        t = a * 2
        a.copy_(b)
        if then_add:
            a.add_(1)
        return t
    cf = torch.compile(f, backend="lazyxla")
    a0, b0 = torch.randn(3), torch.randn(3)
    with torch.no_grad():
        a, b = a0.to(D), b0.to(D)
        for call in range(2):
            want_t, want_a = (a0 if call == 0 else b0 + then_add) * 2, b0 + then_add
            torch.testing.assert_close(cf(a, b).cpu(), want_t)
            torch.testing.assert_close(a.cpu(), want_a)
            torch.testing.assert_close(b.cpu(), b0)


def test_in_place_update_of_an_input_is_applied_exactly_once():
    def f(x, y):
        x.add_(y)
        return x * 2
    cf = torch.compile(f, backend="lazyxla")
    xc, y = torch.zeros(3), torch.ones(3)
    xd, yd = xc.to(D), y.to(D)
    for _ in range(5):
        ec = f(xc, y)
        ed = cf(xd, yd)
        lazyxla.sync()  # a stray sync must not apply the update twice
        torch.testing.assert_close(xd.cpu(), xc)
        torch.testing.assert_close(ed.cpu(), ec)


def test_in_place_update_of_an_input_under_no_grad_reads_the_current_value():
    """Inference graphs (no aot_autograd) keep in-place ops: the program must take the mutated
    input as a parameter, not the value it had while the graph was traced."""
    def f(x, y):
        x.mul_(0.5).add_(y)
        return x + 1
    cf = torch.compile(f, backend="lazyxla")
    xc, y = torch.ones(3), torch.arange(3.0)
    xd, yd = xc.to(D), y.to(D)
    with torch.no_grad():
        for _ in range(4):
            ec, ed = f(xc, y), cf(xd, yd)
            torch.testing.assert_close(xd.cpu(), xc)
            torch.testing.assert_close(ed.cpu(), ec)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "aot_autograd"])
def test_a_cpu_scalar_moved_to_the_device_inside_the_graph_is_read_on_every_call(grad, fresh_metrics):
    """`s.to(device)` and `t.copy_(s)` of a 0-dim CPU input (a step count, a temperature) are
    runtime scalars of the program, read afresh on every call, never the value traced."""
    def f(x, s):
        y = torch.empty((), device=x.device)
        y.copy_(s)
        return x * s.to(x.device) + y, x + s.to(x.device, torch.float64)
    cf = torch.compile(f, backend="lazyxla")
    xc = torch.arange(3.0, requires_grad=grad)
    xd = xc.detach().to(D).requires_grad_(grad)
    with torch.set_grad_enabled(grad):
        for v in (2.0, 3.0, -0.5):
            s = torch.tensor(v)
            for got, want in zip(cf(xd, s), f(xc, s)):
                assert got.dtype == want.dtype
                torch.testing.assert_close(got.detach().cpu(), want.detach())
    assert (metrics.counter_value("DynamoExtractCompiledGraph") or 0) == 1


def test_constant_scalars_are_put_on_the_device_once_and_cpu_scalars_read_every_call(
        fresh_metrics, monkeypatch):
    """The graph's own Python scalars (0.25, 3.0: an optimizer's lr and betas) never change for a
    program: their 0-dim device arrays are made once at extraction. A 0-dim CPU input's value (a
    step count) is read on every call."""
    import jax
    from lazyxla.dynamo.matcher import CPU, InputMatcher
    made, init = [], InputMatcher.__init__
    monkeypatch.setattr(InputMatcher, "__init__",
                        lambda self, *a, **k: (init(self, *a, **k), made.append(self))[0])

    def f(x, s):
        return x * 0.25 + 3.0, x * s.to(x.device, torch.float64) + 0.5
    cf = torch.compile(f, backend="lazyxla")
    xc = torch.arange(3.0, dtype=torch.float64)
    for v in (2.0, 3.0, -0.5):
        s = torch.tensor(v)
        for got, want in zip(cf(xc.to(D), s), f(xc, s)):
            torch.testing.assert_close(got.cpu(), want)
    assert _count("DynamoExtractCompiledGraph") == 1
    (matcher,) = made
    prepared = sorted(float(v) for kind, v in matcher.plan if isinstance(v, jax.Array))
    assert prepared == [0.25, 0.5, 3.0]  # the constants, each a 0-dim device array
    assert sum(kind == CPU for kind, _ in matcher.plan) == 1  # the CPU scalar, read per call


def test_another_view_of_the_same_buffer_is_read_as_that_view(caplog, fresh_metrics):
    """A program reads a view argument through its buffer, with the view traced into it; Dynamo's
    guards see only sizes, so `data[4:8]` after `data[0:4]` must not replay the first slice. The
    second slice's program takes the start as a parameter (view_starts.py): later slices of the
    same length are fed their start."""
    cf = torch.compile(lambda x: x * 2, backend="lazyxla")
    data = torch.arange(12.0)
    dd = data.to(D)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="lazyxla.dynamo"):
        for start in (0, 4, 8, 0, 5):
            torch.testing.assert_close(cf(dd[start:start + 4]).cpu(), data[start:start + 4] * 2)
        torch.testing.assert_close(cf(torch.ones(4).to(D)).cpu(), torch.full((4,), 2.0))
    assert "another view of its buffer" in caplog.text
    assert _count("DynamoExtractCompiledGraph") == 3  # two slices and the whole buffer


def test_a_whole_buffer_argument_that_is_a_view_now_is_read_as_that_view(caplog, fresh_metrics):
    """Traced on a whole buffer, then called on a row of a larger buffer with the same sizes,
    strides and offset 0, which Dynamo's guards pass: the program is fed the row, not the buffer
    it belongs to."""
    cf = torch.compile(lambda x: x * 2, backend="lazyxla")
    base = torch.arange(8.0).reshape(2, 4)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="lazyxla.dynamo"):
        torch.testing.assert_close(cf(torch.ones(4).to(D)).cpu(), torch.full((4,), 2.0))
        got = cf(base.to(D)[0])
    torch.testing.assert_close(got.cpu(), base[0] * 2)
    assert "an argument is a view now" in caplog.text
    assert _count("DynamoExtractCompiledGraph") == 2


def test_a_function_with_nothing_to_compute_returns_views_of_the_view_it_is_given():
    """No program, so no matcher: the outputs that are views of an argument are built from the
    view traced, and a call on another view of the same buffer must re-extract, not replay it."""
    def f(x):
        return x.view(-1)[:2], x
    cf = torch.compile(f, backend="lazyxla")
    data = torch.arange(18.0).reshape(6, 3)
    dd = data.to(D)
    with torch.no_grad():
        for start in (0, 1, 3, 1):
            got, same = cf(dd[start:start + 3])
            torch.testing.assert_close(got.cpu(), f(data[start:start + 3])[0])
            got.add_(100)  # still a view of the buffer, as eager's
            data[start:start + 3].view(-1)[:2].add_(100)
            torch.testing.assert_close(dd.cpu(), data)
        torch.testing.assert_close(cf(dd)[0].cpu(), data.view(-1)[:2])


def test_arguments_that_come_to_share_a_buffer_see_each_others_writes():
    def f(a, b):
        a.add_(1)
        return b * 2
    cf = torch.compile(f, backend="lazyxla")
    with torch.no_grad():
        x, y = torch.zeros(3), torch.ones(3)
        xd, yd = x.to(D), y.to(D)
        torch.testing.assert_close(cf(xd, yd).cpu(), f(x, y))
        torch.testing.assert_close(cf(xd, xd.detach()).cpu(), f(x, x.detach()))
        torch.testing.assert_close(xd.cpu(), x)


def test_outputs_alias_inputs_as_in_eager():
    """Inference graphs skip aot_autograd, so the bridge itself keeps eager's aliasing: a returned
    input is that tensor (updated), and a returned view of an input is a view of it."""
    def update(x):
        x.mul_(2)
        return x, x.t(), x[1:]
    cf = torch.compile(update, backend="lazyxla")
    xc = torch.arange(6.0).reshape(2, 3)
    xd = xc.to(D)
    with torch.no_grad():
        for _ in range(2):
            want, got = update(xc), cf(xd)
            assert got[0] is xd
            for w, g in zip(want, got):
                torch.testing.assert_close(g.cpu(), w)
            xc.add_(1), xd.add_(1)  # visible through every output, as in eager
            for w, g in zip(want, got):
                torch.testing.assert_close(g.cpu(), w)


def test_outputs_that_share_a_computed_buffer_alias_each_other():
    def f(x):
        y = x + 1
        return y, y[0], y.t()
    cf = torch.compile(f, backend="lazyxla")
    xc = torch.arange(6.0).reshape(2, 3)
    with torch.no_grad():
        for _ in range(2):
            want, got = f(xc), cf(xc.to(D))
            want[0].mul_(10), got[0].mul_(10)  # visible through the views, as in eager
            for w, g in zip(want, got):
                torch.testing.assert_close(g.cpu(), w)



def test_an_output_and_its_detach_share_storage_and_version_as_in_eager():
    """aot_autograd saves `relu` and `relu.detach()` for the backward: the second is made as a
    detach of the first, one storage and one version counter, as eager's."""
    def f(x):
        y = (x + 1).relu()
        return y, y.detach(), y * 2
    cf = torch.compile(f, backend="lazyxla")
    xc = torch.arange(6.0).reshape(2, 3) - 2
    with torch.no_grad():
        for _ in range(2):
            want, got = f(xc), cf(xc.to(D))
            assert got[0].untyped_storage() is got[1].untyped_storage()
            want[1].add_(10), got[1].add_(10)  # visible through the other, as in eager
            assert got[0]._version == got[1]._version == want[0]._version == want[1]._version
            for w, g in zip(want, got):
                torch.testing.assert_close(g.cpu(), w)

def test_duplicate_pass_through_none_and_int_outputs():
    def f(x, y):
        z = x + y
        return z, z, y, None, x.shape[0]
    cf = torch.compile(f, backend="lazyxla")
    x, y = torch.randn(3, 2).to(D), torch.randn(3, 2).to(D)
    for _ in range(2):
        z1, z2, yy, none, n = cf(x, y)
        assert z1 is z2
        assert yy is y
        assert none is None
        assert n == 3
        torch.testing.assert_close(z1.cpu(), (x + y).cpu())


def _with_fallback(x):
    a = (x + 1).relu()
    b = torch.ops.lazyxla_test.cpu_only(a)  # (conftest.py)
    return (b * 2).sum(0)


def test_fallback_op_splits_the_graph_into_two_partitions(fresh_metrics):
    cf = torch.compile(_with_fallback, backend="lazyxla")
    x = torch.randn(4, 3)
    out = cf(x.to(D))
    torch.testing.assert_close(out.cpu(), _with_fallback(x))
    parts = [e for e in metrics.events("partition")]
    assert parts and parts[-1]["partitions"] == 2
    assert "cpu_only" in " ".join(parts[-1]["unsupported"])
    out2 = cf(x.to(D))
    torch.testing.assert_close(out2.cpu(), _with_fallback(x))


def test_an_attribute_read_by_one_partition_is_held_by_its_bridge():
    """Optimizer state reaches a graph as attributes: one that only a single partition reads
    moves into it (its Bridge holds the tensor; no nn.Module lookup per call); one read on both
    sides of a CPU op stays in the outer graph. Updates to either between calls are read."""
    from lazyxla.dynamo.bridge import Bridge
    from lazyxla.dynamo.partition import partition
    root = torch.nn.Module()
    root.a, root.b = torch.randn(3).to(D), torch.randn(3).to(D)
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a, b = g.get_attr("a"), g.get_attr("b")
    y = g.call_function(torch.ops.aten.add.Tensor, (x, b))
    c = g.call_function(torch.ops.lazyxla_test.cpu_only.default, (y,))
    z = g.call_function(torch.ops.aten.mul.Tensor, (c, a))
    g.output(g.call_function(torch.ops.aten.mul.Tensor, (z, b)))
    fused, n = partition(torch.fx.GraphModule(root, g), [c], Bridge)
    assert n == 2
    outer = {node.target for node in fused.graph.nodes if node.op == "get_attr"}
    assert outer == {"b"}
    held = [m.bridge.attrs for name, m in fused.named_children() if name.startswith("fused_")]
    assert sorted(len(h) for h in held) == [0, 1] and any(h and h[0] is root.a for h in held)
    xc = torch.randn(3)
    for _ in range(2):
        want = (xc + root.b.cpu()) * 3 * root.a.cpu() * root.b.cpu()
        torch.testing.assert_close(fused(xc.to(D)).cpu(), want)
        root.a.mul_(2)
        root.b.add_(1)


@torch.library.custom_op("lazyxla_test::scale_by_max", mutates_args=())
def scale_by_max(x: torch.Tensor) -> torch.Tensor:
    """An op for every device that reads a value of its input into Python."""
    return x * x.max().item()


@scale_by_max.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("lazyxla_test::scale_by_max_of_list", mutates_args=())
def scale_by_max_of_list(x: torch.Tensor) -> torch.Tensor:
    """The same, reading its input with .tolist() (as Hugging Face's grouped-matmul fallback reads
    its offsets)."""
    return x * max(x.tolist())


@scale_by_max_of_list.register_fake
def _(x):
    return torch.empty_like(x)


@pytest.mark.parametrize("op", [scale_by_max, scale_by_max_of_list], ids=["item", "tolist"])
def test_an_op_that_reads_a_value_in_the_trace_is_run_outside_the_program(op, fresh_metrics):
    # no lowering, but an aten-level op on lazyxla tensors: the graph goes straight to the trace
    # (no trial run), where the read stops it before anything runs; the trial run then places
    # the op between partitions, so every call reads its own input's maximum
    cf = torch.compile(lambda x: op(x + 1) * 2, backend="lazyxla")
    for top in (1.0, 5.0):
        x = torch.tensor([0.0, 0.5, top])
        torch.testing.assert_close(cf(x.to(D)).cpu(), (x + 1) * (top + 1) * 2)
    assert _count("DynamoTrialRun") == 1
    assert op._qualname.split("::")[1] in " ".join(metrics.events("partition")[-1]["unsupported"])


def _split_and_attend(x):
    q, k = x.split(2, dim=-1)
    return torch.nn.functional.scaled_dot_product_attention(q, k, k).sum()


def test_a_training_graph_of_composite_aten_ops_needs_no_trial_run(fresh_metrics):
    """split, detach and _safe_softmax have no lowering of their own (PyTorch's kernels for them
    call lowered ops): the forward and backward graphs are traced straight away."""
    x = torch.randn(3, 4, 4)
    cf = torch.compile(_split_and_attend, backend="lazyxla")
    xd = x.to(D).requires_grad_()
    cf(xd).backward()
    xr = x.clone().requires_grad_()
    _split_and_attend(xr).backward()
    torch.testing.assert_close(xd.grad.cpu(), xr.grad)
    assert _count("DynamoTrialRun") == 0 and _count("DynamoExtractCompiledGraph") == 2
    assert not metrics.executed_fallback_ops()


def _masked_write_with_integers(x, m, i):
    x.add_(1)  # an input written before the op that falls back: applied once
    x[m, i] = 3.0  # a mask with integer indices: lowered, but run on the CPU for these arguments
    return x * 2


def test_an_op_that_falls_back_for_its_arguments_is_not_baked_into_the_program(fresh_metrics):
    # every op has a lowering, so no trial run decides; the trace reaches the CPU fallback, stops
    # before it runs, and the graph is split around it: each call reads its own mask
    cf = torch.compile(_masked_write_with_integers, backend="lazyxla")
    for mask in ([True, False], [False, True], [True, True]):
        x, m, i = torch.arange(6.0).reshape(2, 3), torch.tensor(mask), torch.tensor([0, 2])
        xd = x.to(D)
        out = cf(xd, m.to(D), i.to(D))
        want = _masked_write_with_integers(x, m, i)
        torch.testing.assert_close(out.cpu(), want)
        torch.testing.assert_close(xd.cpu(), x)
    assert "index_put" in " ".join(metrics.events("partition")[-1]["unsupported"])


def _write_a_column_major_copy(a):
    t = a.t().contiguous().t().clone()  # column-major, as eager's clone keeps it
    t[torch.tensor([True, False], device=a.device), torch.tensor([0, 1], device=a.device)] = 1.0
    return t


def test_an_op_run_on_the_cpu_between_partitions_keeps_eagers_layout():
    # the CPU kernel runs on a host copy with its input's strides (it was contiguous: the result
    # came back (2, 1) where eager's is (1, 2))
    a = torch.randn(2, 2)
    out = torch.compile(_write_a_column_major_copy, backend="lazyxla")(a.to(D))
    want = _write_a_column_major_copy(a)
    assert out.stride() == want.stride() == (1, 2)
    torch.testing.assert_close(out.cpu(), want)


def _step_then_scale(x, s):
    s.add_(1)  # writes a graph input: stays on the CPU
    c = (1 - torch.pow(0.9, s)).reciprocal()  # feeds only the device op: moves into the program
    return x * c


def _scale_then_step(x, s):
    c = torch.pow(0.9, s)  # moves too: its partition ends before the CPU write below
    s.add_(1)
    return x * c


def _scale_returned(x, s):
    c = torch.pow(0.9, s)
    return x * c, c * 2  # c * 2 is an output: a CPU tensor, as eager returns it


@pytest.mark.parametrize("fn, moved", [(_step_then_scale, True), (_scale_then_step, True),
                                       (_scale_returned, False)])
def test_scalar_chain_on_cpu_inputs_moves_into_the_program_when_it_feeds_only_device_ops(fn, moved, fresh_metrics):
    """Arithmetic on 0-dim CPU inputs (an optimizer's bias correction) joins the program when its
    results feed only device ops; it still reads its inputs where the graph did."""
    cf = torch.compile(fn, backend="lazyxla")
    x = torch.arange(1.0, 4.0)
    s_ref, s = torch.tensor(0.0), torch.tensor(0.0)
    with torch.no_grad():
        for _ in range(3):
            want, got = fn(x, s_ref), cf(x.to(D), s)
            want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
            for w, g in zip(want, got):
                assert g.device.type == ("cpu" if g.dim() == 0 else "lazyxla")
                torch.testing.assert_close(g.cpu(), w)
            assert s.item() == s_ref.item()  # advanced exactly once per call
    assert bool(metrics.events("scalar_chain")) == moved
    left = metrics.events("partition")[-1]["unsupported"]
    assert ("pow" in " ".join(left)) != moved, left


def _read_step_read(x, s):
    a = x * s  # reads s before the update: the update stays after it
    s.add_(1)
    return a, x * s


def _read_other_step(x, s, t):
    a = x * s  # reads s only: t's update moves above it, and the two products share a program
    t.add_(1)
    return a + x * t


@pytest.mark.parametrize("fn, programs", [(_read_step_read, 2), (_read_other_step, 1)])
def test_a_cpu_update_moves_above_device_ops_only_where_they_do_not_read_it(fn, programs, fresh_metrics):
    """A CPU update of a 0-dim tensor (an optimizer's step count) splits the graph. It moves up
    past the device ops before it, so that they join the ones after it, unless one of them reads
    the tensor it writes: that op must see the old value, as in eager."""
    cf = torch.compile(fn, backend="lazyxla")
    x = torch.arange(1.0, 4.0)
    refs, cpus = [torch.tensor(2.0), torch.tensor(5.0)], [torch.tensor(2.0), torch.tensor(5.0)]
    n = fn.__code__.co_argcount - 1
    with torch.no_grad():
        for _ in range(3):
            want, got = fn(x, *refs[:n]), cf(x.to(D), *cpus[:n])
            want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
            for w, g in zip(want, got):
                torch.testing.assert_close(g.cpu(), w)
            assert [c.item() for c in cpus] == [r.item() for r in refs]  # advanced once per call
    assert metrics.events("partition")[-1]["partitions"] == programs


def test_fallback_error_mode_names_the_op():
    cf = torch.compile(_with_fallback, backend="lazyxla", options={"fallback": "error"})
    with pytest.raises(Exception, match="cpu_only"):
        cf(torch.randn(4, 3).to(D))


def test_unknown_option_is_rejected():
    cf = torch.compile(lambda x: x + 1, backend="lazyxla", options={"nonsense": 1})
    with pytest.raises(Exception, match="nonsense"):
        cf(torch.ones(2).to(D))


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune",
                                  "max-autotune-no-cudagraphs"])
def test_torch_compile_modes_are_accepted_and_compile_alike(mode, fresh_metrics):
    """A script written for inductor's modes runs unchanged: one program per graph in each."""
    x = torch.arange(6.0).reshape(2, 3)
    cf = torch.compile(lambda t: (t * 2).relu().sum(0), backend="lazyxla", mode=mode)
    for _ in range(2):
        torch.testing.assert_close(cf(x.to(D)).cpu(), (x * 2).relu().sum(0))
    assert _count("UncachedCompile") + _count("CachedCompile") <= 1


def test_unknown_mode_is_rejected_naming_the_modes():
    cf = torch.compile(lambda x: x + 1, backend="lazyxla", mode="fastest")
    with pytest.raises(Exception, match="mode must be one of .*reduce-overhead.*'fastest'"):
        cf(torch.ones(2).to(D))
    torch._dynamo.reset()
    cf = torch.compile(lambda x: x + 1, backend="lazyxla", options={"nonsense": 1})
    with pytest.raises(Exception, match=r"unknown options \['nonsense'\]; it takes 'fallback' "
                                        r"\(partition, error\) and 'mode'"):
        cf(torch.ones(2).to(D))


def test_dropout_differs_per_call_and_is_seeded():
    def f(x):
        return torch.nn.functional.dropout(x, 0.5, training=True)
    cf = torch.compile(f, backend="lazyxla")
    x = torch.ones(64).to(D)
    torch.manual_seed(7)
    run1 = [cf(x).cpu() for _ in range(3)]
    torch.manual_seed(7)
    run2 = [cf(x).cpu() for _ in range(3)]
    assert not torch.equal(run1[0], run1[1])
    for a, b in zip(run1, run2):
        torch.testing.assert_close(a, b)


def test_retrace_logs_its_cause(caplog, fresh_metrics):
    def f(x, n):  # (n a length: the program depends on it)
        return torch.arange(n, device=x.device) * x.sum()
    cf = torch.compile(f, backend="lazyxla", dynamic=True)
    x = torch.ones(3).to(D)
    cf(x, 2)
    with caplog.at_level(logging.WARNING, logger="lazyxla.dynamo"):
        cf(x, 5)
    assert any("2 -> 5" in r.getMessage() for r in caplog.records)
    with pytest.raises(lazyxla.RecompileError, match="2 -> 7|5 -> 7"):
        with lazyxla.assert_no_recompile():
            cf(x, 7)


def test_a_graph_retraced_on_every_call_warns_three_times_then_logs_at_debug(caplog, fresh_metrics):
    cf = torch.compile(lambda x: x * 2, backend="lazyxla", dynamic=True)
    with caplog.at_level(logging.DEBUG, logger="lazyxla.dynamo"):
        for n in range(2, 9):  # a new length per call: 6 re-extractions after the first
            torch.testing.assert_close(cf(torch.ones(n).to(D)).cpu(), torch.full((n,), 2.0))
    retraces = [r for r in caplog.records if "re-extracting" in r.getMessage()]
    assert [r.levelno for r in retraces] == [logging.WARNING] * 3 + [logging.DEBUG] * 3
    assert "7 -> 8" in retraces[-1].getMessage()
    notice = [r for r in caplog.records if "re-extracted 3 times" in r.getMessage()]
    assert len(notice) == 1 and notice[0].levelno == logging.WARNING
    assert metrics.counter_value("DynamoRetrace") == 6
    assert len(metrics.events("retrace")) == 6


def test_programs_keyed_by_an_index_are_kept_two_generations_deep(monkeypatch, caplog,
                                                                  fresh_metrics):
    """An int argument that reaches the program through other arithmetic than + - * / (an
    index `x[i % 29]`) is not fed: the extracted programs are keyed by its value, and the notice
    after three re-extractions says what is keyed and what is fed. Two generations of them are
    kept, so a loop over every index does not hold one per index for good, and the indexes used
    lately are found without a new extraction."""
    from lazyxla.dynamo import bridge as bridge_module
    monkeypatch.setattr(bridge_module, "_PROGRAMS_KEPT", 4)
    made, init = [], bridge_module.Bridge.__init__

    def keep(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)
    monkeypatch.setattr(bridge_module.Bridge, "__init__", keep)
    xc = torch.randn(30, 3)
    x = xc.to(D)
    cf = torch.compile(lambda x, i: x[i % 29] * 2, backend="lazyxla")
    caplog.set_level(logging.WARNING, logger="lazyxla.dynamo")
    for i in range(2, 30):  # (Dynamo specializes 0 and 1)
        torch.testing.assert_close(cf(x, i).cpu(), xc[i % 29] * 2)
        programs = made[-1].programs
        assert len(programs) <= 4 and len(programs.old) <= 4
    notice = [r.getMessage() for r in caplog.records if "re-extracted 3 times" in r.getMessage()]
    assert len(notice) == 1 and "keyed by its value where it sets a shape" in notice[0]
    bridges, extractions = len(made), _count("DynamoExtractCompiledGraph")
    for i in (23, 29, 28):  # (23 is in the old generation: the last 4 before 26-29)
        torch.testing.assert_close(cf(x, i).cpu(), xc[i % 29] * 2)
    assert len(made) == bridges and _count("DynamoExtractCompiledGraph") == extractions


def test_debug_flag_prints_graph(monkeypatch, capsys):
    monkeypatch.setenv("LAZYXLA_DYNAMO_DEBUG", "1")
    cf = torch.compile(lambda x: x.exp() + 1, backend="lazyxla")
    cf(torch.ones(2).to(D))
    out = capsys.readouterr().out
    assert "FX graph" in out and "hash" in out and "IR" in out


def test_backend_name_works_through_entry_point():
    from torch._dynamo.backends.registry import lookup_backend
    assert lookup_backend("lazyxla") is not None


def _detach(x, y):
    return x.detach(), y * 2


def _copy_between_inputs(x, y):
    x.copy_(y)
    return y * 2


def _setitem_from_input(x, y):
    x[:] = y
    return x + 0


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "aot_autograd"])
@pytest.mark.parametrize("fn", [_detach, _copy_between_inputs, _setitem_from_input])
def test_outputs_and_writes_that_are_another_inputs_data_follow_each_call(fn, grad):
    """After x.copy_(y) (or x.detach()) a value is an input's device data as traced: it is still
    a parameter of the program, read on every call, and the write to x is still a write."""
    cf = torch.compile(fn, backend="lazyxla")
    with torch.set_grad_enabled(grad):
        for k in (1.0, 2.0, 3.0):
            x, y = torch.zeros(3), torch.full((3,), k)
            xd, yd = x.to(D), y.to(D)
            want, got = fn(x, y), cf(xd, yd)
            want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
            for w, g in zip(want, got):
                torch.testing.assert_close(g.cpu(), w)
            torch.testing.assert_close(xd.cpu(), x)


def _update_read_then_cpu_op(a, g, s):
    a.mul_(0.5).addcmul_(g, g, value=0.1)
    r = a.sqrt()  # reads the updated a
    s += 1        # a CPU op: the graph is partitioned around it
    return r * s


def test_partitions_keep_the_order_of_writes_and_reads(fresh_metrics):
    cf = torch.compile(_update_read_then_cpu_op, backend="lazyxla")
    with torch.no_grad():
        for k in (1.0, 2.0):
            a, g, s = torch.ones(2), torch.full((2,), 3.0), torch.tensor(k)
            ad, sd = a.to(D), s.clone()
            want, got = _update_read_then_cpu_op(a, g, s), cf(ad, g.to(D), sd)
            torch.testing.assert_close(got.cpu(), want)
            torch.testing.assert_close(ad.cpu(), a)
            assert sd.item() == s.item()
    assert metrics.events("partition")


def test_a_partition_runs_its_in_place_updates_in_graph_order():
    """Attributes join the partition that reads them. The partition still runs its nodes in graph
    order, which data edges alone do not fix: `p += buf` must see both updates of buf, the second
    made through the alias `mul_` returned."""
    from lazyxla.dynamo.bridge import Bridge
    from lazyxla.dynamo.partition import partition
    aten = torch.ops.aten
    root = torch.nn.Module()
    root.buf, root.p, root.ga = (torch.tensor([1.0, 2.0]).to(D), torch.tensor([10.0, 20.0]).to(D),
                                 torch.tensor([0.5, 0.25]).to(D))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    c = g.call_function(torch.ops.lazyxla_test.cpu_only.default, (x,))
    buf, p, ga = g.get_attr("buf"), g.get_attr("p"), g.get_attr("ga")
    m = g.call_function(aten.mul_.Tensor, (buf, 2.0))
    ga2 = g.call_function(aten.add_.Tensor, (ga, c))
    g.call_function(aten.add_.Tensor, (m, ga2))          # buf = 2 buf + ga + 3x
    g.output(g.call_function(aten.add_.Tensor, (p, buf)))  # p += buf
    fused, n = partition(torch.fx.GraphModule(root, g), [c], Bridge)
    assert n == 1
    out = fused(torch.tensor([1.0, 1.0]).to(D))
    torch.testing.assert_close(root.buf.cpu(), torch.tensor([5.5, 7.25]))
    torch.testing.assert_close(root.p.cpu(), torch.tensor([15.5, 27.25]))
    torch.testing.assert_close(out.cpu(), root.p.cpu())


def test_compiled_for_loop_rmsprop_matches_eager_on_every_parameter():
    """RMSprop(foreach=False, centered, momentum): the step count's `+= 1` on the CPU splits each
    parameter's update into its own partition, whose momentum buffer is updated in place and then
    read by the parameter's update."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    model = copy.deepcopy(ref).to(D)
    make = lambda ps: torch.optim.RMSprop(ps, lr=0.01, centered=True, momentum=0.9,  # noqa: E731
                                          foreach=False)
    opt_ref, opt = make(ref.parameters()), make(model.parameters())
    cstep = torch.compile(opt.step, backend="lazyxla")
    x = torch.randn(5, 3)
    for _ in range(2):
        for m, o, s, xx in ((ref, opt_ref, opt_ref.step, x), (model, opt, cstep, x.to(D))):
            o.zero_grad()
            m(xx).square().sum().backward()
            s()
    for p, r in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), r.detach())


def test_compiled_training_step_with_a_for_loop_optimizer_matches_eager():
    """Adam(foreach=False) updates exp_avg_sq in place and reads it back in the same graph."""
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2)
    model = copy.deepcopy(ref).to(D)
    opt_ref = torch.optim.Adam(ref.parameters(), lr=0.01, foreach=False)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, foreach=False)

    def step(m, o, x):
        m(x).sum().backward()
        o.step()
        o.zero_grad()
    cstep = torch.compile(step, backend="lazyxla")
    x = torch.randn(4, 3)
    for _ in range(3):
        step(ref, opt_ref, x)
        cstep(model, opt, x.to(D))
    for p, r in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), r.detach())


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "aot_autograd"])
@pytest.mark.parametrize("fn, device", [
    (lambda x: x * x[0].item(), "lazyxla"),  # graph break on a value read
    (lambda x: (x * 2).tolist(), None),
    (lambda x: (print(x * 2), x + 1)[1], "lazyxla"),
    (lambda x: x[x > 0] * 2, "lazyxla"),  # data-dependent shape
    (lambda x: (x * 2).cpu() + 1, "cpu"),  # a host copy inside the graph
    (lambda x: ((x * 2).to("cpu") + 1).to(x.device), "lazyxla"),
], ids=["item", "tolist", "print", "masked_select", "to_cpu", "cpu_round_trip"])
def test_graph_breaks_and_host_copies_inside_a_compiled_function(fn, device, grad, capsys):
    """After a graph break Dynamo must not trace lazyxla's own kernels (or JAX); a host copy in
    the middle of a graph stays on the CPU and is redone on every call."""
    cf = torch.compile(fn, backend="lazyxla")
    with torch.set_grad_enabled(grad):
        for k in (1.0, 2.0):
            x = torch.tensor([1.0, -2.0, 3.0]) * k
            want, got = fn(x), cf(x.to(D))
            if device is None:
                assert got == want
            else:
                assert got.device.type == device
                torch.testing.assert_close(got.cpu(), want)


def test_a_cpu_scalar_that_requires_grad_is_refused_with_the_remedy():
    cf = torch.compile(lambda x, s: (x * s).sum(), backend="lazyxla")
    with pytest.raises(Exception, match="0-dim CPU tensor that requires grad"):
        cf(torch.ones(3).to(D), torch.tensor(2.0, requires_grad=True))


def test_a_view_fake_tensors_allow_runs_although_lazyxla_results_are_contiguous():
    """In the graph, relu of a transposed input keeps its strides (as eager), so transposing back
    allows `view`; lazyxla's relu result is contiguous, and the view must still record."""
    def fn(x):
        return torch.relu(x.transpose(1, 2)).transpose(1, 2).view(2, -1) * 2
    f = torch.compile(fn, backend="lazyxla")
    for k in range(2):
        x = torch.arange(24.0).view(2, 3, 4) - k
        torch.testing.assert_close(f(x.to(D)).cpu(), fn(x))


def test_outputs_report_eagers_strides_and_offsets_on_every_call():
    """A compiled call's outputs carry eager's layouts, as in lazy mode: column-major results,
    views of inputs and of results (offsets too), so reshape/contiguous/as_strided act as in eager."""
    def f(x):
        y = x.t() * 2
        return y, y.reshape(-1), x.t().clone(), x.t(), x[1:], (x + 1).t(), y.t()
    cf = torch.compile(f, backend="lazyxla")
    x = torch.arange(6.).reshape(2, 3)
    expected = f(x)
    for _ in range(2):  # the trace, then a replay
        got = cf(x.to(D))
        assert [g.stride() for g in got] == [e.stride() for e in expected]
        assert [g.storage_offset() for g in got] == [e.storage_offset() for e in expected]
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.cpu(), e)
        torch.testing.assert_close(got[5].as_strided((3,), (1,)).cpu(), expected[5].as_strided((3,), (1,)))


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_a_view_of_a_result_not_returned_is_eagers_view_of_it(grad):
    """Views that start past 0, skip elements or repeat them (a slice, a select, an expand, an
    empty slice of a transpose) are views of their whole result, as eager's: offsets and strides
    as eager's, and as_strided reads the rest. Before, each came back as a buffer of its own."""
    def f(x, k):
        return (x * 2)[:, k:], (x + 1)[k - 1], (x - 1)[None].expand(2, -1, -1), (x * 3).t()[:k - 1]
    cf = torch.compile(f, backend="lazyxla")
    x = torch.arange(6.).reshape(2, 3)
    with torch.set_grad_enabled(grad):
        for k in (1, 1, 2):
            got, want = cf(x.to(D), k), f(x, k)
            for g, w in zip(got, want):
                assert (g.shape, g.stride(), g.storage_offset()) == (w.shape, w.stride(), w.storage_offset())
                torch.testing.assert_close(g.cpu(), w)
            torch.testing.assert_close(got[0].as_strided((6,), (1,), 0).cpu(), x.reshape(-1) * 2)


def _branches(x):
    return torch.cond(x.sum() > 0, lambda z: (z.sin(), z + 1), lambda z: (z.cos(), z * 2), (x,))


@pytest.mark.parametrize("compiled", [False, True], ids=["lazy", "compiled"])
def test_cond_chooses_its_branch_on_every_call(compiled, fresh_metrics):
    """torch.cond records both branches and selects by the predicate inside the program: a
    replay whose predicate flips runs the other branch (the trace's branch was baked in before),
    and the predicate is never read back to the host."""
    f = torch.compile(_branches, backend="lazyxla") if compiled else _branches
    for sign in (1.0, -1.0, 1.0):
        x = torch.randn(4) + 3 * sign
        with torch.no_grad():
            got = f(x.to(D))
        for g, w in zip(got, _branches(x)):
            torch.testing.assert_close(g.cpu(), w)
    assert _count("ItemCall") == 0
    if compiled:
        assert _count("DynamoExtractCompiledGraph") == 1 and not metrics.events("partition")


def test_cond_trains_through_either_branch():
    def loss(x, w):
        return torch.cond(x.sum() > 0, lambda z, w: (z * w).sin(), lambda z, w: (z - w).cos(), (x, w)).sum()
    cf = torch.compile(loss, backend="lazyxla")
    for sign in (1.0, -1.0):
        x, w = torch.randn(4) + 3 * sign, torch.randn(4, requires_grad=True)
        wd = w.detach().to(D).requires_grad_()
        cf(x.to(D), wd).backward()
        loss(x, w).backward()
        torch.testing.assert_close(wd.grad.cpu(), w.grad)


def test_while_loop_runs_outside_the_program_on_every_call(fresh_metrics):
    """A while_loop's condition is read on the host on every iteration: traced into a program its
    iteration count would be replayed, so the loop runs outside it (lazy mode), every call."""
    from torch._higher_order_ops.while_loop import while_loop

    def doubling(x):
        return while_loop(lambda i, v: v.sum() < 100, lambda i, v: (i + 1, v * 2),
                          (torch.zeros((), dtype=torch.int64, device=x.device), x))
    cf = torch.compile(doubling, backend="lazyxla")
    for scale in (1.0, 10.0, 0.1):
        x = torch.ones(4) * scale
        with torch.no_grad():
            got = cf(x.to(D))
        for g, w in zip(got, doubling(x)):
            torch.testing.assert_close(g.cpu(), w)
    assert "while_loop" in " ".join(metrics.events("partition")[-1]["unsupported"])
    assert _count("DynamoRetrace") == 0


_W = torch.randn(5, 3)


def _sin_features(x):
    return torch.sin(x @ _W.to(x.device)).sum(-1)


_TRANSFORMS = {
    "vmap": torch.func.vmap(_sin_features),
    "vmap(grad)": torch.func.vmap(torch.func.grad(lambda v: _sin_features(v[None])[0])),
    "jacrev": torch.func.jacrev(_sin_features),
    "jvp": lambda x: torch.func.jvp(_sin_features, (x,), (torch.ones_like(x),))[1],
}


@pytest.mark.parametrize("grad_mode", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("name", _TRANSFORMS)
def test_torch_func_transforms_compile(name, grad_mode, fresh_metrics):
    """Dynamo inlines vmap/grad/jvp as functorch calls (_add_batch_dim, _wrap_for_grad): such a
    graph goes through aot_autograd, which traces them into aten ops, also under no_grad (run
    as they stand they handed the bridge batched tensors); aot_autograd's functional wrappers
    replay in-place view ops (squeeze_) on themselves, which lazyxla's kernels let through."""
    fn = _TRANSFORMS[name]
    with torch.set_grad_enabled(grad_mode):
        compiled = torch.compile(fn, backend="lazyxla")
        for shift in (0.0, 1.0):
            x = torch.randn(4, 5) + shift
            torch.testing.assert_close(compiled(x.to(D)).cpu(), fn(x))
    assert not metrics.executed_fallback_ops()


def test_dynamo_skips_lazyxla_runtime_frames_but_traces_its_examples():
    """lazyxla's runtime frames are never traced (a kernel's `.item()` traced as user code fails
    inside JAX); the models in lazyxla.examples are user code, compiled like any other."""
    from torch._dynamo import trace_rules

    import lazyxla.examples.gpt as gpt
    from lazyxla.device import dispatch
    from lazyxla.runtime import executor
    for module in (lazyxla, dispatch, executor, metrics):
        assert trace_rules.check_file(module.__file__).skipped, module.__name__
    assert not trace_rules.check_file(gpt.__file__).skipped


def test_example_gpt_compiles_into_one_forward_graph(fresh_metrics):
    from lazyxla.examples.gpt import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16))
    x = torch.randint(0, 11, (2, 8))
    want = model(x)
    got = torch.compile(model.to(D), backend="lazyxla")(x.to(D))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    assert _count("DynamoExtractCompiledGraph") == 1


def _set_data(x, y):
    x.data = y * 2
    return x + 1


def _clamp_data(w, x):
    w.data = w.data.clamp(-0.5, 0.5)
    return (w * x).sum()


@pytest.mark.parametrize("requires_grad", [False, True])
def test_setting_an_arguments_data_in_grad_mode_works_as_in_eager(requires_grad):
    """`x.data = y` is a set_ of an argument, which aot_autograd can express only with the graph's
    writes to its arguments kept in the graph (it asserted before)."""
    torch._dynamo.reset()
    cf = torch.compile(_set_data, backend="lazyxla")
    for k in (1.0, 2.0):
        x, y = torch.zeros(3, requires_grad=requires_grad), torch.full((3,), k)
        xd = torch.zeros(3, device=D, requires_grad=requires_grad)
        want, got = _set_data(x, y), cf(xd, y.to(D))
        torch.testing.assert_close(got.detach().cpu(), want.detach())
        torch.testing.assert_close(xd.detach().cpu(), x.detach())
        assert got.requires_grad == want.requires_grad


def test_a_parameter_clamped_through_data_gets_eagers_gradient():
    cf = torch.compile(_clamp_data, backend="lazyxla")
    for k in (1.0, 2.0):
        w = torch.linspace(-1, 1, 4, requires_grad=True)
        wd = torch.linspace(-1, 1, 4).to(D).requires_grad_()
        x = torch.full((4,), k)
        _clamp_data(w, x).backward()
        cf(wd, x.to(D)).backward()
        torch.testing.assert_close(wd.grad.cpu(), w.grad)
        torch.testing.assert_close(wd.detach().cpu(), w.detach())


def _detached(x):
    return x.detach()


def _input_and_detached(x):
    return x, x.detach()


def _detached_twice(x):
    return x.detach(), x.detach().detach()


def _written_then_detached(x):
    return x.add_(1).detach()


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "aot_autograd"])
@pytest.mark.parametrize("fn", [_detached, _input_and_detached, _detached_twice,
                                _written_then_detached])
def test_a_returned_detach_of_an_argument_shares_its_storage_and_version(fn, grad):
    """`x.detach()` returned is another tensor of x's storage in eager: a write through either is
    seen through the other, and they share one version counter."""
    cf = torch.compile(fn, backend="lazyxla")
    with torch.set_grad_enabled(grad):
        for k in (1.0, 2.0):
            x = torch.full((2, 3), k)
            xd = x.to(D)
            want, got = fn(x), cf(xd)
            want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
            for w, g in zip(want, got):
                assert g.untyped_storage().data_ptr() == xd.untyped_storage().data_ptr()
                torch.testing.assert_close(g.cpu(), w)
            with torch.no_grad():
                want[-1].mul_(10), got[-1].mul_(10)  # seen through x and every other output
                x.sub_(3), xd.sub_(3)
            torch.testing.assert_close(xd.cpu(), x)
            for w, g in zip(want, got):
                torch.testing.assert_close(g.cpu(), w)
                assert g._version == xd._version
