"""Character-level grounded sentence encoder of Merkx & Frank (2019), "Learning semantic
sentence representations from visually grounded language without lexical knowledge"
(Natural Language Engineering), §3.

Text: characters as they are (case and punctuation kept, §3.2.1) → 20-d embeddings →
bidirectional GRU → vector self-attention (a_t = softmax_t(V tanh(W h_t + b_w) + b_v) ∈
R^{2n}, Att = Σ_t a_t ∘ h_t, 128 hidden; ``VectorAttentionPooling``) → L2. Image: a
linear projection of the CNN features, L2-normalised. Loss: hinge (triplet) loss summed
over all in-batch negatives, both directions. Training (§3.3): the cyclic cosine
learning rate (``CyclicCosineSchedule``: lr_min at each 4-epoch cycle's start and end,
lr_max at its middle) with a snapshot of both towers at each cycle's end; the exported
encoders are the ensembles of the 2 snapshots best on Flickr8k dev retrieval.
"""

from __future__ import annotations

import keras

from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers.branches import LinearImageEncoder
from grounded_text.layers.char_encoder import CharacterEncoder
from grounded_text.models.components import TRIPLET_KEYS, character_preprocessor, family_loss, require_params
from grounded_text.models.grounded_model import GroundedModel, assemble

CHAR_KEYS = ("char_dim", "units", "num_layers", "cell", "bidirectional", "pooling", "attention_units", "max_chars")


def build_char_gru_attention(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                             train_captions=None, **_) -> GroundedModel:
    """Merkx & Frank (2019) character-level bi-GRU with self-attention.

    Characters (``TextConfig.lowercase``: the paper keeps case, §3.2.1) → embeddings →
    bidirectional GRU → vector self-attention → L2; image branch linear + L2 to the text width;
    ``TripletRankingLoss`` (the paper's hinge over all in-batch negatives, both directions).
    The records ``char_gru_attention`` (the paper: 20-d characters, 1024 units per
    direction, 128 attention units, margin 0.2) and ``char_gru_attention_512`` give every
    value. The character vocabulary comes from the training captions (``train_captions``,
    required).

    Encoder keys: ``char_dim``, ``units`` (per direction; None = N / directions),
    ``num_layers``, ``cell`` ("gru" or "lstm"), ``bidirectional``, ``pooling``
    ("attention" = the paper's vector attention, "scalar_attention", "max", "mean"),
    ``attention_units``, ``max_chars`` (None: no
    truncation). Loss parameters of ``"triplet"``: ``margin``, ``direction_weight``,
    ``negatives`` (and ``k`` with the hardest negatives).

    Raises:
      ValueError: no ``train_captions``; a missing or unknown encoder or loss parameter;
        N unset or different from units × directions.
    """
    p = require_params(model, model.encoder, CHAR_KEYS, "encoder")
    directions = 2 if p["bidirectional"] else 1
    units, n = p["units"], model.embedding_dim
    if units is None:
        if n is None or n % directions:
            raise ValueError(f"{model.name}: embedding_dim {n} must be set and divisible by {directions} "
                             f"(directions), or set encoder units.")
        units = n // directions
    if n is not None and int(units) * directions != n:
        raise ValueError(f"{model.name}: embedding_dim {n} must equal units × directions = "
                         f"{int(units)} × {directions} (the sentence vector is the concatenated states).")
    preprocessor = character_preprocessor(text, train_captions, p["max_chars"])
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    encoder = CharacterEncoder(preprocessor.vocabulary_size, char_dim=p["char_dim"], units=int(units),
                               num_layers=p["num_layers"], cell=p["cell"], bidirectional=p["bidirectional"],
                               pooling=p["pooling"], attention_units=p["attention_units"], name="char_encoder")
    text_tower = keras.Model(sentences, encoder(preprocessor(sentences)), name="text_tower")
    features = keras.Input(shape=(feature_dim,), dtype="float32", name="image_features")
    image_tower = keras.Model(features, LinearImageEncoder(encoder.output_dim, normalize=True,
                                                           name="image_projection")(features), name="image_tower")
    return assemble(text_tower, image_tower, family_loss(model, "triplet", TRIPLET_KEYS, seed))
