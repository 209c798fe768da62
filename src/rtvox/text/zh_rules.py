"""Context rules on Chinese pinyin: polyphones decided by neighbouring words, 一/不 tone sandhi, erhua.

All rules work on one run of Chinese characters already split into jieba words, with a syllable per character
and a `locked` flag for characters whose reading came from an override table, the user's lexicon or inline
markup (rules never touch those). Sandhi changes only 一 and 不 — the JSON `pinyin` field gives lexical tones
otherwise; third-tone sandhi is left to the acoustic model, which sees the tones of whole phrases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from pypinyin.constants import PHRASES_DICT

from rtvox.text.pinyin import syllable_tone


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


NUMERALS = frozenset("零〇一二三四五六七八九十两百千万亿")
BIG_UNITS = frozenset("百千万亿")
# 得 read děi ("must") after these words when a verb follows: 我得去, 你得先走, 我们得赶快.
DEI_SUBJECTS = _words("我 你 您 他 她 它 我们 你们 他们 她们 咱 咱们 大家 谁 人 还 就 也 都 总 又 可 真 这 那")
DEI_NOT_BEFORE = _words("很 太 非常 特别 真 更 最 好 不 多 了 住 起 着 到 出 过 的 是 这么 那么")
DE_OBTAIN_BEFORE = frozenset("了到过奖分病出")  # 得了, 得到: dé "obtain"
# After these characters 地 is the noun dì, not the adverbial particle: 这块地, 一片地.
DI_NOUN_AFTER = frozenset("片块个的这那此该本各外当土草田耕扫在满遍落倒着上下种")
HUAN_OBJECTS = _words("钱 书 债 款 账 给 回 清 贷款 欠款 房贷 车贷 借款 东西 信用卡 人情")
TIAO_BEFORE = frozenset("高低大小好亮暗快慢匀")  # 调 tiáo "adjust" before a result: 调高, 调好
MEASURE_ZHI_AFTER = NUMERALS | frozenset("几半每这那哪某")
# 长 outside pypinyin's phrases (alone, or in a word like 很长 or 多长时间) defaults to zhǎng there. It is the
# adjective cháng ("long") after a degree word (很长, 太长了) and before most words (长鼻子, 全长); it stays zhǎng
# ("grow", "head of") before a growth complement (长高, 长到, 头发长了), after a modal or 着 (容易长, 歪着长) and
# after an organization in a title (营长, 楼长, 检察长).
CHANG_DEGREE = _words("很 太 真 好 多 更 最 挺 够 较 不 特别 非常 比较 有点 这么 那么 越来越 相当 极 超")
ZHANG_GROW_NEXT = frozenset("大高胖壮得出成满起着了到肉个")
ZHANG_VERB_AFTER = _words("容易 会 能 要 开始 正在 在 没 别 还在 着 继续 一直")  # 容易长褥疮, 歪着长: grow
# X长 "head of X" where pypinyin has no phrase: 营长, 楼长, 检察长
ZHANG_TITLE_AFTER = frozenset("营连排班组部局处科厅省市县镇村乡区校院所站楼队团师军社厂店馆察船舰州署司庭")
SHU_COUNT_NEXT = frozenset("了过着一到完清不得数")  # 数 shǔ "count" as a verb: 数了三遍, 数一数, 数不清
SHU_COUNT_AFTER = _words("我 你 他 她 我们 你们 他们 大家 再 先 又 来 去 慢慢 仔细 重新 一起")
ZHONG_HIT_AFTER = frozenset("考打射猜选击命")  # 中 zhòng "hit, attain": 考中了, 打中
JIAO_SLEEP_AFTER = NUMERALS | frozenset("个睡午这那")  # 觉 jiào "a sleep": 睡了一觉, 午觉
# One-syllable verbs whose reduplication (看看, 说说) has a neutral second syllable.
REDUPLICATED_VERBS = frozenset("看想试说走听聊问尝读写玩找摸坐动转逛洗擦算学练跑跳笑谈讲查改猜闻敲拍揉捏抱亲劝帮瞧歇")
# Words ending in 儿 where 儿 is a full syllable (ér), not erhua.
NON_ERHUA = _words(
    "女儿 婴儿 孤儿 幼儿 胎儿 健儿 宠儿 男儿 少儿 孙儿 侄儿 患儿 弃儿 乳儿 育儿 托儿 混血儿 新生儿 病儿 产儿 妻儿"
)
DAY_OR_ORDINAL = frozenset("第周")
YI_LOCKED_BEFORE = frozenset("月号楼")  # 一月, 一号, 一楼 read yī
BU_NOT_NEUTRAL = _words("要不然 要不是 并不是 可不是 也不是")  # 3-character words whose 不 keeps its tone


@dataclass
class ZhRun:
    """One run of Chinese characters being read: words, a syllable per character, and per-character flags."""

    words: list[str]
    syllables: list[str | None]  # TONE3, None where no reading is known
    locked: list[bool] = field(default_factory=list)
    erhua: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.syllables)
        self.locked = self.locked or [False] * n
        self.erhua = self.erhua or [False] * n
        self.chars = "".join(self.words)
        self.word_of: list[int] = [w for w, word in enumerate(self.words) for _ in word]
        self.word_start: list[int] = []
        pos = 0
        for word in self.words:
            self.word_start.append(pos)
            pos += len(word)

    def set(self, index: int, syllable: str) -> None:
        if not self.locked[index] and self.syllables[index] is not None:
            self.syllables[index] = syllable

    def tone(self, index: int) -> int | None:
        if 0 <= index < len(self.syllables):
            s = self.syllables[index]
            return syllable_tone(s) if s else None
        return None


def apply_context_rules(run: ZhRun) -> None:
    """Polyphones that jieba + pypinyin leave to context: 得 děi/de, 地 de/dì, 还 huán, 只 zhī, 调 tiáo, 数 shǔ,
    教 jiāo, 觉 jiào, 中 zhòng, 长 cháng, AA verbs."""
    words = run.words
    for w, word in enumerate(words):
        start = run.word_start[w]
        prev = words[w - 1] if w > 0 else ""
        nxt = words[w + 1] if w + 1 < len(words) else ""
        if word == "得":
            if prev in DEI_SUBJECTS and nxt and nxt not in DEI_NOT_BEFORE and nxt[0] not in "很太":
                run.set(start, "dei3")
            elif prev and nxt[:1] not in DE_OBTAIN_BEFORE:
                run.set(start, "de5")  # complement marker after a verb: 跑得很快
        elif len(word) == 3 and word[1] == "得" and word[0] != "不":
            run.set(start + 1, "de5")  # verb-得-complement: 跑得快, 看得见
        if word.startswith("地") and _adverbial_di(word, prev, nxt):
            run.set(start, "de5")
        if word == "还" and nxt in HUAN_OBJECTS:
            run.set(start, "huan2")
        if word == "调" and nxt[:1] in TIAO_BEFORE:
            run.set(start, "tiao2")  # adjust: 调高, 调好
        if word == "数" and (nxt[:1] in SHU_COUNT_NEXT or prev in SHU_COUNT_AFTER):
            run.set(start, "shu3")  # count: 数了三遍
        if word == "教" and nxt:
            run.set(start, "jiao1")  # teach, alone before its object: 教我们唱歌 (教育, 请教: phrases)
        if word == "觉" and prev[-1:] in JIAO_SLEEP_AFTER:
            run.set(start, "jiao4")  # a sleep: 睡了一觉
        if word == "中" and prev[-1:] in ZHONG_HIT_AFTER:
            run.set(start, "zhong4")  # hit: 考中了
        last = start + len(word) - 1
        if word.endswith("只") and last > 0 and run.chars[last - 1] in MEASURE_ZHI_AFTER:
            run.set(last, "zhi1")  # the measure word: 两只, 这只猫
    _reduplicated_verbs(run)
    _chang(run)
    _verb_readings(run)


@lru_cache(maxsize=1 << 16)
def phrase_pieces(word: str) -> tuple[str, ...]:
    """A jieba word split into pypinyin's phrases, so each piece reads as a phrase (pypinyin reads a word it has no
    entry for character by character: 别着急 → zhe, 缝衣服 → fèng). The word itself if pypinyin knows it;
    else the maximum-matching split (backward and forward: the one with fewer pieces, backward on a tie)."""
    if len(word) < 3 or word in PHRASES_DICT:
        return (word,)

    def split(backward: bool) -> list[str]:
        pieces: list[str] = []
        rest = word
        while rest:
            for n in range(min(len(rest), _MAX_PIECE), 0, -1):
                piece = rest[-n:] if backward else rest[:n]
                if n == 1 or piece in PHRASES_DICT:
                    pieces.append(piece)
                    rest = rest[:-n] if backward else rest[n:]
                    break
        return pieces[::-1] if backward else pieces

    back, forward = split(True), split(False)
    return tuple(forward if len(forward) < len(back) else back)


_MAX_PIECE = 6  # longest phrase piece tried (pypinyin's phrases inside jieba words are short)


def _in_phrase(run: ZhRun, i: int) -> bool:
    """Whether character i's reading came from one of pypinyin's phrases (its piece of its jieba word)."""
    w = run.word_of[i]
    at = i - run.word_start[w]
    for piece in phrase_pieces(run.words[w]):
        if at < len(piece):
            return len(piece) > 1 and piece in PHRASES_DICT
        at -= len(piece)
    return False


# Characters pypinyin reads by their first reading when no phrase holds them → (the characters next to them that
# call for another reading — None: any —, that reading, which neighbour: +1 the next, -1 the previous).
VERB_READINGS: dict[str, tuple[str | None, str, int]] = {
    "削": (None, "xiao1", 1),  # 削苹果 (削弱, 剥削: phrases)
    "背": ("着起走上", "bei1", 1),  # 背着书包
    "盛": ("一饭汤碗点满些了", "cheng2", 1),  # 盛一碗饭
    "冲": ("着", "chong4", 1),  # 冲着我笑
    "卡": ("住在", "qia3", 1),  # 卡住了
    "缝": ("衣上好补了一", "feng2", 1),  # 缝衣服
    "相": ("张个", "xiang4", -1),  # 照张相
}


def _verb_readings(run: ZhRun) -> None:
    chars = run.chars
    for i, ch in enumerate(chars):
        rule = VERB_READINGS.get(ch)
        if rule is None or _in_phrase(run, i):
            continue
        context, reading, side = rule
        j = i + side
        if context is None or (0 <= j < len(chars) and chars[j] in context):
            run.set(i, reading)


def _chang(run: ZhRun) -> None:
    chars = run.chars
    for i, ch in enumerate(chars):
        if ch != "长" or run.syllables[i] != "zhang3" or _in_phrase(run, i):
            continue  # read by one of pypinyin's phrases (校长, 家长会, 长大)
        w = run.word_of[i]
        word, start = run.words[w], run.word_start[w]
        at = i - start
        before = word[:at] or (run.words[w - 1] if w > 0 else "")
        if before in CHANG_DEGREE or before[-1:] in CHANG_DEGREE:
            run.set(i, "chang2")  # 很长, 太长了, 最长
        elif before[-1:] in ZHANG_TITLE_AFTER:
            continue  # 营长, 楼长
        elif before in ZHANG_VERB_AFTER or before[-1:] == "着":
            continue  # 容易长褥疮, 歪着长
        elif chars[i + 1 : i + 2] not in ZHANG_GROW_NEXT:
            run.set(i, "chang2")  # 长鼻子, 又长又绕, 全长, 扁长


def _adverbial_di(word: str, prev: str, nxt: str) -> bool:
    """地 as the adverbial particle: after a word of two or more characters, before a verb (高兴地说,
    慢慢地走)."""
    if len(prev) < 2 or prev[-1] in DI_NOUN_AFTER:
        return False
    if word == "地":
        return bool(nxt)
    return len(word) == 2 and word not in PHRASES_DICT


def _reduplicated_verbs(run: ZhRun) -> None:
    chars = run.chars
    for i in range(1, len(chars)):
        if chars[i] == chars[i - 1] and chars[i] in REDUPLICATED_VERBS:
            same_word = run.word_of[i] == run.word_of[i - 1]
            both_single = len(run.words[run.word_of[i]]) == 1 and len(run.words[run.word_of[i - 1]]) == 1
            if same_word or both_single:
                s = run.syllables[i]
                if s:
                    run.set(i, s[:-1] + "5")


def apply_yi_bu_sandhi(run: ZhRun) -> None:
    """Tone sandhi of 一 and 不 from their lexical yi1/bu4 (see yi_tone and bu_tone)."""
    chars = run.chars
    for i, ch in enumerate(chars):
        if run.locked[i] or ch not in "一不":
            continue
        run.syllables[i] = "yi1" if ch == "一" else "bu4"
    for i, ch in enumerate(chars):
        if run.locked[i]:
            continue
        if ch == "一":
            run.syllables[i] = f"yi{_yi_tone(run, i)}"
        elif ch == "不":
            run.syllables[i] = f"bu{_bu_tone(run, i)}"


def _yi_tone(run: ZhRun, i: int) -> int:
    """一: yi5 between a reduplicated verb (看一看); yi1 as a numeral (十一, 第一, 一二三, 一九九九), at the
    end of a phrase (统一) and in 一月/一号; otherwise yi2 before a fourth tone (一个, 一样) and yi4 before
    others (一天).
    """
    chars = run.chars
    prev = chars[i - 1] if i > 0 else ""
    nxt = chars[i + 1] if i + 1 < len(chars) else ""
    if prev and prev == nxt:
        return 5
    word = run.words[run.word_of[i]]
    if not nxt or (len(word) > 1 and i == run.word_start[run.word_of[i]] + len(word) - 1):
        return 1  # 统一, 唯一的
    if nxt in BIG_UNITS and prev not in NUMERALS:
        return _before(run.tone(i + 1))
    if prev in NUMERALS or prev in DAY_OR_ORDINAL or nxt in NUMERALS or nxt in YI_LOCKED_BEFORE:
        return 1
    if nxt == "点" and i + 2 < len(chars) and chars[i + 2] in NUMERALS:
        return 1  # 一点五
    return _before(run.tone(i + 1))


def _before(next_tone: int | None) -> int:
    if next_tone is None:
        return 1
    return 2 if next_tone in (4, 5) else 4


def _bu_tone(run: ZhRun, i: int) -> int:
    """不: bu5 in A不A (好不好) and in the middle of verb-不-complement words (对不起); bu2 before a fourth
    tone (不对); otherwise bu4 (不好).
    """
    chars = run.chars
    prev = chars[i - 1] if i > 0 else ""
    nxt = chars[i + 1] if i + 1 < len(chars) else ""
    if prev and prev == nxt:
        return 5
    word = run.words[run.word_of[i]]
    start = run.word_start[run.word_of[i]]
    if len(word) == 3 and i == start + 1 and word not in BU_NOT_NEUTRAL:
        return 5
    tone = run.tone(i + 1)
    return 2 if tone == 4 else 4


def mark_erhua(run: ZhRun) -> None:
    """儿 closing a word (一点儿, 这儿, 玩儿) rhotacizes the syllable before it: reading er5, flagged as
    erhua."""
    chars = run.chars
    for i, ch in enumerate(chars):
        if ch != "儿" or i == 0 or run.locked[i] or run.syllables[i - 1] is None:
            continue
        w = run.word_of[i]
        word = run.words[w]
        if i != run.word_start[w] + len(word) - 1:
            continue  # 儿子, 儿童: 儿 opens a word
        context = word if len(word) > 1 else chars[i - 1] + ch
        if context in NON_ERHUA or context[-2:] in NON_ERHUA or context[-3:] in NON_ERHUA:
            continue
        run.syllables[i] = "er5"
        run.erhua[i] = True
