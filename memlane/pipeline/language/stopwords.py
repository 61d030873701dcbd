"""Stopwords per language: the words that carry no topic.

German, French, Spanish, Portuguese, Italian and Dutch: closed-class words only
(articles, pronouns, prepositions, conjunctions, auxiliaries, question words: a
question's "welche" or "quel" is no topic), written here in the spirit
of the Snowball project's lists. The other languages take the `stopwordsiso` package's
list (MIT) when it is installed: broader (its German list holds "morgen", "tag", "zeit"),
so it is not used where a list of our own exists. English's list is
pipeline.dedup.keywords' (NLTK's), unchanged.
"""

from __future__ import annotations

from functools import cache


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


OWN_LISTS: dict[str, frozenset[str]] = {
    "de": _words(
        """
        aber als am an auch auf aus bei bin bis bist da damit dann das dass dem den der des
        dich die dies diese diesem diesen dieser dieses dir doch dort du durch ein eine einem
        einen einer eines er es etwas euch euer eure für gegen gewesen hab habe haben hat
        hatte hatten hier hin hinter ich ihm ihn ihnen ihr ihre ihrem ihren ihrer im in ins
        ist ja jede jedem jeden jeder jedes jetzt man mein meine meinem meinen meiner mich
        mir mit nach noch nun nur ob oder ohne sehr sein seine seinem seinen seiner sich sie
        sind so solche um und uns unser unsere unter vom von vor war waren warst was weil
        welche wenn wer werde werden wie wieder will wir wird wo wurde wurden zu zum zur
        über welcher welches welchen welchem wann warum wieso weshalb wieviel
        """
    ),
    "fr": _words(
        """
        a ai au aux avec avait c' ce ces cet cette d' dans de des du elle elles en est et
        été étais était eu il ils j' je l' la le les leur leurs lui m' ma mais me même mes
        moi mon n' nos notre nous on ont ou où par pour qu' que qui s' sa se ses si son sont
        sur t' ta te tes toi ton tu un une vos votre vous y à ça quel quelle quels quelles
        quoi comment quand pourquoi combien est-ce
        """
    ),
    "es": _words(
        """
        a al algo ante con como de del el ella ellas ellos en entre era es esa ese eso esta
        está están este esto estoy fue ha han hay la las le les lo los me mi mis muy nos
        nosotros o os para pero por que qué se su sus también te tiene tengo ti tu tus un
        una unos unas y ya yo él cuál cuáles cómo cuándo dónde quién quiénes cuánto cuánta
        """
    ),
    "pt": _words(
        """
        a ao aos as com como da das de do dos e ela elas ele eles em era essa esse esta
        está estão este eu foi há isso isto já lhe mais mas me meu minha muito na nas no
        nos nós o os ou para pela pelo por que se seu sua são também te tem tenho um uma
        umas uns você à é qual quais quando onde quem porque quanto quanta
        """
    ),
    "it": _words(
        """
        a ad al all' alla alle allo agli ai anche c' che ci come con da dal dalla de dei del
        dell' della delle dello di e è ed era gli ha hanno ho i il in io l' la le lei li lo
        loro lui ma mi mia mio molto ne nel nell' nella nelle noi o per più questa questo
        se si sono su sua suo sul sulla ti tra tu un un' una uno vi voi quale quali quando
        dove chi perché quanto quanta cosa
        """
    ),
    "nl": _words(
        """
        aan al als bij ben bent ook dan dat de der deze die dit doet door du een en er is
        haar had heb hebben heeft hem het hier hij hun ik in is je jij maar me met mijn na
        naar of om omdat onder ons onze op over te tegen toch tot u uit van veel voor was
        waren wat we wel werd wie wij wil worden wordt zal ze zich zij zijn zo zou welke
        wanneer waar waarom hoe
        """
    ),
    # Chinese and Japanese: only what the segmenter (pipeline.language.cjk) must not put
    # into a character pair; Japanese hiragana is dropped by the segmenter itself.
    "zh": _words(
        "的 了 吗 呢 吧 啊 呀 我 你 他 她 它 们 是 也 都 很 着 把 被 就 在 和 一个 什么 哪里 哪儿"
        " 怎么 怎样 为什么 谁 多少"
    ),
    "ja": _words("私 僕 俺 自分 彼 彼女 私たち 方 何 誰"),
}


@cache
def stopwords(language: str) -> frozenset[str]:
    """The stopwords of a language (ISO 639-1): our own list, else stopwordsiso's, else
    none."""
    own = OWN_LISTS.get(language)
    if own is not None:
        return own
    try:
        import stopwordsiso  # type: ignore[import-untyped]
    except ImportError:
        return frozenset()
    if not stopwordsiso.has_lang(language):
        return frozenset()
    return frozenset(w.casefold() for w in stopwordsiso.stopwords(language))
