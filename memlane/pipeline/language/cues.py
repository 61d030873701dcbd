"""Polarity cues per language, as data: what makes a memory statement negative, what says
how the user stands towards a topic rather than what the topic is, and the words that
name the user (the subject of every extracted memory, no topic).

Per language:
- negations: tokens (case-folded, before stemming) that make a statement negative;
- negative: words of aversion or stopping (dislike, hate, quit): negative too;
- positive: words of liking and habit (like, love, prefer, always);
- subject: "user" in the words the extraction prompt's memories use.
negative and positive are listed as words people write; the analyser stems them with the
language's stemmer (so "hasst", "hasse", "hassen" are one stem), and in Chinese and
Japanese they are matched as written by the segmenter (pipeline.language.cjk).
English is not here: its rules are pipeline.dedup.keywords', unchanged since before
languages (its stopwords and stems are what every English store holds).

A rule for memory sentences, not a parser: "ne … plus" is negative because of "ne", and
a Japanese "少ない" (few) reads as negative because it ends in "ない".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Cues:
    negations: frozenset[str]
    negative: frozenset[str]
    positive: frozenset[str]
    subject: frozenset[str]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


CUES: dict[str, Cues] = {
    "de": Cues(
        negations=_words(
            "nicht kein keine keinen keinem keiner keines nie niemals nimmer weder nichts"
        ),
        negative=_words(
            "hasse hasst hassen hasste hassten gehasst verabscheut verabscheue abneigung"
            " aufgehört aufhören"
        ),
        positive=_words(
            "mag magst mögen mochte liebe liebt lieben liebte bevorzugt bevorzuge"
            " bevorzugen gern gerne lieber immer genießt genieße genießen"
        ),
        subject=_words("nutzer nutzerin benutzer benutzerin user"),
    ),
    "fr": Cues(
        # "n'" is split from its verb by the analyser ("n'aime" → "n'", "aime")
        negations=_words("ne n' pas jamais aucun aucune rien ni personne"),
        negative=_words(
            "déteste détestes détestent détester détestait hais hait haïssent haïr arrêté arrêter"
        ),
        positive=_words(
            "aime aimes aiment aimer aimait adore adores adorent adorer préfère préfères"
            " préfèrent préférer toujours apprécie"
        ),
        subject=_words("utilisateur utilisatrice"),
    ),
    "es": Cues(
        negations=_words("no nunca jamás ni ningún ninguna ninguno tampoco nada nadie"),
        negative=_words("odia odio odian odiar detesta detesto detestan detestar"),
        positive=_words(
            "gusta gustan encanta encantan prefiere prefiero prefieren preferir ama amo"
            " aman siempre disfruta disfruto"
        ),
        subject=_words("usuario usuaria"),
    ),
    "pt": Cues(
        negations=_words("não nunca jamais nem nenhum nenhuma nada ninguém"),
        negative=_words("odeia odeio odeiam odiar detesta detesto detestam parou"),
        positive=_words(
            "gosta gosto gostam adora adoro adoram prefere prefiro preferem ama amo amam"
            " sempre curte"
        ),
        subject=_words("usuário usuária utilizador utilizadora"),
    ),
    "it": Cues(
        negations=_words("non mai né nessun nessuno nessuna niente nulla"),
        negative=_words("odia odio odiano odiare detesta detesto detestano smesso"),
        positive=_words(
            "piace piacciono ama amo amano adora adoro adorano preferisce preferisco"
            " preferiscono sempre"
        ),
        subject=_words("utente"),
    ),
    "nl": Cues(
        negations=_words("niet geen nooit noch niets niemand"),
        negative=_words("haat haten hekel gestopt stopt stoppen"),
        positive=_words("houdt hou houden graag dol voorkeur altijd geniet genieten"),
        subject=_words("gebruiker gebruikster"),
    ),
    "zh": Cues(
        negations=_words("不 没 没有 别 从不 从来不 从没 未 不再 并不"),
        negative=_words("讨厌 厌恶 恨 戒了 戒掉 停止 放弃"),
        positive=_words("喜欢 爱 热爱 偏爱 更喜欢 喜爱 总是 一直 享受"),
        subject=_words("用户"),
    ),
    "ja": Cues(
        negations=_words("ない ません ず なかった ではない じゃない 決して"),
        negative=_words("嫌い 大嫌い 嫌 やめた やめました 辞めた 辞めました"),
        positive=_words("好き 大好き 愛 好む 好みます いつも 常に"),
        subject=_words("ユーザー ユーザ 利用者"),
    ),
}
