"""Typed run configs: ``train --config FILE.toml``, ``--set section.key=value``, the flags
generated from the config dataclasses, and a run directory's ``config.toml`` replaying the run."""

from __future__ import annotations

import dataclasses
import importlib
import json

import pytest

from grounded_text.config.files import config_toml, read_config_file
from grounded_text.config.params import LOSS_PARAMS
from grounded_text.config.schema import ConfigError, ExperimentConfig, check_field
from grounded_text.papers.presets import PRESETS
from grounded_text.papers.resolve import config_from_flags, preset_config
from grounded_text.train import parse_args

# The trainer's flags before they were generated from the dataclasses: every one still works.
OLD_FLAGS = [
    "--embedding-dim", "--pooling", "--features", "--dataset", "--one-caption-per-image", "--all-captions",
    "--max-train-images", "--batch-size", "--bucket-by-length", "--no-bucket-by-length", "--max-vocab-size",
    "--min-count", "--num-oov-buckets", "--lowercase", "--keep-case", "--no-boundary-tokens", "--max-tokens",
    "--epochs", "--learning-rate", "--select-on", "--seed", "--loss", "--loss-param", "--encoder-param",
    "--word-vectors", "--word-vectors-vocab", "--sampler", "--captions-per-image", "--max-dev-images",
    "--schedule", "--lr-min", "--cycle-epochs", "--snapshots", "--ensemble-size", "--strategy",
    "--mixed-precision", "--steps-per-execution", "--model", "--resume", "--overwrite", "--no-evaluate",
    "--verbose", "--data-dir", "--output-dir",
]


def _cfg(argv):
    return config_from_flags(parse_args(["--output-dir", "x", *argv]))


def test_every_old_flag_is_generated():
    import argparse

    train = importlib.import_module("grounded_text.train")  # the command (gt.train is the API's)

    p = argparse.ArgumentParser()
    train_parser_flags = set()
    # parse_args builds its parser inside; read the flags from its --help text.
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        train.parse_args(["--help"])
    text = buf.getvalue()
    for flag in OLD_FLAGS:
        if flag not in text:
            train_parser_flags.add(flag)
    assert not train_parser_flags, f"flags missing from train --help: {sorted(train_parser_flags)}"
    del p


def test_flags_map_to_fields():
    c = _cfg(["--model", "vete_rnn", "--embedding-dim", "64", "--all-captions", "--keep-case",
              "--no-boundary-tokens", "--max-train-images", "none", "--batch-size", "32", "--seed", "7",
              "--loss", "triplet", "--loss-param", "margin=0.3", "--loss-param", "negatives=hardest",
              "--encoder-param", "cell=gru", "--snapshots", "false", "--mixed-precision",
              "--learning-rate", "0.002", "--select-on", "last", "--no-bucket-by-length"])
    assert (c.model.name, c.model.embedding_dim, c.model.loss) == ("vete_rnn", 64, "triplet")
    assert c.model.loss_params == {"margin": 0.3, "negatives": "hardest"}
    assert c.model.encoder == {"cell": "gru"}
    assert (c.data.one_caption_per_image, c.data.batch_size, c.data.max_train_images) == (False, 32, None)
    assert (c.data.seed, c.train.seed) == (7, 7)
    assert (c.text.lowercase, c.text.boundary_tokens) == (False, False)
    assert (c.train.snapshots, c.train.mixed_precision, c.train.learning_rate) == (False, "auto", 0.002)
    assert (c.train.select_on, c.data.bucket_by_length) == ("last", False)


def test_unset_flags_leave_the_dataclass_defaults():
    assert _cfg([]) == ExperimentConfig()


def test_precedence_file_then_flags_then_set(tmp_path):
    f = tmp_path / "run.toml"
    f.write_text('[model]\nname = "vete_cnn"\nloss = "triplet"\nembedding_dim = 256\n'
                 '[model.loss_params]\nmargin = 0.1\n'
                 '[train]\nepochs = 3\nlearning_rate = 0.01\n[data]\nseed = 5\n')
    c = _cfg(["--config", str(f), "--epochs", "4", "--set", "train.epochs=6", "--set", "model.loss_params.k=2"])
    assert c.model.name == "vete_cnn" and c.model.embedding_dim == 256  # from the file
    assert c.train.learning_rate == 0.01 and c.data.seed == 5  # the file; no --seed given
    assert c.train.epochs == 6  # --set wins over the flag, which wins over the file
    assert c.model.loss_params == {"margin": 0.1, "k": 2}
    c = _cfg(["--config", str(f), "--loss-param", "k=3"])
    assert c.model.loss_params == {"margin": 0.1, "k": 3}  # KEY=VALUE flags merge over the file's table


@pytest.mark.parametrize("bad, match", [
    ("train.epoch=3", "not a field"),
    ("train.epochs=three", "does not fit"),
    ("train.select_on=best", "not one of"),
    ("model.name=vete_lstm", "not one of"),
    ("epochs", "KEY=VALUE"),
])
def test_bad_set_is_a_config_error(bad, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(["--set", bad])


def test_bad_config_file_names_the_file_and_entry(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[train]\nepochs = 'many'\n")
    with pytest.raises(ConfigError, match=r"bad\.toml.*train\.epochs"):
        read_config_file(f)
    f.write_text("[optimizer]\nlr = 1\n")
    with pytest.raises(ConfigError, match="unknown tables"):
        read_config_file(f)
    with pytest.raises(ConfigError, match="no such config file"):
        read_config_file(tmp_path / "missing.toml")


def test_cli_bad_set_exits_2(capsys):
    from grounded_text.train import main

    assert main(["--output-dir", "unused", "--set", "train.epochs=zero"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --set") and "train.epochs" in err


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_toml_round_trip_of_every_preset(tmp_path, name):
    config = preset_config(name)
    if "margin" in LOSS_PARAMS[config.model.loss]:  # a loss parameter set by the user (the loss must take it)
        config.model.loss_params = {**config.model.loss_params, "margin": 0.25}
    config.text.max_vocab_size = None  # a None over a non-None default goes through ``unset``
    f = tmp_path / "c.toml"
    f.write_text(config_toml(config))
    assert read_config_file(f) == config


def test_check_field_types():
    check_field("train.learning_rate", 1, "x")  # an int fits a float field
    with pytest.raises(ConfigError):
        check_field("train.epochs", True, "x")  # a bool is not an int
    with pytest.raises(ConfigError):
        check_field("model.loss_params", [1], "x")
    names = {f.name for f in dataclasses.fields(ExperimentConfig)}
    assert names == {"data", "text", "model", "train"}


@pytest.mark.slow
def test_config_toml_replays_the_run(tmp_path, data_dir):
    """A run trained from flags, then from its own ``config.toml``: same metrics to 1e-6."""
    from grounded_text.train import main

    first, second = tmp_path / "first", tmp_path / "replay"
    argv = ["--data-dir", str(data_dir), "--max-train-images", "64", "--max-dev-images", "32", "--epochs", "2",
            "--batch-size", "16", "--verbose", "0"]
    assert main(["--output-dir", str(first), *argv]) == 0
    assert main(["--data-dir", str(data_dir), "--output-dir", str(second), "--config", str(first / "config.toml"),
                 "--verbose", "0"]) == 0
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (first, second))
    assert a["config"] == b["config"]
    for key, values in a["history"].items():
        assert b["history"][key] == pytest.approx(values, abs=1e-6)
    for key, value in a["evaluation"]["headline"].items():
        assert b["evaluation"]["headline"][key] == pytest.approx(value, abs=1e-6)
