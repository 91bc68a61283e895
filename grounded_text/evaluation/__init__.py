"""Evaluation of sentence encoders (``python -m grounded_text.evaluate``).

Modules: ``sts`` (cosine STS), ``supervised_sts`` (SentEval-style ridge, supervised),
``retrieval`` (Recall@K / medr, Flickr8k 1k and COCO protocols), ``structure``
(mNNO@K, ρ_vis, C_intra, C_inter — Bordes 2019 §4.3), ``same_image`` (VETE §4.3
same-image tests, COCO captions reader), ``contamination``, ``suite`` (the full
report), ``report`` (JSON / Markdown), ``plots`` (PNG figures). See ``docs/evaluation.md``.
"""

from grounded_text.evaluation.contamination import ContaminationIndex, normalize_sentence
from grounded_text.evaluation.retrieval import evaluate_retrieval, retrieval_metrics
from grounded_text.evaluation.same_image import evaluate_same_image, read_coco_captioned_images, sample_same_image_pairs
from grounded_text.evaluation.structure import cluster_cohesion, mnno, rho_vis, structural_measures
from grounded_text.evaluation.sts import (
    correlations,
    cosine_rows,
    evaluate_sts,
    format_markdown,
    load_encoder,
    score_pairs,
)
from grounded_text.evaluation.supervised_sts import evaluate_supervised_sts

__all__ = [
    "ContaminationIndex", "cluster_cohesion", "correlations", "cosine_rows", "evaluate_retrieval",
    "evaluate_same_image", "evaluate_sts", "evaluate_supervised_sts", "format_markdown", "load_encoder",
    "mnno", "normalize_sentence", "read_coco_captioned_images", "retrieval_metrics", "rho_vis",
    "sample_same_image_pairs", "score_pairs", "structural_measures",
]
