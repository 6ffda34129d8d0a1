"""A computation that fails at sync loses no other result and fails no later sync."""
import pytest
import torch

import lazyxla
from lazyxla.lowering.registry import LOWERINGS

D = lazyxla.device()


@pytest.fixture
def failing_sin(monkeypatch):
    low = LOWERINGS[torch.ops.aten.sin.default]

    def boom(*args, **kwargs):
        raise ValueError("boom")
    monkeypatch.setattr(low, "fn", boom)
    return low


def test_failing_buffer_is_isolated_and_raises_when_read(failing_sin):
    good = torch.ones(7, 5, device=D) * 3       # shapes no other test compiles: a fresh program
    other = torch.ones(7, 5, device=D) + 4
    bad = torch.ones(7, 5, device=D).sin()
    with pytest.raises(ValueError, match="boom") as err:
        lazyxla.sync()
    assert any("lowering of aten.sin.default (output (7, 5) torch.float32)" in n for n in getattr(err.value, "__notes__", []))
    assert lazyxla.metrics.counter_value("FailedSyncBuffer") >= 1
    torch.testing.assert_close(good.cpu(), torch.full((7, 5), 3.0))
    torch.testing.assert_close(other.cpu(), torch.full((7, 5), 5.0))
    lazyxla.sync()  # the failing buffer left the pending set
    with pytest.raises(ValueError, match="boom"):
        bad.cpu()


def test_tensor_updated_in_place_by_a_failing_computation_keeps_its_synced_value(failing_sin):
    w = torch.full((7, 6), 2.0, device=D)
    lazyxla.sync()
    w.mul_(3)
    w.sin_()
    with pytest.raises(ValueError, match="boom"):
        lazyxla.sync()
    torch.testing.assert_close(w.cpu(), torch.full((7, 6), 2.0))
    w.add_(1)  # and it is usable again
    lazyxla.sync()
    torch.testing.assert_close(w.cpu(), torch.full((7, 6), 3.0))


def test_a_read_isolates_a_failing_write_as_sync_does(failing_sin):
    """Reading a tensor whose pending in-place write fails raises once; the tensor keeps its value
    from before the write (as eager's does when an in-place op raises), with no sync() needed."""
    w = torch.full((7, 4), 2.0, device=D)
    lazyxla.sync()
    w.sin_()
    with pytest.raises(ValueError, match="boom"):
        w.cpu()
    torch.testing.assert_close(w.cpu(), torch.full((7, 4), 2.0))
    view = w[1:]
    w.sin_()
    with pytest.raises(ValueError, match="boom"):
        view.cpu()  # through a view: its root is reverted too
    torch.testing.assert_close(view.cpu(), torch.full((6, 4), 2.0))
