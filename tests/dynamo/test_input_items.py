"""Floats a compiled graph reads from its inputs (`lr.item()`): fed to its program on every call
where that makes the same program, keyed by value otherwise (lazyxla/dynamo/input_items.py)."""
import copy
import logging
import operator

import pytest
import torch

import lazyxla
from lazyxla import metrics
from lazyxla.dynamo.bridge import Bridge

D = lazyxla.device()
aten = torch.ops.aten


def _count(name):
    return metrics.counter_value(name) or 0


def _graph(body):
    """A graph of (x on the device, s a 0-dim CPU float64 tensor) that reads s.item()."""
    g = torch.fx.Graph()
    x, s = g.placeholder("x"), g.placeholder("s")
    item = g.call_method("item", (s,))
    g.output(body(g, x, item))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def _calls(gm, values, reference):
    """Calls gm's Bridge with each value; checks each result against reference(x, value) and
    returns the extractions each call made."""
    bridge = Bridge(gm, "items")
    x = torch.tensor([0.25, -1.5, 3.0])
    made = []
    for v in values:
        before = _count("DynamoExtractCompiledGraph")
        out = bridge(x.to(D), torch.tensor(v, dtype=torch.float64))
        made.append(_count("DynamoExtractCompiledGraph") - before)
        want = reference(x, v)
        if isinstance(want, tuple):
            torch.testing.assert_close(out[0].cpu(), want[0])
            assert out[1] == want[1] and type(out[1]) is type(want[1])
        else:
            torch.testing.assert_close(out.cpu(), want)
    return made


def test_a_float_read_and_arithmetic_on_it_are_fed_on_every_call():
    """x * s + (1 - s) / 2: two traces on the first call (with two sets of stand-ins, compared),
    none after, for any value."""
    def body(g, x, s):
        half = g.call_function(operator.truediv, (g.call_function(operator.sub, (1, s)), 2))
        return g.call_function(aten.add.Tensor, (g.call_function(aten.mul.Tensor, (x, s)), half))
    made = _calls(_graph(body), [0.5, 0.7, -3.25, 0.0, 1e30, 0.5],
                  lambda x, s: x * s + (1 - s) / 2)
    assert made == [2, 0, 0, 0, 0, 0]


def test_feeding_can_be_turned_off(monkeypatch):
    """LAZYXLA_FEED_ITEM_INPUTS=0: keyed by value, one extraction per new value."""
    monkeypatch.setenv("LAZYXLA_FEED_ITEM_INPUTS", "0")

    def body(g, x, s):
        return g.call_function(aten.mul.Tensor, (x, s))
    assert _calls(_graph(body), [0.5, 0.7, 0.5], lambda x, s: x * s) == [1, 1, 0]


def test_a_float_an_op_takes_as_an_attribute_stays_keyed_by_value():
    """logit's eps is part of the program: the two traces differ, so each new value re-extracts
    and a value seen before does not."""
    def body(g, x, s):
        return g.call_function(aten.logit.default, (g.call_function(aten.sigmoid.default, (x,)), s))
    made = _calls(_graph(body), [0.1, 0.2, 0.1, 0.3],
                  lambda x, s: torch.logit(torch.sigmoid(x), eps=s))
    assert made[1:] == [1, 0, 1] and made[0] >= 1


def test_a_float_returned_from_the_graph_is_this_calls_value():
    def body(g, x, s):
        return (g.call_function(aten.mul.Tensor, (x, s)), g.call_function(operator.mul, (s, 2)))
    made = _calls(_graph(body), [0.5, 0.75, 0.5, -3.0], lambda x, s: (x * s, s * 2))
    assert made == [2, 0, 0, 0]


def test_a_graph_that_only_returns_a_float_computed_from_a_read_has_no_program():
    def body(g, x, s):
        return (x, g.call_function(operator.sub, (s, 1)))
    made = _calls(_graph(body), [0.5, 0.25, 4.0], lambda x, s: (x, s - 1))
    assert made == [2, 0, 0]


def test_a_float_that_stops_being_real_is_keyed_from_then_on(caplog):
    """s ** 0.5 of a negative s is complex in Python: that call and every later one are keyed by
    value, and the complex scalar gives eager's complex result."""
    def body(g, x, s):
        return g.call_function(aten.mul.Tensor, (x, g.call_function(operator.pow, (s, 0.5))))
    with caplog.at_level(logging.WARNING, logger="lazyxla.dynamo"):
        made = _calls(_graph(body), [4.0, 2.25, -1.0, 9.0], lambda x, s: x * (s ** 0.5))
    assert made == [2, 0, 1, 1]
    assert "by value from now on" in caplog.text


def test_two_reads_with_equal_values_are_fed_apart():
    """Two inputs holding the same value get distinct stand-ins: each scalar stays tied to its
    own input when they later differ."""
    g = torch.fx.Graph()
    x, a, b = g.placeholder("x"), g.placeholder("a"), g.placeholder("b")
    ia, ib = g.call_method("item", (a,)), g.call_method("item", (b,))
    g.output(g.call_function(aten.sub.Tensor, (g.call_function(aten.mul.Tensor, (x, ia)), ib)))
    bridge = Bridge(torch.fx.GraphModule(torch.nn.Module(), g), "two")
    x = torch.tensor([1.0, 2.0])
    f64 = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    for va, vb in [(0.5, 0.5), (2.0, 0.25), (0.5, 3.0)]:
        torch.testing.assert_close(bridge(x.to(D), f64(va), f64(vb)).cpu(), x * va - vb)
    assert bridge.items_fed and len(bridge.programs) == 1


def test_a_float_read_before_a_cpu_op_is_read_again_in_the_partition_that_uses_it():
    """lr = s.item(), then a CPU op, then x * lr: the read moves into the partition after the CPU
    op (the one before it, left empty, goes), whose Bridge feeds it on every call rather than
    taking the float as an argument keyed by value."""
    from lazyxla.dynamo.partition import partition
    g = torch.fx.Graph()
    x, s = g.placeholder("x"), g.placeholder("s")
    lr = g.call_method("item", (s,))
    neg = g.call_function(operator.neg, (lr,))
    c = g.call_function(torch.ops.lazyxla_test.cpu_only.default, (x,))
    g.output(g.call_function(aten.mul.Tensor, (c, neg)))
    fused, n = partition(torch.fx.GraphModule(torch.nn.Module(), g), [c], Bridge)
    assert n == 1
    (bridge,) = [mod.bridge for name, mod in fused.named_children() if name.startswith("fused_")]
    assert bridge.items_fed
    x = torch.tensor([1.0, -2.0])
    for v in (0.5, 0.25, 3.0):
        out = fused(x.to(D), torch.tensor(v, dtype=torch.float64))
        torch.testing.assert_close(out.cpu(), x * 3 * -v)
    assert len(bridge.programs) == 1 and bridge.retraces == 0


def test_a_float_read_before_a_cpu_op_writes_its_input_keeps_the_value_it_read():
    """s = c.item(); c += 1 (on the CPU); x * s: the read must not move past the write."""
    from lazyxla.dynamo.partition import partition
    g = torch.fx.Graph()
    x, c = g.placeholder("x"), g.placeholder("c")
    s = g.call_method("item", (c,))
    bump = g.call_function(aten.add_.Tensor, (c, 1))
    g.output(g.call_function(aten.mul.Tensor, (x, s)))
    fused, _ = partition(torch.fx.GraphModule(torch.nn.Module(), g), [bump], Bridge)
    x, count = torch.tensor([1.0, -2.0]), torch.tensor(2.0, dtype=torch.float64)
    for want in (2.0, 3.0, 4.0):
        torch.testing.assert_close(fused(x.to(D), count).cpu(), x * want)
    assert count.item() == 5.0


_SCHEDULES = {
    "adamw_linear": (lambda p: torch.optim.AdamW(p, lr=0.01),
                     lambda o: torch.optim.lr_scheduler.LinearLR(o, 0.1, total_iters=10)),
    "sgd_momentum_onecycle": (lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
                              lambda o: torch.optim.lr_scheduler.OneCycleLR(o, 0.05, total_steps=10)),
    "adam_for_loop_cosine": (lambda p: torch.optim.Adam(p, lr=0.01, foreach=False),
                             lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 10)),
}


@pytest.mark.parametrize("name", list(_SCHEDULES))
def test_a_compiled_optimizer_step_under_a_scheduler_stops_retracing(name):
    """A new learning rate (and OneCycleLR's momentum) every step: Dynamo recompiles once to make
    them inputs; from then on no step re-extracts, and the parameters follow eager's."""
    make_opt, make_sched = _SCHEDULES[name]
    torch._dynamo.reset()
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    model = copy.deepcopy(ref).to(D)
    x = torch.randn(5, 3)
    runs = []
    for m, xx, compiled in ((ref, x, False), (model, x.to(D), True)):
        opt = make_opt(m.parameters())
        sched = make_sched(opt)
        step = torch.compile(opt.step, backend="lazyxla") if compiled else opt.step
        runs.append((m, xx, opt, sched, step))
    extracts = []
    for _ in range(8):
        for m, xx, opt, sched, step in runs:
            opt.zero_grad()
            m(xx).square().sum().backward()
            step()
            sched.step()
        extracts.append(_count("DynamoExtractCompiledGraph"))
        for p, r in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.detach().cpu(), r.detach(), rtol=1e-5, atol=1e-6)
    assert extracts[3:] == [extracts[3]] * 5, extracts
