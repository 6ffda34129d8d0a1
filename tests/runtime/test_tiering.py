"""Shape variants compile quick first (runtime/tiering.py): a graph whose op structure was compiled
before at other shapes gets a quick compile; a variant reused UPGRADE_START times compiles again,
optimized, in the background, and runs optimized from run UPGRADE_AT on, whenever that compile
finished; the first graph of a structure is compiled optimized, unless torch.compile traced it
with symbolic shapes; every program computes eager's values."""
import copy
import logging

import pytest
import torch

import lazyxla
from lazyxla import metrics
from lazyxla.runtime import compiler, executor, tiering
from lazyxla.runtime.tiering import UPGRADE_AT, UPGRADE_START


@pytest.fixture(autouse=True)
def _fresh_structures():
    tiering.forget()
    yield
    tiering.forget()


def _f(x):
    return (x.sin() * 3 + x).cumsum(1)


def _run(fn, cpu_x, dev):
    """fn of cpu_x on the device, synced, checked against the CPU; returns the Program it ran."""
    got = fn(cpu_x.to(dev))
    lazyxla.sync()
    torch.testing.assert_close(got.cpu(), fn(cpu_x), rtol=1e-5, atol=1e-5)
    return executor.CACHE.get(metrics.events("compile")[-1]["hash"])


def _compiled_quick():
    return [e["quick"] for e in metrics.events("compile")]


def test_the_first_shape_compiles_optimized_and_other_shapes_quick(dev):
    metrics.clear_all()
    first = _run(_f, torch.randn(5, 7), dev)
    second = _run(_f, torch.randn(6, 7), dev)
    third = _run(_f, torch.randn(6, 9), dev)
    assert _compiled_quick() == [False, True, True]
    assert first.upgrade is None and second.upgrade is not None and third.upgrade is not None
    assert metrics.counter_value("QuickCompile") == 2
    text = lazyxla.report()
    assert "shape variants compiled quick: 2" in text and text.count("ms  (quick)") == 2


def test_other_ops_or_dtypes_are_not_variants(dev):
    metrics.clear_all()
    _run(_f, torch.randn(5, 11), dev)
    _run(lambda x: (x.cos() * 3 + x).cumsum(1), torch.randn(6, 11), dev)  # cos for sin
    _run(_f, torch.randn(6, 11, dtype=torch.float64), dev)  # float64 parameters
    _run(lambda x: (x.sin() * 3 + x).cumsum(0), torch.randn(7, 11), dev)  # only an int differs
    assert _compiled_quick() == [False, False, False, True]


def test_a_reused_variant_runs_optimized_from_run_UPGRADE_AT_on_however_soon_it_compiled(dev):
    metrics.clear_all()
    _run(_f, torch.randn(5, 13), dev)
    x = torch.randn(6, 13)
    program = _run(_f, x, dev)  # run 1
    quick, upgrade = program.compiled, program.upgrade
    assert upgrade.options == compiler.compile_options() != tiering.QUICK_OPTIONS
    for run in range(2, UPGRADE_AT):
        _run(_f, x, dev)
        assert program.compiled is quick and upgrade.runs == run
        if run == UPGRADE_START:
            assert upgrade.future is not None
            upgrade.future.result()  # compiled already: still not used before run UPGRADE_AT
            assert metrics.counter_value("UpgradeCompile") == 1
    _run(_f, x, dev)  # run UPGRADE_AT
    assert program.compiled is not quick and program.upgrade is None
    assert metrics.counter_value("UpgradeCompile") == 1
    for _ in range(2):
        _run(_f, x, dev)
    assert metrics.counter_value("UpgradeCompile") == 1 and metrics.counter_value("QuickCompile") == 1


def _lowering_fails():
    raise RuntimeError("no lowering today")


@pytest.mark.parametrize("how", ["compile", "lowering"])
def test_a_failed_optimized_compile_keeps_the_quick_program(dev, caplog, how):
    n = 17 if how == "compile" else 23  # (programs of their own)
    _run(_f, torch.randn(5, n), dev)
    x = torch.randn(6, n)
    program = _run(_f, x, dev)
    quick = program.compiled
    if how == "compile":
        program.upgrade.options = {"xla_no_such_option": 1}  # XLA refuses it
    else:
        program.upgrade.lower = _lowering_fails
    with caplog.at_level(logging.WARNING, logger="lazyxla"):
        for _ in range(UPGRADE_AT):
            _run(_f, x, dev)
    assert program.compiled is quick and program.upgrade is None
    assert "optimized compile of graph" in caplog.text and "quick program stays" in caplog.text


def test_quick_compiles_can_be_turned_off(dev, monkeypatch):
    monkeypatch.setenv("LAZYXLA_QUICK_COMPILE", "0")
    metrics.clear_all()
    _run(_f, torch.randn(5, 19), dev)
    _run(_f, torch.randn(6, 19), dev)
    assert _compiled_quick() == [False, False]


def test_new_lengths_under_dynamic_compile_run_quick_and_match_eager(dev):
    torch._dynamo.reset()
    metrics.clear_all()
    lin = torch.nn.Linear(8, 8)
    lin_dev = copy.deepcopy(lin).to(dev)

    def attention(lin):
        return lambda x: torch.softmax(lin(x) @ x.transpose(1, 2), -1).sum(1)
    cm = torch.compile(attention(lin_dev), backend="lazyxla", dynamic=True)
    try:
        for n in (5, 6, 7, 6):
            x = torch.randn(2, n, 8)
            torch.testing.assert_close(cm(x.to(dev)).cpu(), attention(lin)(x), rtol=1e-5, atol=1e-5)
    finally:
        torch._dynamo.reset()
    assert _compiled_quick() == [True, True, True]  # (symbolic shapes: quick from the first)


def test_a_graph_of_static_shapes_compiles_optimized_first(dev):
    torch._dynamo.reset()
    metrics.clear_all()

    def fn(x):
        return torch.softmax(x @ x.transpose(1, 2), -1).sum(1)
    cm = torch.compile(fn, backend="lazyxla", dynamic=False)
    try:
        for n in (5, 6):
            x = torch.randn(2, n, 8)
            torch.testing.assert_close(cm(x.to(dev)).cpu(), fn(x), rtol=1e-5, atol=1e-5)
    finally:
        torch._dynamo.reset()
    assert _compiled_quick() == [False, True]  # (Dynamo recompiled for the second shape)


def test_a_variant_with_an_op_that_leaves_some_outputs_uncomputed(dev):
    """native_layer_norm_backward without a weight computes only the input's gradient."""
    metrics.clear_all()

    def grad_of(x):
        x = x.detach().requires_grad_()
        (torch.nn.functional.layer_norm(x, x.shape[-1:]) * x).sum().backward()
        return x.grad
    for n in (6, 7):
        x = torch.randn(3, n)
        got = grad_of(x.to(dev))
        lazyxla.sync()
        torch.testing.assert_close(got.cpu(), grad_of(x), rtol=1e-5, atol=1e-5)
    assert _compiled_quick()[-1] is True


def test_runs_from_two_threads_upgrade_the_program_once(dev, monkeypatch):
    import threading

    import numpy as np
    metrics.clear_all()
    _run(_f, torch.randn(5, 29), dev)
    calls = []
    execute = executor.execute
    monkeypatch.setattr(executor, "execute", lambda p, inputs: calls.append((p, inputs)) or execute(p, inputs))
    x = torch.randn(6, 29)
    program = _run(_f, x, dev)
    monkeypatch.undo()
    (program_run, inputs), = calls
    assert program_run is program and program.upgrade is not None
    outs, errors = [], []

    def runs():
        try:
            for _ in range(UPGRADE_AT):
                outs.append(np.asarray(executor.execute(program, inputs)[0]))
        except Exception as e:  # (reported below: a thread's exception is otherwise lost)
            errors.append(e)
    threads = [threading.Thread(target=runs) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(outs) == 2 * UPGRADE_AT
    want = _f(x).numpy()
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-5)
    assert program.upgrade is None and metrics.counter_value("UpgradeCompile") == 1
