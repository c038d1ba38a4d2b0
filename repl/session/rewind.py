"""``/rewind N``: which turns go, and whether their side effects can be undone exactly.

The conversation goes back to before its turn N. The turns cut are this run's (their store
writes are in the undo ledger: ``SessionCore.rewind`` takes them back with ``tools.undo.revert``,
all files or none, as ``/undo`` does) and, reaching further, turns of an earlier run of a
resumed session, whose writes were never seen by this process: those may be cut only when they
called no tool with side effects. A ``/compact`` among them is in the way (``/undo`` it first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from repl.loop.history import History
    from repl.session.seams import TurnRecord
    from tools.registry import Registry


class RewindRefused(Exception):
    """Why ``/rewind`` changed nothing, in one line."""


@dataclass(frozen=True)
class Rewind:
    number: int  # the first turn cut (1: the first of the conversation)
    at: int  # its question's index in the history's messages
    records: list[TurnRecord]  # this run's turns cut, newest first
    earlier: int  # turns cut that ran before this session was resumed


def plan(history: History, turns: list[TurnRecord], registry: Registry, number: int) -> Rewind:
    """What rewinding to before turn ``number`` cuts; RewindRefused when it cannot be done exactly."""
    starts = history.turn_starts()
    if not starts:
        raise RewindRefused("nothing to rewind: no turn yet")
    if not 1 <= number <= len(starts):
        raise RewindRefused(f"there is no turn {number}: the conversation has turns 1 to {len(starts)}")
    left, cut = len(starts), []  # left: the conversation's turns not yet matched with a record
    for record in reversed(turns):
        if left < number:
            break
        if record.restore is not None:
            raise RewindRefused(f"turns before {left + 1} are summarised by /compact: "
                                "/undo the /compact first, then /rewind")
        cut.append(record)
        left -= record.in_history
    if left >= number:  # turns of an earlier run: their writes are not in this run's ledger
        end = starts[left] if left < len(starts) else len(history.messages)
        for message in history.messages[starts[number - 1]:end]:
            for call in message.get("tool_calls") or []:
                tool = registry.get(call.get("name", ""))
                if tool is None or tool.side_effects:
                    reach = (f"the earliest turn it can reach is {left + 1}" if left < len(starts)
                             else "only turns of this run can be rewound")
                    raise RewindRefused(
                        f"turns {number} to {left} ran before this session was resumed and called "
                        f"{call.get('name', '?')}: their changes were not recorded, so /rewind cannot undo "
                        f"them exactly ({reach})")
    return Rewind(number, starts[number - 1], cut, max(0, left - number + 1))
