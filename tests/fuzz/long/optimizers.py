"""A sweep, not random: every torch.optim optimizer (with its options), alone or under a
learning-rate scheduler, trained 6 steps in lazy mode and with `torch.compile(opt.step)`,
against eager. The seed numbers the case (optimizer x scheduler x lazy/compiled; `--list`
prints them). Compared: parameters after the last step, that nothing ran on the CPU, and, when
compiled, that no step after the third re-extracts its graph."""
import itertools
import sys

import torch
import torch._dynamo

import lazyxla
from lazyxla import metrics
from _driver import main

D = lazyxla.device()
O, S = torch.optim, torch.optim.lr_scheduler
torch._dynamo.config.cache_size_limit = 1000
OPTIMIZERS = {
    "sgd_nesterov": lambda p: O.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd_dampening": lambda p: O.SGD(p, lr=0.1, momentum=0.9, dampening=0.1),
    "adam_amsgrad": lambda p: O.Adam(p, lr=0.01, amsgrad=True, weight_decay=0.1),
    "adam_for_loop": lambda p: O.Adam(p, lr=0.01, foreach=False),
    "adamw_foreach": lambda p: O.AdamW(p, lr=0.01, foreach=True),
    "adamw_fused": lambda p: O.AdamW(p, lr=0.01, fused=True),
    "rmsprop_centered": lambda p: O.RMSprop(p, lr=0.01, centered=True, momentum=0.9, weight_decay=0.1),
    "rmsprop_foreach": lambda p: O.RMSprop(p, lr=0.01, foreach=True),
    "adagrad": lambda p: O.Adagrad(p, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
    "adadelta": lambda p: O.Adadelta(p, lr=1.0, weight_decay=0.1, maximize=True),
    "adamax": lambda p: O.Adamax(p, lr=0.01, weight_decay=0.1),
    "nadam": lambda p: O.NAdam(p, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
    "radam": lambda p: O.RAdam(p, lr=0.01),
    "asgd": lambda p: O.ASGD(p, lr=0.01, t0=2),
    "rprop": lambda p: O.Rprop(p, lr=0.01),
    "adafactor": lambda p: O.Adafactor(p, lr=0.01),
    "sgd_fused": lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, fused=True),
    "adagrad_fused": lambda p: O.Adagrad(p, lr=0.1, lr_decay=0.01, fused=True),
}
SCHEDULERS = {
    "constant": None,
    "cosine": lambda o: S.CosineAnnealingLR(o, 10),
    "onecycle": lambda o: S.OneCycleLR(o, 0.05, total_steps=20),
}
CASES = list(itertools.product(OPTIMIZERS, SCHEDULERS, ("lazy", "compiled")))


def _train(device, make_opt, make_sched, compiled):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(device)
    x, y = torch.randn(6, 4).to(device), torch.randn(6, 2).to(device)
    opt = make_opt(model.parameters())
    try:
        sched = make_sched(opt) if make_sched else None
    except ValueError:  # OneCycleLR of an optimizer without momentum: no case
        return None
    step = torch.compile(opt.step, backend="lazyxla") if compiled else opt.step
    extracts = []
    for _ in range(6):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()  # (a sum with lr 0.1 diverges: float32 rounding then grows)
        step()
        if sched is not None:
            sched.step()
        extracts.append(metrics.counter_value("DynamoExtractCompiledGraph") or 0)
    return [p.detach().cpu() for p in model.parameters()], extracts


def run(seed):
    if seed >= len(CASES):
        return None
    opt_name, sched_name, mode = CASES[seed]
    make_opt, make_sched = OPTIMIZERS[opt_name], SCHEDULERS[sched_name]
    want = _train("cpu", make_opt, make_sched, False)
    if want is None:
        return None
    torch._dynamo.reset()
    fell_back = set(metrics.executed_fallback_ops())
    got = _train(D, make_opt, make_sched, mode == "compiled")
    fell_back = set(metrics.executed_fallback_ops()) - fell_back
    err = max((g - w).abs().max().item() for g, w in zip(got[0], want[0]))
    if err > 1e-4 or fell_back or got[1][3:] != [got[1][3]] * 3:
        return (CASES[seed], f"max error {err:.2e}", f"fell back: {sorted(fell_back)}",
                f"extractions after each step: {got[1]}")
    return None


if __name__ == "__main__":
    if "--list" in sys.argv:
        for i, case in enumerate(CASES):
            print(i, *case)
        raise SystemExit(0)
    raise SystemExit(main(run))
