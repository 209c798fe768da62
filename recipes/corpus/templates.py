"""Seeded sentence templates: each returns the written form and the spoken form of one sentence together, so
numbers, dates, times and amounts are read exactly as intended. Also the loader of the hand-written lists.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache
from pathlib import Path

from recipes.corpus import verbalize as vb

DATA_DIR = Path(__file__).parent / "data"


# -------------------------------------------------------------------------------------------- hand-written


@cache
def load_list(name: str) -> tuple[str, ...]:
    """One sentence per line of data/<name>.txt; '#' starts a comment line."""
    lines = (DATA_DIR / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return tuple(ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#"))


HAND_WRITTEN = {
    "zh": ("everyday_zh", "polyphone_zh", "everyday2_zh", "everyday3_zh", "everyday4_zh"),
    "en": ("everyday_en", "heteronym_en", "everyday3_en"),
    "mixed": ("mixed", "mixed2"),
}

# ------------------------------------------------------------------------------------------------ templates

Pair = tuple[str, str]  # (written, spoken)
Template = Callable[[random.Random], Pair]


def same(s: str) -> Pair:
    """A sentence with nothing to verbalize: written and spoken forms are equal."""
    return s, s


def _fmt(template: str, **slots: str | Pair) -> Pair:
    written = {k: v if isinstance(v, str) else v[0] for k, v in slots.items()}
    spoken = {k: v if isinstance(v, str) else v[1] for k, v in slots.items()}
    return template.format(**written), template.format(**spoken)


ZH_SUBJECTS = [
    "我",
    "我们",
    "小王",
    "李阿姨",
    "张老师",
    "我哥哥",
    "隔壁的刘叔叔",
    "我们班的同学",
    "陈经理",
    "王大夫",
    "表姐",
    "新来的实习生",
]
ZH_WHEN = [
    "明天上午",
    "今天晚上",
    "下周三",
    "这个周末",
    "后天中午",
    "月底",
    "下个月初",
    "过两天",
    "星期五下午",
    "放假以后",
]
ZH_ERRANDS = [
    ("超市", "买点日用品"),
    ("图书馆", "还书"),
    ("医院", "做体检"),
    ("火车站", "接一位老朋友"),
    ("银行", "办一张新卡"),
    ("菜市场", "买新鲜的蔬菜"),
    ("邮局", "寄一个包裹"),
    ("健身房", "锻炼身体"),
    ("电影院", "看一部新电影"),
    ("公园", "散步"),
    ("理发店", "剪头发"),
    ("学校", "参加家长会"),
    ("书店", "挑几本童话书"),
    ("修车铺", "换轮胎"),
]
ZH_COMPOSE = [
    "{s}{t}要去{p}{a}。",
    "{s}{t}打算去{p}{a}，你要一起去吗？",
    "听说{s}{t}会去{p}{a}。",
    "{s}说{t}没空去{p}{a}了。",
    "{t}{s}得先去一趟{p}{a}。",
    "要是{t}不下雨，{s}就去{p}{a}。",
]
EN_SUBJECTS: list[str | Pair] = [
    "I",
    "We",
    "My brother",
    "Our neighbor",
    "The new intern",
    "Aunt Linda",
    ("Mr. Patel", "Mister Patel"),
    "The kids",
    "My roommate",
    ("Dr. Chen", "Doctor Chen"),
    "Grandpa",
    "Your cousin",
]
EN_WHEN = [
    "tomorrow morning",
    "tonight",
    "next Wednesday",
    "this weekend",
    "the day after tomorrow",
    "at the end of the month",
    "early next month",
    "in a couple of days",
    "on Friday afternoon",
    "after the holidays",
]
EN_ERRANDS = [
    ("library", "return some books"),
    ("pharmacy", "pick up a prescription"),
    ("station", "meet an old friend"),
    ("bank", "open a new account"),
    ("market", "buy fresh vegetables"),
    ("post office", "mail a package"),
    ("gym", "work out"),
    ("cinema", "see a new movie"),
    ("park", "walk the dog"),
    ("barber", "get a haircut"),
    ("school", "attend a parent meeting"),
    ("hardware store", "buy some nails"),
    ("bookstore", "find a birthday present"),
    ("garage", "get the tires changed"),
]
EN_COMPOSE = [
    "{s} will go to the {p} {t} to {a}.",
    "{s} might stop by the {p} {t} to {a}.",
    "{s} said there was no time to go to the {p} {t}.",
    "If it doesn't rain {t}, {s} will go to the {p} to {a}.",
    "{s} had to rush to the {p} {t} to {a}.",
]
ZH_CITIES = [
    "北京",
    "上海",
    "重庆",
    "成都",
    "长沙",
    "厦门",
    "西安",
    "杭州",
    "南京",
    "武汉",
    "长春",
    "哈尔滨",
    "昆明",
]
EN_CITIES = [
    "Boston",
    "Denver",
    "Seattle",
    "Toronto",
    "Dublin",
    "Sydney",
    "Chicago",
    "Austin",
    "Vancouver",
    "Lisbon",
]


def _zh_num(rng: random.Random) -> Pair:
    kind = rng.randrange(9)
    if kind == 0:
        n = rng.randint(12, 9800)
        return _fmt("这个小区一共住了{n}户人家。", n=(str(n), vb.zh_int(n, liang=True)))
    if kind == 1:
        if rng.random() < 0.5:
            p = rng.randint(2, 98)
            return _fmt("今年的图书销量比去年增长了{p}。", p=(f"{p}%", "百分之" + vb.zh_int(p)))
        p10 = rng.randint(11, 999)
        s = f"{p10 // 10}.{p10 % 10}"
        return _fmt("我们城市的绿化覆盖率达到了{p}。", p=(s + "%", "百分之" + vb.zh_decimal(s)))
    if kind == 2:
        digits = "1" + rng.choice("3589") + "".join(rng.choice("0123456789") for _ in range(9))
        return _fmt("我的手机号码是{d}，有事随时打给我。", d=(digits, vb.zh_digits(digits)))
    if kind == 3:
        a, b = rng.randint(60, 130), rng.randint(60, 130)
        return _fmt("这场篮球赛最后的比分是{a}比{b}。", a=(str(a), vb.zh_int(a)), b=(str(b), vb.zh_int(b)))
    if kind == 4:
        n = rng.randint(6, 88)
        m = rng.randint(2, n)
        return _fmt("这栋楼一共有{n}层，我住在第{m}层。", n=(str(n), vb.zh_int(n)), m=(str(m), vb.zh_int(m)))
    if kind == 5:
        hi, lo = rng.randint(-5, 38), 0
        lo = hi - rng.randint(3, 12)
        lo_pair = (f"{lo}", vb.zh_int(lo).replace("负", "零下")) if lo < 0 else (str(lo), vb.zh_int(lo))
        hi_pair = (f"{hi}", vb.zh_int(hi).replace("负", "零下")) if hi < 0 else (str(hi), vb.zh_int(hi))
        return _fmt("明天{c}的最高气温{h}度，最低气温{l}度。", c=rng.choice(ZH_CITIES), h=hi_pair, l=lo_pair)
    if kind == 6:
        score, rank = rng.randint(55, 150), rng.randint(1, 50)
        return _fmt(
            "这次考试他得了{s}分，排在全班第{r}名。",
            s=(str(score), vb.zh_int(score)),
            r=(str(rank), vb.zh_int(rank)),
        )
    if kind == 7:
        n = rng.randint(30, 3200)
        return _fmt("{c}的常住人口大约有{n}万。", c=rng.choice(ZH_CITIES), n=(str(n), vb.zh_int(n, liang=True)))
    x = f"{rng.randint(20, 480)}.{rng.randint(1, 9)}"
    return _fmt("这套房子的建筑面积是{x}平方米。", x=(x, vb.zh_decimal(x)))


def _rand_date(rng: random.Random) -> tuple[int, int, int]:
    return rng.randint(1950, 2035), rng.randint(1, 12), rng.randint(1, 28)


def _zh_date(rng: random.Random) -> Pair:
    y, m, d = _rand_date(rng)
    frames = [
        "{d}是我们公司成立的纪念日。",
        "会议定在{d}上午召开。",
        "她是{d}出生的。",
        "我们打算{d}出发去云南旅行。",
        "这份合同{d}到期，记得提前续签。",
        "新图书馆将于{d}正式开放。",
    ]
    if rng.random() < 0.25:
        return _fmt("{m}月{dd}日是我妈妈的生日。", m=(str(m), vb.zh_int(m)), dd=(str(d), vb.zh_int(d)))
    return _fmt(rng.choice(frames), d=vb.zh_date(y, m, d))


def _zh_time(rng: random.Random) -> Pair:
    h, m = rng.randint(0, 23), rng.choice([0, 5, 10, 15, 20, 30, 40, 45, 50, rng.randint(1, 59)])
    t = vb.zh_time(h, m)
    frames = [
        "这趟火车{t}从南京站出发。",
        "请在{t}之前把材料交到三楼办公室。",
        "我们约在{t}在地铁口见面。",
        "闹钟定在{t}，千万别睡过头。",
        "商场每天{t}关门。",
        "你的体检预约在明天{t}。",
    ]
    if rng.random() < 0.25:
        h2 = min(23, h + rng.randint(1, 3))
        return _fmt("今天的会议从{a}一直开到了{b}。", a=t, b=vb.zh_time(h2, rng.choice([0, 15, 30, 45])))
    return _fmt(rng.choice(frames), t=t)


def _zh_money(rng: random.Random) -> Pair:
    fen = rng.choice([rng.randint(1, 99) * 100, rng.randint(100, 99999), rng.randint(10, 500) * 1000])
    frames = [
        "这件外套打完折只要{m}。",
        "上个月家里的电费是{m}。",
        "一共是{m}，您用手机支付还是现金？",
        "这张机票比昨天便宜了{m}。",
        "他这个月的奖金是{m}。",
        "这本词典的定价是{m}。",
    ]
    return _fmt(rng.choice(frames), m=vb.zh_money_yuan(fen))


def _en_num(rng: random.Random) -> Pair:
    kind = rng.randrange(9)
    if kind == 0:
        n = rng.randint(1200, 95000)
        return _fmt("The stadium holds about {n} people.", n=(f"{n:,}", vb.en_int(n)))
    if kind == 1:
        if rng.random() < 0.5:
            p = rng.randint(2, 98)
            return _fmt("About {p} of the people we asked said yes.", p=(f"{p}%", vb.en_int(p) + " percent"))
        p10 = rng.randint(11, 999)
        return _fmt(
            "Prices rose by {p} last year.",
            p=(f"{p10 // 10}.{p10 % 10}%", f"{vb.en_int(p10 // 10)} point {vb.en_int(p10 % 10)} percent"),
        )
    if kind == 2:
        digits = "".join(rng.choice("0123456789") for _ in range(7))
        written = f"{digits[:3]}-{digits[3:]}"
        spoken = (
            " ".join("oh" if c == "0" else vb.en_int(int(c)) for c in digits[:3])
            + ", "
            + " ".join("oh" if c == "0" else vb.en_int(int(c)) for c in digits[3:])
        )
        return _fmt("You can reach the front desk at {d}.", d=(written, spoken))
    if kind == 3:
        a, b = rng.randint(60, 130), rng.randint(60, 130)
        return _fmt("The final score was {a} to {b}.", a=(str(a), vb.en_int(a)), b=(str(b), vb.en_int(b)))
    if kind == 4:
        n = rng.randint(80, 900)
        return _fmt("The book has {n} pages, and I've read about half.", n=(str(n), vb.en_int(n)))
    if kind == 5:
        t = rng.randint(-15, 40)
        return _fmt("It was {t} degrees in {c} this morning.", t=(str(t), vb.en_int(t)), c=rng.choice(EN_CITIES))
    if kind == 6:
        n = rng.randint(50, 900)
        k = rng.randint(1, n)
        return _fmt(
            "She finished {k} out of {n} runners.",
            k=(vb.ordinal_suffix(k), vb.en_ordinal(k)),
            n=(str(n), vb.en_int(n)),
        )
    if kind == 7:
        y = rng.randint(1890, 2024)
        return _fmt("The house on the corner was built in {y}.", y=(str(y), vb.en_year(y)))
    x = f"{rng.randint(1, 60)}.{rng.randint(1, 9)}"
    whole, frac = x.split(".")
    return _fmt("The package weighs {x} kilograms.", x=(x, f"{vb.en_int(int(whole))} point {vb.en_int(int(frac))}"))


def _en_date(rng: random.Random) -> Pair:
    y, m, d = _rand_date(rng)
    frames = [
        "The conference starts on {d}.",
        "She was born on {d}.",
        "We moved into this house on {d}.",
        "The contract ends on {d}.",
        "The new library opens on {d}.",
        "Their wedding is planned for {d}.",
    ]
    if rng.random() < 0.25:
        mm = vb.MONTHS_EN[m - 1]
        return _fmt("My mother's birthday is on {m} {d}.", m=mm, d=(vb.ordinal_suffix(d), vb.en_ordinal(d)))
    return _fmt(rng.choice(frames), d=vb.en_date(y, m, d))


def _en_time(rng: random.Random) -> Pair:
    h, m = rng.randint(5, 23), rng.choice([0, 5, 10, 15, 20, 30, 40, 45, 50, rng.randint(1, 59)])
    frames = [
        "The last bus leaves at {t}.",
        "Let's meet in the lobby at {t}.",
        "Your appointment is at {t}.",
        "The store closes at {t} today.",
        "I set my alarm for {t}.",
        "The train should arrive at {t}.",
    ]
    return _fmt(rng.choice(frames), t=vb.en_time(h, m))


def _en_money(rng: random.Random) -> Pair:
    cents = rng.choice([rng.randint(1, 99) * 100, rng.randint(100, 99999), rng.randint(10, 900) * 1000])
    frames = [
        "The jacket was on sale for {m}.",
        "Dinner for four came to {m}.",
        "I paid {m} for a used bike.",
        "The monthly rent went up to {m}.",
        "Tickets cost {m} each.",
        "She found {m} in an old coat pocket.",
    ]
    return _fmt(rng.choice(frames), m=vb.en_money(cents, rng.choice("$$$£€")))


def _zh_compose(rng: random.Random) -> Pair:
    p, a = rng.choice(ZH_ERRANDS)
    return same(rng.choice(ZH_COMPOSE).format(s=rng.choice(ZH_SUBJECTS), t=rng.choice(ZH_WHEN), p=p, a=a))


def _en_compose(rng: random.Random) -> Pair:
    p, a = rng.choice(EN_ERRANDS)
    frame = rng.choice(EN_COMPOSE)
    subject = rng.choice(EN_SUBJECTS)
    mid_sentence = frame.index("{s}") > 0
    if mid_sentence and isinstance(subject, str) and subject.split(" ")[0] in ("The", "Our", "My", "Your"):
        subject = subject[0].lower() + subject[1:]  # lower-case a leading determiner, never a name or "I"
    return _fmt(frame, s=subject, t=rng.choice(EN_WHEN), p=p, a=a)


MIX_EVENTS = ["meeting", "workshop", "interview", "webinar", "team building", "demo", "kickoff"]
MIX_THINGS = ["project", "report", "proposal", "campaign", "roadmap", "budget"]
MIX_APPS = ["Google Maps", "Photoshop", "Slack", "Notion", "Spotify", "Figma", "PowerPoint", "GitHub"]
MIX_FOODS = ["小笼包", "煎饼果子", "北京烤鸭", "火锅", "凉皮", "糖葫芦"]
MIX_ZH_WORDS = ["你好", "新年快乐", "没问题", "谢谢你", "慢慢来"]


def _mixed_compose(rng: random.Random) -> Pair:
    kind = rng.randrange(8)
    when = rng.choice(ZH_WHEN)
    if kind == 0:
        return same(f"我{when}要参加一个{rng.choice(MIX_EVENTS)}。")
    if kind == 1:
        return same(f"这个{rng.choice(MIX_THINGS)}的deadline是{rng.choice(ZH_WHEN)}。")
    if kind == 2:
        return same(f"你用过{rng.choice(MIX_APPS)}吗？感觉怎么样？")
    if kind == 3:
        t = vb.zh_time(rng.randint(8, 18), rng.choice([0, 15, 30, 45]))
        return _fmt("下午的{e}改到了{t}。", e=rng.choice(MIX_EVENTS), t=t)
    if kind == 4:
        return same(f"{rng.choice(ZH_SUBJECTS)}觉得这个{rng.choice(MIX_THINGS)}还需要再review一下。")
    if kind == 5:
        return same(f"Have you ever tried {rng.choice(MIX_FOODS)} in {rng.choice(ZH_CITIES)}?")
    if kind == 6:
        return same(f"Today we learned to say {rng.choice(MIX_ZH_WORDS)} in class.")
    return _fmt("这个{e}的预算是{m}。", e=rng.choice(MIX_THINGS), m=vb.zh_money_yuan(rng.randint(50, 900) * 10000))


@cache
def _word_groups(name: str) -> dict[str, tuple[str, ...]]:
    """data/<name>.txt (word<TAB>tag lines) grouped by part of speech: {"n": nouns, "v": verbs, "a": adjectives}."""
    groups: dict[str, list[str]] = {}
    for line in load_list(name):
        word, tag = line.split("\t")
        groups.setdefault(tag, []).append(word)
    return {tag: tuple(words) for tag, words in groups.items()}


def _zh_words() -> dict[str, tuple[str, ...]]:
    return _word_groups("words_zh")


def _en_words() -> dict[str, tuple[str, ...]]:
    return _word_groups("words_en")


def _fill_frame(rng: random.Random, words: dict[str, tuple[str, ...]], frames: list[str]) -> Pair:
    """A frame of `frames` with slots n1..n4 / v1..v4 / a1..a4 filled by distinct random listed words."""
    picks: dict[str, str] = {}
    used: set[str] = set()
    for tag in ("n", "v", "a"):
        for i in range(1, 5):
            word = rng.choice(words[tag])
            while word in used:
                word = rng.choice(words[tag])
            used.add(word)
            picks[f"{tag}{i}"] = word
    return same(rng.choice(frames).format(**picks))


# Frames for the "lexicon" category: each takes common words drawn at random, so the corpus hears thousands of
# words and syllable junctions that no hand-written list covers. The frames are ones in which any noun, verb or
# adjective reads naturally (word lists, definitions, dictation), not sentences that would need the words to fit.
ZH_LEXICON_FRAMES = [
    "这一课的生词有{n1}、{n2}、{n3}和{n4}。",
    "请在本子上写下这几个词：{n1}、{v1}、{a1}。",
    "下面听写：{n1}，{n2}，{v1}，{a1}，{n3}。",
    "“{n1}”和“{n2}”这两个词你会读吗？",
    "他在黑板上写了“{v1}”“{a1}”“{n1}”三个词。",
    "词典里“{n1}”的下一页就是“{n2}”。",
    "老师让我们用“{v1}”和“{n1}”各造一个句子。",
    "今天的关键词是{n1}、{n2}，还有{v1}。",
    "这个题目和{n1}有关，也和{n2}有关。",
    "请把“{a1}”“{v1}”“{n1}”按拼音顺序排一排。",
    "第一组词是{n1}和{n2}，第二组词是{v1}和{a1}。",
    "“{n1}”这个词，小朋友们都学会了吗？",
]


def _zh_lexicon(rng: random.Random) -> Pair:
    return _fill_frame(rng, _zh_words(), ZH_LEXICON_FRAMES)


# The English "lexicon" frames (text mix v4): as for Mandarin, frames in which any listed word reads naturally.
EN_LEXICON_FRAMES = [
    "Today's spelling words are {n1}, {n2}, {n3} and {n4}.",
    "Please write these words in your notebook: {n1}, {v1}, {a1}.",
    "Next on the dictation list: {n1}, {n2}, {v1}, {a1}, {n3}.",
    "Can you read the words {n1} and {n2} out loud?",
    "She wrote {v1}, {a1} and {n1} on the whiteboard.",
    "In this dictionary, the entry after {n1} is {n2}.",
    "Make one sentence with the verb {v1} and another with the noun {n1}.",
    "The key words for this lesson are {n1}, {n2}, and {v1}.",
    "The word {n1} comes up in this chapter, and so does {n2}.",
    "Put {a1}, {v1} and {n1} in alphabetical order, please.",
    "The first pair is {n1} and {n2}; the second pair is {v1} and {a1}.",
    "Does everyone know how to pronounce the word {n1}?",
    "He underlined {a1}, {n1} and {v1} in the reading passage.",
    "Our vocabulary quiz covers {n1}, {a1}, {v1} and {n2}.",
]


def _en_lexicon(rng: random.Random) -> Pair:
    return _fill_frame(rng, _en_words(), EN_LEXICON_FRAMES)


# Neutral joiners: the parts are unrelated, so no "but"/"so" that would make the sentence read oddly.
ZH_JOINERS = ["，", "；", "，另外，", "。还有，", "；后来，"]
EN_JOINERS = [", and ", "; ", ", and then ", ". Also, ", ". Later, "]


def _long(lang: str, rng: random.Random, listed: str | None = None) -> Pair:
    """Two or three hand-written sentences (of ``listed``, default the v1 everyday list) joined into one long one
    (8-20 s of speech)."""
    pool = load_list(listed or ("everyday_zh" if lang == "zh" else "everyday_en"))
    parts = [rng.choice(pool) for _ in range(rng.choice([2, 2, 3]))]
    out = parts[0]
    for nxt in parts[1:]:
        if lang == "zh":
            out = out.rstrip("。！？") + rng.choice(ZH_JOINERS) + nxt
        else:
            keep_case = nxt.startswith(("I ", "I'"))
            joiner = rng.choice(EN_JOINERS)
            head = nxt if keep_case or joiner.startswith(".") else nxt[0].lower() + nxt[1:]
            out = out.rstrip(".!?") + joiner + head
    return same(out)


TEMPLATES: dict[str, dict[str, Template]] = {
    "zh": {
        "compose": _zh_compose,
        "number": _zh_num,
        "date": _zh_date,
        "time": _zh_time,
        "currency": _zh_money,
        "long": lambda r: _long("zh", r),
        "long4": lambda r: _long("zh", r, "everyday4_zh"),
        "lexicon": _zh_lexicon,
    },
    "en": {
        "compose": _en_compose,
        "number": _en_num,
        "date": _en_date,
        "time": _en_time,
        "currency": _en_money,
        "long": lambda r: _long("en", r),
        "long3": lambda r: _long("en", r, "everyday3_en"),
        "lexicon": _en_lexicon,
    },
    "mixed": {"compose": _mixed_compose},
}
