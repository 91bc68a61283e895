"""The one scoring call of the experiment drivers: ``score_run`` / ``score_encoder``.

Both run ``grounded_text.evaluation.suite.evaluate_one`` (STS, supervised STS-B/SICK-R,
retrieval, structure, same-image) on the Flickr8k test split of the run's data, and with
``Protocol.transfer`` every SentEval task (``grounded_text.evaluation.transfer.evaluate_task``):
the package's evaluation; nothing is re-implemented here.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from pathlib import Path

import numpy as np

from grounded_text.config.evaluation import EvalSettings, Protocol
from grounded_text.config.schema import DataConfig
from grounded_text.data.prepared import load_pairs
from grounded_text.data.sts import read_sick, read_sts_benchmark, read_sts_year, sts_year_dirs
from grounded_text.evaluation.encoders import EmbeddingCache, EncoderSpec, cached, load_image_encoder
from grounded_text.evaluation.retrieval import caption_to_image_ranks, image_to_caption_ranks, images_of_pairs
from grounded_text.evaluation.suite import evaluate_one, flickr_captioned
from grounded_text.evaluation.transfer import TASKS, ClassifierConfig, evaluate_task
from grounded_text.serving.loader import load
from grounded_text.utils.similarity import cosine_matrix, cosine_rows

log = logging.getLogger("grounded_text.experiments")


class TestData:
    """The data root, with its test splits loaded once per (dataset, features)."""

    __test__ = False  # not a pytest class

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.cache: dict = {}

    def test_pairs(self, data_cfg: dict, n_images: int | None):
        """The test split's ``CaptionPairs`` (its first ``n_images`` images when given)."""
        return self.split_pairs(data_cfg, "test", n_images)

    def split_pairs(self, data_cfg: dict, split: str, n_images: int | None):
        """One split (``"train"``, ``"dev"``, ``"test"``) of the run's dataset and features, as
        ``CaptionPairs`` (its first ``n_images`` images when given)."""
        key = (data_cfg.get("dataset", "flickr8k"), data_cfg.get("features", "efficientnet_lite0"))
        if key not in self.cache:
            known = {f.name for f in dataclasses.fields(DataConfig)}
            self.cache[key] = load_pairs(DataConfig(**{k: v for k, v in data_cfg.items() if k in known}), self.root)
        pairs = self.cache[key].splits[split]
        return pairs.first_images(n_images) if n_images else pairs


def _export_dir(run_dir: Path, candidates) -> Path | None:
    for name in candidates:
        if (run_dir / name / "saved_model.pb").is_file():
            return run_dir / name
    return None


def predictions(encoder, sts_dir: Path | None, test_pairs=None, image_encoder=None, *,
                sections=("sts", "retrieval")) -> dict:
    """The per-pair and per-query predictions behind the STS and retrieval figures, for the
    paired tests between two encoders (``grounded_text.experiments.comparison.paired_tests``).

    Args:
      encoder: ``list[str] → [n, d]`` (an ``EmbeddingCache`` is reused as is).
      sts_dir: the STS folder (or None); test_pairs, image_encoder: the retrieval split and tower.
      sections: which of ``"sts"``, ``"retrieval"``.

    Returns:
      ``{"sts": {"STS12/MSRvid": float32 [n] cosine, ..., "STSBenchmark/test", "SICK/test"},
      "gold": {same keys: float32 [n]}, "ranks": {"caption_to_image": int32 [captions],
      "image_to_caption": int32 [images]}, "groups": {"caption_to_image": int32 [captions], each
      caption query's image}}`` (pessimistic 1-based ranks, ``grounded_text.evaluation.retrieval``;
      the groups let a paired bootstrap draw an image's captions together); a section not
      computed is empty.
    """
    cache = cached(encoder)
    out: dict = {"sts": {}, "gold": {}, "ranks": {}, "groups": {}}
    if "sts" in sections and sts_dir is not None and Path(sts_dir).is_dir():
        sets = {}
        with warnings.catch_warnings():  # the STS report has already warned about skipped subsets
            warnings.simplefilter("ignore")
            for year, path in sts_year_dirs(sts_dir).items():
                sets.update({f"{year}/{name}": pairs for name, pairs in read_sts_year(path, {}).items()})
        if (Path(sts_dir) / "STSBenchmark").is_dir():
            sets["STSBenchmark/test"] = read_sts_benchmark(sts_dir, "test")
        if (Path(sts_dir) / "SICK").is_dir():
            sets["SICK/test"] = read_sick(sts_dir, "test")
        for key, pairs in sets.items():
            cache.add(list(pairs.sentences1) + list(pairs.sentences2))
            out["sts"][key] = cosine_rows(cache(pairs.sentences1), cache(pairs.sentences2)).astype(np.float32)
            out["gold"][key] = np.asarray(pairs.scores, dtype=np.float32)
    if "retrieval" in sections and test_pairs is not None and image_encoder is not None:
        _, caption_image, image_features = images_of_pairs(test_pairs)
        sims = cosine_matrix(cache(test_pairs.captions.tolist()), image_encoder(image_features))
        out["ranks"] = {"caption_to_image": caption_to_image_ranks(sims, caption_image).astype(np.int32),
                        "image_to_caption": image_to_caption_ranks(sims, caption_image).astype(np.int32)}
        out["groups"] = {"caption_to_image": np.asarray(caption_image, dtype=np.int32)}
    return out


def score_encoder(name: str, encoder, protocol: Protocol, settings: EvalSettings, data: TestData, *,
                  data_cfg: dict | None = None, image_encoder=None, source: str = "", kind: str = "model",
                  keep: dict | None = None) -> dict:
    """Scores one text encoder with ``protocol``.

    Args:
      name: the encoder's name (logs).
      encoder: ``list[str] → [n, d] float32`` embeddings.
      protocol, settings: what to score and on how much.
      data: the data root (``TestData``).
      data_cfg: the run's ``config["data"]`` (dataset and features of its test split).
      image_encoder: the run's image tower, for retrieval (None: retrieval unavailable).
      source, kind: recorded in the result.
      keep: when a dict, ``keep["predictions"]`` receives ``predictions(...)`` (STS pairs and
        retrieval queries, as scored) for the paired tests; it is not part of the result.

    Returns:
      ``evaluate_one``'s result plus ``"transfer"`` (with ``protocol.transfer``), ``"status":
      "ok"``, ``"split"``, ``"seconds_total"``.
    """
    t0 = time.perf_counter()
    raw, encoder = encoder, cached(encoder)  # the paired tests' predictions reuse the report's embeddings
    root = data.root
    sections = protocol.sections
    sts_dir = root / "sts" if (root / "sts").is_dir() else None
    needs_test = bool({"retrieval", "structure", "same_image"} & set(sections))
    test_pairs = data.test_pairs(data_cfg or {}, settings.test_images) if needs_test else None
    n_images = len(set(test_pairs.image_ids.tolist())) if test_pairs is not None else 0
    retrieval_protocol = "flickr8k_1k" if settings.test_images is None and n_images == 1000 else "all"
    split = "flickr8k/test" + (f" (first {settings.test_images} images)" if settings.test_images else "")
    same_sets = [flickr_captioned(test_pairs, split)] if "same_image" in sections and test_pairs is not None else []
    spec = EncoderSpec(name, kind, encoder, image_encoder, source)
    res = evaluate_one(spec, sts_dir=sts_dir, test_pairs=test_pairs, same_image_sets=same_sets, sections=sections,
                       same_image_n=protocol.same_image_pairs(settings),
                       seed=0, mnno_ks=(10,), retrieval_protocol=retrieval_protocol,
                       supervised_model=settings.supervised_model or protocol.supervised_model)
    if "retrieval" in sections and image_encoder is None:
        res["retrieval"] = {"status": "unavailable", "reason": "the run has no image_export/"}
    if keep is not None:
        keep["predictions"] = predictions(encoder, sts_dir, test_pairs, image_encoder,
                                          sections=tuple(s for s in ("sts", "retrieval") if s in sections))
    if protocol.transfer:
        res["transfer"] = transfer(raw, root, settings)
    res.update({"status": "ok", "split": split, "seconds_total": round(time.perf_counter() - t0, 2)})
    return res


def score_run(run_dir: str | Path, protocol: Protocol, settings: EvalSettings, data: TestData,
              metrics: dict | None = None, keep: dict | None = None) -> dict:
    """Scores every space of a trained run with ``protocol`` (``score_encoder`` on its exports).

    ``keep``: when a dict, ``keep[space]`` receives that space's ``predictions`` (see
    ``score_encoder``).

    Returns:
      ``{space: score_encoder(...) + "export_dir"}``, or ``{space: {"status": "missing",
      "reason"}}`` for a space the run did not export.
    """
    run_dir = Path(run_dir)
    data_cfg = ((metrics or {}).get("config") or {}).get("data", {})
    image_encoder = None
    if "retrieval" in protocol.sections and (run_dir / "image_export" / "saved_model.pb").is_file():
        image_encoder = load_image_encoder(run_dir / "image_export")
    out = {}
    for space, candidates in protocol.spaces:
        export = _export_dir(run_dir, candidates)
        if export is None:
            out[space] = {"status": "missing", "reason": f"the run has no {' or '.join(c + '/' for c in candidates)}"}
            continue
        held: dict | None = {} if keep is not None else None
        # The protocol's test-time rule where the paper's evaluation code applied one; else the
        # run's test sentences end as its training captions did (model_sentence_end decides).
        encoder = load(export, sentence_end=protocol.sentence_end)
        log.info("sentence ends of %s: %s", export, encoder.sentence_end)
        res = score_encoder(f"{run_dir.name}:{space}", encoder, protocol, settings, data,
                            data_cfg=data_cfg, image_encoder=image_encoder, source=str(export), keep=held)
        if held:
            keep[space] = held["predictions"]
        out[space] = {**res, "export_dir": str(export)}
    return out


def transfer(encoder, root: Path, settings: EvalSettings) -> dict:
    """Every SentEval task (``evaluate_task``); a task that cannot run is recorded, not fatal."""
    senteval = Path(root) / "senteval"
    if not senteval.is_dir():
        return {"status": "unavailable", "reason": f"no {senteval}"}
    config = ClassifierConfig(kfold=settings.transfer_kfold)
    emb = EmbeddingCache(encoder)
    out = {}
    for task in TASKS:
        try:
            out[task] = evaluate_task(emb, task, senteval, sts_dir=Path(root) / "sts", config=config,
                                      max_examples=settings.transfer_max_examples)
        except (FileNotFoundError, ValueError) as e:  # missing files, or a class too small for k folds
            out[task] = {"task": task, "status": "error", "acc": None, "reason": str(e)}
            log.warning("transfer %s: %s", task, e)
    return out
