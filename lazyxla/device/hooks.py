"""Python autograd hooks that raise, on lazyxla gradients: the backward raises the hook's error.

PyTorch's device guard for a Python-registered device (torch/csrc/acc) answers the autograd
engine's stream calls by calling into Python, in functions declared noexcept. The engine makes
those calls while it unwinds from a Python hook's exception, with that exception still pending,
so the call fails and the process aborts (std::terminate): a tensor hook, a post-accumulate-grad
hook or a module's full backward hook that raised killed the process. Such a hook, registered
through those APIs, runs inside a wrapper: when its arguments hold lazyxla tensors, its error is
kept and the hook returns None, and the backward (or torch.autograd.grad) call raises that error
once the engine returns. The rest of that backward has run by then; eager stops at the hook.
Hooks on the graph's nodes (grad_fn.register_hook / register_prehook) are methods of PyTorch's C
types, which cannot be wrapped: one that raises during a lazyxla backward still aborts.

A hook runs on the thread that called backward, or on one of autograd's device threads (a
backward called from a thread other than the importing one, or LAZYXLA_AUTOGRAD_DEVICE_THREADS=1).
The engine names the backward a hook runs in (its graph task id), not the thread that called it,
so a device thread's error is kept by task id, and the backward call that returns first while
one is kept raises it: the right call, unless several threads run backwards at once."""
from __future__ import annotations

import functools
import threading

import torch

from .dispatch import LAZYXLA_DEVICE
from .fallback import lazy_tensors

_failed = threading.local()  # .error: the first hook error of the backward this thread called
_elsewhere: dict = {}  # graph task id -> the first hook error kept on an autograd device thread
_elsewhere_lock = threading.Lock()
_installed = False


def guarded(hook):
    """`hook`, whose error on lazyxla tensors is kept for the backward call to raise."""
    @functools.wraps(hook)
    def run(*args, **kwargs):
        try:
            return hook(*args, **kwargs)
        except BaseException as e:  # (a KeyboardInterrupt in a hook aborted the process too)
            if not lazy_tensors(args, []):
                raise
            if hasattr(_failed, "error"):  # a backward this thread called (and runs)
                if _failed.error is None:
                    _failed.error = e
            else:
                with _elsewhere_lock:
                    _elsewhere.setdefault(torch._C._current_graph_task_id(), e)
            return None
    return run


_NONE = object()


def _raising_kept_error(run_backward):
    @functools.wraps(run_backward)
    def run(*args, **kwargs):
        # (a backward within a backward, as reentrant checkpointing runs, keeps its own error and
        # leaves the outer one kept)
        outer, _failed.error = getattr(_failed, "error", _NONE), None
        try:
            out = run_backward(*args, **kwargs)
        finally:
            error = _failed.error
            if outer is _NONE:
                del _failed.error
            else:
                _failed.error = outer
            if _elsewhere:
                with _elsewhere_lock:
                    if _elsewhere:
                        kept = _elsewhere.pop(next(iter(_elsewhere)))
                        error = error if error is not None else kept
        if error is not None:
            raise error
        return out
    return run


def _registering_guarded(register, lazyxla_only):
    @functools.wraps(register)
    def method(self, hook, *args, **kwargs):
        if not lazyxla_only or self.device == LAZYXLA_DEVICE:
            hook = guarded(hook)
        return register(self, hook, *args, **kwargs)
    return method


def install() -> None:
    """A lazyxla tensor's hooks are wrapped when registered (a tensor's gradient is on its device),
    and every module's full backward hooks (a module may move to lazyxla later: the wrapper looks
    at its arguments when it runs); the engine's entry raises kept errors."""
    global _installed
    if _installed:
        return
    _installed = True
    for cls, name in ((torch.Tensor, "register_hook"),
                      (torch.Tensor, "register_post_accumulate_grad_hook"),
                      (torch.nn.Module, "register_full_backward_hook"),
                      (torch.nn.Module, "register_full_backward_pre_hook")):
        setattr(cls, name, _registering_guarded(getattr(cls, name), cls is torch.Tensor))
    torch.autograd._engine_run_backward = _raising_kept_error(torch.autograd._engine_run_backward)
