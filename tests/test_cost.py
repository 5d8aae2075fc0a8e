"""`memlab bench cost` and the cost reductions it measures, offline against the local scripted
server on 127.0.0.1 (never the internet)."""

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from engine.cli import main
from engine.eval.cost import CONFIGS, run_cost, summarize_rows
from engine.eval.cost.responder import ScriptedResponder, scripted_server
from engine.eval.scenario import load_scenario
from engine.roles.rules import RuleQueryParser
from engine.roles.types import QueryInput

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
NOW = datetime(2026, 3, 11, 12, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)


def _unresolved(text):
    rules = RuleQueryParser()
    inp = QueryInput(text=text, now=NOW)
    return rules.unresolved(inp, rules.parse(inp))


@pytest.mark.parametrize("text", [
    "I prefer deliveries before 8 am because I start baking early.", "Evening deliveries after 6pm work best.",
    "I am reading a novel called Dune before bed.", "Can I change the delivery address after ordering?",
    "Can I get the winter jacket in navy?", "revealed only in the last chapter", "I had a long week.",
    "I have one every morning before work.", "What did you suggest about my detective last time?",
    "What did I do last week?", "What did I buy three days ago?", "我昨天吃了什么"])
def test_the_rules_resolve_these_without_the_model(text):
    assert _unresolved(text) is None


@pytest.mark.parametrize("text", ["Where was I last summer?", "What did I do two weekends ago?",
                                  "What did we do during the winter?", "What did I say around Christmas?"])
def test_a_date_expression_the_rules_cannot_resolve_goes_to_the_model(text):
    assert "not resolved to dates" in _unresolved(text)


def test_the_log_says_who_parsed_each_question():
    from engine.memory.engine import MemoryEngine
    from engine.roles.bundle import Models
    from engine.roles.llm import ModelSettings

    with scripted_server() as server:
        engine = MemoryEngine(models=Models.real(ModelSettings(base_url=server.base_url)))
        engine.turn("u", "s", "What is my email?")
        engine.turn("u", "s", "Where was I last summer?")
        parsed = server.responder.calls.get("ParsedQuery", 0)
    notes = [e.payload for e in engine.events(user_id="u") if e.kind == "retrieve"]
    assert [n["parser"] for n in notes] == ["rules", "model"]
    assert "last summer" in notes[1]["parser_reason"]
    assert parsed == 1 and engine.ledger.summary()["query_parser"]["calls"] == 1


def test_the_server_answers_the_middlewares_summary_prompt_as_the_scripted_summarizer():
    from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT
    from langchain_core.messages import AIMessage, HumanMessage, get_buffer_string

    history = [HumanMessage("Here is a summary of the conversation to date:\n\nThe user said:\n- I live in Lyon & Co."),
               HumanMessage("My cat is called Miso."), AIMessage("Lovely name!"), HumanMessage("What is my cat called?")]
    prompt = DEFAULT_SUMMARY_PROMPT.format(messages=get_buffer_string(history, format="xml"))
    responder = ScriptedResponder(summary_tokens=200)
    reply = responder({"messages": [{"role": "user", "content": prompt}]})
    text = reply.body["choices"][0]["message"]["content"]
    assert "- I live in Lyon & Co." in text and "- My cat is called Miso." in text  # earlier summary carried
    assert "Lovely" not in text and "What is my cat" not in text
    assert responder.calls == {"summary": 1}
    tiny = ScriptedResponder(summary_tokens=12)({"messages": [{"role": "user", "content": prompt}]})
    assert "Lyon" not in tiny.body["choices"][0]["message"]["content"]  # newest first within the budget


def test_usage_counts_tool_schemas_and_caches_seen_prefixes():
    responder = ScriptedResponder()
    tools = [{"type": "function", "function": {"name": "X", "parameters": {"description": "y" * 400}}}]
    msgs = [{"role": "system", "content": "s " * 200}, {"role": "user", "content": "hello"}]
    first = responder._usage(msgs, "ok", tools=tools)
    assert first["prompt_tokens"] > responder._usage(msgs, "ok")["prompt_tokens"]
    assert first["prompt_cache_hit_tokens"] == 0
    again = responder._usage([*msgs[:1], {"role": "user", "content": "other"}], "ok", tools=tools)
    assert 0 < again["prompt_cache_hit_tokens"] < again["prompt_tokens"]
    assert again["prompt_cache_hit_tokens"] % 64 == 0


def test_bench_cost_runs_the_three_configs_through_http_and_every_request_is_in_a_ledger():
    scenario = load_scenario(SCENARIOS / "reference-shape-3.yaml")
    with scripted_server() as server:
        rows = run_cost([scenario], server=server)
        requests = len(server.requests)
        kinds = dict(server.responder.calls)
    assert [r.config for r in rows] == list(CONFIGS)
    by = {r.config: r for r in rows}
    assert sum(int(v["calls"]) for r in rows for v in r.ledger.values()) == requests
    turns = by["memlab"].turns
    assert by["memlab"].ledger.get("query_parser", {}).get("calls", 0) == 0
    assert by["memlab:model-parsing"].ledger["query_parser"]["calls"] == turns
    assert by["summarization"].summarized and kinds["summary"] == by["summarization"].ledger["summarizer"]["calls"]
    summary = summarize_rows(rows)
    assert summary["memlab"]["internal_calls"] < summary["memlab:model-parsing"]["internal_calls"]
    assert summary["memlab"]["input_tokens"] < summary["memlab:model-parsing"]["input_tokens"]
    assert summary["summarization"]["context_recall"] > 0  # the summaries carry the user's statements


def test_memlab_bench_cost_prints_tables_and_writes_json(tmp_path, capsys):
    out = tmp_path / "cost.json"
    code = main(["bench", "cost", "--scenarios", str(SCENARIOS / "relative-date-a-week-before.yaml"),
                 "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "memlab / summarization" in text and "targets" in text
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "cost" and "machine" in doc and "commit" in doc
    assert set(doc["sets"]["all"]["summary"]) == set(CONFIGS)
    assert set(doc["targets"]) == {"internal_calls_per_turn", "input_ratio_budget_bound", "recall_not_worse",
                                   "budget_bound_recall_not_worse"}
    assert "input tokens by role" in text


def test_bench_cost_rejects_a_glob_that_matches_nothing(capsys):
    assert main(["bench", "cost", "--scenarios", "nowhere/*.yaml"]) == 2
    assert "matches no file" in capsys.readouterr().err
