"""MTEB's own evaluator scores a shipped model as ``grounded-text evaluate`` does.

MTEB's STS task classes (STSBenchmark, SICK-R) are fed the local STS-B and SICK test files,
built in memory, so that nothing is downloaded (the Hugging Face hub is set offline);
``mteb.evaluate`` then calls ``TextEncoder`` through MTEB's encoder protocol (``encode`` on a
DataLoader, ``similarity_pairwise``, ``mteb_model_meta``), and its Pearson and Spearman must
equal ours to 1e-4.

mteb brings PyTorch, so it is an extra of its own (``[mteb]``): without it this module skips,
unless ``GROUNDED_TEXT_REQUIRE_MTEB=1`` (the CI job that installs it), where it fails.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("mteb") is None:
    if os.environ.get("GROUNDED_TEXT_REQUIRE_MTEB") == "1":
        raise RuntimeError("GROUNDED_TEXT_REQUIRE_MTEB=1 but mteb is not installed: pip install '.[mteb]'")
    pytest.skip("mteb is not installed (pip install 'grounded_text[mteb]', after PyTorch's CPU build)",
                allow_module_level=True)

# The hub is read offline: set before mteb (and huggingface_hub, datasets) are first imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

pytestmark = pytest.mark.xdist_group("mteb")


def _task(name: str, pairs):
    """MTEB's task class ``name`` holding ``pairs`` as its test split (no download)."""
    import mteb
    from datasets import Dataset, DatasetDict

    task = mteb.get_task(name)
    rows = {"sentence1": list(pairs.sentences1), "sentence2": list(pairs.sentences2),
            "score": [float(x) for x in pairs.scores]}
    task.dataset = {"default": DatasetDict({"test": Dataset.from_dict(rows)})}
    task.data_loaded = True
    return task


def test_mteb_scores_a_shipped_model_as_evaluate_does(data_dir):
    import mteb

    import grounded_text as gt
    from grounded_text.data.sts import read_sick, read_sts_benchmark

    enc = gt.load("vete_bow_flickr8k")
    ours = gt.evaluate(enc, data_dir=data_dir, sections=["sts"], years="STS16")["sts"]
    sts_dir = data_dir / "sts"
    tasks = [_task("STSBenchmark", read_sts_benchmark(sts_dir, "test")), _task("SICK-R", read_sick(sts_dir, "test"))]
    result = mteb.evaluate(enc, tasks, cache=None, co2_tracker=False, show_progress_bar=False,
                           encode_kwargs={"batch_size": 256, "show_progress_bar": False})
    theirs = {r.task_name: r.scores["test"][0] for r in result.task_results}
    for task, key in (("STSBenchmark", "STSBenchmark"), ("SICK-R", "SICK")):
        for metric in ("pearson", "spearman"):
            # MTEB's "pearson"/"spearman" use the model's own similarity_pairwise; its
            # cosine_* figures are its own cosine: both must equal ours.
            assert theirs[task][metric] == pytest.approx(ours[key]["test"][metric], abs=1e-4), (task, metric)
            assert theirs[task][f"cosine_{metric}"] == pytest.approx(ours[key]["test"][metric], abs=1e-4)
    metrics = ("pearson", "spearman")
    print("mteb", {task: {m: round(theirs[task][m], 6) for m in metrics} for task in theirs},
          "ours", {key: {m: round(ours[key]["test"][m], 6) for m in metrics} for key in ("STSBenchmark", "SICK")})


def test_the_encoder_meets_mtebs_protocol():
    import numpy as np
    from mteb.models import EncoderProtocol

    import grounded_text as gt

    enc = gt.load("vete_bow_flickr8k")
    assert isinstance(enc, EncoderProtocol)
    meta = enc.mteb_model_meta
    assert (meta.name, meta.embed_dim, meta.revision) == ("grounded_text/vete_bow_flickr8k", 128, gt.__version__)
    from torch.utils.data import DataLoader

    texts = ["a dog runs", "two kids play in the snow", "a man cooks"]
    loader = DataLoader([{"text": t} for t in texts], batch_size=2)
    np.testing.assert_allclose(enc.encode(loader, task_metadata=None, hf_split="test", hf_subset="default",
                                          prompt_type=None, batch_size=2, show_progress_bar=False),
                               enc.encode(texts), atol=1e-6)


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_quantised_codes_are_sentence_transformers_own(precision):
    # sentence-transformers comes with mteb (the [mteb] extra): its quantize_embeddings on the
    # same float32 vectors, with the batch's ranges, the same calibration, the same ranges.
    import numpy as np
    from sentence_transformers.util import quantize_embeddings
    from torch.utils.data import DataLoader

    import grounded_text as gt

    enc = gt.load("vete_bow_flickr8k")
    texts = ["a dog runs on the grass", "two kids play in the snow", "a man cooks", "", "a red bike",
             "a cat sleeps on a sofa", "boats on a lake at dawn", "people walk in a busy street"]
    floats = enc.encode(texts)
    calibration = enc.encode([t + " today" for t in texts] + ["a black dog jumps", "a woman reads a book"])
    ours = enc.encode(texts, precision=precision)
    assert ours.dtype == quantize_embeddings(floats, precision=precision).dtype
    assert ours.shape == (len(texts), 128 if precision.endswith("int8") else 16)
    np.testing.assert_array_equal(ours, quantize_embeddings(floats, precision=precision))
    # MTEB forwards precision with a DataLoader of its batches: the same codes.
    loader = DataLoader([{"text": t} for t in texts], batch_size=3)
    np.testing.assert_array_equal(enc.encode(loader, precision=precision), ours)
    if precision.endswith("int8"):
        ranges = np.stack([calibration.min(axis=0) - 0.01, 0.9 * calibration.max(axis=0)])
        np.testing.assert_array_equal(enc.encode(texts, precision=precision, calibration_embeddings=calibration),
                                      quantize_embeddings(floats, precision=precision,
                                                          calibration_embeddings=calibration))
        np.testing.assert_array_equal(enc.encode(texts, precision=precision, ranges=ranges),
                                      quantize_embeddings(floats, precision=precision, ranges=ranges))
