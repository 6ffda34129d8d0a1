"""Greedy generation with Hugging Face `generate` in lazy mode: lazyxla's graphs that vary in a
small part run that part apart (the default, ir/stages.py) against one program per graph
(LAZYXLA_SPLIT_VARYING_SHAPES=0, what lazyxla did before, and torch_xla does), and eager on the
CPU. Each side runs in its own process (a fresh compilation cache); the sides alternate, round
after round.

    python -m benchmarks.generate_tokens            # 2 rounds
    python -m benchmarks.generate_tokens --rounds 3 --tokens 48

The job: a Llama decoder (4 layers, d_model 256, 8 heads, 4 KV heads, vocab 2048, random
weights), a static KV cache, an end-of-sequence id (so `generate` reads each step whether a
sequence ended: a program per step), greedy, from a prompt of 16 tokens; then the same prompt
again (every program cached); then a prompt of 21 tokens (a new cache size). Per side: each
call's time, XLA compiles, how many of them were programs of 100 ops or more, and the tokens
(all sides must agree). Writes benchmarks/results/generate_tokens.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPTS = (16, 16, 21)
CALLS = ("first prompt", "same prompt again", "new prompt length")


def child(system: str, tokens: int) -> dict:
    import torch
    import transformers
    from benchmarks import worker
    worker.start_xla_runtime(system, 1)
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    vocab = 2048
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=4, vocab_size=vocab,
                                   max_position_embeddings=256, bos_token_id=1, eos_token_id=vocab - 1,
                                   pad_token_id=0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    lazyxla = dev = None
    if system != "eager":
        import lazyxla
        dev = lazyxla.device()
        model = model.to(dev)
    kw = dict(max_new_tokens=tokens, do_sample=False, cache_implementation="static")
    calls, outs = [], []
    for length in PROMPTS:
        ids = torch.randint(2, vocab - 1, (1, length), generator=torch.Generator().manual_seed(length))
        events = len(lazyxla.metrics.events("compile")) if lazyxla else 0
        t0 = time.perf_counter()
        out = model.generate(ids if dev is None else ids.to(dev), **kw).cpu()
        seconds = time.perf_counter() - t0
        sizes = [e["ops"] for e in lazyxla.metrics.events("compile")[events:]] if lazyxla else []
        calls.append({"s": seconds, "compiles": len(sizes), "big": sum(n >= 100 for n in sizes)})
        outs.append(out[0].tolist())
    return {"calls": calls, "tokens": outs}


def _run(system: str, split: str | None, tokens: int) -> dict:
    from benchmarks.suite import _env, run_child
    env = {k: v for k, v in _env(1).items() if k != "LAZYXLA_SPLIT_VARYING_SHAPES"}
    if split is not None:
        env["LAZYXLA_SPLIT_VARYING_SHAPES"] = split
    return run_child("benchmarks.generate_tokens", ["--child", system, "--tokens", str(tokens)],
                     env, system)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "generate_tokens.md"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.tokens)), flush=True)
        return 0
    if args.rounds < 1 or args.tokens < 1:
        ap.error("--rounds and --tokens must be at least 1")
    from benchmarks.worker import write_report
    sides = [("eager", None), ("lazy", "0"), ("lazy", None)]
    runs = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side in sides:
            runs[side].append(_run(*side, args.tokens))
    same = len({json.dumps(r["tokens"]) for rs in runs.values() for r in rs}) == 1
    lines = ["# Hugging Face generate in lazy mode: the shape-varying part apart, or one program a step",
             "", f"`python -m benchmarks.generate_tokens --rounds {args.rounds} --tokens {args.tokens}` "
             f"on {time.strftime('%Y-%m-%d %H:%M')}. A Llama decoder (4 layers, d_model 256, 8 heads, "
             f"4 KV heads, vocab 2048, random weights), static KV cache, an end-of-sequence id, greedy, "
             f"{args.tokens} new tokens; prompts of {PROMPTS[0]} tokens, the same again, then "
             f"{PROMPTS[2]}. One core for XLA, as in the suite; each side in its own process, "
             f"alternating; medians over {args.rounds} rounds. One program a step: "
             "LAZYXLA_SPLIT_VARYING_SHAPES=0 (as before). Compiles: XLA compiles (of them, programs "
             f"of 100 ops or more). Tokens equal on every side and round: {'yes' if same else 'NO'}.",
             "", "| system | graphs | " + " | ".join(f"{c} s (compiles, >= 100 ops)" for c in CALLS) + " |",
             "|---|---|" + "---:|" * len(CALLS)]
    for (system, split), rs in runs.items():
        cells = []
        for i in range(len(CALLS)):
            s = statistics.median(r["calls"][i]["s"] for r in rs)
            if system == "eager":
                cells.append(f"{s:.2f}")
            else:
                c = statistics.median(r["calls"][i]["compiles"] for r in rs)
                b = statistics.median(r["calls"][i]["big"] for r in rs)
                cells.append(f"{s:.2f} ({c:.0f}, {b:.0f})")
        label = "—" if system == "eager" else ("one program a step" if split == "0" else
                                               "varying part apart")
        lines.append(f"| {system} | {label} | " + " | ".join(cells) + " |")
    write_report(lines, args.out)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
