"""MemoryMiddleware under a real `create_agent` graph, offline, on a virtual clock."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from pydantic import Field

from engine.core.clock import SystemClock, VirtualClock
from engine.core.config import MemoryConfig
from engine.core.errors import ConfigError
from engine.integrations.langgraph import MemoryMiddleware, tail_window
from engine.memory.engine import MemoryEngine
from engine.roles.scripted import ScriptedChatModel

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@tool
def order_status(order_id: str) -> str:
    """Look up the delivery status of an order."""
    return f"order {order_id} ships tomorrow"


class RecordingChatModel(ScriptedChatModel):
    """The scripted model, keeping every input it was given (shared by its bind_tools copies)."""

    inputs: list[list[Any]] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.inputs.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


class FailingChatModel(ScriptedChatModel):
    calls: list[int] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls.append(1)
        raise RuntimeError("provider is down")


class Harness:
    def __init__(self, model=None, *, profile_store=None, engine=None):
        self.clock = VirtualClock(START)
        self.engine = engine or MemoryEngine(MemoryConfig.from_preset("customer service"), clock=self.clock)
        self.model = model or RecordingChatModel()
        self.prompts: list[Any] = []
        prepare = self.engine.prepare_call

        def spy(user_id, session_id):  # one prompt per model call (fresh or reused within a user turn)
            prepared = prepare(user_id, session_id)
            self.prompts.append(prepared.prompt)
            return prepared

        self.engine.prepare_call = spy
        self.middleware = MemoryMiddleware(self.engine, profile_store=profile_store)
        self.agent = create_agent(self.model, tools=[order_status], middleware=[self.middleware],
                                  checkpointer=InMemorySaver())

    def say(self, text, thread, user="alice", *, advance="30s"):
        self.clock.advance(advance)
        cfg = {"configurable": {"thread_id": thread}}
        return self.agent.invoke({"messages": [HumanMessage(text)]}, cfg, context={"user_id": user})

    async def asay(self, text, thread, user="alice", *, advance="30s"):
        self.clock.advance(advance)
        cfg = {"configurable": {"thread_id": thread}}
        return await self.agent.ainvoke({"messages": [HumanMessage(text)]}, cfg, context={"user_id": user})

    def extracts(self) -> int:
        return len(self.engine.store.events(kind="extract"))

    def systems(self) -> list[str]:
        return [m[0].content for m in self.model.inputs if isinstance(m[0], SystemMessage)]


ALICE_TURNS = [
    "Hi, I'm Alice. I'm allergic to peanuts.",
    "Please check order_status for 4471",
    "I prefer deliveries before 8 am.",
]


def test_state_channel_persists_across_invocations():
    h = Harness()
    cfg = {"configurable": {"thread_id": "A"}}
    h.say("Hello there", "A")
    first = h.agent.get_state(cfg).values
    assert first["memlab_seen"] == len(first["messages"]) == 2
    h.say("Please check order_status for 12", "A")
    second = h.agent.get_state(cfg).values
    assert second["memlab_seen"] == len(second["messages"]) == 6
    # every state message archived exactly once (the reference re-observed them each turn)
    stored = h.engine.store.messages("alice", session_id="A")
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant", "tool", "assistant"]


def test_events_fire_only_when_the_gate_opens():
    h = Harness()
    for text in ["Hello, I'm Alice.", "I'm allergic to peanuts.", "I live in Lyon."]:
        h.say(text, "A")  # 30 s apart: nothing is mature yet
    assert h.extracts() == 0
    gates = h.engine.store.events(kind="gate")
    assert len(gates) == 3 and not any(g.payload["will_fire"] for g in gates)
    h.say("Do you sell almond flour?", "A", advance="1h")  # the clock jump opens the gate
    after_jump = h.extracts()
    assert after_jump >= 1
    h.say("Thanks.", "A")  # 30 s later: the only pending message is immature again
    assert h.extracts() == after_jump
    h.say("Bye.", "A", advance="1h")
    assert h.extracts() > after_jump
    fired = [g for g in h.engine.store.events(kind="gate") if g.payload["will_fire"]]
    assert len(fired) == 2


def test_the_model_sees_the_engine_prompt():
    h = Harness()
    for i, text in enumerate(ALICE_TURNS):
        h.say(text, "A", advance="1h" if i else "30s")
    h.say("What am I allergic to?", "A", advance="1h")
    assert len(h.model.inputs) == len(h.prompts) == 5  # the tool turn calls the model twice
    for sent, prompt in zip(h.model.inputs, h.prompts, strict=True):
        assert isinstance(sent[0], SystemMessage) and sent[0].content == prompt.system
        assert sum(isinstance(m, SystemMessage) for m in sent) == 1
        assert len(sent) - 1 == len(prompt.messages) - 1  # the engine's window, message for message
        for got, want in zip(sent[1:], prompt.messages[1:], strict=True):
            role = {HumanMessage: "user", AIMessage: "assistant", ToolMessage: "tool"}[type(got)]
            assert role == want["role"]
            if not getattr(got, "tool_calls", None):
                assert got.content == want["content"]
    # the window shrank after the events: processed messages live in memory, not in the window
    state = h.agent.get_state({"configurable": {"thread_id": "A"}}).values
    assert len(h.model.inputs[-1]) - 1 < len(state["messages"]) - 1
    assert "peanuts" in h.model.inputs[-1][0].content


def test_tool_pairs_are_never_split_by_the_window():
    h = Harness(engine=MemoryEngine(MemoryConfig.from_preset("customer service", keep_recent=1),
                                    clock=VirtualClock(START)))
    h.clock = h.engine.clock
    for text in ["Please check order_status for 1", "Please check order_status for 2",
                 "Please check order_status for 3"]:
        h.say(text, "A", advance="1h")
    assert h.extracts() >= 2
    for sent in h.model.inputs:
        assert not isinstance(sent[1], ToolMessage)
        asked: set[str] = set()
        for m in sent:
            if isinstance(m, AIMessage):
                asked |= {c["id"] for c in m.tool_calls}
            if isinstance(m, ToolMessage):
                assert m.tool_call_id in asked


def test_memory_crosses_threads_of_a_user_never_users():
    h = Harness()
    for i, text in enumerate(ALICE_TURNS):
        h.say(text, "A", advance="1h" if i else "30s")
    h.say("What am I allergic to?", "B", advance="1d")
    alice_b = h.model.inputs[-1][0].content
    assert "peanuts" in alice_b
    assert "peanuts" in h.agent.get_state({"configurable": {"thread_id": "B"}}).values["messages"][-1].content
    n = len(h.model.inputs)
    h.say("What am I allergic to?", "C", user="bob")
    h.say("Where do I get deliveries, and before when?", "C", user="bob", advance="1h")
    for sent in h.model.inputs[n:]:
        text = "\n".join(str(m.content) for m in sent)
        assert "peanuts" not in text and "Alice" not in text and "8 am" not in text
    assert not any("peanuts" in r.content for r in h.engine.records("bob"))


def test_async_ainvoke_matches_sync():
    h = Harness()

    async def run():
        for i, text in enumerate(ALICE_TURNS):
            await h.asay(text, "A", advance="1h" if i else "30s")
        return await h.asay("What am I allergic to?", "B", advance="1d")

    out = asyncio.run(run())
    assert "peanuts" in out["messages"][-1].content
    assert [m.role for m in h.engine.store.messages("alice", session_id="A")].count("tool") == 1
    for sent, prompt in zip(h.model.inputs, h.prompts, strict=True):
        assert sent[0].content == prompt.system
    state = h.agent.get_state({"configurable": {"thread_id": "A"}}).values
    assert state["memlab_seen"] == len(state["messages"])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_model_is_called_once_and_logged(mode):
    h = Harness(FailingChatModel())
    with pytest.raises(RuntimeError, match="provider is down"):
        if mode == "sync":
            h.say("Hello", "A")
        else:
            asyncio.run(h.asay("Hello", "A"))
    assert len(h.model.calls) == 1
    errors = h.engine.store.events(kind="error")
    assert len(errors) == 1 and errors[0].payload["step"] == "chat"
    assert "provider is down" in errors[0].payload["error"]
    failed = [c for c in h.engine.ledger.calls if c.role == "chat"]
    assert len(failed) == 1 and not failed[0].ok
    # the user message is archived and still pending for the next event
    assert [m.role for m in h.engine.pending("alice", "A")] == ["user"]


def test_tool_messages_are_observed_once_when_the_tool_returns():
    h = Harness()
    h.say("Please check order_status for 4471", "A")
    tool_stamp = [e for e in h.engine.store.events(kind="stamp") if e.payload["role"] == "tool"]
    assert len(tool_stamp) == 1
    h.say("Thanks", "A")
    h.say("Please check order_status for 99", "A")
    tools = [m for m in h.engine.store.messages("alice", session_id="A") if m.role == "tool"]
    assert [m.content for m in tools] == ["order 4471 ships tomorrow", "order 99 ships tomorrow"]
    assert all(m.tool_call_id and m.name == "order_status" for m in tools)
    state = h.agent.get_state({"configurable": {"thread_id": "A"}}).values
    stamped = [m.response_metadata["memlab_message_id"] for m in state["messages"] if isinstance(m, ToolMessage)]
    assert stamped == [m.id for m in tools]


def test_list_content_is_counted_by_its_text():
    h = Harness()
    blocks = [{"type": "text", "text": "I have two cats named Miso and Tofu."},
              {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    h.clock.advance("30s")
    h.agent.invoke({"messages": [HumanMessage(content=blocks)]}, {"configurable": {"thread_id": "A"}},
                   context={"user_id": "alice"})
    first = h.engine.store.messages("alice", session_id="A")[0]
    assert first.content == "I have two cats named Miso and Tofu."
    stamp = h.engine.store.events(kind="stamp")[0]
    assert stamp.payload["tokens"] == h.engine.counter.count(first.content)


def test_user_id_from_state_and_clear_errors():
    h = Harness()
    cfg = {"configurable": {"thread_id": "A"}}
    h.agent.invoke({"messages": [HumanMessage("Hello")], "user_id": "dora"}, cfg)
    assert len(h.engine.store.messages("dora", session_id="A")) == 2
    with pytest.raises(ConfigError, match=r"runtime\.context.*input state"):
        h.agent.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "Z"}})
    no_saver = create_agent(ScriptedChatModel(), tools=[], middleware=[MemoryMiddleware(h.engine)])
    with pytest.raises(ConfigError, match="thread_id"):
        no_saver.invoke({"messages": [HumanMessage("Hello")]}, context={"user_id": "alice"})
    with pytest.raises(ConfigError, match="either an engine"):
        MemoryMiddleware(h.engine, config=MemoryConfig.from_preset())


def test_no_arguments_runs_on_embedded_defaults():
    mw = MemoryMiddleware()
    assert isinstance(mw.engine.clock, SystemClock)
    agent = create_agent(ScriptedChatModel(), tools=[], middleware=[mw], checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("I'm allergic to peanuts.")]},
                       {"configurable": {"thread_id": "t"}}, context={"user_id": "u"})
    assert out["messages"][-1].content == "Noted."
    assert [m.role for m in mw.engine.store.messages("u", session_id="t")] == ["user", "assistant"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_profile_is_mirrored_into_a_langgraph_store(mode):
    store = InMemoryStore()
    h = Harness(profile_store=store)
    turns = [(t, "A", "alice", "1h" if i else "30s") for i, t in enumerate(ALICE_TURNS)]
    turns += [("What am I allergic to?", "B", "alice", "1d"), ("Hello", "C", "bob", "30s")]

    async def arun():
        for text, thread, user, adv in turns:
            await h.asay(text, thread, user, advance=adv)

    if mode == "sync":
        for text, thread, user, adv in turns:
            h.say(text, thread, user, advance=adv)
    else:
        asyncio.run(arun())
    alice = store.get(("memlab", "alice", "profile"), "profile").value
    assert alice == h.engine.profile("alice").to_dict()
    assert any("peanuts" in v for vals in alice["fields"].values() for v in vals)
    bob = store.get(("memlab", "bob", "profile"), "profile").value
    assert bob["user_id"] == "bob" and not any("peanuts" in v for vals in bob["fields"].values() for v in vals)


def test_agent_prompt_kept_first_and_window_can_be_left_alone():
    clock = VirtualClock(START)
    engine = MemoryEngine(MemoryConfig.from_preset("customer service"), clock=clock)
    model = RecordingChatModel()
    agent = create_agent(model, tools=[], system_prompt="Answer in one sentence.", checkpointer=InMemorySaver(),
                         middleware=[MemoryMiddleware(engine, replace_window=False)])
    cfg = {"configurable": {"thread_id": "A"}}
    for i, text in enumerate(["I'm allergic to peanuts.", "I live in Lyon.", "I have a cat.",
                                  "I work as a nurse.", "What am I allergic to?"]):
        clock.advance("1h" if i else "30s")
        agent.invoke({"messages": [HumanMessage(text)]}, cfg, context={"user_id": "alice"})
        sent = model.inputs[-1]
        assert sent[0].content == "Answer in one sentence.\n\n" + engine.last_prompt.system
        assert [m.content for m in sent[1:]] == [m.content for m in agent.get_state(cfg).values["messages"][:-1]]
    assert len(engine.last_prompt.messages) - 1 < len(model.inputs[-1]) - 1  # the engine's window was shorter


# ---------------------------------------------------------------- the window, as a property

def _conversation(shape: list[int]) -> list[Any]:
    """Each item: 0 a plain exchange, k>0 a user turn whose AI reply calls k tools."""
    out: list[Any] = []
    for i, k in enumerate(shape):
        out.append(HumanMessage(f"q{i}"))
        if k:
            calls = [{"name": "t", "args": {}, "id": f"c{i}_{j}", "type": "tool_call"} for j in range(k)]
            out.append(AIMessage("", tool_calls=calls))
            out.extend(ToolMessage(f"r{i}_{j}", tool_call_id=f"c{i}_{j}") for j in range(k))
        out.append(AIMessage(f"a{i}"))
    return out


@given(st.lists(st.integers(0, 3), max_size=8), st.integers(0, 40))
def test_tail_window_keeps_tool_pairs(shape, n):
    msgs = _conversation(shape)
    win = tail_window(msgs, n)
    assert win == msgs[len(msgs) - len(win):]  # a suffix
    assert len(win) >= min(n, len(msgs))
    if win:
        assert not isinstance(win[0], ToolMessage)
    asked = {c["id"] for m in win if isinstance(m, AIMessage) for c in m.tool_calls}
    assert all(m.tool_call_id in asked for m in win if isinstance(m, ToolMessage))


# ---------------------------------------------------------------- the comparison script

def test_comparison_runs_offline(tmp_path, benchmark_script):
    from engine.eval.scenario import parse_scenario

    bench = benchmark_script("middleware_vs_summarization")
    result = bench.run(parse_scenario(bench.INLINE, source="inline"))
    mem, summ = result["memory"], result["summarization"]
    assert mem["chat"]["calls"] == summ["chat"]["calls"] == 6  # 5 turns + 1 probe, one call each
    assert summ["summary"]["calls"] >= 1 and "summary" not in mem
    assert mem["extractor"]["calls"] >= 1 and "query_parser" not in mem  # questions are parsed by rules, no call
    assert result["trigger"] == ["messages", 8]
    probe = result["probes"][0]
    assert probe["memory"]["shown"] and probe["memory"]["hit"]  # the fact crossed into the new thread
    table = bench.format_table(result)
    assert "summary" in table and "extractor" in table
    out = tmp_path / "r.json"
    assert bench.main(["--scenario", str(Path(__file__).resolve().parents[1] / "scenarios" / "cross-session.yaml"),
                       "--json", str(out)]) == 0
    assert json.loads(out.read_text())["scenario"] == "cross-session"


def _minimal(schema: dict, defs: dict) -> Any:
    """The smallest value a JSON schema accepts (required keys only)."""
    if "$ref" in schema:
        return _minimal(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return _minimal(schema["anyOf"][0], defs)
    if "default" in schema:
        return schema["default"]
    if schema.get("type") == "object":
        props = schema.get("properties", {})
        return {k: _minimal(props[k], defs) for k in schema.get("required", [])}
    return {"array": [], "string": "x", "number": 0.5, "integer": 1, "boolean": False}.get(schema.get("type"))


def test_comparison_runs_against_an_openai_compatible_server(benchmark_script):
    from engine.eval.scenario import parse_scenario
    from tests.fake_openai import FakeOpenAI, Reply, chat_body, usage

    def responder(req):
        choice = req.get("tool_choice")
        if isinstance(choice, dict):  # a memlab role asking for structured output
            fn = next(t["function"] for t in req["tools"] if t["function"]["name"] == choice["function"]["name"])
            params = fn.get("parameters", {})
            args = json.dumps(_minimal(params, params.get("$defs", {})))
            return Reply(body=chat_body(tool_name=fn["name"], tool_arguments=args, usage=usage(100, 10)))
        return Reply(body=chat_body(content="Noted.", usage=usage(100, 3)))

    bench = benchmark_script("middleware_vs_summarization")
    with FakeOpenAI(responder) as server:
        result = bench.run(parse_scenario(bench.INLINE, source="inline"), base_url=server.base_url)
        sent = len(server.requests)
    mem, summ = result["memory"], result["summarization"]
    assert mem["chat"]["calls"] == summ["chat"]["calls"] == 6 and summ["summary"]["calls"] >= 1
    role_calls = sum(int(r["calls"]) for role, r in mem.items() if role != "chat")
    assert sent == mem["chat"]["calls"] + summ["chat"]["calls"] + summ["summary"]["calls"] + role_calls


def test_example_runs_offline(capsys, monkeypatch):
    import importlib.util

    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    path = Path(__file__).resolve().parents[1] / "examples" / "agent_with_memory.py"
    spec = importlib.util.spec_from_file_location("agent_with_memory", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([]) == 0
    out = capsys.readouterr().out
    wednesday = out.split("## session 'wednesday'")[1]
    assert "assistant: From what I have:" in wednesday and "peanuts" in wednesday.split("What work")[0]
    assert "order_status returned: order 4471" in out


class ThreeToolCalls(RecordingChatModel):
    """Calls order_status three times in one user turn, then answers from what it was shown."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        from langchain_core.outputs import ChatGeneration, ChatResult

        tools_done = sum(1 for m in messages[next(i for i in range(len(messages) - 1, -1, -1)
                                                   if isinstance(messages[i], HumanMessage)):]
                         if isinstance(m, ToolMessage))
        if tools_done < 3 and "order" in str(messages[-1].content if not isinstance(messages[-1], ToolMessage) else
                                             "order"):
            self.inputs.append(list(messages))
            call = {"name": "order_status", "args": {"order_id": f"10{tools_done}"}, "id": f"call_{tools_done}",
                    "type": "tool_call"}
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[call]))])
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_one_user_turn_prepares_memory_once_whatever_the_tool_loop(mode):
    h = Harness(ThreeToolCalls())
    run = h.say if mode == "sync" else (lambda *a, **kw: asyncio.run(h.asay(*a, **kw)))
    run("Hi, I'm Alice. I'm allergic to peanuts and I track orders a lot.", "A")
    run("Remember that order 77 is a gift.", "A", advance="1h")
    before = {r.id: r.strengthen_count for r in h.engine.records("alice")}
    turns_before = len(h.engine.store.events(user_id="alice", kind="gate"))
    out = run("What about my order, and what am I allergic to?", "A", advance="1d")
    assert [m.type for m in out["messages"][-8:]].count("tool") == 3  # three tool calls in this user turn
    gates = h.engine.store.events(user_id="alice", kind="gate")
    retrieves = h.engine.store.events(user_id="alice", kind="retrieve")
    reuses = h.engine.store.events(user_id="alice", kind="reuse")
    assert len(gates) - turns_before == 1 and retrieves[-1].turn == gates[-1].turn  # one preparation
    assert len([e for e in retrieves if e.turn == gates[-1].turn]) == 1
    assert len([e for e in reuses if e.turn == gates[-1].turn]) == 3  # the three later calls reused it
    after = {r.id: r.strengthen_count for r in h.engine.records("alice")}
    assert all(after[i] - before.get(i, 0) <= 1 for i in after)  # at most one reinforcement per record
    last_call = h.model.inputs[-1]
    asked = max(i for i, m in enumerate(last_call) if isinstance(m, HumanMessage))
    assert sum(isinstance(m, ToolMessage) for m in last_call[asked:]) == 3  # the reused prompt shows the tool results
    assert last_call[0].content.startswith(h.prompts[-1].system[:40])
