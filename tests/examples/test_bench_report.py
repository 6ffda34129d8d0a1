"""The benchmark report (benchmarks/suite.py) from recorded results: every floor gets its row and
each target its verdict, computed from the medians it shows."""
from benchmarks import suite


def _r(system, median, **kw):
    return dict(kw, system=system, workload="mlp", mode=kw.pop("mode", "infer"), ok=True,
                median_ms=median, p90_ms=median * 1.2, first_s=kw.get("first_s", 0.5))


def test_report_rows_and_verdicts():
    compiled = _r("compiled", 0.50, first_s=0.4, xla_compile_first_s=0.2, dynamo_s=0.2,
                  compiles_first=1, compiles_steady=0,
                  direct={"median_ms": 0.40, "p90_ms": 0.5, "executables": 1,
                          "cold": {"median_ms": 0.45, "p90_ms": 0.5},
                          "polled": {"median_ms": 0.42, "p90_ms": 0.5}},
                  dynamo_floor={"median_ms": 0.48, "p90_ms": 0.6})
    results = [_r("eager", 0.25), _r("inductor", 0.3, first_s=4.0), compiled,
               _r("lazy", 0.9, compiles_first=1, compiles_steady=0),
               _r("torch_xla", 1.0, compiles_first=1, compiles_steady=0), _r("torch_xla_lazy", 1.2),
               _r("eager", 2.0, mode="train"),
               _r("lazy", 3.2, mode="train", pipelined={"median_ms": 2.9, "p90_ms": 3.0})]
    meta = {"under_load": False, "command": "lazyxla bench", "started": "now", "wall_s": 1.0,
            "torch": "t", "jax": "j", "python": "3", "platform": "p", "cpus": 2, "threads": 1,
            "xla_flags": "f", "loadavg_start": (0, 0, 0), "loadavg_end": (0, 0, 0),
            "max_loadavg": 0.0, "peers": "none"}
    md = suite.render(meta, results)
    for label in ("direct XLA (floor)", "direct XLA, cold L2", "direct XLA, polled wait", "Dynamo floor"):
        assert label in md
    infer = next(l for l in md.splitlines() if l.startswith("| mlp | infer | 1.25 MISS"))
    # compiled/cold direct 0.50/0.45, compiled/polled direct 0.50/0.42, compiled/Dynamo floor
    # 0.50/0.48, inductor 4.0 s / ours 0.4 s
    assert "| 1.11 | 1.19 | 1.04 |" in infer and "| 10.0 ok |" in infer
    assert infer.endswith("| 0.50 ok | 0.75 ok |")  # compiled/openxla 0.5/1.0, lazy 0.9/1.2
    assert "torch_xla openxla" in md and "torch_xla lazy" in md
    assert "| 3.60 | — | 0.40 | 0.50 | ok |" in infer  # lazy/eager, no pipelined run; first call 0.4 s <= 1.5 x 0.2 + 0.2
    targets = md.split("## Targets")[1].splitlines()
    train = next(l for l in targets if l.startswith("| mlp | train |"))
    assert "| 1.60 MISS | 1.45 ok |" in train  # lazy/eager 3.2/2.0; pipelined 2.9/2.0 < 1.5
    assert "lazyxla lazy, pipelined" in md


def test_under_load_is_other_processes_cpu_not_the_jobs_own():
    busy = suite._busy_cpu_seconds()
    assert busy is None or busy > 0
    meta = {"under_load": True, "max_other_cpu": 0.8, "mean_other_cpu": 0.3, "command": "c",
            "started": "now", "wall_s": 1.0, "torch": "t", "jax": "j", "python": "3",
            "platform": "p", "cpus": 2, "threads": 1, "xla_flags": "f",
            "loadavg_start": (0, 0, 0), "loadavg_end": (0, 0, 0), "max_loadavg": 1.9,
            "peers": "none"}
    md = suite.render(meta, [_r("eager", 0.25)])
    assert "other processes used up to 0.80 of 2 CPUs" in md
    assert "mean 0.30, max 0.80 cores" in md


def test_recording_table_counts_the_ops_each_call_records():
    """benchmarks/record_ops.py divides each call's time by the aten ops it says the call records;
    those counts are what the device's kernels record (functional, in-place and view kernels)."""
    import torch
    import torch.nn.functional as F
    import lazyxla
    from lazyxla.device import dispatch
    from benchmarks import record_ops
    counted = []
    node, view = dispatch.record_node, dispatch.record_view

    def count(fn):
        def wrapped(op, *a, **k):
            counted.append(op)
            return fn(op, *a, **k)
        return wrapped
    dispatch.record_node, dispatch.record_view = count(node), count(view)
    try:
        for name, n_ops, make in record_ops.cases(torch, F):
            call = make(lazyxla.device())
            counted.clear()
            call()
            foreach_tensors = 8 if name.startswith("_foreach") else 1
            assert len(counted) * foreach_tensors == n_ops, (name, counted)
            lazyxla.sync()
    finally:
        dispatch.record_node, dispatch.record_view = node, view


def test_recording_report_and_budget_verdicts():
    import torch
    import torch.nn.functional as F
    from benchmarks import record_ops
    rows = record_ops.measure(per_round=2, rounds=1)
    assert [r["op"] for r in rows] == [name for name, _, _ in record_ops.cases(torch, F)]
    assert all(r["lazy_us"] > 0 and r["eager_us"] > 0 for r in rows)
    fake = [{"op": "a + b", "ops": 1, "lazy_us": 7.0, "per_op_us": 7.0, "eager_us": 3.0, "ok": True},
            {"op": "F.linear", "ops": 2, "lazy_us": 24.0, "per_op_us": 12.0, "eager_us": 50.0, "ok": False}]
    md = "\n".join(record_ops.render(fake))
    assert "(budget <= 10 us per aten op): 1 of 2 within" in md
    assert "| a + b | 1 | 7.0 | 7.0 | 3.0 | ok |" in md
    assert "| F.linear | 2 | 24.0 | 12.0 | 50.0 | MISS |" in md
    meta = {"under_load": False, "command": "c", "started": "now", "wall_s": 1.0, "torch": "t",
            "jax": "j", "python": "3", "platform": "p", "cpus": 2, "threads": 1, "xla_flags": "f",
            "loadavg_start": (0, 0, 0), "loadavg_end": (0, 0, 0), "max_loadavg": 0.0, "peers": "none"}
    report = suite.render(meta, [_r("eager", 0.25), {"system": "lazy", "workload": "ops",
                                                     "mode": "record", "ok": True, "rows": fake}])
    assert "| F.linear | 2 | 24.0 | 12.0 | 50.0 | MISS |" in report


def test_bench_command_line_is_checked_before_any_job():
    """An unknown workload, mode or system, or fewer than one thread, is a usage error (exit
    status 2); it used to run every workload, or none, and overwrite the committed report."""
    import argparse
    import pytest
    ap = argparse.ArgumentParser()
    suite.add_arguments(ap)
    for argv, message in ((["--threads", "0"], "--threads must be at least 1"),
                          (["--workloads", "mlp,nope"], "--workloads: unknown ['nope']"),
                          (["--modes", "eval"], "--modes: unknown ['eval']; choose from infer,train"),
                          (["--systems", "torch_xla"], "run from --peer-python"),
                          (["--out", __file__], "is a file, not a directory")):
        assert message in suite.check_arguments(ap.parse_args(argv))
        with pytest.raises(SystemExit) as e:
            suite.cli(argv + ([] if "--out" in argv else ["--out", "/nonexistent/never-written"]))
        assert e.value.code == 2
    assert suite.check_arguments(ap.parse_args(["--workloads", "mlp,gpt", "--modes", "train",
                                                "--systems", "eager,compiled"])) is None


def test_the_report_names_the_options_the_run_was_given():
    """A partial run (one workload, no dynamic lengths) must not be reported as the full suite."""
    assert suite.command_line() == "lazyxla bench"
    assert suite.command_line(quick=True, threads=2) == "lazyxla bench --quick --threads 2"
    assert suite.command_line(workloads=("cnn",), modes=("train",), systems=("eager", "compiled"),
                              dynamic=False) == \
        "lazyxla bench --workloads cnn --modes train --systems eager,compiled --no-dynamic"


def test_lazy_over_eager_uses_eager_timed_in_the_lazy_process():
    """The eager job ran minutes apart in its own process (2.0 ms, a slow phase); eager timed in
    rounds alternating with lazy mode (1.6 ms) decides lazy/eager and pipelined/eager."""
    results = [_r("eager", 2.0, mode="train"),
               _r("lazy", 3.2, mode="train", pipelined={"median_ms": 2.0, "p90_ms": 2.2},
                  eager_here={"median_ms": 1.6, "p90_ms": 1.8})]
    meta = {"under_load": False, "command": "c", "started": "now", "wall_s": 1.0, "torch": "t",
            "jax": "j", "python": "3", "platform": "p", "cpus": 2, "threads": 1, "xla_flags": "f",
            "loadavg_start": (0, 0, 0), "loadavg_end": (0, 0, 0), "max_loadavg": 0.0, "peers": "none"}
    md = suite.render(meta, results)
    assert "| mlp | train | eager (CPU), timed in the lazy process | 1.600 |" in md
    train = next(l for l in md.split("## Targets")[1].splitlines() if l.startswith("| mlp | train |"))
    assert "| 2.00 MISS | 1.25 ok |" in train  # 3.2 / 1.6 and 2.0 / 1.6, not / 2.0
    assert "| mlp | train | lazyxla lazy (sync/step) | 3.200 | 3.840 | 1.60x |" in md  # vs the eager job


def test_host_malloc_benchmark_checks_its_jobs_before_running_any():
    """benchmarks/host_malloc.py: an unknown workload or mode, or no rounds, is a usage error
    (exit status 2), not a child process failing minutes in."""
    import pytest
    from benchmarks import host_malloc
    for argv in (["--jobs", "mlp:infer,nope:train"], ["--jobs", "mlp:eval"], ["--jobs", "mlp"],
                 ["--jobs", ""], ["--rounds", "0"], ["--seconds", "0"]):
        with pytest.raises(SystemExit) as e:
            host_malloc.main(argv + ["--out", "/nonexistent/never-written"])
        assert e.value.code == 2


def test_wait_ready_benchmark_checks_its_jobs_before_running_any():
    """benchmarks/wait_ready.py: an unknown workload, mode or system, or no rounds, is a usage
    error (exit status 2), not a child process failing minutes in."""
    import pytest
    from benchmarks import wait_ready
    for argv in (["--jobs", "mlp:infer:lazy,nope:train:lazy"], ["--jobs", "mlp:eval:lazy"],
                 ["--jobs", "mlp:infer:eager"], ["--jobs", "mlp:infer"], ["--jobs", ""],
                 ["--rounds", "0"], ["--seconds", "0"]):
        with pytest.raises(SystemExit) as e:
            wait_ready.main(argv + ["--out", "/nonexistent/never-written"])
        assert e.value.code == 2


def test_index_loops_benchmark_checks_its_arguments_before_running_any():
    """benchmarks/index_loops.py: too few steps, more steps than the tensor has rows, or no
    rounds, is a usage error (exit status 2), before any process starts."""
    import pytest
    from benchmarks import index_loops
    for argv in (["--steps", "50"], ["--steps", "19001"], ["--rounds", "0"]):
        with pytest.raises(SystemExit) as e:
            index_loops.main(argv + ["--out", "/nonexistent/never-written"])
        assert e.value.code == 2


def test_opt_level_benchmark_checks_its_jobs_before_running_any():
    """benchmarks/opt_level.py: an unknown job, no seconds or no lengths is a usage error (exit
    status 2) before any program is compiled."""
    import pytest
    from benchmarks import opt_level
    for argv in (["--jobs", "mlp:infer,nope:train"], ["--jobs", "dyn:train"], ["--jobs", "mlp"],
                 ["--jobs", ""], ["--seconds", "0"], ["--lengths", "0"]):
        with pytest.raises(SystemExit) as e:
            opt_level.main(argv + ["--out", "/nonexistent/never-written"])
        assert e.value.code == 2


def test_variable_lengths_benchmark_checks_its_mixes_before_running_any():
    """benchmarks/variable_lengths.py: a mix that is not LENGTHSxSTEPS, with no length or no step,
    or no rounds is a usage error (exit status 2) before any process starts."""
    import pytest
    from benchmarks import variable_lengths
    for argv in (["--mixes", "24x200,oops"], ["--mixes", "0x10"], ["--mixes", "4x0"], ["--mixes", ""],
                 ["--mixes", "4x10x2"], ["--rounds", "0"]):
        with pytest.raises(SystemExit) as e:
            variable_lengths.main(argv + ["--out", "/nonexistent/never-written"])
        assert e.value.code == 2


def test_optimizer_paths_benchmark_checks_its_arguments_before_running_any():
    """benchmarks/optimizer_paths.py: an unknown system or AdamW path, no more steps than the
    untimed warm-up, or no rounds is a usage error (exit status 2) before any process starts."""
    import pytest
    from benchmarks import optimizer_paths
    for argv in (["--systems", "lazy,inductor"], ["--systems", ""], ["--paths", "fused,sgd"],
                 ["--paths", ""], ["--steps", "10"], ["--rounds", "0"]):
        with pytest.raises(SystemExit) as e:
            optimizer_paths.main(argv + ["--out", "/nonexistent/never-written"])
        assert e.value.code == 2


def test_bridge_parts_times_each_compiled_graph_and_puts_the_bridge_back():
    """benchmarks/profile_call.bridge_parts: one row per compiled graph the step runs, its parts
    within its call (a program run within the matcher counted once), and every method it wrapped
    restored."""
    import torch
    import lazyxla
    from benchmarks.profile_call import bridge_parts
    from lazyxla.dynamo import bridge, matcher, outputs
    from lazyxla.runtime import executor
    before = (bridge.Bridge.__call__, matcher.InputMatcher.__call__, matcher.InputMatcher.write_back,
              outputs.OutputHandler.__call__, executor.execute_arguments)
    w = torch.zeros(3, device="lazyxla")
    f = torch.compile(lambda a: (a * 2, w.add_(1)), backend="lazyxla")
    x = torch.ones(3, device="lazyxla")
    with torch.no_grad():  # (so the bridge gets Dynamo's graph, and writes w back itself)
        f(x + 1)
        # x + 1 pending: the matcher runs its program (execute_arguments within the matcher)
        table = bridge_parts(lambda: f(x + 1), 5)
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    assert len(rows) == 1
    call, match, guard, execute, write_back, outs, other = map(float, rows[0][1:])
    # each part within its call on every call, so each median within the call's (medians do not
    # add up: no sum is checked)
    # (w's old data is donated to the program that writes its new value: the guard runs)
    assert all(0 < part <= call for part in (match, guard, execute, write_back, outs)), rows
    assert 0 <= other <= call, rows
    assert (bridge.Bridge.__call__, matcher.InputMatcher.__call__, matcher.InputMatcher.write_back,
            outputs.OutputHandler.__call__, executor.execute_arguments) == before
    torch.testing.assert_close(w.cpu(), torch.full((3,), 6.0))  # one add a call
    lazyxla.sync()
