"""Donation (lazyxla/runtime/donation.py): a program writes an in-place update into the memory of
the data it replaces, where nothing else holds that data; anything else that holds it keeps it
intact (the program is fed a copy), and the values are eager's either way."""
import copy

import jax
import numpy as np
import pytest
import torch

import lazyxla
from lazyxla import metrics
from lazyxla.ir import buffer as buf
from lazyxla.ir.graph import cut
from lazyxla.ir.node import DATA

D = lazyxla.device()


@pytest.fixture(autouse=True)
def donating_syncs(monkeypatch):
    """Lazy mode's syncs donate (their default off the CPU backend; tests run on the CPU)."""
    monkeypatch.setenv("LAZYXLA_DONATE_SYNCS", "1")


def _array(t):
    return buf.state_of(t).root.node.data


def _pointer(t) -> int:
    return _array(t).unsafe_buffer_pointer()


def _counts():
    return metrics.counter_value("DonatedInput") or 0, metrics.counter_value("DonationCopy") or 0


def _uploaded(*values):
    """Device data of its own (a factory's result is a cached constant, which is never donated)."""
    out = [torch.tensor(v, dtype=torch.float32).to(D) for v in values]
    lazyxla.sync()
    return out if len(out) > 1 else out[0]


def test_an_in_place_update_writes_into_the_memory_it_replaces(fresh_metrics):
    x, y = _uploaded([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])
    x.add_(y)  # (an upload's array may be the host array itself, which XLA does not reuse)
    lazyxla.sync()
    before = _pointer(x)
    x.add_(y)
    lazyxla.sync()
    assert _counts() == (2, 0)
    assert _pointer(x) == before  # the output took the donated input's memory
    assert x.cpu().tolist() == [21.0, 42.0, 63.0]
    assert y.cpu().tolist() == [10.0, 20.0, 30.0]


def test_an_array_held_elsewhere_is_copied_and_stays_intact(fresh_metrics):
    x = _uploaded([1.0, 2.0])
    held = _array(x)  # (a reference nobody counted: lazyxla must not give this array away)
    x.mul_(3)
    lazyxla.sync()
    assert _counts() == (1, 1)
    assert not held.is_deleted() and np.asarray(held).tolist() == [1.0, 2.0]
    assert x.cpu().tolist() == [3.0, 6.0]


def test_data_shared_by_two_tensors_stays_with_the_other(fresh_metrics):
    x = _uploaded([1.0, 2.0])
    y = torch.empty(2, device=D)
    y.copy_(x)  # a whole-tensor copy shares the data
    assert buf.state_of(y).root.node is buf.state_of(x).root.node
    x.add_(1)
    lazyxla.sync()
    assert _counts() == (1, 1)
    assert x.cpu().tolist() == [2.0, 3.0] and y.cpu().tolist() == [1.0, 2.0]


def test_pending_work_left_out_of_a_read_still_reads_the_old_value(fresh_metrics):
    x = _uploaded([1.0, 2.0])
    doubled = x * 2  # pending, reads x's data
    x.add_(5)
    assert x.cpu().tolist() == [6.0, 7.0]  # a read: a partial sync, which donates nothing
    assert _counts() == (0, 0)
    lazyxla.sync()
    assert doubled.cpu().tolist() == [2.0, 4.0]


def test_pending_work_synced_together_reads_the_old_value(fresh_metrics):
    x = _uploaded([1.0, 2.0])
    doubled = x * 2
    x.add_(5)
    lazyxla.sync()  # one program: reads the donated input, then writes over it
    assert _counts() == (1, 0)
    assert doubled.cpu().tolist() == [2.0, 4.0] and x.cpu().tolist() == [6.0, 7.0]


def test_a_cached_constant_is_never_given_away(fresh_metrics):
    x = torch.zeros(3, device=D)
    lazyxla.sync()
    x.add_(1)
    lazyxla.sync()
    assert _counts() == (1, 1)
    assert torch.zeros(3, device=D).cpu().tolist() == [0.0, 0.0, 0.0]
    x.add_(1)
    lazyxla.sync()  # x's data is its own now
    assert _counts() == (2, 1) and x.cpu().tolist() == [2.0, 2.0, 2.0]


def test_a_view_reads_the_updated_base(fresh_metrics):
    x = _uploaded([1.0, 2.0, 3.0])
    v = x[1:]
    assert v.cpu().tolist() == [2.0, 3.0]  # (its read memoises a node over x's data)
    x.mul_(10)
    lazyxla.sync()
    assert x.cpu().tolist() == [10.0, 20.0, 30.0] and v.cpu().tolist() == [20.0, 30.0]


def test_dlpack_exports_keep_their_values(fresh_metrics):
    x = _uploaded([1.0, 2.0])
    exported = jax.dlpack.from_dlpack(x)
    on_cpu = np.from_dlpack(x)
    x.add_(1)
    lazyxla.sync()
    assert np.asarray(exported).tolist() == [1.0, 2.0] and on_cpu.tolist() == [1.0, 2.0]
    assert x.cpu().tolist() == [2.0, 3.0]


def test_donation_is_part_of_the_program():
    x, y = _uploaded([1.0], [2.0])
    x.add_(y)
    root = buf.state_of(x).root
    old = root.committed
    assert old.op is DATA and root.node.op is not DATA
    plain, donating = cut([root.node]), cut([root.node], donate={id(old): 0})
    assert plain.spec.donated == () and donating.spec.donated == ((0, 0),)
    assert plain.spec.hash != donating.spec.hash
    lazyxla.sync()


def test_LAZYXLA_DONATE_0_donates_nothing(fresh_metrics, monkeypatch):
    monkeypatch.setenv("LAZYXLA_DONATE", "0")
    x, y = _uploaded([1.0, 2.0], [1.0, 1.0])
    x.add_(y)
    lazyxla.sync()
    before = _pointer(x)
    x.add_(y)
    lazyxla.sync()
    assert _counts() == (0, 0) and _pointer(x) != before
    assert x.cpu().tolist() == [3.0, 4.0]


def _models():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4))
    return model, copy.deepcopy(model).to(D)


def _assert_same_state(cpu_model, lazy_model):
    for a, b in zip(cpu_model.state_dict().values(), lazy_model.state_dict().values()):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-4, atol=1e-5)


def test_lazy_training_donates_parameters_and_moments_every_step(fresh_metrics):
    cpu_model, model = _models()
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (cpu_model, model)]
    counts = []
    for _ in range(4):
        for m, opt, (xx, yy) in zip((cpu_model, model), opts, ((x, y), (x.to(D), y.to(D)))):
            torch.nn.functional.cross_entropy(m(xx), yy).backward()
            opt.step()
            opt.zero_grad()
        lazyxla.sync()
        counts.append(_counts())
    # from the second step: 6 parameters, their 12 moments, BatchNorm's 3 statistics
    assert [b - a for (a, _), (b, _) in zip(counts, counts[1:])] == [21, 21, 21]
    assert counts[-1][1] == counts[0][1]  # no copy after the first step
    _assert_same_state(cpu_model, model)


def _state_pointers(opt) -> set:
    params = [p for g in opt.param_groups for p in g["params"]]
    moments = [opt.state[p][k] for p in params for k in ("exp_avg", "exp_avg_sq")]
    return {_pointer(t) for t in params + moments}


@pytest.fixture
def fresh_dynamo():
    # (an optimizer's step compiled by earlier tests: Dynamo's cache of that code would otherwise
    # hit its recompile limit and run this step eagerly)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_a_compiled_optimizer_step_donates_parameters_and_moments(fresh_metrics, fresh_dynamo):
    cpu_model, model = _models()
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    cpu_opt, opt = (torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (cpu_model, model))
    step = torch.compile(opt.step, backend="lazyxla")
    per_call = []
    for i in range(4):
        torch.nn.functional.cross_entropy(cpu_model(x), y).backward()
        cpu_opt.step()
        cpu_opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x.to(D)), y.to(D)).backward()
        lazyxla.sync()
        before, pointers = _counts(), _state_pointers(opt) if i else None
        step()
        opt.zero_grad()
        per_call.append(tuple(b - a for a, b in zip(before, _counts())))
        if i:  # written in place (an output may take the memory of another input of its shape)
            assert _state_pointers(opt) == pointers
    # 6 parameters and their 12 moments each call; the first call's moments are one cached
    # zeros constant, fed as copies
    assert per_call == [(18, 12), (18, 0), (18, 0), (18, 0)]
    _assert_same_state(cpu_model, model)
    donated, copies = _counts()  # (the syncs' BatchNorm statistics too)
    assert copies == 12 and f"inputs donated to their programs (in-place updates written into the " \
        f"memory they replace): {donated}, 12 of them fed as copies" in lazyxla.report()


def test_a_compiled_update_of_data_pending_work_reads_keeps_that_value(fresh_metrics, fresh_dynamo):
    w = _uploaded([1.0, 2.0])

    @torch.compile(backend="lazyxla")
    def scale(t):
        t.mul_(3)
    with torch.no_grad():
        scale(w)
        scale(w)  # (the program runs by hash from here)
        lazyxla.sync()
        before = (metrics.counter_value("DonationCopy") or 0)
        snapshot = w * 1  # pending: reads w's current data
        scale(w)
        assert (metrics.counter_value("DonationCopy") or 0) == before + 1
        assert snapshot.cpu().tolist() == [9.0, 18.0] and w.cpu().tolist() == [27.0, 54.0]
        pointer = _pointer(w)
        scale(w)  # nothing else holds w's data now: written in place
        assert (metrics.counter_value("DonationCopy") or 0) == before + 1
        assert _pointer(w) == pointer and w.cpu().tolist() == [81.0, 162.0]


def test_a_compiled_update_of_an_argument_passed_twice(fresh_metrics, fresh_dynamo):
    @torch.compile(backend="lazyxla")
    def f(a, b):
        a.add_(1)
        return b * 2
    with torch.no_grad():
        for _ in range(3):
            x = _uploaded([1.0, 2.0])
            out = f(x, x)
            assert out.cpu().tolist() == [4.0, 6.0] and x.cpu().tolist() == [2.0, 3.0]


def test_strict_index_checks_keep_the_inputs_of_a_failing_run(fresh_metrics):
    before = lazyxla.index_checks()
    lazyxla.set_index_checks("strict")
    try:
        x = _uploaded([1.0, 2.0])
        x.add_(torch.tensor([1.0, 1.0]).to(D)[torch.tensor([0, 5]).to(D)])  # index 5 out of range
        with pytest.raises(IndexError):
            lazyxla.sync()
        assert x.cpu().tolist() == [1.0, 2.0]  # the run's results were not kept, its input was
        assert _counts() == (0, 0)
    finally:
        lazyxla.set_index_checks(before)


def test_on_the_cpu_backend_syncs_donate_only_when_asked(fresh_metrics, monkeypatch):
    monkeypatch.delenv("LAZYXLA_DONATE_SYNCS")
    assert jax.default_backend() == "cpu"
    x, y = _uploaded([1.0, 2.0], [1.0, 1.0])
    x.add_(y)
    lazyxla.sync()
    assert _counts() == (0, 0) and x.cpu().tolist() == [2.0, 3.0]
    monkeypatch.setenv("LAZYXLA_DONATE_SYNCS", "1")
    x.add_(y)
    lazyxla.sync()
    assert _counts() == (1, 0) and x.cpu().tolist() == [3.0, 4.0]
