"""Image features from raw images: ImageNet CNNs (keras.applications), single/ten-crop
views, a tf.data extractor and resumable feature-store sinks. See docs/features.md."""

from grounded_text.vision.crops import TEN_CROP_ORDER, single_crop, ten_crop_resize, ten_crops
from grounded_text.vision.extractor import (
    ExtractionReport,
    extract_features,
    image_folder_dataset,
    list_image_files,
    read_ids_file,
)
from grounded_text.vision.networks import (
    NETWORK_NAMES,
    FeatureNetwork,
    NetworkSpec,
    WeightsUnavailableError,
    get_spec,
)
from grounded_text.vision.sinks import NpzFeatureSink

__all__ = [
    "TEN_CROP_ORDER", "single_crop", "ten_crop_resize", "ten_crops", "ExtractionReport",
    "extract_features", "image_folder_dataset", "list_image_files", "read_ids_file",
    "NETWORK_NAMES", "FeatureNetwork", "NetworkSpec", "WeightsUnavailableError", "get_spec",
    "NpzFeatureSink",
]
