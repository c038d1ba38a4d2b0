"""/retry on another model and /compare across two models, in the real REPL against the scripted server."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakeserver import call, fault_status, text, tool_calls
from tests.reliability.helpers import trace_records


def _titles(home_env) -> list[str]:
    data = json.loads(Path(home_env["GLASSLOOP_TODOS_FILE"]).read_text(encoding="utf-8"))
    return [t["title"] for t in (data["todos"] if isinstance(data, dict) else data)]


def _for(model: str, reply):
    """A scripted reply that checks which model the request is for."""
    def answer(body):
        assert body["model"] == model, body["model"]
        return reply
    return answer


def test_retry_on_another_model_undoes_the_turn_first(sized_repl, fake_server, home):
    before = Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes()
    fake_server.script(tool_calls(call("add_todo", {"title": "from the first model"})), text("First added."),
                       _for("model-b", tool_calls(call("add_todo", {"title": "from model b"}))),
                       _for("model-b", text("B added.")), _for("model-b", text("plain answer")))
    repl = sized_repl("--yes")
    repl.say("add a todo")
    repl.expect("First added")
    repl.ready()
    assert "from the first model" in _titles(home)
    repl.say("/retry --model model-b")
    repl.expect("B added")
    repl.ready()
    assert "retrying turn 1 on model-b" in repl.screen() and "removed todo-" in repl.screen()
    titles = _titles(home)
    assert "from model b" in titles and "from the first model" not in titles
    requests = fake_server.chat_requests()
    assert [m["role"] for m in requests[2].body["messages"]] == ["system", "user"]  # the first attempt is gone
    assert requests[2].body["messages"][1]["content"] == "add a todo"
    repl.say("and now?")
    repl.expect("plain answer")  # model-b stays the model
    repl.ready()
    assert fake_server.history_errors == []
    started = [r for r in trace_records(home) if r.get("type") == "turn_started"]
    assert [r["user_text"] for r in started] == ["add a todo", "add a todo", "and now?"]  # both attempts traced
    repl.say("/undo")  # "and now?"
    repl.expect("changed nothing in any store")
    repl.ready()
    repl.say("/undo")  # the retried turn: its todo goes, the first attempt's is gone already
    repl.expect("removed todo-")
    repl.ready()
    assert Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes() == before
    repl.close()


def test_retry_after_a_failed_turn_keeps_the_turn_before(sized_repl, fake_server):
    """A turn that failed before any answer left no message: undoing it (by /retry or
    /undo) must not take the previous turn with it."""
    fake_server.script(text("First answer."), fault_status(404), _for("model-b", text("Second answer.")),
                       fault_status(404), text("plain answer"))
    repl = sized_repl()
    repl.say("first question")
    repl.expect("First answer")
    repl.ready()
    repl.say("second question")
    repl.expect("error")
    repl.ready()
    repl.say("/retry --model model-b")
    repl.expect("Second answer")
    repl.ready()
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m.get("content") for m in sent[1:]] == ["first question", "First answer.", "second question"]
    repl.say("third question")
    repl.expect("error")
    repl.ready()
    repl.say("/undo")  # the failed turn: nothing of it is in the conversation
    repl.expect("removed the last turn")
    repl.ready()
    repl.say("and now?")
    repl.expect("plain answer")
    repl.ready()
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m.get("content") for m in sent[1:]] == ["first question", "First answer.", "second question",
                                                    "Second answer.", "and now?"]
    assert fake_server.history_errors == []
    repl.close()


def test_compare_two_models_side_by_side_keeps_nothing(sized_repl, fake_server, home):
    before = Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes()
    fake_server.script(
        text("The first answer."),
        _for("model-a", tool_calls(call("list_todos", {}), call("add_todo", {"title": "dry run"}))),
        _for("model-a", text("Alpha lists three todos.\nsecond line")),
        _for("model-b", text("Beta answers at once.")),
        text("plain answer"))
    repl = sized_repl()
    repl.say("what is open?")
    repl.expect("The first answer")
    repl.ready()
    repl.say("/compare model-a model-b")
    screen = repl.expect("stopped by")
    repl.ready()
    screen = repl.screen()
    for shown in ("model-a", "model-b", "list_todos", "add_todo", "Alpha lists three todos", "Beta answers",
                  "tool calls", "latency", "cost"):
        assert shown in screen, shown
    assert Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes() == before  # side effects denied: a dry run
    results = [json.loads(m["content"]) for m in fake_server.chat_requests()[2].body["messages"]
               if m["role"] == "tool"]
    assert results[0]["ok"] is True and results[1]["error"]["type"] == "denied"
    repl.say("and now?")
    repl.expect("plain answer")
    repl.ready()
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]  # nothing of the comparison
    assert sent[2]["content"] == "The first answer."
    assert fake_server.history_errors == []
    assert [r["user_text"] for r in trace_records(home) if r.get("type") == "turn_started"] == [
        "what is open?", "and now?"]
    repl.close()


def test_retry_and_compare_refuse_clearly(sized_repl, fake_server):
    repl = sized_repl()
    for line, said in [("/retry", "nothing to retry"), ("/compare", "usage: /compare"),
                       ("/compare m1", "nothing to compare"), ("/retry --temperature 3", "usage: /retry"),
                       ("/retry --provider nope", "nothing to retry")]:
        repl.say(line)
        repl.expect(said)
        repl.ready()
    assert fake_server.chat_requests() == []
    repl.close()
