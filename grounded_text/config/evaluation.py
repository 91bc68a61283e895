"""How an experiment scores its models, as data: the protocol a paper reports on and the
evaluation sizes a budget affords (``grounded_text.experiments.scoring`` runs them; the papers'
plans in ``grounded_text.papers`` name them). Imports nothing heavy.
"""

from __future__ import annotations

import dataclasses

# One line per measure, for the reports.
STS_ALL = ("cosine of the two embeddings vs gold, Pearson r (and Spearman ρ), every STS1x subset found; year mean = "
           "unweighted mean over its subsets")
SUPERVISED = ("supervised STS-B / SICK-R: ridge on [u, v, |u−v|, u*v] of the frozen embeddings, α by dev Pearson; "
              "or, where the paper used it (Merkx & Frank), SentEval's relatedness classifier (Tai et al. 2015: "
              "softmax over the score classes on [|u−v|, u*v], early-stopped on dev, score = expectation; the smoke "
              "budget keeps the ridge) (grounded_text.evaluation.supervised_sts)")
RETRIEVAL = ("caption↔image retrieval on the Flickr8k test split (protocol flickr8k_1k: 1,000 images / 5,000 "
             "captions), cosine of the text-tower (export/) and image-tower (image_export/) outputs, R@K % (expected "
             "over random tie order), medr (pessimistic: ties never count in favour of the ground truth)")
SAME_IMAGE = ("VETE §4.3 same-image test on Flickr8k test captions: Pearson r of cosine vs same-image label, "
              "N same + N different-image pairs, seed 0")
STRUCTURE = ("Bordes §4.3 on Flickr8k test: mNNO@10, ρ_vis (Pearson, as §4.3; Spearman beside it), C_intra, "
             "C_inter; visual vectors = the CNN features")
AUTHORS_SENTENCE_ENDS = ("test-time sentence ends: the authors' SentEval batcher's for every model (\" .\" unless the "
                         "last whitespace token is \".\"; SentEval/evaluate_char.py:58-60 of DannyMerkx/caption2image)")
TRANSFER = ("SentEval tasks under data_dir/senteval: logistic regression on frozen embeddings "
            "(grounded_text.evaluation.transfer), accuracy %")


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How an experiment scores its models.

    Attributes:
      sections: ``evaluate_one`` sections (``grounded_text.evaluation.suite.EVALUATION_SECTIONS``).
      spaces: ``(label, export folders tried in order)``: each space is one text encoder.
      transfer: also the SentEval tasks under ``data_dir/senteval``.
      description: one line per measure, for the report.
      figures: the headline figures, families of ``grounded_text.reporting.figures.FAMILIES``.
      same_image_n: the paper's pairs per label of the same-image test (VETE §4.3: 1,000), or
        ``None`` (the budget's ``EvalSettings.same_image_n``); the smaller of the two is used.
      supervised_model: the paper's STS-B / SICK-R regressor (``"ridge"`` or ``"senteval"``,
        SentEval's relatedness classifier); a budget may ask for the ridge to stay quick.
      sentence_end: the sentence-end rule every test sentence gets (a rule of
        ``grounded_text.data.sentence_end``), where the paper's own evaluation code applied one;
        ``None``: each model's training rule, as ``grounded_text.load`` applies it.
    """

    sections: tuple
    spaces: tuple = (("text", ("export",)),)
    transfer: bool = False
    description: tuple = ()
    figures: tuple = ()
    same_image_n: int | None = None
    supervised_model: str = "ridge"
    sentence_end: str | None = None

    def same_image_pairs(self, settings: EvalSettings) -> int:
        """Pairs per label of the same-image test under ``settings`` (``same_image_n``)."""
        return min(self.same_image_n or settings.same_image_n, settings.same_image_n)


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    """Evaluation sizes.

    Attributes:
      test_images: score on the first n Flickr8k test images (retrieval protocol ``all``)
        or ``None`` = the whole split (``flickr8k_1k``).
      same_image_n: pairs per label of the same-image test (capped by what the split has).
      transfer_kfold: k of the SentEval cross-validations (SentEval: 10; prototyping: 5).
      transfer_max_examples: cap on every SentEval split (seeded subset), or None.
      supervised_model: overrides the protocol's regressor (``"ridge"`` keeps a quick budget
        quick: SentEval's classifier takes minutes per encoder on a CPU), or None.
    """

    test_images: int | None = None
    same_image_n: int = 5000
    transfer_kfold: int = 10
    transfer_max_examples: int | None = None
    supervised_model: str | None = None
