"""Keep tied weights tied when a module moves to or from lazyxla.

PyTorch's Module._apply gives each module a new Parameter when the old and new tensors cannot share
a TensorImpl type (CPU <-> an out-of-tree device), so `model.to("lazyxla")` unties weights that two
modules share (GPT-2's lm_head and embedding): training then silently differs from CPU. PyTorch's
own remedy is swap_module_params_on_conversion, which converts each Parameter in place; lazyxla
turns it on for conversions that involve the lazyxla device only (`Module.to`, `Module.cpu`).
Set LAZYXLA_KEEP_TIED_WEIGHTS=0 to keep PyTorch's default behaviour.
"""
from __future__ import annotations

import functools
import warnings

import torch

from lazyxla import envflags

_installed = False


def _involves_lazyxla(module, target) -> bool:
    if target is not None and torch.device(target).type == "lazyxla":
        return True
    return any(t.device.type == "lazyxla" for t in module.parameters()) or \
        any(t.device.type == "lazyxla" for t in module.buffers())


def _swapping(method, target_of):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if torch.__future__.get_swap_module_params_on_conversion() or \
                not _involves_lazyxla(self, target_of(*args, **kwargs)):
            return method(self, *args, **kwargs)
        torch.__future__.set_swap_module_params_on_conversion(True)
        try:
            return method(self, *args, **kwargs)
        except RuntimeError as e:
            if "swap" not in str(e):
                raise
            # swap_tensors refuses parameters that a live autograd graph still references
            warnings.warn(f"lazyxla: could not convert parameters in place ({e.__cause__ or e}); "
                          "converting them as PyTorch does by default, which unties shared weights")
        finally:
            torch.__future__.set_swap_module_params_on_conversion(False)
        return method(self, *args, **kwargs)
    return wrapper


def _to_target(*args, **kwargs):
    device = torch._C._nn._parse_to(*args, **kwargs)[0]
    return device


def install() -> None:
    global _installed
    if _installed or not envflags.flag("LAZYXLA_KEEP_TIED_WEIGHTS", True):
        return
    torch.nn.Module.to = _swapping(torch.nn.Module.to, _to_target)
    torch.nn.Module.cpu = _swapping(torch.nn.Module.cpu, lambda *a, **k: None)
    _installed = True
