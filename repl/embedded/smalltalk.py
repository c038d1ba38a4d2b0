"""Small talk: a message that is nothing but greetings, thanks, farewells and pleasantries.

Such a message needs no tool, yet the 0.5B model answered a goodbye with a
call to ``get_weather`` whatever the prompt said (docs/LOCAL_MODEL.md, "How a tool is
chosen"). ``is_small_talk`` is the pure test the words router (``repl/embedded/words.py``)
uses to send such a turn to no tool, answered in text. A message is small talk when, after punctuation, emoji and case are set aside,
it is made entirely of the phrases below (English and Chinese, in any order and number);
anything left over ("Thanks! And what about the weather?", "你好，帮我算一下") and it is not.
"""

from __future__ import annotations

import re
import unicodedata

# English: one pattern per way of saying it; words separated by single spaces once the
# message is normalised (lower case, punctuation gone, apostrophes kept).
_EN = [
    r"h(i|ello|ey|iya|owdy|ullo)+", r"yo", r"greetings", r"hey+a?", r"good (morning|afternoon|evening|day)",
    r"(morning|evening|afternoon)", r"(what's|whats|what is) (up|new|good)", r"sup",
    r"how (are|r) (you|u)( (doing|going))?", r"how('s| is) (it going|everything|life|your day)",
    r"how (are|have) things( been)?", r"how have you been", r"how do you do", r"how you doing",
    r"(i'm|i am|im) (fine|good|great|well|ok|okay|doing (well|good|great|fine))( too)?",
    r"(very )?(nice|glad|good|great|pleased|lovely) to (meet|see) you", r"long time no see",
    r"welcome back", r"(and )?(you too|same to you|likewise)",
    r"thanks?( you)?( (so|very) much| a (lot|bunch|ton|million))?", r"many thanks", r"thx", r"ty",
    r"cheers", r"(much )?appreciated", r"(i )?(really )?appreciate (it|that|your help)",
    r"(that's|that is|that was) (great|helpful|perfect|all|it|enough|everything)",
    r"(that's|that is|it's|it is) (exactly |just )?what i (needed|wanted|was looking for)",
    r"(no problem|no worries|you're welcome|np)",
    r"(that's|that is|that'll be|that will be) all( i need(ed)?)?", r"nothing else",
    r"(i'm|i am|im) (done|all set|good)", r"no more questions",
    r"(good ?)?bye+( bye)?", r"bye for now", r"see (you|ya|u)( (later|soon|around|again|next time))?",
    r"(catch|talk to|speak to) (you|ya|u)( (later|soon))?", r"(talk|speak) (later|soon)", r"later",
    r"take care", r"have a (nice|good|great|lovely|wonderful) (one|day|evening|night|weekend|time)",
    r"(good )?night", r"sleep well", r"farewell",
]
# Words that only address or time the phrase around them: "hi there", "thanks again, friend",
# "see you soon", "that is all".
_EN_FILLER = [
    r"there", r"again", r"everyone", r"everybody", r"all", r"friend", r"buddy", r"mate", r"pal",
    r"assistant", r"bot", r"glassloop", r"dear", r"guys", r"folks", r"so much", r"very much",
    r"for (now|today|the day|the moment|your help|that|everything|all your help)",
    r"(today|tonight|tomorrow|then|btw|too|oh|well|and|so|but|just|indeed|really|sir|ma'am)",
    r"(on|next) (monday|tuesday|wednesday|thursday|friday|saturday|sunday|week)",
    r"in the morning", r"you",
    # a confirmation alone may answer the model's own question ("Shall I add it?" "ok"): it
    # goes with a phrase ("ok, thanks"), never makes a message small talk by itself
    r"(ok|okay|alright|all right|got it|sounds good|yes|yeah|sure)",
    r"(great|perfect|awesome|cool|nice|lovely|wonderful|excellent|fantastic|brilliant)",
]
# Chinese: no spaces between words, so the patterns join one after the other.
_ZH = [
    r"[你您]好", r"大家好", r"嗨", r"哈[喽啰罗]", r"嘿", r"喂", r"早(上好|安|晨好)?", r"(上午|中午|下午|晚上)好",
    r"在吗", r"在不在", r"(你|您)?(今天|最近|近来)?(怎么样|好吗|还好吗|过得(怎么样|好吗|还好吗)|好不好)",
    r"(很|非常|真)?(高兴|开心|荣幸)(认识|见到)(你|您)", r"(认识|见到)(你|您)(很|真)?(高兴|开心)", r"幸会",
    r"久仰", r"好久不见", r"欢迎回来", r"我(很好|挺好|不错|还行)", r"(你|您)也是",
    r"(非常|十分|太|真)?(谢谢|感谢|多谢|谢了|谢啦)(你|您)?(了|啦)?", r"辛苦(你|您)?了", r"麻烦(你|您)了",
    r"不客气", r"没关系", r"没(有)?(别的|其他|其它|什么)?(事|问题)(了|啦)?", r"没事(了|啦)?",
    r"就(这些|这样|这么多)(了|吧|啦)?", r"(暂时|先)?(没有|没)了", r"再见", r"拜拜?", r"(回头|明天|下次|改天|一会儿?|待会儿?|晚点|周[一二三四五六日末])见",
    r"晚安", r"先(这样|走了|撤了|下了)", r"保重", r"(祝(你|您)?)?(有)?(美好的一天|(周末|节日|假期|旅途|新年|生日)?愉快|好梦|一切顺利)",
    r"(回头|下次|改天)(再)?聊",
]
_ZH_FILLER = [r"[啊呀哦喔哈吧呢啦嘛哇了]", r"(你|您)", r"(朋友|小助手|助手|大家|各位)", r"(今天|明天|再次)",
              r"(好的|好|行|可以|嗯|嗯嗯|明白|知道|收到|了解|是的|对)(了|啦)?", r"太(好|棒)了", r"(很|真)?(棒|厉害|不错)"]

# A confirmation ("ok", "yes, go ahead", "好的"): an answer to a question, and small talk only
# when no question was asked (``is_confirmation``; the dialect's gate checks the question).
_CONFIRM = [
    r"(ok|okay|alright|all right|got it|sounds (good|great|fine)|yes|yeah|yep|sure|fine|right|cool|great|perfect)",
    r"(go ahead|do it|please do|will do|understood|noted|makes sense|that works|that's fine|that is fine)",
    r"((that )?works for me|fine (by|with) me)",
    r"(好的|好吧|好|行|可以|嗯+|对|是的|没问题|明白(了)?|知道(了)?|收到|了解|就这样(吧)?|就这么(办|定了)(吧)?)",
]

_PHRASE = re.compile("|".join(_EN + _ZH))
_FILLER = re.compile("|".join(_EN_FILLER + _ZH_FILLER))
_CONFIRMATION = re.compile("|".join(_CONFIRM))
_NOT_SPEECH = re.compile(r"[^\w\s']")  # punctuation, symbols, emoji
_LATIN = re.compile(r"[a-z0-9']")
_MAX_CHARS = 120  # longer than any greeting: a message that long says something
# Checked before normalising, which costs time and memory in proportion to the text (a 5 MB
# paste: 9 s, 1.9 GB); room for the punctuation, emoji and spaces that normalising drops.
_MAX_RAW_CHARS = 4 * _MAX_CHARS


def normalise(text: str) -> str:
    """Lower case, compatibility forms (full-width letters), curly apostrophes straight,
    every punctuation mark, symbol and emoji a space."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("`", "'")
    return " ".join(_NOT_SPEECH.sub(" ", text).split())


def is_small_talk(text: str) -> bool:
    """True when ``text`` is only greetings, thanks, farewells or pleasantries (and the words
    that address them): an answer needs no tool. Empty or symbol-only text is not small talk."""
    if len(text) > _MAX_RAW_CHARS:
        return False
    words = normalise(text)
    return 0 < len(words) <= _MAX_CHARS and _covered(words)


def is_confirmation(text: str) -> bool:
    """True when ``text`` only agrees or acknowledges ("ok, sounds good", "yes, go ahead",
    "好的，没问题"), with the words that address it: it answers a question, if one was asked."""
    if len(text) > _MAX_RAW_CHARS:
        return False
    words = normalise(text)
    return 0 < len(words) <= _MAX_CHARS and _covered(words, _CONFIRMATION)


def _covered(words: str, phrases: re.Pattern[str] = _PHRASE) -> bool:
    """Whether ``words`` splits into phrases and fillers with at least one phrase ("you",
    "today", "了" alone are not small talk). Each start is tried once (a table, not regex
    backtracking: "bye bye bye ..." splits in exponentially many ways)."""
    n = len(words)
    # ends[i]: where a piece may end. Not inside a Latin word: "hi" is no piece of "hike".
    ends = [i for i in range(1, n + 1)
            if i == n or not (_LATIN.match(words, i - 1) and _LATIN.match(words, i))]
    done = {n: (True, False)}  # start -> (can reach the end, with a phrase on the way)
    for start in range(n - 1, -1, -1):
        if words[start] == " " or (start and _LATIN.match(words, start - 1) and _LATIN.match(words, start)):
            continue
        reach, phrase = False, False
        for end in ends:
            after = end + 1 if end < n and words[end] == " " else end
            if end <= start or after not in done or not done[after][0]:
                continue
            if phrases.fullmatch(words, start, end):
                reach, phrase = True, True
                break
            if _FILLER.fullmatch(words, start, end):
                reach, phrase = True, phrase or done[after][1]
        done[start] = (reach, phrase)
    return done.get(0, (False, False)) == (True, True)
