"""Unit, currency and symbol words for the normalizer, one table each: symbol → (Chinese, English singular,
plural)."""

from __future__ import annotations

import re

UNITS: dict[str, tuple[str, str, str]] = {
    "km/h": ("公里每小时", "kilometer per hour", "kilometers per hour"),
    "km/hr": ("公里每小时", "kilometer per hour", "kilometers per hour"),
    "kph": ("公里每小时", "kilometer per hour", "kilometers per hour"),
    "m/s": ("米每秒", "meter per second", "meters per second"),
    "mph": ("英里每小时", "mile per hour", "miles per hour"),
    "km²": ("平方公里", "square kilometer", "square kilometers"),
    "m²": ("平方米", "square meter", "square meters"),
    "cm²": ("平方厘米", "square centimeter", "square centimeters"),
    "m³": ("立方米", "cubic meter", "cubic meters"),
    "km": ("公里", "kilometer", "kilometers"),
    "KM": ("公里", "kilometer", "kilometers"),
    "Km": ("公里", "kilometer", "kilometers"),
    "cm": ("厘米", "centimeter", "centimeters"),
    "mm": ("毫米", "millimeter", "millimeters"),
    "nm": ("纳米", "nanometer", "nanometers"),
    "μm": ("微米", "micrometer", "micrometers"),
    "m": ("米", "meter", "meters"),
    "kg": ("千克", "kilogram", "kilograms"),
    "KG": ("千克", "kilogram", "kilograms"),
    "Kg": ("千克", "kilogram", "kilograms"),
    "mg": ("毫克", "milligram", "milligrams"),
    "g": ("克", "gram", "grams"),
    "t": ("吨", "ton", "tons"),
    "ml": ("毫升", "milliliter", "milliliters"),
    "mL": ("毫升", "milliliter", "milliliters"),
    "ML": ("毫升", "milliliter", "milliliters"),
    "l": ("升", "liter", "liters"),
    "L": ("升", "liter", "liters"),
    "mi": ("英里", "mile", "miles"),
    "ft": ("英尺", "foot", "feet"),
    "lb": ("磅", "pound", "pounds"),
    "lbs": ("磅", "pound", "pounds"),
    "oz": ("盎司", "ounce", "ounces"),
    "°C": ("摄氏度", "degree Celsius", "degrees Celsius"),
    "℃": ("摄氏度", "degree Celsius", "degrees Celsius"),
    "°F": ("华氏度", "degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("度", "degree", "degrees"),
    "TB": ("太字节", "terabyte", "terabytes"),
    "GB": ("吉字节", "gigabyte", "gigabytes"),
    "MB": ("兆字节", "megabyte", "megabytes"),
    "KB": ("千字节", "kilobyte", "kilobytes"),
    "kB": ("千字节", "kilobyte", "kilobytes"),
    "Mbps": ("兆比特每秒", "megabit per second", "megabits per second"),
    "GHz": ("吉赫兹", "gigahertz", "gigahertz"),
    "MHz": ("兆赫兹", "megahertz", "megahertz"),
    "kHz": ("千赫兹", "kilohertz", "kilohertz"),
    "Hz": ("赫兹", "hertz", "hertz"),
    "kWh": ("千瓦时", "kilowatt hour", "kilowatt hours"),
    "kW": ("千瓦", "kilowatt", "kilowatts"),
    "W": ("瓦", "watt", "watts"),
    "V": ("伏", "volt", "volts"),
    "mAh": ("毫安时", "milliamp hour", "milliamp hours"),
    "dB": ("分贝", "decibel", "decibels"),
    "ms": ("毫秒", "millisecond", "milliseconds"),
    "s": ("秒", "second", "seconds"),
    "sec": ("秒", "second", "seconds"),
    "min": ("分钟", "minute", "minutes"),
    "mins": ("分钟", "minute", "minutes"),
    "h": ("小时", "hour", "hours"),
    "hr": ("小时", "hour", "hours"),
    "hrs": ("小时", "hour", "hours"),
    "fps": ("帧每秒", "frame per second", "frames per second"),
}
# Temperature and angle read 二, not 两, for 2.
NO_LIANG_UNITS = frozenset({"°C", "℃", "°F", "°"})
UNIT_PATTERN = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))

# Currency written before the amount → (Chinese, English major singular/plural, English minor or None).
CURRENCY_SYMBOLS: dict[str, tuple[str, tuple[str, str], tuple[str, str] | None]] = {
    "US$": ("美元", ("dollar", "dollars"), ("cent", "cents")),
    "HK$": ("港元", ("Hong Kong dollar", "Hong Kong dollars"), ("cent", "cents")),
    "NT$": ("新台币", ("New Taiwan dollar", "New Taiwan dollars"), None),
    "A$": ("澳元", ("Australian dollar", "Australian dollars"), ("cent", "cents")),
    "C$": ("加元", ("Canadian dollar", "Canadian dollars"), ("cent", "cents")),
    "S$": ("新加坡元", ("Singapore dollar", "Singapore dollars"), ("cent", "cents")),
    "$": ("美元", ("dollar", "dollars"), ("cent", "cents")),
    "¥": ("元", ("yuan", "yuan"), None),
    "￥": ("元", ("yuan", "yuan"), None),
    "RMB": ("元", ("yuan", "yuan"), None),
    "CNY": ("元", ("yuan", "yuan"), None),
    "€": ("欧元", ("euro", "euros"), ("cent", "cents")),
    "EUR": ("欧元", ("euro", "euros"), ("cent", "cents")),
    "£": ("英镑", ("pound", "pounds"), ("penny", "pence")),
    "GBP": ("英镑", ("pound", "pounds"), ("penny", "pence")),
    "USD": ("美元", ("dollar", "dollars"), ("cent", "cents")),
    "JPY": ("日元", ("yen", "yen"), None),
    "₩": ("韩元", ("won", "won"), None),
    "₹": ("卢比", ("rupee", "rupees"), None),
}
CURRENCY_PATTERN = "|".join(re.escape(c) for c in sorted(CURRENCY_SYMBOLS, key=len, reverse=True))
# Currency words written after the amount, in English text → the same entries.
CURRENCY_WORDS_EN: dict[str, str] = {
    "dollar": "$", "dollars": "$", "buck": "$", "bucks": "$", "USD": "USD",
    "euro": "€", "euros": "€", "EUR": "EUR", "pound": "£", "pounds": "£", "GBP": "GBP",
    "yuan": "¥", "RMB": "RMB", "CNY": "CNY",
}  # fmt: skip
CURRENCY_WORDS_EN_PATTERN = "|".join(sorted(CURRENCY_WORDS_EN, key=len, reverse=True))
# Currency signs some write after the amount (100￥), read as the word.
CURRENCY_SUFFIX_SYMBOLS = {"¥": "元", "￥": "元"}
# Chinese currency words after an amount: the amount is read as money (trailing zeros dropped).
CURRENCY_WORDS_ZH = (
    "块钱",
    "美元",
    "欧元",
    "英镑",
    "日元",
    "港元",
    "港币",
    "韩元",
    "人民币",
    "元",
    "块",
    "角",
    "毛",
)
# Regex for them, plus ¥ written after the amount when no other amount follows it.
CURRENCY_WORDS_ZH_PATTERN = "|".join(CURRENCY_WORDS_ZH) + r"|[¥￥](?!\s?\d)"
SCALE_WORDS: dict[str, tuple[str, str]] = {  # after an amount of money: (Chinese, English)
    "thousand": ("千", "thousand"), "k": ("千", "thousand"), "K": ("千", "thousand"),
    "million": ("百万", "million"), "m": ("百万", "million"), "M": ("百万", "million"),
    "billion": ("十亿", "billion"), "bn": ("十亿", "billion"), "trillion": ("万亿", "trillion"),
    "千": ("千", "thousand"), "万": ("万", "ten thousand"), "亿": ("亿", "hundred million"),
}  # fmt: skip
SCALE_PATTERN = "|".join(sorted(SCALE_WORDS, key=len, reverse=True))

# Symbols read as words: (Chinese, English).
SYMBOLS: dict[str, tuple[str, str]] = {
    "&": ("和", "and"),
    "@": ("艾特", "at"),
    "+": ("加", "plus"),
    "=": ("等于", "equals"),
    "#": ("井号", "hash"),
    "×": ("乘", "times"),
    "÷": ("除以", "divided by"),
    "²": ("的平方", "squared"),
    "³": ("的立方", "cubed"),
    "<": ("小于", "less than"),
    ">": ("大于", "greater than"),
    "<=": ("小于等于", "less than or equal to"),
    ">=": ("大于等于", "greater than or equal to"),
    "-": ("减", "minus"),
}

# Punctuation inside a web address, an email address or a file path, read in English whatever the language
# around it (https://example.com/a?b=1 → example dot com slash a question mark b equals one).
ADDRESS_SYMBOLS: dict[str, str] = {
    ".": "dot", "/": "slash", "\\": "backslash", ":": "colon", "-": "dash", "_": "underscore", "@": "at",
    "?": "question mark", "=": "equals", "&": "and", "#": "hash", "~": "tilde", "%": "percent", "+": "plus",
}  # fmt: skip

# After a bare 2 these measure words make it 两 (两个, 两点, 两万); not 二月, 二号, 二楼, 二年级.
LIANG_MEASURES = (
    "个", "位", "只", "本", "次", "天", "岁", "件", "条", "张", "把", "辆", "台", "块",
    "种", "名", "家", "份", "杯", "瓶", "碗", "层", "倍", "双", "对", "句", "篇", "首",
    "部", "所", "座", "间", "棵", "头", "匹", "片", "支", "根", "颗", "项", "场", "节",
    "遍", "趟", "口", "斤", "人", "周", "星期", "小时", "分钟", "秒", "点", "千", "万", "亿",
    "百", "组", "套", "回", "步", "章", "声", "下", "眼", "笔", "顿", "阵", "架", "艘",
    "封", "盘", "副", "幅", "批", "群", "样", "类", "公里", "公斤", "米", "年",
)  # fmt: skip
NOT_LIANG_AFTER = ("年级", "年代")
