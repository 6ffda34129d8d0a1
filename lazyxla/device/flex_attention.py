"""flex_attention on lazyxla tensors.

The frontend `torch.nn.attention.flex_attention` refuses, before anything runs, every device
outside its own list (CUDA, CPU, XPU, HPU, MPS). The operator's dense implementation behind it
(the scores materialised, score_mod and mask_mod applied through vmap, softmax, and autograd
through all of it) is device-independent: on lazyxla it records like any other ops, one program
under torch.compile, forward and backward (PyTorch's CPU path refuses backward). So the frontend's
device check lets lazyxla tensors through; every other check of the frontend still runs. A block
mask is applied densely, as masked scores: its sparsity saves no compute.
"""
from __future__ import annotations

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    try:
        from torch.nn.attention import flex_attention as frontend
    except ImportError:  # a PyTorch without flex_attention: nothing to open
        return
    original = getattr(frontend, "_validate_device", None)
    if original is None or hasattr(original, "_lazyxla_original"):
        return

    def validate_device(query, key, value):
        # (the frontend has already checked that query, key and value share a device type)
        if query.device.type == "lazyxla":
            return None
        return original(query, key, value)

    # Dynamo skips lazyxla's own files; traced without this the call is a graph break, and the
    # attention ran outside the compiled graph (fullgraph=True raised)
    import torch._dynamo
    validate_device = torch._dynamo.dont_skip_tracing(validate_device)
    validate_device._lazyxla_original = original
    frontend._validate_device = validate_device
