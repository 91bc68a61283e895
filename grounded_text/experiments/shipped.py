"""(Re)builds a shipped model: train it, copy its towers into the package, score it, write its card.

::

    python -m grounded_text.experiments.shipped vete_bow_flickr8k --data-dir "$GROUNDED_TEXT_DATA"
    python -m grounded_text.experiments.shipped vete_bow_flickr8k --data-dir DATA --from-run runs/vete_bow
    python -m grounded_text.experiments.shipped --list
    python -m grounded_text.experiments.shipped char_gru_attention_flickr8k --as-run runs/STUDY/RUN

For each name in ``RECIPES`` it runs the recipe's training command (``grounded-text train``
with the recipe's flags; ``--from-run RUN`` takes a finished run of that command instead),
copies ``RUN/export`` and ``RUN/image_export`` to ``grounded_text/shipped/<name>/``,
scores the copied text tower on STS (``shipped_figures``: Pearson r of the cosine, with 95%
intervals) and writes ``model.json`` and the export's ``model_card.md``. It refuses a model
over the wheel's budgets (``MAX_EXPORT_BYTES`` per export, ``MAX_SHIPPED_BYTES`` for the folder).

The figures of a shipped model are checked against a fresh scoring by
``tests/test_pretrained.py`` whenever the real data is there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from grounded_text.config.evaluation import EvalSettings, Protocol
from grounded_text.config.flags import parse_train_args
from grounded_text.data.paths import DATA_ENV_VAR
from grounded_text.data.sts import read_sick, read_sts_benchmark, read_sts_year
from grounded_text.evaluation.encoders import cached, load_image_encoder
from grounded_text.evaluation.stats import pearson_ci
from grounded_text.experiments.comparison import read_ours
from grounded_text.experiments.runner import plain
from grounded_text.experiments.scoring import TestData, score_encoder
from grounded_text.experiments.shipped_card import RESAMPLES, SEED, shipped_card
from grounded_text.layers.branches import LinearImageEncoder
from grounded_text.papers.resolve import config_from_flags, resolve_config
from grounded_text.serving.export import CONFIG_ASSET, export_image_tower
from grounded_text.serving.integrity import INTEGRITY_KEY, check_export, read_export_config, record_integrity
from grounded_text.serving.loader import load
from grounded_text.shipped import MODEL_FILE, SHIPPED_DIR
from grounded_text.training.run_dir import config_diff
from grounded_text.utils.children import run_child
from grounded_text.utils.durable import atomic_write
from grounded_text.utils.similarity import cosine_rows

#: The wheel's budget per export of a shipped model (one tower, on disk): a two-snapshot
#: ensemble's text tower at n = 512 takes about 15 MB.
MAX_EXPORT_BYTES = 20 * 2**20
#: The wheel's budget for all shipped models and weights together (``grounded_text/shipped/``).
MAX_SHIPPED_BYTES = 56 * 2**20


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How one shipped model is made.

    Attributes:
      train_args: the flags of ``grounded-text train`` after ``--data-dir`` and ``--output-dir``.
      description: one line for ``gt.models()`` and the card.
      data: the training data, in words.
      licence: the terms of the training data (which bind the weights' use).
      image_weights: ``"float32"``, or ``"int8"``: the (linear) image tower re-exported with
        Keras' int8 weight quantization (``quantize_image_tower``) to save space; the
        text tower, and so every STS figure, stays float32.
    """

    train_args: tuple[str, ...]
    description: str
    data: str
    licence: str
    image_weights: str = "float32"


_FLICKR8K_TERMS = ("Flickr8k is distributed by the University of Illinois for research use only (Hodosh, Young & "
                   "Hockenmaier 2013); the photos remain (c) their Flickr owners. These weights are derived "
                   "from its captions and from image features of a CNN pretrained on ImageNet (non-commercial "
                   "research and education terms): use them for research.")

RECIPES: dict[str, Recipe] = {
    "vete_bow_flickr8k": Recipe(
        train_args=("--all-captions", "--epochs", "20"),
        description="VETE-BOW (Kurach et al. 2017) on Flickr8k train, all five captions per image, 20 epochs, "
                    "EfficientNet-Lite0 image features; 128-d; the README's training job",
        data="Flickr8k official train split (6,000 images x 5 captions), the data root's EfficientNet-Lite0 "
             "features (1280-d); vocabulary from the training captions; best epoch by STS16 mean",
        licence=_FLICKR8K_TERMS),
    # The character-level model (Merkx & Frank 2019) at half the paper's width, the paper's
    # whole schedule and its 2-snapshot ensemble, as the record trains it (N(0, 1) character
    # embeddings, " ."-ended captions) and with each tower's gradient norm clipped as the
    # authors' code clips it (their 0.05 / 0.0025 on their averaged hinge = 51.2 / 2.56 on our
    # summed one at B = 32; the caption gap's clip_per_tower arm). Both towers stay float32:
    # two snapshots each fit the per-export budget. Build with --from-run on a finished run of
    # this command (about 6 h of 2 CPU cores).
    "char_gru_attention_flickr8k": Recipe(
        train_args=("--model", "char_gru_attention_512", "--epochs", "32", "--clip-norm-text", "51.2",
                    "--clip-norm-image", "2.56"),
        description="Character-level GRU with attention (Merkx & Frank 2019) at n = 512 on Flickr8k train, "
                    "the paper's whole cyclic schedule (32 epochs, 8 cosine cycles of 4) scored as the ensemble "
                    "of its 2 cycle-end snapshots with the highest Flickr8k dev rsum, N(0, 1) character "
                    "embeddings, \" .\"-ended captions and per-tower gradient clipping as the authors' code; "
                    "EfficientNet-Lite0 image features",
        data="Flickr8k official train split (6,000 images x 5 captions), the data root's EfficientNet-Lite0 "
             "features (1280-d)",
        licence=_FLICKR8K_TERMS),
}

#: figure → (how it is read from the data root's sts/ folder); all Pearson r of the cosine.
FIGURES = ("STS12 MSRvid", "STS16 mean", "STS-B test", "SICK test")


def training_command(name: str, output_dir: str = "runs/" + "NAME") -> str:
    """The recipe's command line, as a user types it."""
    recipe = RECIPES[name]
    return shlex.join(["grounded-text", "train", "--data-dir", "$GROUNDED_TEXT_DATA", "--output-dir",
                       output_dir.replace("NAME", name), *recipe.train_args]).replace("'$GROUNDED_TEXT_DATA'",
                                                                                       '"$GROUNDED_TEXT_DATA"')


def _pairs(sts_dir: Path) -> dict[str, list]:
    """figure → its list of ``SentencePairs`` (several for a mean over subsets)."""

    sts16 = read_sts_year(sts_dir / "STS16-en-test")
    return {"STS12 MSRvid": [read_sts_year(sts_dir / "STS12-en-test")["MSRvid"]],
            "STS16 mean": [sts16[k] for k in sorted(sts16)],
            "STS-B test": [read_sts_benchmark(sts_dir, "test")],
            "SICK test": [read_sick(sts_dir, "test")]}


def _pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson r along the last axis."""
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))


def shipped_figures(encoder, sts_dir: str | Path) -> dict:
    """The figures on a shipped model's card: Pearson r of the cosine similarity vs gold.

    One set of pairs (STS12 MSRvid, STS-B test, SICK test): r with its Fisher-z 95% interval
    (``grounded_text.evaluation.stats.pearson_ci``). A mean over subsets (STS16 mean): the
    mean r with a percentile bootstrap 95% interval, resampling pairs within each subset
    (``RESAMPLES``, seed ``SEED``).

    Args:
      encoder: strings → float [n, N] (e.g. ``gt.load(...).encode``).
      sts_dir: the data root's ``sts/`` folder.

    Returns:
      ``{figure: {"value": r, "ci95": [lo, hi], "n": pairs}}`` in the order of ``FIGURES``.
    """

    out = {}
    rng = np.random.default_rng(SEED)
    figures = _pairs(Path(sts_dir))
    # Each distinct sentence once, in one call: SICK repeats half of its sentences, and the four
    # sets share some, so 16,484 sentences are 9,969 to encode.
    cache = cached(encoder)
    cache.add([s for sets in figures.values() for p in sets for s in (*p.sentences1, *p.sentences2)])
    for figure, sets in figures.items():
        sims = [cosine_rows(cache(list(p.sentences1)), cache(list(p.sentences2))) for p in sets]
        golds = [np.asarray(p.scores, np.float64) for p in sets]
        rs = [float(_pearson(s, g)) for s, g in zip(sims, golds)]
        n = sum(len(g) for g in golds)
        if len(sets) == 1:
            lo, hi = pearson_ci(rs[0], n)
        else:
            boot = np.zeros(RESAMPLES)
            for s, g in zip(sims, golds):
                idx = rng.integers(0, len(g), size=(RESAMPLES, len(g)))
                boot += _pearson(s[idx], g[idx])
            lo, hi = np.percentile(boot / len(sets), [2.5, 97.5])
        out[figure] = {"value": round(float(np.mean(rs)), 6), "ci95": [round(float(lo), 6), round(float(hi), 6)],
                       "n": n}
    return out


def shipped_retrieval(encoder, image_export: Path, data_dir: str | Path, config: dict) -> dict:
    """The retrieval figures on a shipped model's card: caption→image and image→caption R@1 /
    R@5 / R@10 (percent) on the Flickr8k test split (1,000 images, 5,000 captions, the features
    of the run's config), by the package's evaluation (``scoring.score_encoder``: expected R@K
    over random tie order; 95 % intervals by a bootstrap over images for caption→image, Wilson
    over the image queries for image→caption).

    Args:
      encoder: the text tower (strings → float [n, N], e.g. ``gt.load(...)``).
      image_export: the image tower's SavedModel folder.
      data_dir: the data root; config: the run's config (its ``data`` names the features).

    Returns:
      ``{"caption→image R@1": {"value", "ci95": [lo, hi], "n": queries}, ...}`` (6 figures).
    """

    res = score_encoder("shipped", encoder, Protocol(sections=("retrieval",)), EvalSettings(), TestData(data_dir),
                        data_cfg=config.get("data") or {}, image_encoder=load_image_encoder(image_export))
    out = {}
    for direction, words in (("caption_to_image", "caption→image"), ("image_to_caption", "image→caption")):
        for k in ("R@1", "R@5", "R@10"):
            fig = read_ours(res, f"flickr8k_1k/{direction}/{k}")
            out[f"{words} {k}"] = {"value": round(float(fig["value"]), 4),
                                   "ci95": [round(float(c), 4) for c in fig["ci"]], "n": fig["n"]}
    return out


def _test_features(data_dir: Path, config: dict) -> np.ndarray:
    """The Flickr8k test images' features (float32 [n, d]) of the run's feature file."""

    pairs = TestData(data_dir).test_pairs(config["data"], None)
    return np.asarray(pairs.features[np.unique(pairs.feature_rows)], np.float32)


def quantize_image_tower(image_export: Path, features: np.ndarray) -> dict:
    """Replaces a linear image tower's SavedModel (``f(x) = W x + b``, L2-normalised or not)
    with the same map under Keras' int8 weight quantization (``keras.Model.quantize("int8")``:
    per-output-channel scales, float32 activations), and measures what that changes.

    Args:
      image_export: the tower's SavedModel folder (float32 [B, d] → float32 [B, N]).
      features: float32 [n, d] image features (e.g. the test split's) to check the map on.

    Returns:
      ``{"weights": "int8", "min_cosine": c, "max_abs_diff": m}``: the smallest cosine and the
      largest absolute difference between the float32 and int8 towers' outputs on ``features``.

    Raises:
      ValueError: the tower is not ``W x + b`` (its variables are not one [d, N] matrix and one
        [N] bias, or its outputs are not reproduced by them to 1e-4).
    """


    loaded = tf.saved_model.load(str(image_export))
    variables = loaded.signatures["serving_default"].variables
    weights = {tuple(v.shape): v.numpy() for v in variables if v.dtype == tf.float32}
    matrices = [w for shape, w in weights.items() if len(shape) == 2]
    if len(matrices) != 1:
        raise ValueError(f"{image_export}: not a linear image tower (float32 variables {sorted(weights)}).")
    kernel = matrices[0]
    bias = weights.get((kernel.shape[1],), np.zeros(kernel.shape[1], np.float32))
    x = np.asarray(features, np.float32)
    want = loaded(tf.constant(x)).numpy()
    affine = x @ kernel + bias
    unit = affine / np.linalg.norm(affine, axis=1, keepdims=True)
    normalize = bool(np.abs(unit - want).max() < 1e-4)
    if not normalize and np.abs(affine - want).max() >= 1e-4:
        raise ValueError(f"{image_export}: its outputs are not W x + b (normalised or not) of its variables.")
    inputs = keras.Input((kernel.shape[0],))
    layer = LinearImageEncoder(kernel.shape[1], normalize=normalize)
    tower = keras.Model(inputs, layer(inputs))
    layer.dense.set_weights([kernel, bias])
    tower.quantize("int8")
    config = json.loads((Path(image_export) / "assets" / CONFIG_ASSET).read_text())
    export_image_tower(tower, image_export, config)
    got = tf.saved_model.load(str(image_export))(tf.constant(x)).numpy()
    cosine = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    return {"weights": "int8", "min_cosine": round(float(cosine.min()), 6),
            "max_abs_diff": float(np.abs(got - want).max())}


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def recipe_config(name: str) -> dict:
    """The resolved config (as stored in a run's ``metrics.json``) of recipe ``name``'s command."""

    args = parse_train_args(["--output-dir", "unused", *RECIPES[name].train_args])
    return plain(resolve_config(config_from_flags(args)).to_dict())


def check_run(name: str, run_dir: str | Path) -> dict:
    """``run_dir``'s ``metrics.json``, after checking that it is a finished run of recipe
    ``name``'s command: a model is shipped with its recipe's command on its card, so a run of
    any other config is refused.

    Raises:
      FileNotFoundError: no ``metrics.json`` (no finished run). ValueError: another config
      (the fields that differ, named).
    """

    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} holds no finished run (no metrics.json).")
    metrics = json.loads(path.read_text())
    diff = config_diff(metrics.get("config") or {}, recipe_config(name))
    if diff:
        raise ValueError(f"{run_dir} was not trained by {name}'s recipe ({'; '.join(diff[:8])}"
                         f"{'; ...' if len(diff) > 8 else ''}); its command: {training_command(name)}")
    return metrics


def build(name: str, data_dir: str | Path, *, run_dir: str | Path | None = None, work_dir: str | Path = "runs",
          log=print) -> dict:
    """Makes ``grounded_text/shipped/<name>/`` from a run of the recipe (trained here
    unless ``run_dir`` is given, which must be a finished run of the recipe's command:
    ``check_run``). Returns the record written to ``model.json``.

    Raises:
      KeyError: an unknown name. RuntimeError: the training failed, or the model is over
      ``MAX_EXPORT_BYTES`` or the shipped folder over ``MAX_SHIPPED_BYTES``. FileNotFoundError:
      the run lacks an export or ``metrics.json``.
      ValueError: ``run_dir`` holds a run of another config.
    """

    recipe = RECIPES[name]
    data_dir = Path(data_dir)
    if run_dir is not None:
        check_run(name, run_dir)
    if run_dir is None:
        run_dir = Path(work_dir) / name
        command = [sys.executable, "-m", "grounded_text.train", "--data-dir", str(data_dir), "--output-dir",
                   str(run_dir), "--overwrite", *recipe.train_args]
        log("$ " + shlex.join(command))

        if run_child(command) != 0:  # stopping this command stops the training too
            raise RuntimeError(f"training {name} failed: {shlex.join(command)}")
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    target = SHIPPED_DIR / name
    staged = SHIPPED_DIR / f".{name}.tmp"
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir()
    for part in ("export", "image_export"):
        if (run_dir / part / "saved_model.pb").is_file():
            shutil.copytree(run_dir / part, staged / part)
            check_export(staged / part)  # the copy is the run's export, as it recorded it
    image_config = read_export_config(staged / "image_export") if (staged / "image_export").is_dir() else None
    if image_config is not None and INTEGRITY_KEY not in image_config:
        record_integrity(staged / "image_export")  # a tower exported before towers recorded their files
    if not (staged / "export" / "saved_model.pb").is_file():
        raise FileNotFoundError(f"{run_dir}/export holds no SavedModel.")
    image_weights = {"weights": "float32"}
    if recipe.image_weights == "int8" and (staged / "image_export").is_dir():
        image_weights = quantize_image_tower(staged / "image_export", _test_features(data_dir, metrics["config"]))
        log(f"{name}: image tower in int8 (smallest cosine to float32 on the test images "
            f"{image_weights['min_cosine']})")
    for part in ("export", "image_export"):
        size = _bytes(staged / part) if (staged / part).is_dir() else 0
        if size > MAX_EXPORT_BYTES:
            shutil.rmtree(staged)
            raise RuntimeError(f"{name}/{part} takes {size:,} bytes, over the {MAX_EXPORT_BYTES:,}-byte budget of "
                               "a shipped export.")
    others = sum(p.stat().st_size for p in SHIPPED_DIR.rglob("*") if p.is_file()
                 and not p.is_relative_to(staged) and not p.is_relative_to(SHIPPED_DIR / name))
    if others + _bytes(staged) > MAX_SHIPPED_BYTES:
        shutil.rmtree(staged)
        raise RuntimeError(f"with {name}, the shipped models take {others + _bytes(staged):,} bytes, over the "
                           f"{MAX_SHIPPED_BYTES:,}-byte budget of the package's shipped folder.")
    encoder = load(staged / "export")
    log(f"{name}: scoring on {data_dir / 'sts'}")
    figures = shipped_figures(encoder.encode, data_dir / "sts")
    retrieval = (shipped_retrieval(encoder, staged / "image_export", data_dir, metrics["config"])
                 if (staged / "image_export").is_dir() else None)
    config = metrics["config"]
    image_dims = None
    if (staged / "image_export").is_dir():
        image = tf.saved_model.load(str(staged / "image_export"))
        spec = image.signatures["serving_default"].structured_input_signature[1]
        image_dims = int(next(iter(spec.values())).shape[-1])
    record = {
        "description": recipe.description,
        "preset": config["model"]["name"],
        "dims": encoder.dim,
        "image_dims": image_dims,
        "features": config["data"]["features"],
        "figures": figures,
        "retrieval": retrieval,
        "weights_dtype": "float32",
        "image_weights": image_weights,
        "parameters": metrics.get("parameters", {}).get("text_tower") if isinstance(metrics.get("parameters"), dict)
        else metrics.get("parameters"),
        "best_epoch": metrics["selection"]["best_epoch"],
        "epochs": config["train"]["epochs"],
        "exported": _exported(metrics),
        "command": training_command(name),
        "data": recipe.data,
        "licence": recipe.licence,
        "config": config,
    }
    if record["parameters"] is None:
        record["parameters"] = int(sum(int(np.prod(v.shape)) for v in encoder.module.variables))
    card = shipped_card(name, record)
    (staged / "export" / "model_card.md").write_text(card, encoding="utf-8")
    (staged / MODEL_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    staged.rename(target)
    log(f"{name}: {_bytes(target):,} bytes in {target}; " + ", ".join(
        f"{k} {v['value']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]" for k, v in figures.items()))
    return record


def _exported(metrics: dict) -> dict:
    """What a run's export holds (the trainer's ``exported`` record), without the snapshots'
    paths, which are the run folder's, not the package's."""
    exported = metrics.get("exported") or {"kind": "best_epoch", "epoch": metrics["selection"]["best_epoch"]}
    return {k: v for k, v in exported.items() if k != "snapshots"}


#: A card's figure → its key in the trainer's ``evaluation.headline`` and its node in
#: ``evaluation.sts`` (``grounded_text.reporting.figures``' ``trainer_*`` figures read these).
_CARD_IN_METRICS = (("STS12 MSRvid", "STS12/MSRvid pearson", ("STS12", "subsets", "MSRvid")),
                    ("STS16 mean", "STS16 mean pearson (avg2016)", None),
                    ("STS-B test", "STS-B test pearson", ("STSBenchmark", "test")),
                    ("SICK test", "SICK test pearson", ("SICK", "test")))


def as_run(name: str, run_dir: str | Path) -> Path:
    """Writes a run folder of shipped model ``name`` (its ``export/`` and ``image_export/``,
    and a ``metrics.json`` made from its ``model.json``: config, best epoch, parameters and STS
    figures), so that a study (``python -m grounded_text.ablation ... --paired``) can score it as
    an arm without training it again. The folder's ``metrics.json`` says where it came from
    (``"assembled_from"``); it has no per-epoch history and no fit time, which the card does not
    keep. A shipped int8 image tower (``Recipe.image_weights``) is what the arm's retrieval
    figures then use.

    Returns:
      ``run_dir``.

    Raises:
      KeyError: an unknown name. FileNotFoundError: the model is not in the package.
      FileExistsError: ``run_dir`` already holds a ``metrics.json`` (never overwritten).
    """
    RECIPES[name]  # KeyError for an unknown name
    source = SHIPPED_DIR / name
    if not (source / MODEL_FILE).is_file():
        raise FileNotFoundError(f"{source} holds no shipped model ({MODEL_FILE} missing).")
    run_dir = Path(run_dir)
    if (run_dir / "metrics.json").exists():
        raise FileExistsError(f"{run_dir} already holds a run (metrics.json); choose another folder.")
    record = json.loads((source / MODEL_FILE).read_text())
    run_dir.mkdir(parents=True, exist_ok=True)
    for part in ("export", "image_export"):
        if (source / part).is_dir():
            shutil.rmtree(run_dir / part, ignore_errors=True)
            shutil.copytree(source / part, run_dir / part)
    headline, sts = {}, {}
    for figure, key, path in _CARD_IN_METRICS:
        headline[key] = record["figures"][figure]["value"]
        if path:  # a single set: its interval too (a mean over subsets has none in the report)
            node = sts
            for part in path:
                node = node.setdefault(part, {})
            node.update(pearson=headline[key], pearson_ci95=record["figures"][figure]["ci95"])
    metrics = {
        "assembled_from": f"the shipped model {name} (its exports and model.json; image weights "
                          f"{record['image_weights']['weights']}), not a training run of this folder",
        "config": record["config"],
        "data": {"feature_dim": record["image_dims"]},
        "selection": {"best_epoch": record["best_epoch"]},
        "parameters": {"text_tower": record["parameters"]},
        "timing_seconds": {"fit": None},
        "history": {},
        "evaluation": {"headline": headline, "sts": sts},
    }

    atomic_write(run_dir / "metrics.json", lambda f: f.write((json.dumps(metrics, indent=2) + "\n").encode()))
    return run_dir


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grounded_text.experiments.shipped",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME", help=f"models to build: {', '.join(RECIPES)}")
    p.add_argument("--data-dir", default=None, help="the data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--from-run", default=None, metavar="RUN", help="a finished run of the recipe's command "
                                                                  "(one NAME only)")
    p.add_argument("--work-dir", default="runs", help="where the training runs go (default: runs)")
    p.add_argument("--list", action="store_true", help="print each recipe's training command, then exit")
    p.add_argument("--as-run", default=None, metavar="DIR",
                   help="write the shipped model NAME as a run folder DIR (exports and metrics.json from its card), "
                        "for a study to score it as an arm; trains nothing")
    a = p.parse_args(argv)
    if a.as_run:
        if len(a.names) != 1 or a.names[0] not in RECIPES:
            p.error(f"--as-run takes exactly one NAME of {', '.join(RECIPES)}")
        try:
            print(as_run(a.names[0], a.as_run))
        except (FileNotFoundError, FileExistsError) as e:
            print(f"error: --as-run: {e}", file=sys.stderr)
            return 2
        return 0
    if a.list or not a.names:
        for name in RECIPES:
            print(f"{name}: {training_command(name)}")
        return 0


    data_dir = a.data_dir or os.environ.get(DATA_ENV_VAR)
    if not data_dir:
        p.error(f"pass --data-dir or set ${DATA_ENV_VAR}")
    unknown = [n for n in a.names if n not in RECIPES]
    if unknown:
        p.error(f"unknown model(s) {unknown}; choose from {', '.join(RECIPES)}")
    if a.from_run and len(a.names) != 1:
        p.error("--from-run takes exactly one NAME")
    if a.from_run:
        try:
            check_run(a.names[0], a.from_run)
        except (FileNotFoundError, ValueError) as e:
            print(f"error: --from-run: {e}", file=sys.stderr)
            return 2
    for name in a.names:
        build(name, data_dir, run_dir=a.from_run, work_dir=a.work_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
