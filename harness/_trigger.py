"""The planning trigger: plan when a request holds two or more actions, answer simple ones directly.

A request is cut into clauses at commas, semicolons, sentence ends and the joiners "and" /
"then"; a clause that starts with an action verb (after fillers such as "please" or "first")
is one task. Nouns that look like verbs ("write a report") do not count twice, because only the
first word of a clause is looked at.
"""

from __future__ import annotations

import re

ACTION_VERBS: frozenset[str] = frozenset(
    # A word list reads best as words.
    """
    add aggregate analyze analyse answer apply approve archive assign book build calculate
    cancel change check close collect compare compute confirm count create delete deploy describe
    draft email escalate estimate explain export fetch file filter find fix flag gather generate
    get group identify inspect investigate issue list locate look merge move notify open order pick
    prepare prioritize process propose publish query rank read recommend refund remove rename
    replace reply report rerun reset resolve restart review run schedule search send set share
    show sort split suggest summarize summarise tag tell test track triage update validate verify
    write
    """.split()  # noqa: SIM905
)
"""Verbs that start a task clause."""

_FILLERS = frozenset({"please", "first", "then", "also", "finally", "next", "and", "lastly", "to"})
# A clause ends at , ; ! ? or a line break, at "." or ":" before a space or the end (not inside
# "0.5" or "api.example.com"), and at the joiners "and", "then", "and then".
_CLAUSE_BREAK = re.compile(
    r"((?:[,;!?\n]|[.:](?=\s|$))+|\band then\b|\bthen\b|\band\b)", re.IGNORECASE
)
_WORD = re.compile(r"[a-z]+")


def split_tasks(request: str) -> list[str]:
    """The task clauses of a request, in order, each starting with an action verb.

    A clause that does not start with a verb ("… by latency and cost") stays with the task
    before it; a clause of fillers only ("Finally,") is dropped.
    """
    tasks: list[str] = []
    parts = _CLAUSE_BREAK.split(request)
    for clause, joiner in zip(parts[::2], ["", *parts[1::2]], strict=True):
        words = clause.split()
        meaningful = list(words)
        while meaningful and meaningful[0].lower().strip(",") in _FILLERS:
            meaningful = meaningful[1:]
        if not meaningful:
            continue
        first = _WORD.match(meaningful[0].lower())
        if first and first.group(0) in ACTION_VERBS:
            text = " ".join(meaningful)
            tasks.append(text[0].upper() + text[1:])
        elif tasks:
            glue = f" {joiner} " if joiner.strip()[:1].isalpha() else f"{joiner.strip()} "
            tasks[-1] = " ".join(f"{tasks[-1]}{glue}{clause}".split())
    return [task.rstrip(" ,;:.!?") for task in tasks]


def needs_plan(request: str) -> bool:
    """Whether the request holds two or more actions, and so deserves a plan."""
    return len(split_tasks(request)) >= 2
