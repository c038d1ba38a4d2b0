"""The built-in tools' cues: words by meaning, in English and Chinese, that show a question wants
the tool ("rain", "umbrella", "下雨"), by tool name. The embedded model's first router
(``words.py``, ``routed``) offers a question's first step only the tools whose cues it finds; a
tool without cues here (a user's, an MCP server's) is found by its description's first sentence,
widened by ``gloss.py``. The cues belong to the words router, not to the tools: ``Tool`` carries
only the text every router may read (name, description, parameters, examples).
"""

from __future__ import annotations

from collections.abc import Mapping

from tools.registry import Registry

# A cue that is no word: the tool's other cues are found only in a question that gives a number
# (the calculator: "how many" asks it for "How many boxes are 24 and 17?", not for a count of
# things in the world)
NUMBER_CUE = "<number>"
# A cue that is no word: found when a question says something must be done by a day ("by
# Friday I have to...", "月底前要交..."), the mark of a todo (a note has no due date)
DUE_CUE = "<due>"

BUILT_IN_CUES: dict[str, tuple[str, ...]] = {
    "list_todos": (
        "todo", "task", "to-do", "to do list", "still open", "unfinished", "pending", "left to do",
        "putting off", "backlog", "get done", "haven't done", "haven't finished",
        "haven't ticked", "haven't crossed", "haven't checked off", "haven't gotten to", "what's due", "promised to", "i promised", "got left",
        "marked urgent", "high priority", "low priority", "优先级",
        "待办", "任务", "没完成", "没做完", "还没做", "没干", "要做的事", "没办完", "没弄完", "没收尾", "手头还有", "手上还有",
        "待处理", "没搞定", "没勾", "没划掉", "没处理", "还剩哪些", "答应了要", "答应过"),
    "get_todo": ("details of", "more about", "展开", "详情", "详细"),
    # DUE_CUE: a todo has a due date, a note none
    "add_todo": (
        "remind me", "don't forget", "do not forget", "add a task", "add a todo", "new task",
        "need to remember to", "high priority", "low priority", DUE_CUE, "forget to",
        "help me remember to", "slip my mind", "slip through", "slipping through", "slips my mind", "slip past",
        "set a reminder", "on my list", "to my list", "meaning to", "put it down",
        "提醒我", "别忘了", "记得要", "加个待办", "添加任务", "新任务", "优先级", "别让我忘", "提个醒", "帮我记", "记上",
        "挂个提醒"),
    "update_todo": ("rename", "postpone", "move the due", "change the priority", "改成", "推迟", "改一下"),
    "complete_todo": (
        "mark it done", "mark as done", "finished", "completed", "tick off", "做完了", "完成了", "搞定了"),
    "delete_todo": ("delete", "remove the task", "drop the task", "删掉", "删除", "去掉"),
    "add_note": (
        "note down", "jot down", "jot this", "jot that", "write down", "write this down", "take a note",
        "remember that", "remember this",
        "keep this", "save this", "for later", "keep in mind", "put it down",
        "记一下", "记住", "记下来", "写下来", "记个笔记", "备忘", "记着", "帮我记", "存一下", "替我存", "帮我存"),
    "list_notes": ("my notes", "all notes", "所有笔记", "笔记"),
    "search_notes": (
        "did i note", "in my notes", "noted", "wrote down", "jotted", "scribbled", "didn't i write",
        "didn't i save", "didn't i note", "i saved", "saved somewhere", "put down somewhere",
        "did i save", "did i write", "did i note down",
        "didn't i note down",
        "记过", "记了", "笔记里", "备忘", "记在哪", "存过", "记下的", "写过", "存的", "随手写", "随手记"),
    "read_file": (
        "read the", "read me", "read out", "read through", "open", "show me", "say", "content", ".md", ".txt", ".csv", ".json", ".py", ".toml",
        "看一下", "内容", "写了什么", "打开"),
    "list_files": (
        "folder", "directory", "dir", "ls", "in here", "files here", "which files are", "lying around",
        "what documents", "workspace",
        "目录", "文件夹", "哪些文件", "这里有什么", "哪些文档", "什么文档", "哪些资料", "放了哪些"),
    "search_files": (
        "which files", "which file", "which document", "files mention", "mention", "mentions", "talks about",
        "contain", "grep", "which line", "a line with", "that says", "file that has", "files that have", "in these documents",
        "哪个文件", "提到", "包含", "哪个文档", "文档里", "文件里", "哪一行"),
    "get_weather": (
        "weather", "forecast", "rain", "raining", "snow", "wind", "windy", "sunny", "cloudy", "storm",
        "temperature", "degree", "hot", "cold", "warm", "umbrella", "jacket", "coat", "sunglasses",
        "outside", "outdoor", "picnic", "hike", "soaked", "wet", "shorts", "t-shirt", "sweater",
        "freezing", "freeze", "chilly", "humid", "sunscreen", "scarf", "glove",
        "thunderstorm", "thunder", "lightning", "drizzle", "hail", "sleet", "fog", "foggy", "muggy",
        "heatwave", "frost", "icy", "scrape ice", "de-ice", "breezy", "gusty", "overcast", "raincoat", "typhoon", "hurricane",
        "blizzard", "tornado", "below zero",
        "雷阵雨", "打雷", "冰雹", "台风", "雾霾", "大雾", "大风", "降温", "升温", "零下", "闷热", "潮湿",
        "羽绒服", "短裤", "防晒", "天气", "暴雨", "大雨", "短袖", "淋雨", "下雨", "下雪",
        "刮风", "风大", "晴", "阴天", "冻成", "冻得", "冻死", "天儿", "晒成", "晒黑", "暴晒",
        "气温", "温度", "冷", "热", "凉快", "凉不凉", "外套", "厚衣服", "带伞", "雨伞", "把伞", "打伞", "穿什么", "出门", "户外", "爬山", "野餐"),
    # a sum needs numbers: its cues count only in a question that gives one (NUMBER_CUE)
    "calculator": (
        NUMBER_CUE, "how many", "how much", "plus", "minus", "times", "divided", "multiply", "percent", "percentage", "%",
        "+", "*", "×", "÷",
        "sum", "total", "average", "split", "per", "an hour", "before tax", "after tax", "each person", "per person", "apiece",
        "乘", "一共", "总共", "每人", "加上", "减", "除以", "等于", "多少", "百分之", "平均"),
}


def cues_of(registry: Registry) -> Mapping[str, tuple[str, ...]]:
    """The cues of the tools ``registry`` holds as built-in, by name (a user's or an MCP tool
    that took a built-in's name while that one is off has none)."""
    return {name: cues for name, cues in BUILT_IN_CUES.items()
            if (tool := registry.get(name)) is not None and tool.source == "built-in"}
