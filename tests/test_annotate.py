"""``grounded-text annotate``: each photo's best sentences from a file of sentences.

Real Flickr8k test photos with their own captions (the token file), the shipped
``vete_bow_flickr8k``; rankings are checked against cosines recomputed here with NumPy, and
image→caption recall through ``annotate`` against the same recall from the feature file.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from grounded_text import cli
from grounded_text.photos.sentences import SentenceIndex, best_sentences, read_sentences, text_fingerprint

pytestmark = pytest.mark.xdist_group("test_annotate")

N_PHOTOS = 20


def _captions(data_dir: Path) -> dict[str, list[str]]:
    """image file name → its captions, from the official token file."""
    out = defaultdict(list)
    token = data_dir / "flickr8k" / "Flickr8k_text" / "Flickr8k.token.txt"
    for line in token.read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            key, caption = line.split("\t", 1)
            out[key.split("#")[0]].append(caption.strip())
    return out


@pytest.fixture(scope="module")
def enc():
    import grounded_text as gt

    return gt.load("vete_bow_flickr8k")


@pytest.fixture(scope="module")
def setup(data_dir, tmp_path_factory):
    """A folder of 20 test photos and a file of their 100 captions (in photo order)."""
    root = tmp_path_factory.mktemp("annotate")
    folder = root / "photos"
    folder.mkdir()
    captions = _captions(data_dir)
    lines = []
    for src in sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[:N_PHOTOS]:
        shutil.copy2(src, folder / src.name)
        lines += captions[src.name]
    assert len(lines) == 5 * N_PHOTOS
    (root / "captions.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder, root / "captions.txt", captions


@pytest.fixture
def loads(enc, monkeypatch) -> list:
    import grounded_text as gt

    calls = []
    monkeypatch.setattr(gt, "load", lambda *args, **kwargs: calls.append(args) or enc)
    return calls


def _unit(m) -> np.ndarray:
    m = np.asarray(m, np.float64)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_best_sentences_matches_a_brute_force_ranking():
    rng = np.random.default_rng(0)
    photos, sentences = rng.normal(size=(7, 5)), rng.normal(size=(11, 5))
    sentences[4] = sentences[2] * 3.0  # a tie: the earlier line first
    rows, cosines = best_sentences(photos, sentences, top_k=4)
    scores = _unit(photos) @ _unit(sentences).T
    for i in range(7):
        order = sorted(range(11), key=lambda j: (-round(scores[i, j], 6), j))[:4]
        assert rows[i].tolist() == order
        np.testing.assert_allclose(cosines[i], scores[i, order], atol=1e-5)
    assert best_sentences(photos, sentences, top_k=50)[0].shape == (7, 11)
    with pytest.raises(ValueError):
        best_sentences(photos, sentences, top_k=0)
    assert read_sentences("\ufeffa dog\n\n b \r\n".encode()) == ["a dog", "b"]
    for bad in [b"\n \n", b"caf\xe9\n"]:
        with pytest.raises(ValueError):
            read_sentences(bad)


def test_annotate_finds_each_photos_own_captions(loads, enc, setup, tmp_path, capsys):
    folder, captions_file, captions = setup
    argv = ["annotate", "--model", "vete_bow_flickr8k", "--images", str(folder), "--sentences", str(captions_file),
            "--top-k", "5", "--json", "--index", str(tmp_path / "idx"), "--no-progress"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [Path(r["photo"]).name for r in result] == sorted(p.name for p in folder.glob("*.jpg"))
    hits = [any(s["sentence"] in captions[Path(r["photo"]).name] for s in r["sentences"]) for r in result]
    assert np.mean(hits) >= 0.6, np.mean(hits)
    # The same ranking from vectors computed here.
    lines = read_sentences(captions_file.read_bytes())
    scores = _unit(enc.encode_images([r["photo"] for r in result], normalize_embeddings=False)) @ \
        _unit(enc.encode(lines, normalize_embeddings=False)).T
    for r, row in zip(result, scores):
        best = np.argsort(-row, kind="stable")[:5]
        assert [s["sentence"] for s in r["sentences"]] == [lines[j] for j in best]
        np.testing.assert_allclose([s["cosine"] for s in r["sentences"]], row[best], atol=1e-4)
    assert "encoded" in captured.err
    # Again: the photo index and the sentences' vectors are reused, the answer is the same.
    assert cli.main(argv) == 0
    again = capsys.readouterr()
    assert json.loads(again.out) == result
    assert f"{N_PHOTOS} photos (0 encoded, {N_PHOTOS} reused)" in again.err and "sentences (reused)" in again.err
    # Photo files instead of a folder: the same sentences for those photos.
    two = [r["photo"] for r in result[:2]]
    assert cli.main([*argv[:4], *two, *argv[5:]]) == 0
    files = json.loads(capsys.readouterr().out)
    assert [r["photo"] for r in files] == two
    for got, want in zip(files, result):  # the same sentences; cosines to float32 rounding (other batches)
        assert [s["sentence"] for s in got["sentences"]] == [s["sentence"] for s in want["sentences"]]
        np.testing.assert_allclose([s["cosine"] for s in got["sentences"]], [s["cosine"] for s in want["sentences"]],
                                   atol=1e-5)
    # Text output: each photo's path, then its sentences.
    assert cli.main([a for a in argv if a != "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == result[0]["photo"] and out[1].split(None, 2)[2] == result[0]["sentences"][0]["sentence"]
    assert len(loads) == 4


def test_the_sentence_index_is_keyed_by_the_file_and_the_model(enc, tmp_path):
    path = tmp_path / "labels.txt"
    path.write_text("a dog\na cat\na red car\n", encoding="utf-8")
    first = SentenceIndex(path, enc, tmp_path / "idx")
    np.testing.assert_allclose(first.embeddings, enc.encode(["a dog", "a cat", "a red car"], normalize_embeddings=True),
                               atol=1e-6)
    assert not first.reused and first.file.is_file() and first.file.parent == tmp_path / "idx" / "sentences"
    with np.load(first.file, allow_pickle=False) as z:
        assert str(z["fingerprint"]) == text_fingerprint(enc)
    second = SentenceIndex(path, enc, tmp_path / "idx")
    assert second.file == first.file and second.embeddings.tolist() == first.embeddings.tolist() and second.reused
    path.write_text("a dog\na cat\na bus\n", encoding="utf-8")
    changed = SentenceIndex(path, enc, tmp_path / "idx")
    assert changed.file != first.file and not (changed.embeddings is None or changed.reused)
    first.file.write_bytes(b"PK\x03\x04 torn")
    path.write_text("a dog\na cat\na red car\n", encoding="utf-8")
    damaged = SentenceIndex(path, enc, tmp_path / "idx")
    np.testing.assert_allclose(damaged.embeddings, first.embeddings, atol=1e-6)
    assert not damaged.reused


@pytest.mark.parametrize("case", ["missing sentences", "empty sentences", "not utf-8", "folder among files",
                                  "top-k 0"])
def test_annotate_bad_input_is_one_error_line_and_exit_2(case, loads, setup, tmp_path, capsys):
    folder, captions_file, _ = setup
    sentences = {"missing sentences": tmp_path / "nope.txt", "empty sentences": tmp_path / "empty.txt",
                 "not utf-8": tmp_path / "latin1.txt"}.get(case, captions_file)
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\n")
    images = [str(folder), str(next(folder.glob("*.jpg")))] if case == "folder among files" else [str(folder)]
    argv = ["annotate", "--model", "vete_bow_flickr8k", "--images", *images, "--sentences", str(sentences),
            "--index", str(tmp_path / "idx"), "--no-progress", "--top-k", "0" if case == "top-k 0" else "3"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert {"missing sentences": "not a file", "empty sentences": "no sentence", "not utf-8": "not UTF-8",
            "folder among files": "one folder", "top-k 0": "--top-k"}[case] in err[0]


def _recall(ranked_own: np.ndarray) -> dict:
    """R@1/5/10 (percent) from each photo's best rank of an own caption (1-based)."""
    return {k: 100.0 * float(np.mean(ranked_own <= k)) for k in (1, 5, 10)}


@pytest.mark.slow
def test_annotate_recall_equals_the_feature_files_within_a_point(loads, enc, data_dir, tmp_path, capsys):
    """Image→caption R@1/5/10 on the 1,000 test photos against their 5,000 captions: through
    ``annotate`` (photos read and encoded) and from the feature file through the image tower."""
    from grounded_text.evaluation.retrieval import retrieval_metrics
    from grounded_text.serving.images import load_image_encoder

    captions = _captions(data_dir)
    test_ids = (data_dir / "flickr8k" / "Flickr8k_text" / "Flickr_8k.testImages.txt").read_text().split()
    assert len(test_ids) == 1000
    lines = [c for image in test_ids for c in captions[image]]
    caption_image = np.repeat(np.arange(1000), 5)
    (tmp_path / "captions.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = tmp_path / "idx"
    argv = ["annotate", "--model", "vete_bow_flickr8k", "--images", str(data_dir / "flickr8k" / "images"),
            "--sentences", str(tmp_path / "captions.txt"), "--top-k", "10", "--json", "--index", str(index),
            "--no-progress"]
    assert cli.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    result = {Path(r["photo"]).name: [s["sentence"] for s in r["sentences"]] for r in printed}
    assert sorted(result) == sorted(test_ids)
    ranks = np.array([min([i + 1 for i, s in enumerate(result[image]) if s in captions[image]] or [11])
                      for image in test_ids])
    through_annotate = _recall(ranks)

    # The feature file's rows through the image tower, the captions through the text tower.
    with np.load(data_dir / "flickr8k" / "features" / "efficientnet_lite0.npz", allow_pickle=False) as z:
        row_of = {name: i for i, name in enumerate(z["ids"].tolist())}
        features = z["features"][[row_of[image] for image in test_ids]]
    photos = _unit(load_image_encoder(enc.image_export)(features))
    sims = _unit(enc.encode(lines, normalize_embeddings=False)) @ photos.T
    own_best = np.array([sims[caption_image == i, i].max() for i in range(1000)])
    # Independent NumPy: 1 + the other photos' captions scored above the best own caption.
    numpy_ranks = 1 + np.array([(sims[caption_image != i, i] > own_best[i]).sum() for i in range(1000)])
    from_features = _recall(numpy_ranks)
    # The evaluation's figures: the same but for exact ties (repeated captions of two photos score
    # alike), which it counts as the expected recall over a random tie order.
    repo = {k: v for k, v in retrieval_metrics(sims, caption_image)["image_to_caption"].items() if k.startswith("R@")}
    print(f"image→caption R@1/5/10: annotate {through_annotate}, features (NumPy) {from_features}, "
          f"features (evaluation) {repo}")
    for k in (1, 5, 10):
        assert repo[f"R@{k}"] == pytest.approx(from_features[k], abs=0.3)
        assert abs(through_annotate[k] - repo[f"R@{k}"]) <= 1.0, (through_annotate, repo)
