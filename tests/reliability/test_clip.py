"""Tool results cut to ``guards.max_tool_result_chars``: every limit >= 1 holds.

A limit of 81 or less used to cut nothing (the tail slice became ``text[-0:]``,
the whole string), so the model received the full result.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repl.loop.agent import Limits
from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record, scaled
from tests.support import turn
from tools.registry import Registry, tool

MARKER = re.compile(r" …\[(\d+) characters cut\]… ")
RESULTS = st.dictionaries(
    st.text(max_size=8),
    st.one_of(st.text(max_size=400), st.integers(), st.lists(st.text(max_size=30), max_size=30)),
    max_size=6,
)


def _is_head_and_tail(clipped: str, full: str) -> bool:
    """``clipped`` is a head of ``full``, or head + an honest marker + tail."""
    if full.startswith(clipped):
        return True
    for marker in MARKER.finditer(clipped):
        head, tail = clipped[: marker.start()], clipped[marker.end():]
        if (full.startswith(head) and full.endswith(tail)
                and int(marker.group(1)) == len(full) - len(head) - len(tail)):
            return True
    return False


@settings(max_examples=scaled(5000, 400), deadline=None)
@given(RESULTS, st.integers(1, 600))
def test_every_limit_holds(result, limit):
    from repl.loop.agent import clip_result

    full = json.dumps(result, ensure_ascii=False)
    clipped = clip_result(result, limit)
    assert len(clipped) <= limit
    if len(full) <= limit:
        assert clipped == full
    else:
        assert _is_head_and_tail(clipped, full)


@pytest.mark.parametrize("limit", [1, 2, 30, 40, 81, 82, 120])
def test_the_model_receives_at_most_the_limit(scripted, limit):
    @tool
    def big() -> dict:
        """Returns a lot."""
        return {"text": "A" * 3000 + "B" * 3000}

    scripted.script(tool_calls(call("big", {})), text("ok"))
    turn(scripted, Registry([big]), "go", limits=Limits(max_tool_result_chars=limit))
    sent = [m for m in scripted.chat_requests()[1].body["messages"] if m["role"] == "tool"][0]["content"]
    record("clip", limit=limit, sent_chars=len(sent))
    assert len(sent) <= limit
    assert _is_head_and_tail(sent, json.dumps({"ok": True, "text": "A" * 3000 + "B" * 3000}))
    if limit >= 82:  # room for the marker: the tail is kept too
        assert "characters cut" in sent and sent.endswith('B"}')
