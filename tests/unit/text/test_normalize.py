"""Golden normalization cases: every category in Chinese and English context, with exact expected strings."""

from __future__ import annotations

import pytest

from rtvox.text import Frontend
from rtvox.text import numbers_en as en
from rtvox.text import numbers_zh as zh

ZH_CASES = [
    # integers, decimals, negatives, 两
    ("我有3个苹果", "我有三个苹果"),
    ("共有1234人", "共有一千二百三十四人"),
    ("人口1,234,567", "人口一百二十三万四千五百六十七"),
    ("圆周率是3.14", "圆周率是三点一四"),
    ("概率为0.5", "概率为零点五"),
    ("温度是-5度", "温度是负五度"),
    ("买2个", "买两个"),
    ("2000元", "两千元"),
    ("花了2万", "花了两万"),
    ("第2名", "第二名"),
    ("2月2号", "二月二号"),
    # percentages, fractions, ordinals
    ("增长了50%", "增长了百分之五十"),
    ("下降了3.5%", "下降了百分之三点五"),
    ("占3/4", "占四分之三"),
    ("二分之一是1/2", "二分之一是二分之一"),
    ("吃了½个，还有1½个", "吃了二分之一个，还有一又二分之一个"),  # vulgar fractions, a mixed number
    ("会议在31/12/2024举行", "会议在二零二四年十二月三十一日举行"),  # day first when it cannot be a month
    ("5.3.2024", "二零二四年三月五日"),  # dots: day, month, year
    ("他是第3名", "他是第三名"),
    # years and dates
    ("2024年", "二零二四年"),
    ("1999年出生", "一九九九年出生"),
    ("90年代", "九零年代"),
    ("2024年3月5日", "二零二四年三月五日"),
    ("今天是2024-03-05", "今天是二零二四年三月五日"),
    ("日期2024/3/5", "日期二零二四年三月五日"),
    # times
    ("现在10:30", "现在十点三十分"),
    ("10:05开会", "十点零五分开会"),
    ("下午2:00见", "下午两点见"),
    ("10:30:15出发", "十点三十分十五秒出发"),
    ("营业时间10:00-22:00", "营业时间十点到二十二点"),
    ("会议9:00~11:30举行", "会议九点到十一点三十分举行"),
    # phone numbers: digit by digit, 1 read 幺
    ("我的电话是13812345678", "我的电话是幺三八幺二三四五六七八"),
    ("拨打010-12345678", "拨打零幺零 幺二三四五六七八"),
    ("房间号302", "房间号三零二"),
    # room, train and bus-route numbers named by the word after them, digit by digit; counts stay counts
    ("请到503会议室开会", "请到五零三会议室开会"),
    ("他住在1104房间", "他住在幺幺零四房间"),
    ("G1234次列车", "G幺二三四次列车"),
    ("坐303路公交车", "坐三零三路公交车"),
    ("我去过100次", "我去过一百次"),
    ("门口有200室友", "门口有二百室友"),
    # currency
    ("价格¥12.50", "价格十二点五元"),
    ("价格是$3.50", "价格是三点五美元"),
    ("门票€5", "门票五欧元"),
    ("一共£20", "一共二十英镑"),
    ("花了12.50元", "花了十二点五元"),
    # units
    ("跑了5km", "跑了五公里"),
    ("重3kg", "重三千克"),
    ("气温30℃", "气温三十摄氏度"),
    ("气温-5℃", "气温零下五摄氏度"),
    ("长2.5cm", "长二点五厘米"),
    ("高1.8m", "高一点八米"),
    ("喝100ml水", "喝一百毫升水"),
    ("内存8GB", "内存八吉字节"),
    ("文件512MB", "文件五百一十二兆字节"),
    ("时速120km/h", "时速一百二十公里每小时"),
    ("走了2公里", "走了两公里"),
    # ranges
    ("3-5个", "三到五个"),
    ("10~20人", "十到二十人"),
    ("3-5km", "三到五公里"),
    ("增长10%-20%", "增长百分之十到百分之二十"),
    ("1990-2000年", "一九九零到二零零零年"),
    # symbols and maths
    ("3+5=8", "三加五等于八"),
    ("比分3:2", "比分三比二"),
    ("花了2元", "花了两元"),
    # digits in mixed text follow the Chinese words around them
    ("我有3个apple", "我有三个apple"),
    ("iPhone 15售价5999元", "iPhone 十五售价五千九百九十九元"),
    ("3D打印", "三D打印"),
    ("5G网络", "五G网络"),
]

EN_CASES = [
    ("I have 3 apples", "I have three apples"),
    ("It has 1,234 pages", "It has one thousand two hundred thirty-four pages"),
    ("Pi is 3.14", "Pi is three point one four"),
    ("It was -5 outside", "It was minus five outside"),
    ("the 1st and 22nd", "the first and twenty-second"),
    ("the 3rd, 11th and 101st", "the third, eleventh and one hundred first"),
    ("In 1999 we", "In nineteen ninety-nine we"),
    ("In 2024 we", "In twenty twenty-four we"),
    ("In 2005 we", "In two thousand five we"),
    ("In 1905 we", "In nineteen oh five we"),
    ("In 2000 we", "In two thousand we"),
    ("the 1990s", "the nineteen nineties"),
    ("It costs $3.50", "It costs three dollars fifty cents"),
    ("It costs $1.", "It costs one dollar."),
    ("only $0.99 each", "only ninety-nine cents each"),
    ("That is £2.50", "That is two pounds fifty pence"),
    ("It costs €20", "It costs twenty euros"),
    ("about $2.5 million", "about two point five million dollars"),
    ("We met at 10:30 today", "We met at ten thirty today"),
    ("We met at 9:05 today", "We met at nine oh five today"),
    ("We met at 10:30 am", "We met at ten thirty a m"),
    ("Call me at 3pm.", "Call me at three p m."),
    ("We leave at 7 a.m. tomorrow", "We leave at seven a m tomorrow"),
    ("at 4:15 p.m.", "at four fifteen p m."),
    ("It is 5 km away", "It is five kilometers away"),
    ("It weighs 1 kg", "It weighs one kilogram"),
    ("about 60 mph", "about sixty miles per hour"),
    ("It is 25°C today", "It is twenty-five degrees Celsius today"),
    ("use 2.5 cm", "use two point five centimeters"),
    ("open 9:30 - 11:00 daily", "open nine thirty to eleven o'clock daily"),
    ("call 555-0123 now", "call five five five, zero one two three now"),
    ("between 100-1000 people", "between one hundred to one thousand people"),
    ("a 50% discount", "a fifty percent discount"),
    ("It takes 3-5 days", "It takes three to five days"),
    ("add 1/2 cup", "add one half cup"),
    ("drink 3/4 of it", "drink three quarters of it"),
    ("It is ½ done, 1½ cups, 3 1/2 miles", "It is one half done, one and a half cups, three and a half miles"),
    ("2 3/4 inches, ¾ of 10", "two and three quarters inches, three quarters of ten"),
    ("On 31/12/2024 we met", "On December thirty-first, twenty twenty-four we met"),
    ("It fell $-5 today", "It fell minus five dollars today"),  # the sign after the symbol keeps the currency
    # no words at all: one language for the whole text, English on the evidence of "$"
    ("¥100, $3.50, 3.14", "one hundred yuan, three dollars fifty cents, three point one four"),
    ("Dr. Smith is here", "Doctor Smith is here"),
    ("Mr. and Mrs. Jones", "Mister and Missus Jones"),
    ("Ms. Lee met Prof. Brown", "Miz Lee met Professor Brown"),
    ("Tom Jr. is here", "Tom Junior is here"),
    ("St. John is kind", "Saint John is kind"),
    ("He lives on Main St. now", "He lives on Main Street now"),
    ("apples, pears, etc.", "apples, pears, et cetera."),
    ("fruit, e.g. apples", "fruit, for example apples"),
    ("one, i.e. this", "one, that is this"),
    ("Tom vs. Jerry", "Tom versus Jerry"),
    ("salt & pepper", "salt and pepper"),
    ("me @ home", "me at home"),
    ("1 + 1 = 2 here", "one plus one equals two here"),
    ("vote #1 now", "vote number one now"),
    ("call 555-123-4567 now", "call five five five, one two three, four five six seven now"),
    ("the U.S.A. is big", "the U S A is big"),
]


# With no words at all around them, entities that are English on their own read in English; others in Chinese.
STANDALONE_CASES = [
    ("1999", "nineteen ninety-nine"),
    ("$3.50", "three dollars fifty cents"),
    ("1st", "first"),
    ("10:30 am", "ten thirty a m"),
    ("March 5", "March fifth"),
    ("10:30", "十点三十分"),
    ("3.14", "三点一四"),
    ("¥12.50", "十二点五元"),
    ("50%", "百分之五十"),
]


@pytest.mark.parametrize(("text", "expected"), STANDALONE_CASES)
def test_normalize_standalone(frontend: Frontend, text: str, expected: str) -> None:
    assert frontend.normalize(text) == expected


@pytest.mark.parametrize(("text", "expected"), ZH_CASES)
def test_normalize_zh(frontend: Frontend, text: str, expected: str) -> None:
    assert frontend.normalize(text) == expected


@pytest.mark.parametrize(("text", "expected"), EN_CASES)
def test_normalize_en(frontend: Frontend, text: str, expected: str) -> None:
    assert frontend.normalize(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "zero"),
        ("13", "thirteen"),
        ("40", "forty"),
        ("101", "one hundred one"),
        ("1000000", "one million"),
    ],
)
def test_en_cardinal(value: str, expected: str) -> None:
    assert en.cardinal(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [("1100", "eleven hundred"), ("2010", "twenty ten"), ("1066", "ten sixty-six")]
)
def test_en_year(value: str, expected: str) -> None:
    assert en.year(value) == expected


def test_zh_cardinal_falls_back_to_digits_past_cn2an_range() -> None:
    assert zh.cardinal("12345678901234567890") == "一二三四五六七八九零一二三四五六七八九零"
    assert zh.cardinal("110") == "一百一十"


def test_fullwidth_characters_are_folded(frontend: Frontend) -> None:
    assert frontend.normalize("我有３个ａｐｐｌｅ，好吗？") == "我有三个apple，好吗？"


def test_no_digits_survive(frontend: Frontend) -> None:
    text = "v1.2.3 192.168.0.1 007 12345678901234567890 3:2 x² ½ ٣"
    assert not any(ch.isdigit() for ch in frontend.normalize(text))


# A sign and the currency word after the amount name one currency: said once (it was "…元元", "dollars dollars").
CURRENCY_ONCE_CASES = [
    ("￥1,234.56元", "一千二百三十四点五六元"),
    ("价格是￥1,234.56元。", "价格是一千二百三十四点五六元。"),
    ("¥100元", "一百元"),
    ("RMB 100元", "一百元"),
    ("¥1万元", "一万元"),
    ("¥1-2元", "一到二元"),
    ("¥2元", "两元"),
    ("¥100块", "一百块"),  # Chinese says the word as written
    ("买了$100美元的书", "买了一百美元的书"),
    ("价格是$5 dollars", "价格是五美元"),
    ("€5欧元", "五欧元"),  # a Chinese word makes the amount Chinese whatever the sign
    ("It costs $5 dollars.", "It costs five dollars."),
    ("It costs €3.50 euros.", "It costs three euros fifty cents."),
    ("It costs ¥100元.", "It costs one hundred yuan."),
    ("$5 million dollars", "five million dollars"),
    ("US$5 USD", "five dollars"),
    ("¥100 yuan", "one hundred yuan"),
    ("-¥5元", "负五元"),
    # unchanged: a sign or a word alone
    ("¥100", "一百元"),
    ("100元", "一百元"),
    ("It costs $5.", "It costs five dollars."),
    ("€3.50", "three euros fifty cents"),
    ("£20", "twenty pounds"),
    ("100元人民币", "一百元人民币"),
]


@pytest.mark.parametrize(("text", "expected"), CURRENCY_ONCE_CASES)
def test_normalize_says_the_currency_once(frontend: Frontend, text: str, expected: str) -> None:
    assert frontend.normalize(text) == expected


# URLs, email addresses and paths are read in English words, in Chinese text too (https:// and / went unread).
ADDRESS_CASES = [
    ("https://example.com/a/b", "example dot com slash a slash b"),
    ("Visit https://example.com/a/b.", "Visit example dot com slash a slash b."),
    ("请访问https://example.com/a/b。", "请访问 example dot com slash a slash b。"),
    ("See https://example.com/, then", "See example dot com, then"),
    ("访问example.com/docs看看", "访问 example dot com slash docs 看看"),
    (
        "http://localhost:8080/path?q=1&x=2",
        "localhost colon eight zero eight zero slash path question mark q equals one and x equals two",
    ),
    ("https://github.com/foo-bar/Baz_qux", "github dot com slash foo dash bar slash Baz underscore qux"),
    ("ftp://files.example.org/pub", "ftp colon slash slash files dot example dot org slash pub"),
    ("www.example.com", "www dot example dot com"),
    ("email user@example.com now", "email user at example dot com now"),
    ("请发邮件到john2024@example.com。", "请发邮件到 john two zero two four at example dot com。"),
    ("cd /usr/local/bin now", "cd slash usr slash local slash bin now"),
    ("the path ~/.config/rtvox is", "the path tilde slash dot config slash rtvox is"),
    # unchanged: slashes in dates, fractions, units and word pairs; an at-sign alone
    ("2024/05/06", "二零二四年五月六日"),
    ("/2024/05/06", "/二零二四年五月六日"),
    ("1/2", "二分之一"),
    ("It is 50 km/h.", "It is fifty kilometers per hour."),
    ("and/or", "and/or"),
    ("me @ home", "me at home"),
]


@pytest.mark.parametrize(("text", "expected"), ADDRESS_CASES)
def test_normalize_reads_addresses(frontend: Frontend, text: str, expected: str) -> None:
    assert frontend.normalize(text) == expected
