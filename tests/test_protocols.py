"""The papers' evaluation protocols as options: ρ_vis Pearson headline (Bordes §4.3), the
same-image N (VETE §4.3), select_on="sick_val" (Bordes §4.4) and the supervised STS regressor."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from grounded_text.evaluation.same_image import CaptionedImages

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


def _hash_encoder(dim: int = 16):
    """A deterministic bag-of-words encoder: word → seeded Gaussian vector, summed."""
    table: dict = {}

    def encode(sentences):
        out = np.zeros((len(sentences), dim))
        for i, s in enumerate(sentences):
            for w in str(s).lower().split():
                if w not in table:
                    table[w] = np.random.default_rng(sum(map(ord, w)) * 7919 + len(w)).normal(size=dim)
                out[i] += table[w]
        return out.astype(np.float32)

    return encode


def _write_sick(root: Path, rows) -> Path:
    sick = root / "sts" / "SICK"
    sick.mkdir(parents=True, exist_ok=True)
    text = SICK_HEADER + "".join(f"{k}\t{a}\t{b}\t{y}\tNEUTRAL\n" for k, (a, b, y) in enumerate(rows, 1))
    (sick / "SICK_trial.txt").write_text(text)
    return root / "sts"


# ----------------------------------------------------------------------------- ρ_vis headline


def test_rho_vis_headline_is_the_pearson_correlation_with_spearman_beside_it():
    from grounded_text.evaluation.structure import rho_vis

    rng = np.random.default_rng(4)
    v = rng.normal(size=(25, 6))
    s = np.concatenate([v, rng.normal(size=(25, 3))], axis=1) + 0.8 * rng.normal(size=(25, 9))
    r = rho_vis(s, v)
    i, j = np.triu_indices(25, k=1)
    cs = [float(s[a] @ s[b] / np.linalg.norm(s[a]) / np.linalg.norm(s[b])) for a, b in zip(i, j)]
    cv = [float(v[a] @ v[b] / np.linalg.norm(v[a]) / np.linalg.norm(v[b])) for a, b in zip(i, j)]
    assert r["statistic"] == "pearson"
    assert r["value"] == r["pearson"] == pytest.approx(stats.pearsonr(cs, cv)[0], abs=1e-10)
    assert r["spearman"] == pytest.approx(stats.spearmanr(cs, cv)[0], abs=1e-10)
    assert r["value"] != pytest.approx(r["spearman"], abs=1e-6)  # the two are told apart


def test_structure_markdown_puts_pearson_first_and_the_figures_registry_reads_it():
    from grounded_text.evaluation.report import format_report_markdown
    from grounded_text.evaluation.structure import structural_measures
    from grounded_text.reporting.figures import structure_rows

    rng = np.random.default_rng(0)
    images = np.repeat(np.arange(12), 3)
    feats = rng.normal(size=(12, 5))[images]
    text = feats @ rng.normal(size=(5, 7)) + 0.5 * rng.normal(size=(36, 7))
    st = structural_measures(text, images.tolist(), feats, ks=(3,), ci_resamples=0)
    report = {"data_dir": "d", "encoders": {"m": {"structure": {**st, "split": "s"}}}}
    md = format_report_markdown(report)
    pearson_line = next(line for line in md.splitlines() if line.startswith("| ρ_vis (Pearson"))
    spearman_line = next(line for line in md.splitlines() if line.startswith("| ρ_vis (Spearman)"))
    assert md.index(pearson_line) < md.index(spearman_line)
    assert f"{st['rho_vis']['pearson']:.4f}"[:5] in pearson_line
    rows = structure_rows({"structure": st})
    assert rows["ρ_vis"] == st["rho_vis"]["pearson"] and rows["ρ_vis (Spearman)"] == st["rho_vis"]["spearman"]


# ----------------------------------------------------------------------------- same-image N


def _captioned(n_images=60, per_image=5):
    ids = [f"img{i}" for i in range(n_images) for _ in range(per_image)]
    caps = [f"w{i} w{(i * 7) % n_images} x{k}" for i in range(n_images) for k in range(per_image)]
    return CaptionedImages(caps, ids, "toy")


@pytest.mark.parametrize("n", [100, 250])
def test_same_image_n_is_an_option_of_the_suite(n):
    from grounded_text.evaluation.encoders import EncoderSpec
    from grounded_text.evaluation.suite import SAME_IMAGE_N, VETE_SAME_IMAGE_N, evaluate_one

    assert (SAME_IMAGE_N, VETE_SAME_IMAGE_N) == (5000, 1000)
    spec = EncoderSpec("toy", "baseline", _hash_encoder(), None, "test")
    out = evaluate_one(spec, sts_dir=None, test_pairs=None, same_image_sets=[_captioned()], sections=["same_image"],
                       same_image_n=n, seed=1)
    node = out["same_image"]["toy"]
    assert node["n_per_label"] == n and node["n"] == 2 * n
    # More than the set holds (60 images x 10 same-image pairs = 600): capped, and the result says so.
    capped = evaluate_one(spec, sts_dir=None, test_pairs=None, same_image_sets=[_captioned()],
                          sections=["same_image"], same_image_n=5000, seed=1)["same_image"]["toy"]
    assert capped["n_per_label"] == 600


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_a_bad_same_image_n_or_supervised_model_is_refused(bad):
    from grounded_text.evaluation.encoders import EncoderSpec
    from grounded_text.evaluation.suite import evaluate_one

    spec = EncoderSpec("toy", "baseline", _hash_encoder(), None, "test")
    with pytest.raises(ValueError, match="same_image_n"):
        evaluate_one(spec, sts_dir=None, test_pairs=None, sections=["same_image"], same_image_n=bad)
    with pytest.raises(ValueError, match="supervised_model"):
        evaluate_one(spec, sts_dir=None, test_pairs=None, sections=["sts"], supervised_model="mlp")


@pytest.mark.parametrize("argv,flag", [(["--same-image-n", "0"], "--same-image-n"),
                                       (["--supervised-model", "mlp"], "--supervised-model")])
def test_the_cli_refuses_bad_protocol_options_with_one_error_line(argv, flag):
    import importlib

    evaluate = importlib.import_module("grounded_text.evaluate")  # the command (gt.evaluate is the API's)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
        evaluate.main(["--full", *argv])
    assert exit_info.value.code == 2
    assert f"error: argument {flag}" in err.getvalue()


# ----------------------------------------------------------------------------- select_on = "sick_val"


def test_sick_val_is_a_selection_choice_monitored_as_val_sick_max():
    from grounded_text.config.schema import SELECT_ON
    from grounded_text.training.trainer import MONITORS

    assert "sick_val" in SELECT_ON and MONITORS["sick_val"] == ("val_sick", "max")


def test_sick_validation_logs_the_cosine_pearson_of_the_trial_split(tmp_path):
    from grounded_text.training.callbacks import SICKValidation

    rng = np.random.default_rng(2)
    words = ["dog", "cat", "man", "runs", "sits", "red", "ball", "snow", "kid", "car"]
    rows = [(" ".join(rng.choice(words, 4)), " ".join(rng.choice(words, 4)), round(float(rng.uniform(1, 5)), 1))
            for _ in range(40)]
    sts_dir = _write_sick(tmp_path, rows)
    cb = SICKValidation(None, sts_dir)
    encode = _hash_encoder()
    cb.encoder = encode  # the tower's NumPy encoder, replaced by a known one
    logs: dict = {}
    cb.on_epoch_end(0, logs)
    a, b = encode([r[0] for r in rows]), encode([r[1] for r in rows])
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    gold = [r[2] for r in rows]
    assert logs["val_sick"] == pytest.approx(stats.pearsonr(cos, gold)[0], abs=1e-6)
    assert logs["val_sick/spearman"] == pytest.approx(stats.spearmanr(cos, gold)[0], abs=1e-6)
    assert cb.history == [{"epoch": 1, "SICK/trial": pytest.approx(logs["val_sick"]),
                           "SICK/trial spearman": pytest.approx(logs["val_sick/spearman"])}]
    # A collapsed tower (one vector for every sentence): NaN, never selected.
    cb.encoder = lambda s: np.ones((len(s), 3), np.float32)
    with pytest.warns(Warning):
        cb.on_epoch_end(1, logs)
    assert np.isnan(logs["val_sick"])


def test_sick_val_without_a_sick_validation_split_is_refused_before_the_run(tmp_path):
    from grounded_text.config.schema import ExperimentConfig, TrainConfig
    from grounded_text.training import trainer
    from grounded_text.training.callbacks import SICKValidation
    from grounded_text.training.run_errors import is_usage_error

    (tmp_path / "data" / "sts").mkdir(parents=True)
    config = ExperimentConfig(train=TrainConfig(select_on="sick_val"))
    with pytest.raises(ValueError, match="SICK validation split.*SICK_trial.txt") as e:
        trainer.train(config, tmp_path / "data", tmp_path / "run")
    assert is_usage_error(e.value)  # the CLI's "error: ..." line, exit 2
    assert not (tmp_path / "run").exists()
    with pytest.raises(FileNotFoundError, match="SICK_trial.txt"):
        SICKValidation(None, tmp_path / "data" / "sts")
    trainer.check_selection_data(ExperimentConfig(train=TrainConfig(select_on="val_loss")), tmp_path / "data")


@pytest.mark.slow
def test_a_tiny_run_selects_on_sick_validation(data_dir, tmp_path):
    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.training import trainer

    config = ExperimentConfig(data=DataConfig(max_train_images=64, max_dev_images=16, batch_size=32),
                              model=ModelConfig(embedding_dim=16),
                              train=TrainConfig(epochs=2, select_on="sick_val", steps_per_execution=2))
    with contextlib.redirect_stdout(io.StringIO()):
        metrics = trainer.train(config, data_dir, tmp_path / "run", evaluate=False, verbose=0)
    sel = metrics["selection"]
    assert (sel["monitor"], sel["mode"]) == ("val_sick", "max")
    scores = metrics["history"]["val_sick"]
    assert len(scores) == 2 and sel["best_epoch"] == int(np.nanargmax(scores)) + 1
    assert [row["epoch"] for row in metrics["sts_validation_subsets"]] == [1, 2]
    assert metrics["sts_validation_subsets"][0]["SICK/trial"] == pytest.approx(scores[0])
