"""Telling a question of knowledge from a request: "how do forecasters work out a chance of
rain?" is about the weather and asks for no forecast; "any tips for keeping a to-do list?" asks for
none of the person's todos. Such a question is answered from what the model knows.

A tool's words and meaning find its topic, and a question about the topic has the topic's words:
the routers before this one send it to the tool. What tells the two apart is how the question is
put, which the sentence encoder also reads: a request asks to do or look up something particular
(the person's own things, a named place, live figures), a question of knowledge asks why, how in
general, or what is best. A linear reading of the encoder's vectors (``Knowledge``), fitted on
examples of both kinds in English and Chinese (``REQUESTS``, ``KNOWLEDGE``, on topics that are no
tool's), gives a question the probability that it is a request; below ``Calibration.request`` a
choice the words or meaning made is turned into an answer in text.

Not turned: a choice by a value of a parameter's shape, by a tool named, or as a follow-up; a
reply to something the model asked; a message naming a file ("is trip.txt up to date?"); and a
choice of a tool that gives advice (its description reads closer to ``ADVICE`` than to
``RECORDS``): for "how do I get coffee out of wool" a stain tool is the answer.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from repl.embedded.router import MeaningRouter
from repl.embedded.words import first_sentence
from repl.loop.routing import Router, RouteRequest
from repl.providers.base import ToolChoice
from tools.registry import ToolSchema

if TYPE_CHECKING:
    import numpy as np

# Requests to an assistant that acts and looks things up, on topics that are no tool's here
REQUESTS = (
    "play the next song on my running playlist",
    "what's the score in the Lakers game right now",
    "reserve four seats at Luigi's, saturday, 8pm",
    "turn the living room lights down to half",
    "text Anna that I'm running a quarter hour behind",
    "what balance remains on my gift card",
    "show me my calendar for thursday afternoon",
    "is the pharmacy on Elm street still open",
    "order another bag of the same dog food as last time",
    "set an alarm for 6:45 tomorrow",
    "total my grocery spending for last month",
    "find the cheapest train from Leeds to York on friday",
    "call off next week's dentist visit",
    "how many steps have I walked today",
    "bring up that hardware store receipt",
    "check whether my package from the bookshop has shipped",
    "start a 25 minute timer",
    "who sent me an email about the rent today",
    "transfer 50 pounds to my savings account",
    "is my train to Bristol running late",
    "october's power bill, give me the total",
    "what does my phone contract say about ending it early",
    "list my friends whose birthdays fall before december",
    "how far is it from here to the nearest petrol station",
    "has Sam answered my text yet",
    "what's playing at the cinema on King street tonight",
    "compare today's heart rate with mine from last week",
    "is there a seat left on the 8:15 ferry",
    "what did the doctor's office say when they called",
    "list every item in my shopping basket",
    "when is my streaming plan renewed",
    "read out Tom's latest message",
    "who's on call at the clinic, sat and sun",
    "the Arsenal v Spurs result from last night",
    "my car's tyre pressure light is on; read the car's own report",
    "帮我把客厅的空调调到二十六度",
    "给小王发个消息说我晚点到",
    "查一下我这个月话费还剩多少",
    "我的快递到哪儿了",
    "明早七点叫我起床",
    "帮我订两张周六晚上的电影票",
    "看看我银行卡里还有多少钱",
    "我上周跑步一共跑了几公里",
    "把这首歌加到我的收藏里",
    "帮我查下去南京的高铁还有没有票",
    "打开卧室的灯",
    "我昨天在超市花了多少钱",
    "取消明天下午的会议",
    "播放周杰伦的歌",
    "帮我看看楼下那家药店现在开着没",
    "把闹钟改到六点半",
    "下一班去机场的地铁几点",
    "我的体检报告出来了吗",
    "给妈妈打个电话",
    "帮我记录一下今天喝了八杯水",
    "我上个月电费交了多少",
    "我的手机合约什么时候到期",
    "离这儿最近的加油站有多远",
    "今晚电影院有什么片子",
    "我购物车里现在有啥",
    "昨天那场球赛谁赢了",
    "我的会员还有几天到期",
    "小李刚才给我发了什么",
    "今天我的心率比昨天高吗",
    "帮我把这周的跑步记录调出来",
)
# Questions answered from knowledge, advice or writing, on the same kinds of topics
KNOWLEDGE = (
    "what makes a tune stick in people's minds",
    "how does the shot clock in basketball work",
    "what's a kind way to decline a dinner invitation",
    "why do lights flicker before a bulb dies",
    "help me phrase a brief apology to a friend",
    "debit card versus credit card, how do they differ",
    "any advice for planning a week without overloading it",
    "why are some medicines sold only with a prescription",
    "how much should a medium sized dog eat in a day",
    "should you wake up at one fixed hour each day",
    "how do most households plan grocery spending",
    "why are train tickets cheaper when you book early",
    "how frequently ought adults to visit a dentist",
    "are ten thousand steps daily really necessary",
    "what's the point of keeping receipts",
    "how does parcel tracking work behind the scenes",
    "what is the pomodoro technique",
    "how should I word an email to request a deadline extension",
    "what's a sensible amount to keep in an emergency fund",
    "why do trains get delayed in autumn",
    "explain how a heart rate monitor measures your pulse",
    "tell me why ferries are slower than planes",
    "what does an early termination fee usually cover",
    "how do cinemas decide which films to show",
    "why do memberships renew on their own",
    "explain the offside rule in football",
    "what's an easy trick for never missing friends' birthdays",
    "how does a petrol engine run",
    "why do phone contracts last two years",
    "describe how online shopping baskets keep items",
    "is it rude to leave a message unanswered for a day",
    "how do doctors decide who is on call",
    "what makes a tyre lose pressure in cold air",
    "compose a little poem about the sea",
    "summarise the plot of a famous detective story in three lines",
    "空调开多少度最省电",
    "怎么委婉地跟朋友说我会迟到",
    "手机话费套餐一般怎么选比较划算",
    "快递为什么有时候会绕路",
    "早起有什么好方法吗",
    "电影院的3D眼镜是什么原理",
    "信用卡和借记卡有什么区别",
    "跑步的时候膝盖疼是怎么回事",
    "为什么有些歌一听就忘不掉",
    "高铁为什么比普通火车快那么多",
    "灯泡为什么会突然烧掉",
    "每个月该存下多少钱比较合理",
    "开会效率低一般是什么原因",
    "周杰伦是哪一年出道的",
    "药店的处方药和非处方药怎么区分",
    "怎么养成早睡的习惯",
    "地铁为什么晚上要停运",
    "体检前一天需要注意什么",
    "怎么跟父母沟通比较好",
    "一天喝多少水才算够",
    "解释一下心率带是怎么测心跳的",
    "为什么会员都默认自动续费",
    "足球的越位规则是什么",
    "汽油发动机是怎么工作的",
    "电影院排片是怎么决定的",
    "为什么手机合约一般签两年",
    "给我写一首关于大海的短诗",
    "跑步前要不要拉伸",
    "怎么才能记住朋友的生日",
    "轮胎冬天为什么容易缺气",
)
# What a tool that gives advice says of itself, and one that gives records or figures
ADVICE = ("gives advice and step-by-step instructions on how to do something",
          "explains how to handle a situation", "告诉你该怎么做的建议和步骤")
RECORDS = ("looks up current figures and records", "shows the user's own saved items", "查询实时数据和记录")

# a file named with its extension: "plan.md", "receipts/发票.txt"
_FILE = re.compile(r"\w\.[a-z][a-z0-9]{0,4}\b", re.IGNORECASE)
# a code of six letters and digits or more, both in it: a record's (a commit "a1b2c3d", an order
# "AB12345"), which a question of knowledge does not name
_CODE = re.compile(r"(?<![a-z0-9-])(?=[a-z0-9]*\d)(?=[a-z0-9]*[a-z])[a-z0-9]{6,}(?![a-z0-9-])", re.IGNORECASE)
_KEPT = ("named", "follow_up")  # choices this never turns (a value's: "value ...")


@dataclass(frozen=True)
class Calibration:
    request: float = 0.18  # a question less likely than this to be a request is one of knowledge
    advice: float = 0.08  # a tool's description this much closer to ADVICE than RECORDS gives advice
    steps: int = 2000  # of the fit
    ridge: float = 0.3


class Knowledge:
    """The probability that a question is a request, by a logistic reading of the encoder's
    vectors fitted on ``REQUESTS`` and ``KNOWLEDGE`` (the same fit every time: no randomness);
    and whether a tool gives advice."""

    def __init__(self, meaning: MeaningRouter, calibration: Calibration = Calibration()) -> None:
        self.meaning, self.calibration = meaning, calibration
        self._fit: tuple[np.ndarray, float] | None = None
        self._lock = threading.Lock()

    def warm(self) -> None:
        self._weights()

    def request(self, question: str) -> float:
        import numpy as np

        weights, bias = self._weights()
        (q,) = self.meaning.embed("query", [question], keep=False)
        return float(1 / (1 + np.exp(-(q @ weights + bias))))

    def gives_advice(self, tool: ToolSchema) -> bool:
        (text,) = self.meaning.embed("passage", [first_sentence(str(tool.get("description") or ""))])
        advice = self.meaning.embed("passage", list(ADVICE)) @ text
        records = self.meaning.embed("passage", list(RECORDS)) @ text
        return float(advice.max() - records.max()) >= self.calibration.advice

    def _weights(self) -> tuple[np.ndarray, float]:
        import numpy as np

        with self._lock:
            if self._fit is None:
                x = self.meaning.embed("query", [*REQUESTS, *KNOWLEDGE])
                y = np.array([1.0] * len(REQUESTS) + [0.0] * len(KNOWLEDGE), dtype=np.float32)
                weights, bias = np.zeros(x.shape[1], dtype=np.float32), 0.0
                for _ in range(self.calibration.steps):  # gradient steps on the ridge-penalised log loss
                    error = 1 / (1 + np.exp(-(x @ weights + bias))) - y
                    weights -= 2.0 * (x.T @ error + self.calibration.ridge * weights) / len(y)
                    bias -= 2.0 * float(error.mean())
                self._fit = (weights, bias)
            return self._fit


class Knowing:
    """A router (``loop.routing.Router``) that asks ``router`` and turns its choice of tools into
    an answer in text when the question is one of knowledge (``Knowledge``), by "knowledge", with
    the probability it was a request and the least that keeps the call."""

    def __init__(self, router: Router, knowledge: Knowledge) -> None:
        self.router, self.knowledge = router, knowledge

    def warm(self) -> None:
        if (warm := getattr(self.router, "warm", None)) is not None:
            warm()
        self.knowledge.warm()

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        choice = self.router.choose(request)
        if (choice is None or choice.mode != "required" or choice.by in _KEPT or choice.by.startswith("value ")
                or request.asked or _FILE.search(request.question) or _CODE.search(request.question)):
            return choice
        if any(self.knowledge.gives_advice(tool) for tool in _tools(request.tools, choice.allowed)):
            return choice
        needs = self.knowledge.calibration.request
        if (score := self.knowledge.request(request.question)) >= needs:
            return choice
        return replace(choice, mode="none", allowed=(), top=(("request", score),), threshold=needs, by="knowledge")


def _tools(tools: Sequence[ToolSchema], names: Sequence[str]) -> list[ToolSchema]:
    return [tool for tool in tools if tool["name"] in names]
