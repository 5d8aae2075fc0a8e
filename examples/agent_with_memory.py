"""An agent with a tool and long-term memory: LangChain `create_agent` + memlab's MemoryMiddleware.

Two sessions (two LangGraph threads) two days apart; the second one asks about what the first
one said. Runs offline on the scripted model by default. With DEEPSEEK_API_KEY set, or with
--model/--base-url (any OpenAI-compatible server), the chat model and memlab's roles are real.

    python examples/agent_with_memory.py
    python examples/agent_with_memory.py --base-url http://127.0.0.1:8000/v1 --model my-model
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain.agents import create_agent  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from engine import MemoryConfig, MemoryEngine, MemoryMiddleware, VirtualClock  # noqa: E402
from engine.memory.engine import DEFAULT_START, Models  # noqa: E402
from engine.roles.bundle import Models


@tool
def order_status(order_id: str) -> str:
    """Look up the delivery status of an order by its number."""
    return f"order {order_id} left the warehouse and arrives tomorrow before 8 am"


SESSIONS = {
    "monday": ["Hi, I'm Carol. I'm a pastry chef.", "I'm allergic to peanuts.",
               "Please check order_status for 4471"],
    "wednesday": ["What am I allergic to?", "What work do I do?"],
}


def build(model: str | None, base_url: str | None):
    """The chat model and memlab's engine: scripted offline, real when a model is configured."""
    clock = VirtualClock(DEFAULT_START)  # a virtual clock so the demo can skip two days
    config = MemoryConfig.from_preset("customer service")
    if base_url or model or os.environ.get("DEEPSEEK_API_KEY"):
        from engine.roles.llm import ModelSettings, make_chat_model

        settings = ModelSettings.from_env(**{k: v for k, v in (("model", model), ("base_url", base_url)) if v})
        engine = MemoryEngine(config, clock=clock, models=Models.real(settings))  # calls land in engine.ledger
        return make_chat_model(settings), engine, f"real model {settings.model}"
    models = Models.scripted()
    return models.chat, MemoryEngine(config, clock=clock, models=models), "scripted model (offline)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="an agent with a tool and long-term memory")
    ap.add_argument("--model", default=None, help="model name (default deepseek-chat when a key is set)")
    ap.add_argument("--base-url", default=None, help="an OpenAI-compatible server")
    args = ap.parse_args(argv)

    chat, engine, label = build(args.model, args.base_url)
    agent = create_agent(chat, tools=[order_status], middleware=[MemoryMiddleware(engine)],
                         checkpointer=InMemorySaver())
    print(f"# {label}; memory preset: {engine.config.preset}")
    for session, turns in SESSIONS.items():
        if session != "monday":
            engine.clock.advance("2d")
        print(f"\n## session {session!r} ({engine.now():%a %Y-%m-%d %H:%M})")
        for text in turns:
            engine.clock.advance("1h")  # an hour between turns: the memory gate opens
            out = agent.invoke({"messages": [{"role": "user", "content": text}]},
                               {"configurable": {"thread_id": session}}, context={"user_id": "carol"})
            for m in out["messages"][-1:]:
                print(f"user:      {text}\nassistant: {m.content}")
            prompt = engine.last_prompt
            injected = [p.text for p in prompt.parts if p.name in ("profile", "records")] if prompt else []
            if injected:
                print("  memory injected:\n    " + "\n    ".join("\n".join(injected).splitlines()))
            else:
                print("  memory injected: (nothing yet)")
    print(f"\nmodel calls by role: { {r: int(v['calls']) for r, v in engine.ledger.summary().items()} }")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
