"""Package layout; everything else is in setup.cfg.

The search spaces stay at the top of the checkout (``tuner/*.toml``), where people read and
edit them; the build maps that folder into the package as ``grounded_text/tuner`` so a
wheel carries them (``grounded_text.tuning.space.tuner_dir`` finds them there).

The shipped trained models (``grounded_text/shipped/<name>/``: a text and an image
SavedModel, a card and ``model.json``) are package data, so ``gt.load(NAME)`` works offline
straight after ``pip install``, and so are the weights of the image network their image
towers read (beside them in ``grounded_text/shipped/``), so that photos reach them offline too.
"""

from setuptools import find_packages, setup

#: Every file of a shipped model's folder (SavedModels: saved_model.pb, fingerprint.pb,
#: variables/, assets/), for each of its two towers.
_SHIPPED = ["*/model.json"] + [f"*/{tower}/{files}" for tower in ("export", "image_export")
                               for files in ("*", "variables/*", "assets/*")]

setup(
    packages=[*find_packages(include=["grounded_text", "grounded_text.*"]), "grounded_text.tuner"],
    package_dir={"grounded_text.tuner": "tuner"},
    package_data={"grounded_text.tuner": ["*.toml", "README.md"],
                  # the trained models, and Google's EfficientNet-Lite0 ImageNet weights their image
                  # towers read (grounded_text.vision.lite0)
                  "grounded_text.shipped": [*_SHIPPED, "*.weights.h5"],
                  # the SHA-256 of every unpacked file of each dataset's release
                  "grounded_text.data.download": ["manifest.json"]},
)
