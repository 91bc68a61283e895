"""The char model's cuDNN eligibility check and the char-speed benchmark's padding figures.

No timing here: speeds belong in the benchmark's output (docs/performance.md).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from grounded_text.benchmarks.cudnn import mask_statistics, padding_report, recurrent_layers, rnn_cudnn_report
from grounded_text.layers.char_encoder import CharacterPreprocessor
from grounded_text.models import build_model
from grounded_text.models.registry import preset_config

CAPTIONS = ["A dog runs .", "Two children play on the beach .", "A man", "Kids jump into a pool ."]


def _paper_char_model(units: int = 8):
    # The paper's configuration at a small size: eligibility does not depend on units.
    cfg = preset_config("char_gru_attention", {"model": {"embedding_dim": 2 * units, "encoder": {"units": units}}})
    return build_model(cfg.model, cfg.text, None, feature_dim=6, train_captions=CAPTIONS)


def test_paper_char_encoder_is_cudnn_eligible():
    model = _paper_char_model()
    rows = rnn_cudnn_report(model.text_tower)
    assert [r["type"] for r in rows] == ["GRU", "GRU"]  # both directions of the bidirectional GRU
    assert sorted(r["go_backwards"] for r in rows) == [False, True]
    for r in rows:
        assert r["eligible"] and r["arguments_ok"] and r["reasons"] == [], r
        assert r["check"].startswith("keras ")  # Keras' own predicate, not a copy
        assert r["on_this_machine"] == r["gpu_available"]


@pytest.mark.parametrize("kwargs, reason", [
    ({"reset_after": False}, "reset_after=False"),
    ({"recurrent_dropout": 0.1}, "recurrent_dropout=0.1"),
    ({"activation": "relu"}, "activation=relu"),
    ({"unroll": True}, "unroll=True"),
    ({"use_cudnn": False}, "use_cudnn=False"),
])
def test_configurations_that_break_cudnn_are_reported(kwargs, reason):
    ids = keras.Input(shape=(None,), dtype="int64")
    h = keras.layers.Embedding(10, 4)(ids)
    h = keras.layers.Bidirectional(keras.layers.GRU(3, return_sequences=True, **kwargs))(h)
    rows = rnn_cudnn_report(keras.Model(ids, h))
    assert len(rows) == 2
    for r in rows:
        assert not r["eligible"] and not r["on_this_machine"]
        assert reason in r["reasons"], r


def test_lstm_layers_are_inspected_too():
    lstm = keras.layers.LSTM(3)
    lstm.build((None, 5, 4))
    (row,) = rnn_cudnn_report(lstm)
    assert row["type"] == "LSTM" and row["eligible"]
    assert recurrent_layers(keras.layers.Dense(2)) == []


def test_char_preprocessor_pads_on_the_right():
    pre = CharacterPreprocessor(sorted(set("".join(CAPTIONS))), lowercase=False)
    ids = pre(np.array(["  A dog  ", "Two", "é unseen ~"])).numpy()  # stripped; unseen chars → OOV id, not 0
    s = mask_statistics(ids)
    assert s["right_padded"] and s["fully_masked_rows"] == 0
    assert s["true_lengths"] == [5, 3, 10] and s["padded_length"] == 10
    # An empty caption is a fully padded row: the cuDNN kernel asserts on those.
    assert mask_statistics(pre(np.array(["A", ""])).numpy())["fully_masked_rows"] == 1


def test_mask_statistics_detects_left_and_inner_padding():
    assert not mask_statistics([[0, 0, 3, 4]])["right_padded"]
    assert not mask_statistics([[3, 0, 4, 0]])["right_padded"]
    assert mask_statistics([[3, 4, 0, 0], [5, 6, 7, 8]])["right_padded"]
    with pytest.raises(ValueError):
        mask_statistics([1, 2, 3])


def test_padding_report_on_a_tiny_slice():
    pre = CharacterPreprocessor(sorted(set("".join(CAPTIONS))), lowercase=False)
    lengths = [len(c) for c in CAPTIONS]  # 12, 32, 5, 23 characters (no outer whitespace)
    # Unsorted batches: [12, 32] and [5, 23] → padded to 32 and 23.
    mixed = padding_report([mask_statistics(pre(np.array(CAPTIONS[:2])).numpy()),
                            mask_statistics(pre(np.array(CAPTIONS[2:])).numpy())])
    assert mixed["batches"] == 2 and mixed["rows"] == 4
    assert mixed["mean_padded_length"] == pytest.approx((32 + 23) / 2)
    assert mixed["mean_true_length"] == pytest.approx(sum(lengths) / 4)
    assert mixed["padding_fraction"] == pytest.approx(1 - sum(lengths) / (2 * 32 + 2 * 23))
    assert mixed["right_padded"] and mixed["fully_masked_rows"] == 0
    # Batches of similar lengths, [5, 12] and [23, 32], as bucketing serves them: less padding.
    order = np.argsort(lengths)
    bucketed = padding_report([mask_statistics(pre(np.array(CAPTIONS)[order[:2]]).numpy()),
                               mask_statistics(pre(np.array(CAPTIONS)[order[2:]]).numpy())])
    assert bucketed["mean_padded_length"] == pytest.approx((12 + 32) / 2)
    assert bucketed["mean_true_length"] == pytest.approx(mixed["mean_true_length"])
    assert bucketed["padding_fraction"] == pytest.approx(1 - sum(lengths) / (2 * 12 + 2 * 32))
    with pytest.raises(ValueError):
        padding_report([])


def test_char_speed_table_and_ratios():
    from grounded_text.benchmarks.runs import char_speed_ratios, char_speed_table

    def run(units, bucket, rate, padded):
        return {"units": units, "embedding_dim": 2 * units, "bucket_by_length": bucket, "pairs_per_second": rate,
                "seconds_per_step": {"median": 32 / rate, "min": 32 / rate, "max": 32 / rate},
                "padding": {"mean_padded_length": padded, "mean_true_length": 50.0,
                            "padding_fraction": 1 - 50.0 / padded},
                "loadavg_timing": {"before": [2.0], "after": [2.5]}}

    runs = [run(512, False, 10.0, 80.0), run(512, True, 15.0, 52.0)]
    ratios = char_speed_ratios(runs)
    assert ratios["512"]["pairs_per_second"] == pytest.approx(1.5)
    assert ratios["512"]["mean_padded_length"] == pytest.approx(52 / 80)
    table = char_speed_table({"runs": runs, "ratios": ratios})
    assert table.count("\n") == 3 and "1.50×" in table and "37.5 %" in table


def test_floor_flop_count_and_provisional_flag():
    from grounded_text.benchmarks.floors import char_flops_per_character, char_step_useful_flops, provisional

    # bi-GRU 2·2·3n(d + n) + vector attention 2·2n·a + 2·a·2n, per character, forward.
    assert char_flops_per_character(512, 20, 128) == 2 * 2 * 3 * 512 * 532 + 4 * 1024 * 128
    per_caption = 2 * 1280 * 1024 + 2 * 2 * 1024
    assert char_step_useful_flops([3, 5], 512, 2, 1280) == pytest.approx(
        3 * (8 * char_flops_per_character(512) + 2 * per_caption))
    assert provisional([2.5, 1, 1], [1.0, 1, 1], cores=2) and not provisional([1.9, 9, 9], [2.0, 9, 9], cores=2)


@pytest.mark.slow
def test_benchmark_floors_runs_each_phase_on_real_data(data_dir, tmp_path):
    """``benchmark --floors`` end to end at the smallest sizes: each phase subprocess imports and
    runs (the figures themselves are machine-dependent and are not checked here)."""
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "floors.json"
    env = dict(os.environ, GROUNDED_TEXT_DATA=str(data_dir), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-m", "grounded_text.benchmark", "--floors", "--units", "8",
                           "--steps", "1", "--warmup", "1", "--images", "4", "--repeats", "1",
                           "--batch-sizes", "1", "--min-seconds", "0.01", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [r["units"] for r in report["char"]] == [8]
    assert set(report["char"][0]["variants"]) == {"fused", "keras_loop"}
    assert report["features"]["photos"] == 4
    assert set(report["export"]["sentences_per_second"]) == {"1"}
    assert "fraction_of_gemm" in proc.stdout or "of GEMM" in proc.stdout
