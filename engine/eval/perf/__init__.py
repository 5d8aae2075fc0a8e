"""`memlab bench perf`: the engine's own retrieval and turn times (see engine.eval.perf.report)."""

from engine.eval.perf.corpus import BENCH_NOW, DIM, STORE_FACTORIES, synthetic_corpus
from engine.eval.perf.counting import READ_METHODS, CountingStore
from engine.eval.perf.report import bench_config, format_table, perf_main, run_perf
from engine.eval.perf.retrieval import measure_size, scripted_turn_fn
from engine.eval.perf.session import DEFAULT_MARKS, run_session, summarize_session

__all__ = [
    "BENCH_NOW",
    "DIM",
    "DEFAULT_MARKS",
    "READ_METHODS",
    "STORE_FACTORIES",
    "CountingStore",
    "bench_config",
    "format_table",
    "measure_size",
    "perf_main",
    "run_perf",
    "run_session",
    "scripted_turn_fn",
    "summarize_session",
    "synthetic_corpus",
]
