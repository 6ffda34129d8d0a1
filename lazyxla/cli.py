"""Command line: lazyxla demo | report | ops | bench."""
from __future__ import annotations

import argparse
import re
import sys


def _cmd_demo(args) -> int:
    from lazyxla.examples.demo import main as demo_main
    return demo_main(steps=args.steps, quick=args.quick)


def _cmd_report(args) -> int:
    from lazyxla.report import load_report, render_text
    import json
    try:
        rep = load_report(args.file)
    except (OSError, ValueError) as e:  # a missing, unreadable or foreign file: said in one line
        print(f"lazyxla report: {e}", file=sys.stderr)
        return 1
    # (the file's strings, a retrace's cause, reach the terminal: its control characters, such
    # as an escape sequence that clears the screen, are shown escaped; JSON escapes its own)
    print(json.dumps(rep, indent=2) if args.json else _CONTROL.sub(
        lambda m: m[0].encode("unicode_escape").decode(), render_text(rep)))
    return 0


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _cmd_ops(args) -> int:
    from lazyxla import opinfo
    return opinfo.run_sweep_cli(full=args.full or opinfo.full_mode_from_env(), pattern=args.only,
                                update_known=args.update_known_failures,
                                docs=args.output or (None if args.only else opinfo.COVERAGE_DOC),
                                quiet=args.quiet, json_path=args.json)


def _cmd_bench(argv) -> int:
    try:
        from benchmarks import suite
    except ImportError:  # installed lazyxla run from elsewhere: the suite lives in the checkout
        from pathlib import Path
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from benchmarks import suite
    return suite.cli(argv)


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lazyxla", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="train a small model with torch.compile(backend='lazyxla')")
    d.add_argument("--steps", type=_positive_int, default=None)
    d.add_argument("--quick", action="store_true", help="a few steps only (smoke test)")
    d.set_defaults(fn=_cmd_demo)
    r = sub.add_parser("report", help="print a run report saved by lazyxla.save_report() or by "
                                      "LAZYXLA_REPORT_PATH at exit")
    r.add_argument("file", nargs="?", default="lazyxla-report.json")
    r.add_argument("--json", action="store_true")
    r.set_defaults(fn=_cmd_report)
    o = sub.add_parser("ops", help="run PyTorch's OpInfo database on the device and regenerate "
                                   "docs/op-coverage.md (lazyxla/opinfo/)")
    o.add_argument("--full", action="store_true", help="all samples and dtypes (default: fast mode)")
    o.add_argument("--only", metavar="REGEX", help="only OpInfos whose name[.variant] matches")
    o.add_argument("--output", default=None, help="coverage report path (default: the checkout's "
                                                   "docs/op-coverage.md)")
    o.add_argument("--update-known-failures", action="store_true",
                   help="also rewrite tests/opinfo/known_failures.txt")
    o.add_argument("--json", metavar="PATH", help="dump every result as JSON")
    o.add_argument("--quiet", action="store_true")
    o.set_defaults(fn=_cmd_ops)
    b = sub.add_parser("bench", help="benchmarks: eager, inductor, lazyxla lazy/compiled and the bare "
                                     "XLA executable side by side (benchmarks/suite.py)")
    b.set_defaults(fn=_cmd_bench)  # main() hands its arguments to benchmarks/suite.py
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # lazyxla bench [--quick] [--peer-python PATH] ... (--help lists them)
        return _cmd_bench(argv[1:]) or 0
    args = build_parser().parse_args(argv)
    return args.fn(args) or 0


if __name__ == "__main__":
    sys.exit(main())
