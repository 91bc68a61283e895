"""Package layout; everything else is in setup.cfg.

The search spaces stay at the top of the checkout (``tuner/*.toml``), where people read and
edit them; the build maps that folder into the package as ``grounded_text/tuner`` so a
wheel carries them (``grounded_text.tuning.space.tuner_dir`` finds them there).
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["grounded_text", "grounded_text.*"]), "grounded_text.tuner"],
    package_dir={"grounded_text.tuner": "tuner"},
    package_data={"grounded_text.tuner": ["*.toml", "README.md"]},
)
