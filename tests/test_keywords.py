"""The keyword level: hand-made cases of the matching rule, and equality with brute force."""

from __future__ import annotations

import json
import random
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arag_graph.core.documents import Chunk
from arag_graph.core.errors import AragError, IndexMismatchError, IndexNotFoundError
from arag_graph.index.keywords import KeywordHit, KeywordIndex, ignored_keywords, keyword_score
from tests.conftest import data_file

MODES = ("word", "substring")


def make_chunks(texts: list[str], titles: list[str] | None = None) -> list[Chunk]:
    """One chunk per text; sentences end at . ! or ? before whitespace (good enough for tests)."""
    chunks = []
    for i, text in enumerate(texts):
        spans = tuple(m.span() for m in re.finditer(r"\S.*?(?:[.!?](?=\s)|$)", text, re.S))
        chunks.append(Chunk(id=f"c{i}", text=text, title=titles[i] if titles else None, sentences=spans))
    return chunks


def scores(index: KeywordIndex, keywords: list[str]) -> list[float]:
    """Score of every chunk according to the index (0 for chunks it does not return)."""
    out = [0.0] * len(index)
    for hit in index.search(keywords, len(index)):
        out[hit.chunk_index] = hit.score
    return out


def spec_score(text: str, keywords: list[str], match: str) -> float:
    """The rule as the spec states it, written apart from the module so it checks keyword_score."""
    low, total, seen = text.lower(), 0, set()
    for keyword in keywords:
        k = keyword.strip().lower()
        if not k or k in seen:
            continue
        seen.add(k)
        if match == "substring":
            total += low.count(k) * len(k)
        elif re.search(r"\w", k):
            total += len(re.findall((r"(?<!\w)" if re.match(r"\w", k) else "") + re.escape(k), low)) * len(k)
    return float(total)


def check_against_brute_force(index: KeywordIndex, chunks: list[Chunk], keywords: list[str]) -> None:
    reference = [spec_score(chunk.text, keywords, index.match) for chunk in chunks]
    assert [keyword_score(chunk.text, keywords, index.match) for chunk in chunks] == reference
    assert scores(index, keywords) == reference, keywords
    hits = index.search(keywords, 5)
    best = sorted((i for i, s in enumerate(reference) if s > 0), key=lambda i: (-reference[i], i))[:5]
    assert [hit.chunk_index for hit in hits] == best
    for hit in hits:
        text = chunks[hit.chunk_index].text
        expected = tuple(k for k in dict.fromkeys(keywords) if keyword_score(text, [k], index.match) > 0)
        # Duplicates differing in case are reported once, under the first spelling.
        assert set(hit.matched) <= set(expected)
        assert {k.strip().lower() for k in hit.matched} == {k.strip().lower() for k in expected}


# -- hand-made cases --------------------------------------------------------------------------

TEXTS = [
    "The film was shot in 1950. Films about art followed. A party was held.",
    "J. Om Prakash was born in the U.S. in c. 854. He directed many films.",
    "Teutberga( died 11 November 875) was a queen. She starred in Alpha (film) too.",
    "İstanbul is large. ISTANBUL and istanbul again.",
    "Nothing to see here.",
]


@pytest.fixture(scope="module", params=MODES)
def small(request: pytest.FixtureRequest) -> tuple[KeywordIndex, list[Chunk]]:
    chunks = make_chunks(TEXTS)
    return KeywordIndex.from_chunks(chunks, match=request.param), chunks


def test_case_insensitive_and_weighted_by_length() -> None:
    text = "Film FILM film"
    assert keyword_score(text, ["fIlM"]) == 12.0
    assert keyword_score(text, ["  film  "]) == 12.0
    # Longer keywords weigh more: one match of a 9-letter keyword beats two of a 3-letter one.
    assert keyword_score("Teutberga ate ate", ["teutberga"]) > keyword_score("Teutberga ate ate", ["ate"])


def test_word_prefix_rule() -> None:
    assert keyword_score("Films and a film", ["film"]) == 8.0  # matches may end inside a word
    assert keyword_score("a party", ["art"]) == 0.0  # but must start one
    assert keyword_score("a party", ["art"], match="substring") == 3.0  # the paper's rule does not care
    assert keyword_score("art-house", ["art"]) == 3.0
    assert keyword_score("x(film)", ["(film)"]) == 6.0  # no word start needed before punctuation


def test_multi_word_and_punctuated_keywords(small: tuple[KeywordIndex, list[Chunk]]) -> None:
    index, _ = small
    assert [h.chunk_index for h in index.search(["J. Om Prakash"], 5)] == [1]
    assert index.search(["J. Om Prakash"], 5)[0].score == len("j. om prakash")
    assert [h.chunk_index for h in index.search(["u.s."], 5)] == [1]
    assert [h.chunk_index for h in index.search(["c. 854"], 5)] == [1]
    assert [h.chunk_index for h in index.search(["(film)"], 5)] == [2]
    assert [h.chunk_index for h in index.search(["om prak"], 5)] == [1]  # last word may be a prefix
    if index.match == "word":
        assert index.search(["m prakash"], 5) == []  # the first word may not be a suffix
        assert index.search(["prakash was bor"], 5)[0].score == 15.0


def test_word_start_rule_in_index(small: tuple[KeywordIndex, list[Chunk]]) -> None:
    index, chunks = small
    if index.match == "word":
        assert [h.chunk_index for h in index.search(["art"], 5)] == [0]
        assert index.search(["art"], 5)[0].score == 3.0  # "art", not "party"
        assert index.search(["film"], 5)[0] == KeywordHit(0, 8.0, ("film",))
    for keywords in (["art"], ["film"], ["films"], ["s"], ["in the"]):
        check_against_brute_force(index, chunks, keywords)


def test_duplicates_count_once() -> None:
    assert keyword_score("film film", ["film", "FILM", " film "]) == 8.0
    index = KeywordIndex.from_chunks(make_chunks(["film film"]))
    assert index.search(["film", "FILM"], 5) == [KeywordHit(0, 8.0, ("film",))]


def test_keywords_without_word_characters_are_ignored_and_reported() -> None:
    index = KeywordIndex.from_chunks(make_chunks(["a - b -- c.", "(x)"]))
    assert index.search(["-", "", "  ", "()"], 5) == []
    assert keyword_score("a - b", ["-"]) == 0.0
    assert ignored_keywords(["-", "", "film", "()"]) == ["-", "", "()"]
    assert index.ignored(["-", "x"]) == ["-"]
    # The paper's rule counts punctuation; only empty keywords are meaningless there.
    assert ignored_keywords(["-", " "], match="substring") == [" "]
    assert keyword_score("a - b", ["-"], match="substring") == 1.0


def test_bare_string_is_one_keyword_and_top_k_is_clamped() -> None:
    index = KeywordIndex.from_chunks(make_chunks(["film", "other"]))
    assert index.search("film", 5) == [KeywordHit(0, 4.0, ("film",))]
    assert index.search(["film"], 1) == [KeywordHit(0, 4.0, ("film",))]  # the smallest top_k that finds
    assert index.search(["film"], 0) == []
    assert index.search(["film"], -3) == []
    assert index.search([], 5) == []


def test_ties_in_corpus_order() -> None:
    texts = ["b x", "a x", "x x", "c x", "x"]
    index = KeywordIndex.from_chunks(make_chunks(texts))
    assert [h.chunk_index for h in index.search(["x"], 10)] == [2, 0, 1, 3, 4]
    assert [h.chunk_index for h in index.search(["x"], 3)] == [2, 0, 1]
    assert [h.chunk_index for h in index.search(["x"], 2)] == [2, 0]


def test_self_overlapping_keywords_count_non_overlapping_matches() -> None:
    texts = ["a a a a a", "-a-a-a-", "aa aa aa", "ab ab ab"]
    for mode in MODES:
        index = KeywordIndex.from_chunks(make_chunks(texts), match=mode)
        for keywords in (["a a"], ["-a-"], ["aa aa"], ["ab ab"], ["a a a"]):
            check_against_brute_force(index, make_chunks(texts), keywords)
    assert keyword_score("a a a a a", ["a a"]) == 6.0


def test_unicode_case_mapping() -> None:
    texts = ["İstanbul and ISTANBUL", "Straße STRASSE", "ΟΔΟΣ οδός", "naïve café 東京 😀 x"]
    chunks = make_chunks(texts)
    for mode in MODES:
        index = KeywordIndex.from_chunks(chunks, match=mode)
        for keywords in (["İstanbul"], ["istanbul"], ["straße"], ["οδος"], ["café 東"], ["😀 x"], ["東京"]):
            check_against_brute_force(index, chunks, keywords)


def test_word_start_after_non_ascii_letter() -> None:
    # "prakash" is rarer than "om", so it anchors the phrase; the word start before "om" must then
    # be checked in the text, including after letters that are not ASCII.
    texts = ["éom prakash.", "東om prakash.", "xom prakash.", "(om prakash.", "om om om om om om"]
    chunks = make_chunks(texts)
    index = KeywordIndex.from_chunks(chunks)
    assert [h.chunk_index for h in index.search(["om prakash."], 5)] == [3]
    check_against_brute_force(index, chunks, ["om prakash."])


def test_nul_characters_do_not_join_chunks() -> None:
    # The stored corpus text separates chunks with NUL bytes; keywords holding NUL must not match
    # across that separator.
    texts = ["a\x00b", "a", "\x00b", "xa", "\x00a\x00"]
    chunks = make_chunks(texts)
    for mode in MODES:
        index = KeywordIndex.from_chunks(chunks, match=mode)
        for keywords in (["a\x00"], ["\x00b"], ["a\x00b"], ["a"], ["\x00a"]):
            check_against_brute_force(index, chunks, keywords)


def test_snippets_are_matching_sentences_in_chunk_order(small: tuple[KeywordIndex, list[Chunk]]) -> None:
    index, chunks = small
    chunk = chunks[0]
    assert index.snippets(chunk, ["party", "film"]) == [
        "The film was shot in 1950.",
        "Films about art followed.",
        "A party was held.",
    ]
    if index.match == "word":
        assert index.snippets(chunk, ["art"]) == ["Films about art followed."]
    else:
        assert index.snippets(chunk, ["art"]) == ["Films about art followed.", "A party was held."]
    assert index.snippets(chunk, ["zebra", "-"]) == []
    # Offsets survive characters that lower-case to two (İ -> i̇).
    assert index.snippets(chunks[3], ["istanbul"]) == ["ISTANBUL and istanbul again."]
    assert index.snippets(chunks[3], ["İstanbul"]) == ["İstanbul is large."]
    dotted = Chunk(id="d", text="İİİİİİİİİİİİ x. Y film.", sentences=((0, 15), (16, 23)))
    assert index.snippets(dotted, ["film"]) == ["Y film."]
    assert index.snippets(dotted, ["x"]) == ["İİİİİİİİİİİİ x."]
    # One-character sentences show exactly the characters each match covers, after and between
    # characters whose lower case is longer (the mapping back to the original offsets, to the character).
    text = "İİ Film, İstanbul İİ film"
    per_character = Chunk(id="p", text=text, sentences=tuple((i, i + 1) for i in range(len(text))))
    assert index.snippets(per_character, ["film"]) == list("Filmfilm")
    assert index.snippets(per_character, ["İstanbul"]) == list("İstanbul")
    # A match across a sentence boundary brings both sentences.
    assert index.snippets(chunks[0], ["1950. films"]) == chunk.sentence_texts()[:2]
    # Without sentence spans the chunk is one sentence.
    bare = Chunk(id="x", text="Some film here.")
    assert index.snippets(bare, ["film"]) == ["Some film here."]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mmap", [True, False])
def test_save_load_round_trip(tmp_path: Path, mode: str, mmap: bool) -> None:
    chunks = make_chunks(TEXTS)
    built = KeywordIndex.from_chunks(chunks, match=mode)  # type: ignore[arg-type]
    built.save(tmp_path / "kw")
    assert all(path.name.startswith("keywords.") for path in (tmp_path / "kw").iterdir())
    loaded = KeywordIndex.load(tmp_path / "kw", chunks, mmap=mmap)
    assert loaded.match == mode
    assert len(loaded) == len(chunks)
    for keywords in (["film", "J. Om Prakash"], ["istanbul"], ["(film)", "u.s."], ["was"]):
        assert loaded.search(keywords, 5) == built.search(keywords, 5)


def test_load_errors(tmp_path: Path) -> None:
    chunks = make_chunks(TEXTS)
    with pytest.raises(IndexNotFoundError, match="no keyword index"):
        KeywordIndex.load(tmp_path / "missing", chunks)
    KeywordIndex.from_chunks(chunks).save(tmp_path / "kw")
    with pytest.raises(IndexMismatchError, match="other chunks"):
        KeywordIndex.load(tmp_path / "kw", chunks[:-1])
    changed = [*chunks[:-1], Chunk(id="c4", text="Something else entirely.")]
    with pytest.raises(IndexMismatchError, match="other chunks"):
        KeywordIndex.load(tmp_path / "kw", changed)
    meta = tmp_path / "kw" / "keywords.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "format": 999}))
    with pytest.raises(IndexMismatchError, match="format"):
        KeywordIndex.load(tmp_path / "kw", chunks)
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "format": 1}))
    KeywordIndex.load(tmp_path / "kw", chunks)  # restored header: loads again
    (tmp_path / "kw" / "keywords.text.npy").write_bytes(b"garbage")
    with pytest.raises(IndexNotFoundError):
        KeywordIndex.load(tmp_path / "kw", chunks)


def test_unknown_mode() -> None:
    with pytest.raises(AragError, match="match mode"):
        KeywordIndex.from_chunks(make_chunks(["x"]), match="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(AragError, match="match mode"):
        keyword_score("x", ["x"], match="fuzzy")  # type: ignore[arg-type]


def test_empty_corpus_and_empty_texts() -> None:
    for mode in MODES:
        assert KeywordIndex.from_chunks([], match=mode).search(["x"], 5) == []
        index = KeywordIndex.from_chunks(make_chunks(["", "x", ""]), match=mode)
        assert index.search(["x"], 5) == [KeywordHit(1, 1.0, ("x",))]


def test_long_chunk_uses_wide_positions() -> None:
    # Chunks over 64 KiB need 32-bit in-chunk offsets; matches near the end must still verify.
    long_text = "filler words here. " * 4000 + "J. Om Prakash at the end."
    chunks = make_chunks([long_text, "J. Om Prakash"])
    index = KeywordIndex.from_chunks(chunks)
    check_against_brute_force(index, chunks, ["J. Om Prakash", "end", "words here"])


# -- equality with brute force ------------------------------------------------------------------


def real_texts(n: int = 300) -> list[str]:
    path = data_file("2wiki-corpus/corpus.json")
    passages = json.loads(path.read_text(encoding="utf-8"))
    return [p["text"] for p in random.Random(7).sample(passages, n)]


def synthetic_texts(n: int = 300, seed: int = 3) -> list[str]:
    """Text full of the cases that break naive matchers: prefixes, punctuation, repeats, Unicode."""
    rng = random.Random(seed)
    words = [
        "a", "an", "art", "party", "partial", "film", "films", "filmed", "filmography", "om", "prakash",
        "j", "u", "s", "c", "854", "1950", "born", "aa", "aaa", "ab", "abab", "x_y", "_x", "3rd",
        "İstanbul", "istanbul", "straße", "ΟΔΟΣ", "οδός", "naïve", "café", "東京", "😀", "ǅemal",
    ]  # fmt: skip
    seps = [" ", " ", " ", ", ", ". ", "-", "(", ") ", ".", " - ", "'", "\n", " \t", "\u00a0", "’"]
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 40)):
            word = rng.choice(words)
            parts.append(rng.choice([word, word.upper(), word.title()]) + rng.choice(seps))
        texts.append("".join(parts))
    return texts


def keyword_pool(texts: list[str], rng: random.Random, n: int) -> list[str]:
    """Keywords a model might send: words, word prefixes, spans, with odd case and punctuation."""
    pool = []
    for _ in range(n):
        text = rng.choice([t for t in texts if t.strip()] or ["x"])
        tokens = list(re.finditer(r"\w+", text))
        kind = rng.random()
        if tokens and kind < 0.35:
            word = rng.choice(tokens).group()
            keyword = word[: rng.randint(1, len(word))]
        elif tokens and kind < 0.7:
            first = rng.randrange(len(tokens))
            last = min(len(tokens) - 1, first + rng.randint(0, 3))
            start, end = tokens[first].start(), tokens[last].end()
            keyword = text[start : end - rng.randint(0, max(0, tokens[last].end() - tokens[last].start() - 1))]
        else:
            start = rng.randrange(len(text))
            keyword = text[start : start + rng.randint(1, 15)]
        keyword = rng.choice([keyword, keyword.upper(), keyword.lower(), keyword.swapcase()])
        pool.append(rng.choice(["", " ", "("]) + keyword + rng.choice(["", " ", ")", "."]))
    return pool


CORPORA = {"synthetic": synthetic_texts(), "real": real_texts()}


@pytest.fixture(scope="module", params=[(c, m) for c in CORPORA for m in MODES], ids=lambda p: f"{p[0]}-{p[1]}")
def corpus(request: pytest.FixtureRequest) -> tuple[KeywordIndex, list[Chunk], list[str]]:
    name, mode = request.param
    texts = CORPORA[name]
    chunks = make_chunks(texts)
    pool = keyword_pool(texts, random.Random(11), 400)
    return KeywordIndex.from_chunks(chunks, match=mode), chunks, pool


def test_seeded_random_keyword_sets_equal_brute_force(
    corpus: tuple[KeywordIndex, list[Chunk], list[str]],
) -> None:
    index, chunks, pool = corpus
    rng = random.Random(5)
    for _ in range(150):
        check_against_brute_force(index, chunks, rng.sample(pool, rng.randint(1, 4)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hypothesis_keyword_sets_equal_brute_force(
    corpus: tuple[KeywordIndex, list[Chunk], list[str]], data: st.DataObject
) -> None:
    index, chunks, pool = corpus
    drawn = st.sampled_from(pool) | st.text(
        alphabet=st.sampled_from("aAbB ._-()İıß東😀1'\u0307"), min_size=0, max_size=6
    )
    keywords = data.draw(st.lists(drawn, min_size=0, max_size=4))
    check_against_brute_force(index, chunks, keywords)


def test_concurrent_searches_agree_with_serial_ones(
    corpus: tuple[KeywordIndex, list[Chunk], list[str]],
) -> None:
    index, _, pool = corpus
    sets = [pool[i : i + 3] for i in range(0, 120, 3)]
    serial = [index.search(keywords, 5) for keywords in sets]
    with ThreadPoolExecutor(max_workers=4) as executor:
        assert list(executor.map(lambda keywords: index.search(keywords, 5), sets * 3)) == serial * 3


def test_index_survives_save_and_load_on_a_corpus(
    corpus: tuple[KeywordIndex, list[Chunk], list[str]], tmp_path: Path
) -> None:
    index, chunks, pool = corpus
    index.save(tmp_path)
    loaded = KeywordIndex.load(tmp_path, chunks)
    for keywords in (pool[:3], pool[3:5], pool[5:6]):
        assert loaded.search(keywords, 10) == index.search(keywords, 10)
    assert np.array_equal(scores(loaded, pool[:4]), scores(index, pool[:4]))


@pytest.mark.parametrize("seed", range(6))
def test_top_positions_match_a_full_sort_on_large_tied_score_sets(seed: int) -> None:
    """The best ``top_k`` of many scores (the sampled bound prunes before the exact partition) equal
    a full sort's, ties in ascending position, whether few or most scores reach the bound."""
    from arag_graph.index.keywords import _top

    rng = np.random.default_rng(seed)
    n = int(rng.integers(400, 60_000))
    levels = [2, 3, 50][seed % 3]  # from almost all tied to well spread
    scores = rng.integers(1, levels + 1, n).astype(np.float64) * 4.0
    if seed % 2:
        scores[rng.integers(0, n, 3)] = 4.0 * (levels + 5)  # a few far ahead of the rest
    chunk_ids = np.arange(n)
    for top_k in (1, 5, 20):
        expected = np.lexsort((chunk_ids, -scores))[:top_k]
        assert _top(scores, top_k).tolist() == expected.tolist()


# -- updating an index in place of a rebuild ------------------------------------------------------


def assert_same_index(got: KeywordIndex, want: KeywordIndex) -> None:
    """Equal array for array, types included: what a rebuild would have saved, byte for byte."""
    assert got.match == want.match
    assert got._vocab == want._vocab
    assert got._fingerprint == want._fingerprint
    for name in ("offsets", "occ_chunk", "occ_pos", "starts", "text"):
        a, b = getattr(got, f"_{name}"), getattr(want, f"_{name}")
        assert a.dtype == b.dtype, name
        assert np.array_equal(a, b), name


def renamed(chunks: list[Chunk], prefix: str) -> list[Chunk]:
    return [Chunk(id=f"{prefix}{i}", text=c.text, sentences=c.sentences) for i, c in enumerate(chunks)]


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_an_updated_index_equals_a_rebuild_of_the_changed_chunks(data: st.DataObject) -> None:
    """Chunks removed, edited, added, repeated and reordered: the update equals from_chunks."""
    words = st.sampled_from(["film", "films", "Film", "art", "party", "İstanbul", "東京", "ß", "U.S.", "x"])
    text = st.lists(words | st.text(alphabet="aAb .(-)İı東😀1\u0307\x00", max_size=5), max_size=8).map(" ".join)
    before = make_chunks(data.draw(st.lists(text, max_size=12), label="before"))
    index = KeywordIndex.from_chunks(before)
    kept = data.draw(st.lists(st.sampled_from(before), max_size=14) if before else st.just([]), label="kept")
    added = make_chunks(data.draw(st.lists(text, max_size=4), label="added"))
    after = data.draw(st.permutations(kept + added), label="after")
    if data.draw(st.booleans(), label="in order"):
        after = sorted(kept, key=before.index) + added
    after = renamed(after, "n")  # ids never decide what is kept: the text does
    assert_same_index(index.updated(after, before), KeywordIndex.from_chunks(after))


@pytest.mark.parametrize("mode", MODES)
def test_updating_a_real_corpus_equals_a_rebuild_and_answers_the_same(mode: str) -> None:
    texts = CORPORA["real"]
    before = make_chunks(texts[:250])
    rng = random.Random(25)
    after = [c for c in before if rng.random() > 0.05]  # some removed
    for i in rng.sample(range(len(after)), 10):  # some edited
        after[i] = Chunk(id=after[i].id, text=after[i].text.replace("the", "a") + " Edited.", sentences=())
    after += make_chunks(texts[250:])  # some added (ids c0.. repeat: only texts count)
    index = KeywordIndex.from_chunks(before, match=mode)  # type: ignore[arg-type]
    updated, rebuilt = index.updated(after, before), KeywordIndex.from_chunks(after, match=mode)  # type: ignore[arg-type]
    assert_same_index(updated, rebuilt)
    pool = keyword_pool([c.text for c in after], random.Random(3), 60)
    for i in range(0, 60, 3):
        check_against_brute_force(updated, after, pool[i : i + 3])


def test_an_update_tokenizes_only_the_chunks_whose_text_is_new(monkeypatch: pytest.MonkeyPatch) -> None:
    from arag_graph.index import keyword_scan as module

    before = make_chunks(CORPORA["real"][:200])
    index = KeywordIndex.from_chunks(before)
    after = [*before[:150], *before[151:], Chunk(id="new", text="A new passage about İstanbul films.")]
    tokenized: list[int] = []
    real_words = module._words

    def counting(code: np.ndarray) -> tuple[list[str], np.ndarray]:
        tokenized.append(int(np.count_nonzero(code == 0)))  # texts in this batch (each ends in NUL)
        return real_words(code)

    monkeypatch.setattr(module, "_words", counting)
    updated = index.updated(after, before)
    assert tokenized == [1]
    monkeypatch.undo()
    assert_same_index(updated, KeywordIndex.from_chunks(after))


def test_an_update_with_a_long_new_chunk_widens_the_positions() -> None:
    before = make_chunks(["J. Om Prakash was here.", "short text"])
    long_text = "filler words here. " * 4000 + "J. Om Prakash at the end."
    after = [*before, Chunk(id="long", text=long_text)]
    updated = KeywordIndex.from_chunks(before).updated(after, before)
    assert updated._occ_pos.dtype == np.uint32
    assert_same_index(updated, KeywordIndex.from_chunks(after))
    assert_same_index(KeywordIndex.from_chunks(after).updated(before, after), KeywordIndex.from_chunks(before))


def test_an_update_from_other_chunks_than_the_index_was_built_from_is_refused() -> None:
    before = make_chunks(TEXTS)
    index = KeywordIndex.from_chunks(before)
    with pytest.raises(AragError, match="not built from the 4 chunks given as before"):
        index.updated(before, before[:-1])
    with pytest.raises(AragError, match="not built from"):
        index.updated(before, renamed(before, "other"))
