"""The public runtime API the dynamo bridge is built on, tested on its own."""
import torch

import lazyxla
from lazyxla import metrics


def test_warm_up_compiles_without_executing(fresh_metrics):
    d = lazyxla.device()
    x = torch.arange(6.0, device=d).reshape(2, 3)
    lazyxla.sync()
    y = x * 7 - 1
    before = (metrics.metric_data("ExecuteTime") or (0,))[0]
    lazyxla.warm_up_cache([y])
    assert (metrics.metric_data("ExecuteTime") or (0,))[0] == before
    assert metrics.counter_value("UncachedCompile") >= 1
    h = lazyxla.graph_hash([y])
    inputs = lazyxla.graph_inputs([y])
    lazyxla.clear_pending_ir()
    (out,) = lazyxla.run_cached_graph(h, inputs)
    torch.testing.assert_close(out.cpu(), torch.arange(6.0).reshape(2, 3) * 7 - 1)
    assert metrics.counter_value("RunCachedGraph") == 1


def test_run_cached_graph_binds_inputs_by_position():
    d = lazyxla.device()
    a = torch.full((3,), 2.0, device=d)
    b = torch.full((3,), 5.0, device=d)
    lazyxla.sync()
    y = a - b
    h = lazyxla.graph_hash([y])
    ins = lazyxla.graph_inputs([y])
    lazyxla.clear_pending_ir()
    (fwd,) = lazyxla.run_cached_graph(h, ins)
    (rev,) = lazyxla.run_cached_graph(h, list(reversed(ins)))
    assert fwd.cpu().tolist() == [-3.0] * 3 and rev.cpu().tolist() == [3.0] * 3


def test_clear_pending_ir_restores_mutated_tensors():
    d = lazyxla.device()
    x = torch.ones(3, device=d)
    lazyxla.sync()
    x.mul_(10)
    x[0] = 5
    assert lazyxla.needs_materialization([x]) == [True]
    lazyxla.clear_pending_ir()
    assert lazyxla.needs_materialization([x]) == [False]
    assert x.cpu().tolist() == [1.0, 1.0, 1.0]


def test_run_cached_graph_takes_whole_tensors_and_checks_its_inputs():
    import pytest
    d = lazyxla.device()
    a = torch.full((2, 3), 2.0, device=d)
    b = torch.full((2, 3), 5.0, device=d)
    lazyxla.sync()
    y = a * b
    h = lazyxla.graph_hash([y])
    lazyxla.clear_pending_ir()
    (out,) = lazyxla.run_cached_graph(h, [a, b + 1])  # tensors, one of them pending
    assert out.cpu().tolist() == [[12.0] * 3] * 2
    with pytest.raises(ValueError, match="takes 2 inputs .* got 1"):
        lazyxla.run_cached_graph(h, [a])
    with pytest.raises(ValueError, match=r"input 1 must have shape \(2, 3\) and dtype torch.float32, "
                                         r"got shape \(3,\)"):
        lazyxla.run_cached_graph(h, [a, torch.ones(3, device=d)])
    with pytest.raises(ValueError, match="dtype torch.float32, got shape \\(2, 3\\) and dtype int64"):
        lazyxla.run_cached_graph(h, [a, torch.ones(2, 3, dtype=torch.int64, device=d)])
    with pytest.raises(TypeError, match=r"input 0: pass a device array .* \(got a tensor on cpu\)"):
        lazyxla.run_cached_graph(h, [torch.ones(2, 3), b])
    with pytest.raises(TypeError, match=r"not a view \(got a view\)"):
        lazyxla.run_cached_graph(h, [torch.ones(3, 2, device=d).t(), b])
    y = a * 3
    h = lazyxla.graph_hash([y])
    lazyxla.clear_pending_ir()
    with pytest.raises(TypeError, match="input 1 is a runtime scalar"):
        lazyxla.run_cached_graph(h, [a, a])
    (out,) = lazyxla.run_cached_graph(h, [a, 4])
    assert out.cpu().tolist() == [[8.0] * 3] * 2
    # a value of another kind or out of range: 2.5 for the int 3 was truncated, '7' parsed as 7,
    # None and 2**70 failed deep inside without naming the input
    for bad in (2.5, "7", None, 2 ** 70, True, 1j):
        with pytest.raises(TypeError, match="input 1 is a runtime scalar"):
            lazyxla.run_cached_graph(h, [a, bad])
    z = a * 0.5
    h = lazyxla.graph_hash([z])
    lazyxla.clear_pending_ir()
    (out,) = lazyxla.run_cached_graph(h, [a, 3])  # an int for a float: as Python promotes it
    assert out.cpu().tolist() == [[6.0] * 3] * 2
    with pytest.raises(TypeError, match="input 1 is a runtime scalar"):
        lazyxla.run_cached_graph(h, [a, "0.5"])


def test_tensor_api_names_what_is_not_a_lazyxla_tensor():
    import pytest
    d = lazyxla.device()
    x = torch.ones(3, device=d) + 1
    assert lazyxla.needs_materialization(x) == [True]  # one tensor is one tensor, not its rows
    assert lazyxla.graph_hash(x) == lazyxla.graph_hash([x])
    for api in (lazyxla.graph_hash, lazyxla.graph_inputs, lazyxla.warm_up_cache,
                lazyxla.needs_materialization):
        with pytest.raises(TypeError, match=f"lazyxla.{api.__name__}: item 1 is a tensor on cpu"):
            api([x, torch.ones(3)])
        with pytest.raises(TypeError, match="expected a lazyxla tensor or a list of them, got int"):
            api(3)
    lazyxla.sync()


def test_cache_capacity_is_a_positive_int():
    import pytest
    from lazyxla.runtime import executor
    old = executor.CACHE.capacity
    for bad, error in ((0, ValueError), (-2, ValueError), ("5", TypeError), (2.5, TypeError),
                       (True, TypeError)):
        with pytest.raises(error, match="set_cache_capacity"):
            lazyxla.set_cache_capacity(bad)
    assert executor.CACHE.capacity == old
