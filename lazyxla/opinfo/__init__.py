"""Op conformance: PyTorch's OpInfo database run on the lazyxla device, compared with the CPU.

Every OpInfo of `torch.testing._internal.common_methods_invocations.op_db` is an *entry* per dtype
(`name[.variant] dtype`). An entry runs its `sample_inputs` on the device, materialises the results
and compares them with the same op on the CPU (`torch.testing.assert_close`, default tolerances per
dtype), then the in-place variant (the result must be visible through the tensor and through a view
of it), then, for differentiable float32 ops (and complex ones in a complex `--dtype` sweep, or
any dtype in a `--dtype NAME --grad` sweep, where the OpInfo lists that dtype among its backward
dtypes), the gradients. Each entry gets a class:

    NATIVE      correct; no CPU fallback and no decomposition counter moved
    DECOMPOSED  correct; went through a torch._decomp decomposition into lowered ops, no fallback
    FALLBACK    correct only through the CPU fallback (an `aten::<op>` counter moved)
    FAIL        a mismatch or an error, in any check
    SKIPPED     the op supports none of the dtypes run here on the CPU (complex-only, CUDA-only)

Modes: *fast* (the pytest/CI default) runs every OpInfo once, in float32 (or its first supported
dtype of int64, bool, bfloat16, ...), with the first FAST_SAMPLES samples; *full*
(LAZYXLA_OPINFO_FULL=1, `lazyxla ops --full`) runs every sample in float32, int64, bool and bfloat16.
A full run also knows what the fast run would give: fast samples are the full list's first ones.

    python -m lazyxla.opinfo                              # fast sweep, summary on stdout
    python -m lazyxla.opinfo --update-known-failures      # regenerate tests/opinfo/known_failures.txt
    python -m lazyxla.opinfo --full --update-known-failures
    python -m lazyxla.opinfo --dtype float16 --grad          # float16 values and gradients
    lazyxla ops [--full]                                  # regenerate docs/op-coverage.md

torch.testing internals are imported only when a sweep runs (they take ~10 s to import).
"""
from .sweep import (  # noqa: F401
    CANONICAL, CLASSES, COVERAGE_DOC, CPU_ARGS, DECOMPOSED, FAIL,
    FALLBACK, FAST_DTYPE_ORDER, FAST_GRAD_SAMPLES, FAST_SAMPLES, FULL_DTYPES, FULL_TAG,
    KNOWN_FAILURES, NATIVE, RANDOM_OPS, ROOT, Result, SKIPPED,
    TOLERANCES, dtype_name, entries, entry_dtypes, entry_name, fast_dtype,
    full_mode_from_env, load_op_db, run_entry, sweep)
from .report import (  # noqa: F401
    build_parser, expected_failing, failing_families, is_full_only, main,
    op_classes, parse_known_failures, render_coverage, run_sweep_cli, summary_line,
    write_known_failures)
