"""A session whose messages attach files (``@path``) on the HTML page of its trace: each turn is
titled by what was typed, its files folded inside it, and the page counts the turns ``/sessions``
counts. The attachment's notice is written just before its turn starts; the page reads it there.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from repl.session.mentions import ATTACHED, Attachment, Mentions, typed_part
from repl.tracing.attached import Attached, notes_attached, split_message
from tests.fakeserver import FakeServer, text
from tests.support import glassloop_here

NOTES = "buy milk\ncall Ada\n"
PLAN = "Monday: ```fences``` inside\n\nAttached file fake.txt:\nnot a file\n"  # the marker inside a file


def session_with_mentions(server: FakeServer, home: dict[str, str], project: Path) -> str:
    (project / "notes.txt").write_text(NOTES, encoding="utf-8")
    (project / "plan.md").write_text(PLAN, encoding="utf-8")
    server.script(text("two things"), text("you are welcome"), text("a plan"))
    lines = ["what is in @notes.txt?", "thanks", "and in @plan.md?", "/sessions"]
    result = glassloop_here("--base-url", server.base_url, env=home, cwd=project,
                            stdin="".join(f"{line}\n" for line in lines))
    assert result.returncode == 0 and "Traceback" not in result.stdout + result.stderr, result.stderr
    return result.stdout


def sections(page: str) -> list[str]:
    return page.split('<section class="turn"')[1:]


def test_each_turn_is_titled_as_typed_with_its_files_folded_inside(fake_server, home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shown = session_with_mentions(fake_server, home, project)
    page_path = tmp_path / "page.html"
    made = glassloop_here("trace", "last", "--html", str(page_path), env=home)
    assert made.returncode == 0, made.stderr
    page = page_path.read_text(encoding="utf-8")
    first, second, third = sections(page)  # no section for what came before the first turn
    titles = [html.unescape(m) for m in re.findall(r"<h2>Turn \d+: <q>(.*?)</q>", page)]
    assert titles == ["what is in @notes.txt?", "thanks", "and in @plan.md?"]
    # /sessions, in the same run, counts 3 turns for this session; so does the page
    row = next(line for line in shown.splitlines() if "(current)" in line)
    assert re.split(r"\s{2,}", row.strip())[2] == "3", shown  # the turns column
    assert '<p class="meta">3 turns · ' in page
    for section, name, body in ((first, "notes.txt", NOTES), (third, "plan.md", PLAN)):
        (folded,) = re.findall(r'<details class="attached"><summary>(.*?)</summary><pre class="attached">(.*?)</pre>'
                               r"</details>", section, re.DOTALL)
        assert html.unescape(folded[0]).startswith(f"attached {name} (")
        assert html.unescape(folded[1]) == body.rstrip("\n")
        assert section.index('class="attached"') < section.index('<p class="meta">')  # under its title
    assert "attached" not in second
    assert page.count("attached notes.txt (2 lines, 18 characters)") == 1


def test_the_trace_reads_a_message_as_the_mentions_wrote_it():
    files = [Attachment("notes.txt", NOTES, len(NOTES)), Attachment("plan.md", PLAN, len(PLAN)),
             Attachment("empty.txt", "", 0)]
    message = Mentions(files).message("compare @notes.txt, @plan.md and @empty.txt")
    assert split_message(message) == ("compare @notes.txt, @plan.md and @empty.txt",
                                      (Attached("notes.txt", NOTES.rstrip("\n")), Attached("plan.md", PLAN.rstrip("\n")),
                                       Attached("empty.txt", "")))
    assert split_message(message)[0] == typed_part(message)
    assert all(notes_attached({"type": "notice", "message": f.line()}, {f.path}) for f in files)
    typed = f"two paragraphs{ATTACHED}is not an attachment"  # typed text holding the marker: kept whole
    assert split_message(typed) == (typed, ())
