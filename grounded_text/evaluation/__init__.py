"""Evaluation of sentence encoders (``python -m grounded_text.evaluate``).

Modules: ``sts`` (cosine STS), ``supervised_sts`` (SentEval-style ridge, supervised),
``retrieval`` (Recall@K / medr, Flickr8k 1k and COCO protocols), ``structure``
(mNNO@K, ρ_vis, C_intra, C_inter — Bordes 2019 §4.3), ``same_image`` (VETE §4.3
same-image tests, COCO captions reader), ``contamination``, ``suite`` (the full
report), ``report`` (JSON / Markdown), ``plots`` (PNG figures). See ``docs/evaluation.md``.
"""

from grounded_text.utils.lazy import lazy_getattr

# Lazy: importing a submodule (the CLIs' argument parsing) must not import TensorFlow.
_EXPORTS = {
    "ContaminationIndex": "contamination", "normalize_sentence": "contamination",
    "evaluate_retrieval": "retrieval", "retrieval_metrics": "retrieval", "evaluate_same_image": "same_image",
    "read_coco_captioned_images": "same_image", "sample_same_image_pairs": "same_image",
    "cluster_cohesion": "structure", "mnno": "structure", "rho_vis": "structure",
    "structural_measures": "structure", "correlations": "sts", "cosine_rows": "sts", "evaluate_sts": "sts",
    "format_markdown": "sts", "score_pairs": "sts",
    "evaluate_supervised_sts": "supervised_sts",
}
__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
