"""Queries of the photo index beyond one sentence: a photo, a vector, a weighted mix of terms,
several queries per start (``--then``, ``--interactive``), ``--paths`` and ``--exclude``.

Real Flickr8k test photos and the shipped ``vete_bow_flickr8k``; every ranking is checked
against cosines recomputed here with NumPy from ``encode`` / ``encode_images``.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from grounded_text import cli
from grounded_text.photos.index import ImageIndex
from grounded_text.photos.queries import Query, Term, as_queries, kept_rows, parse_line, parse_term, split_weight

pytestmark = pytest.mark.xdist_group("test_search_queries")

N_PHOTOS = 12


@pytest.fixture(scope="module")
def enc():
    import grounded_text as gt

    return gt.load("vete_bow_flickr8k")


@pytest.fixture(scope="module")
def folder(data_dir, tmp_path_factory) -> Path:
    """12 test photos, a third of them one folder down."""
    folder = tmp_path_factory.mktemp("queries") / "photos"
    (folder / "sub").mkdir(parents=True)
    for i, src in enumerate(sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[:N_PHOTOS]):
        shutil.copy2(src, folder / ("sub" if i % 3 == 0 else "") / src.name)
    return folder


@pytest.fixture(scope="module")
def index(enc, folder, tmp_path_factory) -> ImageIndex:
    index = ImageIndex(folder, enc, index_dir=tmp_path_factory.mktemp("idx"))
    index.update(show_progress_bar=False)
    return index


def _unit(m) -> np.ndarray:
    m = np.asarray(m, np.float64).reshape(-1, np.shape(m)[-1])
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _photo_vectors(enc, paths) -> np.ndarray:
    """The photos' unit vectors, encoded here (not read from the index)."""
    return _unit(enc.encode_images([str(p) for p in paths], normalize_embeddings=False))


def _ranking(scores: np.ndarray, paths: list[str], k: int):
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return [paths[i] for i in order], scores[order]


def test_weights_and_lines_parse_as_documented(tmp_path):
    assert split_weight("-0.5:people") == (-0.5, "people")
    assert split_weight("2e-1: a red car") == (0.2, "a red car")
    assert split_weight("a beach: at noon") == (1.0, "a beach: at noon")
    assert split_weight("1:3:30 in the afternoon") == (1.0, "3:30 in the afternoon")
    photo = tmp_path / "sun set.jpg"
    photo.write_bytes(b"x")
    assert parse_term(f"-2:{photo}", photo=True) == Term(photo, -2.0)
    assert parse_term(str(photo), photo=True) == Term(photo, 1.0)
    with pytest.raises(ValueError, match="no such photo"):
        parse_term(str(tmp_path / "missing.jpg"), photo=True)
    q = parse_line(f" a beach | -0.5:people | 0.3:like:{photo}\n")
    assert [(t.kind, t.value, t.weight) for t in q.terms] == [
        ("sentence", "a beach", 1.0), ("sentence", "people", -0.5), ("photo", photo, 0.3)]
    for bad in ["a beach | ", "|", f"like:{tmp_path / 'missing.jpg'}"]:
        with pytest.raises(ValueError):
            parse_line(bad)
    # One query, several, a mix: what search receives.
    assert as_queries("a dog")[1] is True and len(as_queries(["a", "b"])[0]) == 2
    (mix,), single = as_queries([("a beach", 1.0), ("people", -0.5)])
    assert single and [t.weight for t in mix.terms] == [1.0, -0.5]
    assert len(as_queries(np.zeros((3, 4), np.float32))[0]) == 3
    with pytest.raises(TypeError):
        as_queries(3.5)
    with pytest.raises(ValueError):
        Query([("a dog", float("nan"))])
    assert kept_rows(["a.jpg", "sub/b.jpg", "sub/c.png"], ["sub/*.jpg"]).tolist() == [0, 2]


def test_a_photo_query_ranks_by_cosine_with_that_photo(enc, index):
    from PIL import Image

    paths = index.paths
    me = paths[4]
    expected = _photo_vectors(enc, paths) @ _photo_vectors(enc, [me])[0]
    best, cosines = _ranking(expected, paths, 5)
    for query in [Path(me), np.asarray(Image.open(me).convert("RGB")), Image.open(me), Path(me).read_bytes()]:
        hits = index.search(query, top_k=5)
        assert [h.path for h in hits] == best
        np.testing.assert_allclose([h.cosine for h in hits], cosines, atol=1e-4)
    assert best[0] == me and cosines[0] > 0.999
    # A vector is taken as it is (any length): the photo's own row finds the photo first.
    hits = index.search(3.0 * index.embeddings[7], top_k=1)
    assert hits[0].path == paths[7] and hits[0].cosine == pytest.approx(1.0, abs=1e-5)
    # Several at once: a list mixing kinds, or a float array [Q, N].
    both = index.search([Path(me), "a dog runs"], top_k=3)
    assert [h.path for h in both[0]] == best[:3] and len(both[1]) == 3
    assert [h[0].path for h in index.search(index.embeddings[:3], top_k=1)] == paths[:3]


def test_a_mixed_query_is_the_renormalised_weighted_sum_of_unit_vectors(enc, index):
    paths, photo = index.paths, index.paths[2]
    terms = [("a beach", 1.0), ("people", -0.5), (Path(photo), 0.7)]
    text = _unit(enc.encode(["a beach", "people"], normalize_embeddings=False))
    q = text[0] - 0.5 * text[1] + 0.7 * _photo_vectors(enc, [photo])[0]
    q /= np.linalg.norm(q)
    best, cosines = _ranking(_photo_vectors(enc, paths) @ q, paths, N_PHOTOS)
    for query in [terms, Query(terms), parse_line(f"a beach | -0.5:people | 0.7:like:{photo}")]:
        hits = index.search(query, top_k=N_PHOTOS)
        assert [h.path for h in hits] == best
        np.testing.assert_allclose([h.cosine for h in hits], cosines, atol=1e-4)
    # The weights' scale does not matter, only their ratios; one term is that term alone.
    doubled = index.search([(t, 2 * w) for t, w in terms], top_k=N_PHOTOS)
    assert [h.path for h in doubled] == best
    assert index.search([("a dog", 3.0)], top_k=4) == index.search("a dog", top_k=4)
    # A negative term alone ranks the photos in reverse.
    assert [h.path for h in index.search([("a dog", -1.0)], top_k=N_PHOTOS)] == \
        [h.path for h in index.search("a dog", top_k=N_PHOTOS)][::-1]
    with pytest.raises(ValueError, match="cancel out"):
        index.search([("a dog", 1.0), ("a dog", -1.0)])
    with pytest.raises(ValueError, match="widths"):
        index.search([("a dog", 1.0), (np.ones(5, np.float32), 1.0)])


def test_excluded_photos_are_left_out_of_the_results_not_the_index(enc, index):
    paths = index.paths
    kept = [p for p in paths if "/sub/" not in p]
    expected = _unit(enc.encode(["a dog runs"], normalize_embeddings=False))[0]
    best, _ = _ranking(_photo_vectors(enc, kept) @ expected, kept, 5)
    hits = index.search("a dog runs", top_k=5, exclude=["sub/*"])
    assert [h.path for h in hits] == best
    assert len(index.search("a dog runs", top_k=50, exclude=["sub/*", "*.png"])) == len(kept)
    assert index.search("a dog runs", top_k=5, exclude=["*"]) == []
    assert index.paths == paths  # the index still holds them all


@pytest.fixture
def loads(enc, monkeypatch) -> list:
    """``gt.load`` answers with the module's encoder and counts its calls."""
    import grounded_text as gt

    calls = []
    monkeypatch.setattr(gt, "load", lambda *args, **kwargs: calls.append(args) or enc)
    return calls


def _argv(folder, index, *rest):
    return ["search", "--model", "vete_bow_flickr8k", "--images", str(folder), "--index", str(index.index_dir.parent),
            "--no-progress", *rest]


def test_cli_like_puts_the_photo_first(loads, folder, index, capsys):
    me = index.paths[5]
    assert cli.main(_argv(folder, index, "--like", me, "--top-k", "5")) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out if line.strip()[:1].isdigit()]
    assert rows[0][2] == me and float(rows[0][1]) >= 0.999 and len(rows) == 5
    assert out[0].startswith(f'Top 5 of {N_PHOTOS} photos for "like:{me}"')


def test_cli_mixed_query_several_queries_and_json_lines(loads, folder, index, capsys):
    photo = index.paths[2]
    # The documented form: a negative weight right after --query.
    argv = _argv(folder, index, "--query", "a beach", "--query", "-0.5:people", "--like", f"0.7:{photo}",
                 "--top-k", "4", "--then", "--query", "a dog runs", "--json", "--exclude", "sub/*")
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    objects = [json.loads(line) for line in captured.out.splitlines()]
    assert [o["query"] for o in objects] == [f"a beach | -0.5:people | 0.7:like:{photo}", "a dog runs"]
    expected = index.search([("a beach", 1), ("people", -0.5), (Path(photo), 0.7)], top_k=4, exclude=["sub/*"])
    assert [r["path"] for r in objects[0]["results"]] == [h.path for h in expected]
    assert [r["path"] for r in objects[1]["results"]] == [h.path for h in index.search("a dog runs", top_k=4,
                                                                                          exclude=["sub/*"])]
    assert "2 queries searched" in captured.err and len(loads) == 1


def test_cli_interactive_answers_each_line_and_loads_once(loads, folder, index, capsys, monkeypatch):
    lines = ["a dog", "", "a surfer", "  | oops", f"a red car | -0.5:like:{index.paths[0]}"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    assert cli.main(_argv(folder, index, "--interactive", "--paths", "--top-k", "3")) == 2  # a refused line
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert len(out) == 9 and all(Path(p).is_file() for p in out)  # three answered queries, paths only
    assert out[:3] == [h.path for h in index.search("a dog", top_k=3)]
    assert out[3:6] == [h.path for h in index.search("a surfer", top_k=3)]
    assert out[6:] == [h.path for h in index.search([("a red car", 1), (Path(index.paths[0]), -0.5)], top_k=3)]
    errors = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert errors == [e for e in errors if e.startswith("error: line 4: an empty term")] and len(errors) == 1
    assert len(loads) == 1
    # Answered as each line arrives: the first answer is out before the next line is read.
    seen = []

    class Lines(io.StringIO):
        def readline(self, *args):
            seen.append(len(capsys.readouterr().out.splitlines()))
            return super().readline(*args)

    monkeypatch.setattr(sys, "stdin", Lines("a dog\na cat\n"))
    assert cli.main(_argv(folder, index, "a man", "--interactive", "--paths", "--top-k", "2")) == 0
    assert seen == [2, 2, 2]  # "a man" answered before line 1 was read, line 1 before line 2, ...


@pytest.mark.parametrize("case", ["missing like", "dangling then", "paths and json", "save with two", "no query"])
def test_cli_bad_queries_are_one_error_line_and_exit_2(case, folder, tmp_path, capsys):
    rest = {"missing like": ["--like", str(tmp_path / "nope.jpg")],
            "dangling then": ["a dog", "--then"],
            "paths and json": ["a dog", "--paths", "--json"],
            "save with two": ["a dog", "--then", "--query", "a cat", "--save", str(tmp_path / "g.png")],
            "no query": []}[case]
    argv = ["search", "--model", "vete_bow_flickr8k", "--images", str(folder), "--index", str(tmp_path), *rest]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert {"missing like": "no such photo", "dangling then": "--then", "paths and json": "--paths",
            "save with two": "--save", "no query": "query is empty"}[case] in err[0]
