"""`python -m engine.eval.perf` = `memlab bench perf`."""

from engine.eval.perf.report import perf_main

if __name__ == "__main__":
    raise SystemExit(perf_main())
