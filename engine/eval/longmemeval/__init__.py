"""LongMemEval turn-level evidence recall: `memlab bench longmemeval --data FILE`.

`data` reads the published JSON (one object per question with its haystack of dated sessions);
`report` ingests each question's haystack through the engine's real path and reports recall@k
by question type.
"""

from engine.eval.longmemeval.data import LmeQuestion, LmeSession, LmeTurn, load_longmemeval, parse_lme_date
from engine.eval.longmemeval.report import longmemeval_main, run_longmemeval

__all__ = ["LmeTurn", "LmeSession", "LmeQuestion", "load_longmemeval", "parse_lme_date", "run_longmemeval",
           "longmemeval_main"]
