"""Text normalization: digits, money, dates, times, units and symbols become words, in the language around
them.

One regular expression finds every non-word entity (a date, a time, a phone number, money, a percentage, a
range, a fraction, an ordinal, a number with its unit, a plain number, a symbol). Each is read in Chinese or
English as LanguageContext decides from the words next to it, so "我有3个apple" gives 三 and "I have 3 apples"
gives three. URLs, email addresses and file paths are entities too, always read in English ("example dot com
slash a"); a currency sign and the currency word after its amount (¥100元, $5 dollars) are one entity, said once.
English abbreviations (Dr., St., e.g.) are expanded afterwards. The pass is linear in the length of the text.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from rtvox.text import numbers_en as en
from rtvox.text import numbers_zh as zh
from rtvox.text.abbreviations import expand_abbreviations
from rtvox.text.context import LanguageContext
from rtvox.text.script import clean, is_han, is_latin
from rtvox.text.units import (
    ADDRESS_SYMBOLS,
    CURRENCY_PATTERN,
    CURRENCY_SUFFIX_SYMBOLS,
    CURRENCY_SYMBOLS,
    CURRENCY_WORDS_EN,
    CURRENCY_WORDS_EN_PATTERN,
    CURRENCY_WORDS_ZH,
    CURRENCY_WORDS_ZH_PATTERN,
    LIANG_MEASURES,
    NO_LIANG_UNITS,
    NOT_LIANG_AFTER,
    SCALE_PATTERN,
    SCALE_WORDS,
    SYMBOLS,
    UNIT_PATTERN,
    UNITS,
)

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_SNUM = rf"(?:(?<![0-9A-Za-z.])-)?{_NUM}"
_AMPM = r"[AaPp]\.?\s?[Mm](?![A-Za-z])(?:\.(?=\s+[a-z0-9]|\s*[,;:]))?"
_RANGE_SEP = r"(?:\s?[~～–—到至]\s?|-)"
_MONEY_WORD_ZH = "|".join(CURRENCY_WORDS_ZH)
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec"
)
MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_ZH_DIGIT_KEYWORDS = re.compile(
    r"(电话|手机|号码|热线|拨打|致电|编号|邮编|验证码|房间|航班|车次|工号|学号|账号|卡号|尾号|密码|单号|QQ|微信)"
    r"[^，。！？,.!?\d]{0,4}$"
)
# ... or a word after them that names a room, a train or a bus route (302室, 1104房间, G1234次列车, 303路公交):
# read digit by digit as well, not as a quantity (次 alone stays a count: 去过100次)
_ZH_DIGIT_AFTER = re.compile(
    r"(号?房间|号?房(?![东子价租贷屋])|(教|会议)?室(?![友内外温])|宿舍|次(列车|航班|高铁|动车|班车)|路(公交|车|汽车))"
)
_EN_DIGIT_KEYWORDS = re.compile(
    r"\b(phone|call|dial|number|code|PIN|room|flight|zip|ext|extension|account)\b\W{0,3}$", re.IGNORECASE
)

# Web addresses, email addresses and file paths (read in English, punctuation by name: ADDRESS_SYMBOLS). A URL
# has a scheme, "www." or a domain followed by a path; a path starts with / (or ~/, ./, a drive), its first part
# with no digit first, and has at least two parts: fractions (1/2), dates (2024/05/06, /2024/05/06) and word
# pairs (and/or, km/h) are left to the other rules.
_ADDR_CHAR = r"[A-Za-z0-9_\-.~:/?#@&=%+]"
_ADDR_END = r"[A-Za-z0-9_\-~/#&=%+]"  # an address does not end on the sentence's . , : ?
_ADDRESS = (
    rf"(?P<url>(?<![A-Za-z0-9_\-.@/])(?:[A-Za-z][A-Za-z0-9+.\-]*://|www\.|[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
    rf"\.[A-Za-z]{{2,6}}/)(?:{_ADDR_CHAR}*{_ADDR_END})?)",
    r"(?P<email>(?<![A-Za-z0-9_\-.+%])[A-Za-z0-9_\-.+%]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
    r"(?![A-Za-z0-9\-]))",
    r"(?P<path>(?<![A-Za-z0-9_\-.~/\\:])(?:~|\.{1,2})?/[A-Za-z_.~][A-Za-z0-9_\-.~]*(?:/[A-Za-z0-9_\-.~]+)+/?"
    r"(?![A-Za-z0-9/])"
    r"|(?<![A-Za-z0-9])[A-Za-z]:(?:\\[A-Za-z0-9_\-.~]+)+\\?)",
)
_WEB_SCHEME = re.compile(r"https?://", re.IGNORECASE)
_ADDRESS_PIECE = re.compile(r"[A-Za-z]+|\d+|.")

# Alone (no words around), amounts in these currencies and these units read as English.
EN_FIRST_CURRENCIES = frozenset({"$", "US$", "£", "€", "USD", "GBP", "EUR"})
EN_ONLY_UNITS = frozenset({"mph", "mi", "ft", "lb", "lbs", "oz", "°F"})

ENTITY = re.compile(
    "|".join(
        (
            *_ADDRESS,
            r"(?P<date>(?<!\d)(?P<dy>\d{4})(?P<dsep>[-/.])(?P<dm>0?[1-9]|1[0-2])(?P=dsep)"
            r"(?P<dd>[12]\d|3[01]|0?[1-9])(?![\d.]\d))",
            r"(?P<mdy>(?<!\d)(?P<um>0?[1-9]|1[0-2])/(?P<ud>[12]\d|3[01]|0?[1-9])/(?P<uy>\d{4})(?!\d))",
            # day first: 31/12/2024 (a first number past 12 cannot be a month), 5.3.2024 (dots: the European order)
            r"(?P<dmy>(?<![\d.])(?:(?P<ed>1[3-9]|2\d|3[01])/(?P<em>0?[1-9]|1[0-2])/"
            r"|(?P<pd>[12]\d|3[01]|0?[1-9])\.(?P<pm>0?[1-9]|1[0-2])\.)(?P<ey>\d{4})(?![\d.]\d))",
            rf"(?P<mdate>\b(?P<mon>{_MONTHS})\.?\s(?P<mday>[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?(?![\d:A-Za-z]))",
            r"(?P<dotted>(?<![\d.])\d+(?:\.\d+){2,}(?![\d.]))",
            r"(?P<trng>(?<![\d:.])(?P<t1h>[01]?\d|2[0-4]):(?P<t1m>[0-5]\d)"
            rf"(?:{_RANGE_SEP}|\s-\s)(?P<t2h>[01]?\d|2[0-4]):(?P<t2m>[0-5]\d)(?![\d:]))",
            rf"(?P<time>(?<![\d:.])(?P<th>[01]?\d|2[0-4]):(?P<tm>[0-5]\d)(?::(?P<ts>[0-5]\d))?(?![\d:])"
            rf"(?:\s?(?P<tap>{_AMPM}))?)",
            r"(?P<ratio>(?<![\d:.])(?P<ra1>\d+):(?P<ra2>\d+)(?![\d:]))",
            rf"(?P<hour>(?<![\d:.])(?P<hh>1[0-2]|0?[1-9])\s?(?P<hap>{_AMPM}))",
            r"(?P<phone>(?<![\d+])(?:\+\d{1,3}[ -]?)?(?:1[3-9]\d(?:[ -]?\d{4}){2}|0\d{2,3}-\d{7,8}"
            r"|[48]00-?\d{3}-?\d{4}"
            r"|\(\d{3}\)[ -]?\d{3}[-. ]\d{4}|\d{3}[-.]\d{3}[-.]\d{4})(?!\d))",
            rf"(?P<money>(?P<mneg>(?<![0-9A-Za-z.])-)?(?P<msym>{CURRENCY_PATTERN})\s?(?P<mneg2>-(?=\d))?(?P<mval>{_NUM})"
            rf"(?:\s?(?P<mscale>{SCALE_PATTERN})(?![A-Za-z]))?"
            rf"(?:{_RANGE_SEP}(?:{CURRENCY_PATTERN})?(?P<mval2>{_NUM}))?"
            # ¥100元, $5 dollars: the currency word after an amount that has its sign is part of the money
            rf"(?:\s?(?P<mword>{_MONEY_WORD_ZH}|{CURRENCY_WORDS_EN_PATTERN}(?![A-Za-z])))?)",
            rf"(?P<pctr>(?P<pa>{_SNUM})\s?(?P<pas>[%‰])?{_RANGE_SEP}(?P<pb>{_SNUM})\s?(?P<pbs>[%‰]))",
            rf"(?P<pct>(?P<pv>{_SNUM})\s?(?P<ps>[%‰]))",
            rf"(?P<mzh>(?P<mzv>{_SNUM})(?:{_RANGE_SEP}(?P<mzv2>{_NUM}))?\s?(?P<mzw>{CURRENCY_WORDS_ZH_PATTERN}))",
            rf"(?P<men>(?P<mev>{_SNUM})\s(?P<mew>{CURRENCY_WORDS_EN_PATTERN})(?![A-Za-z]))",
            rf"(?P<rng>(?P<ra>{_SNUM})(?:(?P<rasp>\s?)(?P<rau>{UNIT_PATTERN}))?{_RANGE_SEP}(?P<rb>{_SNUM})"
            rf"(?:(?P<rbsp>\s?)(?P<rbu>{UNIT_PATTERN})(?![A-Za-z0-9]))?)",
            r"(?P<mixed>(?<![\d/.,])(?P<xw>\d+) (?P<xn>\d+)/(?P<xd>\d+)(?![\d/]))",
            r"(?P<frac>(?<![\d/])(?P<fn>\d+)/(?P<fd>\d+)(?![\d/]))",
            r"(?P<ord>(?<![\d.])(?P<on>\d+)(?P<osuf>st|nd|rd|th)(?![A-Za-z]))",
            r"(?P<dec>(?<![\d.])(?P<dv>\d{3}0|[2-9]0)'?s(?![A-Za-z]))",
            rf"(?P<unit>(?P<uv>{_SNUM})(?P<usp>\s?)(?P<uu>{UNIT_PATTERN})(?![A-Za-z0-9]))",
            r"(?P<hashnum>#(?P<hn>\d+))",
            r"(?P<no>\bNo\.\s?(?P<non>\d+))",
            r"(?P<minus>(?<=\d) - (?=\d))",
            r"(?P<cmp>(?<=\d)\s?[<>]=?\s?(?=\d))",
            rf"(?P<num>{_SNUM}|(?<![\w.])\.\d+)",
            r"(?P<sym>[&@+=#×÷²³])",
        )
    )
)


class Normalizer:
    """Rewrites text so that only words and punctuation remain. Stateless apart from its compiled rules."""

    def normalize(self, text: str, *, left: str = "", right: str = "") -> str:
        """Normalized `text`; `left`/`right` are neighbouring text used only to pick the reading language."""
        text = clean(text)
        if not text:
            return ""
        offset = len(left)
        spans = [(m.start() + offset, m.end() + offset) for m in ENTITY.finditer(text)]
        context = LanguageContext(left + text + right, skip=spans)
        # With no words at all, one language for the whole text: English if any entity is English on its own
        # evidence ("31/12/2024", "$3.50 and ¥100" must not switch language from number to number).
        wordless = "" if context.has_words else context.default
        if wordless and any(_english_by_itself(m) for m in ENTITY.finditer(text)):
            wordless = "en"

        def replace(match: re.Match[str]) -> str:
            if match.lastgroup in ("url", "email", "path"):
                return _spaced(match, _address(match.group(0)), "en")
            lang = wordless or context.lang(match.start() + offset, match.end() + offset)
            words = self._read(match, lang)
            return _spaced(match, words, lang)

        out = ENTITY.sub(replace, text)
        out = expand_abbreviations(out)
        return re.sub(r" {2,}", " ", out).strip()

    # ------------------------------------------------------------------ dispatch
    def _read(self, m: re.Match[str], lang: str) -> str:
        kind = m.lastgroup
        g = m.group
        if kind is None:  # unreachable: every alternative is a named group
            return m.group(0)
        is_zh = lang == "zh"
        if kind == "date":
            return _date(g("dy"), g("dm"), g("dd"), is_zh)
        if kind == "mdy":
            return _date(g("uy"), g("um"), g("ud"), is_zh)
        if kind == "dmy":
            return _date(g("ey"), g("em") or g("pm"), g("ed") or g("pd"), is_zh)
        if kind == "mdate":
            month = next(name for name in MONTH_NAMES if name.startswith(g("mon")[:3]))
            if is_zh:
                return zh.date(None, str(MONTH_NAMES.index(month) + 1), g("mday"))
            return f"{month} {en.ordinal(g('mday'))}"
        if kind == "dotted":
            parts = g(0).split(".")
            if len(parts) >= 4:  # an address: digit by digit
                return ("点" if is_zh else " dot ").join(zh.digits(p) if is_zh else en.digits(p) for p in parts)
            return ("点" if is_zh else " point ").join(zh.cardinal(p) if is_zh else en.cardinal(p) for p in parts)
        if kind == "time":
            return _time(g("th"), g("tm"), g("ts"), g("tap"), is_zh)
        if kind == "trng":  # 10:00-22:00: a span of clock times
            start, end = _time(g("t1h"), g("t1m"), None, None, is_zh), _time(g("t2h"), g("t2m"), None, None, is_zh)
            return f"{start}到{end}" if is_zh else f"{start} to {end}"
        if kind == "ratio":
            a, b = g("ra1"), g("ra2")
            return zh.ratio(a, b) if is_zh else f"{en.number(a)} to {en.number(b)}"
        if kind == "hour":
            return _time(g("hh"), "00", None, g("hap"), is_zh)
        if kind == "phone":
            return _phone(g(0), is_zh)
        if kind == "money":
            return _money(m, is_zh)
        if kind == "pctr":
            return _percent_range(g("pa"), g("pas"), g("pb"), g("pbs"), is_zh)
        if kind == "pct":
            return zh.percent(g("pv").replace(",", ""), g("ps")) if is_zh else _percent_en(g("pv"), g("ps"))
        if kind == "mzh":
            return _money_zh_words(m, is_zh)
        if kind == "men":
            symbol = CURRENCY_WORDS_EN[g("mew")]
            return _money_value(g("mev"), None, symbol, None, is_zh)
        if kind == "rng":
            if re.fullmatch(r"\d{3}-0\d{3}", g(0)):
                return _phone(g(0), is_zh)  # 555-0123: a local phone number, not a range
            return _range(m, is_zh)
        if kind == "mixed":
            return _mixed_number(g("xw"), g("xn"), g("xd"), is_zh)
        if kind == "frac":
            return zh.fraction(g("fn"), g("fd")) if is_zh else en.fraction(g("fn"), g("fd"))
        if kind == "ord":
            return "第" + zh.cardinal(g("on")) if is_zh else en.ordinal(g("on"))
        if kind == "dec":
            return _decade(g("dv"), is_zh)
        if kind == "unit":
            return _unit(g("uv"), g("usp"), g("uu"), is_zh)
        if kind == "hashnum":
            return zh.cardinal(g("hn")) + "号" if is_zh else "number " + en.cardinal(g("hn"))
        if kind == "no":
            return "第" + zh.cardinal(g("non")) if is_zh else "number " + en.cardinal(g("non"))
        if kind in ("minus", "cmp"):
            symbol = g(0).strip()
            return SYMBOLS[symbol][0 if is_zh else 1]
        if kind == "num":
            return _plain_number(m, is_zh)
        if kind == "sym":
            return SYMBOLS[g(0)][0 if is_zh else 1]
        raise AssertionError(f"unhandled entity kind {kind}")


def _english_by_itself(m: re.Match[str]) -> bool:
    """With no words around at all, whether an entity is English on its own evidence: an English ordinal
    (1st), a.m./p.m., a month name, dollars/pounds/euros, an English-only unit, No., or a modern year."""
    kind = m.lastgroup
    g = m.group
    if kind in ("ord", "mdate", "men", "no", "dec", "hour"):
        return True
    if kind == "time":
        return bool(g("tap"))
    if kind == "money":  # a currency word after the amount outweighs the sign: ¥100 yuan, €5欧元
        if g("mword"):
            return g("mword") in CURRENCY_WORDS_EN
        return g("msym").strip() in EN_FIRST_CURRENCIES
    if kind == "unit":
        return g("uu") in EN_ONLY_UNITS
    if kind == "num":
        return g(0).isdigit() and len(g(0)) == 4 and 1900 <= int(g(0)) <= 2099
    return False


def _address(text: str) -> str:
    """A URL, email address or path in English words: the web scheme and a final slash are not said, letters
    stay for G2P, punctuation is named, numbers of up to three digits are read as numbers and longer ones digit
    by digit (a port, an id)."""
    text = _WEB_SCHEME.sub("", text, count=1) if _WEB_SCHEME.match(text) else text
    if len(text) > 1:
        text = text.rstrip("/\\")
    words = []
    for piece in _ADDRESS_PIECE.findall(text):
        if piece.isdigit():
            short = len(piece) <= 3 and not (len(piece) > 1 and piece.startswith("0"))
            words.append(en.cardinal(piece) if short else en.digits(piece))
        elif piece.isalpha():
            words.append(piece)
        else:
            words.append(ADDRESS_SYMBOLS[piece])
    return " ".join(words)


def _spaced(m: re.Match[str], words: str, lang: str) -> str:
    """English words get a space on any side that touches a letter, digit or Chinese character."""
    if lang == "zh" or not words:
        return words
    text = m.string
    before = text[m.start() - 1] if m.start() > 0 else " "
    after = text[m.end()] if m.end() < len(text) else " "
    if before.isalnum() or is_han(before) or is_latin(before):
        words = " " + words
    if after.isalnum() or is_han(after) or is_latin(after):
        words += " "
    return words


def _date(y: str, m: str, d: str, is_zh: bool) -> str:
    if is_zh:
        return zh.date(y, m, d)
    return f"{MONTH_NAMES[int(m) - 1]} {en.ordinal(d)}, {en.year(y)}"


def _decade(value: str, is_zh: bool) -> str:
    """1990s → 一九九零年代 / nineteen nineties; 80s → 八十年代 / eighties."""
    if not is_zh:
        return en.decade(value)
    return (zh.year(value) if len(value) == 4 else zh.cardinal(value)) + "年代"


def _time(h: str, m: str, s: str | None, ampm: str | None, is_zh: bool) -> str:
    pm = bool(ampm) and ampm is not None and ampm[0] in "Pp"
    if is_zh:
        prefix = ("下午" if pm else "上午") if ampm else ""
        return prefix + zh.time(h, m, s)
    words = en.time(h, m, s, clock=not ampm)
    if ampm:
        words += " p m" if pm else " a m"
    return words


def _phone(text: str, is_zh: bool) -> str:
    groups = [g for g in re.split(r"[^\d+]+", text) if g]
    read = []
    for group in groups:
        plus = group.startswith("+")
        digits = group.lstrip("+")
        if is_zh:
            read.append(zh.digits(digits, yao=True))
        else:
            read.append(("plus " if plus else "") + en.digits(digits))
    return (" " if is_zh else ", ").join(read)


def _scaled(value: str, scale: str) -> str | None:
    """value × a Chinese scale as an integer string when exact (2.5 billion → 2500000000), else None."""
    factors = {"千": 1_000, "百万": 1_000_000, "十亿": 1_000_000_000, "万亿": 1_000_000_000_000}
    if scale not in factors:
        return None
    try:
        product = Decimal(value.replace(",", "")) * factors[scale]
    except InvalidOperation:
        return None
    return str(int(product)) if product == product.to_integral_value() else None


def _money_value(
    value: str, scale: str | None, symbol: str, value2: str | None, is_zh: bool, word_zh: str | None = None
) -> str:
    """An amount in `symbol`'s currency; `word_zh`, when given, is the Chinese currency word to say instead of the
    symbol's (¥100块 → 一百块)."""
    name_zh, major, minor = CURRENCY_SYMBOLS[symbol]
    name_zh = word_zh or name_zh
    if is_zh:
        scale_zh = SCALE_WORDS[scale][0] if scale else ""
        exact = _scaled(value, scale_zh) if scale_zh else None
        if exact is not None:
            amount, scale_zh = zh.cardinal(exact), ""
        elif value == "2" and not value2:
            amount = "两"
        else:
            amount = zh.decimal(value.replace(",", ""), trim_zeros=True)
        if value2:
            amount += "到" + zh.decimal(value2.replace(",", ""), trim_zeros=True)
        return amount + scale_zh + name_zh
    if scale:
        words = en.number(value) + " " + SCALE_WORDS[scale][1]
        if value2:
            words = en.number(value) + " to " + en.number(value2) + " " + SCALE_WORDS[scale][1]
        return words + " " + major[1]
    if value2:
        return en.number(value) + " to " + en.money(value2, major, minor)
    return en.money(value, major, minor)


def _money(m: re.Match[str], is_zh: bool) -> str:
    """A sign and an amount, and the currency word written after them if any: the currency is said once.
    Chinese says a Chinese word as written (¥100块 → 一百块); otherwise the sign names the currency and the word
    goes unread (¥100元 → one hundred yuan in English, $5 dollars → 五美元 in Chinese)."""
    symbol = m.group("msym").strip()
    word = m.group("mword")
    word_zh = word if is_zh and word in CURRENCY_WORDS_ZH else None
    words = _money_value(m.group("mval"), m.group("mscale"), symbol, m.group("mval2"), is_zh, word_zh)
    if m.group("mneg") or m.group("mneg2"):  # -$5 and $-5
        words = ("负" if is_zh else "minus ") + words
    return words


def _money_zh_words(m: re.Match[str], is_zh: bool) -> str:
    """An amount followed by a Chinese currency word (12.50元 → 十二点五元); the word itself stays."""
    value, value2, word = m.group("mzv"), m.group("mzv2"), m.group("mzw")
    if not is_zh:
        return en.number(value) + (" to " + en.number(value2) if value2 else "") + " " + word
    word = CURRENCY_SUFFIX_SYMBOLS.get(word, word)
    if value == "2" and not value2:
        return "两" + word
    amount = zh.decimal(value.replace(",", ""), trim_zeros=True)
    if value2:
        amount += "到" + zh.decimal(value2.replace(",", ""), trim_zeros=True)
    return amount + word


def _percent_en(value: str, sign: str) -> str:
    return en.number(value) + (" per mille" if sign == "‰" else " percent")


def _percent_range(a: str, a_sign: str | None, b: str, b_sign: str, is_zh: bool) -> str:
    if is_zh:
        if a_sign:  # 10%-20% → 百分之十到百分之二十
            return zh.percent(a.replace(",", ""), a_sign) + "到" + zh.percent(b.replace(",", ""), b_sign)
        return zh.percent(a.replace(",", ""), b_sign) + "到" + zh.number(b)  # 10-20% → 百分之十到二十
    return en.number(a) + " to " + _percent_en(b, b_sign)


def _unit_words(value: str, unit: str, is_zh: bool) -> str:
    name_zh, singular, plural = UNITS[unit]
    if is_zh:
        return name_zh
    return en.plural_unit(value, singular, plural)


def _zh_quantity(value: str, following: str) -> str:
    """A number before a measure word or unit: a bare 2 reads 两 (两个, 两公里), else the plain reading."""
    if value == "2" and following.startswith(LIANG_MEASURES) and not following.startswith(NOT_LIANG_AFTER):
        return "两"
    return zh.number(value)


def _unit(value: str, space: str, unit: str, is_zh: bool) -> str:
    if space and len(unit) == 1 and unit.isalpha():  # "5 m": too ambiguous with a spaced single letter
        return (zh.number(value) if is_zh else en.number(value)) + space + unit
    if is_zh:
        negative_temperature = value.startswith("-") and unit in ("°C", "℃", "°F")
        if negative_temperature:
            return "零下" + zh.number(value[1:]) + UNITS[unit][0]
        number = zh.number(value) if unit in NO_LIANG_UNITS else _zh_quantity(value, "个")
        return number + UNITS[unit][0]
    return en.number(value) + " " + _unit_words(value, unit, is_zh=False)


def _range(m: re.Match[str], is_zh: bool) -> str:
    a, b = m.group("ra"), m.group("rb")
    a_unit, b_unit = m.group("rau"), m.group("rbu")
    text = m.string
    following = text[m.end() :]
    if b_unit and m.group("rbsp") and len(b_unit) == 1:
        following, b_unit = b_unit + following, None
    if text[m.end() :].lstrip().startswith("="):  # 5-3=2 is arithmetic, not a range
        minus = "减" if is_zh else "minus"
        read = zh.number if is_zh else en.number
        return read(a) + ("" if is_zh else " ") + minus + ("" if is_zh else " ") + read(b.lstrip("-"))
    if is_zh:
        years = following.startswith("年") and len(a) == 4 and len(b) == 4
        if years:
            return zh.year(a) + "到" + zh.year(b)
        left = zh.number(a) if a_unit in (None, *NO_LIANG_UNITS) else _zh_quantity(a, "个")
        if a_unit:
            left += UNITS[a_unit][0]
        elif following.startswith(LIANG_MEASURES) and a == "2":
            left = "两"
        right = _zh_quantity(b, following) if not b_unit else _zh_quantity(b, "个")
        if b_unit:
            right = (zh.number(b) if b_unit in NO_LIANG_UNITS else right) + UNITS[b_unit][0]
        return left + "到" + right
    years = len(a) == 4 and len(b) == 4 and _is_year(a) and _is_year(b)
    left = en.year(a) if years else en.number(a)
    right = en.year(b) if years else en.number(b)
    if a_unit:
        left += " " + _unit_words(a, a_unit, is_zh=False)
    if b_unit:
        right += " " + _unit_words(b, b_unit, is_zh=False)
    return left + " to " + right


def _is_year(text: str) -> bool:
    return text.isdigit() and 1100 <= int(text) <= 2099


def _plain_number(m: re.Match[str], is_zh: bool) -> str:
    value = m.group(0)
    text = m.string
    before = text[max(0, m.start() - 12) : m.start()]
    following = text[m.end() :]
    bare = value.lstrip("-")
    if value.startswith("."):
        value = "0" + value
    digits_only = bare.isdigit()
    if is_zh:
        if digits_only and (
            (len(bare) >= 3 and (_ZH_DIGIT_KEYWORDS.search(before) or _ZH_DIGIT_AFTER.match(following)))
            or (len(bare) > 1 and bare.startswith("0"))
        ):
            return ("负" if value.startswith("-") else "") + zh.digits(bare, yao=True)
        if digits_only and len(bare) == 4 and following.startswith("年") and not following.startswith("年级"):
            return zh.year(bare)
        if digits_only and len(bare) == 2 and following.startswith("年代"):
            return zh.digits(bare)
        if value == "2" and not before.endswith(("第", ".")):
            return _zh_quantity(value, following)
        return zh.number(value)
    if digits_only and (
        (len(bare) >= 3 and _EN_DIGIT_KEYWORDS.search(before)) or (len(bare) > 1 and bare.startswith("0"))
    ):
        return ("minus " if value.startswith("-") else "") + en.digits(bare)
    if digits_only and not value.startswith("-") and len(bare) == 4 and _is_year(bare):
        return en.year(bare)
    return en.number(value)


def _mixed_number(whole: str, numerator: str, denominator: str, is_zh: bool) -> str:
    """2 1/2 → two and a half, 二又二分之一 (½ after a digit arrives here as "2 1/2"); a fraction that is not
    proper (2 3/2) is read as a number and a fraction."""
    if not 0 < int(numerator) < int(denominator):
        if is_zh:
            return zh.cardinal(whole) + " " + zh.fraction(numerator, denominator)
        return en.cardinal(whole) + " " + en.fraction(numerator, denominator)
    if is_zh:
        return zh.cardinal(whole) + "又" + zh.fraction(numerator, denominator)
    part = en.fraction(numerator, denominator)
    if int(numerator) == 1 and part.startswith("one "):
        part = "a " + part.removeprefix("one ")
    return f"{en.cardinal(whole)} and {part}"
