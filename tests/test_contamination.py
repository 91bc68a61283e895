"""Contamination counter on a fixture, and the README's 334 on the real SICK test set."""


from grounded_text.evaluation.contamination import ContaminationIndex, normalize_sentence


def test_normalisation():
    assert normalize_sentence("  A dog 's  ball .\t") == "a dog s ball"
    assert normalize_sentence("A dog's ball") == "a dog s ball"
    assert normalize_sentence("A  Dog .", strip_punctuation=False) == "a dog ."


def test_counter_on_fixture():
    index = ContaminationIndex(["A dog runs .", "Two men   play chess", ""], name="fixture")
    c = index.count(["a dog runs", "A DOG RUNS!", "a cat runs", "two men play chess", "", "two men"])
    assert c == {"n_sentences": 6, "n_contaminated": 3, "fraction": 0.5, "n_distinct_contaminated": 2,
                 "against": "fixture"}
    p = index.count_pairs(["a dog runs", "a cat", "x"], ["Two men play chess.", "a dog runs", "y"])
    assert p["n_pairs"] == 3 and p["pairs_any_side"] == 2 and p["pairs_both_sides"] == 1
    assert p["n_contaminated"] == 3


def test_sick_test_shares_334_sentences_with_flickr8k(data_dir):
    from grounded_text.data.flickr8k import read_flickr8k
    from grounded_text.data.sts import read_sick

    captions = read_flickr8k(data_dir)
    sick = read_sick(data_dir / "sts", "test")
    c = ContaminationIndex(c.text for c in captions).count_pairs(sick.sentences1, sick.sentences2)
    assert c["n_sentences"] == 9854 and c["n_contaminated"] == 334 and c["n_distinct_contaminated"] == 118
    train = ContaminationIndex(c.text for c in captions if c.split == "train")
    assert train.count(sick.sentences1 + sick.sentences2)["n_contaminated"] == 243
