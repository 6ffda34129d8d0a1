"""The `lazyxla` PyTorch device: PrivateUse1 registered from Python."""
from __future__ import annotations

import contextlib

import torch

from lazyxla import envflags
from . import rng

_registered = False


class _DeviceContext:
    """`torch.lazyxla.device(d)`: selects the device (there is one), as torch.cuda.device does.
    torch.utils.checkpoint and torch.load enter it around RNG state and storage moves."""

    def __init__(self, device=None):
        if isinstance(device, (str, torch.device)):
            device = torch.device(device)
            if device.type != "lazyxla":
                raise ValueError(f"lazyxla: not a lazyxla device: {device}")
            device = device.index
        if device not in (None, 0, -1):
            raise RuntimeError(f"lazyxla: invalid device index {device}: lazyxla has one device, "
                               "lazyxla:0")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _BackendModule:
    """`torch.lazyxla`: what PyTorch asks of a device module (torch.manual_seed calls
    manual_seed_all here, so seeding reaches the device RNG). `_initialized`: the device is always
    ready, so torch.utils.checkpoint saves and restores its RNG state around a recomputation."""

    _initialized = True
    device = _DeviceContext

    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def _is_in_bad_fork():
        from lazyxla.jaxenv import forked_after_start
        return forked_after_start()

    @staticmethod
    def manual_seed(seed):
        rng.manual_seed(seed)

    @staticmethod
    def manual_seed_all(seed):
        rng.manual_seed(seed)

    @staticmethod
    def initial_seed():
        return rng.initial_seed()

    @staticmethod
    def get_rng_state(device=None):
        """An int64 CPU tensor [seed, counter]; a seed of 2**63 or more is stored as its bits
        (seed - 2**64), as eager's generators hold a uint64 seed."""
        seed, counter = rng.get_state()
        return torch.tensor([seed - (1 << 64) if seed >= 1 << 63 else seed, counter],
                            dtype=torch.int64)

    @staticmethod
    def set_rng_state(state, device=None):
        """Takes what get_rng_state returns, and nothing else (eager's CPU generator refuses a
        state of another type or size alike)."""
        if not isinstance(state, torch.Tensor) or state.dtype != torch.int64:
            got = type(state).__name__ if not isinstance(state, torch.Tensor) else state.dtype
            raise TypeError(f"RNG state must be a torch.LongTensor (int64) of 2 elements, "
                            f"[seed, counter], as torch.lazyxla.get_rng_state() returns; got {got}")
        if state.shape != (2,):
            raise RuntimeError(f"Expected a lazyxla RNG state of size 2 ([seed, counter]) but "
                               f"found the input RNG state size to be {state.numel()}"
                               + ("" if state.dim() == 1 else f" (shape {list(state.shape)})"))
        seed, counter = state.tolist()
        if counter < 0:
            raise RuntimeError(f"Invalid lazyxla RNG state: its counter is negative ({counter})")
        rng.set_state((seed % (1 << 64), counter))

    @staticmethod
    def get_amp_supported_dtype():
        """torch.autocast("lazyxla", dtype=...) accepts these."""
        return [torch.bfloat16, torch.float16]

    @staticmethod
    def synchronize(device=None):
        from lazyxla.runtime.executor import wait
        wait()

    # One stream: programs run in the order they are dispatched, and a copy to the host is done
    # when it returns. torch.distributed.checkpoint's writer, for one, asks an available device
    # module for its stream (it failed on a CPU state dict once lazyxla was imported).
    @staticmethod
    def current_stream(device=None):
        return torch.Stream(device="lazyxla")

    @staticmethod
    def stream(stream):
        return stream if stream is not None else contextlib.nullcontext()


def register() -> None:
    global _registered
    if _registered:
        return
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend
    if not hasattr(torch._C, "_acc") or not hasattr(torch._C._acc, "create_empty_tensor"):
        raise ImportError(f"lazyxla needs torch's Python device backend API "
                          f"(torch._C._acc.create_empty_tensor), missing in torch {torch.__version__}")
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "lazyxla"):
        raise RuntimeError(f"lazyxla: PrivateUse1 is already taken by backend {name!r}")
    _setup_privateuseone_for_python_backend("lazyxla", backend_module=_BackendModule())
    from lazyxla.lowering.registry import load_all
    load_all()
    from .kernels import register_all
    register_all()
    rng.manual_seed(torch.initial_seed())
    from . import (accelerator, autocast, control_flow, copying, dlpack, flex_attention, hooks,
                   modules, pinning, private_kernels, rng_prims, storages, torchscript)
    private_kernels.install()
    accelerator.install()
    control_flow.install()
    flex_attention.install()
    modules.install()
    copying.install()
    storages.install()
    autocast.install()
    pinning.install()
    dlpack.install()
    rng_prims.install()
    hooks.install()
    torchscript.install()
    _backward_on_calling_thread()
    _replay_views()
    _registered = True


def _replay_views() -> None:
    """After an in-place op on a view, autograd rebuilds the view over the updated base, by default
    with as_strided(view.size(), view.stride(), view.storage_offset()). lazyxla's views report
    eager's strides, so that is right, but as_strided lowers to a gather over the whole base. With
    view replay autograd re-applies the view ops instead (slices, transposes). Thread-local: it
    holds for the importing thread (lazyxla.enable_view_replay() sets it in another thread)."""
    torch._C._set_view_replay_enabled(True)


def _backward_on_calling_thread() -> None:
    """PyTorch's autograd engine runs a non-CPU device's backward on a thread of its own. lazyxla's
    kernels only record IR, in Python, under the GIL: the hand-off to that thread and back is pure
    cost (about 6% of a small training step). With no CUDA, XPU or MPS device in the process no
    other device needs those threads, so the importing thread runs backward itself.
    LAZYXLA_AUTOGRAD_DEVICE_THREADS=1 keeps PyTorch's default."""
    if envflags.flag("LAZYXLA_AUTOGRAD_DEVICE_THREADS", False):
        return
    others = (torch.cuda.is_available(), getattr(torch, "xpu", None) is not None and torch.xpu.is_available(),
              torch.backends.mps.is_available())
    if not any(others):
        torch.autograd.set_multithreading_enabled(False)  # thread-local: this thread only
