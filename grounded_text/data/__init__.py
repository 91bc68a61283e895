"""Data readers: Flickr8k release, ``.npz`` image features, caption/image pairs, STS, downloads."""

import importlib

# Lazy: `data.paths` and `data.download` serve the CLIs' --help without importing TensorFlow.
_EXPORTS = {
    "FeatureStore": "features", "load_npz_features": "features", "open_feature_store": "features",
    "Caption": "flickr8k", "read_flickr8k": "flickr8k", "CaptionPairs": "pairs", "SplitPairs": "pairs",
    "load_flickr8k_pairs": "pairs", "make_dataset": "pairs", "make_grouped_dataset": "sampler",
    "DATA_ENV_VAR": "paths", "resolve_data_dir": "paths",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"grounded_text.data.{_EXPORTS[name]}"), name)
    try:  # a submodule the eager imports used to load as a side effect
        return importlib.import_module(f"grounded_text.data.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"grounded_text.data.{name}":
            raise
    raise AttributeError(f"module 'grounded_text.data' has no attribute {name!r}")
