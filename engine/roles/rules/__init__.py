"""Rule-based role implementations that are production code, not stand-ins.

The query parser is rule-based by default with every model set (real models too): parsing a
question into keywords, types, a time constraint and the dimension it asks for is what rules and
`dateparser` do well, cheaply and deterministically; the model is called only for what the rules
cannot resolve (`FallbackQueryParser`). The offline stand-ins in `engine.roles.scripted` build on
these rules, never the other way round.
"""

from engine.roles.rules.query import (
    FallbackQueryParser,
    RuleQueryParser,
    asked_attributes,
    asked_tags,
)

__all__ = ["RuleQueryParser", "FallbackQueryParser", "asked_attributes", "asked_tags"]
