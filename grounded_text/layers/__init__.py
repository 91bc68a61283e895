"""Keras 3 layers of grounded_text (each registered for ``.keras`` serialisation)."""

from grounded_text.layers.bow_encoder import BagOfWordsEncoder
from grounded_text.layers.branches import GroundedProjection, LinearImageEncoder, MLPBranch
from grounded_text.layers.char_encoder import (
    CharacterEncoder,
    CharacterPreprocessor,
    build_character_vocabulary,
    split_characters,
)
from grounded_text.layers.cnn_encoder import KimCNNEncoder
from grounded_text.layers.pooling import (
    ScalarAttentionPooling,
    VectorAttentionPooling,
    last_valid,
    masked_max,
    masked_mean,
)
from grounded_text.layers.rnn_encoder import RNNEncoder
from grounded_text.layers.stacked_rnn import StackedRNN
from grounded_text.layers.text_preprocessor import TextPreprocessor, build_vocabulary, tokenize

__all__ = [
    "ScalarAttentionPooling",
    "VectorAttentionPooling",
    "BagOfWordsEncoder",
    "CharacterEncoder",
    "CharacterPreprocessor",
    "GroundedProjection",
    "KimCNNEncoder",
    "LinearImageEncoder",
    "MLPBranch",
    "RNNEncoder",
    "StackedRNN",
    "TextPreprocessor",
    "build_character_vocabulary",
    "build_vocabulary",
    "last_valid",
    "masked_max",
    "masked_mean",
    "split_characters",
    "tokenize",
]
