"""A graph whose shapes differ from the last one's only in a small part runs that part in programs
of its own (ir/stages.py): a history grown by `cat` every step, or a token list in a decode loop,
no longer makes the whole step a new program. Shapes here are unique to this file, so that no
other test's graphs have taught the cut these structures."""
import pytest
import torch
import torch.nn.functional as F

import lazyxla
from lazyxla import metrics


def _compiles():
    return metrics.counter_value("UncachedCompile") or 0


def _staged():
    return metrics.counter_value("StagedSync") or 0


def _train_with_history(dev, steps, width):
    """SGD steps of a small MLP; each step appends its loss to a history (a new length every
    step) and reads back the history's best loss plus a weight's sum."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(13, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(6, 13, generator=g).to(dev), torch.randn(6, 1, generator=g).to(dev)
    hist = torch.zeros(0, device=dev)
    seen, compiles = [], []
    for _ in range(steps):
        before = _compiles()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        hist = torch.cat([hist, loss.detach()[None]])
        best = hist.topk(1, largest=False)  # a node of two outputs, in the varying part
        seen.append(best.values * 2 + model[2].weight.sum())
        if dev != "cpu":
            lazyxla.sync()
            compiles.append([e["ops"] for e in metrics.events("compile")][len(metrics.events("compile"))
                                                                           - (_compiles() - before):])
    return hist.cpu(), torch.cat(seen).cpu(), [p.detach().cpu() for p in model.parameters()], compiles


def test_a_history_grown_every_step_compiles_only_its_growing_part():
    ref = _train_with_history("cpu", 9, 17)
    before = _staged()
    hist, seen, params, compiles = _train_with_history(lazyxla.device(), 9, 17)
    torch.testing.assert_close(hist, ref[0])
    torch.testing.assert_close(seen, ref[1])
    for p, q in zip(params, ref[2]):
        torch.testing.assert_close(p, q)
    assert _staged() - before >= 6
    assert "syncs run in stages (their shape-varying part apart)" in lazyxla.report()
    # the first steps compile the training step; from the fourth on, only programs of the
    # history's few ops (the cat, the topk) compile, each step one new length
    assert all(n <= 6 for step in compiles[3:] for n in step), compiles
    assert all(step for step in compiles[3:]), compiles  # (new lengths: they do compile)
    # the same loop again: every program is in the cache
    with lazyxla.assert_no_recompile():
        again = _train_with_history(lazyxla.device(), 9, 17)
    torch.testing.assert_close(again[0], ref[0])


def test_without_the_split_each_step_compiles_the_whole_step(monkeypatch):
    monkeypatch.setenv("LAZYXLA_SPLIT_VARYING_SHAPES", "0")
    ref = _train_with_history("cpu", 5, 19)
    before = _staged()
    hist, seen, _, compiles = _train_with_history(lazyxla.device(), 5, 19)
    torch.testing.assert_close(hist, ref[0])
    torch.testing.assert_close(seen, ref[1])
    assert _staged() == before
    assert all(max(step) > 20 for step in compiles[1:]), compiles


def test_a_graph_whose_shapes_mostly_vary_stays_one_program():
    """New lengths through a whole block (a variable-length batch), after a stable part (the
    weight's 20 ops): most ops vary, and running them apart would save little."""
    torch.manual_seed(5)
    uc, vc = torch.randn(7, 7), torch.randn(7, 3)
    d = lazyxla.device()
    u, v = uc.to(d), vc.to(d)
    before = _staged()
    for n in (4, 5, 6, 7):
        w, wc = u, uc
        for _ in range(10):
            w, wc = (w * 0.9).cos(), (wc * 0.9).cos()
        xc = torch.randn(n, 7)
        h = xc.to(d)
        hc = xc
        for _ in range(8):
            h, hc = torch.tanh(h @ w) + h, torch.tanh(hc @ wc) + hc
        got = (h @ v).softmax(-1).sum(0)
        lazyxla.sync()
        torch.testing.assert_close(got.cpu(), (hc @ vc).softmax(-1).sum(0))
    assert _staged() == before


def test_a_decode_loop_reading_its_last_token_compiles_its_model_a_few_times():
    """Greedy decoding with a static cache written at each position, the tokens kept in a list
    grown by cat, the last token read back each step (an end-of-sequence test): the model's
    program no longer depends on the list's length."""
    torch.manual_seed(6)
    vocab, dim, slots = 23, 12, 24

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, dim)
            self.q, self.k = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(),
                                           torch.nn.Linear(2 * dim, dim))
            self.out = torch.nn.Linear(dim, vocab)

        def forward(self, tok, pos, cache):
            h = self.emb(tok)                              # (1, dim)
            cache.index_copy_(0, pos, self.k(h))           # a static cache, written in place
            mask = torch.arange(slots, device=h.device) <= pos
            att = (self.q(h) @ cache.t()).masked_fill(~mask, float("-inf")).softmax(-1)
            h = h + att @ cache
            return self.out(h + self.mlp(h))

    def decode(dev, model, n):
        tokens = torch.tensor([[3, 7, 1]], device=dev)
        cache = torch.zeros(slots, dim, device=dev)
        ended = []
        with torch.no_grad():
            for step in range(n):
                pos = torch.tensor([tokens.shape[1] - 1], device=dev)
                logits = model(tokens[:, -1], pos, cache)
                tokens = torch.cat([tokens, logits.argmax(-1)[:, None]], dim=1)
                ended.append(int(tokens[0, -1]) == vocab - 1)  # a read every step
        return tokens.cpu(), ended

    model = Decoder().eval()
    ref = decode("cpu", model, 14)
    dev_model = Decoder().eval()
    dev_model.load_state_dict(model.state_dict())
    dev_model.to(lazyxla.device())
    events = len(metrics.events("compile"))
    got = decode(lazyxla.device(), dev_model, 14)
    assert torch.equal(got[0], ref[0]) and got[1] == ref[1]
    sizes = [e["ops"] for e in metrics.events("compile")[events:]]
    big = [n for n in sizes if n >= 15]
    assert len(big) <= 5, sizes  # without the split: one per token (14)


def test_a_graph_runs_in_stages_each_of_varying_or_of_stable_ops():
    """Stable ops, then a cat of a growing history (varying), then a product of fixed shapes
    again: three stages, each handing its results to the next."""
    from lazyxla.ir import buffer as buf
    from lazyxla.ir.graph import cut
    d = lazyxla.device()
    wc = torch.randn(5, 5)
    w = wc.to(d)
    lazyxla.sync()
    plans = []
    for n in (2, 3, 4):
        hist = torch.ones(n, device=d)
        a = w
        for _ in range(20):
            a = (a * 0.5).sin()                   # stable: 40 ops
        grown = torch.cat([hist, a.sum()[None]])  # the cat and its sum vary
        b = grown.sum() * a                       # fixed shapes: stable
        nodes = [buf.state_of(t).node for t in (a, grown, b)]
        with buf.RUNTIME_LOCK:
            g = cut(nodes[1:], split=True)
            plans.append((g.stages, nodes))
        lazyxla.sync()
        ac = wc
        for _ in range(20):
            ac = (ac * 0.5).sin()
        torch.testing.assert_close(b.cpu(), torch.cat([torch.ones(n), ac.sum()[None]]).sum() * ac)
    assert plans[0][0] is None  # the first graph of its structure: one program
    for stages_, (a_node, grown_node, b_node) in plans[1:]:
        assert len(stages_) == 3
        # the stable chain, and its sum as the cat takes it
        assert a_node in stages_[0] and len(stages_[0]) == 2
        assert grown_node in stages_[1] and len(stages_[1]) == 2  # the cat, and the sum b reads
        assert stages_[2] == [b_node]
