"""Graph keys: canonical, strong, and sensitive to everything that changes the program."""
import torch

import lazyxla
from lazyxla.ir.buffer import node_of


def _hash(fn):
    d = lazyxla.device()
    a = torch.ones(2, 3, device=d)
    b = torch.full((2, 3), 2.0, device=d)
    lazyxla.sync()
    out = fn(a, b)
    h = lazyxla.graph_hash([out])
    lazyxla.clear_pending_ir()
    return h


def test_same_structure_same_hash():
    assert _hash(lambda a, b: a * b + a) == _hash(lambda a, b: a * b + a)


def test_operand_order_changes_the_hash():
    assert _hash(lambda a, b: (a - b) * a) != _hash(lambda a, b: (b - a) * a)
    assert _hash(lambda a, b: (a - b) * b) != _hash(lambda a, b: (a - b) * a)


def test_equal_hash_means_same_program_fed_in_graph_order():
    # Parameters are numbered in first-visit order, so a - b and b - a are the same program
    # "p0 - p1"; graph_inputs lists each graph's own tensors in that order.
    d = lazyxla.device()
    a, b = torch.full((2,), 1.0, device=d), torch.full((2,), 10.0, device=d)
    lazyxla.sync()
    results = []
    for out in (a - b, b - a):
        h, ins = lazyxla.graph_hash([out]), lazyxla.graph_inputs([out])
        lazyxla.clear_pending_ir()
        results.append((h, lazyxla.run_cached_graph(h, ins)[0].cpu().tolist()))
    assert results[0][0] == results[1][0]
    assert results[0][1] == [-9.0, -9.0] and results[1][1] == [9.0, 9.0]


def test_ops_and_attributes_change_the_hash():
    assert _hash(lambda a, b: a + b) != _hash(lambda a, b: a * b)
    assert _hash(lambda a, b: a.sum(0)) != _hash(lambda a, b: a.sum(1))


def test_shapes_and_dtypes_change_the_hash():
    d = lazyxla.device()
    hs = set()
    for shape, dtype in [((2, 3), torch.float32), ((3, 2), torch.float32), ((2, 3), torch.float64)]:
        x = torch.ones(shape, dtype=dtype, device=d)
        lazyxla.sync()
        hs.add(lazyxla.graph_hash([x + 1]))
        lazyxla.clear_pending_ir()
    assert len(hs) == 3


def test_hash_is_128_bit_hex():
    h = _hash(lambda a, b: a + b)
    assert len(h) == 32 and int(h, 16) >= 0


def test_runtime_scalar_value_does_not_change_the_hash():
    assert _hash(lambda a, b: a * 0.1) == _hash(lambda a, b: a * 0.2)
    assert _hash(lambda a, b: a * 2) != _hash(lambda a, b: a * 2.0)  # int vs float promotes differently


def test_static_numbers_are_keyed_exactly():
    """Program lookup compares graph structures as tuples, where 0.0 == -0.0 and 1 == 1.0 == True:
    the key must still tell such attributes apart (and the results must show it)."""
    assert _hash(lambda a, b: torch.nan_to_num(a / 0 * 0, nan=0.0)) != \
        _hash(lambda a, b: torch.nan_to_num(a / 0 * 0, nan=-0.0))
    d = lazyxla.device()
    x = torch.tensor([float("nan"), 1.0])
    for _ in range(2):  # the second round replays both programs from the structure map
        pos, neg = torch.nan_to_num(x.to(d), nan=0.0), torch.nan_to_num(x.to(d), nan=-0.0)
        assert not torch.signbit(pos.cpu()[0]) and torch.signbit(neg.cpu()[0])
    s1, s3 = torch.sum(x.to(d), 0, keepdim=True), torch.sum(x.to(d), [0], keepdim=True)
    assert s1.shape == s3.shape == (1,)


def test_structurally_equal_graphs_share_one_spec(fresh_metrics):
    """A repeated step finds its GraphSpec by structure (no canonical text, no BLAKE2b)."""
    from lazyxla.ir import buffer as buf
    from lazyxla.ir.graph import cut
    d = lazyxla.device()
    w = torch.ones(4, 4, device=d)
    lazyxla.sync()
    specs = []
    for _ in range(3):
        w = (w * 0.5 + 1).relu()
        specs.append(cut([buf.state_of(w).root.node]).spec)
        lazyxla.sync()
    assert specs[0] is specs[1] is specs[2]
    assert lazyxla.metrics.counter_value("UncachedCompile") == 1  # the step (torch.ones: no compile)
    torch.testing.assert_close(w.cpu(), torch.full((4, 4), 1.875))


def test_input_free_graphs_of_different_shapes_hash_apart():
    # ones_like/full_like record no input (only the source's shape): the key must carry the
    # shape itself, or a (3, 2) result would run the (2, 3) program
    d = lazyxla.device()
    hs = set()
    for shape in [(2, 3), (3, 2), (6,)]:
        src = torch.zeros(shape, device=d)
        lazyxla.sync()
        out = torch.ones_like(src)
        hs.add(lazyxla.graph_hash([out]))
        assert out.cpu().shape == shape
    assert len(hs) == 3


def test_like_factories_do_not_execute_their_pending_source(fresh_metrics):
    d = lazyxla.device()
    a = torch.arange(6.0, device=d).reshape(2, 3)
    lazyxla.sync()
    pending = a * 2 + 1
    seed = torch.full_like(pending, 0.5)
    torch.testing.assert_close(seed.cpu(), torch.full((2, 3), 0.5))
    assert lazyxla.needs_materialization([pending]) == [True]
    torch.testing.assert_close(pending.cpu(), torch.arange(6.0).reshape(2, 3) * 2 + 1)


def test_constant_graph_result_is_reused_not_rerun(fresh_metrics):
    d = lazyxla.device()
    x = torch.ones(4, device=d)
    lazyxla.sync()
    for step in range(3):
        seed = torch.ones_like(x)  # as backward's grad seed, every step
        lazyxla.sync()
        torch.testing.assert_close(seed.cpu(), torch.ones(4))
        seed.add_(1)  # writes make a new value; the shared result stays intact
        torch.testing.assert_close(seed.cpu(), torch.full((4,), 2.0))
    assert lazyxla.metrics.counter_value("ConstantReuse") == 2


def test_a_read_constant_is_keyed_by_its_op_shape_and_dtype(fresh_metrics):
    """A pending op with no inputs, read alone (the grad seed a compiled backward is fed), is
    looked up by the op itself: constants differing in op, shape or dtype never share a result,
    and a random op (its seed is an input) is drawn afresh."""
    d = lazyxla.device()
    x = torch.zeros(3).to(d)

    def reads():
        assert torch.ones(3, device=d).tolist() == [1.0] * 3
        t = torch.ones(3, dtype=torch.int64, device=d)
        assert t.dtype == torch.int64 and t.tolist() == [1] * 3
        assert torch.ones(2, device=d).tolist() == [1.0] * 2
        assert torch.zeros(3, device=d).tolist() == [0.0] * 3
        assert torch.ones_like(x).tolist() == [1.0] * 3
        assert torch.arange(3, device=d).tolist() == [0, 1, 2]
        assert torch.full((3,), 2.0, device=d).tolist() == [2.0] * 3  # its fill value is an input
    reads()
    before = lazyxla.metrics.counter_value("ConstantReuse") or 0
    reads()
    assert lazyxla.metrics.counter_value("ConstantReuse") - before == 6
    draws = {tuple(torch.rand(4, device=d).tolist()) for _ in range(3)}
    assert len(draws) == 3


def test_a_program_of_fills_alone_is_made_on_the_host_without_a_compile(fresh_metrics):
    """An optimizer's first step makes its state with zeros_like: a program of zeros, ones and
    empty alone needs no XLA compile. Anything else in the program compiles as before."""
    d = lazyxla.device()
    w = torch.ones(3, 2, device=d)
    lazyxla.sync()
    made = [torch.zeros_like(w), torch.ones(4, dtype=torch.bfloat16, device=d),
            torch.empty(2, dtype=torch.int64, device=d), torch.ones(3, dtype=torch.bool, device=d),
            torch.zeros(2, 2, dtype=torch.complex64, device=d), torch.zeros(0, 3, device=d)]
    lazyxla.sync()
    assert (lazyxla.metrics.counter_value("UncachedCompile") or 0) == 0
    want = [torch.zeros(3, 2), torch.ones(4, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.int64),
            torch.ones(3, dtype=torch.bool), torch.zeros(2, 2, dtype=torch.complex64), torch.zeros(0, 3)]
    for got, w_ in zip(made, want):
        assert got.dtype == w_.dtype and torch.equal(got.cpu(), w_)
    made[0].add_(2)  # its own buffer: the write reaches no other fill
    assert torch.equal(made[0].cpu(), torch.full((3, 2), 2.0))
    assert torch.equal(torch.zeros_like(w).cpu(), torch.zeros(3, 2))
    # an AdamW's two moments of one weight: alike fills share one array, and stay apart on write
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    lazyxla.sync()
    assert node_of(m).data is node_of(v).data
    m.add_(1.5)
    assert torch.equal(v.cpu(), torch.zeros(3, 2)) and torch.equal(m.cpu(), torch.full((3, 2), 1.5))
    mixed = torch.zeros(3, device=d) + torch.arange(3.0, device=d)
    assert mixed.tolist() == [0.0, 1.0, 2.0] and lazyxla.metrics.counter_value("UncachedCompile") >= 1
