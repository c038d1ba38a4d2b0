"""The embedded model adds a todo with a day and a time said: real llama.cpp inference through
the real CLI. The grammar offers it the words said ("tomorrow at 3pm"), the tool turns them into
the date. Assertions are on the stored data, never on the model's wording."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import date, timedelta
from importlib import util
from pathlib import Path

import pytest

from tests.support import ENGLISH_TODOS, local_model_home

pytestmark = [
    pytest.mark.skipif(util.find_spec("llama_cpp") is None,
                       reason="needs the 'local' extra: pip install 'glassloop[local]'"),
    pytest.mark.xdist_group("llama"),  # real inference uses every CPU: one test worker runs it all
]


@pytest.mark.timeout(1500)
def test_the_embedded_model_stores_tomorrow_at_3pm_as_a_date(
        tmp_path: Path, embedded_model: Path, embedded_prompt_state: Path) -> None:
    env, project = local_model_home(tmp_path, embedded_model)
    shutil.copytree(embedded_prompt_state, env["XDG_CACHE_HOME"], dirs_exist_ok=True)
    before = date.today()
    question = "remind me to call mum tomorrow at 3pm"
    done = subprocess.run([sys.executable, "-m", "repl.cli", "ask", question, "--json", "--yes"],
                          env=env, cwd=project, capture_output=True, text=True, timeout=1200,
                          stdin=subprocess.DEVNULL)
    after = date.today()
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    calls = [(e["name"], e.get("arguments")) for e in payload["trace"]
             if e["type"] == "tool_call_started"]
    saved = json.loads(Path(env["GLASSLOOP_TODOS_FILE"]).read_text(encoding="utf-8"))
    items = saved["todos"] if isinstance(saved, dict) else saved
    assert len(items) == len(ENGLISH_TODOS) + 1, calls
    added = items[-1]
    assert added["due"] in {f"{day + timedelta(days=1)} 15:00" for day in (before, after)}, calls
    assert "mum" in added["title"].lower(), added
