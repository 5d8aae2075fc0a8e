"""LongMemEval evidence-recall benchmark: `memlab bench longmemeval --data FILE`.

`data` reads a LongMemEval file (questions, each with its haystack of dated sessions); `methods`
indexes one question's haystack per method (the LoCoMo raw-turn baselines, and the engine's own
path: `MemoryEngine.ingest` per session, then `MemoryEngine.retrieve` at the question's date);
`report` runs every method, reports and is the command.
"""

from engine.eval.longmemeval.data import (
    QUESTION_TYPES,
    LmeData,
    LmeQuestion,
    LmeSession,
    LmeTurn,
    load_longmemeval,
    parse_lme_date,
)
from engine.eval.longmemeval.methods import (
    DEFAULT_METHODS,
    METHODS,
    as_conversation,
    index_question,
)
from engine.eval.longmemeval.report import (
    DEFAULT_KS,
    LmeMethodResult,
    LmeResult,
    format_lme_report,
    longmemeval_main,
    run_longmemeval,
)

__all__ = [
    "QUESTION_TYPES",
    "METHODS",
    "DEFAULT_METHODS",
    "DEFAULT_KS",
    "LmeTurn",
    "LmeSession",
    "LmeQuestion",
    "LmeData",
    "LmeMethodResult",
    "LmeResult",
    "parse_lme_date",
    "load_longmemeval",
    "as_conversation",
    "index_question",
    "run_longmemeval",
    "format_lme_report",
    "longmemeval_main",
]
