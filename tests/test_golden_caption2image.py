"""Our character model step for step against the authors' code of Merkx & Frank (2019).

The fixtures ``tests/fixtures/caption2image/*.npz`` were written by
``tests/fixtures/caption2image/make_fixture.py`` from DannyMerkx/caption2image (the
``NLE2019`` code, commit ``8a4dc2c``) with PyTorch; this test needs NumPy and our package
only. Their weights are mapped into our layers (``CharacterPreprocessor``,
``CharacterEncoder``, ``LinearImageEncoder``, ``TripletRankingLoss``,
``CyclicCosineSchedule``, Keras Adam) with the options that mirror their code
(``attention_include_padding``, ``attention_heads`` + ``attention_diversity_margin``,
``reduction="mean_matrix"``), and the embeddings, the loss, every gradient, the
parameters after one Adam step and the learning-rate schedule are compared. Each
comparison is also shown to fail for a planted difference (our defaults), so a pass
means something. The tower as it is exported (``export_text_tower``) runs another recurrent
kernel at inference (``fused_rnn._bigru_outputs``; training runs ``_bigru``): its embeddings
are compared too, on padded batches and on single captions. ``docs/caption2image_differences.md``
lists the differences.
"""

from __future__ import annotations

import math
import string
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "caption2image"
VARIANTS = ("char_gru_1head", "char_gru_2heads")
COMMIT = "8a4dc2c48e54bc68dc275625e619020c968d2df5"
OFFSET = 2  # our ids: 0 padding, 1 the one OOV bucket, then string.printable in order (theirs: 0, 1, ...)
EMB_TOL, LOSS_TOL, GRAD_TOL, PARAM_TOL = 1e-5, 1e-5, 1e-4, 1e-5


def load(name: str) -> dict:
    with np.load(FIXTURES / f"{name}.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# --------------------------------------------------------------------------- their layout ↔ ours
def _gru_gates(w):
    """PyTorch stacks the GRU gates (r, z, n) along axis 0; Keras (z, r, h)."""
    r, z, n = np.split(w, 3, axis=0)
    return np.concatenate([z, r, n], axis=0)


def _torch_gates(w):
    """Keras (z, r, h) along axis 0 → PyTorch (r, z, n)."""
    z, r, n = np.split(w, 3, axis=0)
    return np.concatenate([r, z, n], axis=0)


def build_ours(fx: dict, *, include_padding=True, diversity=True, theirs=True, weight_init="keras",
               char_embedding_init="uniform"):
    """Our towers with the fixture's initial weights (``theirs=False``: as our initialisers draw
    them); returns (preprocessor, encoder, image, variables) where ``variables`` maps each of
    their parameter names to (our variable, to_ours, to_theirs)."""
    from grounded_text.layers.branches import LinearImageEncoder
    from grounded_text.layers.char_encoder import CharacterEncoder, CharacterPreprocessor

    hidden, heads = int(fx["gru_hidden"]), int(fx["heads"])
    preprocessor = CharacterPreprocessor(list(string.printable), num_oov_buckets=1, lowercase=False)
    assert preprocessor.vocabulary_size == int(fx["num_chars"]) + OFFSET
    encoder = CharacterEncoder(preprocessor.vocabulary_size, char_dim=int(fx["embedding_dim"]), units=hidden,
                               cell="gru", bidirectional=True, pooling="attention",
                               attention_units=int(fx["attention_hidden"]), attention_heads=heads,
                               attention_include_padding=include_padding,
                               attention_diversity_margin=1.0 if (diversity and heads > 1) else None,
                               weight_init=weight_init, char_embedding_init=char_embedding_init)
    encoder.build((None, None))
    image = LinearImageEncoder(int(fx["image_out"]), normalize=True, torch_bias=weight_init == "torch")
    image.build((None, fx["batch0.image_features"].shape[1]))

    def emb_to_ours(w):
        out = np.zeros((w.shape[0] + OFFSET, w.shape[1]), np.float32)
        out[OFFSET:] = w
        return out

    variables = {
        "cap.embed.weight": (encoder.embedding.embeddings, emb_to_ours, lambda v: v[OFFSET:]),
        "img.linear_transform.weight": (image.dense.kernel, np.transpose, np.transpose),
        "img.linear_transform.bias": (image.dense.bias, None, None),
    }
    bi = encoder.rnns[0]
    for suffix, layer in (("", bi.forward_layer), ("_reverse", bi.backward_layer)):
        cell = layer.cell
        assert cell.reset_after, "PyTorch's GRU applies r to (W_hn h + b_hn): Keras' reset_after=True"
        variables[f"cap.RNN.weight_ih_l0{suffix}"] = (cell.kernel, lambda w: _gru_gates(w).T,
                                                      lambda v: _torch_gates(v.T))
        variables[f"cap.RNN.weight_hh_l0{suffix}"] = (cell.recurrent_kernel, lambda w: _gru_gates(w).T,
                                                      lambda v: _torch_gates(v.T))
        # Keras' GRU bias [2, 3H]: row 0 the input bias b_i, row 1 the recurrent bias b_h.
        variables[f"cap.RNN.bias_ih_l0{suffix}"] = (cell.bias, None, None)
        variables[f"cap.RNN.bias_hh_l0{suffix}"] = (cell.bias, None, None)
    for i, head in enumerate(encoder.heads):
        p = f"cap.att.att_heads.{i}"
        variables[f"{p}.hidden.weight"] = (head.hidden.kernel, np.transpose, np.transpose)
        variables[f"{p}.hidden.bias"] = (head.hidden.bias, None, None)
        variables[f"{p}.out.weight"] = (head.score.kernel, np.transpose, np.transpose)
        variables[f"{p}.out.bias"] = (head.score.bias, None, None)
    if theirs:
        assign(variables, {k[len("init."):]: v for k, v in fx.items() if k.startswith("init.")})
    return preprocessor, encoder, image, variables


def assign(variables: dict, theirs: dict):
    assert set(variables) == set(theirs), sorted(set(variables) ^ set(theirs))
    for suffix in ("", "_reverse"):
        bias = np.stack([_gru_gates(theirs[f"cap.RNN.bias_ih_l0{suffix}"]),
                         _gru_gates(theirs[f"cap.RNN.bias_hh_l0{suffix}"])])
        variables[f"cap.RNN.bias_ih_l0{suffix}"][0].assign(bias)
    for name, (var, to_ours, _) in variables.items():
        if name.startswith("cap.RNN.bias"):
            continue
        var.assign(to_ours(theirs[name]) if to_ours else theirs[name])


def to_theirs(variables: dict, values: dict) -> dict:
    """Our arrays (keyed by variable path) in their layout, by their names."""
    out = {}
    for name, (var, _, back) in variables.items():
        v = np.asarray(values[var.path])
        if name.startswith("cap.RNN.bias"):
            out[name] = _torch_gates(v[0 if "_ih_" in name else 1])
        else:
            out[name] = back(v) if back else v
    return out


# --------------------------------------------------------------------------- our forward pass
def forward(fx, b, preprocessor, encoder, image, *, reduction="mean_matrix", training=True):
    """(ids, caption embeddings, image embeddings, hinge, attention loss) of batch ``b`` in the
    order their trainer sorts it into (longest caption first, trainer.py:164-166): the
    attention loss reads the batch's first caption."""
    import tensorflow as tf

    from grounded_text.losses.ranking import TripletRankingLoss

    order = fx[f"batch{b}.order"]
    captions = [str(fx[f"batch{b}.captions"][i]) for i in order]
    ids = preprocessor(tf.constant(captions))
    text = encoder(ids, training=training)
    att = tf.add_n(encoder.losses) if encoder.losses else tf.constant(0.0)
    img = image(tf.constant(fx[f"batch{b}.image_features"][order]))
    hinge = TripletRankingLoss(margin=0.2, reduction=reduction).batch_loss(text, img)
    return ids, text, img, hinge, att


# --------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module", params=VARIANTS)
def fx(request):
    return load(request.param)


def test_fixture_provenance(fx):
    assert str(fx["commit"]) == COMMIT
    assert str(fx["repository"]) == "DannyMerkx/caption2image"
    size = (FIXTURES / f"{fx['variant']}.npz").stat().st_size
    assert size < 1_000_000, size


def test_their_caption_preprocessing(fx):
    """Their " ." (text_features.py:28-29) and their character ids (prep_text.py:21-35:
    ``string.printable.find``), and our CharacterPreprocessor's ids for the same strings."""
    for b in (0, 1):
        raw, captions = fx[f"batch{b}.raw_captions"], fx[f"batch{b}.captions"]
        for r, c in zip(raw, captions):
            assert c == (r if r.endswith(".") else r + " .")
        ids, lengths = fx[f"batch{b}.char_ids"], fx[f"batch{b}.lengths"]
        for row, c, n in zip(ids, captions, lengths):
            assert n == len(c) and list(row[:n]) == [string.printable.find(ch) for ch in c]
            assert not row[n:].any()
    import tensorflow as tf

    preprocessor, *_ = build_ours(fx)
    for b in (0, 1):
        ours = preprocessor(tf.constant([str(c) for c in fx[f"batch{b}.captions"]])).numpy()
        theirs, lengths = fx[f"batch{b}.char_ids"], fx[f"batch{b}.lengths"]
        assert ours.shape == theirs.shape  # both pad to the batch's longest caption
        valid = np.arange(theirs.shape[1])[None, :] < lengths[:, None]
        np.testing.assert_array_equal(ours, np.where(valid, theirs + OFFSET, 0))


def test_embeddings_and_loss(fx):
    pre, enc, img, _ = build_ours(fx)
    for b in (0, 1):
        _, text, image, hinge, att = forward(fx, b, pre, enc, img)
        np.testing.assert_allclose(text.numpy(), fx[f"batch{b}.caption_embeddings"], rtol=0, atol=EMB_TOL)
        np.testing.assert_allclose(image.numpy(), fx[f"batch{b}.image_embeddings"], rtol=0, atol=EMB_TOL)
        assert abs(float(hinge) - float(fx[f"batch{b}.loss_hinge"])) < LOSS_TOL
        assert abs(float(att) - float(fx[f"batch{b}.loss_attention"])) < LOSS_TOL
        assert abs(float(hinge + att) - float(fx[f"batch{b}.loss"])) < LOSS_TOL


def test_planted_differences_fail(fx):
    """Our defaults (masked softmax, summed hinge, no diversity loss) differ from their
    code by more than the tolerances, so the comparisons above can fail."""
    pre, enc, img, _ = build_ours(fx, include_padding=False)
    _, text, _, _, _ = forward(fx, 0, pre, enc, img)
    assert np.abs(text.numpy() - fx["batch0.caption_embeddings"]).max() > 100 * EMB_TOL
    pre, enc, img, _ = build_ours(fx)
    _, _, _, hinge, _ = forward(fx, 0, pre, enc, img, reduction="sum")
    assert abs(float(hinge) - float(fx["batch0.loss_hinge"])) > 100 * LOSS_TOL
    if int(fx["heads"]) > 1:
        pre, enc, img, _ = build_ours(fx, diversity=False)
        _, _, _, hinge, att = forward(fx, 0, pre, enc, img)
        assert abs(float(hinge + att) - float(fx["batch0.loss"])) > 100 * LOSS_TOL


def _step(fx, include_padding=True):
    """Our gradients of batch 0 and the parameters after one Adam step at each of the
    fixture's two learning rates, all in their layout."""
    import keras
    import tensorflow as tf

    pre, enc, img, variables = build_ours(fx, include_padding=include_padding)
    unique = {v.path: v for v, _, _ in variables.values()}
    with tf.GradientTape() as tape:
        _, _, _, hinge, att = forward(fx, 0, pre, enc, img)
        loss = hinge + att
    paths = list(unique)
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, [unique[p] for p in paths])]
    grads_theirs = to_theirs(variables, {p: g.numpy() for p, g in zip(paths, grads)})

    # Their trainer clips each tower's gradient norm (char_net.py:124-125, trainer.py:123-125):
    # torch.nn.utils.clip_grad_norm(params, max_norm) scales by max_norm / (norm + 1e-6) when < 1.
    def clip(tower_paths, max_norm):
        norm = math.sqrt(sum(float(tf.reduce_sum(tf.square(grads[paths.index(p)]))) for p in tower_paths))
        scale = min(1.0, max_norm / (norm + 1e-6))
        return norm, {p: grads[paths.index(p)] * scale for p in tower_paths}

    img_paths = [v.path for v in img.trainable_variables]
    cap_paths = [p for p in paths if p not in img_paths]
    norm_img, clipped_img = clip(img_paths, float(fx["clip.img_max_norm"]))
    norm_cap, clipped_cap = clip(cap_paths, float(fx["clip.cap_max_norm"]))
    clipped = {**clipped_img, **clipped_cap}
    initial = {p: unique[p].numpy().copy() for p in paths}

    after = {}
    beta_1, beta_2 = (float(x) for x in fx["adam.betas"])
    for label, lr in (("after_step0", float(fx["adam.lr_step0"])), ("after_lr_max", float(fx["adam.lr_max"]))):
        for p in paths:
            unique[p].assign(initial[p])
        # Keras adds epsilon to sqrt(v), PyTorch to sqrt(v_hat) = sqrt(v / (1 - beta_2^t)): at step 1
        # Keras' epsilon = PyTorch's eps × sqrt(1 - beta_2) gives the same update.
        adam = keras.optimizers.Adam(learning_rate=lr, beta_1=beta_1, beta_2=beta_2,
                                     epsilon=float(fx["adam.eps"]) * math.sqrt(1.0 - beta_2))
        adam.apply_gradients([(clipped[p], unique[p]) for p in paths])
        after[label] = to_theirs(variables, {p: unique[p].numpy() for p in paths})
    return grads_theirs, (norm_img, norm_cap), after


@pytest.fixture(scope="module")
def step(fx):
    return _step(fx)


def test_every_gradient(fx, step):
    grads, _, _ = step
    names = [k[len("grad."):] for k in fx if k.startswith("grad.")]
    assert sorted(names) == sorted(grads)
    for name in names:
        theirs = fx[f"grad.{name}"]
        np.testing.assert_allclose(grads[name], theirs, rtol=0, atol=GRAD_TOL, err_msg=name)
        # Relative to the gradient's own size too (many are far below 1e-4). The attention's
        # output bias b_v has a zero gradient in exact arithmetic (a constant shift of the
        # logits over time leaves the softmax unchanged): both sides are float32 noise there.
        assert np.abs(grads[name] - theirs).max() <= 1e-3 * np.abs(theirs).max() + 1e-6, name


def test_clip_norms(fx, step):
    _, (norm_img, norm_cap), _ = step
    assert abs(norm_img - float(fx["clip.img_norm"])) < 1e-4 * max(1.0, norm_img)
    assert abs(norm_cap - float(fx["clip.cap_norm"])) < 1e-4 * max(1.0, norm_cap)


def test_parameters_after_one_adam_step(fx, step):
    _, _, after = step
    for label in ("after_step0", "after_lr_max"):
        lr = float(fx["adam.lr_step0" if label == "after_step0" else "adam.lr_max"])
        for name, ours in after[label].items():
            theirs = fx[f"{label}.{name}"]
            if name.endswith(".out.bias") and lr > PARAM_TOL:
                # b_v's gradient is float32 noise (test_every_gradient); Adam's first step turns
                # any non-zero gradient into a step of about lr, in either sign, on both sides.
                init = fx[f"init.{name}"]
                assert np.abs(ours - init).max() <= lr * 1.001 and np.abs(theirs - init).max() <= lr * 1.001
                continue
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=PARAM_TOL, err_msg=f"{label} {name}")
    # At lr_max the update (~1e-3 per weight) is far above the tolerance: the step is really compared.
    moved = max(np.abs(fx[f"after_lr_max.{n}"] - fx[f"init.{n}"]).max() for n in after["after_lr_max"])
    assert moved > 100 * PARAM_TOL


def test_planted_difference_fails_the_step(fx):
    """The masked softmax (our default) instead of theirs moves some gradient past the tolerance."""
    grads, _, _ = _step(fx, include_padding=False)
    worst = max(np.abs(grads[n] - fx[f"grad.{n}"]).max() / max(np.abs(fx[f"grad.{n}"]).max(), 1e-6) for n in grads)
    assert worst > 1e-2


def test_their_schedule_is_our_cyclic_cosine(fx):
    from grounded_text.training.schedules import CyclicCosineSchedule

    for label in ("short", "flickr8k"):
        schedule = CyclicCosineSchedule(float(fx["schedule.min_lr"]), float(fx["schedule.max_lr"]),
                                        int(fx[f"schedule.{label}.stepsize"]))
        ours = np.array([float(schedule(s)) for s in fx[f"schedule.{label}.steps"]])
        np.testing.assert_allclose(ours, fx[f"schedule.{label}.lr"], rtol=1e-5, atol=1e-9)
    assert float(fx["adam.lr_step0"]) == pytest.approx(float(fx["schedule.min_lr"]))  # a cycle starts at lr_min
    # Their Flickr8k cycle: int(6000 / 32) * 5 * 4 = 3,740 steps = 4 epochs of 5 captions per image.
    assert int(fx["schedule.flickr8k.stepsize"]) == 3740


def test_the_mirroring_options_serialise_and_reach_the_model_loss():
    """The new options survive get_config, and the diversity loss (add_loss) reaches a
    functional model's losses, as the training model collects them."""
    import keras
    import tensorflow as tf

    from grounded_text.layers.char_encoder import CharacterEncoder

    enc = CharacterEncoder(12, char_dim=4, units=3, attention_units=2, attention_heads=2,
                           attention_include_padding=True, attention_diversity_margin=1.0)
    clone = CharacterEncoder.from_config(enc.get_config())
    assert (clone.attention_heads, clone.attention_include_padding, clone.attention_diversity_margin) == (2, True, 1.0)
    assert clone.output_dim == 12 and all(h.include_padding for h in clone.heads)
    ids = keras.Input(shape=(None,), dtype="int64")
    model = keras.Model(ids, enc(ids))
    out = model(tf.constant([[3, 4, 5, 0], [6, 7, 0, 0]], tf.int64))
    assert out.shape == (2, 12) and len(model.losses) == 1 and float(model.losses[0]) > 0


def _init_laws(fx, params: dict) -> dict:
    """Their initial parameters (or ours in their layout) as samples of the laws their code
    draws from: ``"weights"`` and ``"biases"``, every value divided by its bound (U(−1, 1):
    every GRU weight and bias, 1/√H; the attention's V and biases, 1/√fan_in; the image bias,
    1/√d); ``"normal"``, the character embeddings without their padding row (N(0, 1));
    ``"orthogonal"``, the attention's W (rows orthonormal)."""
    hidden, att = int(fx["gru_hidden"]), int(fx["attention_hidden"])
    features = fx["batch0.image_features"].shape[1]
    laws = {"weights": [], "biases": [], "orthogonal": []}
    for name, v in params.items():
        group = "biases" if name.endswith("bias") or ".bias_" in name else "weights"
        if name.startswith("cap.RNN."):
            laws[group].append(v.ravel() * math.sqrt(hidden))
        elif name.endswith("hidden.bias"):
            laws[group].append(v.ravel() * math.sqrt(2 * hidden))
        elif name.endswith(("out.weight", "out.bias")):
            laws[group].append(v.ravel() * math.sqrt(att))
        elif name == "img.linear_transform.bias":
            laws[group].append(v.ravel() * math.sqrt(features))
        elif name.endswith("hidden.weight"):
            laws["orthogonal"].append(v)
    return {"weights": np.concatenate(laws["weights"]), "biases": np.concatenate(laws["biases"]),
            "normal": params["cap.embed.weight"][1:].ravel(), "orthogonal": laws["orthogonal"]}


def test_torch_weight_init_draws_what_their_code_draws(fx):
    """``weight_init="torch"`` with ``char_embedding_init="normal"``: our fresh weights follow the
    laws of their fixture's initial weights (two-sample Kolmogorov–Smirnov tests, scipy.stats),
    and their attention W's rows are orthonormal as ours are; our Keras defaults (zero biases,
    a Glorot W, U(±0.05) characters) fail."""
    import keras
    from scipy import stats

    theirs = _init_laws(fx, {k[len("init."):]: v for k, v in fx.items() if k.startswith("init.")})
    for law in ("weights", "biases"):  # the bounds this test assumes are theirs
        assert np.abs(theirs[law]).max() <= 1 + 1e-6 and np.abs(theirs[law]).max() > 0.9
    for w in theirs["orthogonal"]:
        np.testing.assert_allclose(w @ w.T, np.eye(w.shape[0]), atol=1e-5)

    def ours(**options):
        keras.utils.set_random_seed(0)
        _, encoder, image, variables = build_ours(fx, theirs=False, **options)
        values = {v.path: v.numpy() for v in encoder.weights + image.weights}
        return _init_laws(fx, to_theirs(variables, values))

    mirrored = ours(weight_init="torch", char_embedding_init="normal")
    for law in ("weights", "biases", "normal"):
        assert stats.ks_2samp(theirs[law], mirrored[law]).pvalue > 0.01, law
    assert np.abs(mirrored["weights"]).max() <= 1 + 1e-6 and np.abs(mirrored["biases"]).max() <= 1 + 1e-6
    for w in mirrored["orthogonal"]:
        np.testing.assert_allclose(w @ w.T, np.eye(w.shape[0]), atol=1e-5)

    default = ours()
    for law in ("biases", "normal"):
        assert stats.ks_2samp(theirs[law], default[law]).pvalue < 1e-6, law
    w = default["orthogonal"][0]
    assert np.abs(w @ w.T - np.eye(w.shape[0])).max() > 0.1


def test_masked_path_where_their_code_must_agree(fx):
    """The record's own attention path (the masked softmax, our default; the fixtures above run
    the unmasked one) against their code where the two must agree. A caption as long as its
    batch's longest has no padded step, so their softmax over every step of the padded batch is
    the masked one: its embedding must equal the fixture's. Every shorter caption of the batch,
    through the masked path, must equal the same caption alone (B = 1, no padding) through the
    unmasked path, which the tests above hold to their code. A change to the masked softmax
    (e.g. the valid logits scaled) fails the first comparison; one to how it treats padded
    steps fails the second."""
    import tensorflow as tf

    pre, enc, img, _ = build_ours(fx, include_padding=False)
    pre_u, enc_u, _, _ = build_ours(fx, include_padding=True)
    compared = 0
    for b in (0, 1):
        order = fx[f"batch{b}.order"]
        lengths = fx[f"batch{b}.lengths"][order]
        captions = [str(fx[f"batch{b}.captions"][i]) for i in order]
        _, text, _, _, _ = forward(fx, b, pre, enc, img)
        text = text.numpy()
        longest = lengths == lengths.max()
        np.testing.assert_allclose(text[longest], fx[f"batch{b}.caption_embeddings"][longest], rtol=0, atol=EMB_TOL)
        compared += int(longest.sum())
        for i in np.flatnonzero(~longest):
            alone = enc_u(pre_u(tf.constant([captions[i]])), training=True).numpy()[0]
            np.testing.assert_allclose(text[i], alone, rtol=0, atol=EMB_TOL, err_msg=f"batch {b}, caption {i}")
        # Padding is really there: the masked batch differs from theirs on the shorter captions.
        assert np.abs(text[~longest] - fx[f"batch{b}.caption_embeddings"][~longest]).max() > 100 * EMB_TOL
    assert compared >= 2


# --------------------------------------------------------------------------- the exported tower
def _captions(fx, b) -> list:
    """Batch ``b``'s captions in their trainer's order (longest first), the fixture's rows."""
    return [str(fx[f"batch{b}.captions"][i]) for i in fx[f"batch{b}.order"]]


@pytest.fixture(scope="module")
def exported(fx, tmp_path_factory):
    """Our tower with the fixture's weights (their attention over padding), written by
    ``export_text_tower`` as a trained model's export is and loaded back with
    ``tf.saved_model.load``; returns (loaded module, preprocessor, encoder, how many times the
    export traced the inference kernel ``fused_rnn._bigru_outputs``, whether this machine fuses
    at all: ``can_fuse`` is False where Keras runs cuDNN)."""
    import keras
    import tensorflow as tf

    from grounded_text.layers import fused_rnn
    from grounded_text.serving.export import export_text_tower

    pre, enc, _, _ = build_ours(fx)
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    tower = keras.Model(sentences, enc(pre(sentences)), name="text_tower")  # as models/char_level.py builds it
    kernel, traced = fused_rnn._bigru_outputs, []

    def recording(*args):
        traced.append(len(args))
        return kernel(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fused_rnn, "_bigru_outputs", recording)
        path = export_text_tower(tower, tmp_path_factory.mktemp("caption2image_export") / str(fx["variant"]))
    return tf.saved_model.load(str(path)), pre, enc, len(traced), fused_rnn.can_fuse(enc.rnns[0], training=False)


def test_exported_tower_on_padded_batches(fx, exported):
    """The exported tower, through ``__call__`` and ``serving_default``, on each fixture batch
    (six captions of 29 to 91 characters, padded to the longest): every row equals their
    code's embedding. The export runs the fused inference kernel (``_bigru_outputs``), which
    the tests above, all in training mode, never reach."""
    import tensorflow as tf

    loaded, _, _, traced, fused = exported
    assert traced or not fused, "the export did not trace fused_rnn._bigru_outputs"
    for b in (0, 1):
        captions = tf.constant(_captions(fx, b))
        theirs = fx[f"batch{b}.caption_embeddings"]
        np.testing.assert_allclose(loaded(captions).numpy(), theirs, rtol=0, atol=EMB_TOL, err_msg=f"batch {b}")
        served = loaded.signatures["serving_default"](sentences=captions)["embeddings"].numpy()
        np.testing.assert_allclose(served, theirs, rtol=0, atol=EMB_TOL, err_msg=f"batch {b}, serving_default")


def test_exported_tower_on_single_captions(fx, exported):
    """Each caption alone (a batch of 1, no padding) through the exported tower. The fixture
    holds their embedding of a caption alone only where their batch had no padding for it
    (each batch's longest caption): there the export must equal it. Their attention reads the
    padded steps, so for a shorter caption their batch row is no reference; there the export
    must equal the training path (``_bigru``, held to their code by ``test_embeddings_and_loss``)
    on the same caption alone."""
    import tensorflow as tf

    loaded, pre, enc, _, _ = exported
    direct = 0
    for b in (0, 1):
        lengths = fx[f"batch{b}.lengths"][fx[f"batch{b}.order"]]
        for i, caption in enumerate(_captions(fx, b)):
            alone = loaded(tf.constant([caption])).numpy()[0]
            if lengths[i] == lengths.max():
                reference, direct = fx[f"batch{b}.caption_embeddings"][i], direct + 1
            else:
                reference = enc(pre(tf.constant([caption])), training=True).numpy()[0]
            np.testing.assert_allclose(alone, reference, rtol=0, atol=EMB_TOL, err_msg=f"batch {b}, caption {i}")
    assert direct >= 2


def test_planted_kernel_difference_fails(fx, monkeypatch):
    """The inference kernel with its recurrent bias doubled moves the embeddings past the
    tolerance, so the comparisons of the exported tower can fail; unplanted, the same call
    (training=False, in memory) equals their code."""
    import tensorflow as tf

    from grounded_text.layers import fused_rnn

    pre, enc, _, _ = build_ours(fx)
    if not fused_rnn.can_fuse(enc.rnns[0], training=False):
        pytest.skip("no fused kernel here: Keras runs cuDNN on a GPU")
    ids, theirs = pre(tf.constant(_captions(fx, 0))), fx["batch0.caption_embeddings"]
    np.testing.assert_allclose(enc(ids, training=False).numpy(), theirs, rtol=0, atol=EMB_TOL)
    kernel = fused_rnn._bigru_outputs
    monkeypatch.setattr(fused_rnn, "_bigru_outputs",
                        lambda x, mask, k, u, b_in, b_rec: kernel(x, mask, k, u, b_in, 2.0 * b_rec))
    assert np.abs(enc(ids, training=False).numpy() - theirs).max() > 100 * EMB_TOL
