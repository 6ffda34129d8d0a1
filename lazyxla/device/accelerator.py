"""torch.accelerator's device-wide calls for lazyxla.

PyTorch answers them from a C++ device guard and caching allocator, which a device registered
from Python does not have: `synchronize()` raised "Backend doesn't support synchronizing all
streams", the memory calls an INTERNAL ASSERT. Where a call targets lazyxla (its device argument,
or the current accelerator when none is given), it is answered here, from JAX:

- synchronize: lazyxla.wait(), which blocks on every dispatched program whose results are held.
- memory_stats, memory_allocated, memory_reserved: bytes of the device arrays alive. A pending
  (unsynced) tensor holds none yet. From the JAX device's allocator statistics where it keeps
  them (GPU, TPU); otherwise (the CPU) the sum of the live arrays, which XLA allocates from host
  memory with no pool of its own, so reserved equals allocated.
- max_memory_allocated, max_memory_reserved: the allocator's peaks where JAX reports them; where
  it does not (the CPU) they raise rather than answer 0.
- reset_peak_memory_stats, reset_accumulated_memory_stats: raise; XLA's counters cannot be reset.
- empty_cache: drops the device arrays kept for reuse (runtime scalars, constant programs'
  results); XLA frees any other buffer when its last array goes. Then the free host memory glibc's
  malloc keeps goes back to the OS (lazyxla/host_malloc.py): on the CPU backend, XLA's buffers.
- get_memory_info: (free, total) from the allocator's limit where reported, else the host's
  physical memory (the CPU backend's device memory).
- set_device_index, and the context manager device_index: lazyxla has one device: index 0 (or -1)
  is a no-op, any other raises (the Python device guard ignored it, so `set_device_index(1)` and
  `with device_index(1):` passed and nothing changed).
"""
from __future__ import annotations

import collections
import functools
import os

import torch

from lazyxla.runtime.executor import release_cached_arrays

_installed = False

# JAX device memory_stats() key -> PyTorch's memory_stats() key
_STAT_KEYS = {
    "bytes_in_use": "allocated_bytes.all.current",
    "peak_bytes_in_use": "allocated_bytes.all.peak",
    "pool_bytes": "reserved_bytes.all.current",
    "peak_pool_bytes": "reserved_bytes.all.peak",
    "num_allocs": "allocation.all.allocated",
}


def _jax_device():
    import jax
    return jax.devices()[0]


def _targets_lazyxla(device) -> bool:
    if device is None or isinstance(device, int):
        acc = torch.accelerator.current_accelerator()
        if acc is None or acc.type != "lazyxla":
            return False
        device = torch.device("lazyxla", device if device is not None and device >= 0 else 0)
    device = torch.device(device)
    if device.type != "lazyxla":
        return False
    from .dispatch import check_device_index
    check_device_index(device)
    return True


def stats_from_jax(jax_stats: dict | None, live_bytes) -> collections.OrderedDict:
    """PyTorch's memory_stats() keys from a JAX device's statistics (None where it keeps none);
    `live_bytes()` gives the bytes of the live arrays for a device without statistics."""
    out = collections.OrderedDict()
    if jax_stats:
        for k, v in jax_stats.items():
            if k in _STAT_KEYS:
                out[_STAT_KEYS[k]] = int(v)
        out.setdefault("reserved_bytes.all.current", out.get("allocated_bytes.all.current", 0))
    else:
        out["allocated_bytes.all.current"] = out["reserved_bytes.all.current"] = live_bytes()
    return collections.OrderedDict(sorted(out.items()))


def _live_bytes() -> int:
    import jax
    dev = _jax_device()
    return sum(a.nbytes for a in jax.live_arrays() if dev in a.devices())


def memory_stats(device=None) -> collections.OrderedDict:
    return stats_from_jax(_jax_device().memory_stats(), _live_bytes)


def _peak(key):
    def peak(device=None):
        stats = memory_stats(device)
        if key not in stats:
            raise RuntimeError(f"lazyxla: peak device memory is not tracked on JAX's "
                               f"{_jax_device().platform} backend (it keeps no allocator statistics); "
                               f"torch.accelerator.memory_allocated() gives the current bytes")
        return stats[key]
    return peak


def _no_reset(device=None):
    raise RuntimeError("lazyxla: XLA's allocator statistics cannot be reset; read "
                       "torch.accelerator.memory_allocated() before and after instead")


def get_memory_info(device=None) -> tuple[int, int]:
    stats = _jax_device().memory_stats() or {}
    if "bytes_limit" in stats:
        total = int(stats["bytes_limit"])
        return total - int(stats.get("bytes_in_use", 0)), total
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


def _synchronize(device=None):
    from lazyxla.runtime.executor import wait
    wait()


ROUTES = {
    "synchronize": _synchronize,
    "memory_stats": memory_stats,
    "memory_allocated": lambda device=None: memory_stats(device)["allocated_bytes.all.current"],
    "memory_reserved": lambda device=None: memory_stats(device)["reserved_bytes.all.current"],
    "max_memory_allocated": _peak("allocated_bytes.all.peak"),
    "max_memory_reserved": _peak("reserved_bytes.all.peak"),
    "reset_peak_memory_stats": _no_reset,
    "reset_accumulated_memory_stats": _no_reset,
    "empty_cache": release_cached_arrays,
    "get_memory_info": get_memory_info,
    # None: PyTorch's own call, once _targets_lazyxla has checked the index
    "set_device_index": None,
    "set_device_idx": None,
}


def _routed(original, ours):
    @functools.wraps(original)
    def call(*args, **kwargs):  # (torch.accelerator's device argument is positional-only)
        if _targets_lazyxla(args[0] if args else None) and ours is not None:
            return ours(*args, **kwargs)
        return original(*args, **kwargs)
    call._lazyxla_original = original
    return call


class _DeviceIndex(torch.accelerator.device_index):
    """torch.accelerator.device_index, whose index is checked as set_device_index's is: PyTorch's
    context manager calls the device guard itself."""
    _lazyxla_original = torch.accelerator.device_index

    def __enter__(self) -> None:
        if self.idx is not None:
            _targets_lazyxla(self.idx)
        return super().__enter__()


def install() -> None:
    global _installed
    if _installed:
        return
    if not hasattr(torch.accelerator.device_index, "_lazyxla_original"):
        torch.accelerator.device_index = _DeviceIndex
    import torch.accelerator.memory as memory_module
    for name, ours in ROUTES.items():
        for module in (torch.accelerator, memory_module):
            original = getattr(module, name, None)
            if original is not None and not hasattr(original, "_lazyxla_original"):
                setattr(module, name, _routed(original, ours))
    _installed = True
