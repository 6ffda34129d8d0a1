"""The torch.compile backend "lazyxla" (registered through the torch_dynamo_backends entry point).

Training goes through aot_autograd, which hands the bridge functional forward and backward graphs
of aten ops; inference (grad mode off) hands Dynamo's own graph to the bridge directly. Options (torch.compile(..., options={...})):
  mode (torch.compile's mode=): any of torch.compile's modes is accepted and compiles alike;
  fallback: "partition" (default) splits the graph around ops that fall back to the CPU;
            "error" raises one error listing every unsupported node with its source line.
"""
from __future__ import annotations

import logging
import os

import torch
import torch.autograd.forward_ad as _forward_ad
from torch.fx._lazy_graph_module import _LazyGraphModule

from lazyxla.device.fallback import FallbackInTrace
from lazyxla.ir.buffer import RUNTIME_LOCK
from . import partition as part
from .absorb import absorb_scalar_chains
from .bridge import Bridge
from .outputs import views_of_written_inputs

log = logging.getLogger("lazyxla.dynamo")

_FALLBACK_MODES = ("partition", "error")
# torch.compile's modes tune inductor. Every mode compiles the same here: each graph is one XLA
# executable, launched by hash, with XLA's own tuning; nothing to capture, as CUDA graphs do for
# reduce-overhead. Accepted so that a script written for inductor runs unchanged.
_COMPILE_MODES = frozenset({"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"})


class UnsupportedOpsError(RuntimeError):
    pass


class CompiledGraph:
    """What the backend returns for one FX graph. The first call decides, on real inputs, whether
    the graph runs as one program or is partitioned around unsupported ops."""

    def __init__(self, gm, name, fallback, views=()):
        """views: outputs.views_of_written_inputs's positions (aot_autograd's graphs)."""
        self.gm, self.name, self.fallback, self.views = gm, name, fallback, views
        self.backward = name.startswith("backward")
        self.impl = None

    def __call__(self, *args):
        if _forward_ad._current_level >= 0 or torch._C._are_functorch_transforms_active() or (
                self.backward and args and _is_legacy_batched(args[-1])):
            # dual tensors (forward AD), torch.func's wrapped ones, or the legacy vmap's batched
            # ones (autograd.grad's is_grads_batched runs the backward under it; a backward
            # graph's gradients come last): the graph's ops as they stand carry tangents and batch
            # dims; the program would drop them
            return self._as_it_stands(args)
        impl = self.impl
        if impl is None:
            with RUNTIME_LOCK:  # (threads that call it first at once build it once)
                impl = self.impl = self.impl or _code_generated(self._build(args))
        try:
            outs = impl(*args)
        except FallbackInTrace:
            # every op lowers, but not for these arguments (index_put with a mask and integers):
            # nothing ran (the trace stopped at that op); the trial run places it
            if type(impl) is not Bridge:
                raise
            with RUNTIME_LOCK:
                if self.impl is impl:
                    self.impl = _code_generated(self._build(args, trial=True))
            outs = self.impl(*args)
        return views_of_written_inputs(outs, args, self.views) if self.views else outs

    def _as_it_stands(self, args):
        outs = self.gm(*args)
        return views_of_written_inputs(outs, args, self.views) if self.views else outs

    def _build(self, args, trial=False):
        # torch.compile's fake-tensor constants are moved to the device by the graph itself
        if not trial and part.all_statically_supported(self.gm, args):  # B6: no trial run needed
            return Bridge(self.gm, self.name)
        trial = part.trial_run(self.gm, args)
        gm = self.gm
        if trial.scalar_arithmetic:  # an optimizer's step-count bookkeeping: into the program
            gm, trial = absorb_scalar_chains(gm, args, trial) or (gm, trial)
        unsupported = trial.unsupported
        if not unsupported:
            return Bridge(gm, self.name)
        if self.fallback == "error":
            raise UnsupportedOpsError(
                f"lazyxla: {len(unsupported)} op(s) in {self.name} have no XLA lowering "
                f"(options={{'fallback': 'error'}}):\n{part.describe(unsupported)}")
        fused, n = part.partition(gm, unsupported, lambda sub, name: Bridge(sub, f"{self.name}.{name}"),
                                  trial)
        log.info("lazyxla: %s split into %d compiled partitions around %d unsupported node(s)",
                 self.name, n, len(unsupported))
        from .bridge import debug_enabled
        if debug_enabled():
            print(f"[lazyxla dynamo] {self.name}: fallback ops:\n{part.describe(unsupported)}")
        return fused


def _is_legacy_batched(a) -> bool:
    return isinstance(a, torch.Tensor) and torch._C._functorch.is_legacy_batchedtensor(a)


def _code_generated(impl):
    """`impl` with the Python code of its graph modules generated now, under the lock. A lazy graph
    module (Dynamo's, a partitioned graph's) generates it at its first call, and FX's code
    generation renames a graph's nodes while it runs: threads calling one at once for the first
    time generated code that named another call's variables (NameError: 'l_args_0__1')."""
    if isinstance(impl, torch.nn.Module):
        for m in impl.modules():
            _LazyGraphModule.force_recompile(m)
    return impl


def _bridge_compiler(fallback, kind):
    counter = [0]

    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        counter[0] += 1
        views = _views_of_written_inputs(gm) if kind != "backward" else ()
        return CompiledGraph(gm, f"{kind}{counter[0]}", fallback, views)
    return compile_graph


def _views_of_written_inputs(gm) -> tuple:
    """(output, argument, output of the argument's new value) positions in aot_autograd's graph
    `gm` of each user's output that aot_autograd rebuilds as a view of an argument the graph writes
    (outputs.views_of_written_inputs). Its graphs return the written arguments' new values, then
    the user's outputs (schemas.ViewAndMutationMeta)."""
    from torch._functorch._aot_autograd.schemas import OutputType
    meta = getattr(torch._guards.TracingContext.try_get(), "fw_metadata", None)
    outs = gm.graph.output_node().args[0]
    if meta is None or meta.tokens or not isinstance(outs, (tuple, list)):
        return ()  # (effect tokens come first among both the arguments and the outputs)
    written = meta.mutated_inp_runtime_indices
    views = tuple((len(written) + i, o.base_idx, written.index(o.base_idx))
                  for i, o in enumerate(meta.output_info)
                  if o.output_type is OutputType.alias_of_input and o.base_idx in written)
    return views if all(pos < len(outs) for pos, _, _ in views) else ()


def lazyxla_backend(gm: torch.fx.GraphModule, example_inputs, options=None, **kwargs):
    options = dict(options or {})
    options.update(kwargs)
    fallback = options.pop("fallback", "partition")
    if fallback not in _FALLBACK_MODES:
        raise ValueError(f"lazyxla backend: fallback must be one of {_FALLBACK_MODES}, got {fallback!r}")
    mode = options.pop("mode", None)
    if mode is not None and mode not in _COMPILE_MODES:
        raise ValueError(f"lazyxla backend: mode must be one of {sorted(_COMPILE_MODES)}, got {mode!r}")
    if options:
        raise ValueError(f"lazyxla backend: unknown options {sorted(options)}; it takes "
                         f"'fallback' ({', '.join(_FALLBACK_MODES)}) and 'mode' "
                         f"({', '.join(sorted(_COMPILE_MODES))})")
    if any(isinstance(e, (list, tuple)) for e in example_inputs):
        # compiled autograd's backward graph: its gradients come as one list, its sizes as the
        # shapes of CPU tensors. Its ops run as they stand, recorded in lazy mode: one program
        # at the next sync, as a backward outside torch.compile.
        log.info("lazyxla: a graph with a list argument (compiled autograd) runs in lazy mode")
        return gm
    if not torch.is_grad_enabled() and not _has_functorch_transforms(gm):
        # Inference (Dynamo guards on grad mode): the bridge runs Dynamo's graph directly, without
        # aot_autograd's runtime wrappers, which would cost more per call than the bridge itself.
        return CompiledGraph(gm, "inference", fallback)
    _reject_sparse_gradients(gm)
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    fw = _bridge_compiler(fallback, "forward")
    bw = _bridge_compiler(fallback, "backward")
    boxed = lambda c: (lambda gm, ex: make_boxed_func(c(gm, ex)))  # noqa: E731
    backend = aot_autograd(fw_compiler=boxed(fw), bw_compiler=boxed(bw),
                           inference_compiler=boxed(_bridge_compiler(fallback, "inference")),
                           keep_inference_input_mutations=_sets_an_input(gm))
    return backend(gm, example_inputs)


def _sets_an_input(gm) -> bool:
    """Does the graph `set_` an argument (`x.data = y`, `x.set_(y)`)? aot_autograd can express
    that only with the graph's writes to its arguments kept in the graph (else it asserts). Not
    always: with the writes in the graph, aot_autograd rebuilds a returned view of a written
    argument from the graph's output (PyTorch's own backends then return it at the wrong offset),
    which `_views_of_written_inputs` mends only for writes that the graph returns."""
    placeholders = {n for n in gm.graph.nodes if n.op == "placeholder"}
    return any(n.args and n.args[0] in placeholders and (
        (n.op == "call_function" and n.target is torch.Tensor.set_)
        or (n.op == "call_method" and n.target == "set_")) for n in gm.graph.nodes)


def _has_functorch_transforms(gm) -> bool:
    """torch.func's vmap/grad/jvp inlined by Dynamo (_add_batch_dim, _wrap_for_grad, ...): run
    as they stand they would hand the bridge batched and wrapped tensors; aot_autograd traces
    them away into plain aten ops."""
    return any(n.op == "call_function" and getattr(n.target, "__module__", "").startswith(
        ("torch._functorch", "torch._C._functorch")) for n in gm.graph.nodes)


# embedding calls Dynamo records: (position of the weight, position of `sparse`)
_EMBEDDINGS = {torch.nn.functional.embedding: (1, 6), torch.embedding: (0, 4)}


def _reject_sparse_gradients(gm) -> None:
    """A training graph with an embedding of sparse=True whose weight requires grad: aot_autograd
    would trace a backward that makes a sparse gradient, which fails deep in PyTorch's
    dispatcher. Said before tracing."""
    for n in gm.graph.nodes:
        pos = _EMBEDDINGS.get(n.target) if n.op == "call_function" else None
        if pos is None or not n.kwargs.get("sparse", n.args[pos[1]] if len(n.args) > pos[1] else False):
            continue
        weight = n.kwargs.get("weight", n.args[pos[0]] if len(n.args) > pos[0] else None)
        value = weight.meta.get("example_value") if isinstance(weight, torch.fx.Node) else None
        if value is None or value.requires_grad:
            from lazyxla.lowering.value_checks import SPARSE_EMBEDDING
            raise RuntimeError(SPARSE_EMBEDDING)


def register() -> None:
    """Make backend="lazyxla" available even without the installed entry point, and keep Dynamo
    out of lazyxla's and JAX's own frames: after a graph break Dynamo evaluates every new Python
    frame, and the device's kernels (an `.item()`, a print) are Python frames called from the
    dispatcher; traced as user code they fail inside JAX."""
    from torch._dynamo import trace_rules
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "lazyxla" not in _BACKENDS:
        register_backend(name="lazyxla")(lazyxla_backend)
    for package in ("jax", "jaxlib", "ml_dtypes"):
        trace_rules.add(package)
    _skip_runtime(trace_rules)
    _answer_static_grads_without_inductor()


def _answer_static_grads_without_inductor() -> None:
    """Dynamo asks, for each gradient of an optimizer step it traces, whether CUDA graphs could
    keep its address; its answer imports inductor's CUDA-graph module first (about 1 s in a process
    that has not imported inductor: half of a compiled MLP AdamW step's first call), though for a
    tensor not on CUDA the answer is always True. Answered so here; CUDA tensors still ask Dynamo's
    own function. Left as it is where a torch names it otherwise."""
    from torch._dynamo.variables import optimizer
    asked = getattr(optimizer, "_is_static_for_cudagraphs", None)
    if asked is None or getattr(asked, "_lazyxla_answers_non_cuda", False):
        return

    def is_static_for_cudagraphs(x: torch.Tensor) -> bool:
        return True if not x.is_cuda else asked(x)

    is_static_for_cudagraphs._lazyxla_answers_non_cuda = True
    optimizer._is_static_for_cudagraphs = is_static_for_cudagraphs


def _skip_runtime(trace_rules) -> None:
    """Skip every part of lazyxla but its examples: those are user code (the demo's GPT), which
    Dynamo must trace. Skipping the whole package made torch.compile of the demo's model run its
    forward uncompiled, in lazy mode."""
    import pkgutil

    import lazyxla
    for module in pkgutil.iter_modules(lazyxla.__path__):
        if module.name not in USER_CODE:
            trace_rules.add(f"lazyxla.{module.name}")
    # (the package's __init__.py: added by name, its whole directory would be skipped; a torch
    # without this set traces lazyxla.sync() and friends into a graph break inside the runtime)
    force_skip = getattr(trace_rules, "FORCE_SKIP_FILES", None)
    if isinstance(force_skip, set):
        force_skip.add(lazyxla.__file__.replace(os.sep, "/"))


USER_CODE = ("examples",)  # lazyxla's subpackages that Dynamo traces as user code
