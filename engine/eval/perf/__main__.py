"""`python -m engine.eval.perf` = `memlab bench perf`."""

from engine.eval.perf.report import perf_main

raise SystemExit(perf_main())
