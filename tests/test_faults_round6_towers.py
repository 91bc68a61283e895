"""Image towers and the features they meet: a store that records nothing is refused (unless the
user says so, and is told), the data root's stores are all known, ``evaluate --model NAME`` scores
retrieval with the tower beside the model, and an image tower carries an integrity record
(sizes, SHA-256, its feature record) checked at load, with a re-saved export named as such.

Each test fails on the code before its fix (rc 0 with retrieval at chance, a report without
retrieval and no word, another run's variables or an edited crop count loaded silently, a
``DataLossError`` traceback, "cut short or overwritten" for a re-saved export)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from grounded_text import shipped
from grounded_text.data.provenance import (
    FeaturePairingError,
    check_pairing,
    lite0_provenance,
    lite2_provenance,
    mobilenet_v1_075_provenance,
    store_provenance,
)
from grounded_text.serving.integrity import FEATURE_RECORD_KEY, INTEGRITY_KEY, DamagedExportError, check_export

BOW = "vete_bow_flickr8k"
QUERY = "a dog runs on the grass"


def _evaluate(args, capsys):
    from grounded_text.evaluate import main

    rc = main(args)
    captured = capsys.readouterr()
    return rc, captured.out, [line for line in captured.err.splitlines() if line.strip()]


def _recall_at(text: np.ndarray, images: np.ndarray, caption_image: np.ndarray, k: int) -> float:
    """Caption→image Recall@k (percent), in plain NumPy: the rank of each caption's own image."""
    sims = text @ images.T
    truth = sims[np.arange(len(sims)), caption_image]
    return 100.0 * float(((1 + (sims > truth[:, None]).sum(1)) <= k).mean())


# -- feature stores


def test_the_data_roots_stores_are_all_known(data_dir):
    features = data_dir / "flickr8k" / "features"
    assert store_provenance(features / "efficientnet_lite0.npz") == lite0_provenance()
    assert store_provenance(features / "efficientnet_lite2.npz") == lite2_provenance()
    assert store_provenance(features / "mobilenet_v1_075.npz") == mobilenet_v1_075_provenance()
    with pytest.raises(FeaturePairingError, match="cnn, weights, image_size, preprocessing differ"):
        check_pairing(lite0_provenance(), lite2_provenance(), "T", "S.npz")


def test_a_store_that_records_nothing_is_refused_unless_accepted():
    with pytest.raises(FeaturePairingError, match="record nothing.*--accept-unrecorded-features"):
        check_pairing(lite0_provenance(), None, "T", "S.npz")
    check_pairing(lite0_provenance(), None, "T", "S.npz", accept_unrecorded=True)
    check_pairing(None, None, "T", "S.npz")  # a tower that records nothing: nothing to compare


def test_evaluate_lite2_features_with_a_lite0_model_by_name_is_one_error_line(data_dir, capsys):
    rc, _, err = _evaluate(["--model", BOW, "--data-dir", str(data_dir), "--features", "efficientnet_lite2",
                            "--sections", "retrieval", "--no-sts", "--no-progress"], capsys)
    errors = [line for line in err if line.startswith("error: ")]
    assert rc == 2 and len(errors) == 1 and "efficientnet_lite2" in errors[0], err
    assert "Traceback" not in "\n".join(err)


@pytest.fixture(scope="module")
def unrecorded_root(data_dir, tmp_path_factory) -> Path:
    """A data root whose ``unrecorded.npz`` holds the Lite0 rows and records nothing (and is not
    the data root's file: another SHA-256)."""
    root = tmp_path_factory.mktemp("unrecorded")
    (root / "flickr8k" / "features").mkdir(parents=True)
    for name in ("Flickr8k_text", "images"):
        (root / "flickr8k" / name).symlink_to(data_dir / "flickr8k" / name)
    with np.load(data_dir / "flickr8k" / "features" / "efficientnet_lite0.npz", allow_pickle=False) as z:
        np.savez(root / "flickr8k" / "features" / "unrecorded.npz", ids=z["ids"], features=z["features"],
                 note=np.array("copied"))
    return root


def test_evaluate_refuses_an_unrecorded_store_unless_the_flag_is_given_and_says_so(unrecorded_root, data_dir,
                                                                                  tmp_path, capsys):
    args = ["--model", BOW, "--data-dir", str(unrecorded_root), "--features", "unrecorded", "--sections",
            "retrieval", "--no-sts", "--no-progress"]
    rc, _, err = _evaluate(args, capsys)
    errors = [line for line in err if line.startswith("error: ")]
    assert rc == 2 and len(errors) == 1 and "--accept-unrecorded-features" in errors[0], err

    rc, out, err = _evaluate([*args, "--accept-unrecorded-features", "--json", str(tmp_path / "r.json")], capsys)
    assert rc == 0, err
    warnings = [line for line in err if line.startswith("warning: --accept-unrecorded-features")]
    assert len(warnings) == 1 and "unrecorded.npz" in warnings[0]
    retrieval = json.loads((tmp_path / "r.json").read_text())["encoders"][BOW]["retrieval"]

    # The same figure without the evaluation code: the test captions through the text tower, the
    # test images' Lite0 rows through the image tower, ranked in NumPy.
    import grounded_text as gt
    from grounded_text.data.flickr8k import read_flickr8k
    from grounded_text.serving.images import load_image_encoder

    captions = [c for c in read_flickr8k(data_dir) if c.split == "test"]
    images = sorted({c.image_id for c in captions})
    column = {i: k for k, i in enumerate(images)}
    with np.load(data_dir / "flickr8k" / "features" / "efficientnet_lite0.npz", allow_pickle=False) as z:
        row = {i: k for k, i in enumerate(z["ids"].tolist())}
        rows = z["features"][[row[i] for i in images]]
    enc = gt.load(BOW)
    text = enc.encode([c.text for c in captions], normalize_embeddings=True)
    vectors = load_image_encoder(enc.image_export)(rows)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    want = _recall_at(text, vectors, np.array([column[c.image_id] for c in captions]), 1)
    assert abs(retrieval["caption_to_image"]["R@1"] - want) < 0.05, (retrieval["caption_to_image"], want)


def test_evaluate_by_name_scores_retrieval_with_the_tower_beside_it(data_dir, tmp_path, capsys):
    rc, out, err = _evaluate(["--model", BOW, "--data-dir", str(data_dir), "--sections", "retrieval", "--no-sts",
                              "--no-progress", "--json", str(tmp_path / "r.json")], capsys)
    assert rc == 0, err
    assert any(line.startswith(f"image tower of {BOW}: ") for line in err), err
    retrieval = json.loads((tmp_path / "r.json").read_text())["encoders"][BOW]["retrieval"]
    assert 10 < retrieval["caption_to_image"]["R@1"] < 20  # 14.5 for the shipped model; chance is 0.1
    assert "caption→image" in out


def test_evaluate_says_when_a_model_has_no_image_tower(data_dir, tmp_path, capsys):
    text_only = tmp_path / "text_only" / "export"
    shutil.copytree(shipped.export_dir(BOW), text_only)
    rc, _, err = _evaluate(["--model", str(text_only), "--data-dir", str(data_dir), "--sections", "retrieval",
                            "--no-sts", "--no-progress"], capsys)
    assert rc == 0 and any(line.startswith("warning: ") and "no image tower" in line for line in err), err


# -- the image tower's record


def _model_copy(tmp_path) -> Path:
    """A private copy of the shipped BOW model: ``export/`` and ``image_export/``."""
    folder = tmp_path / "model"
    for part in ("export", "image_export"):
        shutil.copytree(shipped.SHIPPED_DIR / BOW / part, folder / part)
    return folder


def test_the_shipped_towers_and_a_new_export_carry_the_record(tmp_path):
    import keras

    from grounded_text.serving.export import export_image_tower

    for name in shipped.names():
        tower = shipped.image_export_dir(name)
        config = json.loads((tower / "assets" / "config.json").read_text())
        assert config[INTEGRITY_KEY][FEATURE_RECORD_KEY] == config[FEATURE_RECORD_KEY] == lite0_provenance()
        assert set(config[INTEGRITY_KEY]["files"]) >= {"saved_model.pb", "variables/variables.index"}
        check_export(tower)
    inputs = keras.Input((6,))
    path = export_image_tower(keras.Model(inputs, keras.layers.Dense(4)(inputs)), tmp_path / "t", {"a": 1},
                              image_features=lite0_provenance())
    record = json.loads((path / "assets" / "config.json").read_text())[INTEGRITY_KEY]
    assert record[FEATURE_RECORD_KEY] == lite0_provenance()
    assert record["files"]["saved_model.pb"]["bytes"] == (path / "saved_model.pb").stat().st_size


def _other_run_variables(tower: Path, out: Path) -> Path:
    """The tower re-saved with other weights of the same shapes (as another run's)."""
    module = tf.saved_model.load(str(tower))
    rng = np.random.default_rng(0)
    for v in module.signatures["serving_default"].variables:
        if v.dtype.is_floating:
            v.assign(v + rng.normal(0, 0.05, v.shape).astype(v.dtype.as_numpy_dtype))
    tf.saved_model.save(module, str(out))
    return out / "variables"


@pytest.mark.parametrize("case", ["other_variables", "crops_10", "byte_flipped", "variables_missing"])
def test_a_changed_image_tower_is_refused_at_load_in_one_line(tmp_path, capsys, case, data_dir):
    import grounded_text as gt
    from grounded_text import search
    from grounded_text.serving.images import load_image_encoder

    model = _model_copy(tmp_path)
    tower = model / "image_export"
    if case == "other_variables":
        other = _other_run_variables(tower, tmp_path / "other")
        shutil.rmtree(tower / "variables")
        shutil.copytree(other, tower / "variables")
        named = "variables/variables.data-00000-of-00001"
    elif case == "crops_10":
        config = json.loads((tower / "assets" / "config.json").read_text())
        config[FEATURE_RECORD_KEY]["crops"] = 10
        (tower / "assets" / "config.json").write_text(json.dumps(config))
        named = "crops=10"
    elif case == "byte_flipped":
        data = bytearray((tower / "variables" / "variables.index").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (tower / "variables" / "variables.index").write_bytes(bytes(data))
        named = "variables/variables.index"
    else:
        shutil.rmtree(tower / "variables")
        named = "variables/ is missing"
    with pytest.raises(DamagedExportError) as info:
        load_image_encoder(tower)
    assert named in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(DamagedExportError):
        gt.load(model / "export").encode_images(np.zeros((32, 32, 3), np.uint8))

    photos = tmp_path / "photos"
    photos.mkdir()
    shutil.copy2(sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[0], photos / "a.jpg")
    assert search.main(["--model", str(model / "export"), "--images", str(photos), QUERY, "--index",
                        str(tmp_path / "idx"), "--no-progress"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: ") and named in err[0], err
    assert "cannot write the index" not in err[0]


def test_a_resaved_export_is_named_as_such_and_can_be_recorded_again(tmp_path):
    from grounded_text.serving.images import load_image_encoder
    from grounded_text.serving.integrity import record_integrity

    tower = shipped.image_export_dir(BOW)
    out = tmp_path / "resaved"
    tf.saved_model.save(tf.saved_model.load(str(tower)), str(out))
    with pytest.raises(DamagedExportError) as info:
        load_image_encoder(out)
    message = str(info.value)
    assert "does not match its record" in message and "re-saved" in message and "record_integrity" in message
    assert "cut short or overwritten" not in message and "\n" not in message
    record_integrity(out)
    features = np.random.default_rng(0).normal(size=(3, 1280)).astype(np.float32)
    np.testing.assert_allclose(load_image_encoder(out)(features), load_image_encoder(tower)(features), atol=1e-6)
