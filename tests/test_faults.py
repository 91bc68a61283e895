"""Faults and bad inputs that used to cost data or mislead (docs/reliability.md, "Arguments,
run folders and data that are not what they seem"): each test fails on the code before its fix.

Most tests work on tiny hand-made folders and need no real data; those that read the real data
take the ``data_dir`` fixture.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def _digests(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _finished_run(out: Path) -> dict:
    """A folder holding a finished run: state complete, export/, image_export/, metrics.json."""
    from grounded_text.training.run_state import write_state

    (out / "export" / "variables").mkdir(parents=True)
    (out / "export" / "saved_model.pb").write_bytes(b"old text tower")
    (out / "export" / "variables" / "variables.index").write_bytes(b"old weights")
    (out / "image_export").mkdir()
    (out / "image_export" / "saved_model.pb").write_bytes(b"old image tower")
    (out / "metrics.json").write_text(json.dumps({"selection": {"best_epoch": 1}}))
    write_state(out, {"version": 1, "status": "complete", "config": {}, "epochs": 1, "epochs_done": 1})
    return _digests(out)


# ============================================================================ bad arguments never cost the old run


@pytest.mark.parametrize("kwargs, named", [
    ({"callbacks": [object()]}, r"callbacks\[0\] is a object, not a keras.callbacks.Callback"),
    ({"callbacks": "x"}, r"callbacks must be a list of keras.callbacks.Callback, got str"),
    ({"verbose": "loud"}, r"verbose must be one of 'auto', 0, 1, 2, got 'loud'"),
    ({"overwrite": "yes"}, r"overwrite must be True or False"),
])
def test_a_bad_argument_leaves_the_finished_run_byte_identical(tmp_path, kwargs, named):
    import grounded_text as gt

    out = tmp_path / "run"
    before = _finished_run(out)
    args = {"overwrite": True, **kwargs}
    with pytest.raises((TypeError, ValueError), match=named) as info:
        gt.train("vete_bow", output_dir=out, data_dir=tmp_path / "no-data", epochs=1, max_train_images=8, **args)
    assert "\n" not in str(info.value)  # one line
    assert _digests(out) == before


def test_the_old_run_is_cleared_only_once_the_callbacks_are_built(tmp_path, data_dir, monkeypatch):
    """A failure while the trainer builds its own callbacks (after the data and the model) still
    leaves the old run whole: the clear is the first write, after everything is built."""
    import grounded_text as gt
    from grounded_text.training import trainer

    out = tmp_path / "run"
    before = _finished_run(out)

    def broken(run):
        raise ValueError("the trainer's callbacks could not be built")

    monkeypatch.setattr(trainer, "_watch", broken)
    with pytest.raises(ValueError, match="could not be built"):
        gt.train("vete_bow", output_dir=out, data_dir=data_dir, overwrite=True, evaluate=False, verbose=0, epochs=1,
                 max_train_images=64, max_dev_images=32, embedding_dim=16, batch_size=32)
    assert _digests(out) == before


# ============================================================================ the run folder's lock


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_planted_lock_link_is_refused_and_its_target_unchanged(tmp_path, kind):
    from grounded_text.training.run_errors import RunDirError
    from grounded_text.training.run_lock import LOCK_FILE, guard_run

    target = tmp_path / "precious.txt"
    target.write_text("my thesis\n")
    out = tmp_path / "run"
    out.mkdir()
    (os.symlink if kind == "symlink" else os.link)(target, out / LOCK_FILE)
    with pytest.raises(RunDirError, match=r"not a plain lock file .*remove it"):
        with guard_run(out):
            pass
    assert target.read_text() == "my thesis\n"


def test_train_cli_with_a_planted_lock_symlink_leaves_its_target_unchanged(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("my thesis\n")
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.json").write_text("{}")  # the run would be refused anyway
    os.symlink(target, out / ".run.lock")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-m", "grounded_text.train", "--output-dir", str(out), "--data-dir",
                           str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: ")
    assert target.read_text() == "my thesis\n"


# ============================================================================ --output-dir and the data folder


@pytest.mark.parametrize("where", ["same", "inside", "containing"])
def test_output_dir_in_or_around_the_data_folder_is_refused(tmp_path, capsys, where):
    from grounded_text.train import main

    data = tmp_path / "data"
    (data / "flickr8k").mkdir(parents=True)
    out = {"same": data, "inside": data / "runs" / "x", "containing": tmp_path}[where]
    before = _digests(tmp_path)
    assert main(["--output-dir", str(out), "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --output-dir") and "the data folder" in err[0], err
    assert _digests(tmp_path) == before and not (data / "runs").exists()


# ============================================================================ --overwrite deletes only the run's files


def test_overwrite_deletes_only_what_the_run_made(tmp_path):
    from grounded_text.training.run_dir import clear_run_dir
    from grounded_text.training.run_state import write_state

    out = tmp_path / "run"
    _finished_run(out)
    write_state(out, {"version": 1, "status": "complete", "config": {}, "epochs": 1, "epochs_done": 1,
                      "exports": ["export", "export_textual", "image_export"]})
    (out / "metrics.json").write_text(json.dumps({"spaces": {"grounded": str(out / "export_grounded")}}))
    for name in ("export_textual", "export_grounded", "export_backup", ".export.tmp-1234", ".export_textual.old"):
        (out / name).mkdir()
        (out / name / "saved_model.pb").write_bytes(b"x")
    (out / "export_plan.md").write_text("my plan")
    (out / ".export_notes").write_text("mine too")
    (out / ".run_state.json.tmp-0123abcd").write_text("{")
    clear_run_dir(out)
    assert sorted(p.name for p in out.iterdir()) == [".export_notes", "export_backup", "export_plan.md"]
    assert (out / "export_plan.md").read_text() == "my plan"
    # The new run's own space names go too (they are about to be written).
    (out / "export_grounded").mkdir()
    clear_run_dir(out, spaces={"grounded": None})
    assert not (out / "export_grounded").exists() and (out / "export_backup" / "saved_model.pb").is_file()


# ============================================================================ --resume and the validation data


def test_resume_with_other_sts_validation_gold_scores_is_refused(tmp_path):
    from grounded_text.config.schema import ExperimentConfig
    from grounded_text.training.fingerprint import check_data
    from grounded_text.training.run_errors import RunDirError
    from grounded_text.training.trainer import validation_files

    def root_with(gold: str) -> Path:
        root = tmp_path / gold
        year = root / "sts" / "STS16-en-test"
        year.mkdir(parents=True)
        (year / "STS2016.input.news.txt").write_text("a dog\ta hound\na cat\ta car\n")
        (year / "STS2016.gs.news.txt").write_text(gold.replace("_", "\n") + "\n")
        return root

    ids, captions, vocab = np.array(["a.jpg"]), np.array(["a dog"]), ["<S>", "a", "dog"]
    pairs = SimpleNamespace(image_ids=ids, captions=captions)
    setup = SimpleNamespace(flickr=SimpleNamespace(store=SimpleNamespace(path=None)), train_pairs=pairs,
                            dev_pairs=pairs, vocabulary=vocab)
    config = ExperimentConfig()
    config.train.select_on = "avg2016"
    first, other = root_with("4.0_1.0"), root_with("1.0_4.0")
    assert [p.name for p in validation_files(config, first)] == ["STS16-en-test"]
    state = {"data": check_data(None, setup, validation_files(config, first))}
    assert check_data(state, setup, validation_files(config, first)) == state["data"]
    with pytest.raises(RunDirError, match=r"data differ .*\(validation data \(the STS or SICK sets"):
        check_data(state, setup, validation_files(config, other))
    old_state = {"data": {k: v for k, v in state["data"].items() if k != "validation"}}  # before this check
    check_data(old_state, setup, validation_files(config, other))


# ============================================================================ captions, splits, features


def _flickr(root: Path, tokens: str, train: str = "a.jpg\nb.jpg\n", dev: str = "c.jpg\n", test: str = "") -> Path:
    text = root / "flickr8k" / "Flickr8k_text"
    text.mkdir(parents=True, exist_ok=True)
    (text / "Flickr8k.token.txt").write_text(tokens)
    for split, ids in (("train", train), ("dev", dev), ("test", test)):
        (text / f"Flickr_8k.{split}Images.txt").write_text(ids)
    return root


def test_a_duplicate_caption_id_in_the_token_file_names_file_and_lines(tmp_path):
    from grounded_text.data.flickr8k import read_flickr8k

    root = _flickr(tmp_path, "a.jpg#0\ta dog\na.jpg#1\ta hound\na.jpg#0\ta cat\n")
    with pytest.raises(ValueError, match=r"Flickr8k.token.txt:3: caption id 'a.jpg#0' repeats line 1"):
        read_flickr8k(root)


def _features(root: Path, ids, rows) -> None:
    folder = root / "flickr8k" / "features"
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "f.npz", ids=np.array(ids), features=np.asarray(rows, np.float32))


@pytest.mark.parametrize("case, named", [
    ("empty train", r"No training pairs: the train split file .*Flickr_8k.trainImages.txt lists no image"),
    ("unmatched train", r"No training pairs: the train split \(.*Flickr_8k.trainImages.txt\) lists 2 image\(s\), "
                        r"but no image with a caption in .*Flickr8k.token.txt"),
    ("no features", r"No training pairs: none of the 2 caption\(s\) of the train split .* has an image with a row "
                    r"in .*f.npz"),
    ("empty dev", r"No dev \(validation\) pairs: the dev split file .*Flickr_8k.devImages.txt lists no image"),
])
def test_empty_or_unmatched_splits_name_the_split_file_and_the_cause(tmp_path, case, named):
    from grounded_text.config.schema import DataConfig
    from grounded_text.training.preparation import _data

    tokens = "a.jpg#0\ta dog\nb.jpg#0\ta cat\nc.jpg#0\ta car\n"
    train = {"empty train": "", "unmatched train": "x.jpg\ny.jpg\n"}.get(case, "a.jpg\nb.jpg\n")
    root = _flickr(tmp_path, tokens, train=train, dev="" if case == "empty dev" else "c.jpg\n")
    rng = np.random.default_rng(0)
    ids = ["c.jpg"] if case == "no features" else ["a.jpg", "b.jpg", "c.jpg"]
    _features(root, ids, rng.normal(size=(len(ids), 4)))
    with pytest.raises(ValueError, match=named):
        _data(DataConfig(features="f", batch_size=2, one_caption_per_image=False, sampler="random",
                         bucket_by_length=False), root)


@pytest.mark.parametrize("rows, named", [
    (np.zeros((3, 4)), "all zero"),
    (np.ones((3, 4)), "the same for every image"),
])
def test_constant_image_features_are_a_data_error_before_training(tmp_path, rows, named):
    from grounded_text.config.schema import DataConfig
    from grounded_text.training.preparation import _data

    root = _flickr(tmp_path, "a.jpg#0\ta dog\nb.jpg#0\ta cat\nc.jpg#0\ta car\n")
    _features(root, ["a.jpg", "b.jpg", "c.jpg"], rows)
    with pytest.raises(ValueError, match=named) as info:
        _data(DataConfig(features="f", batch_size=2, one_caption_per_image=False, sampler="random",
                         bucket_by_length=False), root)
    assert "f.npz" in str(info.value) and "learning rate" not in str(info.value)


# ============================================================================ evaluate(years=...)


def test_evaluate_refuses_an_unknown_year_and_takes_one_year_as_a_str(data_dir):
    import grounded_text as gt

    def encoder(sentences):
        return np.stack([np.frombuffer(hashlib.sha256(s.encode()).digest(), np.uint8)[:8].astype(np.float32)
                         for s in sentences])

    with pytest.raises(ValueError, match=r"no STS99-en-test folder under .*\(years found: STS12.*STS16"):
        gt.evaluate(encoder, data_dir=data_dir, years=["STS99"])
    with pytest.raises(ValueError, match="years is empty"):
        gt.evaluate(encoder, data_dir=data_dir, years=[])
    report = gt.evaluate(encoder, data_dir=data_dir, years="STS16")
    assert [y for y in report["sts"] if y.startswith("STS1")] == ["STS16"]


# ============================================================================ search-space objective


def test_a_search_space_with_an_unknown_objective_is_refused(tmp_path):
    from grounded_text.tuning.space import SpaceError, load_space, tuner_dir

    space = tmp_path / "mine.toml"
    space.write_text(f'extends = "{(tuner_dir() / "vete.toml").as_posix()}"\n[protocol]\nobjective = "accuracy"\n')
    with pytest.raises(SpaceError, match=r"objective 'accuracy' is not one the tuner can maximise; choose from "
                                         r"\['avg2016'\]"):
        load_space(space, "vete_bow")
    space.write_text(f'extends = "{(tuner_dir() / "vete.toml").as_posix()}"\n[protocol]\nobjectve = "avg2016"\n')
    with pytest.raises(SpaceError, match=r"unknown keys \['objectve'\]"):
        load_space(space, "vete_bow")
    assert load_space("vete", "vete_bow").protocol["objective"] == "avg2016"


# ============================================================================ a damaged weights cache


def test_a_damaged_keras_weights_cache_names_the_cache_file_not_weights(tmp_path, monkeypatch):
    from grounded_text.vision.networks import FeatureNetwork, get_spec

    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    cached = tmp_path / "keras" / "models" / get_spec("resnet50").notop_file
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"\x89HDF\r\n\x1a\n truncated download")
    with pytest.raises(ValueError) as info:
        FeatureNetwork("resnet50", "imagenet")
    message = str(info.value)
    assert "--weights" not in message and str(cached) in message and "delete it" in message
    assert "\n" not in message


# ============================================================================ feature stores record what made them


def _pngs(folder: Path, names) -> Path:
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in names:
        pixels = rng.integers(0, 256, size=(40, 48, 3), dtype=np.uint8)
        (folder / name).write_bytes(tf.io.encode_png(pixels).numpy())
    return folder


def test_a_feature_store_refuses_rows_made_with_other_settings(tmp_path):
    from grounded_text.vision.sinks import NpzFeatureSink

    made = {"cnn": "resnet50", "weights": "random:seed=0", "crops": 1, "image_size": 224, "preprocessing": "caffe"}
    out = tmp_path / "s.npz"
    sink = NpzFeatureSink(out, provenance=made)
    sink.append(["a.png"], np.ones((1, 4)))  # a part on disk, as after a kill
    for field, value in (("crops", 10), ("cnn", "resnet152"), ("weights", "random:seed=1"),
                         ("weights", "sha256:00ff (other.weights.h5)"), ("preprocessing", "torch")):
        with pytest.raises(ValueError, match=rf"the store was made with cnn=resnet50 .*\({field} differ\)"):
            NpzFeatureSink(out, provenance={**made, field: value})
    again = NpzFeatureSink(out, provenance=dict(made))  # the same settings resume
    again.append(["b.png"], np.ones((1, 4)))
    again.close()
    from grounded_text.data.provenance import read_npz_provenance

    assert read_npz_provenance(out) == made
    with pytest.raises(ValueError, match=r"\(crops differ\)"):
        NpzFeatureSink(out, provenance={**made, "crops": 10})  # the merged store records it too


def test_features_cli_resumed_with_other_crops_is_refused_and_random_networks_are_seeded(tmp_path, capsys):
    from grounded_text import features as cli
    from grounded_text.data.features import load_npz_features
    from grounded_text.data.provenance import read_npz_provenance

    images = _pngs(tmp_path / "imgs", ["a.png", "b.png"])
    out = tmp_path / "s.npz"
    base = ["--images", str(images), "--out", str(out), "--cnn", "efficientnet_b0", "--weights", "none",
            "--no-progress", "--batch-size", "2"]
    assert cli.main(base + ["--crops", "1"]) == 0
    capsys.readouterr()
    record = read_npz_provenance(out)
    assert record["cnn"] == "efficientnet_b0" and record["weights"] == "random:seed=0" and record["crops"] == 1
    _pngs(images, ["c.png"])
    for flags, differ in ((["--crops", "10"], "crops"), (["--crops", "1", "--seed", "3"], "weights"),
                          (["--crops", "1", "--cnn", "efficientnet_lite0"], "cnn")):
        assert cli.main(base + flags) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and f"({differ}" in err[0], err
    assert sorted(load_npz_features(out).ids.tolist()) == ["a.png", "b.png"]  # nothing mixed in
    # The same settings in another process: the same random network, so the rows agree.
    other = tmp_path / "t.npz"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    args = [a if a != str(out) else str(other) for a in base] + ["--crops", "1"]
    proc = subprocess.run([sys.executable, "-m", "grounded_text.features", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first, second = load_npz_features(out), load_npz_features(other)
    rows = {i: r for i, r in zip(second.ids.tolist(), second.features)}
    for i, r in zip(first.ids.tolist(), first.features):
        np.testing.assert_allclose(rows[i], r, rtol=1e-5, atol=1e-6)
