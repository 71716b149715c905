"""Regular expressions shared by the rule-based extractors (English and Chinese).

Nothing here decides anything; :mod:`ctxwise.memory.facts` and :mod:`ctxwise.memory.user`
combine these into facts and memory operations. All patterns work on the user's raw text so
that every match is a verbatim span (same digits, same unit).

Every pattern is linear in the length of the text: each repeat has a small bound (no ``+``,
``*`` or ``{n,}``), and the patterns that scan runs of letters or digits start only where such
a run starts (a lookbehind), so a 64 KB hash, base64 or minified line costs one pass, not one
pass per character (``tests/hostile/test_linear_patterns.py`` holds the rule).
"""

from __future__ import annotations

import re

I = re.IGNORECASE

# -- splitting ------------------------------------------------------------------------

SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s{1,64}|\n{1,64}|(?<=[。！？；;])")
"""Sentence ends: ``. ! ?`` followed by space, a newline, or a CJK end mark."""

CLAUSE_SPLIT = re.compile(r",\s{1,64}(?!(?:19|20)\d\d\b)|，")
"""Clause breaks: an ASCII comma followed by space (so ``1,200`` stays whole; not before a
year, so ``May 27, 2024`` stays whole) or ``，``."""

CONDITIONAL_START = re.compile(
    r"^(?:and\s{1,8}|but\s{1,8}|so\s{1,8})?(?:if|unless|when|once|as long as|provided(?: that)?|in case|only if)\b"
    r"|^(?:要是|如果|假如|万一|除非|只要|一旦|若)",
    I,
)
CONDITIONAL_END = re.compile(r"的话$")

# -- values ---------------------------------------------------------------------------

NUM = r"(?<![\d,])(?:\d{1,3}(?:,\d{3}){1,8}(?:\.\d{1,12})?|\d{1,30}(?:\.\d{1,12})?)"
CURRENCY_WORDS = (
    r"USD|EUR|GBP|CNY|RMB|JPY|HKD|CHF|CAD|AUD|dollars?|euros?|bucks|pounds?|yuan|"
    r"万元|元|块钱|块|美元|欧元|英镑|日元|港币"
)
AMOUNT = re.compile(
    rf"(?:US\$|[$€£¥￥]|\b(?:USD|EUR|GBP|CNY|RMB)\s?)\s?(?:{NUM})(?:\s?(?:k|K|万|千)\b)?"
    rf"|(?:{NUM})\s?(?:k|K|万|千)?\s?(?:{CURRENCY_WORDS})(?![A-Za-z])",
)
CURRENCY_NORM = [
    (re.compile(r"€|EUR|euros?", I), "EUR"),
    (re.compile(r"US\$|\$|USD|dollars?|bucks", I), "USD"),
    (re.compile(r"£|GBP|pounds?", I), "GBP"),
    (re.compile(r"日元|JPY", I), "JPY"),
    (re.compile(r"港币|HKD", I), "HKD"),
    (re.compile(r"¥|￥|CNY|RMB|yuan|元|块", I), "CNY"),
]

MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
WEEKDAY = r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day"
DATE = re.compile(
    r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b"
    r"|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
    rf"|\b{MONTH}\.?\s{{1,8}}\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s{{1,8}}\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s{{1,8}}(?:of\s{{1,8}})?{MONTH}\b(?:,?\s{{1,8}}\d{{4}})?"
    r"|\b\d{1,2}(?::\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.)(?:\s?(?:EST|EDT|PST|PDT|CST|CDT|UTC|GMT))?"
    r"|\b\d{1,2}:\d{2}\b"
    rf"|\b(?:next|this|last|on|by|until)\s{{1,8}}(?:{WEEKDAY}|week|month|weekend)\b"
    r"|\b(?:tomorrow|tonight|end of (?:the )?(?:day|week|month|year))\b"
    r"|(?:\d{4}年)?\d{1,2}月\d{1,2}[日号]?"
    r"|(?:今天|明天|后天|大后天|昨天|前天|今晚|明晚|[上下这本]个?(?:周|星期|礼拜)[一二三四五六日天]?|月底|月初|年底|周末)"
    r"|(?:周|星期|礼拜)[一二三四五六日天]"
    r"|(?:上午|下午|晚上|早上|中午)?\d{1,2}[点时](?:\d{1,2}分|半)?",
    I,
)
DEADLINE_WORDS = re.compile(r"\b(?:by|deadline|due|no later than|at the latest)\b|截止|之前|以前|最晚|最迟", I)
DATE_WORDS = re.compile(r"\bdate\b|日期", I)

EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}")
PHONE = re.compile(r"(?<![\w#])\+?\d[\d -]{8,30}\d(?!\w)")
USER_HANDLE = re.compile(r"(?<!\w)[a-z]{1,32}(?:_[a-z]{1,32}){1,6}_\d{1,12}\b")
TOKEN_WITH_DIGIT = re.compile(
    r"#[A-Za-z]{0,16}\d[\w-]{0,64}"
    r"|(?<![A-Za-z0-9_])(?=[A-Za-z0-9_-]{0,64}\d)(?=[A-Za-z0-9_-]{0,64}[A-Za-z])[A-Za-z0-9][A-Za-z0-9_-]{3,64}\b"
    r"|(?<![\d,.])\d{4,40}(?![\d,.]?\d)"
)
ADDRESS_NUM = re.compile(r"\b(?:suite|room|apt\.?|apartment|unit|floor|building)\s{0,8}#?(\d{1,8}[A-Za-z]?)\b|(?<!\d)(\d{1,8})(?:号楼|室|单元|号房)", re.I)
NAME = re.compile(r"\b(?i:my name is) ([A-Z][a-z]{0,40}(?: [A-Z][a-z]{0,40}){0,3})|我叫([\u4e00-\u9fff]{2,4})")

ID_SLOTS: list[tuple[str, re.Pattern[str], bool]] = [
    # (slot, words before the value, single-valued)
    ("user_id", re.compile(r"user\s?(?:id|name)|username|用户\s?(?:id|ID|名)|账号|帐号", I), True),
    ("order_id", re.compile(r"\border|订单", I), False),
    ("reservation_id", re.compile(r"reservation|booking|confirmation|预订|预约", I), False),
    ("flight", re.compile(r"\bflights?\b|航班", I), False),
    ("card", re.compile(r"\bcard\b|ending (?:in|with)|尾号|卡号|卡", I), False),
    ("zip", re.compile(r"\bzip|postal|postcode|邮编", I), True),
    ("phone", re.compile(r"phone|mobile|电话|手机", I), True),
    ("tracking", re.compile(r"tracking|运单|快递单", I), False),
    ("item_id", re.compile(r"\bitem|product|商品|产品", I), False),
]

# -- quantities and bounds ----------------------------------------------------------------

NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}
QTY_EN = re.compile(
    rf"\b({NUM}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s{{1,8}}"
    r"((?:[a-z][a-z-]{0,40}\s{1,8})?[a-z][a-z-]{0,40})",
    I,
)
QTY_STOP = {
    "am", "pm", "of", "and", "or", "to", "in", "on", "at", "the", "a", "an", "for", "is",
    "are", "was", "were", "with", "by", "from", "more", "less", "than", "that", "this", "it",
    "if", "but", "so", "as", "i", "you", "we", "please", "thanks", "thank", "would",
    "could", "should", "will", "can", "has", "have", "had", "do", "does", "did", "be",
    "when", "then", "too", "also", "time", "times", "way", "ways", "my", "your", "me",
    "instead", "now", "then", "only", "each", "per", "total", "again", "already", "yet",
    "here", "there", "left", "right", "ago", "later", "earlier", "before", "after", "or",
    "st", "nd", "rd", "th", "eur", "usd", "gbp", "cny", "rmb", "dollars", "euros",
}
DISTANCE_UNITS = {"km", "kms", "kilometer", "kilometers", "kilometre", "kilometres", "mile", "miles", "mi", "m", "meters", "metres", "公里", "千米", "米"}
QTY_ZH = re.compile(
    rf"({NUM}|(?<![一二两三四五六七八九十百千])[一二两三四五六七八九十百千]{{1,8}})\s?"
    r"(个人|个|人|位|件|台|晚|天|张|次|份|名|间|周|小时|分钟|公里|千米|米|公斤|斤|步|级|层|岁|年|箱|瓶|双|套|条)"
)

UPPER_BOUND = re.compile(
    r"\b(?:under|below|less than|fewer than|up to|at most|no more than|not more than|"
    r"not over|not exceeding|not to exceed|no higher than|max(?:imum)?|within|cap(?:ped)? at|"
    r"tops)\b|以内|以下|之内|不超过|不要超过|不能超过|最多|不高于|封顶|上限|(?<=[\d里米天时钟元块])\s?内",
    I,
)
LOWER_BOUND = re.compile(
    r"\b(?:at least|more than|over|above|minimum|min|no less than|not less than|no fewer than)\b"
    r"|以上|至少|不少于|不低于|起码|下限|超过",
    I,
)
BUDGET_WORDS = re.compile(
    r"\b(?:budget|spend|spending|cost|costs|price|prices|pay|afford|total)\b|预算|花费|价格|价位|费用|总价|总共|开销",
    I,
)
CORRECTION = re.compile(
    r"\b(?:actually|instead|rather|correction|i mean|i meant|change (?:it |that )?to|make it|"
    r"scratch that|on second thought|changed my mind)\b|其实|改成|改为|改到|换成|不对|更正|算了|还是改",
    I,
)

# -- clause kinds ---------------------------------------------------------------------

GOAL = re.compile(
    r"\b(?:i(?:['’]d| would)? (?:like|want|need|wish|hope) to|i['’]?m (?:looking|trying|hoping) to|"
    r"i want (?:a|an|the|my|it|them)\b|i need (?:a|an|the|my|it|them)\b|help me\b(?! with (?:that|this|it)\b| out\b)|"
    r"i['’]?d like (?:a|an|the|my|it|them)\b|i (?:want|need) (?:it|them) (?:to be )?(?:fixed|returned|refunded|replaced))"
    r"|我想|我要|想要|帮我|希望能?|我需要|想退|想换|要退|要换|退货|退款|换货",
    I,
)
PREFERENCE = re.compile(
    r"\b(?:i (?:really |would |['’]d )?prefer|i['’]d rather|i would rather|prefers?|i (?:really )?like|"
    r"i love|i['’]?m a fan of|my favou?rite|i usually|i always)\b"
    r"|更喜欢|喜欢|偏好|倾向于?|最好|更倾向|习惯用?",
    I,
)
PROHIBITION = re.compile(
    r"^(?:(?:and|but|so|also|oh|and also),?\s{1,8})?(?:please\s{1,8})?(?:don['’]?t|do not|never|avoid|stop)\b"
    r"|\bplease (?:don['’]?t|do not|never|avoid)\b|^no\s{1,8}[a-z]{1,40}(?:\s{1,8}[a-z]{1,40})?(?:,?\s{1,8}please)\b"
    r"|请勿|禁止|千万别|千万不要|^别|^请不要|不许|不准",
    I,
)
NEGATION = re.compile(
    r"\b(?:not|no|never|none|without|nothing|neither|nor)\b|n['’]t\b"
    r"|不要|不想|不用|不需要|不能|不可以|不会|没有|不再|不接受|不超过|不买|不做|不退|不换|不行",
    I,
)
NEGATION_NOISE = re.compile(
    r"\b(?:don['’]?t|do not|doesn['’]?t|didn['’]?t|not|can['’]?t|cannot)\s{1,8}(?:really\s{1,8})?(?:remember|recall|know|have|think|"
    r"see|understand|mind|sure|find|seem|worry)\b|\bno (?:problem|worries|rush|need)\b|\bnot sure\b|\bno,? thanks?\b"
    r"|不知道|不记得|不清楚|没关系|不客气|不好意思|不用谢|不错",
    I,
)
CONDITION = re.compile(
    r"\b(?:if|unless|only if|as long as|provided that|in case|otherwise)\b|要是|如果|假如|万一|除非|只要|一旦|的话|否则",
    I,
)
