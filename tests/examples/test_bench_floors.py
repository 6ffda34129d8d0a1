"""The floors the compiled training step is measured against (benchmarks/worker.py): the Dynamo
floor of a training step runs Dynamo, aot_autograd and the optimizer's Python around the very
executables lazyxla compiled, and nothing of lazyxla's bridge."""
import torch

from benchmarks import worker
from lazyxla import metrics


def _fresh_dynamo():
    # the benchmark's AdamW is foreach; after a fused Adam's step was compiled in this process
    # (tests/dynamo/test_training.py), compiling it fails in Dynamo unless Dynamo is reset (README)
    torch._dynamo.reset()


def test_training_floor_calls_the_three_captured_executables_and_no_bridge():
    _fresh_dynamo()
    runner = worker.Runner({"system": "compiled", "workload": "mlp", "mode": "train",
                            "threads": 1, "warmup": 1, "iters": 10, "max_seconds": 1})
    try:
        runner.setup()
        runner.block(runner.step())
        runner.direct_calls()
        assert len(runner.captured) == 3  # forward, backward, optimizer step
        calls = [0, 0, 0]

        def counting(i, exe):
            def call(*inputs):
                calls[i] += 1
                return exe(*inputs)
            return call
        runner.captured = [(counting(i, exe), inputs, donated)
                           for i, (exe, inputs, donated) in enumerate(runner.captured)]
        refill, floor = runner.training_floor()  # (the arrays the programs consume, refilled
        # before each step, untimed: the optimizer's program takes its inputs as donated)
        assert runner.captured[2][2]
        bridge_calls = metrics.counter_value("RunCachedGraph") or 0
        compiles = metrics.counter_value("UncachedCompile") or 0
        calls[:] = [0, 0, 0]
        for _ in range(2):
            refill()
            floor()
        assert calls == [2, 2, 2]
        assert (metrics.counter_value("RunCachedGraph") or 0) == bridge_calls
        assert (metrics.counter_value("UncachedCompile") or 0) == compiles
    finally:
        torch._dynamo.reset()


def test_training_floor_is_part_of_the_compiled_training_job():
    _fresh_dynamo()
    out = worker.Runner({"system": "compiled", "workload": "mlp", "mode": "train", "threads": 1,
                         "warmup": 1, "iters": 20, "max_seconds": 1}).run()
    torch._dynamo.reset()
    assert out["ok"] and "dynamo_floor_error" not in out
    assert out["dynamo_floor"]["n"] >= 20 and out["direct"]["executables"] == 3
    assert out["compiles_steady"] == 0
