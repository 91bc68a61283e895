"""Data readers: Flickr8k release, ``.npz`` image features, caption/image pairs, STS."""

from grounded_text.data.features import FeatureStore, load_npz_features, open_feature_store
from grounded_text.data.flickr8k import Caption, read_flickr8k
from grounded_text.data.pairs import CaptionPairs, SplitPairs, load_flickr8k_pairs, make_dataset
from grounded_text.data.sampler import make_grouped_dataset
from grounded_text.data.paths import DATA_ENV_VAR, resolve_data_dir

__all__ = [
    "Caption", "CaptionPairs", "DATA_ENV_VAR", "FeatureStore", "SplitPairs",
    "load_flickr8k_pairs", "load_npz_features", "open_feature_store", "make_dataset", "make_grouped_dataset", "read_flickr8k", "resolve_data_dir",
]
