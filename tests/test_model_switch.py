"""/model NAME against an endpoint that lists its models, and Tab completion while the list loads."""

from __future__ import annotations

import threading
import time

from repl.session import commands
from repl.session.commands.model import _model_completions
from tests.fakeserver import handle_models


def test_a_model_the_endpoint_does_not_list_is_switched_to_with_one_warning(fake_server, session) -> None:
    fake_server.models = ["gpt-4o", "gpt-4o-mini"]
    session.provider()  # built, as the REPL builds it behind the first prompt
    commands.dispatch(session, "/model gpt-4o")
    assert session.ui.infos[-1] == "model is now gpt-4o for the next turn" and not session.ui.errors
    commands.dispatch(session, "/model gpt-40")
    assert session.settings.active.model == "gpt-40"  # switched all the same: a list can be incomplete
    assert session.ui.infos[-2:] == ["model is now gpt-40 for the next turn",
                                     "the endpoint does not list gpt-40 (2 models; /model lists them)"]


def test_no_warning_when_the_endpoint_lists_no_models(fake_server, session) -> None:
    def missing(fake, ex, req) -> None:
        ex.send_json(404, {"error": {"message": "no such route"}})

    fake_server.routes[("GET", "/v1/models")] = missing
    session.provider()
    commands.dispatch(session, "/model anything")
    assert session.ui.infos[-1] == "model is now anything for the next turn" and not session.ui.errors


def test_completion_offers_nothing_until_the_list_has_come(fake_server, session) -> None:
    """Typing never waits for GET /models: no menu (an empty list) while it loads, the names after."""
    asked, release = threading.Event(), threading.Event()

    def held(fake, ex, req) -> None:
        asked.set()
        release.wait(10)
        handle_models(fake, ex, req)

    fake_server.models = ["gpt-4o", "gpt-4o-mini"]
    fake_server.routes[("GET", "/v1/models")] = held
    session.provider()
    assert _model_completions(session) == []  # returned while the server holds the list back
    assert asked.wait(10)
    assert _model_completions(session) == []  # still loading: asked once, not again
    release.set()
    deadline = time.monotonic() + 10
    while not _model_completions(session) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _model_completions(session) == ["gpt-4o", "gpt-4o-mini"]
    assert sum(r.path == "/v1/models" for r in fake_server.requests) == 1
