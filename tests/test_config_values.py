"""Config values that used to be silently wrong: string booleans in the builders'
parameters, negative counts, non-finite learning rates, a directory as ``--config``.
Every way of setting a value (flag, ``--config`` TOML, ``--set``) is checked alike, before
TensorFlow is imported."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grounded_text.config.files import config_toml, read_config_file
from grounded_text.config.params import ENCODER_PARAMS, LOSS_PARAMS, Param, ParamError, coerce_param
from grounded_text.config.schema import (
    SECTION_CLASSES,
    SECTIONS,
    ConfigError,
    ExperimentConfig,
)
from grounded_text.papers.presets import PRESETS
from grounded_text.papers.resolve import check_config, config_from_flags
from grounded_text.train import main, parse_args


def _cfg(argv):
    return config_from_flags(parse_args(["--output-dir", "x", *argv]))


def _toml(tmp_path, text, name="run.toml"):
    f = tmp_path / name
    f.write_text(text)
    return f


# ----------------------------------------------------------------------------- 1. builder parameters typed


@pytest.mark.parametrize("route", ["flag False", "flag false", "flag 0", "set False", "set false", "toml string",
                                   "toml bool", "set dict"])
def test_string_false_is_the_boolean_false_by_every_route(tmp_path, route):
    argv = {
        "flag False": ["--encoder-param", "trainable_embeddings=False"],
        "flag false": ["--encoder-param", "trainable_embeddings=false"],
        "flag 0": ["--encoder-param", "trainable_embeddings=0"],
        "set False": ["--set", "model.encoder.trainable_embeddings=False"],
        "set false": ["--set", "model.encoder.trainable_embeddings=false"],
        "toml string": ["--config", str(_toml(tmp_path, '[model.encoder]\ntrainable_embeddings = "False"\n'))],
        "toml bool": ["--config", str(_toml(tmp_path, "[model.encoder]\ntrainable_embeddings = false\n"))],
        "set dict": ["--set", 'model.encoder={trainable_embeddings = "false"}'],
    }[route]
    value = _cfg(argv).model.encoder["trainable_embeddings"]
    assert value is False  # not the truthy string "False"


def test_numbers_in_strings_are_typed(tmp_path):
    f = _toml(tmp_path, '[model]\nname = "vete_rnn"\n[model.encoder]\nword_dim = "64"\ndropout = "0.25"\n'
                        'bidirectional = "TRUE"\ncell = "gru"\n[model.loss_params]\nepsilon = 1\n')
    c = read_config_file(f)
    assert c.model.encoder == {"word_dim": 64, "dropout": 0.25, "bidirectional": True, "cell": "gru"}
    assert type(c.model.encoder["word_dim"]) is int and type(c.model.encoder["dropout"]) is float
    assert c.model.loss_params == {"epsilon": 1.0} and type(c.model.loss_params["epsilon"]) is float
    c = _cfg(["--model", "vete_cnn", "--encoder-param", "filter_widths=2,3", "--encoder-param", "filters=8"])
    assert c.model.encoder == {"filter_widths": [2, 3], "filters": 8}
    c = _cfg(["--model", "vete_rnn", "--encoder-param", "units=none", "--loss", "triplet",
              "--loss-param", "k=2", "--loss-param", "margin=1"])
    assert c.model.encoder == {"units": None}
    assert c.model.loss_params == {"k": 2, "margin": 1.0} and type(c.model.loss_params["margin"]) is float


@pytest.mark.parametrize("argv, match", [
    (["--encoder-param", "trainable_embeddings=maybe"],
     r"^--encoder-param: model\.encoder\.trainable_embeddings = 'maybe' is not a boolean"),
    (["--encoder-param", "cell=gru"],
     r"^--encoder-param: model\.encoder\.cell: model 'vete_bow' has no parameter 'cell'; it takes: "
     r"trainable_embeddings \(bool\)"),
    (["--model", "vete_rnn", "--encoder-param", "cell=transformer"], r"model\.encoder\.cell = 'transformer' is not "
                                                                     r"one of \['gru', 'lstm'\]"),
    (["--model", "vete_rnn", "--encoder-param", "num_layers=2.5"], r"num_layers = 2\.5 is not an int >= 1 and <= 3"),
    (["--model", "vete_rnn", "--encoder-param", "dropout=1.5"], r"dropout = 1\.5 is not a finite float"),
    (["--model", "vete_rnn", "--encoder-param", "dropout=nan"], r"dropout = nan is not a finite float"),
    (["--model", "vete_rnn", "--encoder-param", "word_dim=none"], r"model\.encoder\.word_dim cannot be none"),
    (["--model", "vete_cnn", "--encoder-param", "filter_widths=3,x"], r"filter_widths = '3,x' is not a non-empty"),
    (["--model", "two_branch_khard", "--loss-param", "negatives=worst"],
     r"^--loss-param: model\.loss_params\.negatives = 'worst' is not one of"),
    (["--model", "two_branch_khard", "--loss-param", "margin=0"], r"margin = 0 is not a finite float > 0"),
    (["--model", "seq", "--loss-param", "margin=1"], r"loss 'regression' has no parameter 'margin'; it takes: none"),
    (["--loss", "triplet", "--set", "model.loss_params.gamma=1"],
     r"^--set: model\.loss_params\.gamma: loss 'triplet' has no parameter 'gamma'; it takes: margin"),
])
def test_bad_builder_parameter_names_the_key_and_its_source(argv, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(argv)


def test_the_final_model_decides_the_parameters(tmp_path):
    """A file's encoder table is checked against the model the flags end with."""
    f = _toml(tmp_path, '[model.encoder]\ncell = "gru"\nbidirectional = "false"\n')
    c = _cfg(["--config", str(f), "--model", "vete_rnn"])
    assert c.model.encoder == {"cell": "gru", "bidirectional": False}
    with pytest.raises(ConfigError, match=r"run\.toml: model\.encoder\.cell: model 'vete_bow' has no parameter"):
        _cfg(["--config", str(f)])
    # The file alone is typed by name (some builder takes cell and bidirectional).
    assert read_config_file(f).model.encoder == {"cell": "gru", "bidirectional": False}
    with pytest.raises(ConfigError, match=r"colour\.toml: model\.encoder\.colour: no builder takes a parameter"):
        read_config_file(_toml(tmp_path, '[model.encoder]\ncolour = "red"\n', "colour.toml"))


def test_coerce_param_reference_table():
    b, i, fl = Param(bool), Param(int, minimum=1), Param(float, minimum=0.0, below=1.0)
    for raw, want in [(True, True), (False, False), ("False", False), ("TRUE", True), ("0", False), (1, True),
                      (0, False)]:
        assert coerce_param(raw, b, "x") is want
    for raw in ("no", 2, 0.0, [], None):
        with pytest.raises(ParamError):
            coerce_param(raw, b, "x")
    assert [coerce_param(v, i, "x") for v in (3, "3", 3.0)] == [3, 3, 3]
    for raw in (0, True, 2.5, "three", float("inf")):
        with pytest.raises(ParamError):
            coerce_param(raw, i, "x")
    assert coerce_param("0.5", fl, "x") == 0.5 and coerce_param(0, fl, "x") == 0.0
    for raw in (1.0, -0.1, float("nan"), "inf", False):
        with pytest.raises(ParamError):
            coerce_param(raw, fl, "x")


def test_a_parameter_name_has_one_type_in_every_table():
    """``type_params`` (a config file read before the model is known) types a key by its name."""
    for tables in (ENCODER_PARAMS, LOSS_PARAMS):
        types: dict = {}
        for table in tables.values():
            for key, spec in table.items():
                types.setdefault(key, set()).add(spec.type)
        assert {k: t for k, t in types.items() if len(t) > 1} == {}


def test_every_record_passes_its_own_check_unchanged():
    for name, p in PRESETS.items():
        config = ExperimentConfig.from_dict({**p.config, "model": {**p.config["model"], "name": name}})
        checked = check_config(config, name)
        for field in ("encoder", "loss_params"):
            got, want = getattr(checked.model, field), getattr(config.model, field)
            assert got == want and [type(v) for v in got.values()] == [type(v) for v in want.values()], (name, field)


# ----------------------------------------------------------------------------- 2, 3. counts and rates


def _ruled_fields(*rules):
    return [(s, f.name, f.metadata) for s in SECTIONS for f in dataclasses.fields(SECTION_CLASSES[s])
            if f.metadata.get("parse") in rules]


COUNTS = _ruled_fields("positive_int", "none_or_int")
RATES = _ruled_fields("positive_float")


def test_the_ruled_fields_are_the_counts_and_rates():
    names = {f"{s}.{n}" for s, n, _ in COUNTS + RATES}
    assert {"data.max_train_images", "data.max_dev_images", "data.batch_size", "train.epochs",
            "train.learning_rate", "train.lr_min", "text.max_vocab_size", "train.steps_per_execution"} <= names


@pytest.mark.parametrize("section, name, meta", COUNTS, ids=[f"{s}.{n}" for s, n, _ in COUNTS])
def test_negative_count_refused_by_every_route(tmp_path, capsys, section, name, meta):
    f = _toml(tmp_path, f"[{section}]\n{name} = -250\n")
    with pytest.raises(ConfigError, match=rf"run\.toml: {section}\.{name} must be an integer >= 1.*got -250"):
        read_config_file(f)
    with pytest.raises(ConfigError, match=rf"^--set: {section}\.{name} must be an integer >= 1.*got -250"):
        _cfg(["--set", f"{section}.{name}=-250"])
    if meta.get("flag"):
        with pytest.raises(SystemExit) as e:
            parse_args(["--output-dir", "x", meta["flag"], "-250"])
        assert e.value.code == 2
        assert f"argument {meta['flag']}: must be an integer >= 1" in capsys.readouterr().err
    # 0 reads alike everywhere: "no limit" for the none_or_int fields, refused for the others.
    zero = [["--config", str(_toml(tmp_path, f"[{section}]\n{name} = 0\n", "zero.toml"))],
            ["--set", f"{section}.{name}=0"]] + ([[meta["flag"], "0"]] if meta.get("flag") else [])
    for argv in zero:
        if meta["parse"] == "none_or_int":
            assert getattr(getattr(_cfg(argv), section), name) is None
        elif argv[0].startswith("--") and argv[0] not in ("--config", "--set"):
            with pytest.raises(SystemExit):
                parse_args(["--output-dir", "x", *argv])
        else:
            with pytest.raises(ConfigError, match="must be an integer >= 1"):
                _cfg(argv)


@pytest.mark.parametrize("section, name, meta", RATES, ids=[f"{s}.{n}" for s, n, _ in RATES])
@pytest.mark.parametrize("bad", ["inf", "-inf", "nan", "0", "-0.001"])
def test_non_finite_or_non_positive_rate_refused_by_every_route(tmp_path, capsys, section, name, meta, bad):
    toml_value = {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(bad, bad)
    f = _toml(tmp_path, f"[{section}]\n{name} = {toml_value}\n")
    with pytest.raises(ConfigError, match=rf"run\.toml: {section}\.{name} must be a finite number > 0"):
        read_config_file(f)
    with pytest.raises(ConfigError, match=rf"^--set: {section}\.{name} must be a finite number > 0"):
        _cfg(["--set", f"{section}.{name}={bad}"])
    with pytest.raises(SystemExit):
        parse_args(["--output-dir", "x", f"{meta['flag']}={bad}"])
    assert f"argument {meta['flag']}: must be a finite number > 0" in capsys.readouterr().err


def test_good_rates_and_counts_still_read(tmp_path):
    f = _toml(tmp_path, "[train]\nlearning_rate = 1\nlr_min = 1e-6\nepochs = 2\n[data]\nmax_train_images = 64\n")
    c = read_config_file(f)
    assert (c.train.learning_rate, c.train.lr_min, c.train.epochs, c.data.max_train_images) == (1.0, 1e-6, 2, 64)
    assert type(c.train.learning_rate) is float


# ----------------------------------------------------------------------------- 4. the config file itself


@pytest.mark.parametrize("kind", ["directory", "missing", "not toml", "not utf-8", "unreadable"])
def test_bad_config_path_is_one_error_line_exit_2(tmp_path, capsys, kind):
    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = {"directory": tmp_path, "missing": tmp_path / "missing.toml"}.get(kind, tmp_path / "bad.toml")
    if kind == "not toml":
        path.write_text("[train\nepochs = 3\n")
    elif kind == "not utf-8":
        path.write_bytes(b"[train]\nselect_on = '\xff'\n")
    elif kind == "unreadable":
        path.write_text("[train]\n")
        path.chmod(0)
    assert main(["--output-dir", str(tmp_path / "out"), "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def _run_cli(args, tmp_path):
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "grounded_text.train", "--output-dir",
                           str(tmp_path / "out"), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("case", ["string bool", "negative slice", "inf rate", "directory"])
def test_cli_refuses_before_tensorflow(tmp_path, case):
    args = {
        "string bool": ["--encoder-param", "trainable_embeddings=perhaps"],
        "negative slice": ["--config", str(_toml(tmp_path, "[data]\nmax_train_images = -250\n"))],
        "inf rate": ["--config", str(_toml(tmp_path, "[train]\nlearning_rate = inf\n"))],
        "directory": ["--config", str(tmp_path)],
    }[case]
    r = _run_cli(args, tmp_path)
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("import time:")]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    imported = [ln for ln in r.stderr.splitlines() if ln.startswith("import time:")]
    assert imported, "no -X importtime log"
    assert not [ln for ln in imported if "tensorflow" in ln or "keras" in ln]


# ----------------------------------------------------------------------------- 5. round trip


def test_config_toml_round_trips_typed_values(tmp_path):
    c = _cfg(["--model", "vete_cnn", "--encoder-param", "trainable_embeddings=False",
              "--encoder-param", "filter_widths=3,4", "--encoder-param", "dropout=0", "--set",
              "train.learning_rate=1", "--loss-param", "seed=none"])
    text = config_toml(c)
    assert "trainable_embeddings = false" in text and "learning_rate = 1.0" in text
    assert '"model.loss_params.seed"' in text
    f = _toml(tmp_path, text, "config.toml")
    back = read_config_file(f)
    assert back == c and back.model.encoder["trainable_embeddings"] is False
    assert type(back.model.encoder["dropout"]) is float
    assert _cfg(["--config", str(f)]) == c


def test_an_old_config_toml_with_a_string_false_replays_as_false(tmp_path):
    f = _toml(tmp_path, 'unset = []\n[model]\nname = "vete_bow"\n[model.encoder]\ntrainable_embeddings = "False"\n')
    assert read_config_file(f).model.encoder == {"trainable_embeddings": False}


# ----------------------------------------------------------------------------- the tables against the builders


def test_encoder_table_matches_the_builders():
    # The builders read their keys from ENCODER_PARAMS itself; what is checked here is that every
    # registered builder has a table and each entry matches the argument or constant it names
    # (tests/model_checks.py, which tests/test_new_model.py runs on a new model too).
    from model_checks import check_encoder_table, check_registration

    from grounded_text.models.registry import MODELS

    assert set(ENCODER_PARAMS) == set(MODELS)
    for builder in ENCODER_PARAMS:
        check_encoder_table(builder)
        check_registration(builder)


def test_loss_table_matches_the_loss_signatures():
    import importlib
    import inspect

    from model_checks import check_param_source

    from grounded_text.config.schema import BASELINE_OBJECTIVES, LOSSES
    from grounded_text.losses.correlation import PEARSON_EPSILON

    assert set(LOSS_PARAMS) == set(LOSSES) | set(BASELINE_OBJECTIVES)
    for name, (module, cls_name) in LOSSES.items():
        cls = getattr(importlib.import_module(module), cls_name)
        accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "kwargs"}
        assert set(LOSS_PARAMS[name]) == accepted, name
        for key, spec in LOSS_PARAMS[name].items():
            if spec.choices is None:
                assert spec.source == f"{module}:{cls_name}.{key}", (name, key)
            check_param_source(spec, f"{name}.{key}")
    assert LOSS_PARAMS["pearson"]["epsilon"].default == PEARSON_EPSILON
    for name in BASELINE_OBJECTIVES:
        for key, spec in LOSS_PARAMS[name].items():
            check_param_source(spec, f"{name}.{key}")


def test_a_string_false_reaches_the_builder_as_false():
    """The parsed config builds VETE-BOW with frozen word embeddings."""
    from grounded_text.layers.text_preprocessor import BOS, EOS
    from grounded_text.models.registry import build_model, resolve_config

    vocabulary = [BOS, EOS, "a", "dog", "runs"]
    c = resolve_config(_cfg(["--encoder-param", "trainable_embeddings=False"]))
    gm = build_model(c.model, c.text, vocabulary, feature_dim=8)
    trainable = [w.path for w in gm.text_tower.trainable_weights]
    assert not any("embedding" in p for p in trainable), trainable
    c = resolve_config(_cfg([]))
    gm = build_model(c.model, c.text, vocabulary, feature_dim=8)
    assert any("embedding" in w.path for w in gm.text_tower.trainable_weights)


def test_a_config_is_checked_once_per_command_and_record_values_by_the_same_rules(monkeypatch):
    from grounded_text.papers import resolve
    from grounded_text.papers.record import deep_merge

    calls = []
    real = resolve.check_config_dict
    monkeypatch.setattr(resolve, "check_config_dict", lambda *a, **k: calls.append(1) or real(*a, **k))
    cfg = config_from_flags(parse_args(["--output-dir", "x", "--model", "vete_rnn", "--epochs", "2"]))
    assert resolve.resolve_config(cfg).train.epochs == 2
    assert len(calls) == 1, "checked by config_from_flags, not again by resolve_config"
    cfg.train.epochs = 0  # changed after its check: checked again
    with pytest.raises(ConfigError, match=r"train\.epochs must be an integer >= 1, got 0"):
        resolve.resolve_config(cfg)
    # A record's value goes through the fields' rules too (check_field), not a second copy of them.
    bad = dataclasses.replace(PRESETS["vete_bow"], config=deep_merge(PRESETS["vete_bow"].config,
                                                                     {"train": {"learning_rate": -1.0}}))
    monkeypatch.setitem(PRESETS, "vete_bow", bad)
    with pytest.raises(ConfigError, match=r"preset record 'vete_bow': train\.learning_rate must be a finite "
                                          r"number > 0, got -1\.0"):
        resolve.resolve_config(ExperimentConfig())
