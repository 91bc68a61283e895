"""The preset records (grounded_text.papers.presets), config resolution, the builders reading every
record value, mixed precision, and training end to end."""

import dataclasses
import importlib
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from model_checks import (
    CAPS,
    PROBE,
    N,
    buildable_records,
    check_mixed_float16_train_step,
    check_record,
    check_record_reaches_the_model,
    check_registration,
    layers_of,
    needs_user_values,
)

from grounded_text.config.params import ENCODER_PARAMS, TINY_ENCODERS
from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TextConfig, TrainConfig
from grounded_text.layers import build_vocabulary
from grounded_text.models import build_model
from grounded_text.models.registry import MODELS, preset_config, resolve_config
from grounded_text.papers import resolve as resolve_mod
from grounded_text.papers.presets import PRESETS as RECORDS
from grounded_text.papers.presets import get_preset, tiny_encoders
from grounded_text.train import config_from_args, parse_args
from grounded_text.training.trainer import train

# The records' module (``grounded_text.papers.presets`` as an attribute is the API's presets()).
presets_mod = importlib.import_module("grounded_text.papers.presets")

# Records that need the user's values (grounded_pretrained: a model folder, covered with a tiny
# keras-hub preset in tests/test_backbone_encoder.py) are not built here; variants build with
# their paper preset's builder. The papers' baselines (presets_mod.BASELINES) have their own
# tests: tests/test_paper_baselines.py. The checks themselves: tests/model_checks.py.
PRESETS = sorted(n for n, p in RECORDS.items() if not needs_user_values(n) and p.variant_of is None
                 and n not in presets_mod.BASELINES)
BUILDABLE = buildable_records()
# Each builder's tiny sizes (the smoke runs' too), by preset name, for N = TINY_EMBEDDING_DIM.
SMALL = tiny_encoders()


def _one(gm, cls_name):
    found = [lay for lay in layers_of(gm) if type(lay).__name__ == cls_name]
    assert len(found) >= 1, cls_name
    return found[0]


# ----------------------------------------------------------------------------- the records


def test_every_record_names_a_builder_and_every_builder_has_its_tables_and_a_record():
    # The registry is the list of builders; each has its parameter table, its tiny sizes and a record.
    assert set(MODELS) == set(ENCODER_PARAMS) == set(TINY_ENCODERS)
    assert {p.builder for p in RECORDS.values()} == set(MODELS)
    for builder in MODELS:
        check_registration(builder)
    assert {RECORDS[n].builder for n in ("gs_img", "gs_cap", "gs_both")} == {"ground_sent"}
    for name, p in RECORDS.items():
        assert p.name == name and p.builder in MODELS and p.paper
        assert p.variant_of is None or p.variant_of in RECORDS
    assert RECORDS["char_gru_attention_512"].builder == "char_gru_attention"
    assert RECORDS["char_gru_attention_512"].variant_of == "char_gru_attention"


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_record_round_trips_and_every_value_is_explained(name):
    check_record(name)


def test_records_hold_the_papers_values():
    c = preset_config("char_gru_attention")
    assert (c.text.lowercase, c.data.batch_size, c.data.bucket_by_length, c.model.embedding_dim) == (
        False, 32, True, 2048)
    assert c.model.encoder["units"] == 1024 and c.model.encoder["char_dim"] == 20
    assert c.model.encoder["pooling"] == "attention" and c.model.encoder["attention_units"] == 128
    assert c.model.loss_params == {"margin": 0.2, "direction_weight": 1.0, "negatives": "all"}
    t = c.train
    assert (t.schedule, t.learning_rate, t.lr_min, t.cycle_epochs, t.epochs, t.snapshots, t.ensemble_size,
            t.select_on) == ("cyclic_cosine", 1e-3, 1e-6, 4, 32, True, 2, "dev_retrieval")
    c = preset_config("char_gru_attention_512")
    assert (c.model.encoder["units"], c.model.embedding_dim, c.data.batch_size) == (512, 1024, 32)
    c = preset_config("two_branch_khard")
    assert (c.data.batch_size, c.train.learning_rate, c.model.embedding_dim) == (64, 2e-4, 512)
    assert c.model.loss_params == {"margin": 0.1, "direction_weight": 0.1, "negatives": "hardest", "k": 1}
    assert c.model.encoder["dropout"] == 0.5 and c.model.encoder["hidden_units"] == [2048]
    for name in ("vete_bow", "vete_rnn", "vete_cnn"):
        c = preset_config(name)
        assert c.data.one_caption_per_image and c.model.loss == "pearson" and c.train.select_on == "avg2016"
        assert c.train.epochs == 10  # Kurach et al. 2017 §4.2: Adam, 10 epochs on MS COCO, for all models
    assert preset_config("vete_rnn").model.encoder["cell"] == "lstm"
    # Bordes et al. 2019 §4.4: α_C = α_P = 0.01, γ = 0.5, Adam with l_r = 8e-4.
    c = preset_config("bordes_cg_pg")
    assert c.model.loss_params == {"alpha_cluster": 0.01, "alpha_perceptual": 0.01, "margin": 0.5}
    assert c.train.learning_rate == 8e-4
    for name, path in (("vete_bow", "train.epochs"), ("bordes_cg_pg", "train.learning_rate"),
                       ("bordes_cg_pg", "model.loss_params.alpha_cluster")):
        assert path in get_preset(name).sources and path not in get_preset(name).unsaid


def test_two_branch_text_input_is_the_mean_over_the_words_only():
    """Kolluru §3.1: the GloVe vectors of all words, summed and divided by the number of
    words; no <S> / </S> in the mean, whatever TextConfig.boundary_tokens says."""
    vocab = build_vocabulary(CAPS)
    assert {"<S>", "</S>"} <= set(vocab)
    cfg = preset_config("two_branch_khard", {"model": {"embedding_dim": 8, "word_vectors": "none",
                                                       "encoder": {"word_dim": 5, "hidden_units": [8]}}})
    assert cfg.text.boundary_tokens
    gm = build_model(cfg.model, cfg.text, vocab, feature_dim=6, seed=0)
    pre, bow = _one(gm, "TextPreprocessor"), _one(gm, "BagOfWordsEncoder")
    assert not pre.boundary_tokens
    table = bow.embedding.embeddings.numpy().astype(np.float64)
    sentences = ["a dog runs on the beach", "A red car", "zebra dog", ""]
    got = bow(pre(tf.constant(sentences))).numpy()
    for sentence, row in zip(sentences, got):
        words = sentence.lower().split()
        # Unknown words take OOV bucket rows (1 bucket: row 1); known word i is row 2 + i.
        ids = [1 + pre.num_oov_buckets + vocab.index(w) if w in vocab else 1 for w in words]
        expected = table[ids].mean(axis=0) if ids else np.zeros(table.shape[1])
        np.testing.assert_allclose(row, expected, atol=1e-6)
    assert pre.num_oov_buckets == 1
    out = gm.text_tower(tf.constant(sentences)).numpy()
    assert np.isfinite(out).all()


def test_preset_config_merges_overrides_and_names_unknown_keys():
    c = preset_config("char_gru_attention", {"model": {"encoder": {"units": 256}, "embedding_dim": 512},
                                             "train": {"epochs": 4}})
    assert c.model.encoder["units"] == 256 and c.model.encoder["char_dim"] == 20 and c.train.epochs == 4
    assert c.train.cycle_epochs == 4 and c.data.batch_size == 32
    for bad, key in [({"data": {"batchsize": 3}}, "data.batchsize"), ({"modle": {}}, "modle"),
                     ({"model": {"encoder": {"layers": 2}}}, "model.encoder.layers")]:
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            preset_config("vete_rnn", bad)
    with pytest.raises(ValueError, match="Unknown model 'nope'.*char_gru_attention"):
        get_preset("nope")


# ----------------------------------------------------------------------------- resolution


def test_resolve_config_fills_preset_choices_and_keeps_explicit_ones():
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(name="char_gru_attention")))
    assert (cfg.model.loss, cfg.data.sampler, cfg.train.schedule, cfg.train.snapshots) == (
        "triplet", "random", "cyclic_cosine", True)
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(name="bordes_cg_pg")))
    assert (cfg.model.loss, cfg.data.sampler) == ("grounding", "grouped")
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(name="vete_bow", loss="skt", loss_params={"alpha": 2.0}),
                                          train=TrainConfig(schedule="cyclic_cosine", snapshots=False)))
    assert (cfg.model.loss, cfg.train.schedule, cfg.train.snapshots) == ("skt", "cyclic_cosine", False)
    assert cfg.model.loss_params == {"alpha": 2.0}  # another loss: not the record's parameters
    cfg = resolve_config(ExperimentConfig())
    assert cfg.model.loss == "pearson" and cfg.data.batch_size == 128 and cfg.model.embedding_dim == 128
    # The user's encoder/loss values are merged over the record's.
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(name="two_branch_khard", loss_params={"k": 3},
                                                            encoder={"dropout": 0.2}),
                                          data=DataConfig(batch_size=16)))
    assert cfg.model.loss_params == {"margin": 0.1, "direction_weight": 0.1, "negatives": "hardest", "k": 3}
    assert cfg.model.encoder["dropout"] == 0.2 and cfg.model.encoder["hidden_units"] == [2048]
    assert cfg.data.batch_size == 16 and cfg.train.learning_rate == 2e-4
    # Overriding the schedule of a snapshot preset turns its snapshots off (no cycles).
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(name="char_gru_attention"),
                                          train=TrainConfig(schedule="constant")))
    assert cfg.train.snapshots is False


@pytest.mark.parametrize(
    "cfg, match",
    [
        (ExperimentConfig(model=ModelConfig(name="nope")), "model.name = 'nope' is not one of"),
        (ExperimentConfig(model=ModelConfig(loss="nope")), "model.loss = 'nope' is not one of"),
        (ExperimentConfig(model=ModelConfig(name="bordes_cg_pg"), data=DataConfig(sampler="random")), "grouped"),
        (ExperimentConfig(model=ModelConfig(name="bordes_cg_pg"), data=DataConfig(one_caption_per_image=True)),
         "captions"),
        (ExperimentConfig(model=ModelConfig(name="bordes_cg_pg"), data=DataConfig(batch_size=63)), "divide"),
        (ExperimentConfig(train=TrainConfig(snapshots=True)), "cyclic_cosine"),
        (ExperimentConfig(data=DataConfig(sampler="weird")), "sampler"),
        (ExperimentConfig(train=TrainConfig(select_on="best")), "select_on"),
        (ExperimentConfig(model=ModelConfig(name="char_gru_attention"), train=TrainConfig(ensemble_size=0)),
         "ensemble_size"),
        (ExperimentConfig(model=ModelConfig(name="vete_rnn", encoder={"layers": 2})),
         "'vete_rnn' has no parameter 'layers'"),
    ],
)
def test_resolve_config_rejects_bad_combinations(cfg, match):
    with pytest.raises(ValueError, match=match):
        resolve_config(cfg)


def test_bad_missing_loss_or_encoder_parameter_is_named():
    vocab = build_vocabulary(CAPS)
    with pytest.raises(ValueError, match="no parameter"):
        build_model(ModelConfig(loss="skt", loss_params={"beta": 1}), TextConfig(), vocab, 5)
    with pytest.raises(ValueError, match="no encoder parameter"):
        build_model(ModelConfig(name="vete_rnn", encoder={"layers": 2}), TextConfig(), vocab, 5)
    with pytest.raises(ValueError, match="train_captions"):
        build_model(ModelConfig(name="char_gru_attention"), TextConfig(), vocab, 5)
    # A builder called without the record's values names what is missing (no hidden defaults).
    model, text = resolve_mod.fill_model_text(ModelConfig(name="vete_rnn"), TextConfig())
    enc = {k: v for k, v in model.encoder.items() if k != "cell"}
    with pytest.raises(ValueError, match=r"needs encoder parameter\(s\) \['cell'\]"):
        MODELS["vete_rnn"](dataclasses.replace(model, encoder=enc), text, vocab, 5)
    model, text = resolve_mod.fill_model_text(ModelConfig(name="two_branch_khard"), TextConfig())
    lp = {k: v for k, v in model.loss_params.items() if k != "k"}
    with pytest.raises(ValueError, match=r"needs loss parameter\(s\) \['k'\]"):
        MODELS["two_branch_khard"](dataclasses.replace(model, loss_params=lp, word_vectors="none"), text, vocab, 5)
    with pytest.raises(ValueError, match="units"):
        build_model(ModelConfig(name="char_gru_attention", embedding_dim=100), TextConfig(), vocab, 5,
                    train_captions=CAPS)


# ----------------------------------------------------------------------------- values reach the model


@pytest.mark.parametrize("name", BUILDABLE)
def test_every_model_value_of_a_record_reaches_the_built_model(name):
    check_record_reaches_the_model(name)


def test_training_values_reach_the_optimizer_and_the_batches(data_dir):
    """Batch size, learning rate and schedule reach ``prepare_training`` (test-only slices)."""
    from grounded_text.training.preparation import prepare_training
    from grounded_text.training.schedules import CyclicCosineSchedule

    small = {"data": {"max_train_images": 80, "max_dev_images": 4}}
    s = prepare_training(preset_config("two_branch_khard", small), data_dir)
    assert next(iter(s.train_ds))["caption"].shape[0] == 64
    assert np.isclose(float(s.model.train_model.optimizer.learning_rate), 2e-4)
    # The char record selects on dev retrieval; selection is not what is checked here.
    over = {**small, "train": {"select_on": "val_loss"},
            "model": {"embedding_dim": N, "encoder": SMALL["char_gru_attention"]}}
    s = prepare_training(preset_config("char_gru_attention", over), data_dir)
    assert next(iter(s.train_ds))["caption"].shape[0] == 32
    lr = s.model.train_model.optimizer._learning_rate
    assert isinstance(lr, CyclicCosineSchedule)
    assert (lr.lr_min, lr.lr_max, lr.steps_per_cycle) == (1e-6, 1e-3, 4 * s.steps_per_epoch)


def test_docs_tables_are_the_generated_ones():
    from pathlib import Path

    from grounded_text.models.tables import splice

    docs = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text(encoding="utf-8")
    assert splice(docs) == docs, "regenerate: python -m grounded_text.models.tables --write docs/models.md"


# ----------------------------------------------------------------------------- the CLI


def test_cli_flags_reach_the_config():
    a = parse_args(["--output-dir", "x", "--model", "two_branch_khard", "--loss", "triplet",
                    "--loss-param", "k=1", "--loss-param", "negatives=hardest", "--encoder-param",
                    "hidden_units=[64]", "--schedule", "cyclic_cosine", "--cycle-epochs", "2",
                    "--snapshots", "true", "--word-vectors", "none"])
    cfg = config_from_args(a)
    assert cfg.model.loss_params == {"k": 1, "negatives": "hardest"}
    assert cfg.model.encoder == {"hidden_units": [64]} and cfg.model.word_vectors == "none"
    assert (cfg.train.schedule, cfg.train.cycle_epochs, cfg.train.snapshots) == ("cyclic_cosine", 2, True)
    default = config_from_args(parse_args(["--output-dir", "x"]))
    assert default == ExperimentConfig(), "unset flags are the preset's choice, as in the Python API"
    a = config_from_args(parse_args(["--output-dir", "x", "--model", "char_gru_attention_512", "--lowercase",
                                     "--ensemble-size", "3", "--no-bucket-by-length", "--select-on", "last",
                                     "--schedule", "warm_restarts"]))
    assert (a.text.lowercase, a.train.ensemble_size, a.data.bucket_by_length, a.train.select_on,
            a.train.schedule) == (True, 3, False, "last", "warm_restarts")
    a = config_from_args(parse_args(["--output-dir", "x", "--keep-case", "--bucket-by-length",
                                     "--select-on", "dev_retrieval"]))
    assert (a.text.lowercase, a.data.bucket_by_length, a.train.select_on) == (False, True, "dev_retrieval")


def test_cli_model_picks_the_record_and_explicit_flags_win():
    cfg = resolve_config(config_from_args(parse_args(["--model", "two_branch_khard", "--output-dir", "x"])))
    assert (cfg.data.batch_size, cfg.train.learning_rate, cfg.model.embedding_dim) == (64, 2e-4, 512)
    cfg = resolve_config(config_from_args(parse_args(["--model", "two_branch_khard", "--output-dir", "x",
                                                      "--batch-size", "16", "--learning-rate", "1e-3"])))
    assert (cfg.data.batch_size, cfg.train.learning_rate) == (16, 1e-3)
    cfg = resolve_config(config_from_args(parse_args(["--model", "char_gru_attention_512", "--output-dir", "x"])))
    assert (cfg.model.encoder["units"], cfg.text.lowercase, cfg.train.ensemble_size) == (512, False, 2)


def test_readme_job_keeps_todays_configuration():
    """``python -m grounded_text.train --data-dir … --output-dir runs/vete_bow --all-captions
    --epochs 20``: the README's figures were measured with these values (20 epochs is the
    job's own protocol; the record trains VETE §4.2's 10)."""
    cfg = resolve_config(config_from_args(parse_args(["--output-dir", "runs/vete_bow", "--all-captions",
                                                      "--epochs", "20"])))
    d, t, m, tr = cfg.data, cfg.text, cfg.model, cfg.train
    assert (m.name, m.embedding_dim, m.pooling, m.loss, m.loss_params, m.word_vectors) == (
        "vete_bow", 128, "mean", "pearson", {}, None)
    assert (d.one_caption_per_image, d.batch_size, d.sampler, d.bucket_by_length) == (False, 128, "random", False)
    assert (t.lowercase, t.max_vocab_size, t.min_count, t.boundary_tokens) == (True, 20000, 1, True)
    assert (tr.epochs, tr.learning_rate, tr.select_on, tr.schedule, tr.snapshots) == (
        20, 1e-3, "avg2016", "constant", False)
    # Without the flags the record's VETE choices apply: one caption per image (§4.1), 10 epochs (§4.2).
    plain = resolve_config(config_from_args(parse_args(["--output-dir", "x"])))
    assert plain.data.one_caption_per_image and plain.train.epochs == 10


@pytest.mark.parametrize("name", BUILDABLE)
def test_mixed_float16_train_step_keeps_float32_outputs(name):
    check_mixed_float16_train_step(name)


@pytest.mark.slow
def test_every_preset_trains_on_real_slice_and_exports_a_loadable_hub_module(data_dir, tmp_path):
    exports, in_process = {}, {}
    for name in PRESETS:
        snapshots = bool(preset_config(name).train.snapshots)  # then two 1-epoch cycles, two snapshots
        cfg = ExperimentConfig(
            data=DataConfig(max_train_images=64, max_dev_images=16, batch_size=32),
            model=ModelConfig(name=name, embedding_dim=N, encoder=SMALL.get(name, {})),
            train=TrainConfig(epochs=2 if snapshots else 1, learning_rate=3e-3,
                              select_on="val_loss", cycle_epochs=1),
        )
        metrics = train(cfg, data_dir, tmp_path / name, evaluate=False, verbose=0)
        assert metrics["data"]["train_images"] == 64 and metrics["data"]["dev_pairs"] == 80
        assert metrics["config"]["model"]["loss"] == RECORDS[name].config["model"]["loss"]
        assert all(np.isfinite(metrics["history"]["loss"]))
        # A healthy run stays far from the collapse guard's limit (0.1 % of the probe's start).
        assert metrics["collapse_guard"]["lowest_relative_spread"] > 0.1, (name, metrics["collapse_guard"])
        assert metrics["parameters"]["text_tower"] > 0
        if snapshots:  # two cycles -> two snapshots, exported as their ensemble
            assert metrics["exported"]["kind"] == "snapshot_ensemble"
            assert len(metrics["exported"]["snapshots"]) == 2
        else:
            assert metrics["exported"]["kind"] == "best_epoch"
        exports[name] = str(tmp_path / name / "export")
        in_process[name] = tf.saved_model.load(exports[name])(tf.constant(PROBE)).numpy()

    script = textwrap.dedent(
        f"""
        import json, numpy as np, tensorflow as tf, tensorflow_text, tensorflow_hub as hub
        out = {{}}
        for name, path in {exports!r}.items():
            m = hub.load(path)
            e = m(tf.constant({PROBE!r}))
            out[name] = {{"dtype": e.dtype.name, "values": e.numpy().tolist()}}
        print(json.dumps(out))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in PRESETS:
        values = np.array(got[name]["values"], dtype=np.float32)
        # The export's width is the text tower's (a grounded space may differ from N).
        assert got[name]["dtype"] == "float32" and values.shape == in_process[name].shape, name
        np.testing.assert_allclose(values, in_process[name], atol=1e-5, err_msg=name)
        norms = np.linalg.norm(values, axis=1)
        assert np.isfinite(values).all(), name
        # Unit norm, except the documented all-zero vector of the empty string (character level).
        assert np.all((np.abs(norms - 1) < 1e-4) | (norms == 0)), (name, norms)


def test_ablation_table_reads_metrics(tmp_path):
    from grounded_text.experiments.studies import table
    from grounded_text.papers.studies import ZOO

    m = {"config": {"model": {"name": "vete_bow", "loss": "pearson"}, "train": {"epochs": 5},
                    "data": {"features": "mobilenet_v1_075"}},
         "data": {"feature_dim": 768}, "selection": {"best_epoch": 4}, "timing_seconds": {"fit": 12.4},
         "parameters": {"text_tower": 1234, "train_model": 5678},
         "evaluation": {"headline": {"STS12/MSRvid pearson": 0.71234, "STS-B test pearson": 0.5,
                                     "SICK test pearson": None, "STS16 mean pearson (avg2016)": 0.4}}}
    (tmp_path / "vete_bow__mobilenet_v1_075").mkdir()
    (tmp_path / "vete_bow__mobilenet_v1_075" / "metrics.json").write_text(json.dumps(m))
    rows = [("vete_bow@mobilenet_v1_075", {}), ("vete_rnn", {})]
    md = table(ZOO, tmp_path, rows).splitlines()
    assert md[2] == ("| vete_bow@mobilenet_v1_075 | vete_bow | pearson | mobilenet_v1_075 (768) | 5 | epoch 4 "
                     "| 0.712 | 0.400 | 0.500 | – | 12 | 1,234 |")
    assert "(not run)" in md[3] and md[3].count("|") == md[2].count("|")


@pytest.mark.parametrize("study", ["losses", "snapshot_ensemble", "zoo", "caption_gap", "caption_gap_record",
                                   "caption_gap_on_record", "caption_gap_on_clipped"])
def test_every_ablation_row_is_a_valid_trainer_config(study):
    """Each row resolves through the trainer's checks, and sets what its name says."""
    from grounded_text import ablation

    s = ablation.STUDIES[study]
    assert len({r for r, _ in s.rows}) == len(s.rows)
    for run, fields in s.rows:
        config = resolve_config(s.config(run))
        d = config.to_dict()
        for path, value in fields.items():
            parts = path.split(".")
            got = d[parts[0]][parts[1]] if len(parts) == 2 else d[parts[0]][parts[1]][parts[2]]
            assert got == value, (run, path)


def test_ablation_cli_rejects_an_unknown_run(tmp_path, capsys):
    from grounded_text import ablation

    assert ablation.main(["losses", "--output-dir", str(tmp_path), "--only", "nope", "--table-only"]) == 2
    assert capsys.readouterr().err.startswith("error: --only")
