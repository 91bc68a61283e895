"""Every loss of grounded_text.losses against independent NumPy references."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from grounded_text.losses import (
    ClusterLoss,
    CovarianceLoss,
    CrossModalProjectionLoss,
    GroundingLoss,
    PairwiseRankLoss,
    PearsonCorrelationLoss,
    PerceptualLoss,
    SurrogateKendallTauLoss,
    TripletRankingLoss,
    cluster_loss,
    covariance,
    cross_modal_projection_loss,
    mismatch_partners,
    pairwise_rank_loss,
    perceptual_loss,
    surrogate_kendall_tau,
    triplet_ranking_loss,
    vete_pair_similarities,
)

# ---------------------------------------------------------------- references


def close(expected):
    """1e-5 absolute, or 1e-6 relative for the large hinge sums (float32 accumulation)."""
    return pytest.approx(expected, rel=1e-6, abs=1e-5)


def np_normalize(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def np_cosmat(a, b):
    return np_normalize(a.astype(np.float64)) @ np_normalize(b.astype(np.float64)).T


def np_skt(x, y, alpha):
    n = len(x)
    total = sum(np.tanh(alpha * (x[i] - x[j]) * (y[i] - y[j])) for i in range(n) for j in range(i + 1, n))
    return total / (n * (n - 1) / 2)


def np_triplet(text, image, ids, margin, lam, negatives, k):
    """Brute-force loop over anchors and negatives (Kolluru eq. 3).

    Direction 0: caption i anchored, negatives images j (S[i, j]) — the
    sentence-anchored term, weighted by λ. Direction 1: image i anchored,
    negatives captions j (S[j, i]) — the image-anchored term, weight 1.
    """
    s = np_cosmat(text, image)
    b = len(ids)
    total = 0.0
    for direction, weight in ((0, lam), (1, 1.0)):
        for i in range(b):
            pos = s[i, i]
            costs = []
            for j in range(b):
                if ids[j] == ids[i]:
                    continue
                neg = s[i, j] if direction == 0 else s[j, i]
                cost = max(0.0, margin - pos + neg)
                if negatives == "semi_hard" and not (pos - margin < neg < pos):
                    continue
                if negatives == "hard" and not neg >= pos:
                    continue
                costs.append(cost)
            if negatives == "hardest":
                costs = sorted(costs, reverse=True)[:k]
            total += weight * sum(costs)
    return total


def np_cluster(text, ids, margin):
    c = np_cosmat(text, text)
    per_anchor = []
    for i in range(len(ids)):
        pos = [p for p in range(len(ids)) if p != i and ids[p] == ids[i]]
        neg = [n for n in range(len(ids)) if ids[n] != ids[i]]
        if pos and neg:
            per_anchor.append(np.mean([max(0.0, margin - c[i, p] + c[i, n]) for p in pos for n in neg]))
    return float(np.mean(per_anchor)) if per_anchor else 0.0


def np_perceptual(text, image):
    iu = np.triu_indices(len(text), k=1)
    return -stats.pearsonr(np_cosmat(text, text)[iu], np_cosmat(image, image)[iu])[0]


def np_cm(text, image, ids, margin):
    s = np_cosmat(text, image)
    per_anchor = []
    for i in range(len(ids)):
        neg = [j for j in range(len(ids)) if ids[j] != ids[i]]
        if neg:
            per_anchor.append(np.mean([max(0.0, margin - s[i, i] + s[i, j]) for j in neg]))
    return float(np.mean(per_anchor)) if per_anchor else 0.0


def np_vete_pairs(text, image, perm, ids):
    b = len(perm)
    partners = []
    for i in range(b):
        partner = perm[(i + 1) % b]
        for step in range(1, b):
            cand = perm[(i + step) % b]
            if ids[cand] != ids[perm[i]]:
                partner = cand
                break
        partners.append(partner)
    cos = lambda a, c: float(a @ c / (np.linalg.norm(a) * np.linalg.norm(c)))  # noqa: E731
    sims = [cos(text[i], image[i]) for i in range(b)] + [cos(text[perm[i]], image[partners[i]]) for i in range(b)]
    return np.array(sims), np.r_[np.ones(b), -np.ones(b)], np.array(partners)


def random_batch(seed, images=6, captions=3, dim=8):
    rng = np.random.default_rng(seed)
    ids = np.repeat(rng.permutation(100)[:images], captions)
    order = rng.permutation(len(ids))
    ids = ids[order]
    text = rng.normal(size=(len(ids), dim)).astype(np.float32)
    image = rng.normal(size=(len(ids), dim)).astype(np.float32)
    return text, image, ids.astype(np.int64)


# ---------------------------------------------------------------- exact values


@pytest.mark.parametrize("seed", [0, 1])
def test_mismatched_pairs_avoid_same_image(seed):
    text, image, ids = random_batch(seed)
    perm = np.random.default_rng(seed + 10).permutation(len(ids)).astype(np.int32)
    got = mismatch_partners(tf.constant(perm), tf.constant(ids)).numpy()
    sims, labels, partners = np_vete_pairs(text, image, perm, ids)
    np.testing.assert_array_equal(got, partners)
    assert (ids[perm] != ids[got]).all()
    got_sims, got_labels = vete_pair_similarities(text, image, tf.constant(perm), tf.constant(ids))
    np.testing.assert_allclose(got_sims.numpy(), sims, atol=1e-5)
    np.testing.assert_array_equal(got_labels.numpy(), labels)
    # Without ids: the plain derangement of VETE §3.
    np.testing.assert_array_equal(mismatch_partners(tf.constant(perm)).numpy(), np.roll(perm, -1))


@pytest.mark.parametrize("layer_cls", [PearsonCorrelationLoss, CovarianceLoss, SurrogateKendallTauLoss])
@pytest.mark.parametrize("with_ids", [False, True])
def test_correlation_family_layers_match_numpy(layer_cls, with_ids):
    text, image, ids = random_batch(3)
    layer = layer_cls(seed=4) if layer_cls is not SurrogateKendallTauLoss else layer_cls(alpha=2.5, seed=4)
    perm = layer.permutation(len(ids), training=False).numpy()
    use_ids = ids if with_ids else np.arange(len(ids))
    sims, labels, _ = np_vete_pairs(text, image, perm, use_ids)
    expected = {
        PearsonCorrelationLoss: lambda: -stats.pearsonr(sims, labels)[0],
        CovarianceLoss: lambda: -np.cov(sims, labels, bias=True)[0, 1],
        SurrogateKendallTauLoss: lambda: -np_skt(sims, labels, 2.5),
    }[layer_cls]()
    got = layer(text, image, image_ids=ids if with_ids else None, training=False)
    assert got.dtype == tf.float32
    assert float(got) == close(expected)


@pytest.mark.parametrize("alpha", [0.5, 3.0, 20.0])
def test_skt_against_formula(alpha):
    rng = np.random.default_rng(int(alpha * 10))
    x = rng.normal(size=23).astype(np.float32)
    y = rng.normal(size=23).astype(np.float32)
    assert float(surrogate_kendall_tau(x, y, alpha)) == pytest.approx(np_skt(x, y, alpha), abs=1e-5)
    assert float(covariance(x, y)) == pytest.approx(np.cov(x, y, bias=True)[0, 1], abs=1e-5)


def test_skt_approaches_kendall_tau_for_large_alpha():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=40), rng.normal(size=40)
    assert float(surrogate_kendall_tau(x, y, 1e4)) == pytest.approx(stats.kendalltau(x, y)[0], abs=2e-3)


@pytest.mark.parametrize(
    "negatives,k", [("all", 1), ("hardest", 1), ("hardest", 3), ("hardest", 100), ("semi_hard", 1), ("hard", 1)]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_triplet_selection_matches_brute_force(negatives, k, seed):
    text, image, ids = random_batch(seed + 20, images=5, captions=2)
    # Correlate text and image so every selection rule has members.
    image = (0.6 * text + image).astype(np.float32)
    for lam in (1.0, 0.3):
        expected = np_triplet(text, image, ids, 0.4, lam, negatives, k)
        layer = TripletRankingLoss(margin=0.4, direction_weight=lam, negatives=negatives, k=k)
        got = float(layer(text, image, image_ids=ids))
        assert got == close(expected)
        mean = triplet_ranking_loss(text, image, ids, margin=0.4, direction_weight=lam,
                                    negatives=negatives, k=k, reduction="mean")
        assert float(mean) == pytest.approx(expected / len(ids), abs=1e-5)


def test_semi_hard_plus_hard_is_all_and_vse_max_violation():
    text, image, ids = random_batch(7, images=8, captions=1)
    image = (0.5 * text + image).astype(np.float32)
    parts = [float(triplet_ranking_loss(text, image, ids, margin=0.3, negatives=n))
             for n in ("semi_hard", "hard", "all")]
    assert parts[0] + parts[1] == pytest.approx(parts[2], abs=1e-5)
    # VSE++ (Faghri et al. eq. 5), written directly: max over negatives of each hinge.
    s = np_cosmat(text, image)
    d = np.diag(s)
    off = ~np.eye(8, dtype=bool)
    c_i = np.where(off, np.maximum(0, 0.3 - d[:, None] + s), 0).max(1)
    c_c = np.where(off, np.maximum(0, 0.3 - d[None, :] + s), 0).max(0)
    got = float(triplet_ranking_loss(text, image, None, margin=0.3, negatives="hardest", k=1))
    assert got == pytest.approx(c_i.sum() + c_c.sum(), abs=1e-5)


def test_pairwise_rank_loss_is_kiros_sum():
    text, image, ids = random_batch(11)
    expected = np_triplet(text, image, ids, 0.2, 1.0, "all", 1)
    assert float(pairwise_rank_loss(text, image, 0.2, ids)) == close(expected)
    assert float(PairwiseRankLoss(margin=0.2)(text, image, image_ids=ids)) == close(expected)


def test_cluster_loss_hand_built_batch():
    # t0, t1: captions of image 7; t2: a caption of image 9. γ = 0.5.
    text = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]], np.float32)
    ids = np.array([7, 7, 9])
    # anchor 0: [0.5 − cos(t0,t1)=0 + cos(t0,t2)=1] = 1.5; anchor 1: [0.5 − 0 + 0] = 0.5;
    # anchor 2 has no same-image partner: not counted. Mean = 1.0, sum = 2.0.
    assert float(cluster_loss(text, ids, margin=0.5)) == pytest.approx(1.0, abs=1e-6)
    assert float(cluster_loss(text, ids, margin=0.5, reduction="sum")) == pytest.approx(2.0, abs=1e-6)
    assert float(ClusterLoss(margin=0.5)(text, text, image_ids=ids)) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grounding_family_matches_numpy(seed):
    text, image, ids = random_batch(seed + 30, images=5, captions=3)
    wide_image = np.random.default_rng(seed).normal(size=(len(ids), 13)).astype(np.float32)
    expected = np_cluster(text, ids, 0.3)
    assert float(ClusterLoss(margin=0.3)(text, image, image_ids=ids)) == pytest.approx(expected, abs=1e-5)
    assert float(perceptual_loss(text, wide_image)) == pytest.approx(np_perceptual(text, wide_image), abs=1e-5)
    assert float(PerceptualLoss()(text, image)) == pytest.approx(np_perceptual(text, image), abs=1e-5)
    got = GroundingLoss(alpha_cluster=0.7, alpha_perceptual=2.0, margin=0.3)(text, wide_image, image_ids=ids)
    expected = 0.7 * np_cluster(text, ids, 0.3) + 2.0 * np_perceptual(text, wide_image)
    assert float(got) == close(expected)
    assert float(CrossModalProjectionLoss(margin=0.4)(text, image, image_ids=ids)) == pytest.approx(
        np_cm(text, image, ids, 0.4), abs=1e-5
    )
    assert float(cross_modal_projection_loss(text, image, None, 0.4)) == pytest.approx(
        np_cm(text, image, np.arange(len(ids)), 0.4), abs=1e-5
    )


# ---------------------------------------------------------------- robustness

ALL_LAYERS = [
    lambda: PearsonCorrelationLoss(seed=1),
    lambda: CovarianceLoss(seed=1),
    lambda: SurrogateKendallTauLoss(alpha=5.0, seed=1),
    lambda: PairwiseRankLoss(margin=0.2),
    lambda: TripletRankingLoss(negatives="all"),
    lambda: TripletRankingLoss(negatives="hardest", k=2, direction_weight=0.5),
    lambda: TripletRankingLoss(negatives="semi_hard"),
    lambda: TripletRankingLoss(negatives="hard", reduction="mean"),
    lambda: ClusterLoss(margin=0.5),
    lambda: PerceptualLoss(),
    lambda: GroundingLoss(alpha_cluster=1.0, alpha_perceptual=0.5),
    lambda: CrossModalProjectionLoss(margin=0.3),
]
IDS = [f"{type(f()).__name__}{i}" for i, f in enumerate(ALL_LAYERS)]


def degenerate_batches():
    rng = np.random.default_rng(0)
    yield "all_equal", np.ones([8, 4]), np.ones([8, 4]), np.repeat([0, 1, 2, 3], 2)
    yield "zeros", np.zeros([6, 4]), np.zeros([6, 4]), np.repeat([0, 1, 2], 2)
    yield "batch_of_2", rng.normal(size=(2, 4)), rng.normal(size=(2, 4)), np.array([5, 6])
    yield "one_image", rng.normal(size=(4, 4)), np.tile(rng.normal(size=(1, 4)), (4, 1)), np.zeros(4, int)


@pytest.mark.parametrize("make", ALL_LAYERS, ids=IDS)
def test_finite_loss_and_gradients_on_degenerate_batches(make):
    for name, text, image, ids in degenerate_batches():
        layer = make()
        t = tf.Variable(text.astype(np.float32))
        v = tf.Variable(image.astype(np.float32))
        for training in (True, False):
            with tf.GradientTape() as tape:
                loss = layer(t, v, image_ids=tf.constant(ids, tf.int64), training=training)
            grads = tape.gradient(loss, [t, v], unconnected_gradients=tf.UnconnectedGradients.ZERO)
            assert np.isfinite(float(loss)), name
            for g in grads:
                assert np.isfinite(g.numpy()).all(), name


@pytest.mark.parametrize("make", ALL_LAYERS, ids=IDS)
def test_config_round_trip_keras_file_and_mixed_precision(make, tmp_path):
    layer = make()
    clone = type(layer).from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    text, image, ids = random_batch(5, images=4, captions=2)
    expected = float(layer(text, image, image_ids=ids, training=False))
    assert float(clone(text, image, image_ids=ids, training=False)) == pytest.approx(expected, abs=1e-6)
    # .keras save/load of a model around the layer.
    t_in = keras.Input((8,), name="text")
    v_in = keras.Input((8,), name="image")
    i_in = keras.Input((), dtype="int64", name="ids")
    model = keras.Model([t_in, v_in, i_in], make()(t_in, v_in, image_ids=i_in))
    path = tmp_path / "loss.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert float(loaded([text, image, ids], training=False)) == pytest.approx(
        float(model([text, image, ids], training=False)), abs=1e-6
    )
    # float16 inputs (mixed precision towers): float32 loss equal to the float32 one.
    got16 = layer(tf.constant(text, tf.float16), tf.constant(image, tf.float16), image_ids=ids, training=False)
    assert got16.dtype == tf.float32
    assert float(got16) == pytest.approx(expected, abs=5e-2 * max(1.0, abs(expected)))
    keras.mixed_precision.set_global_policy("mixed_float16")
    mixed = make()
    assert mixed(tf.constant(text, tf.float16), tf.constant(image, tf.float16), image_ids=ids).dtype == tf.float32


def test_bad_inputs_raise_clear_errors():
    text, image, ids = random_batch(0, images=3, captions=2)
    with pytest.raises(ValueError, match="ClusterLoss needs `image_ids`"):
        ClusterLoss()(text, image)
    with pytest.raises(ValueError, match="batch sizes differ"):
        TripletRankingLoss()(text, image[:-1])
    with pytest.raises(ValueError, match="image_ids"):
        TripletRankingLoss()(text, image, image_ids=ids[:-1])
    with pytest.raises(ValueError, match="negatives"):
        TripletRankingLoss(negatives="easy")
    with pytest.raises(ValueError, match="k must be"):
        TripletRankingLoss(negatives="hardest", k=0)
    with pytest.raises(ValueError, match="alpha"):
        SurrogateKendallTauLoss(alpha=0)
    with pytest.raises(ValueError, match="at least 2"):
        PearsonCorrelationLoss()(text[:1], image[:1])


def test_assembled_train_model_passes_image_ids_to_the_loss():
    from grounded_text.config.schema import ModelConfig, TextConfig
    from grounded_text.layers import build_vocabulary
    from grounded_text.models import build_model
    from grounded_text.models.grounded_model import assemble

    caps = ["a dog runs", "a dog is running", "a man rides a bike", "a cyclist on a bike"]
    gm = build_model(ModelConfig(embedding_dim=8), TextConfig(), build_vocabulary(caps), feature_dim=5, seed=0)
    model = assemble(gm.text_tower, gm.image_tower, TripletRankingLoss(margin=0.5, negatives="all"))
    feats = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    ids = np.array([3, 3, 8, 8], np.int64)
    x = {"caption": tf.constant(caps), "image_features": tf.constant(feats)}
    t, v = gm.text_tower(tf.constant(caps)).numpy(), gm.image_tower(feats).numpy()
    with_ids = float(model.train_model({**x, "image_id": tf.constant(ids)}, training=False))
    without = float(model.train_model(x, training=False))
    assert with_ids == pytest.approx(np_triplet(t, v, ids, 0.5, 1.0, "all", 1), abs=1e-5)
    assert without == pytest.approx(np_triplet(t, v, np.arange(4), 0.5, 1.0, "all", 1), abs=1e-5)
    assert with_ids != pytest.approx(without)
    model.train_model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=False)
    logs = model.train_model.train_on_batch({**x, "image_id": tf.constant(ids)}, return_dict=True)
    assert np.isfinite(logs["loss"])
