"""lazyxla: a lazy-tensor PyTorch device and a torch.compile backend that compile with XLA (JAX).

    import lazyxla
    dev = lazyxla.device()
    x = torch.randn(4, 4, device=dev)
    y = (x @ x).relu()       # recorded, not executed
    lazyxla.sync()           # one XLA program, compiled once and cached
"""
from __future__ import annotations

__version__ = "0.1.0"

import time

import torch as _torch

from . import metrics  # noqa: F401
from .device import register as _register

_register()

from .runtime import executor as _executor  # noqa: E402
from .runtime.cache import initialize_persistent_cache as _init_persistent  # noqa: E402
from .runtime.executor import (  # noqa: E402,F401
    clear_pending_ir, graph_hash, graph_inputs, needs_materialization, run_cached_graph,
    warm_up_cache)
# Load the submodule `report` before `def report` below: importing a submodule sets the package
# attribute of its name, so a first `import lazyxla.report` after the def would replace the function.
from . import report as _report_module  # noqa: E402,F401


def report(as_json: bool = False) -> str:
    """The run report of this process: graphs compiled, cache hits/misses/evictions, retraces with
    their causes, CPU fallbacks with their source lines, transfers."""
    from .report import report as _report
    return _report(as_json)


def save_report(path: str) -> None:
    from .report import save_report as _save
    _save(path)


def device(index: int = 0) -> _torch.device:
    """The lazyxla device. There is one logical device; scale out through sharding."""
    if isinstance(index, bool) or not isinstance(index, int):  # (0.0 and False passed as 0)
        raise TypeError(f"lazyxla.device: expected the device index as an int, got "
                        f"{type(index).__name__} {index!r}")
    if index != 0:
        raise ValueError(f"lazyxla has a single logical device (index 0), got index {index}")
    return _torch.device("lazyxla", 0)


def sync(wait: bool = False) -> None:
    """Execute all pending graphs (like torch_xla.sync() / xm.mark_step()). Raises eager's error
    (IndexError, RuntimeError) if a finished program read an index out of range or used a value
    eager rejects (see set_index_checks)."""
    if not isinstance(wait, bool):  # (sync(wait="no") waited)
        raise TypeError(f"lazyxla.sync: wait must be a bool, got {type(wait).__name__}")
    _executor.sync_all()
    if wait:
        _executor.wait()
    else:
        _executor.report_index_errors()


def wait() -> None:
    """Block until every dispatched execution whose results are still referenced has finished
    (results nobody holds any more are not waited for, and not kept alive)."""
    _executor.wait()


def enable_view_replay() -> None:
    """Make autograd rebuild views by replaying their ops in the calling thread. lazyxla turns this
    on in the thread that imports it. Without it gradients are still right (autograd uses
    as_strided, which lowers to a gather); with it, another thread that runs forward passes with
    in-place ops on views gets the cheaper programs (PyTorch's flag is per thread)."""
    _torch._C._set_view_replay_enabled(True)


def set_index_checks(mode: bool | str = True) -> None:
    """Index tensors out of range (gather, index_select, x[idx], index_put, scatter, take,
    embedding, embedding_bag, nll_loss and margin loss targets, searchsorted's sorter), integer
    division by zero (//, %, fmod, div with a rounding mode) and values eager rejects
    (bernoulli's p outside [0, 1], multinomial's negative/inf/NaN probabilities or zero-sum rows,
    normal's negative std tensor, binary_cross_entropy inputs outside [0, 1], masked_scatter's
    short source, segment_reduce's bad lengths, lu_solve's pivots outside [1, n]): eager raises at
    the call, but an XLA program cannot raise. It clamps such reads, drops such writes, gives -1
    for such quotients and computes with such values regardless, and with checks on reports them:
    - "deferred" (the default): each program returns a flag per index tensor, integer divisor
      and checked parameter, and the next read (`.cpu()`, `.item()`, ...), `sync()` or `wait()`
      after it has finished raises eager's error (IndexError, RuntimeError) naming the op.
      Its results were kept; nothing waits for the flags.
    - "strict" (or True): each run waits for its program and raises when it runs (the sync, read
      or compiled call), keeping none of its results: a debugging mode (no asynchronous
      execution).
    - "off" (or False): no flags; none of these is reported.
    LAZYXLA_CHECK_INDICES sets the mode at import (0/off, deferred, 1/strict). Changing between
    "off" and the others recompiles every program."""
    from .lowering import registry
    if isinstance(mode, bool):
        mode = "strict" if mode else "off"
    registry.set_index_checks_mode(mode)
    _executor.reset_programs()


def index_checks() -> str:
    """The index checks mode: "off", "deferred" or "strict" (see set_index_checks)."""
    from .lowering import registry
    return registry.index_checks_mode()


def initialize_cache(path: str, readonly: bool = False) -> None:
    """Persist compiled programs under `path`: a later process running the same program does no
    XLA compile. Also set by env LAZYXLA_PERSISTENT_CACHE_PATH."""
    _init_persistent(path, readonly)


def set_cache_capacity(n: int) -> None:
    """Number of executables kept in memory (env LAZYXLA_COMPILATION_CACHE_SIZE, default 2048)."""
    _executor.set_cache_capacity(n)


def _init_from_env() -> None:
    """A persistent cache named by the environment that cannot be used is warned about, not
    raised: the process still runs, compiling as if none were set."""
    import os
    import warnings
    path, name = os.environ.get("LAZYXLA_PERSISTENT_CACHE_PATH"), "LAZYXLA_PERSISTENT_CACHE_PATH"
    if not path:
        # JAX's own setting (JAX_COMPILATION_CACHE_DIR) turns on JAX's cache, which checks no
        # entry: a program's entry copied over another's ran with the other's inputs. lazyxla
        # takes that directory over, with its checks.
        import jax
        path, name = jax.config.jax_compilation_cache_dir, "JAX_COMPILATION_CACHE_DIR"
    if path:
        try:
            initialize_cache(path)
        except (OSError, ValueError) as e:
            warnings.warn(f"{name}={path!r} cannot be used ({e}); "
                          "lazyxla compiles without a persistent cache", stacklevel=2)
            if name.startswith("JAX"):  # (not JAX's unchecked cache either)
                import jax
                jax.config.update("jax_compilation_cache_dir", None)


_init_from_env()


class RecompileError(RuntimeError):
    pass


class assert_no_recompile:
    """Context manager: raise RecompileError, naming the cause, if any XLA compile or dynamo
    re-extraction happens inside the block.

        with lazyxla.assert_no_recompile():
            for batch in loader: step(batch)
    """

    def __enter__(self):
        # (counts no metrics.clear_all() inside the block resets)
        self._compiles = metrics.ever("UncachedCompile")
        self._retraces = metrics.ever("DynamoRetrace")
        self._since = time.time()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            return False
        compiles = metrics.ever("UncachedCompile") - self._compiles
        retraces = metrics.ever("DynamoRetrace") - self._retraces
        if compiles or retraces:
            new = [e for e in metrics.events() if e["time"] >= self._since]
            causes = [e.get("cause") or f"compiled graph {e.get('hash')} ({e.get('ops')} ops)"
                      for e in new if e["kind"] in ("retrace", "compile")]
            raise RecompileError(f"{compiles} XLA compile(s) and {retraces} re-extraction(s) inside "
                                 "assert_no_recompile():\n  " + "\n  ".join(causes or ["(no cause recorded)"]))
        return False


def _register_dynamo_backend() -> None:
    """backend="lazyxla" also without the installed entry point (e.g. running from a checkout)."""
    try:
        from .dynamo.backend import register
        register()
    except Exception:  # pragma: no cover - dynamo unavailable; the device still works
        pass


_register_dynamo_backend()
