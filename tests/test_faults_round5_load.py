"""Loading a model: its sentence-end rule always travels with it, the character model's memory
is bounded by its input, a file's lines lose their terminators, a damaged export is refused in
one line, and bad text is refused naming the sentence.

Each test fails on the code before these guarantees (a silent ``none`` rule, an unbounded
padded batch, embedded newlines, raw TensorFlow errors, bare Unicode errors)."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest

from grounded_text import shipped

REPO = Path(__file__).resolve().parents[1]
CHAR, BOW = "char_gru_attention_flickr8k", "vete_bow_flickr8k"
SENTENCES = ["A dog runs on the beach.", "a man rides a red bike", "Two kids play in the snow .", "",
             "Une femme âgée lit un journal", "the cat sleeps"]


@functools.lru_cache(maxsize=None)
def _shipped(name):
    import grounded_text as gt

    return gt.load(name)


def _copy(name, tmp_path) -> Path:
    """A private copy of a shipped model's text export (to damage)."""
    return Path(shutil.copytree(shipped.export_dir(name), tmp_path / name / "export"))


def _env(**extra):
    from train_cli import env_for_subprocess

    return env_for_subprocess(**extra)


def _evaluate_main(args, capsys):
    from grounded_text.evaluate import main

    rc = main(args)
    return rc, capsys.readouterr()


# ----------------------------------------------------------------------- the sentence-end rule


def test_evaluate_by_name_keeps_the_shipped_rule_and_says_it(capsys):
    """A shipped model by name is scored with its own rule (not replaced by ``none`` because no
    folder of that name is in the working directory), and the rule is printed."""
    from grounded_text.evaluation.loading import load_text_encoder

    enc = load_text_encoder(CHAR)
    assert enc.sentence_end == "space_period"
    err = capsys.readouterr().err
    assert err.count("sentence ends of") == 1 and f"sentence ends of {CHAR}: space_period" in err
    assert load_text_encoder(BOW).sentence_end == "none"
    assert f"sentence ends of {BOW}: none" in capsys.readouterr().err
    # An explicit rule still replaces it, and is said.
    assert load_text_encoder(CHAR, sentence_end="none").sentence_end == "none"
    assert "none (as given" in capsys.readouterr().err


def test_the_one_rule_function_serves_names_folders_and_the_trainer_record():
    from grounded_text.serving.loader import model_sentence_end

    assert model_sentence_end(CHAR) == "space_period"
    assert model_sentence_end(shipped.export_dir(CHAR)) == "space_period"
    assert model_sentence_end(CHAR, "space_period_tokens") == "space_period_tokens"
    assert model_sentence_end(BOW) == "none"


@pytest.mark.slow
def test_evaluate_cli_by_name_gives_the_cards_sts16_mean(data_dir, tmp_path):
    """The acceptance: ``evaluate --model NAME`` equals the model card's STS16 mean (1e-4) and
    prints the rule."""
    card = json.loads((shipped.SHIPPED_DIR / CHAR / "model.json").read_text())["figures"]["STS16 mean"]
    r = subprocess.run([sys.executable, "-m", "grounded_text.evaluate", "--model", CHAR, "--years", "STS16",
                        "--json", str(tmp_path / "out.json")], cwd=tmp_path, env=_env(GROUNDED_TEXT_DATA=str(data_dir)),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"sentence ends of {CHAR}: space_period" in r.stderr
    got = json.loads((tmp_path / "out.json").read_text())["headline"]["STS16 mean pearson (avg2016)"]
    assert got == pytest.approx(card["value"], abs=1e-4)


@pytest.fixture()
def served_char_export(tmp_path, monkeypatch):
    """The shipped character export as a ``.tar.gz`` on a local HTTP server: a TF Hub URL handle."""
    archive = tmp_path / "www" / "char.tar.gz"
    archive.parent.mkdir()
    src = shipped.export_dir(CHAR)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(src.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(src)), recursive=False)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(Quiet, directory=str(archive.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TFHUB_CACHE_DIR", str(tmp_path / "hub_cache"))
    yield f"http://127.0.0.1:{server.server_address[1]}/char.tar.gz"
    server.shutdown()


def test_a_url_handle_keeps_the_rule_of_the_folder_hub_unpacked(served_char_export):
    import grounded_text as gt

    enc = gt.load(served_char_export)
    assert enc.sentence_end == "space_period"
    np.testing.assert_allclose(enc.encode(SENTENCES), _shipped(CHAR).encode(SENTENCES), atol=1e-6)


@pytest.mark.parametrize("damage, message", [
    ("missing", "assets/config.json is missing"),
    ("misspelt_name", "assets/config.json is missing"),
    ("unparseable", "assets/config.json is not valid JSON"),
    ("unreadable", "assets/config.json cannot be read"),
    ("misspelt_rule", "text.sentence_end = 'space_perod'"),
    ("misspelt_key", "text.sentence_ends, not text.sentence_end"),
])
def test_an_export_whose_rule_cannot_be_read_is_refused_in_one_line(tmp_path, capsys, damage, message):
    """Never a silent ``none``: load raises a ValueError naming the file, evaluate prints one
    ``error:`` line and returns 2."""
    import grounded_text as gt

    export = _copy(CHAR, tmp_path)
    config = export / "assets" / "config.json"
    if damage == "missing":
        config.unlink()
    elif damage == "misspelt_name":
        config.rename(config.with_name("confg.json"))
    elif damage == "unparseable":
        config.write_text(config.read_text()[:200])
    elif damage == "unreadable":
        config.unlink()
        config.mkdir()  # unreadable as a file, even for root
    else:
        record = json.loads(config.read_text())
        if damage == "misspelt_rule":
            record["text"]["sentence_end"] = "space_perod"
        else:
            record["text"]["sentence_ends"] = record["text"].pop("sentence_end")
        config.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        gt.load(export)
    rc, out = _evaluate_main(["--model", str(export), "--sts-dir", str(tmp_path)], capsys)
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], out.err


def test_a_foreign_module_without_our_config_stays_none(tmp_path):
    import tensorflow as tf

    import grounded_text as gt

    class Lengths(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, s):
            return tf.stack([tf.cast(tf.strings.length(s), tf.float32), tf.ones(tf.shape(s))], axis=1)

    tf.saved_model.save(Lengths(), str(tmp_path / "foreign"))
    enc = gt.load(tmp_path / "foreign")
    assert enc.sentence_end == "none" and enc.max_batch_chars is None
    assert enc.encode(["abc"])[0, 0] == 3.0


# ----------------------------------------------------------------------- memory


def test_budget_groups_split_a_long_batch_and_keep_a_short_one_whole():
    from grounded_text.serving.encoder import _budget_groups

    short = ["a dog runs %d" % i for i in range(300)]
    groups = list(_budget_groups(short, 512, 32768))
    assert len(groups) == 1 and groups[0][1] == 512 and sorted(groups[0][0].tolist()) == list(range(300))
    texts = short + ["x" * 16384, "y" * 4000]
    groups = list(_budget_groups(texts, 512, 32768))
    assert [len(g) for g, _ in groups[:2]] == [1, 8] and groups[0][0].tolist() == [300]
    assert sorted(i for g, _ in groups for i in g.tolist()) == list(range(302))
    for group, size in groups:  # every call within the budget, padding rows included
        assert size >= len(group)
        assert size * max(len(texts[i]) + 2 for i in group) <= 32768 or len(group) == size == 1


def test_the_character_model_encodes_a_sentence_at_its_cap_within_3_gb():
    """600 short sentences and one of 16,384 characters (the per-sentence cap), default batch,
    fresh process: peak RSS at most 3 GB (a padded [512, 16385] batch crashed before)."""
    # The child's own high-water mark (VmHWM): ru_maxrss keeps the image from before exec, so a
    # child of a pytest worker that has loaded models reports the worker's peak, not its own.
    code = ("import grounded_text as gt\n"
            "from grounded_text.benchmarks.throughput import rss_mib\n"
            f"enc = gt.load({CHAR!r})\n"
            "v = enc.encode(['a dog runs on the beach number %d' % i for i in range(600)] + ['x' * 16384])\n"
            "assert v.shape == (601, 1024), v.shape\n"
            "print('PEAK', int(rss_mib() * 1024))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    peak_kib = int(r.stdout.split("PEAK")[1])
    assert peak_kib <= 3 * 1024 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"


def test_the_budget_changes_no_vector():
    import dataclasses

    enc = _shipped(CHAR)
    assert enc.max_batch_chars == 32768 and _shipped(BOW).max_batch_chars is None
    texts = SENTENCES + ["a long sentence about a dog " * 200]
    tight = dataclasses.replace(enc, max_batch_chars=64)  # every sentence alone
    np.testing.assert_allclose(tight.encode(texts), enc.encode(texts), atol=1e-6)


# ----------------------------------------------------------------------- a file's lines


@pytest.mark.parametrize("name", [CHAR, BOW])
def test_a_files_lines_embed_as_the_same_sentences_in_a_list(tmp_path, name):
    enc = _shipped(name)
    lines = [s for s in SENTENCES if s]
    want = enc.encode(lines)
    unix, dos = tmp_path / "unix.txt", tmp_path / "dos.txt"
    unix.write_bytes(("\n".join(lines) + "\n").encode())
    dos.write_bytes(("\r\n".join(lines)).encode())  # the last line has no terminator
    for path in (unix, dos):
        with open(path, encoding="utf-8") as f:
            np.testing.assert_allclose(enc.encode(f), want, atol=1e-6)
        with open(path, "rb") as f:  # binary: the \r\n is still there, and dropped
            np.testing.assert_allclose(enc.encode(f), want, atol=1e-6)
        with open(path, encoding="utf-8", newline="") as f:  # no newline translation
            np.testing.assert_allclose(np.concatenate(list(enc.encode_iter(f, batch_size=2))), want, atol=1e-6)


# ----------------------------------------------------------------------- damaged exports


def _damage(export: Path, case: str) -> str:
    """Damages ``export`` as ``case`` says; returns the file the refusal must name."""
    variables = export / "variables"
    data = next(variables.glob("variables.data-*"))
    if case == "saved_model_truncated":
        pb = export / "saved_model.pb"
        pb.write_bytes(pb.read_bytes()[: pb.stat().st_size // 2])
        return "saved_model.pb"
    if case == "saved_model_empty":
        (export / "saved_model.pb").write_bytes(b"")
        return "saved_model.pb"
    if case == "saved_model_flipped":
        _flip(export / "saved_model.pb")
        return "saved_model.pb"
    if case == "index_missing":
        (variables / "variables.index").unlink()
        return "variables/variables.index"
    if case == "index_flipped":
        _flip(variables / "variables.index")
        return "variables/variables.index"
    if case == "variables_missing":
        shutil.rmtree(variables)
        return "variables/"
    if case == "data_truncated":
        data.write_bytes(data.read_bytes()[:-1000])
        return f"variables/{data.name}"
    if case == "vocab_missing":
        (export / "assets" / "vocab.txt").unlink()
        return "assets/vocab.txt"
    if case == "vocab_halved":
        vocab = export / "assets" / "vocab.txt"
        lines = vocab.read_text(encoding="utf-8").splitlines(keepends=True)
        vocab.write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")
        return "assets/vocab.txt"
    if case == "vocab_reordered":
        vocab = export / "assets" / "vocab.txt"
        lines = vocab.read_text(encoding="utf-8").splitlines(keepends=True)
        vocab.write_text("".join(lines[1::2] + lines[::2]), encoding="utf-8")
        return "assets/vocab.txt"
    raise AssertionError(case)


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGES = ["saved_model_truncated", "saved_model_empty", "saved_model_flipped", "index_missing", "index_flipped",
           "variables_missing", "data_truncated", "vocab_missing", "vocab_halved", "vocab_reordered"]


@pytest.mark.parametrize("case", DAMAGES)
def test_a_damaged_export_is_refused_in_one_line_naming_the_file(tmp_path, capsys, case):
    from grounded_text.serving.integrity import DamagedExportError
    from grounded_text.serving.loader import load

    export = _copy(BOW, tmp_path)
    named = _damage(export, case)
    with pytest.raises(DamagedExportError) as info:
        load(export)
    assert named in str(info.value) and "\n" not in str(info.value)
    rc, out = _evaluate_main(["--model", str(export), "--sts-dir", str(tmp_path)], capsys)
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], out.err


def test_evaluate_on_a_damaged_export_prints_no_traceback(tmp_path):
    export = _copy(CHAR, tmp_path)
    _damage(export, "index_flipped")
    r = subprocess.run([sys.executable, "-m", "grounded_text.evaluate", "--model", str(export), "--sts-dir",
                        str(tmp_path)], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith("error: ") and "variables/variables.index" in r.stderr


@pytest.mark.parametrize("case", ["saved_model_empty", "saved_model_truncated", "variables_missing", "index_missing",
                                  "vocab_missing"])
def test_an_export_without_a_record_is_still_checked_and_still_loads(tmp_path, case):
    """Exports written before the record load as before; the files every SavedModel needs are
    still checked, in one line."""
    from grounded_text.serving.integrity import DamagedExportError
    from grounded_text.serving.loader import load

    export = _copy(BOW, tmp_path)
    config = export / "assets" / "config.json"
    record = json.loads(config.read_text())
    del record["integrity"]
    config.write_text(json.dumps(record))
    np.testing.assert_array_equal(load(export).encode(SENTENCES), _shipped(BOW).encode(SENTENCES))
    named = _damage(export, case)
    with pytest.raises(DamagedExportError) as info:
        load(export)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_an_export_records_its_files_and_the_shipped_ones_check_out(tiny_export):
    from grounded_text.serving.integrity import INTEGRITY_KEY, check_export, export_record, read_export_config

    config = read_export_config(tiny_export.path)
    record = config[INTEGRITY_KEY]
    assert record == export_record(tiny_export.path)
    assert record["vocab_size"] == len((tiny_export.path / "assets" / "vocab.txt").read_text().splitlines())
    assert {"saved_model.pb", "variables/variables.index", "assets/vocab.txt"} <= set(record["files"])
    for name in (CHAR, BOW):
        folder = shipped.export_dir(name)
        recorded = read_export_config(folder)
        assert INTEGRITY_KEY in recorded and recorded[INTEGRITY_KEY] == export_record(folder)
        check_export(folder)


# ----------------------------------------------------------------------- bad text


@pytest.mark.parametrize("name", [CHAR, BOW])
def test_invalid_utf8_and_lone_surrogates_name_the_sentence(name):
    enc = _shipped(name)
    with pytest.raises(ValueError, match=r"sentence 2 is not valid UTF-8 \(byte 0xff at position 4\)"):
        enc.encode(["a dog", b"a cat", b"bad \xff bytes"])
    with pytest.raises(ValueError, match=r"sentence 1 holds a lone surrogate \(U\+D800 at position 2\)"):
        enc.encode(["ok", "ab\ud800c"])
    with pytest.raises(ValueError, match="sentence 700 is not valid UTF-8"):  # streamed: its index in the stream
        list(enc.encode_iter((b"\xfe" if i == 700 else "fine") for i in range(800)))
    assert enc.encode([b"caf\xc3\xa9", "café"]).shape[0] == 2  # valid UTF-8 bytes are fine
