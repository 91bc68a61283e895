"""Caption sources (COCO JSON, Karpathy, Flickr30k, TFDS coco_captions), prepared
folders, the TFDS export round trip and training on a COCO-format dataset."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest

from grounded_text.data import prepared, sources
from grounded_text.data.features import FeatureStore
from grounded_text.data.flickr8k import Caption

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_sources")

FIXTURES = Path(__file__).parent / "fixtures" / "coco"
COCO = FIXTURES / "captions_mini2014.json"
KARPATHY = FIXTURES / "dataset_mini.json"
# The fixture's Karpathy splits, written by hand (restval → train, val → dev).
FIXTURE_SPLITS = ["train", "train", "train", "restval", "restval", "val", "val", "test"]


@pytest.fixture(autouse=True)
def _no_tfds_retries(monkeypatch):
    """TFDS retries each URL 10 times with back-off (minutes offline): never in tests."""
    from tensorflow_datasets.core.download import downloader

    monkeypatch.setattr(downloader, "MAX_RETRIES", 0)


@pytest.fixture(scope="module")
def b0_network():
    """One random-init EfficientNet-B0 (no weights download) shared by the extraction tests."""
    from grounded_text.vision.networks import FeatureNetwork

    return FeatureNetwork("efficientnet_b0", weights="none")


@pytest.fixture
def shared_network(b0_network, monkeypatch):
    from grounded_text.vision import extractor

    monkeypatch.setattr(extractor, "FeatureNetwork", lambda cnn, **kwargs: b0_network)
    return b0_network


def _fixture_files():
    return [im["file_name"] for im in json.loads(COCO.read_text())["images"]]


def _token_captions(data_dir, names):
    """Independent reference: the Flickr8k token file, parsed here with plain string ops."""
    out = {}
    for line in (data_dir / "flickr8k" / "Flickr8k_text" / "Flickr8k.token.txt").read_text().splitlines():
        key, text = line.split("\t")
        name, k = key.split("#")
        if name in names:
            out[(name, int(k))] = text.strip()
    return out


# ----------------------------------------------------------------------------- COCO JSON


def test_coco_fixture_matches_flickr8k_token_file(data_dir):
    caps = sources.read_coco_captions(COCO, karpathy=KARPATHY)
    names = _fixture_files()
    assert len(caps) == 40 and {c.image_id for c in caps} == set(names)
    # Annotations are interleaved (as in COCO); index counts per image in file order.
    assert [c.image_id for c in caps[:8]] == names and all(c.index == 0 for c in caps[:8])
    assert {(c.image_id, c.index): c.text for c in caps} == _token_captions(data_dir, set(names))
    want = {n: sources.KARPATHY_SPLITS[s] for n, s in zip(names, FIXTURE_SPLITS)}
    assert {c.image_id: c.split for c in caps} == want
    assert [want[n] for n in names] == ["train"] * 5 + ["dev"] * 2 + ["test"]


def test_coco_split_from_file_name_or_argument(tmp_path):
    with pytest.raises(ValueError, match="captions_mini2014.json: the file name names no split"):
        sources.read_coco_captions(COCO)
    assert {c.split for c in sources.read_coco_captions(COCO, split="train")} == {"train"}
    assert {c.split for c in sources.read_coco_captions(COCO, split=None)} == {None}
    for name, split in [("captions_train2014.json", "train"), ("captions_val2014.json", "dev"),
                        ("captions_test.json", "test")]:
        (tmp_path / name).write_bytes(COCO.read_bytes())
        assert {c.split for c in sources.read_coco_captions(tmp_path / name)} == {split}
    with pytest.raises(ValueError, match="split must be one of"):
        sources.read_coco_captions(COCO, split="validation")


def _write(tmp_path, data, name="captions_train2014.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data)) if not isinstance(data, bytes) else path.write_bytes(data)
    return path


def _mini():
    return {"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
            "annotations": [{"image_id": 1, "id": 10, "caption": "A dog ."},
                            {"image_id": 2, "id": 11, "caption": "A cat ."}]}


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["annotations"].append({"image_id": 3, "id": 12, "caption": "x"}),
     r"annotations\[2\] \(id 12\) refers to image_id 3, which has no entry"),
    (lambda d: d["images"].append({"id": 1, "file_name": "c.jpg"}), r"duplicate image id 1 \(images\[2\]\)"),
    (lambda d: d["images"].append({"id": 3, "file_name": "a.jpg"}),
     r"file name 'a.jpg' of images\[2\] is already used by image id 1"),
    (lambda d: d["annotations"].append({"image_id": 1, "id": 10, "caption": "x"}), "duplicate annotation id 10"),
    (lambda d: d["annotations"][1].update(caption="  "), r"annotations\[1\] \(id 11\) has an empty caption"),
    (lambda d: d["annotations"][0].pop("caption"), r"annotations\[0\] lacks key\(s\) \['caption'\]"),
    (lambda d: d["images"][1].pop("file_name"), r"images\[1\] lacks key\(s\) \['file_name'\]"),
    (lambda d: d.pop("annotations"), r"the top level lacks key\(s\) \['annotations'\]"),
])
def test_coco_bad_input_names_file_and_entry(tmp_path, mutate, match):
    data = _mini()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(ValueError, match=match) as e:
        sources.read_coco_captions(path)
    assert str(path) in str(e.value)


def test_coco_not_utf8_not_json_missing(tmp_path):
    bad = json.dumps(_mini()).replace("A dog", "A d\u00f6g").encode("latin-1")
    with pytest.raises(ValueError, match=r"captions_train2014.json: COCO captions file is not valid UTF-8"):
        sources.read_coco_captions(_write(tmp_path, bad))
    with pytest.raises(ValueError, match="is not valid JSON"):
        sources.read_coco_captions(_write(tmp_path, b"{\"images\": ["))
    with pytest.raises(FileNotFoundError, match="nope.json"):
        sources.read_coco_captions(tmp_path / "nope.json")


def test_coco_two_files_one_source(tmp_path):
    d1, d2 = _mini(), {"images": [{"id": 1, "file_name": "z.jpg"}],
                       "annotations": [{"image_id": 1, "id": 10, "caption": "Zebra ."}]}
    src = sources.coco_json_source([_write(tmp_path, d1), _write(tmp_path, d2, "captions_val2014.json")])
    assert [(c.image_id, c.split) for c in src.captions] == [("a.jpg", "train"), ("b.jpg", "train"),
                                                             ("z.jpg", "dev")]
    d2["images"][0]["file_name"] = "a.jpg"
    with pytest.raises(ValueError, match="'a.jpg' is captioned in both"):
        sources.coco_json_source([_write(tmp_path, d1), _write(tmp_path, d2, "captions_val2014.json")])


# ----------------------------------------------------------------------------- Karpathy


def test_karpathy_reader_equals_coco_plus_split_file():
    a = sources.read_karpathy(KARPATHY)
    b = sources.read_coco_captions(COCO, karpathy=KARPATHY)
    assert sorted(a, key=lambda c: (c.image_id, c.index)) == sorted(b, key=lambda c: (c.image_id, c.index))


def test_karpathy_bad_split_and_duplicates(tmp_path):
    data = json.loads(KARPATHY.read_text())
    data["images"][0]["split"] = "validation"
    with pytest.raises(ValueError, match=r"images\[0\] \('1056338697_4f7d7ce270.jpg'\) has split 'validation'"):
        sources.read_karpathy(_write(tmp_path, data, "dataset_x.json"))
    data = json.loads(KARPATHY.read_text())
    data["images"].append(dict(data["images"][0]))
    with pytest.raises(ValueError, match="listed twice"):
        sources.read_karpathy_splits(_write(tmp_path, data, "dataset_y.json"))


def test_karpathy_coco_filepath_layout(tmp_path):
    data = {"images": [{"filepath": "val2014", "filename": "COCO_val2014_1.jpg", "split": "restval",
                        "cocoid": 1, "sentences": [{"raw": "A red bus .", "tokens": ["a"]}]}]}
    path = _write(tmp_path, data, "dataset_coco.json")
    (tmp_path / "imgs" / "val2014").mkdir(parents=True)
    (tmp_path / "imgs" / "val2014" / "COCO_val2014_1.jpg").write_bytes(b"\xff\xd8jpeg")
    src = sources.karpathy_source(path, tmp_path / "imgs")
    assert src.captions == [Caption("COCO_val2014_1.jpg", 0, "A red bus .", "train")]
    (ident, data_bytes), = list(src.images().as_numpy_iterator())
    assert ident == b"COCO_val2014_1.jpg" and data_bytes == b"\xff\xd8jpeg"


# ----------------------------------------------------------------------------- Flickr30k


def test_flickr30k_token_and_kaggle_csv(tmp_path):
    token = tmp_path / "results_20130124.token"
    token.write_text("1000092795.jpg#0\tTwo young guys with shaggy hair .\n"
                     "1000092795.jpg#1\tTwo young , White males are outside .\n"
                     "10002456.jpg#0\tSeveral men in hard hats .\n")
    csv = tmp_path / "results.csv"
    csv.write_text("image_name| comment_number| comment\n"
                   "1000092795.jpg| 0| Two young guys with shaggy hair .\n"
                   "1000092795.jpg| 1| Two young , White males are outside .\n"
                   "10002456.jpg| 0 Several men in hard hats .\n")  # the Kaggle copy's broken row
    a, b = sources.read_flickr30k(token), sources.read_flickr30k(tmp_path / "results.csv")
    assert a == b == [Caption("1000092795.jpg", 0, "Two young guys with shaggy hair .", None),
                      Caption("1000092795.jpg", 1, "Two young , White males are outside .", None),
                      Caption("10002456.jpg", 0, "Several men in hard hats .", None)]
    kar = _write(tmp_path, {"images": [{"filename": "10002456.jpg", "split": "val", "sentences": []}]},
                 "dataset_flickr30k.json")
    c = sources.read_flickr30k(tmp_path, karpathy=kar)  # a folder: finds the token file
    assert [x.split for x in c] == [None, None, "dev"]
    token.write_text("1000092795.jpg 0 no tab\n")
    with pytest.raises(ValueError, match=r"results_20130124.token:1: expected"):
        sources.read_flickr30k(token)
    token.write_text("a.jpg#0\tx\na.jpg#0\ty\n")
    with pytest.raises(ValueError, match="listed twice"):
        sources.read_flickr30k(token)


# ----------------------------------------------------------------------------- image locator


def test_image_dataset_reads_the_fixture_photos(data_dir, tmp_path):
    images = data_dir / "flickr8k" / "images"
    src = sources.coco_json_source(COCO, images, karpathy=KARPATHY)
    got = dict(src.images().as_numpy_iterator())
    assert list(got) == [n.encode() for n in _fixture_files()]
    for name, data in got.items():
        assert data == (images / name.decode()).read_bytes()
    empty = tmp_path / "img"
    empty.mkdir()
    (empty / _fixture_files()[0]).write_bytes(b"x")
    src = sources.coco_json_source(COCO, empty, karpathy=KARPATHY)
    with pytest.raises(FileNotFoundError, match="7 of 8 captioned image"):
        src.images()
    assert [i for i, _ in src.images(missing="skip").as_numpy_iterator()] == [_fixture_files()[0].encode()]


def test_flickr8k_source_locates_the_image_folder(data_dir):
    src = sources.flickr8k_source(data_dir)
    assert src.image_dir == data_dir / "flickr8k" / "images" and len(src.captions) == 40460
    # The shared folder holds only the 1,000 test photos (and the stray id has none).
    with pytest.raises(FileNotFoundError, match="7092 of 8092 captioned image"):
        src.images()


def test_prepared_captions_file_errors(tmp_path):
    path = tmp_path / "captions.jsonl"
    path.write_text('{"image_id": "a.jpg", "index": 0, "text": "x", "split": "train"}\n{"image_id": "b.jpg"}\n')
    with pytest.raises(ValueError, match=r"captions.jsonl:2: expected"):
        prepared.read_captions(path)
    path.write_text('{"image_id": "a.jpg", "index": 0, "text": "x", "split": "val"}\n')
    with pytest.raises(ValueError, match=r"captions.jsonl:1: unknown split 'val'"):
        prepared.read_captions(path)
    with pytest.raises(FileNotFoundError, match="not a prepared dataset folder"):
        prepared.load_prepared(tmp_path)


# ----------------------------------------------------------------------------- TFDS coco_captions


def _fake_coco_as_dataset(self, split, decoders=None, read_config=None, **kwargs):
    """Real coco_captions examples (builder's own feature spec) serialised and parsed by TFDS.

    (``mock_data``'s random generator gives ``captions/text`` and ``captions/id``
    different lengths, which coco_captions' Sequence feature rejects.)
    """
    import tensorflow as tf

    features = self.info.features
    serialized = [features.serialize_example(ex) for ex in _fake_examples(split)]
    return tf.data.Dataset.from_tensor_slices(serialized).map(
        lambda s: features.deserialize_example(s, decoders=decoders))


def _fake_examples(split):
    rng = np.random.default_rng(sum(map(ord, split)))
    out = []
    for i in range(2 if split != "train" else 3):
        out.append({
            "image": rng.integers(0, 255, (6, 5, 3), dtype=np.uint8),
            "image/filename": f"COCO_{split}2014_{i:012d}.jpg",
            "image/id": i,
            "objects": {"area": [], "bbox": np.zeros((0, 4), np.float32), "id": [], "is_crowd": [], "label": []},
            "captions": [{"text": f"Caption {k} of {split} image {i} .", "id": 100 * i + k} for k in range(5)],
        })
    return out


def test_tfds_coco_captions_with_mock_data(tmp_path):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(as_dataset_fn=_fake_coco_as_dataset):
        src = sources.tfds_coco_captions(tmp_path, builder=tfds.builder("coco_captions", data_dir=str(tmp_path)))
        images = list(src.images().as_numpy_iterator())
    want = [Caption(ex["image/filename"], k, c["text"], sources.KARPATHY_SPLITS[s])
            for s in sources.TFDS_COCO_SPLITS for ex in _fake_examples(s) for k, c in enumerate(ex["captions"])]
    assert src.captions == want
    assert {c.split for c in src.captions} == {"train", "dev", "test"}
    assert [i.decode() for i, _ in images] == src.image_ids()
    # SkipDecoding: the bytes are the stored PNG/JPEG, which decode to the original pixels.
    first = _fake_examples("train")[0]["image"]
    assert images[0][1][:4] in (b"\x89PNG", b"\xff\xd8\xff\xe0")
    decoded = tf.io.decode_image(images[0][1]).numpy()
    assert decoded.shape == first.shape
    with pytest.raises(ValueError, match="Unknown coco_captions split"):
        sources.tfds_coco_captions(tmp_path, splits=["validation"])


def test_tfds_not_prepared_and_offline_download_fail_fast(tmp_path, monkeypatch):
    from tensorflow_datasets.core.download import downloader

    with pytest.raises(FileNotFoundError, match="'coco_captions' is not prepared under"):
        sources.tfds_coco_captions(tmp_path)

    retries_seen = []

    def offline(*args, **kwargs):  # what an offline machine's resolver does
        retries_seen.append(downloader.MAX_RETRIES)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", offline)
    monkeypatch.setattr(downloader, "MAX_RETRIES", 10)  # TFDS's default (minutes of back-off offline)
    with pytest.raises(sources.TFDSDownloadError, match="Could not download/prepare TFDS 'coco_captions'") as e:
        sources.tfds_coco_captions(tmp_path, download=True)
    assert "Name or service not known" in str(e.value)  # the cause is named
    # It failed at the network (not before), and without retries: one lookup per URL tried.
    assert retries_seen and set(retries_seen) == {0}
    assert downloader.MAX_RETRIES == 10  # restored


# ----------------------------------------------------------------------------- prepared + TFDS export


def _store_for(names, dim=6, seed=0):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(names))  # store order ≠ caption order: the join is by id
    ids = np.array(names)[order]
    return FeatureStore(ids, rng.normal(size=(len(ids), dim)).astype(np.float32))


def _key(c):
    return (c.split, c.image_id, c.index, c.text)


def test_tfds_export_round_trip_exact(tmp_path):
    import tensorflow_datasets as tfds

    caps = sources.read_coco_captions(COCO, karpathy=KARPATHY)
    caps.append(Caption("unsplit.jpg", 0, "No split .", None))  # not exported
    store = _store_for(_fixture_files() + ["unsplit.jpg", "uncaptioned.jpg"])
    builder_dir = prepared.export_tfds(caps, store, tmp_path / "tfds")
    assert builder_dir == tmp_path / "tfds" / prepared.TFDS_NAME / "1.0.0"
    caps2, store2 = prepared.read_tfds_export(tmp_path / "tfds")
    assert sorted(map(_key, caps2)) == sorted(_key(c) for c in caps if c.split)
    assert sorted(store2.ids.tolist()) == sorted(_fixture_files())
    row = store.index()
    np.testing.assert_array_equal(store2.features, store.features[[row[i] for i in store2.ids]])
    # Plain TFDS reads it too.
    ds = tfds.load(prepared.TFDS_NAME, data_dir=str(tmp_path / "tfds"), split="dev")
    names = _fixture_files()
    assert [ex["image_id"].numpy().decode() for ex in ds] == names[5:7]


def test_prepare_cli_folder_and_load_pairs(tmp_path):
    from grounded_text import prepare
    from grounded_text.config.schema import DataConfig

    names = _fixture_files()
    store = _store_for(names)
    npz = tmp_path / "f.npz"
    np.savez(npz, ids=store.ids, features=store.features)
    out = tmp_path / "prep"
    assert prepare.main(["--source", "coco_json", "--captions", str(COCO), "--karpathy", str(KARPATHY),
                         "--out", str(out), "--features", str(npz), "--tfds"]) == 0
    manifest = json.loads((out / "dataset.json").read_text())
    assert manifest["splits"]["train"] == {"captions": 25, "images": 5}
    assert manifest["splits"]["dev"] == {"captions": 10, "images": 2}
    assert manifest["splits"]["test"] == {"captions": 5, "images": 1}
    assert prepared.read_captions(out / "captions.jsonl") == sources.read_coco_captions(COCO, karpathy=KARPATHY)

    row = {n: i for i, n in enumerate(store.ids.tolist())}
    for dataset in (out, out / "tfds"):
        pairs = prepared.load_pairs(DataConfig(dataset=str(dataset)), None)
        for split, idx in (("train", range(5)), ("dev", range(5, 7)), ("test", range(7, 8))):
            p = pairs.splits[split]
            assert sorted(set(p.image_ids.tolist())) == sorted(names[i] for i in idx)
            np.testing.assert_array_equal(p.image_features(), store.features[[row[i] for i in p.image_ids]])
    with pytest.raises(ValueError, match="expected 'flickr8k', a prepared folder"):
        prepared.load_pairs(DataConfig(dataset=str(tmp_path / "nothing")), None)


# Trains and exports (an export alone is about 26 s).
@pytest.mark.slow
def test_train_on_coco_format_fixture(tmp_path):
    """COCO-format fixture → prepare (features from a small .npz) → 1 epoch vete_bow → export loads."""
    from grounded_text import prepare
    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.serving.loader import load as load_encoder
    from grounded_text.training.trainer import train

    names = _fixture_files()
    store = _store_for(names, dim=12)
    np.savez(tmp_path / "f.npz", ids=store.ids, features=store.features)
    prepare.main(["--source", "coco_json", "--captions", str(COCO), "--karpathy", str(KARPATHY),
                  "--out", str(tmp_path / "prep"), "--features", str(tmp_path / "f.npz")])
    cfg = ExperimentConfig(
        data=DataConfig(dataset=str(tmp_path / "prep"), batch_size=4, one_caption_per_image=False),
        model=ModelConfig("vete_bow", embedding_dim=8),
        train=TrainConfig(epochs=1, select_on="val_loss"),
    )
    (tmp_path / "root").mkdir()  # a data root without STS: selection on dev loss
    metrics = train(cfg, tmp_path / "root", tmp_path / "run", evaluate=False, verbose=0)
    assert metrics["data"]["train_pairs"] == 25 and metrics["data"]["train_images"] == 5
    assert metrics["data"]["dev_pairs"] == 10 and metrics["data"]["feature_dim"] == 12
    assert metrics["config"]["data"]["dataset"] == str(tmp_path / "prep")
    assert np.isfinite(metrics["history"]["loss"][0])
    enc = load_encoder(tmp_path / "run" / "export")
    emb = enc(["A boy on the beach .", "A dog runs ."])
    assert emb.shape == (2, 8) and np.isfinite(emb).all()


def test_prepare_extracts_features_from_images(data_dir, tmp_path, shared_network):
    """End to end with the extractor (random-init EfficientNet-B0, no weights download)."""
    from grounded_text import prepare
    from grounded_text.data.features import load_npz_features

    out = tmp_path / "prep"
    prepare.main(["--source", "coco_json", "--captions", str(COCO), "--karpathy", str(KARPATHY),
                  "--images", str(data_dir / "flickr8k" / "images"), "--out", str(out),
                  "--cnn", "efficientnet_b0", "--weights", "none", "--batch-size", "8"])
    manifest = json.loads((out / "dataset.json").read_text())
    assert manifest["features"] == "features.npz" and manifest["extraction"]["written"] == 8
    store = load_npz_features(out / "features.npz")
    assert sorted(store.ids.tolist()) == sorted(_fixture_files()) and store.features.shape == (8, 1280)
    # No mis-pairing: each row is the CNN applied to that id's photo.
    from grounded_text.vision import crops

    for name in _fixture_files()[:2]:
        raw = (data_dir / "flickr8k" / "images" / name).read_bytes()
        views = crops.make_views(crops.decode_rgb(raw), shared_network.input_size, 1)
        want = shared_network(views[None]).numpy()[0]
        np.testing.assert_allclose(store.features[store.index()[name]], want, rtol=1e-4, atol=1e-4)
    # Resume: a second run extracts nothing new.
    prepare.main(["--source", "coco_json", "--captions", str(COCO), "--karpathy", str(KARPATHY),
                  "--images", str(data_dir / "flickr8k" / "images"), "--out", str(out),
                  "--cnn", "efficientnet_b0", "--weights", "none"])
    manifest = json.loads((out / "dataset.json").read_text())
    assert manifest["extraction"]["written"] == 0 and manifest["extraction"]["skipped_existing"] == 8


def test_prepare_tfds_coco_extracts_from_tfds_images(tmp_path, monkeypatch, shared_network):
    """tfds_coco → extractor: the (image/filename, encoded bytes) tf.data feeds the CNN as is."""
    import tensorflow_datasets as tfds

    from grounded_text import prepare
    from grounded_text.data.features import load_npz_features

    with tfds.testing.mock_data(as_dataset_fn=_fake_coco_as_dataset):
        monkeypatch.setattr(type(tfds.builder("coco_captions", data_dir=str(tmp_path))), "is_prepared",
                            lambda self: True)
        prepare.main(["--source", "tfds_coco", "--tfds-data-dir", str(tmp_path / "tfds_data"),
                      "--out", str(tmp_path / "prep"), "--cnn", "efficientnet_b0", "--weights", "none",
                      "--tfds-splits", "train", "val"])
    store = load_npz_features(tmp_path / "prep" / "features.npz")
    want = [ex["image/filename"] for s in ("train", "val") for ex in _fake_examples(s)]
    assert sorted(store.ids.tolist()) == sorted(want) and store.features.shape == (5, 1280)
    caps = prepared.read_captions(tmp_path / "prep" / "captions.jsonl")
    assert [(c.image_id, c.split) for c in caps[::5]] == [(n, "train") for n in want[:3]] + [
        (n, "dev") for n in want[3:]]
