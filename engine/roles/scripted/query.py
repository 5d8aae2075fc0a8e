"""`ScriptedQueryParser`: offline, the query parser is the production rule-based one.

Parsing a question needs no model (see engine.roles.rules.query), so the offline stand-in and
the real-model default are the same rules; only `FallbackQueryParser` adds a model behind them.
"""

from __future__ import annotations

from engine.roles.rules.query import RuleQueryParser

__all__ = ["ScriptedQueryParser"]


class ScriptedQueryParser(RuleQueryParser):
    """The rule-based query parser (engine.roles.rules.query.RuleQueryParser)."""
