"""Words people say for what a tool's description names, by meaning, in English and Chinese.

A tool without cues (``cues.py`` has the built-in tools'; an MCP tool, a user's tool) is routed
by the words of its description's first sentence (``repl.embedded.words.routed``). Those words are English
and formal: "Get current time in a specific timezone" is found in "Which time is it in Lima now?"
but not in "利马现在几点？", and "Convert an amount of money from one currency to another" not in
"50 dollars as euros". ``widened`` adds, for each such word this table knows, the everyday words
of the same meaning. It is a small general dictionary of what tools are commonly about, not a
list of any evaluation's requests; a tool whose topic it lacks is routed by its own words alone,
and, where none of them is found, by the router by meaning, which reads its examples.

A Chinese word here is found anywhere in a question (Chinese has no spaces), so each is two
characters or more and means the topic on its own ("买" alone would be found in "买单").
"""

from __future__ import annotations

from collections.abc import Iterable

# description word (singular, lower case) -> words of the same meaning people use
GLOSS: dict[str, tuple[str, ...]] = {
    # time and dates
    "time": ("o'clock", "what time", "too late", "too early", "daytime", "by now",
             "still up", "awake", "still at work", "business hours", "office hours",
             "morning or", "day or night", "decent hour", "asleep", "what hour", "already morning",
             "already night", "wake", "几点", "时间", "钟点", "这个点", "这会儿", "白天", "半夜", "凌晨", "还在上班",
             "下班了没", "上班时间"),
    # a generic word of a description: found only beside a topic's (``repl.embedded.words.routed``)
    "current": ("now", "right now", "by now", "at the moment", "currently", "现在", "此刻", "这个点", "这会儿", "眼下"),
    "clock": ("o'clock", "几点", "时钟"),
    "timezone": ("time zone", "时区", "几点"),
    "date": ("what day", "today's date", "日期", "几号", "星期几", "哪一天"),
    "calendar": ("schedule", "agenda", "日历", "日程", "安排"),
    "event": ("appointment", "日程", "活动"),
    "meeting": ("call with", "会议", "开会"),
    "alarm": ("wake me", "闹钟", "叫醒"),
    "timer": ("countdown", "计时", "倒计时"),
    "reminder": ("remind", "提醒"),
    # money
    "currency": ("dollar", "euro", "in euros", "in dollars", "yen", "pound", "yuan", "rmb", "peso", "franc", "rupee",
                 "美元", "美金", "欧元", "日元", "英镑", "人民币", "港币", "汇率", "外币", "货币"),
    "money": ("dollar", "euro", "cash", "多少钱", "块钱"),
    "exchange": ("汇率", "兑换", "换成"),
    "convert": ("换算", "转换", "换成", "兑换", "折合"),
    "price": ("cost", "costs", "how much", "价格", "价钱", "多少钱"),
    "stock": ("share price", "股票", "股价"),
    "payment": ("pay", "付款", "支付"),
    "budget": ("spending", "预算", "开销"),
    # shopping and food
    "shopping": ("groceries", "grocery", "supermarket", "store", "shop", "ran out of", "run out of", "running low",
                 "running out", "pick up some", "购物", "超市", "要买", "得买", "采购", "买东西", "买菜", "用完了",
                 "见底"),
    "buy": ("purchase", "要买", "买些", "买点", "购买"),
    "recipe": ("cook", "how to make", "菜谱", "食谱", "做法"),
    "restaurant": ("eat out", "餐厅", "饭店", "餐馆"),
    # places and travel
    "distance": ("how far", "距离", "多远"),
    "route": ("directions", "how do i get", "路线", "怎么走"),
    "map": ("地图",),
    "flight": ("fly", "plane", "航班", "机票", "飞机"),
    "hotel": ("酒店", "宾馆", "住宿"),
    "train": ("railway", "火车", "高铁"),
    "traffic": ("commute", "交通", "堵车"),
    # weather and the home
    "weather": ("forecast", "rain", "snow", "sunny", "天气", "下雨", "下雪", "气温"),
    "temperature": ("how hot", "how cold", "degrees", "温度", "气温", "多少度"),
    "light": ("lamp", "电灯", "开灯", "关灯"),
    "thermostat": ("heating", "暖气", "空调"),
    # words and knowledge
    "translate": ("in english", "in chinese", "in french", "翻译", "怎么说"),
    "definition": ("what does", "meaning", "意思", "定义", "什么意思"),
    "define": ("meaning", "意思", "定义"),
    "dictionary": ("meaning", "词典", "字典"),
    "search": ("look up", "搜索", "查找", "搜一下", "查一下"),
    "news": ("headlines", "新闻", "头条"),
    "wikipedia": ("维基",),
    # messages and people
    "email": ("mail", "inbox", "邮件", "邮箱"),
    "message": ("sms", "消息", "短信"),
    "contact": ("phone number", "联系人", "电话号码"),
    "phone": ("phone number", "电话", "手机"),
    # files, notes, tasks
    "file": ("document", "文件", "文档"),
    "folder": ("directory", "文件夹", "目录"),
    "note": ("memo", "笔记", "备忘"),
    "task": ("to-do", "todo", "任务", "待办"),
    "todo": ("to-do", "task", "任务", "待办"),
    "password": ("passcode", "密码"),
    "photo": ("picture", "image", "照片", "图片"),
    "image": ("picture", "photo", "图片", "图像"),
    # media
    "music": ("song", "音乐", "歌曲", "放首歌"),
    "song": ("music", "歌曲", "音乐"),
    "video": ("movie", "film", "视频", "电影"),
    "book": ("novel", "书籍", "小说"),
    "podcast": ("episode", "播客"),
    # numbers
    "calculate": ("compute", "how much is", "计算", "算一下", "等于多少"),
    "unit": ("kilometers", "miles", "pounds", "kilograms", "单位", "公里", "英里", "公斤"),
    "random": ("pick one", "dice", "随机", "抽签"),
    "population": ("how many people", "人口"),
}


# the verb of a tool's name ("add" of add_todo, "search" of search_notes) -> words people use
# for that action. Said together with a word for the thing the name ends with ("save a note",
# "添加一个待办", "mark todo 3 as done"), they point to that tool (``repl.embedded.words.routed``). Only
# actions whose words are no state or question: "done" and 完成 also ask which are finished,
# "which" and 哪些 also ask which file mentions something, so "complete" and "list" have none of
# them; nor "make" ("make a list of my todos"). Chinese words are two characters or more (记 is
# inside 笔记).
ACTIONS: dict[str, tuple[str, ...]] = {
    "add": ("add", "put", "save", "create", "添加", "加个", "加一", "加上", "新建", "新增", "记一", "记个",
            "记下", "存一"),
    "complete": ("mark", "tick", "check off", "cross off", "标记", "勾掉", "划掉"),
    "delete": ("delete", "remove", "drop", "get rid of", "删掉", "删除", "去掉"),
    "update": ("change", "rename", "edit", "update", "move", "postpone", "修改", "改成", "改为", "推迟"),
    "search": ("search", "find", "look for", "look up", "dig up", "搜一", "搜索", "找一", "找找", "查找"),
    "read": ("read", "open", "读一", "打开"),
    "convert": ("convert", "换成", "换算", "兑换", "折合", "转换"),
}


# cue -> words and phrases that hold it and mean something else: a cue is not found inside one
# ("冷笑话" is a corny joke, not cold weather; "the second time today" asks no clock). General
# language, for the cues that have such senses, not any evaluation's requests.
NOT_MEANT: dict[str, tuple[str, ...]] = {
    "冷": ("冷笑话", "冷笑", "冷知识", "冷静", "冷门", "冷漠", "冷淡", "冷落", "冷场", "冷战", "冷眼", "冷藏", "冷冻",
          "冷饮", "冷盘", "高冷", "泼冷水"),
    "热": ("热门", "热情", "热闹", "热点", "热爱", "热心", "热搜", "热线", "热身", "热量", "发热", "热水", "加热",
          "热度", "热烈", "热播", "热销", "热恋", "狂热", "亲热", "热狗", "热词"),
    "乘": ("乘客", "乘坐", "乘车", "乘机", "搭乘", "乘务", "乘胜", "乘风"),
    "减": ("减肥", "减少", "减轻", "减压", "减速", "减负", "削减"),
    "time": ("last time", "next time", "every time", "each time", "first time", "second time", "third time",
             "this time", "that time", "one time", "some time", "any time", "a long time", "same time",
             "free time", "spare time", "good time", "great time", "hard time", "on time", "in time",
             "at a time", "time after time", "times"),
    "cold": ("have a cold", "has a cold", "had a cold", "got a cold", "caught a cold", "catch a cold",
             "catching a cold", "cold feet", "cold call", "cold shoulder", "cold brew", "cold case"),
    "时间": ("时间过得", "花时间", "没时间", "有时间", "浪费时间", "一段时间", "长时间", "第一时间", "时间管理"),
    "hot": ("hot dog", "hot take", "hot topic", "hot sauce", "hot pot", "hot tub"),
    "wind": ("wind down", "wind up", "winding"),
    "forecast": ("economic forecast", "sales forecast", "revenue forecast", "budget forecast", "market forecast",
                 "growth forecast", "forecast for growth", "forecast for sales"),
    "半夜": ("到半夜",),
}


def widened(words: Iterable[str]) -> list[str]:
    """``words`` (a description's words, lower case) and, after each the table knows (a plural
    alike: "currencies", "timezones"), its everyday words of the same meaning; each once."""
    out: dict[str, None] = {}
    for word in words:
        out[word] = None
        for cue in GLOSS.get(_singular(word), ()):
            out[cue] = None
    return list(out)


def _singular(word: str) -> str:
    if word in GLOSS:
        return word
    for suffix, instead in (("ies", "y"), ("es", ""), ("s", "")):
        if word.endswith(suffix) and (stem := word[: -len(suffix)] + instead) in GLOSS:
            return stem
    return word
