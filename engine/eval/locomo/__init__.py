"""LoCoMo evidence-recall benchmark: `memlab bench locomo --data PATH`.

`data` reads a LoCoMo file and holds the metric; `methods` indexes a conversation per method
(raw-turn baselines, and the engine's own path: `MemoryEngine.ingest` then
`MemoryEngine.retrieve`); `report` runs every method, reports and is the command.
"""

from engine.eval.locomo.data import (
    CATEGORY_NAMES,
    Conversation,
    EvidenceStats,
    LocomoData,
    Observation,
    Question,
    Turn,
    evidence_recall,
    load_locomo,
    parse_session_datetime,
    split_evidence,
)
from engine.eval.locomo.methods import (
    DEFAULT_METHODS,
    METHODS,
    NOW_RULE,
    IngestStats,
    index_conversation,
    tripath_config,
)
from engine.eval.locomo.report import (
    DEFAULT_KS,
    BenchResult,
    MethodResult,
    format_report,
    locomo_main,
    run_benchmark,
)

__all__ = [
    "METHODS",
    "DEFAULT_METHODS",
    "DEFAULT_KS",
    "CATEGORY_NAMES",
    "NOW_RULE",
    "Turn",
    "Observation",
    "Question",
    "Conversation",
    "EvidenceStats",
    "LocomoData",
    "IngestStats",
    "MethodResult",
    "BenchResult",
    "parse_session_datetime",
    "split_evidence",
    "load_locomo",
    "evidence_recall",
    "tripath_config",
    "index_conversation",
    "run_benchmark",
    "format_report",
    "locomo_main",
]
