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
