"""The quality benchmark (``benchmarks/quality.py``): its rules, its facts, its counting."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from benchmarks import quality
from benchmarks.quality_facts import KINDS, Fact, plant_facts, planted, position
from benchmarks.quality_rules import ThinningSummarizer, sentences
from slimcache import SummaryContext
from slimcache.bench.datasets import BenchConversation


def context(max_tokens: int, previous: str | None = None) -> SummaryContext:
    if previous is None:
        return SummaryContext("summarize", None, max_tokens, "", "t", 0, 0)
    return SummaryContext("extend", previous, max_tokens, "", "t", 0, 0)


def chat(turns: int) -> BenchConversation:
    messages = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        messages.append({"role": ("user", "assistant")[i % 2], "content": f"turn {i}."})
    return BenchConversation(id="c", messages=messages)


def test_thinning_keeps_evenly_what_fits_and_names_first() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    thin = ThinningSummarizer("thin")
    out = thin([{"role": "user", "content": text}], context(60))
    kept = sentences(out)
    assert math.ceil(len(out) / 4) <= 60
    numbers = [int(s.split()[2]) for s in kept]
    gaps = {b - a for a, b in itertools.pairwise(numbers)}
    assert len(kept) > 5
    assert max(gaps) - min(gaps) <= 1  # evenly spread
    assert thin([{"role": "user", "content": "Short."}], context(60)) == "Short."

    talk = "we talked. about things. My code is 4417. and more. then Lisbon came up. ok."
    names_first = ThinningSummarizer("names-first")
    assert names_first([{"role": "user", "content": talk * 3}], context(12)).count("4417") >= 1
    previous = "The code is 4417."
    news = [{"role": "user", "content": "nothing much. at all."}]
    extended = names_first(news, context(5, previous))
    assert "4417" in extended


def test_the_random_rule_forgets_part_of_every_input_the_same_way_each_run() -> None:
    text = " ".join(f"Sentence {i}." for i in range(100))
    message = [{"role": "user", "content": text}]
    forgetful = ThinningSummarizer("random", forget=0.5, seed=3)
    out = forgetful(message, context(10_000))  # everything fits, yet about half goes
    assert 20 < len(sentences(out)) < 80
    assert out == ThinningSummarizer("random", forget=0.5, seed=3)(message, context(10_000))
    assert out != ThinningSummarizer("random", forget=0.5, seed=4)(message, context(10_000))
    tight = forgetful(message, context(30))
    assert 0 < math.ceil(len(tight) / 4) <= 30
    numbers = [int(s.split()[1].rstrip(".")) for s in sentences(tight)]
    assert numbers == sorted(numbers)  # kept in their order
    assert ThinningSummarizer("random", forget=0.0)(message, context(10_000)) == text
    with pytest.raises(ValueError, match="forget"):
        ThinningSummarizer("random", forget=1.0)
    with pytest.raises(ValueError, match="rule"):
        ThinningSummarizer("salience")


def test_a_key_matches_only_as_a_whole() -> None:
    flight = Fact("flight", "My flight leaves on June 2.", ("June 2", "2nd June"))
    assert flight.held_in("They fly on june 2.")
    assert flight.held_in("(June 2) and the 2nd June")
    assert not flight.held_in("The flight leaves on June 21.")
    assert not flight.held_in("on June 2nd")  # a form not among the keys
    assert not flight.held_in("The 22nd June")
    budget = Fact("budget", "The budget is 2,350 euros.", ("2,350", "2350"))
    assert budget.held_in("a budget of 2,350.")
    assert budget.held_in("2350 euros")
    assert not budget.held_in("a budget of 12,350 euros")
    assert not budget.held_in("2,350,000 euros or 2,3501")
    assert not budget.held_in("23500")
    wifi = Fact("wifi", "The password is heron-47.", ("heron-47",))
    assert wifi.held_in("password: Heron-47")
    assert not wifi.held_in("heron-470 and grey-heron-47x")


def test_every_fact_has_keys_no_other_fact_or_the_chat_matches() -> None:
    for seed in range(200):
        facts = plant_facts(random.Random(seed))
        assert sorted(f.kind for f in facts) == sorted(k.__name__.strip("_") for k in KINDS)
        for fact, other in itertools.permutations(facts, 2):
            assert not fact.held_in(other.sentence), (fact, other)
    # A value whose key the conversation already states is drawn again.
    background = "My sisters are Ingrid, Marisol, Dagny, Yevgenia, Annelise, Ottilie and Rosalind."
    for seed in range(20):
        sister = next(f for f in plant_facts(random.Random(seed), background) if f.kind == "sister")
        assert sister.keys == ("Thandiwe",)


def test_positions_split_the_summarized_history_30_30_40() -> None:
    assert [position(i, 0, 10) for i in range(10)] == ["early"] * 3 + ["middle"] * 3 + ["late"] * 4
    assert [position(i, 5, 25) for i in (5, 10, 11, 16, 17, 24)] == [
        "early",
        "early",
        "middle",
        "middle",
        "late",
        "late",
    ]
    with pytest.raises(ValueError, match="index"):
        position(10, 0, 10)

    conversation = chat(80)
    case = planted(conversation, seed=1, window=20)
    assert case is not None
    # The system message is pinned; the last request ends at the last user message (index
    # 79); an incremental method may end with up to the trigger's 20 messages verbatim, so the
    # facts go into messages 1 to 59, which every method summarizes.
    assert case.span == (1, 60)
    indices = [fact.index for fact in case.facts]
    assert indices == sorted(indices)
    assert len(set(indices)) == 10
    for fact in case.facts:
        message = case.messages[fact.index]
        assert message["role"] == "user"
        assert message["content"].endswith(fact.sentence)
        assert fact.position == position(fact.index, 1, 60)
    assert [case.planted_at(where) for where in ("early", "middle", "late")] == [3, 3, 4]
    assert indices[0] < 1 + 59 * 0.1  # through the whole summarized history
    assert 1 + 59 * 0.9 < indices[-1] < 60  # none in the last 20 messages
    assert planted(chat(28), seed=1, window=20) is None  # too few user messages to plant ten


def test_each_draw_plants_every_fact_in_its_own_stretch_at_a_place_the_seed_picks() -> None:
    conversation = chat(200)
    placements = set()
    for seed in range(6):
        case = planted(conversation, seed=seed, window=20)
        assert case is not None
        start, end = case.span
        stretch = (end - start) / len(case.facts)
        for j, fact in enumerate(case.facts):
            assert start + j * stretch <= fact.index < start + (j + 1) * stretch
        assert [case.planted_at(where) for where in ("early", "middle", "late")] == [3, 3, 4]
        placements.add(tuple(fact.index for fact in case.facts))
        again = planted(conversation, seed=seed, window=20)
        assert again is not None
        assert [f.index for f in again.facts] == [f.index for f in case.facts]
    assert len(placements) == 6  # each seed its own places


async def test_facts_are_counted_by_position_in_the_summary_and_the_window() -> None:
    case = planted(chat(60), seed=1, window=20)
    assert case is not None
    settings = quality.Settings(threshold=20, keep=10, summary_tokens=2000)
    ample = ThinningSummarizer("thin")
    everything = {"early": 3, "middle": 3, "late": 4}
    methods = ("one-shot", "extend", "default", "weighted", "concat", "hybrid", "re-summarize")
    for method in methods:  # with room for everything, every method keeps every fact
        outcome = await quality.run_method(ample, method, case, settings)
        assert outcome.failure is None
        assert outcome.held == everything
        if method != "re-summarize":  # whose window at the end is whatever its state kept
            assert (outcome.in_summary, outcome.in_window_only) == (10, 0)
        assert outcome.calls > 0
    replaced = await quality.run_method(ample, "replace", case, settings)
    assert replaced.held["early"] == 0  # the newest messages' summary only
    tight = quality.Settings(threshold=20, keep=10, summary_tokens=20)
    thinned = await quality.run_method(ample, "extend", case, tight)
    assert thinned.in_summary < 10


async def test_the_report_sets_each_method_against_one_shot_and_extend() -> None:
    case = planted(chat(60), seed=1, window=20)
    assert case is not None
    settings = quality.Settings(threshold=20, keep=10, summary_tokens=40)
    totals = await quality.measure(
        ThinningSummarizer("thin"), ["one-shot", "extend"], [case], settings, show=False
    )
    one_shot, extend = totals["one-shot"], totals["extend"]
    assert one_shot.planted == extend.planted == {"early": 3, "middle": 3, "late": 4}
    assert one_shot.calls == 1
    assert extend.calls > 1
    lines = quality.rows("thin", "40", totals, 1)
    assert len(lines) == 2
    cells = [cell.strip() for cell in lines[1].split("|")[1:-1]]
    assert cells[:3] == ["thin", "40", "extend"]
    assert cells[3] == f"{extend.total}/10"
    assert cells[5] == f"{extend.held['early']}/3 ({extend.rate('early'):.0%})"
    assert cells[9] == f"{max(extend.size_ratios):.2f}x"
    assert cells[-2:] == ["1.00x", "0 of 1"]
    pooled = {method: quality.Totals() for method in totals}
    for method, total in [*totals.items(), *totals.items()]:
        pooled[method].absorb(total)
    assert pooled["extend"].planted == {"early": 6, "middle": 6, "late": 8}
    both = quality.rows("all", "all", pooled, 2)
    assert both[1].startswith(f"| all | all | extend | {2 * extend.total}/20 | ")


def test_the_command_line_takes_any_strategy_the_compressor_takes() -> None:
    args = quality.parse([])
    assert (args.summarizer, args.budget, args.conversations) == (
        ["thin", "names-first", "random"],
        [150, 400],
        20,
    )
    real = quality.parse(["--real-model", "--strategy", "concat", "--strategy", "default"])
    assert (real.summarizer, real.conversations, real.max_messages) == (["openai:smollm2"], 2, 70)
    assert real.strategy == ["concat", "default"]
    older = quality.parse(["--summary-tokens", "300", "--methods", "one-shot, hybrid"])
    assert (older.budget, older.methods) == ([300], ["one-shot", "hybrid"])
    settings = quality.Settings(20, 10, 150)
    quality.check_methods(["one-shot", "extend", "re-summarize", "default", "concat"], settings)
    with pytest.raises(SystemExit, match="--strategy 'tree-ish'"):
        quality.check_methods(["extend", "tree-ish"], settings)
