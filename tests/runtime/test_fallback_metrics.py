"""Ops with no lowering run on the CPU, counted and listed; the metrics API of torch_xla."""
import torch

import lazyxla
from lazyxla import metrics


def test_fallback_is_counted_listed_and_correct(fresh_metrics):
    x = torch.tensor([0.0, 3.0, 0.0, 5.0])
    nz = torch.nonzero(x.to(lazyxla.device()))  # data-dependent shape: CPU fallback
    torch.testing.assert_close(nz.cpu(), torch.nonzero(x))
    assert nz.device.type == "lazyxla"
    assert "nonzero" in metrics.executed_fallback_ops()
    assert metrics.counter_value("aten::nonzero") == 1
    sites = metrics.fallback_sites()["nonzero"]
    assert any("test_fallback_metrics.py" in s for s in sites)


def test_metrics_api_semantics(fresh_metrics):
    assert metrics.counter_value("NoSuchCounter") is None
    assert metrics.metric_data("NoSuchMetric") is None
    d = lazyxla.device()
    (torch.ones(3, device=d) + 1).cpu()
    assert "CompileTime" in metrics.metric_names() or metrics.counter_value("CachedCompile")
    count, total, samples = metrics.metric_data("ExecuteTime")
    assert count >= 1 and total > 0 and len(samples) == count
    assert "TransferFromDeviceTime" in metrics.metric_names()
    text = metrics.report()
    assert "Metric: ExecuteTime" in text and "Counter: MarkStep" not in text
    lazyxla.sync()
    assert "Counter: MarkStep" in metrics.report()
    metrics.clear_counters()
    assert metrics.counter_names() == [] and metrics.metric_names()
    metrics.clear_all()
    assert metrics.metric_names() == []
