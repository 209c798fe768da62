"""Golden Chinese readings: polyphones, 一/不 sandhi, neutral tone, erhua, and the pinyin → phone split."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rtvox.errors import TextError
from rtvox.text import Frontend
from rtvox.text.pinyin import parse_syllable, split_syllable, syllable_phones

Pinyin = Callable[[str], list[str]]

POLYPHONES = [
    ("重庆", "chong2 qing4"),
    ("银行", "yin2 hang2"),
    ("行走", "xing2 zou3"),
    ("行长", "hang2 zhang3"),
    ("银行行长", "yin2 hang2 hang2 zhang3"),
    ("长大", "zhang3 da4"),
    ("长城", "chang2 cheng2"),
    ("我还钱", "wo3 huan2 qian2"),
    ("他把书还给我", "ta1 ba3 shu1 huan2 gei3 wo3"),
    ("还有", "hai2 you3"),
    ("音乐", "yin1 yue4"),
    ("快乐", "kuai4 le4"),
    ("乐器", "yue4 qi4"),
    ("会计", "kuai4 ji4"),
    ("开会", "kai1 hui4"),
    ("了解", "liao3 jie3"),
    ("好了", "hao3 le5"),
    ("得到", "de2 dao4"),
    ("我得去上班", "wo3 dei3 qu4 shang4 ban1"),
    ("你得先走", "ni3 dei3 xian1 zou3"),
    ("他跑得很快", "ta1 pao3 de5 hen3 kuai4"),
    ("觉得", "jue2 de5"),
    ("睡觉", "shui4 jiao4"),
    ("重新", "chong2 xin1"),
    ("重要", "zhong4 yao4"),
    ("调查", "diao4 cha2"),
    ("空调", "kong1 tiao2"),
    ("数学", "shu4 xue2"),
    ("数一数", "shu3 yi5 shu3"),
    ("为了", "wei4 le5"),
    ("因为", "yin1 wei4"),
    ("差不多", "cha4 bu5 duo1"),
    ("出差", "chu1 chai1"),
    ("朝阳", "zhao1 yang2"),
    ("朝代", "chao2 dai4"),
    ("传记", "zhuan4 ji4"),
    ("处理", "chu3 li3"),
    ("到处", "dao4 chu4"),
    ("和面", "huo2 mian4"),
    ("和平", "he2 ping2"),
    ("慢慢地走", "man4 man4 de5 zou3"),
    ("他高兴地说", "ta1 gao1 xing4 de5 shuo1"),
    ("中国", "zhong1 guo2"),
    ("中奖", "zhong4 jiang3"),
    ("着急", "zhao2 ji2"),
    ("看着", "kan4 zhe5"),
    ("便宜", "pian2 yi5"),
    ("方便", "fang1 bian4"),
    ("干净", "gan1 jing4"),
    ("干活", "gan4 huo2"),
    ("几乎", "ji1 hu1"),
    ("几个", "ji3 ge4"),
    ("都是", "dou1 shi4"),
    ("首都", "shou3 du1"),
    ("兴趣", "xing4 qu4"),
    ("高兴", "gao1 xing4"),
    ("这只猫", "zhe4 zhi1 mao1"),
    ("只有", "zhi3 you3"),
    ("头发", "tou2 fa5"),
    ("把温度调高", "ba3 wen1 du4 tiao2 gao1"),
    ("他被调到北京", "ta1 bei4 diao4 dao4 bei3 jing1"),
    ("长长的头发", "chang2 chang2 de5 tou2 fa5"),
    ("头发长长了", "tou2 fa5 zhang3 chang2 le5"),
    ("一封很长的信", "yi4 feng1 hen3 chang2 de5 xin4"),
    ("这条路太长了", "zhe4 tiao2 lu4 tai4 chang2 le5"),
    ("头发长了", "tou2 fa5 zhang3 le5"),
    ("树长高了", "shu4 zhang3 gao1 le5"),
    ("会议开了多长时间", "hui4 yi4 kai1 le5 duo1 chang2 shi2 jian1"),
    ("校长来了", "xiao4 zhang3 lai2 le5"),
    ("长城很长", "chang2 cheng2 hen3 chang2"),
    ("明天开家长会", "ming2 tian1 kai1 jia1 zhang3 hui4"),
    ("营长来了", "ying2 zhang3 lai2 le5"),
    ("我们楼的楼长", "wo3 men5 lou2 de5 lou2 zhang3"),
    ("轨道扁长", "gui3 dao4 bian3 chang2"),
    ("大桥全长三十公里", "da4 qiao2 quan2 chang2 san1 shi2 gong1 li3"),
    ("树都歪着长", "shu4 dou1 wai1 zhe5 zhang3"),
    ("鱼苗长到了一斤", "yu2 miao2 zhang3 dao4 le5 yi4 jin1"),
    ("大象用长鼻子喷水", "da4 xiang4 yong4 chang2 bi2 zi5 pen1 shui3"),
    ("我数了三遍", "wo3 shu3 le5 san1 bian4"),
    ("这个数很大", "zhe4 ge5 shu4 hen3 da4"),
    ("老师教我们唱歌", "lao3 shi1 jiao1 wo3 men5 chang4 ge1"),
    ("教育很重要", "jiao4 yu4 hen3 zhong4 yao4"),
    ("他睡了一觉", "ta1 shui4 le5 yi2 jiao4"),
    ("我觉得很好", "wo3 jue2 de5 hen3 hao3"),
    ("他考中了", "ta1 kao3 zhong4 le5"),
    ("在中国", "zai4 zhong1 guo2"),
    ("别着急慢慢来", "bie2 zhao2 ji2 man4 man4 lai2"),
    ("妈妈在削苹果", "ma1 ma5 zai4 xiao1 ping2 guo3"),
    ("削弱", "xue1 ruo4"),
    ("我背着书包上学", "wo3 bei1 zhe5 shu1 bao1 shang4 xue2"),
    ("请帮我盛一碗饭", "qing3 bang1 wo3 cheng2 yi4 wan3 fan4"),
    ("他冲着我笑", "ta1 chong4 zhe5 wo3 xiao4"),
    ("抽屉被卡住了", "chou1 ti4 bei4 qia3 zhu4 le5"),
    ("妈妈在缝衣服", "ma1 ma5 zai4 feng2 yi1 fu2"),
    ("请给我照张相", "qing3 gei3 wo3 zhao4 zhang1 xiang4"),
    ("我们互相帮助", "wo3 men5 hu4 xiang1 bang1 zhu4"),
    # jieba words pypinyin has no entry for read through its phrases inside them
    ("去理发店剪头发", "qu4 li3 fa4 dian4 jian3 tou2 fa4"),
    ("重阳节", "chong2 yang2 jie2"),
    ("供应商延迟交货", "gong1 ying4 shang1 yan2 chi2 jiao1 huo4"),
    ("玩得满头大汗", "wan2 de5 man3 tou2 da4 han4"),
    ("然后还信用卡", "ran2 hou4 huan2 xin4 yong4 ka3"),
    ("发现", "fa1 xian4"),
]

SANDHI = [
    ("一个", "yi2 ge4"),
    ("一天", "yi4 tian1"),
    ("一样", "yi2 yang4"),
    ("一起", "yi4 qi3"),
    ("一年", "yi4 nian2"),
    ("第一", "di4 yi1"),
    ("一一", "yi1 yi1"),
    ("十一", "shi2 yi1"),
    ("统一", "tong3 yi1"),
    ("星期一", "xing1 qi1 yi1"),
    ("一月", "yi1 yue4"),
    ("一百", "yi4 bai3"),
    ("一万", "yi2 wan4"),
    ("看一看", "kan4 yi5 kan4"),
    ("2019年", "er4 ling2 yi1 jiu3 nian2"),
    ("1.5", "yi1 dian3 wu3"),
    ("不对", "bu2 dui4"),
    ("不好", "bu4 hao3"),
    ("不是", "bu2 shi4"),
    ("不用", "bu2 yong4"),
    ("不吃", "bu4 chi1"),
    ("好不好", "hao3 bu5 hao3"),
    ("是不是", "shi4 bu5 shi4"),
    ("对不起", "dui4 bu5 qi3"),
]

NEUTRAL = [
    ("桌子", "zhuo1 zi5"),
    ("妈妈", "ma1 ma5"),
    ("爸爸", "ba4 ba5"),
    ("谢谢", "xie4 xie5"),
    ("朋友", "peng2 you5"),
    ("东西", "dong1 xi5"),
    ("我们", "wo3 men5"),
    ("什么", "shen2 me5"),
    ("看看", "kan4 kan5"),
    ("休息", "xiu1 xi5"),
    ("漂亮", "piao4 liang5"),
    ("石头", "shi2 tou5"),
]

ERHUA = [
    ("一点儿", "yi4 dian3 er5"),
    ("玩儿", "wan2 er5"),
    ("这儿", "zhe4 er5"),
    ("哪儿", "na3 er5"),
    ("一会儿", "yi2 hui4 er5"),
    ("小孩儿", "xiao3 hai2 er5"),
    ("女儿", "nv3 er2"),
    ("儿子", "er2 zi5"),
]


@pytest.mark.parametrize(("text", "expected"), POLYPHONES)
def test_polyphones(pinyin: Pinyin, text: str, expected: str) -> None:
    assert pinyin(text) == expected.split()


@pytest.mark.parametrize(("text", "expected"), SANDHI)
def test_yi_bu_sandhi(pinyin: Pinyin, text: str, expected: str) -> None:
    assert pinyin(text) == expected.split()


@pytest.mark.parametrize(("text", "expected"), NEUTRAL)
def test_neutral_tone(pinyin: Pinyin, text: str, expected: str) -> None:
    assert pinyin(text) == expected.split()


@pytest.mark.parametrize(("text", "expected"), ERHUA)
def test_erhua(pinyin: Pinyin, text: str, expected: str) -> None:
    assert pinyin(text) == expected.split()


def test_place_reading_of_di(pinyin: Pinyin) -> None:
    assert pinyin("地方")[0] == "di4"


def test_erhua_phonemes_carry_the_marker(frontend: Frontend) -> None:
    (token,) = frontend.tokenize("一点儿")
    assert token.phonemes == ("zh:i4", "zh:d", "zh:ian3", "zh:+r")
    (daughter,) = frontend.tokenize("女儿")
    assert "zh:+r" not in daughter.phonemes and daughter.phonemes[-1] == "zh:er2"


def test_lone_erhua_joins_the_word_before(frontend: Frontend) -> None:
    tokens = frontend.tokenize("我们去玩儿吧")
    assert [t.text for t in tokens] == ["我们", "去", "玩儿", "吧"]


def test_token_is_a_jieba_word(frontend: Frontend) -> None:
    tokens = frontend.tokenize("我们下周去重庆出差")
    assert [t.text for t in tokens] == ["我们", "下周", "去", "重庆", "出差"]
    assert tokens[3].pinyin == ("chong2", "qing4")
    assert tokens[3].phonemes == ("zh:ch", "zh:ong2", "zh:q", "zh:ing4")


@pytest.mark.parametrize(
    ("syllable", "parts"),
    [
        ("zhang4", ("zh", "ang", "4")),
        ("you3", ("", "iou", "3")),
        ("wei4", ("", "uei", "4")),
        ("yuan2", ("", "van", "2")),
        ("jun1", ("j", "vn", "1")),
        ("lv4", ("l", "v", "4")),
        ("zhi1", ("zh", "ir", "1")),
        ("si4", ("s", "iz", "4")),
        ("er2", ("", "er", "2")),
        ("ao4", ("", "ao", "4")),
        ("gui4", ("g", "uei", "4")),
    ],
)
def test_split_syllable(syllable: str, parts: tuple[str, str, str]) -> None:
    assert split_syllable(syllable) == parts


def test_syllable_phones_tag_initial_and_toned_final() -> None:
    assert syllable_phones("shang4") == ("zh:sh", "zh:ang4")
    assert syllable_phones("a1") == ("zh:a1",)


@pytest.mark.parametrize(("raw", "expected"), [("huán", "huan2"), ("Lü4", "lv4"), ("nǚ", "nv3"), ("le5", "le5")])
def test_parse_syllable_accepts_tone_marks_and_u_umlaut(raw: str, expected: str) -> None:
    assert parse_syllable(raw) == expected


@pytest.mark.parametrize("raw", ["xyz9", "huan", "huan6", "zhx1", ""])
def test_parse_syllable_rejects_non_syllables(raw: str) -> None:
    with pytest.raises(TextError, match="pinyin syllable"):
        parse_syllable(raw)
