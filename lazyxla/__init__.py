"""lazyxla: a lazy-tensor PyTorch device and a torch.compile backend that compile with XLA (JAX).

    import lazyxla
    dev = lazyxla.device()
    x = torch.randn(4, 4, device=dev)
    y = (x @ x).relu()       # recorded, not executed
    lazyxla.sync()           # one XLA program, compiled once and cached
"""
from __future__ import annotations

__version__ = "0.1.0"

import torch as _torch

from . import metrics  # noqa: F401
from .device import register as _register

_register()

from .runtime import executor as _executor  # noqa: E402
from .runtime.cache import initialize_persistent_cache as _init_persistent  # noqa: E402
from .runtime.executor import (  # noqa: E402,F401
    clear_pending_ir, graph_hash, graph_inputs, needs_materialization, run_cached_graph,
    warm_up_cache)


def device(index: int = 0) -> _torch.device:
    """The lazyxla device. There is one logical device; scale out through sharding."""
    if index != 0:
        raise ValueError("lazyxla has a single logical device (index 0)")
    return _torch.device("lazyxla", 0)


def sync(wait: bool = False) -> None:
    """Execute all pending graphs (like torch_xla.sync() / xm.mark_step())."""
    _executor.sync_all()
    if wait:
        _executor.wait()


def wait() -> None:
    """Block until all dispatched executions have finished."""
    _executor.wait()


def initialize_cache(path: str, readonly: bool = False) -> None:
    """Persist compiled programs under `path`: a later process running the same program does no
    XLA compile. Also set by env LAZYXLA_PERSISTENT_CACHE_PATH."""
    _init_persistent(path, readonly)


def set_cache_capacity(n: int) -> None:
    """Number of executables kept in memory (env LAZYXLA_COMPILATION_CACHE_SIZE, default 2048)."""
    _executor.set_cache_capacity(n)


def _init_from_env() -> None:
    import os
    path = os.environ.get("LAZYXLA_PERSISTENT_CACHE_PATH")
    if path:
        initialize_cache(path)


_init_from_env()
