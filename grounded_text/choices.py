"""Names the command lines offer, importable without TensorFlow.

``--help`` and argument errors must answer at once, so the parsers take their
``choices`` from here rather than from the modules that build models (which import
TensorFlow). Each tuple mirrors the list its module checks against;
``tests/test_packaging.py`` fails when the two differ.
"""

#: ``grounded_text.models.registry.SAMPLERS``.
SAMPLERS = ("random", "grouped")
#: ``grounded_text.models.registry.SCHEDULES``.
SCHEDULES = ("constant", "cyclic_cosine", "warm_restarts")
#: ``grounded_text.models.registry.SELECT_ON``: VETE's STS16 mean Pearson, the dev loss,
#: dev retrieval rsum (the training task; Merckx & Frank), or the last epoch.
SELECT_ON = ("avg2016", "val_loss", "dev_retrieval", "last")
#: The keys of ``grounded_text.models.components.LOSSES``.
LOSS_NAMES = ("pearson", "covariance", "skt", "rank", "triplet", "cluster", "perceptual", "grounding",
              "cross_modal")
#: ``grounded_text.training.distribute.STRATEGIES``.
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
#: ``grounded_text.vision.networks.NETWORK_NAMES``.
NETWORK_NAMES = ("inception_v3", "resnet152", "resnet50", "vgg19", "efficientnet_b0")
#: ``grounded_text.evaluation.report.BASELINES`` (that module imports SciPy: seconds).
BASELINES = ("glove", "word2vec")
