"""PyTorch's RNG-preserving operators on lazyxla: what activation checkpointing with dropout needs
under torch.compile.

AOT autograd's partitioner recomputes a checkpointed region's random ops in the backward program.
It wraps each in the forward as `run_and_save_rng_state(op, ...)` -> (rng_state, out) and in the
backward as `run_with_rng_state(rng_state, op, ...)`, so that both draw the same values. PyTorch
implements them for CUDA, CPU, HPU and XPU only (it raised "Backend not supported for lazyxla").

Here the state is the op's seed as an int64 0-dim device tensor, computed by the forward program
from its fresh per-call seed parameter, and the backward program's op takes its seed from that
tensor: the two programs stay tied on every replay, with no host round trip."""
from __future__ import annotations

import torch
from torch._C import DispatchKey

from lazyxla.ir import buffer as buf
from lazyxla.ir.node import Node, Slot, scalar_node
from lazyxla.lowering.registry import Lowering
from . import rng

_installed = False
# An output of its own, not the seed parameter itself: the replayed program returns each call's
# seed (a parameter passed straight through would be captured as the trace's constant).
_SEED_STATE = Lowering("rng_state", lambda seed: seed + 0)
_S0 = Slot(0)


def _on_lazyxla(args, kwargs) -> bool:
    from torch._prims.rng_prims import get_device
    return get_device(args, kwargs) == "lazyxla"


def _run_seeded(seed_node, op, args, kwargs):
    previous = rng.OVERRIDE[0]
    rng.OVERRIDE[0] = seed_node
    try:
        return op(*args, **kwargs)
    finally:
        rng.OVERRIDE[0] = previous


def _run_and_save(original):
    def run_and_save_rng_state(op, *args, **kwargs):
        if not _on_lazyxla(args, kwargs):
            return original(op, *args, **kwargs)
        seed = scalar_node(rng.next_seed(), torch.int64, rng=True)
        state = buf.wrap_node(Node(_SEED_STATE, (seed,), ((_S0,), ()), (), torch.int64))
        return state, _run_seeded(seed, op, args, kwargs)
    return run_and_save_rng_state


def _run_with(original):
    def run_with_rng_state(rng_state, op, *args, **kwargs):
        if not _on_lazyxla(args, kwargs):
            return original(rng_state, op, *args, **kwargs)
        if not (isinstance(rng_state, torch.Tensor) and rng_state.device.type == "lazyxla"
                and rng_state.dtype == torch.int64 and rng_state.dim() == 0):
            raise RuntimeError("lazyxla: run_with_rng_state needs the state run_and_save_rng_state "
                               f"gave on lazyxla (an int64 0-dim tensor), got {rng_state!r}")
        return _run_seeded(buf.state_of(rng_state).read(), op, args, kwargs)
    return run_with_rng_state


def _replace(hop, make):
    kernels = hop.py_kernels
    kernels[DispatchKey.BackendSelect] = make(kernels[DispatchKey.BackendSelect])
    hop._dispatch_cache.clear()


def install() -> None:
    global _installed
    if _installed:
        return
    from torch._prims import rng_prims
    _replace(rng_prims.run_and_save_rng_state, _run_and_save)
    _replace(rng_prims.run_with_rng_state, _run_with)
    _installed = True
