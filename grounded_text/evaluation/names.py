"""The names the evaluate command offers (sections, baselines, SentEval tasks), in a module that
imports nothing: its ``--help`` and flag errors answer before TensorFlow loads. The modules that
score them (``suite``, ``encoders``, ``transfer``) take their names from here."""

#: The sections of the full suite (``grounded_text.evaluation.suite.evaluate_encoders``).
EVALUATION_SECTIONS = ("sts", "supervised", "retrieval", "structure", "same_image")
#: The baseline encoders (``grounded_text.evaluation.encoders.baseline_encoder``).
BASELINE_ENCODERS = ("glove", "word2vec")
#: The SentEval transfer tasks (``grounded_text.evaluation.transfer``) and SentEval's default seed.
TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "SICKEntailment", "SNLI")
SENTEVAL_SEED = 1111
#: The pair features of the SentEval pair tasks (``grounded_text.evaluation.transfer.PAIR_FEATURE_SETS``).
PAIR_FEATURE_SET_NAMES = ("uv_absdiff_prod", "absdiff_prod")
#: The suite's baselines by default (``--full``) and their labels in its report.
SUITE_BASELINES = ("glove", "word2vec")
SUITE_BASELINE_LABELS = {"glove": "GloVe-mean (6B 50d)", "word2vec": "word2vec-mean (Flickr8k train)"}
