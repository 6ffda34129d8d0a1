"""torch.accelerator's device-wide calls answer for lazyxla (they raised: no C++ device guard or
caching allocator behind a device registered from Python)."""
import gc

import pytest
import torch

import lazyxla
from lazyxla.device import accelerator

D = lazyxla.device()
A = torch.accelerator


def test_synchronize_waits_for_dispatched_programs(monkeypatch):
    from lazyxla.runtime import executor
    waited = []
    monkeypatch.setattr(executor, "wait", lambda: waited.append(True))
    for device in ((), (D,), ("lazyxla",), (0,)):
        A.synchronize(*device)
    assert len(waited) == 4
    torch.get_device_module("lazyxla").synchronize()  # the device module's own, as before
    assert len(waited) == 5


def test_memory_allocated_counts_the_device_arrays_alive():
    gc.collect()  # arrays of earlier tests in reference cycles would go during the test
    A.empty_cache()  # (the runtime scalars it keeps are device arrays too)
    lazyxla.sync(wait=True)
    before = A.memory_allocated()
    x = torch.ones(256, 1024, device=D) * 2  # pending: no device array yet
    assert A.memory_allocated(D) == before
    lazyxla.sync(wait=True)
    scalar = 8  # the runtime scalar 2 (int64), kept on the device for the next program fed it
    assert A.memory_allocated() - before == 256 * 1024 * 4 + scalar
    assert A.memory_reserved() == A.memory_allocated()  # the CPU backend: no pool of its own
    assert A.memory_stats("lazyxla:0")["allocated_bytes.all.current"] == A.memory_allocated()
    del x
    gc.collect()
    assert A.memory_allocated() - before == scalar
    A.empty_cache()
    assert A.memory_allocated() == before


def test_empty_cache_releases_the_arrays_kept_for_reuse():
    gc.collect()
    A.empty_cache()
    lazyxla.sync(wait=True)
    before = A.memory_allocated()
    assert torch.ones(64, device=D).tolist() == [1.0] * 64  # a constant, kept for the next read
    gc.collect()
    assert A.memory_allocated() - before == 64 * 4
    A.empty_cache()
    assert A.memory_allocated() == before
    assert torch.ones(64, device=D).tolist() == [1.0] * 64  # made again


def test_what_cannot_be_measured_raises_instead_of_reading_zero():
    with pytest.raises(RuntimeError, match="peak device memory is not tracked"):
        A.max_memory_allocated()
    with pytest.raises(RuntimeError, match="cannot be reset"):
        A.reset_peak_memory_stats()
    with pytest.raises(RuntimeError, match="invalid device index 1"):
        A.memory_allocated("lazyxla:1")
    A.empty_cache()
    free, total = A.get_memory_info()
    assert 0 < free <= total


def test_allocator_statistics_map_to_pytorchs_keys():
    """Where JAX keeps allocator statistics (GPU, TPU), they are reported under PyTorch's names."""
    gpu = {"bytes_in_use": 10, "peak_bytes_in_use": 30, "pool_bytes": 64, "peak_pool_bytes": 96,
           "num_allocs": 7, "bytes_limit": 1 << 30}
    stats = accelerator.stats_from_jax(gpu, live_bytes=lambda: pytest.fail("stats are given"))
    assert stats == {"allocated_bytes.all.current": 10, "allocated_bytes.all.peak": 30,
                     "reserved_bytes.all.current": 64, "reserved_bytes.all.peak": 96,
                     "allocation.all.allocated": 7}
    assert accelerator.stats_from_jax(None, live_bytes=lambda: 5) == {
        "allocated_bytes.all.current": 5, "reserved_bytes.all.current": 5}


def test_set_device_index_accepts_only_the_one_device():
    """It passed for any index and changed nothing (the Python device guard ignores it)."""
    for index in (0, -1):
        A.set_device_index(index)
        assert A.current_device_index() == 0
    for index in (1, 5):
        with pytest.raises(RuntimeError, match=f"invalid device index {index}: lazyxla has one device"):
            A.set_device_index(index)
    with pytest.raises(RuntimeError, match="invalid device index 2"):
        A.set_device_idx(2)


def test_device_index_context_accepts_only_the_one_device():
    """`with device_index(3):` passed and ran its body on device 0."""
    for index in (0, -1, None):
        with A.device_index(index):
            assert A.current_device_index() == 0
    ran = []
    with pytest.raises(RuntimeError, match="invalid device index 3: lazyxla has one device"):
        with A.device_index(3):
            ran.append(True)
    assert not ran and A.current_device_index() == 0
