"""Ops record IR; nothing executes until sync() or a value is needed."""
import pytest
import torch

import lazyxla
from lazyxla import metrics


def _executions():
    d = metrics.metric_data("ExecuteTime")
    return 0 if d is None else d[0]


def test_ops_record_and_sync_executes_once(fresh_metrics):
    d = lazyxla.device()
    x = torch.ones(3, 3, device=d)
    lazyxla.sync()
    before = _executions()
    y = (x * 3 + 1) * x
    z = y - 2
    assert _executions() == before, "ops must only record"
    assert lazyxla.needs_materialization([y, z]) == [True, True]
    lazyxla.sync()
    assert _executions() == before + 1, "one program for all pending tensors"
    assert lazyxla.needs_materialization([y, z]) == [False, False]
    assert metrics.counter_value("MarkStep") == 2
    torch.testing.assert_close(z.cpu(), torch.full((3, 3), 2.0))


def test_materialising_one_tensor_leaves_others_pending():
    d = lazyxla.device()
    x = torch.ones(4, device=d)
    lazyxla.sync()
    a = x + 1
    b = x * 5
    assert a.cpu().tolist() == [2.0] * 4
    assert lazyxla.needs_materialization([a, b]) == [False, True]
    lazyxla.sync()
    assert b.cpu().tolist() == [5.0] * 4


def test_shared_subgraph_is_not_recomputed_after_partial_materialisation():
    d = lazyxla.device()
    x = torch.arange(4.0, device=d)
    h = x * 2
    loss = h + 1
    loss.cpu()  # executes h and loss: h is a pending tensor the program computes anyway
    assert lazyxla.needs_materialization([h]) == [False]
    out = (h * 10).cpu()
    torch.testing.assert_close(out, torch.arange(4.0) * 20)


def test_a_read_keeps_what_pending_work_needs_of_its_program():
    """A read's program also outputs the values it computes that the rest of the recording
    reads (here `m`, no longer held by any tensor), so `later` does not recompute them."""
    from lazyxla.ir.node import DATA
    from lazyxla.ir import buffer
    d = lazyxla.device()
    x = torch.arange(4.0, device=d)
    lazyxla.sync()
    m = x * 3
    later = m + 1
    total = m.sum()
    del m
    assert total.item() == 18.0
    assert lazyxla.needs_materialization([later]) == [True]
    assert buffer.state_of(later).node.inputs[0].op is DATA
    torch.testing.assert_close(later.cpu(), torch.arange(4.0) * 3 + 1)


def test_a_generation_loop_that_reads_every_step_runs_one_step_program(fresh_metrics):
    """A decode loop that never syncs: a static KV cache written in place, a position counter
    chained from step to step (made after each step's read), the token read every step. Each
    read used to run a program holding every step so far (a new compile per token, quadratic
    work); now one step's program serves every step."""
    torch.manual_seed(0)
    w, emb = torch.randn(8, 8), torch.randn(16, 8)

    def generate(device, steps=8):
        cache = torch.zeros(steps, 8, device=device)
        pos = torch.zeros(1, dtype=torch.long, device=device)
        tok, out, compiles = torch.ones(1, dtype=torch.long, device=device), [], []
        for _ in range(steps):
            h = emb.to(device)[tok] @ w.to(device)
            cache.index_copy_(0, pos, h)
            logits = (cache.sum(0, keepdim=True) @ emb.to(device).t()).softmax(-1)
            tok = logits.argmax(-1)
            pos = pos + 1
            out.append(tok.item())
            compiles.append(metrics.counter_value("UncachedCompile") or 0)
        return out, compiles
    expected, _ = generate("cpu")
    got, compiles = generate(lazyxla.device())
    assert got == expected
    assert compiles[-1] == compiles[2], compiles


def test_same_program_is_compiled_once(fresh_metrics):
    d = lazyxla.device()
    w = torch.ones(4, 4, device=d)
    lazyxla.sync()
    metrics.clear_counters()
    for i in range(5):
        w = w * 0.5 + 1
        lazyxla.sync()
    assert metrics.counter_value("UncachedCompile") == 1
    assert metrics.counter_value("CachedCompile") == 4


def test_wait_blocks_until_done():
    d = lazyxla.device()
    x = torch.ones(8, device=d) * 2
    lazyxla.sync(wait=True)
    lazyxla.wait()
    assert x.cpu().sum().item() == 16.0


def test_data_dependent_control_flow():
    x = torch.tensor([3.0, -1.0]).to(lazyxla.device())
    s = x.sum()
    steps = 0
    while s > 0:
        s = s - 1
        steps += 1
    assert steps == 2


def test_pending_recording_is_bounded(fresh_metrics, monkeypatch):
    from lazyxla.device import dispatch
    monkeypatch.setattr(dispatch.BUDGET, "limit", 50)
    lazyxla.sync()
    x = torch.zeros(2, device=lazyxla.device())
    for _ in range(120):
        x = x + 1
    assert metrics.counter_value("AutoSync") == 2
    assert x.cpu().tolist() == [120.0, 120.0]


def test_pending_budget_from_env(monkeypatch):
    """LAZYXLA_MAX_PENDING_OPS: a count, 0 disables; anything else warns and keeps the default."""
    import pytest
    from lazyxla.device.dispatch import PendingBudget
    monkeypatch.setenv("LAZYXLA_MAX_PENDING_OPS", "0")
    assert PendingBudget().limit == 0
    for bad in ("lots", "-1"):
        monkeypatch.setenv("LAZYXLA_MAX_PENDING_OPS", bad)
        with pytest.warns(UserWarning, match="LAZYXLA_MAX_PENDING_OPS"):
            assert PendingBudget().limit == 200000


@pytest.mark.parametrize("kind", ["under a file", "a FIFO nobody reads"])
def test_report_path_that_cannot_be_written_is_said_at_exit(tmp_path, kind):
    # (a FIFO with no reader hung the exit: the report's open() waited for one)
    import os
    import subprocess
    import sys
    if kind == "under a file":
        (tmp_path / "a_file").write_text("")
        path = tmp_path / "a_file" / "run.json"
    else:
        path = tmp_path / "report.fifo"
        os.mkfifo(path)
    env = dict(os.environ, LAZYXLA_REPORT_PATH=str(path))
    out = subprocess.run([sys.executable, "-c", "import lazyxla; print('ran')"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ran" in out.stdout
    assert "could not write the run report to LAZYXLA_REPORT_PATH=" in out.stderr


def test_report_path_naming_a_fifo_being_read_gets_the_report(tmp_path):
    import json
    import os
    import subprocess
    import sys
    import threading
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)
    reader.start()  # (blocks in open() until the writer comes)
    env = dict(os.environ, LAZYXLA_REPORT_PATH=str(fifo))
    out = subprocess.run([sys.executable, "-c", "import lazyxla"], env=env, capture_output=True,
                         text=True, timeout=120)
    reader.join(30)
    assert out.returncode == 0, out.stderr
    assert "counters" in json.loads(got[0])


def test_tied_weights_stay_tied_through_to_and_cpu():
    lin = torch.nn.Linear(4, 4, bias=False)
    seq = torch.nn.Sequential(lin, torch.nn.ReLU(), lin)
    x = torch.randn(2, 4)
    with torch.no_grad():
        ref = seq(x)
    seq.to(lazyxla.device())
    assert seq[0].weight is seq[2].weight and len(list(seq.parameters())) == 1
    with torch.no_grad():
        torch.testing.assert_close(seq(x.to(lazyxla.device())).cpu(), ref)
    seq.cpu()
    assert seq[0].weight is seq[2].weight and seq[0].weight.device.type == "cpu"
    assert not torch.__future__.get_swap_module_params_on_conversion(), "the global flag is restored"
    other = torch.nn.Sequential(lin, lin)
    other.to(torch.float64)  # conversions not involving lazyxla keep PyTorch's default path
    assert not torch.__future__.get_swap_module_params_on_conversion()


def test_moving_a_module_while_a_graph_holds_its_weights_keeps_them_and_the_optimizer():
    # swap_tensors refused parameters a live graph saved (a forward's output kept): PyTorch's
    # default conversion then made new parameters, so the optimizer stepped the old CPU ones
    # (training silently did nothing) and tied weights came apart
    import warnings
    emb = torch.nn.Embedding(5, 3)
    head = torch.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    m = torch.nn.Sequential(emb, torch.nn.Linear(3, 3), head)
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    x = torch.tensor([1, 2])
    keep = m(x)  # its graph saves the Linear's and the head's weights
    expected = keep.detach().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.to(lazyxla.device())
    assert m[2].weight is m[0].weight and len(list(m.parameters())) == 3
    assert all(p.device.type == "lazyxla" for p in m.parameters())
    assert all(any(p is q for q in opt.param_groups[0]["params"]) for p in m.parameters())
    before = m[1].weight.detach().cpu().clone()
    m(x.to(lazyxla.device())).sum().backward()
    opt.step()
    assert not torch.equal(m[1].weight.detach().cpu(), before)
    assert torch.equal(keep.detach(), expected)  # the graph kept the values it was built on
    with pytest.raises(RuntimeError, match="moved|poisoned"):
        keep.sum().backward()  # its gradients have no parameter left to reach


class _StatefulParameter(torch.nn.Parameter):
    """A Parameter subclass with state of its own, as quantization libraries make."""
    def __new__(cls, data=None, requires_grad=True, state=None):
        p = super().__new__(cls, data, requires_grad)
        p.state = state
        return p


def test_parameter_subclasses_keep_their_class_and_attributes_through_to_and_cpu():
    # the in-place conversion swapped in a plain Parameter's class and empty __dict__
    m = torch.nn.Linear(3, 2)
    m.weight = _StatefulParameter(torch.ones(2, 3), state="qs")
    w = m.weight
    m.to(lazyxla.device())
    assert m.weight is w and type(w) is _StatefulParameter and w.state == "qs"
    assert w.device.type == "lazyxla" and type(m.bias) is torch.nn.Parameter
    m(torch.ones(1, 3, device=lazyxla.device())).sum().backward()
    assert w.grad.cpu().tolist() == [[1.0] * 3] * 2
    m.cpu()
    assert m.weight is w and type(w) is _StatefulParameter and w.state == "qs" and w.is_cpu


def test_a_loop_that_never_waits_keeps_no_old_results_alive():
    # sync() dispatches without waiting; what wait() will block on must not keep every step's
    # outputs alive (it held 64 steps of parameters and optimizer state)
    import jax
    d = lazyxla.device()
    w = torch.ones(64, 64, device=d)
    lazyxla.sync()

    def step():
        w.mul_(0.5).add_(1.0)
        lazyxla.sync()
    for _ in range(5):
        step()
    before = len(jax.live_arrays())
    for _ in range(100):
        step()
    assert len(jax.live_arrays()) <= before + 2
    lazyxla.wait()
    ref = torch.ones(64, 64)
    for _ in range(105):
        ref.mul_(0.5).add_(1.0)
    torch.testing.assert_close(w.cpu(), ref)


def test_a_read_looks_at_a_bounded_part_of_the_pending_recording(monkeypatch):
    """A running sum never read, chained over many steps, beside a read every step: what each
    read inspects of the pending recording stays the same size instead of growing with the chain
    (it was walked whole at every read: quadratic in the number of steps)."""
    from lazyxla.ir.graph import Graph
    looked = []
    computes = Graph.computes
    monkeypatch.setattr(Graph, "computes", lambda self, n: (looked.append(1), computes(self, n))[1])
    d = lazyxla.device()
    x = torch.arange(8.0, device=d)
    lazyxla.sync()
    total, per_read = torch.zeros((), device=d), []
    for step in range(1, 121):
        out = x * step
        total = total + out.sum()  # never read until the end
        looked.clear()
        assert out.max().item() == 7.0 * step
        per_read.append(len(looked))
    assert per_read[-1] == per_read[40], per_read[::20]
    assert total.item() == sum(range(1, 121)) * 28.0
