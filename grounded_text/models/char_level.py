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

from grounded_text.config.params import ENCODER_PARAMS
from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers.branches import LinearImageEncoder
from grounded_text.layers.char_encoder import CharacterEncoder
from grounded_text.models.components import (
    TRIPLET_KEYS,
    architecture,
    character_preprocessor,
    family_loss,
    require_params,
)
from grounded_text.models.grounded_model import GroundedModel, assemble


@architecture(
    "characters (case kept) → 20-d → bi-GRU 2 × 1024 → self-attention (128) → L2",
    "linear + L2",
    "hinge over all negatives")
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
    truncation); and the options that mirror the authors' code (DannyMerkx/caption2image,
    ``NLE2019`` code at 8a4dc2c; docs/caption2image_differences.md), each off by default:
    ``attention_heads`` (``multi_attention``, ``PyTorch/functions/costum_layers.py:71-85``;
    their ``flickr_char/char_net.py:50`` trains 2 heads; N = units × directions × heads and
    the image branch widens with it, ``char_net.py:52``), ``attention_include_padding`` (their
    unmasked softmax, ``costum_layers.py:95,98``), ``attention_diversity_margin`` (their
    ``attention_loss``, ``costum_loss.py:72-94``, added to the hinge by ``char_net.py:117`` /
    ``trainer.py:116-117``; it reaches the training loss through the encoder's ``add_loss``)
    and ``char_embedding_init`` (``"normal"``: N(0, 1), PyTorch's ``nn.Embedding`` default,
    ``encoders.py:21-23``) and ``char_ids`` (``"printable"``: their character ids,
    ``prep_text.py:21-35``: ``string.printable``, ``'0'`` and unknown characters on a zero row
    never trained; ``CHAR_ID_RULES``) and ``weight_init`` (``"torch"``: every other weight as their code
    leaves it, PyTorch's defaults: ``nn.GRU``'s U(±1/√units), their attention's orthogonal W,
    ``costum_layers.py:91-94``, and the image branch's ``nn.Linear`` bias U(±1/√d) beside its
    Xavier-uniform weight, ``encoders.py:52-53``). Loss parameters of ``"triplet"``: ``margin``,
    ``direction_weight``, ``negatives`` (and ``k`` with the hardest negatives), ``reduction``
    (``"mean_matrix"``: their ``cost.mean()``, ``costum_loss.py:39``).

    Raises:
      ValueError: no ``train_captions``; a missing or unknown encoder or loss parameter;
        N unset or different from units × directions × attention heads.
    """
    p = require_params(model, model.encoder, ENCODER_PARAMS["char_gru_attention"], "encoder")
    directions = 2 if p["bidirectional"] else 1
    heads = int(p["attention_heads"])
    units, n = p["units"], model.embedding_dim
    if units is None:
        if n is None or n % (directions * heads):
            raise ValueError(f"{model.name}: embedding_dim {n} must be set and divisible by {directions} "
                             f"(directions) × {heads} (attention heads), or set encoder units.")
        units = n // (directions * heads)
    if n is not None and int(units) * directions * heads != n:
        raise ValueError(f"{model.name}: embedding_dim {n} must equal units × directions × attention heads = "
                         f"{int(units)} × {directions} × {heads} (the sentence vector is the concatenated "
                         f"states, once per attention head).")
    preprocessor = character_preprocessor(text, train_captions, p["max_chars"], p["char_ids"])
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    encoder = CharacterEncoder(preprocessor.vocabulary_size, char_dim=p["char_dim"], units=int(units),
                               num_layers=p["num_layers"], cell=p["cell"], bidirectional=p["bidirectional"],
                               pooling=p["pooling"], attention_units=p["attention_units"], attention_heads=heads,
                               attention_include_padding=p["attention_include_padding"],
                               attention_diversity_margin=p["attention_diversity_margin"],
                               char_embedding_init=p["char_embedding_init"], weight_init=p["weight_init"],
                               zero_ids=(1,) if p["char_ids"] == "printable" else (), name="char_encoder")
    text_tower = keras.Model(sentences, encoder(preprocessor(sentences)), name="text_tower")
    features = keras.Input(shape=(feature_dim,), dtype="float32", name="image_features")
    image_tower = keras.Model(features, LinearImageEncoder(encoder.output_dim, normalize=True,
                                                           torch_bias=p["weight_init"] == "torch",
                                                           name="image_projection")(features), name="image_tower")
    return assemble(text_tower, image_tower, family_loss(model, "triplet", TRIPLET_KEYS, seed))
