"""Kernels that move data between host and device, or read a value out: copy_, _copy_from,
_local_scalar_dense (item()), resize_, and set_ to another lazyxla tensor."""
from __future__ import annotations

import torch

from lazyxla.ir import buffer as buf
from lazyxla.ir import meta
from lazyxla.ir.meta import contiguous_strides
from lazyxla.runtime import executor
from . import dispatch, fallback, overlap

aten = torch.ops.aten


def _host_bits(host, src):
    """A CPU copy of lazyxla `src`'s raw data, with src's conj/neg bits applied."""
    if src.is_conj():
        host = host.conj().resolve_conj()
    if src.is_neg():
        host = host._neg_view().resolve_neg()
    return host


def _traced_scalar(src) -> bool:
    """A 0-dim CPU tensor moved to lazyxla inside a graph the bridge traces: it becomes a runtime
    scalar read from it on every replay (`step.to(device)` must not freeze the trace's step count
    into the program)."""
    return dispatch.tracing_here() and dispatch.is_cpu_scalar(src)


def copy_(self, src, non_blocking=False):
    device = dispatch.LAZYXLA_DEVICE
    if self.device == device:
        dst = buf.state_of(self)
        views = type(dst) is not buf.Buffer
        if src.device == device:
            st = buf.state_of(src)
            views = views or type(st) is not buf.Buffer
            node = dispatch.math_bits(st.read(), src.is_conj() != self.is_conj(),
                              src.is_neg() != self.is_neg())
        elif src.is_cpu:
            # (the host value comes with src's bits resolved; self's own bits are applied, so
            # that a write through a conj/neg view stores its raw data, as the branch above)
            node = dispatch.math_bits(
                dispatch.cpu_scalar_node(src) if _traced_scalar(src)
                else buf.state_of(fallback.from_cpu(src)).read(), self.is_conj(), self.is_neg())
        else:
            raise dispatch.device_mismatch(src)
        shape = self.shape if src.shape == self.shape else \
            meta.broadcast_pair(tuple(self.shape), tuple(src.shape))  # (eager's error)
        if shape != self.shape:
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast "
                               f"shape {list(shape)}")
        if views:
            overlap.check([self], (src,), {})
        dst.write(dispatch.converted(node, self.shape, self.dtype))
        return self
    # device -> host
    host = _host_bits(_read(src), src)
    self.copy_(host)
    return self


def _read(t: torch.Tensor) -> torch.Tensor:
    """A user's read of a lazyxla tensor (.cpu(), .item(), copy to the host): its CPU copy. A
    program that read an index out of range and has finished by now is reported here."""
    host = fallback.to_cpu(t)
    executor.report_index_errors()
    return host


def _copy_from(self, dst, non_blocking=False):
    copy_(dst, self, non_blocking)
    return dst


def _copy_from_and_resize(self, dst):
    if tuple(dst.shape) != tuple(self.shape):
        if dst.device.type == "cpu":
            dst.resize_(self.shape)
        else:
            raise RuntimeError("lazyxla: cannot resize a lazyxla tensor")
    return _copy_from(self, dst)


def _local_scalar_dense(self):
    from lazyxla import metrics
    metrics.counter_inc("ItemCall")
    return _read(self).item()


def _to_copy(self, *args, **kwargs):
    device = kwargs.get("device")
    if self.is_cpu:  # host -> device (BackendSelect routes it here by `device`)
        if device is not None:
            dispatch.check_device_index(torch.device(device))
        dtype = kwargs.get("dtype")
        if _traced_scalar(self):
            t = buf.wrap_node(dispatch.cpu_scalar_node(self))
            return t if dtype is None or dtype == t.dtype else t.to(dtype)
        # (from_cpu keeps the strides it is given: the CPU copy takes the memory format asked for)
        return fallback.from_cpu(self.to(dtype=dtype, memory_format=_format(kwargs)))
    if self.device == dispatch.LAZYXLA_DEVICE and device is not None and torch.device(device).type == "cpu":
        host = _host_bits(_read(self), self)
        fmt = _format(kwargs)
        if fmt is not torch.preserve_format:
            host = host.contiguous(memory_format=fmt)
        elif (layout := meta.dense_layout(self)) is not None:
            host = torch.empty_strided(host.shape, layout, dtype=host.dtype).copy_(host)  # as eager's
        dtype = kwargs.get("dtype")
        return host.to(dtype) if dtype is not None else host
    from lazyxla.lowering.registry import LOWERINGS
    return dispatch.record(aten._to_copy.default, LOWERINGS[aten._to_copy.default],
                           (self,) + args, kwargs)


def _format(kwargs) -> torch.memory_format:
    fmt = kwargs.get("memory_format")
    return torch.preserve_format if fmt is None else fmt


def resize_(self, size, memory_format=None):
    """Eager's resize_: the tensor keeps its storage and storage offset and takes the strides
    eager's resize gives (contiguous, or memory_format's; unchanged for its own shape), so it still
    aliases its base and views, and reads the storage's elements from its offset on. Growing past
    the storage's end gives it a new buffer holding the storage's elements and zeros after them:
    other tensors of the old storage no longer see its writes (eager grows the storage they share)."""
    meta = torch.empty_strided(self.shape, self.stride(), dtype=self.dtype, device="meta")
    meta.resize_(size, memory_format=memory_format)  # eager's errors and strides
    size, stride, offset = tuple(meta.shape), meta.stride(), self.storage_offset()
    if size == tuple(self.shape) and stride == self.stride():
        return self
    need = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if meta.numel() else 0
    storage = self.untyped_storage()
    with torch.no_grad():
        if need * self.itemsize > storage.nbytes():
            flat = self.new_empty(0).set_(storage)  # the storage's elements, in memory order
            grown = torch.cat([flat, flat.new_zeros(need - flat.numel())])
            storage = grown.untyped_storage()
        set_source_storage(self, storage, offset, size, stride)
    return self


def set_source_tensor(self, source):
    """x.set_(y): x uses y's storage from now on, so each sees the other's writes. A lazyxla
    tensor's state lives on its storage, so x takes y's storage, sizes and strides, as `.data =`
    does (keeping x's Python identity)."""
    if source.device.type != "lazyxla":
        raise dispatch.device_mismatch(source)
    if source.dtype != self.dtype:
        raise RuntimeError(f"Could not set tensor of type {source.dtype} to a tensor of type {self.dtype}")
    self.data = source
    return self


def set_source_storage(self, source, storage_offset=0, size=None, stride=()):
    """x.set_(storage, offset, size, stride): x views that lazyxla storage's data, addressed in x's
    dtype. torch.load rebuilds every tensor so (copying.py moves each saved storage to the device
    as one buffer), and tensors saved from one storage share one buffer again."""
    st = getattr(source, "_lazyxla", None)
    if st is None:
        raise RuntimeError(f"lazyxla: set_ to a storage on {source.device} that holds no lazyxla data")
    root = st.root
    with torch.no_grad():
        flat = buf.new_tensor(root, root.node.shape, root.node.dtype)
        flat = flat.as_strided((flat.numel(),), (1,))  # memory order, where the root has a layout
        if flat.dtype != self.dtype:
            if flat.numel() * flat.itemsize % self.itemsize:
                raise RuntimeError(f"lazyxla: a storage of {flat.numel() * flat.itemsize} bytes "
                                   f"does not hold whole {self.dtype} elements")
            flat = flat.view(torch.uint8).view(self.dtype)
        if size is None:
            size, stride = (flat.numel(),), (1,)
        self.data = flat.as_strided(size, stride or contiguous_strides(size), storage_offset)
    return self


def equal(self, other):
    """torch.equal reads a value: compared on the device, one bool read back."""
    if self.shape != other.shape:
        return False
    if self.numel() == 0:
        return True
    return bool(torch.eq(self, other).all().item())


KERNELS = {
    aten.equal.default: equal,
    aten.set_.source_Tensor: set_source_tensor,
    aten.set_.source_Storage: set_source_storage,
    aten.set_.source_Storage_storage_offset: set_source_storage,
    aten.copy_.default: copy_,
    aten._copy_from.default: _copy_from,
    aten._copy_from_and_resize.default: _copy_from_and_resize,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.resize_.default: resize_,
    aten._to_copy.default: _to_copy,
}
