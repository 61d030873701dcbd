"""The offline extractor's rules, as data: which clauses are memories, and how much each is worth.

A rule is a pattern matched at the start of a clause (after fillers such as "Honestly,"
and hedges such as "I think" are stripped). The first rule that matches decides; a
clause no rule matches is not a memory. Rules are written for the user's first-person
statements, plus a few for the assistant's "your X is Y".

Importance (the design's guide: ≥0.9 critical, 0.5–0.8 useful, <0.5 minor):
- 0.9  identity and health: name, allergies.
- 0.8  decisions, projects, diet, where the user lives, works and what they do,
       how they want to be called, birthdays.
- 0.7  strong preferences (prefer, hate, don't like, no longer), family and pets,
       dated plans, deadlines and other "my X is Y" facts.
- 0.6  milder preferences (like, love, favourite, always, never), origin, family news.
- 0.5  tools used, languages spoken. 0.4  age.
Confidence: 1.0 for the user's own plain statement; 0.7 when the user hedges ("I think",
"probably") or when only the assistant says it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memlane.pipeline.extraction.offline.text import ADVERBS
from memlane.pipeline.records import Category, Role


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    pattern: re.Pattern[str]  # matched at the clause start, case-insensitive
    category: Category
    importance: float
    speaker: Role = "user"
    # What follows the match must be a real object, not "it"/"that"/nothing.
    needs_object: bool = True
    # The clause counts only if it holds a date ("I'm flying to Porto on June 4").
    needs_date: bool = False
    # Keep only the matched words ("I'm vegetarian, have been for years" → "...vegetarian").
    keep_rest: bool = True


_A = ADVERBS
_FAMILY = (
    r"(?:wife|husband|partner|spouse|daughter|son|kid|child|baby|dog|cat|puppy|kitten|"
    r"brother|sister|mom|mum|mother|dad|father|boyfriend|girlfriend|fianc[ée]e?|parrot|"
    r"rabbit|hamster|pet|twins)"
)
_FAMILY_COUNTED = (
    r"(?:an?|one|two|three|four|five|\d+) (?:[\w-]+ ){0,2}"
    r"(?:dogs?|cats?|kids|children|sons?|daughters?|brothers?|sisters?|puppy|kitten|"
    r"parrots?|rabbits?|hamsters?|twins|pets?)\b"
)
_JOBS = (
    r"(?:engineer|developer|designer|manager|teacher|nurse|doctor|student|scientist|"
    r"analyst|writer|lawyer|consultant|researcher|architect|founder|cto|ceo|freelancer|"
    r"accountant|photographer|chef|professor|intern|programmer|administrator|editor|"
    r"journalist|physician|pharmacist|therapist|lead)s?\b"
)
_THINGS = (
    r"(?:deadline|launch|release|wedding|exam|interview|appointment|anniversary|birthday|"
    r"flight|trip|vacation|holiday|due date|demo|presentation|go-live|cutover|timezone|"
    r"time zone|team|manager|boss|company|employer|role|title|job|budget|stack|editor|"
    r"laptop|city|hometown)"
)
_DIETS = (
    r"(?:vegetarian|vegan|pescatarian|gluten[- ]free|lactose[- ]intolerant|celiac|coeliac|"
    r"diabetic|teetotal|kosher|halal)\b"
)
_PLANS = (
    r"(?:flying|moving|starting|leaving|travell?ing|getting married|going on|taking|"
    r"presenting|interviewing|visiting|heading)"
)
_PROJECT_VERBS = (
    r"(?:working on|building|developing|writing|migrating|designing|rewriting|refactoring|"
    r"launching|prototyping|setting up|porting|learning|studying)"
)
_AM = r"(?:i'm|i am)"
_WE_ARE = r"(?:i'm|i am|we're|we are)"


def _rule(
    name: str,
    pattern: str,
    category: Category,
    importance: float,
    *,
    speaker: Role = "user",
    needs_object: bool = True,
    needs_date: bool = False,
    keep_rest: bool = True,
) -> Rule:
    return Rule(
        name,
        re.compile(pattern, re.I),
        category,
        importance,
        speaker=speaker,
        needs_object=needs_object,
        needs_date=needs_date,
        keep_rest=keep_rest,
    )


# Rules of what the user asks of the assistant itself: how to address them, how to answer,
# what it should do. Their memories are about the agent of the conversation (pipeline.scope);
# every other rule's are about the user.
AGENT_RULES = frozenset({"call_me", "answer_me", "you_should"})

# One rule a line or two reads as a table; the formatter would spread each over six lines.
# fmt: off
USER_RULES: tuple[Rule, ...] = (
    _rule("name", r"^my name(?:'s| is)\s+", "fact", 0.9),
    _rule("call_me", r"^call me\s+", "preference", 0.8),
    _rule("answer_me", r"^(?:please )?(?:always )?(?:answer|reply|respond|talk|write)"
          r"(?: to)? me\s+", "preference", 0.7),
    _rule("you_should", r"^you should\s+", "preference", 0.7),
    _rule("allergy", rf"^{_AM}\s+{_A}(?:severely |very )?allergic to\s+", "fact", 0.9),
    _rule("allergy", r"^i have (?:an? |a severe |a mild )?(?:[\w-]+ )?allerg(?:y|ies) to\s+",
          "fact", 0.9),
    _rule("diet", rf"^{_AM}\s+{_A}(?:a )?{_DIETS}", "fact", 0.8, needs_object=False,
          keep_rest=False),
    _rule("diet", r"^i (?:can't|cannot|don't|do not) (?:eat|drink)\s+", "fact", 0.8),
    _rule("age", rf"^{_AM} \d{{1,3}} years old\b", "fact", 0.4, needs_object=False,
          keep_rest=False),
    _rule("lives", rf"^i {_A}(?:live|reside) in\s+", "fact", 0.8),
    _rule("lives", rf"^{_AM} {_A}(?:based|located) in\s+", "fact", 0.8),
    _rule("lives", rf"^(?:i|we)(?:'ve| have)? {_A}moved to\s+", "fact", 0.8),
    _rule("origin", rf"^{_AM} (?:originally )?from\s+", "fact", 0.6),
    _rule("works", rf"^i {_A}work (?:at|for|in|on|as)\s+", "fact", 0.8),
    _rule("job", rf"^{_AM} (?:an?|the) (?:[\w-]+ ){{0,3}}{_JOBS}", "fact", 0.8,
          needs_object=False),
    _rule("family_named", rf"^my (?:[\w-]+ )?{_FAMILY}(?:'s name is| is named| is called"
          r"| named| called)\s+", "fact", 0.7),
    _rule("family_count", rf"^(?:i|we)(?: have| have got|'ve got) {_FAMILY_COUNTED}", "fact",
          0.7, needs_object=False),
    _rule("family", rf"^my (?:[\w-]+ )?{_FAMILY} (?:is|are|works|lives|loves|hates|goes"
          r"|just started|started)\s+", "fact", 0.6),
    _rule("birthday", r"^my birthday(?:'s| is)\s+", "fact", 0.8),
    _rule("project", r"^(?:my|our) (?:[\w-]+ ){0,2}project(?:'s| is)\s+", "project", 0.8),
    _rule("favorite", r"^(?:my|our) (?:all[- ]time )?(?:favou?rite|fave)\s+", "preference",
          0.6),
    _rule("my_thing", rf"^(?:my|our) (?:[\w'-]+ ){{0,2}}{_THINGS}(?: is| are|'s)\s+", "fact",
          0.7),
    _rule("plan", rf"^{_WE_ARE} {_PLANS}\s+", "fact", 0.7, needs_date=True),
    _rule("speaks", rf"^i {_A}speak\s+", "fact", 0.5),
    _rule("decided", rf"^(?:i|we)(?:'ve| have)? {_A}(?:decided|agreed) (?:to|on|that|against)"
          r"\s+", "decision", 0.8),
    _rule("lets", r"^let's (?:go with|use|stick with|keep|switch to|move to|pick|choose|"
          r"adopt|migrate to|drop|ditch)\s+", "decision", 0.8),
    _rule("will_use", r"^(?:i|we)(?:'ll| will|'re going to| are going to|'m going to"
          r"| am going to) (?:go with|use|stick with|switch to|move to|adopt|migrate to)\s+",
          "decision", 0.8),
    _rule("chose", rf"^(?:i|we) {_A}(?:chose|picked|went with|settled on|opted for|"
          r"switched to)\s+", "decision", 0.8),
    _rule("going_with", rf"^{_WE_ARE} going with\s+", "decision", 0.8),
    _rule("decision_is", r"^(?:the|our|my) (?:final )?decision is to\s+", "decision", 0.8),
    _rule("working_on", rf"^{_WE_ARE} {_A}{_PROJECT_VERBS}\s+", "project", 0.8),
    _rule("migrating", r"^migrating\s+", "project", 0.8),
    _rule("negated", rf"^(?:i|we) (?:don't|do not|didn't|did not) {_A}(?:like|love|enjoy|"
          r"want|use|care for|trust|need)\s+", "preference", 0.7),
    _rule("no_longer", rf"^(?:i|we) {_A}(?:no longer|never) (?:like|love|enjoy|want|use|"
          r"trust|need|eat|drink)s?\s+", "preference", 0.7),
    _rule("not_fan", rf"^{_AM} (?:not|no longer|not really) (?:a (?:big |huge )?fan of|into"
          r"|interested in|keen on)\s+", "preference", 0.7),
    _rule("prefers", rf"^(?:i|we) {_A}prefer\s+", "preference", 0.7),
    _rule("prefers", r"^i(?:'d| would) {0,1}(?:much )?rather\s+", "preference", 0.7),
    _rule("dislikes", rf"^i {_A}(?:hate|dislike|can't stand|cannot stand|avoid|detest)\s+",
          "preference", 0.7),
    _rule("habit", rf"^i {_A}(?:always|never|usually|tend to) [a-z]+", "preference", 0.6),
    _rule("likes", rf"^i {_A}(?:like|love|enjoy|adore)\s+", "preference", 0.6),
    _rule("fan", rf"^{_AM} (?:a (?:big |huge )?fan of|into|a sucker for)\s+", "preference",
          0.6),
    _rule("uses", rf"^(?:i|we) {_A}use\s+", "fact", 0.5),
)

ASSISTANT_RULES: tuple[Rule, ...] = (
    _rule("your_name", r"^your name(?:'s| is)\s+", "fact", 0.9, speaker="assistant"),
    _rule("your_thing", rf"^your (?:[\w'-]+ ){{0,2}}{_THINGS}(?: is| are|'s)\s+", "fact", 0.7,
          speaker="assistant"),
)
# fmt: on

# ----------------------------------------------------------------------- clause filters

_MONTHS = (
    r"(?:january|february|march|april|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)"
)
DATE = re.compile(
    rf"\b(?:{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?|may\s+\d{{1,2}}(?:st|nd|rd|th)?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS}|may)"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?"
    r"|(?:on |this |next )(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|next (?:week|month|year|spring|summer|autumn|fall|winter)"
    rf"|(?:in|by|until|from) (?:{_MONTHS}|may|20\d\d)\b)",
    re.I,
)

# A sentence that tries to instruct the extractor; it and the rest of its message are skipped.
INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b.{0,60}?\b(?:instructions?|rules|prompts?|"
    r"guidelines|system message)\b|\bsystem (?:prompt|note|message)\b|\byou are now\b"
    r"|\bnew instructions?\b|\b(?:store|save|add|record) (?:this|the following|these)\b"
    r"|\bwith importance\b",
    re.I,
)

FILLER = re.compile(
    r"^(?:(?:oh|ah|and|but|so|well|yeah|yes|yep|ok|okay|alright|right|also|actually|"
    r"honestly|personally|btw|anyway|anyways|hmm|great|cool|perfect|nice|thanks|thank you|"
    r"sure|fyi|by the way|to be honest|for the record|for what it's worth|just so you know|"
    r"one more thing|quick update|update|as i said|as you know|got it|noted|"
    r"(?:please )?(?:remember|note|keep in mind)(?: that)?|i've noted that|"
    r"i'll remember that|just to confirm)\b[\s,:!.—-]*)+",
    re.I,
)
HEDGE = re.compile(
    r"^(?:i think|i guess|i suppose|i believe|probably|maybe|perhaps|i'm pretty sure|"
    r"i'm fairly sure)(?: that)?\b[\s,]*",
    re.I,
)
CONTEXT = re.compile(
    r"^(?P<context>(?:for|in|at|on|with|during|outside|these days|nowadays|lately)\b"
    r"[^,]{0,40}),\s+",
    re.I,
)
# Conditions and questions are not statements about the user.
NOT_A_STATEMENT = re.compile(
    r"^(?:if|when|whether|unless|once|what|why|how|do|does|can)\b|\?$", re.I
)
# An object that is only a pronoun says nothing on its own ("I like it").
BARE_OBJECT = re.compile(
    r"^(?:it|this|that|these|those|them|one|so|too|either|neither)\b(?!\s+when\b)", re.I
)

# Words that say nothing about a conversation's topic, on top of keywords.STOPWORDS.
TOPIC_STOPWORDS: frozenset[str] = frozenset(
    str.split(
        """
        like love prefer want need use using used get got make made think know see look
        looks going go would could should also really much many lot lots one two thing
        things something anything everything way ways good great nice sure thanks thank
        please yes yeah okay ok right well just still even maybe probably actually
        honestly let let's sounds sound help idea ideas option options example here
        there want wants time day week today tomorrow user assistant hi hello hey bit
        quick sense work works first next last new keep take try give tell say said
        mean means per every around since without whatever else able happy glad
        instead already years year months minutes hours
        """
    )
)
