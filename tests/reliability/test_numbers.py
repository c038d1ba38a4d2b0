"""Numbers that do not lie: cost and context share only for known models, one usage line
for a one-call turn, interrupted turns counted, tool time apart from the person's time.

The real program in a pseudo-terminal against the scripted server.
"""

from __future__ import annotations

import re

from tests.fakeserver import text
from tests.reliability.pty_sized import sized_repl  # noqa: F401 - fixture
from tests.test_cli import home  # noqa: F401 - fixture


def test_an_unpriced_model_shows_no_cost_and_no_context_share(sized_repl, fake_server):  # noqa: F811
    fake_server.script(text("hello from llama"), text("hello from mini"))
    repl = sized_repl("--model", "llama-3.1-8b-instruct")
    repl.say("hi")
    repl.expect("hello from llama")
    repl.expect(r"turn 1[^\r\n]*")
    summary = repl.child.after
    repl.ready()
    assert "$" not in summary and "cost unknown" in summary
    toolbar = repl.screen().rsplit("llama-3.1-8b-instruct", 1)[1]
    assert "$" not in toolbar and "context" not in toolbar  # the profile's 128k window is gpt-4o-mini's
    repl.say("/model gpt-4o-mini")  # a model with a [pricing] table gets its price back
    repl.ready()
    repl.say("hi")
    repl.expect("hello from mini")
    repl.expect(r"turn 2[^\r\n]*")
    assert re.search(r"\$\d", repl.child.after)
    repl.close()
