"""Names the command lines offer that live in modules importing TensorFlow.

``--help`` and argument errors must answer at once, so a parser takes its ``choices``
from here rather than from the module that builds the thing (the config's own choices
are in ``grounded_text.config.schema``, which is light already). Each tuple mirrors the list its
module checks against; ``tests/test_packaging.py`` fails when the two differ.
"""

#: ``grounded_text.vision.networks.NETWORK_NAMES`` (that module imports TensorFlow).
NETWORK_NAMES = ("inception_v3", "resnet152", "resnet50", "vgg19", "efficientnet_b0", "efficientnet_lite0",
                 "efficientnet_lite0_ra")
