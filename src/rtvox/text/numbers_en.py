"""English readings of numbers: cardinals, ordinals, years, decimals, fractions, money, times.

American style without "and": 123 → one hundred twenty-three; tens and units hyphenated (twenty-three). Years:
1999 → nineteen ninety-nine, 1905 → nineteen oh five, 1900 → nineteen hundred, 2005 → two thousand five, 2024
→ twenty twenty-four. Numbers past the largest scale word are read digit by digit.
"""

from __future__ import annotations

ONES = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)  # fmt: skip
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
SCALES = (
    "", "thousand", "million", "billion", "trillion", "quadrillion", "quintillion", "sextillion",
    "septillion", "octillion", "nonillion", "decillion",
)  # fmt: skip
_ORDINAL_WORDS = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip
_FRACTION_WORDS = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def digits(text: str) -> str:
    """Digit by digit: 4567 → four five six seven."""
    return " ".join(ONES[int(d)] for d in text if d.isdigit())


def _below_thousand(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    words = []
    if hundreds:
        words.append(ONES[hundreds] + " hundred")
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(TENS[tens] + ("-" + ONES[ones] if ones else ""))
    elif rest or not hundreds:
        words.append(ONES[rest])
    return " ".join(words)


def cardinal_int(n: int) -> str:
    if n < 0:
        return "minus " + cardinal_int(-n)
    if n == 0:
        return "zero"
    groups = []
    while n:
        n, group = divmod(n, 1000)
        groups.append(group)
    if len(groups) > len(SCALES):
        return digits("".join(str(g).zfill(3) for g in reversed(groups)).lstrip("0"))
    words = [
        _below_thousand(g) + (" " + SCALES[i] if SCALES[i] else "") for i, g in reversed(list(enumerate(groups))) if g
    ]
    return " ".join(words)


def cardinal(text: str) -> str:
    """A signed integer string, thousands separators allowed: -1,234 → minus one thousand two hundred
    thirty-four."""
    text = text.replace(",", "")
    sign = ""
    if text.startswith(("-", "+")):
        sign, text = ("minus " if text[0] == "-" else ""), text[1:]
    digits_only = text.lstrip("0") or "0"
    if len(digits_only) > 3 * len(SCALES):
        return sign + digits(text)
    return sign + cardinal_int(int(digits_only))


def decimal(text: str) -> str:
    """3.14 → three point one four; .5 → zero point five."""
    text = text.replace(",", "")
    sign = ""
    if text.startswith(("-", "+")):
        sign, text = ("minus " if text[0] == "-" else ""), text[1:]
    whole, _, frac = text.partition(".")
    words = cardinal(whole or "0")
    if frac:
        words += " point " + digits(frac)
    return sign + words


def number(text: str) -> str:
    return decimal(text) if "." in text else cardinal(text)


def ordinal_words(words: str) -> str:
    """The ordinal of a spelled cardinal: twenty-two → twenty-second, one hundred → one hundredth."""
    head, sep, last = words.rpartition("-" if "-" in words.split(" ")[-1] else " ")
    if last in _ORDINAL_WORDS:
        last = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + sep + last


def ordinal(text: str) -> str:
    """22 → twenty-second."""
    return ordinal_words(cardinal(text))


def year(text: str) -> str:
    """A four-digit year the way it is said: 1999 → nineteen ninety-nine, 2005 → two thousand five."""
    n = int(text)
    if not 1000 <= n <= 9999:
        return cardinal(text)
    high, low = divmod(n, 100)
    if n % 1000 == 0 or (2000 <= n <= 2009) or (high % 10 == 0 and low < 10):
        return cardinal_int(n)
    if low == 0:
        return cardinal_int(high) + " hundred"
    if low < 10:
        return cardinal_int(high) + " oh " + ONES[low]
    return cardinal_int(high) + " " + cardinal_int(low)


def decade(text: str) -> str:
    """1990 → nineteen nineties, 80 → eighties, 2000 → two thousands."""
    words = year(text) if len(text) == 4 else cardinal(text)
    if words.endswith("y"):
        return words[:-1] + "ies"
    return words + "s"


def fraction(numerator: str, denominator: str) -> str:
    """3/4 → three quarters, 1/2 → one half, 5/8 → five eighths."""
    num = int(numerator)
    den = int(denominator)
    head = cardinal(numerator)
    if den in _FRACTION_WORDS:
        singular, plural = _FRACTION_WORDS[den]
    elif den in (0, 1):
        return head + " over " + cardinal(denominator)
    else:
        singular = ordinal(denominator)
        plural = singular + "s"
    return f"{head} {singular if num == 1 else plural}"


def plural_unit(value: str, singular: str, plural: str) -> str:
    """Unit word agreeing with the number: 1 → singular, anything else (1.5, 0, 2) → plural."""
    return singular if value.lstrip("+-") in ("1", "1.0") else plural


def money(value: str, major: tuple[str, str], minor: tuple[str, str] | None) -> str:
    """$3.50 → three dollars fifty cents; $0.99 → ninety-nine cents; $1 → one dollar."""
    value = value.replace(",", "")
    sign = "minus " if value.startswith("-") else ""
    value = value.lstrip("+-")
    whole, _, frac = value.partition(".")
    whole = whole or "0"
    if minor is None or len(frac) > 2:
        return sign + number(value) + " " + plural_unit(value, *major)
    cents = int(frac.ljust(2, "0")) if frac else 0
    parts = []
    if int(whole) or not cents:
        parts.append(cardinal(whole) + " " + plural_unit(whole, *major))
    if cents:
        parts.append(cardinal_int(cents) + " " + (minor[0] if cents == 1 else minor[1]))
    return sign + " ".join(parts)


def time(h: str, m: str, s: str | None = None, *, clock: bool = True) -> str:
    """10:30 → ten thirty; 9:05 → nine oh five; 10:00 → ten o'clock (just "ten" before a m / p m)."""
    hour = cardinal(h)
    minutes = int(m)
    if minutes == 0:
        out = hour + (" o'clock" if clock else "")
    elif minutes < 10:
        out = f"{hour} oh {ONES[minutes]}"
    else:
        out = f"{hour} {cardinal_int(minutes)}"
    if s and int(s):
        out += f" and {cardinal_int(int(s))} second{'s' if int(s) != 1 else ''}"
    return out
