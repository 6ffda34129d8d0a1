"""Keep tied weights tied when a module moves to or from lazyxla.

PyTorch's Module._apply gives each module a new Parameter when the old and new tensors cannot share
a TensorImpl type (CPU <-> an out-of-tree device), so `model.to("lazyxla")` unties weights that two
modules share (GPT-2's lm_head and embedding): training then silently differs from CPU. PyTorch's
own remedy is swap_module_params_on_conversion, which converts each Parameter in place; lazyxla
turns it on for conversions that involve the lazyxla device only (`Module.to`, `Module.cpu`).
Set LAZYXLA_KEEP_TIED_WEIGHTS=0 to keep PyTorch's default behaviour. A lazy module's
uninitialized parameters and buffers are made anew on the target device (PyTorch's conversion
made them plain tensors of size 0).
"""
from __future__ import annotations

import copyreg
import functools
import warnings

import torch
from torch import nn

from lazyxla import envflags

_installed = False


def _involves_lazyxla(module, target) -> bool:
    if target is not None and torch.device(target).type == "lazyxla":
        return True
    return any(t.device.type == "lazyxla" for t in module.parameters()) or \
        any(t.device.type == "lazyxla" for t in module.buffers())


def _converting(method, target_of):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        target, dtype = target_of(*args, **kwargs)
        if not _involves_lazyxla(self, target):
            return method(self, *args, **kwargs)
        aside = _set_aside_uninitialized(self)
        try:
            return _converted(self, method, args, kwargs)
        finally:
            for table, name, t in aside:
                table[name] = type(t)(requires_grad=t.requires_grad, device=target or t.device,
                                      dtype=dtype if dtype is not None and t.is_floating_point()
                                      else t.dtype)
    return wrapper


def _converted(module, method, args, kwargs):
    if torch.__future__.get_swap_module_params_on_conversion() or not _KEEP_TIED:
        return method(module, *args, **kwargs)
    torch.__future__.set_swap_module_params_on_conversion(True)
    kept = _subclassed_parameters(module)
    # (a ScriptModule's C++ module holds its parameters too: swapped past that reference, it
    # would keep the old tensors; PyTorch's default conversion gives it the new ones)
    if not any(isinstance(m, torch.jit.ScriptModule) for m in module.modules()):
        torch.utils.swap_tensors = _swap_past_live_graphs
    try:
        out = method(module, *args, **kwargs)
        for p, cls, attrs in kept:
            p.__class__ = cls
            p.__dict__.update(attrs)
        return out
    except RuntimeError as e:
        if "swap" not in str(e):
            raise
        # (a weak reference to a parameter: swap_tensors refuses it)
        warnings.warn(f"lazyxla: could not convert parameters in place ({e.__cause__ or e}); "
                      "converting them as PyTorch does by default: shared weights are untied, and "
                      "an optimizer made before this call holds the old parameters")
    finally:
        torch.utils.swap_tensors = _SWAP_TENSORS
        torch.__future__.set_swap_module_params_on_conversion(False)
    return method(module, *args, **kwargs)


_SWAP_TENSORS = torch.utils.swap_tensors


def _swap_past_live_graphs(t1, t2):
    """torch.utils.swap_tensors, also where an autograd graph still holds t1 (the output of a
    forward kept alive, `ref = model(x)`), which it refuses: PyTorch's default conversion then
    gave every parameter a new object, so an optimizer made before `.to()` kept stepping the old
    CPU ones, silently, and tied weights came apart. The graph keeps t1's old value, and its
    gradient accumulator raises if a backward reaches it, as swap_tensors does for the one
    reference it allows."""
    try:
        return _SWAP_TENSORS(t1, t2)
    except RuntimeError as e:
        if "use_count" not in str(e) or copyreg._slotnames(type(t1)) or copyreg._slotnames(type(t2)):
            raise  # (slots: swap_tensors' own path only)
    if t1.requires_grad and t1.is_leaf:
        torch.autograd.graph.get_gradient_edge(t1).node.register_prehook(_moved_parameter)
    t1.__class__, t2.__class__ = t2.__class__, t1.__class__
    t1.__dict__, t2.__dict__ = t2.__dict__, t1.__dict__
    torch._C._swap_tensor_impl(t1, t2)


def _moved_parameter(grad_outputs):
    raise RuntimeError("lazyxla: this backward reaches a parameter whose module was moved (.to(), "
                       ".cpu()) after the forward ran; run the backward first, or the forward "
                       "after the move")


def _subclassed_parameters(module) -> list:
    """(parameter, its class, its attributes) of the Parameter subclasses (a quantized weight's
    class with its state): a swap converts each into a plain Parameter (the converted tensor's
    class and empty __dict__ are swapped in), where CUDA's in-place conversion keeps both."""
    return [(p, type(p), dict(p.__dict__)) for p in module.parameters()
            if type(p) is not nn.Parameter and not isinstance(p, nn.parameter.UninitializedParameter)]


def _set_aside_uninitialized(module) -> list:
    """(table, name, tensor) of a lazy module's uninitialized parameters and buffers (nn.LazyLinear's
    before its first forward), each taken out of its table (None) while the module converts, to be
    made anew on the target. Converted, they became plain tensors of size 0, as PyTorch converts
    between TensorImpl types (CPU and lazyxla), and the first forward failed ("in_features ...
    from self.weight: 0"); CUDA keeps them, its tensors being the CPU's type."""
    kinds = (nn.parameter.UninitializedParameter, nn.parameter.UninitializedBuffer)
    aside = []
    for m in module.modules():
        for table in (m._parameters, m._buffers):
            for name, t in list(table.items()):
                if isinstance(t, kinds):
                    aside.append((table, name, t))
                    table[name] = None
    return aside


def _to_target(*args, **kwargs):
    device, dtype = torch._C._nn._parse_to(*args, **kwargs)[:2]
    return device, dtype


_KEEP_TIED = True


def install() -> None:
    global _installed, _KEEP_TIED
    if _installed:
        return
    _KEEP_TIED = envflags.flag("LAZYXLA_KEEP_TIED_WEIGHTS", True)
    torch.nn.Module.to = _converting(torch.nn.Module.to, _to_target)
    torch.nn.Module.cpu = _converting(torch.nn.Module.cpu, lambda *a, **k: (torch.device("cpu"), None))
    _installed = True
