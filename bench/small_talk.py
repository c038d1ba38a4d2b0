"""Chinese small talk on the embedded model: ``python -m bench.small_talk [--set dev|heldout|heldout2]``.

Each message (greetings, thanks, goodbyes) goes through ``glassloop ask`` in a fresh folder, as
a newcomer's first message would, and is answered in text under the chat prompt (the routers
send small talk to no tool). A reply
counts as a refusal when it says it cannot help ("抱歉，我无法…"), and as Chinese when its first
character is Chinese.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from bench.local_model import cli_turn
from repl.embedded.weights import BUNDLED, ensure_model

SETS = {
    "dev": ["你好！", "谢谢你，辛苦了。", "晚安。", "好久不见，最近怎么样？", "早上好呀", "没事了，谢谢。"],
    "heldout": ["嗨，在吗？", "下午好！", "谢谢啦", "太感谢你了！", "好久不见", "再见，明天见", "拜拜", "晚上好",
                "你好呀，最近好吗？", "没问题了，谢谢你", "辛苦了", "早安"],
    "heldout2": ["哈喽", "中午好", "多谢了", "麻烦你了", "晚安，好梦", "回头见", "大家好", "很高兴认识你",
                 "我很好，你呢？", "感谢感谢", "在不在？", "好的，谢谢，再见！"],
}
_REFUSAL = re.compile(r"无法|不能|抱歉|对不起")
_HAN = re.compile(r"[\u3400-\u9fff]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="heldout")
    parser.add_argument("--profile", default="local")
    args = parser.parse_args()
    messages = SETS[args.set]
    with tempfile.TemporaryDirectory(prefix="small-talk-") as folder:
        work = Path(folder)
        model = ensure_model(work / "data", spec=BUNDLED[args.profile])
        rows, load = [], os.getloadavg()[0]
        for message in messages:
            done = cli_turn(model, work, message, args.profile) or {}
            answer = str((done.get("result") or {}).get("answer") or done.get("error") or "")
            row = {"message": message, "answer": answer, "refusal": bool(_REFUSAL.search(answer)),
                   "chinese": bool(_HAN.match(answer.lstrip())),
                   "seconds": round(done.get("wall_s") or 0.0, 1)}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    summary = {"set": args.set, "profile": args.profile, "time": time.strftime("%Y-%m-%d %H:%M"),
               "load_before": load, "load_after": os.getloadavg()[0], "messages": len(rows),
               "refusals": sum(r["refusal"] for r in rows),
               "in_chinese": sum(r["chinese"] for r in rows)}
    print(json.dumps(summary, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
