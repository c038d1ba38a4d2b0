"""The openai SDK with its type packages read on first use (``repl.providers.sdk``): what a
request needs loads, the rest does not, and every name is still there when asked for."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.fakeserver import text

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json, sys, threading
    from repl.providers import sdk
    sdk.install()
    import openai
    client = openai.OpenAI(api_key="k", base_url=sys.argv[1], max_retries=0)
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
    said = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    loaded = sorted(name for name in sys.modules if name.startswith("openai"))
    unread = "ResponseStreamEvent" not in vars(openai.types.responses)
    bound = len(dir(openai.types))  # the submodules imported so far
    # four threads ask a package whose __init__ has not run for a name at once: each gets it
    gate, found = threading.Barrier(4), []
    def look():
        gate.wait()
        found.append(openai.types.responses.ResponseStreamEvent)
    threads = [threading.Thread(target=look) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    from openai.types.responses.response_stream_event import ResponseStreamEvent
    from openai.types import Batch  # the top package's own __init__ runs
    print(json.dumps({"said": said, "loaded": loaded, "unread": unread, "found": len(found),
                      "same": all(name is ResponseStreamEvent for name in found),
                      "names": [bound, len(dir(openai.types))]}))
""")


def test_a_stream_loads_a_fraction_of_the_sdk_and_every_name_is_there_when_asked_for(fake_server) -> None:
    fake_server.script(text("hello there"))
    done = subprocess.run([sys.executable, "-c", SCRIPT, fake_server.base_url], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["said"] == "hello there"  # the real SDK streamed the reply
    # eagerly, ``import openai`` alone loads about 850 of its modules (0.9 s on two cores)
    assert 100 < len(found["loaded"]) < 300, len(found["loaded"])
    assert "openai.types.chat.chat_completion_chunk" in found["loaded"]
    assert not any(name.startswith(("openai.types.graders", "openai.types.evals")) for name in found["loaded"])
    assert found["unread"]  # the responses package's own __init__ had not run
    assert found["found"] == 4 and found["same"]
    bound, names = found["names"]
    assert names > bound + 200  # read now: all of openai.types' names


def test_every_type_package_of_the_installed_sdk_only_imports_names() -> None:
    """What makes reading them later safe: an ``__init__`` that only imports names binds the
    same names whenever it runs. A new SDK version whose packages do more (a model_rebuild
    call, a registration) fails here before it can change what a request sees."""
    import openai

    packages = sorted((Path(openai.__file__).parent / "types").rglob("__init__.py"))
    assert len(packages) > 20
    for init in packages:
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            assert isinstance(node, (ast.Import, ast.ImportFrom)) or docstring, (init, ast.dump(node)[:120])
