"""DLPack export of lazyxla tensors (`torch.utils.dlpack.to_dlpack`, `__dlpack__`, and so
`jax.dlpack.from_dlpack`, `np.from_dlpack`, `torch.from_dlpack`).

PyTorch describes a PrivateUse1 tensor as an "external device" whose data pointer is its host
storage stub, which no consumer can read. A lazyxla tensor's value is a JAX array, so the capsule
is that array's, on JAX's device (the CPU here, a GPU's memory elsewhere). It is always a copy:
JAX arrays are immutable and lazyxla shares one array between tensors (a committed result, a
reused constant), while consumers such as torch.from_dlpack may write to what they receive.
`copy=False` therefore raises BufferError, as the DLPack protocol asks of a producer that must
copy. `torch.from_dlpack` of a lazyxla tensor stays on the device and shares its storage, as it
does for CPU and CUDA tensors."""
from __future__ import annotations

import functools

import torch

_installed = False
_device = []


def _is_lazy(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "lazyxla"


def _dlpack_device():
    if not _device:  # JAX's default device, as DLPack names it
        import jax
        import numpy as np
        _device.append(jax.device_put(np.zeros(0, np.float32)).__dlpack_device__())
    return _device[0]


def _export(t, stream=None, max_version=None, dl_device=None, copy=None):
    if t.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if t.is_conj():
        raise BufferError("Can't export tensors with the conjugate bit set")
    if copy is False:
        raise BufferError("lazyxla tensors are exported as a copy of their value (their XLA "
                          "buffers are immutable and shared); pass copy=None or copy=True")
    import jax
    from lazyxla.jaxenv import x64
    from . import fallback
    with x64(True):
        value = jax.device_put(fallback.device_value(t), may_alias=False)  # the consumer's own
    kwargs = {"max_version": max_version} if max_version is not None else {}
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    return value.__dlpack__(stream=None if stream == -1 else stream, **kwargs)


def _dunder_dlpack(original):
    @functools.wraps(original)
    def __dlpack__(self, *, stream=-1, max_version=None, dl_device=None, copy=None):
        if not _is_lazy(self):
            return original(self, stream=stream, max_version=max_version, dl_device=dl_device,
                            copy=copy)
        return _export(self, stream, max_version, dl_device, copy)
    return __dlpack__


def _dunder_dlpack_device(original):
    @functools.wraps(original)
    def __dlpack_device__(self):
        return _dlpack_device() if _is_lazy(self) else original(self)
    return __dlpack_device__


def _to_dlpack(original):
    @functools.wraps(original)
    def to_dlpack(tensor):
        return _export(tensor) if _is_lazy(tensor) else original(tensor)
    return to_dlpack


def _from_dlpack(original):
    @functools.wraps(original)
    def from_dlpack(ext_tensor, *, device=None, copy=None):
        if not _is_lazy(ext_tensor):
            return original(ext_tensor, device=device, copy=copy)
        if ext_tensor.requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        out = ext_tensor.detach()  # same device, same storage: what a DLPack round trip shares
        if device is not None and torch.device(device).type != "lazyxla":
            if copy is False:
                raise BufferError("from_dlpack to another device needs a copy; copy=False given")
            return out.to(device)
        return out.clone() if copy else out
    return from_dlpack


def install() -> None:
    global _installed
    if _installed:
        return
    import torch.utils.dlpack as dl
    torch.Tensor.__dlpack__ = _dunder_dlpack(torch.Tensor.__dlpack__)
    torch.Tensor.__dlpack_device__ = _dunder_dlpack_device(torch.Tensor.__dlpack_device__)
    to_dlpack = _to_dlpack(dl.to_dlpack)
    torch.to_dlpack = dl.to_dlpack = to_dlpack
    from_dlpack = _from_dlpack(dl.from_dlpack)
    torch.from_dlpack = dl.from_dlpack = from_dlpack
    _installed = True
