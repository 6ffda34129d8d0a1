"""TorchScript with lazyxla tensors: what PyTorch's C++ side cannot do with a Python device.

- `torch.jit.save` of a module holding lazyxla tensors wrote an archive with empty weights, with
  no error (its C++ serializer reads a storage's bytes in C++, where a lazyxla storage has none),
  and loading it then failed. It raises instead, naming the remedy: save the module from the CPU.
- `torch.jit.load(f, map_location="lazyxla")` failed the same way (its C++ importer made device
  storages with no bytes): the archive is loaded onto the CPU and its tensors moved to the device.
- `torch.jit.trace` of lazyxla tensors: the tracer records every op a kernel runs, and lazyxla's
  kernels are Python that runs ops of its own (meta inference, views); traces held those steps,
  or failed PyTorch's internal asserts, and once crashed the process. It raises instead: trace
  on the CPU, then move the traced module (`traced.to("lazyxla")`). `torch.jit.script` works.
"""
from __future__ import annotations

import functools

import torch
from torch.utils._pytree import tree_leaves

_installed = False


def _holds_lazyxla(*trees) -> bool:
    for tree in trees:
        if isinstance(tree, torch.nn.Module):
            tensors = [*tree.parameters(), *tree.buffers()]
        else:
            tensors = [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]
        if any(t.device.type == "lazyxla" for t in tensors):
            return True
    return False


def _to_lazyxla(location) -> torch.device | None:
    """The lazyxla device a map_location names (a str or a torch.device), else None."""
    if isinstance(location, (str, torch.device)):
        device = torch.device(location)
        if device.type == "lazyxla":
            return device
    return None


def _save(original):
    @functools.wraps(original)
    def save(m, f, _extra_files=None):
        if _holds_lazyxla(m):
            raise RuntimeError(
                "lazyxla: torch.jit.save reads the weights' bytes in C++, where a lazyxla tensor "
                "has none: the archive would hold empty weights. Save the module from the CPU "
                "(torch.jit.save(m.cpu(), f)) and load it with torch.jit.load(f, "
                "map_location=\"lazyxla\").")
        return original(m, f, _extra_files=_extra_files)
    return save


def _load(original):
    @functools.wraps(original)
    def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
        device = _to_lazyxla(map_location)
        if device is None:
            return original(f, map_location, _extra_files, _restore_shapes)
        from .dispatch import check_device_index
        check_device_index(device)
        return _onto(original(f, "cpu", _extra_files, _restore_shapes), device)
    return load


def _onto(module, device):
    """A loaded ScriptModule's parameters and buffers moved to `device`, each tensor once (tied
    ones stay tied). Its `.to()` cannot: PyTorch wraps a tensor that changes TensorImpl type in a
    new Parameter, and a loaded module's parameters are not Parameters (an AssertionError)."""
    moved = {}  # id -> (the CPU tensor, held so that its id stays its own; its device copy)
    for m in module.modules():
        for name, t in [*m.named_parameters(recurse=False), *m.named_buffers(recurse=False)]:
            held = moved.get(id(t))
            if held is None:
                held = moved[id(t)] = (t, t.detach().to(device).requires_grad_(t.requires_grad))
            setattr(m, name, held[1])
    return module


def _trace(original):
    @functools.wraps(original)
    def trace(func, *args, **kwargs):
        if _holds_lazyxla(func, args, kwargs):  # (a module: its parameters and buffers)
            raise RuntimeError(
                f"lazyxla: {original.__name__} of lazyxla tensors is not supported: PyTorch's "
                "tracer would also record the ops lazyxla's kernels run inside. Trace on the CPU "
                "and move the traced module to the device (traced.to(\"lazyxla\")), or use "
                "torch.jit.script or torch.compile(backend=\"lazyxla\").")
        return original(func, *args, **kwargs)
    return trace


def install() -> None:
    global _installed
    if _installed:
        return
    torch.jit.save = _save(torch.jit.save)
    torch.jit.load = _load(torch.jit.load)
    torch.jit.trace = _trace(torch.jit.trace)
    torch.jit.trace_module = _trace(torch.jit.trace_module)
    _installed = True
