"""Chinese readings of numbers: cardinals, decimals, digit strings, years, dates, times, fractions,
percentages.

Cardinals come from cn2an (an2cn) where it applies; it raises on odd input and stops at 16 digits, so every
call is wrapped and falls back to reading digit by digit. Conventions (pinned by tests): 2000 → 两千 (a
leading 二 before 千/万/亿 is 两), 200 → 二百; years digit by digit with 零 (2024 → 二零二四); phone numbers
and codes digit by digit with 1 read 幺; decimals keep their digits (3.50 → 三点五零) except money, which
drops trailing zeros (¥12.50 → 十二点五元).
"""

from __future__ import annotations

import cn2an

DIGITS = "零一二三四五六七八九"
YAO = "幺"
_CN2AN_MAX_DIGITS = 16


def digits(text: str, *, yao: bool = False) -> str:
    """Digit by digit: 2024 → 二零二四; with yao, 110 → 幺幺零 (phone numbers, codes)."""
    out = "".join(DIGITS[int(d)] for d in text if d.isdigit())
    return out.replace("一", YAO) if yao else out


def cardinal(text: str) -> str:
    """An integer string, optionally signed: 12 → 十二, -3 → 负三, 2000 → 两千, 10 → 十."""
    sign = ""
    if text.startswith(("-", "+")):
        sign, text = ("负" if text[0] == "-" else ""), text[1:]
    text = text.lstrip("0") or "0"
    if len(text) > _CN2AN_MAX_DIGITS:
        return sign + digits(text)
    try:
        words = str(cn2an.an2cn(text))
    except (ValueError, KeyError, IndexError, TypeError):
        return sign + digits(text)
    if len(words) >= 2 and words[0] == "二" and words[1] in "千万亿":
        words = "两" + words[1:]
    return sign + words


def decimal(text: str, *, trim_zeros: bool = False) -> str:
    """A number with an optional fraction part: 3.14 → 三点一四, .5 → 零点五, -0.5 → 负零点五."""
    sign = ""
    if text.startswith(("-", "+")):
        sign, text = ("负" if text[0] == "-" else ""), text[1:]
    whole, _, frac = text.partition(".")
    if trim_zeros:
        frac = frac.rstrip("0")
    words = cardinal(whole or "0")
    if frac:
        words += "点" + digits(frac)
    return sign + words


def number(text: str) -> str:
    """Integer or decimal string, signed or not, with thousands separators allowed: 1,234.5 →
    一千二百三十四点五."""
    text = text.replace(",", "")
    return decimal(text) if "." in text else cardinal(text)


def year(text: str) -> str:
    return digits(text)


def date(y: str | None, m: str | None, d: str | None) -> str:
    """2024, 3, 5 → 二零二四年三月五日; any part may be missing."""
    out = ""
    if y:
        out += year(y) + "年"
    if m:
        out += cardinal(m) + "月"
    if d:
        out += cardinal(d) + "日"
    return out


def time(h: str, m: str, s: str | None = None) -> str:
    """10:30 → 十点三十分, 10:05 → 十点零五分, 2:00 → 两点, 10:30:15 → 十点三十分十五秒."""
    hour = "两" if int(h) == 2 else cardinal(h)
    out = hour + "点"
    minutes = int(m)
    seconds = int(s) if s else 0
    if minutes or seconds:
        out += ("零" if minutes < 10 and m.startswith("0") else "") + cardinal(str(minutes)) + "分"
    if seconds:
        out += ("零" if seconds < 10 and s and s.startswith("0") else "") + cardinal(str(seconds)) + "秒"
    return out


def fraction(numerator: str, denominator: str) -> str:
    """3/4 → 四分之三."""
    return cardinal(denominator) + "分之" + cardinal(numerator)


def percent(value: str, sign: str = "%") -> str:
    """50 → 百分之五十; with ‰, 千分之."""
    negative = value.startswith("-")
    body = number(value.lstrip("+-"))
    words = ("千分之" if sign == "‰" else "百分之") + body
    return ("负" if negative else "") + words


def ratio(a: str, b: str) -> str:
    return number(a) + "比" + number(b)
