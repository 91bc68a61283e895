"""Image features from raw images: ImageNet CNNs (keras.applications, and the shipped
EfficientNet-Lite0 with its one-off weight converter), single/ten-crop views, the photos of a
folder, a tf.data extractor and resumable feature-store sinks. See docs/features.md."""

import importlib

_EXPORTS = {
    "TEN_CROP_ORDER": "crops", "single_crop": "crops", "ten_crop_resize": "crops",
    "ten_crops": "crops",
    "ExtractionReport": "extractor", "extract_features": "extractor",
    "image_folder_dataset": "extractor", "list_image_files": "extractor",
    "read_ids_file": "extractor",
    "NETWORK_NAMES": "networks", "FeatureNetwork": "networks", "NetworkSpec": "networks",
    "WeightsUnavailableError": "networks", "get_spec": "networks",
    "NpzFeatureSink": "sinks", "PartFiles": "sinks",
    "PHOTO_EXTENSIONS": "folders", "PhotoFile": "folders", "scan_photos": "folders",
}
__all__ = list(_EXPORTS)


def __getattr__(name):  # lazy: `vision.sinks` needs only NumPy, not TensorFlow.
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"grounded_text.vision.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'grounded_text.vision' has no attribute {name!r}")
