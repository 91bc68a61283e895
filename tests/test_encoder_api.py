"""``TextEncoder.encode`` with sentence-transformers' arguments, ``encode_iter`` and
``similarity``; one encoder from many threads, one export from many processes, and streaming in
bounded memory (docs/reliability.md, "Encoding: arguments, threads, processes, memory")."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]
SENTENCES = ["a dog runs on the beach", "a man rides a red bike", "two kids play in the snow", "a cat sleeps",
             "", "a dog", "bike", "the snow is white and cold"]


@pytest.fixture(scope="module")
def enc(tiny_export):
    from grounded_text.serving.loader import load

    return load(tiny_export.path, batch_size=4)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def test_encode_takes_sentence_transformers_arguments(enc):
    out = enc.encode(["a", "b"], show_progress_bar=True, normalize_embeddings=True, convert_to_tensor=True)
    assert isinstance(out, tf.Tensor) and out.shape == (2, enc.dim) and out.dtype == tf.float32
    np.testing.assert_allclose(np.linalg.norm(out.numpy(), axis=1), 1.0, rtol=1e-5)
    plain = enc.encode(SENTENCES)
    assert plain.dtype == np.float32 and plain.shape == (len(SENTENCES), enc.dim)
    np.testing.assert_allclose(enc.encode(SENTENCES, normalize_embeddings=True),
                               plain / np.linalg.norm(plain, axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="show_progress"):
        enc.encode(SENTENCES, show_progress=True)  # the older name, deprecated in 0.2.0, is gone
    half = enc.encode(SENTENCES, precision="float16")
    assert half.dtype == np.float16 and np.allclose(half, plain, rtol=1e-2, atol=1e-2)
    rows = enc.encode(SENTENCES[:3], convert_to_numpy=False)
    assert isinstance(rows, list) and len(rows) == 3 and rows[0].shape == (enc.dim,)
    one = enc.encode("a dog runs on the beach", convert_to_tensor=True)
    assert isinstance(one, tf.Tensor) and one.shape == (enc.dim,)
    assert enc.encode([], convert_to_tensor=True).shape == (0, enc.dim)
    with pytest.raises(ValueError, match=r"precision must be one of \['float32', 'float16', 'int8', "):
        enc.encode(SENTENCES, precision="int4")
    with pytest.raises(TypeError, match="sentence 1 is a int"):
        enc.encode(["a", 3])


def test_encode_takes_mtebs_keywords_and_places_the_computation(enc):
    plain = enc.encode(SENTENCES)
    # Prompts and task names have no effect: these models take no instructions.
    np.testing.assert_array_equal(enc.encode(SENTENCES, device="cpu", prompt_name=None, task_name="STSBenchmark",
                                             prompt="query: ", prompt_type="query", hf_split="test",
                                             hf_subset="default", task_metadata=None), plain)
    for device in ("CPU", "cpu:0", "/CPU:0", "/device:CPU:0"):
        np.testing.assert_array_equal(enc.encode(SENTENCES, device=device), plain)
    with pytest.raises(ValueError, match=r"unknown device 'tpu'; expected 'cpu', 'gpu', 'gpu:N', 'cuda'"):
        enc.encode(SENTENCES, device="tpu")
    gpus = len(tf.config.list_logical_devices("GPU"))
    with pytest.raises(ValueError, match=rf"device 'cuda:{gpus}' asks for GPU {gpus}, but TensorFlow sees {gpus}"):
        enc.encode(SENTENCES, device=f"cuda:{gpus}")
    with pytest.raises(TypeError, match="unexpected keyword argument 'normalise_embeddings'"):
        enc.encode(SENTENCES, normalise_embeddings=True)


def test_similarity_pairwise_is_the_row_wise_cosine(enc):
    a, b = enc.encode(SENTENCES[:4]), enc.encode(SENTENCES[4:])
    pairwise = enc.similarity_pairwise(a, b)
    assert pairwise.shape == (4,) and pairwise.dtype == np.float32
    np.testing.assert_allclose(pairwise, np.diag(enc.similarity(a, b)), atol=1e-6)
    assert enc.similarity_pairwise(a[0], a[0]).shape == (1,)
    assert isinstance(enc.similarity_pairwise(tf.constant(a), b), tf.Tensor)
    with pytest.raises(ValueError, match=r"a is \[4, \d+\] and b is \[3, \d+\]"):
        enc.similarity_pairwise(a, b[:3])


def test_a_0d_string_tensor_is_one_sentence(enc):
    expected = enc.encode("a dog")
    for one in (tf.constant("a dog"), np.array("a dog"), b"a dog"):
        got = enc.encode(one)
        assert got.shape == (enc.dim,)
        np.testing.assert_array_equal(got, expected)


def test_similarity_is_the_cosine_of_every_pair(enc):
    a, b = enc.encode(SENTENCES[:3]), enc.encode(SENTENCES[3:8])
    sim = enc.similarity(a, b)
    assert isinstance(sim, np.ndarray) and sim.shape == (3, 5) and sim.dtype == np.float32
    norm = np.linalg.norm
    expected = np.array([[x @ y / (norm(x) * norm(y)) if norm(x) and norm(y) else 0.0 for y in b] for x in a])
    np.testing.assert_allclose(sim, expected, rtol=1e-5, atol=1e-6)
    as_tensor = enc.similarity(tf.constant(a), b)
    assert isinstance(as_tensor, tf.Tensor) and as_tensor.shape == (3, 5)
    assert enc.similarity(a[0], b).shape == (1, 5)  # one vector is one row
    with pytest.raises(TypeError, match="encode the sentences first"):
        enc.similarity(["a dog"], b)
    with pytest.raises(ValueError, match="widths differ"):
        enc.similarity(a, b[:, :3])


def test_a_generator_is_streamed_in_batches_with_the_vectors_of_a_list(enc):
    expected = enc.encode(SENTENCES)
    np.testing.assert_array_equal(enc.encode(s for s in SENTENCES), expected)
    read = []

    def sentences():
        for s in SENTENCES:
            read.append(s)
            yield s

    parts = enc.encode_iter(sentences(), batch_size=3)
    first = next(parts)
    assert first.shape == (3, enc.dim) and len(read) <= 4  # read lazily, one batch ahead at most
    rest = list(parts)
    assert [len(p) for p in rest] == [3, 2]
    np.testing.assert_array_equal(np.concatenate([first, *rest]), expected)
    with pytest.raises(TypeError, match="sentence 4 is a NoneType"):
        list(enc.encode_iter(iter(["a", "b", "c", "d", None]), batch_size=2))


def test_eight_threads_on_one_encoder_get_the_single_threaded_vectors(enc):
    sentences = [f"{s} number {i}" for i in range(64) for s in SENTENCES[:4]]
    sizes = [4, 8, 16, 32]
    # Single-threaded first: each thread's own call (its order, its batch size), one at a time.
    single = {k: enc.encode(sentences[k:] + sentences[:k], batch_size=sizes[k % 4]) for k in range(8)}
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(k: int) -> None:
        try:
            barrier.wait()
            mine = sentences[k:] + sentences[:k]  # each thread its own order and batch boundaries
            results[k] = enc.encode(mine, batch_size=sizes[k % 4])
        except BaseException as e:  # noqa: BLE001 — reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert len(results) == 8
    for k, out in results.items():
        np.testing.assert_array_equal(out, single[k], err_msg=f"thread {k}")
        # ... and, put back in order, the vectors of one call on the whole list (to float rounding).
        np.testing.assert_allclose(np.roll(out, k, axis=0), single[0], rtol=1e-5, atol=1e-6)


_LOAD_AND_ENCODE = """
import sys, numpy as np
from grounded_text.serving.loader import load
enc = load(sys.argv[1], batch_size=4)
np.save(sys.argv[2], enc.encode(sys.argv[3:]))
"""


@pytest.mark.slow
def test_one_export_loaded_by_four_processes_at_once(enc, tiny_export, tmp_path):
    expected = enc.encode(SENTENCES[:4])
    procs = [subprocess.Popen([sys.executable, "-c", _LOAD_AND_ENCODE, str(tiny_export.path),
                               str(tmp_path / f"{k}.npy"), *SENTENCES[:4]], cwd=REPO, env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(4)]
    for k, proc in enumerate(procs):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        np.testing.assert_allclose(np.load(tmp_path / f"{k}.npy"), expected, rtol=1e-6, atol=1e-6)


def _bench(export: Path, count: int) -> dict:
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "bench_streaming_encode.py"), str(export), str(count)],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_streaming_a_million_sentences_keeps_memory_flat(tiny_export):
    small = _bench(tiny_export.path, 10_000)
    large = _bench(tiny_export.path, 1_000_000)
    assert small["sentences"] == 10_000 and large["sentences"] == 1_000_000
    assert large["peak_rss_mib"] - small["peak_rss_mib"] < 200, (small, large)


def test_a_long_list_is_encoded_longest_first_and_returned_in_its_own_order(enc):
    sentences = ["a", "a dog runs on the beach today", "cat", "two kids play in the snow", "a man",
                 "a red bike", "dog", "the sleeping cat"]
    seen = []
    module = enc.module
    def spy(batch):
        seen.append([s.decode() for s in batch.numpy()])
        return module(batch)

    enc_calls = dataclasses.replace(enc, module=spy, batch_size=4)
    got = enc_calls.encode(sentences)
    alone = np.stack([enc.encode(s) for s in sentences])  # each sentence in its own call
    np.testing.assert_allclose(got, alone, atol=1e-6)
    assert [len(s) for s in seen[0]] == sorted((len(s) for s in sentences), reverse=True)[:4]
    assert enc_calls.encode(sentences[:3]).shape == (3, enc.dim)  # one batch: no reordering needed


def test_sentence_transformers_attributes_of_a_shipped_model():
    import grounded_text as gt
    from grounded_text.serving.encoder import TextEncoder

    shipped = gt.load("vete_bow_flickr8k")
    assert shipped.get_sentence_embedding_dimension() == 128 == shipped.dim
    assert shipped.similarity_fn_name == "cosine"
    # the export's per-sentence cut, in characters (UTF-8 bytes): 16,384 for every export of the package
    limits = json.loads((Path(shipped.handle) / "assets" / "config.json").read_text())["input_limits"]
    assert shipped.max_seq_length == limits["max_bytes"] == 16384
    plain = shipped.encode(SENTENCES)
    np.testing.assert_array_equal(shipped.encode_query(SENTENCES), plain)
    np.testing.assert_array_equal(shipped.encode_document(SENTENCES, normalize_embeddings=True),
                                  shipped.encode(SENTENCES, normalize_embeddings=True))
    assert TextEncoder.encode_query is TextEncoder.encode_document is TextEncoder.encode
    # Both are fixed by the SavedModel: setting them is refused rather than silently ignored.
    with pytest.raises(AttributeError):
        shipped.max_seq_length = 256
    with pytest.raises(AttributeError):
        shipped.similarity_fn_name = "dot"


def test_max_seq_length_is_the_exports_cut_or_a_character_models_own():
    from grounded_text import shipped
    from grounded_text.serving.integrity import read_export_config
    from grounded_text.serving.loader import _max_seq_length

    assert _max_seq_length(None) is None and _max_seq_length({}) is None  # a module that records no cut
    cut = {"input_limits": {"max_bytes": 16384, "max_words": 512}}
    assert _max_seq_length(cut) == 16384
    assert _max_seq_length({**cut, "model": {"name": "char_gru_attention_512", "encoder": {"max_chars": 300}}}) == 300
    assert _max_seq_length({**cut, "model": {"encoder": {"max_chars": None}}}) == 16384
    for name in shipped.names():  # the character model reads up to the same cut
        assert _max_seq_length(read_export_config(shipped.export_dir(name))) == 16384, name
