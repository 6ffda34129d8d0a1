"""The lazyxla demo: train a small GPT on a character-level corpus generated here, with
torch.compile(model, backend="lazyxla") on the lazyxla device and AdamW, then sample from it and
compare its training throughput with eager PyTorch on the CPU.

    make demo                      # or: python -m lazyxla.cli demo [--steps N] [--quick]

Writes loss_curve.png and report.json (the lazyxla run report) to demo_output/ (env
LAZYXLA_DEMO_OUT or main(out_dir=...) to change it).
"""
from __future__ import annotations

import copy
import os
import random
import time

import torch

import lazyxla
from lazyxla import metrics
from lazyxla.examples.gpt import GPT, GPTConfig

DEFAULT_STEPS = 300
QUICK_STEPS = 20
SEQ = 64
BATCH = 16
LR = 3e-3
BENCH_STEPS = 30


# --- the corpus: sentences of a small English-like grammar, deterministic --------------------------

_GRAMMAR = {
    "det": ["the", "a", "every", "one"],
    "adj": ["small", "red", "quiet", "old", "happy", "green"],
    "noun": ["cat", "dog", "bird", "fox", "robot", "child"],
    "verb": ["sees", "likes", "chases", "follows", "finds"],
    "adv": ["slowly", "today", "again", "at night"],
}


def _sentence(rng: random.Random) -> str:
    g = _GRAMMAR

    def np_():
        words = [rng.choice(g["det"])]
        if rng.random() < 0.5:
            words.append(rng.choice(g["adj"]))
        words.append(rng.choice(g["noun"]))
        return words

    words = np_() + [rng.choice(g["verb"])] + np_()
    if rng.random() < 0.3:
        words.append(rng.choice(g["adv"]))
    return " ".join(words) + ". "


def make_corpus(n_chars: int = 60_000, seed: int = 0) -> str:
    rng = random.Random(seed)
    parts, n = [], 0
    while n < n_chars:
        s = _sentence(rng)
        parts.append(s)
        n += len(s)
    return "".join(parts)


class CharData:
    def __init__(self, text: str, seq: int, batch: int, seed: int = 0):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)
        self.seq, self.batch = seq, batch
        self.gen = torch.Generator().manual_seed(seed)

    def encode(self, s: str) -> torch.Tensor:
        return torch.tensor([self.stoi[c] for c in s], dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def batch_at(self, starts: torch.Tensor):
        idx = starts[:, None] + torch.arange(self.seq + 1)
        chunk = self.data[idx]
        return chunk[:, :-1], chunk[:, 1:]

    def next_batch(self):
        starts = torch.randint(0, len(self.data) - self.seq - 1, (self.batch,), generator=self.gen)
        return self.batch_at(starts)


# --- training ---------------------------------------------------------------------------------------

def _train_step(step_model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    logits = step_model(x)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    return loss


def _sample(model, data: CharData, prompt: str, n_new: int, temperature: float, seed: int) -> str:
    """Sample n_new characters on lazyxla (lazy mode, grad off). The context is a fixed window of
    block_size tokens shifted by one each step, so every step is the same graph: one XLA compile.
    Temperature sampling uses the Gumbel-max trick: argmax(logits / T + Gumbel noise)."""
    dev = lazyxla.device()
    T = model.cfg.block_size
    ctx = data.encode(prompt[-T:])[None].to(dev)
    gen_cpu = torch.Generator().manual_seed(seed)
    out = []
    with torch.no_grad():
        for _ in range(n_new):
            logits = model(ctx)[:, -1, :]
            if temperature > 0:
                u = torch.rand(logits.shape, generator=gen_cpu).to(dev)
                logits = logits / temperature - torch.log(-torch.log(u.clamp_min(1e-9)))
            nxt = logits.argmax(dim=-1, keepdim=True)
            ctx = torch.cat([ctx[:, 1:], nxt], dim=1)
            lazyxla.sync()
            out.append(nxt)
    return data.decode(torch.cat([t.cpu() for t in out], dim=1)[0])


def _throughput(step_fn, x, y, steps: int, warmup: int, on_device: bool) -> float:
    for _ in range(warmup):
        step_fn(x, y)
        if on_device:
            lazyxla.sync()
    if on_device:
        lazyxla.wait()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step_fn(x, y)
        if on_device:
            lazyxla.sync()
    loss.item()  # waits for the last step
    dt = time.perf_counter() - t0
    return steps * x.numel() / dt


def _plot(losses, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(range(1, len(losses) + 1), losses, lw=1, label="train loss")
    if len(losses) >= 10:
        k = max(len(losses) // 30, 2)
        smooth = [sum(losses[max(0, i - k):i + 1]) / len(losses[max(0, i - k):i + 1]) for i in range(len(losses))]
        ax.plot(range(1, len(losses) + 1), smooth, lw=2, label="moving average")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/char)")
    ax.set_title("small GPT, torch.compile(backend='lazyxla')")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(steps: int | None = None, quick: bool = False, out_dir: str | None = None,
        log_every: int | None = None, verbose: bool = True) -> dict:
    """Train, sample, benchmark; return a dict of results (losses, tokens/s, counts, paths)."""
    def say(*a):
        if verbose:
            print(*a, flush=True)

    t_start = time.perf_counter()
    steps = steps if steps is not None else (QUICK_STEPS if quick else DEFAULT_STEPS)
    if steps < 1:
        raise ValueError(f"the demo trains at least one step, got steps={steps}")
    log_every = log_every or (5 if quick else 25)
    out_dir = out_dir or os.environ.get("LAZYXLA_DEMO_OUT") or os.path.join(os.getcwd(), "demo_output")
    os.makedirs(out_dir, exist_ok=True)
    bench_steps = 5 if quick else BENCH_STEPS

    metrics.clear_all()
    torch.manual_seed(0)
    text = make_corpus()
    data = CharData(text, SEQ, BATCH, seed=0)
    cfg = GPTConfig(vocab_size=len(data.chars), block_size=SEQ, n_layer=2, n_head=4, d_model=96)
    dev = lazyxla.device()
    model = GPT(cfg)
    cpu_model = copy.deepcopy(model)  # for the eager-CPU comparison, from the same initial weights
    model = model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    say(f"lazyxla demo: GPT with {cfg.n_layer} layers, d_model {cfg.d_model}, {cfg.n_head} heads, "
        f"{n_params / 1e3:.0f}k parameters; vocab {cfg.vocab_size} chars, corpus {len(text)} chars")
    say(f"training {steps} steps, batch {BATCH} x {SEQ} tokens, AdamW lr {LR}, "
        f"torch.compile(backend='lazyxla') on {dev}")

    compiled = torch.compile(model, backend="lazyxla")
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    step = lambda x, y: _train_step(compiled, opt, x, y)  # noqa: E731

    losses, pending = [], []
    t_win, tok_win = time.perf_counter(), 0
    for i in range(1, steps + 1):
        x, y = data.next_batch()
        loss = step(x.to(dev), y.to(dev))
        lazyxla.sync()
        pending.append(loss.detach())
        tok_win += x.numel()
        if i % log_every == 0 or i == steps:
            losses.extend(t.item() for t in pending)
            pending.clear()
            dt = time.perf_counter() - t_win
            say(f"  step {i:4d}  loss {losses[-1]:.4f}  {tok_win / dt:9.0f} tokens/s"
                f"  ({time.perf_counter() - t_start:5.1f}s elapsed, "
                f"{metrics.counter_value('UncachedCompile') or 0} XLA compiles so far)")
            t_win, tok_win = time.perf_counter(), 0
    train_s = time.perf_counter() - t_start

    # sample from the trained model (lazy mode, fixed-shape window)
    prompt = text[:text.find(". ", 200) + 2]
    n_new = 40 if quick else 120
    t0 = time.perf_counter()
    sample = _sample(model, data, prompt, n_new, temperature=0.8, seed=0)
    say(f"\nsample ({n_new} chars at temperature 0.8 in {time.perf_counter() - t0:.1f}s), "
        "continuing a prompt from the corpus:")
    say("  ..." + prompt[-40:] + "|" + sample)

    # throughput: the same model and batch, lazyxla compiled vs eager PyTorch on the CPU
    bx, by = data.next_batch()
    lazy_tps = _throughput(step, bx.to(dev), by.to(dev), bench_steps, warmup=2, on_device=True)
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=LR, weight_decay=0.01)
    # Eager at its best thread count: on a busy machine PyTorch's OpenMP threads can lose ~30x to
    # contention, which would flatter lazyxla unfairly.
    threads = torch.get_num_threads()
    cpu_tps = 0.0
    for n in sorted({1, threads}):
        torch.set_num_threads(n)
        cpu_tps = max(cpu_tps, _throughput(lambda x, y: _train_step(cpu_model, cpu_opt, x, y), bx, by,
                                           bench_steps, warmup=2, on_device=False))
    torch.set_num_threads(threads)

    compiles = metrics.counter_value("UncachedCompile") or 0
    hits = metrics.counter_value("CachedCompile") or 0
    fallbacks = metrics.executed_fallback_ops()
    lazyxla.wait()
    say(f"\nthroughput over {bench_steps} training steps on one batch of {BATCH}x{SEQ} tokens "
        f"({torch.get_num_threads()} CPU threads):")
    say(f"  {'lazyxla, torch.compile':<26}{lazy_tps:10.0f} tokens/s")
    say(f"  {'eager PyTorch, CPU':<26}{cpu_tps:10.0f} tokens/s   (best of 1 and {threads} threads; "
        f"lazyxla is {lazy_tps / cpu_tps:.2f}x)")
    say(f"  XLA compiles: {compiles}   compilation-cache hits: {hits}   "
        f"CPU fallbacks: {len(fallbacks)}{' ' + str(fallbacks) if fallbacks else ''}")
    say(f"  loss: {losses[0]:.3f} at step 1 -> {losses[-1]:.3f} at step {steps}")

    png = os.path.join(out_dir, "loss_curve.png")
    rep = os.path.join(out_dir, "report.json")
    _plot(losses, png)
    lazyxla.save_report(rep)
    say("\n" + lazyxla.report())
    total_s = time.perf_counter() - t_start
    say(f"\nwrote {png} and {rep}   (demo took {total_s:.1f}s, training {train_s:.1f}s)")
    return dict(losses=losses, sample=sample, lazy_tokens_per_s=lazy_tps, cpu_tokens_per_s=cpu_tps,
                compiles=compiles, cache_hits=hits, fallbacks=fallbacks, png=png, report=rep,
                seconds=total_s)


def main(steps: int | None = None, quick: bool = False, out_dir: str | None = None) -> int:
    res = run(steps=steps, quick=quick, out_dir=out_dir)
    ok = res["losses"][-1] < res["losses"][0] and not res["fallbacks"]
    if not ok:
        print("demo FAILED: " + ("loss did not fall" if res["losses"][-1] >= res["losses"][0]
                                 else f"ops fell back to the CPU: {res['fallbacks']}"))
    return 0 if ok else 1
