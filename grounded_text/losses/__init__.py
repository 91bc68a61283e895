"""Losses of grounded_text, as functions and as Keras loss layers.

Every layer is called as ``layer(text, image, image_ids=None, training=None)`` and
returns (and ``add_loss``-es) a ``float32`` scalar; see ``docs/losses.md``.
"""

from grounded_text.losses.common import l2_normalize, same_image_mask, similarity_matrix
from grounded_text.losses.correlation import (
    CovarianceLoss,
    PairwiseRankLoss,
    PearsonCorrelationLoss,
    SurrogateKendallTauLoss,
    cosine_similarity,
    covariance,
    mismatch_partners,
    pairwise_rank_loss,
    pearson_correlation,
    surrogate_kendall_tau,
    vete_pair_similarities,
)
from grounded_text.losses.grounding import (
    ClusterLoss,
    CrossModalProjectionLoss,
    GroundingLoss,
    PerceptualLoss,
    cluster_loss,
    cross_modal_projection_loss,
    perceptual_loss,
)
from grounded_text.losses.ranking import NEGATIVES, TripletRankingLoss, triplet_ranking_loss

__all__ = [
    "ClusterLoss",
    "CovarianceLoss",
    "CrossModalProjectionLoss",
    "GroundingLoss",
    "NEGATIVES",
    "PairwiseRankLoss",
    "PearsonCorrelationLoss",
    "PerceptualLoss",
    "SurrogateKendallTauLoss",
    "TripletRankingLoss",
    "cluster_loss",
    "cosine_similarity",
    "covariance",
    "cross_modal_projection_loss",
    "l2_normalize",
    "mismatch_partners",
    "pairwise_rank_loss",
    "pearson_correlation",
    "perceptual_loss",
    "same_image_mask",
    "similarity_matrix",
    "surrogate_kendall_tau",
    "triplet_ranking_loss",
    "vete_pair_similarities",
]
