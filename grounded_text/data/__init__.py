"""Data readers: Flickr8k release, ``.npz`` image features, caption/image pairs, STS, downloads."""

from grounded_text.utils.lazy import lazy_getattr

# Lazy: `data.paths` and `data.download` serve the CLIs' --help without importing TensorFlow.
_EXPORTS = {
    "FeatureStore": "features", "load_npz_features": "features", "open_feature_store": "features",
    "Caption": "flickr8k", "read_flickr8k": "flickr8k", "CaptionPairs": "pairs", "SplitPairs": "pairs",
    "load_flickr8k_pairs": "pairs", "make_dataset": "pairs", "make_grouped_dataset": "sampler",
    "DATA_ENV_VAR": "paths", "resolve_data_dir": "paths",
}
__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
