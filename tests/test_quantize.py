"""``encode(precision=...)``'s quantised forms (int8, uint8, binary, ubinary) against a reference
written here, element by element, from sentence-transformers' ``quantize_embeddings``
(``sentence_transformers/util/quantization.py``, 6.3): per-dimension ranges from ``ranges``, the
calibration vectors or the batch; ``floor((x - lo) / ((hi - lo) / 255))`` clipped to 0..255 in
float32, minus 128 for int8; sign bits packed most significant first, minus 128 for binary.
tests/test_mteb.py checks the same codes against sentence-transformers' own function where it is
installed (the ``[mteb]`` extra)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf

SENTENCES = ["a dog runs on the grass", "a cat sleeps on a sofa", "two men ride bikes down a hill",
             "a child plays in the snow", "", "a red car", "people walk in a busy street at night",
             "a brown dog catches a frisbee", "a woman reads a book", "boats on a lake"]


@pytest.fixture(scope="module")
def enc():
    import grounded_text as gt

    return gt.load("vete_bow_flickr8k")


def _scalar_reference(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, signed: bool) -> np.ndarray:
    """Codes computed one element at a time in float32 scalars (sentence-transformers' dtypes)."""
    out = np.empty(x.shape, np.int8 if signed else np.uint8)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            step = (np.float32(hi[j]) - np.float32(lo[j])) / np.float32(255)
            step = np.float32(1) if step == 0 else step
            code = min(max(float(np.floor((np.float32(x[i, j]) - np.float32(lo[j])) / step)), 0.0), 255.0)
            out[i, j] = int(code) - 128 if signed else int(code)
    return out


def _binary_reference(x: np.ndarray, signed: bool) -> np.ndarray:
    """Each row's sign bits, eight to a byte, the first dimension in the top bit; a last byte
    with fewer than eight dimensions is padded with zero bits."""
    rows = []
    for row in x:
        bits = [1 if v > 0 else 0 for v in row]
        bits += [0] * (-len(bits) % 8)
        rows.append([sum(bit << (7 - k) for k, bit in enumerate(bits[b:b + 8])) for b in range(0, len(bits), 8)])
    codes = np.array(rows, np.int64)
    return (codes - 128).astype(np.int8) if signed else codes.astype(np.uint8)


def test_quantised_precisions_equal_the_reference_with_the_batch_ranges(enc):
    # The same batches as the float call: a batch's padding moves the last bit of a float.
    floats = enc.encode(SENTENCES, batch_size=4)
    lo, hi = floats.min(axis=0), floats.max(axis=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        int8 = enc.encode(SENTENCES, precision="int8", batch_size=4)  # ranges over all three batches
        uint8 = enc.encode(SENTENCES, precision="uint8", batch_size=4)
    assert int8.dtype == np.int8 and int8.shape == (len(SENTENCES), 128)
    np.testing.assert_array_equal(int8, _scalar_reference(floats, lo, hi, signed=True))
    np.testing.assert_array_equal(uint8, _scalar_reference(floats, lo, hi, signed=False))
    assert int8.min() == -128 and uint8.min() == 0  # each dimension's minimum is the lowest code
    # Ranges from 10 vectors: said once per call, in one warning naming the count.
    assert [str(w.message).split(";")[0] for w in caught] == ["int8 ranges computed from 10 embeddings",
                                                              "uint8 ranges computed from 10 embeddings"]
    binary = enc.encode(SENTENCES, precision="binary", batch_size=4)
    assert binary.dtype == np.int8 and binary.shape == (len(SENTENCES), 16)
    np.testing.assert_array_equal(binary, _binary_reference(floats, signed=True))
    np.testing.assert_array_equal(enc.encode(SENTENCES, precision="ubinary", batch_size=4),
                                  _binary_reference(floats, signed=False))
    # normalize_embeddings comes first, as in sentence-transformers: the codes are of the unit vectors.
    unit = enc.encode(SENTENCES, normalize_embeddings=True)
    np.testing.assert_array_equal(
        enc.encode(SENTENCES, normalize_embeddings=True, precision="uint8"),
        _scalar_reference(unit, unit.min(axis=0), unit.max(axis=0), signed=False))


def test_calibration_and_ranges_fix_the_codes(enc):
    calibration = enc.encode(SENTENCES)
    query = ["a dog plays in the snow", "a bike"]
    floats = enc.encode(query)
    lo, hi = calibration.min(axis=0), calibration.max(axis=0)
    want = _scalar_reference(floats, lo, hi, signed=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # calibration given: no warning about the ranges
        np.testing.assert_array_equal(enc.encode(query, precision="int8", calibration_embeddings=calibration), want)
        np.testing.assert_array_equal(enc.encode(query, precision="int8", ranges=np.stack([lo, hi]).tolist()), want)
        one = enc.encode(query[0], precision="uint8", calibration_embeddings=calibration)
        assert one.shape == (128,) and one.dtype == np.uint8
        np.testing.assert_array_equal(one, _scalar_reference(floats[:1], lo, hi, signed=False)[0])
        # encode_iter: each batch cut by the same ranges, so the stream is the whole call.
        streamed = np.concatenate(list(enc.encode_iter(iter(query * 3), batch_size=2, precision="int8",
                                                       calibration_embeddings=calibration)))
        np.testing.assert_array_equal(streamed, np.concatenate([want] * 3))
    # Values beyond the calibration's range are clipped to the end codes.
    wide = np.stack([lo + 0.5 * (hi - lo), hi]).astype(np.float32)
    clipped = enc.encode(query, precision="uint8", ranges=wide)
    np.testing.assert_array_equal(clipped, _scalar_reference(floats, wide[0], wide[1], signed=False))
    assert (clipped == 0).any()


def test_quantised_outputs_keep_encodes_other_forms(enc):
    tensor = enc.encode(SENTENCES[:3], precision="binary", convert_to_tensor=True)
    assert isinstance(tensor, tf.Tensor) and tensor.dtype == tf.int8 and tensor.shape == (3, 16)
    rows = enc.encode(SENTENCES[:3], precision="ubinary", convert_to_numpy=False)
    assert len(rows) == 3 and rows[0].shape == (16,) and rows[0].dtype == np.uint8
    for precision, dtype, width in (("int8", np.int8, 128), ("binary", np.int8, 16), ("ubinary", np.uint8, 16)):
        empty = enc.encode([], precision=precision)
        assert empty.shape == (0, width) and empty.dtype == dtype
    assert enc.encode("one sentence", precision="binary").shape == (16,)
    assert enc.encode(SENTENCES, precision="float16").dtype == np.float16


@pytest.mark.parametrize("kwargs, message", [
    ({"precision": "int4"}, r"precision must be one of \['float32', 'float16', 'int8', 'uint8', 'binary', 'ubinary'\]"),
    ({"precision": "int8", "sentences": "one"}, "cannot compute int8 ranges from a single embedding"),
    ({"precision": "binary", "ranges": np.zeros((2, 128))}, "apply to precision 'int8' or 'uint8' only"),
    ({"precision": "int8", "ranges": np.zeros((3, 128))}, r"ranges must be \[2, 128\]"),
    ({"precision": "uint8", "calibration_embeddings": np.zeros((4, 64))}, r"must be a float array \[rows, 128\]"),
    ({"precision": "uint8", "calibration_embeddings": np.zeros((0, 128))}, "holds no rows"),
])
def test_bad_precision_arguments_are_refused_before_any_work(enc, kwargs, message):
    sentences = kwargs.pop("sentences", SENTENCES)
    with pytest.raises(ValueError, match=message):
        enc.encode(sentences, **kwargs)


def test_a_stream_refuses_int8_without_fixed_ranges(enc):
    with pytest.raises(ValueError, match=r"encode_iter: precision='int8' needs ranges= or calibration_embeddings="):
        next(enc.encode_iter(iter(SENTENCES), precision="int8"))
    assert next(enc.encode_iter(iter(SENTENCES), precision="binary", batch_size=4)).shape == (4, 16)


def test_similarity_of_scalar_codes_is_their_cosine_as_numbers(enc):
    codes = enc.encode(SENTENCES, precision="int8")
    as_float = codes.astype(np.float64)
    want = (as_float / np.linalg.norm(as_float, axis=1, keepdims=True)) @ (
        as_float / np.linalg.norm(as_float, axis=1, keepdims=True)).T
    np.testing.assert_allclose(enc.similarity(codes, codes), want, rtol=1e-5, atol=1e-6)
