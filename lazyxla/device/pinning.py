"""Pinned host memory, as far as a Python device can have it.

`tensor.pin_memory()` (and DataLoader(pin_memory=True), which calls it) asks the current
accelerator's hooks for a pinned allocator; a device registered from Python cannot provide one, so
with lazyxla as the accelerator it raised NotImplementedError. lazyxla moves host data through
JAX, which reads any host memory: pinning buys nothing here. A CPU tensor's pin_memory() for
lazyxla returns the tensor unpinned (with one warning), as PyTorch does with no accelerator."""
from __future__ import annotations

import functools
import warnings

import torch

_installed = False
_warned = False


def _for_lazyxla(device) -> bool:
    if device is not None:
        return torch.device(device).type == "lazyxla"
    current = torch.accelerator.current_accelerator()
    return current is not None and current.type == "lazyxla"


def _pin_memory(original):
    @functools.wraps(original)
    def pin_memory(self, device=None):
        if self.device.type != "cpu" or not _for_lazyxla(device):
            return original(self) if device is None else original(self, device)
        global _warned
        if not _warned:
            _warned = True
            warnings.warn("lazyxla: pin_memory() returns the tensor unpinned: lazyxla's host to "
                          "device copies gain nothing from pinned memory", stacklevel=2)
        return self
    return pin_memory


def install() -> None:
    global _installed
    if _installed:
        return
    torch.Tensor.pin_memory = _pin_memory(torch.Tensor.pin_memory)
    _installed = True
