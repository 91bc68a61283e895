"""Adam's ε, the authors' against ours, over many steps of the character model.

Their trainer (DannyMerkx/caption2image ``8a4dc2c``, ``flickr_char/char_net.py:94``) steps
``torch.optim.Adam`` (eps 1e-8, added to √v̂ with v̂ = v / (1 − β₂ᵗ)) on their hinge averaged
over the B × B matrix, each tower's gradient norm clipped (0.05 caption, 0.0025 image). The
record steps Keras' Adam (epsilon 1e-7, added to √v, the bias correction folded into the step
size α_t = lr √(1 − β₂ᵗ) / (1 − β₁ᵗ)) on the summed hinge, B² times theirs, clipped at their
thresholds × B². Adam's step does not depend on the loss's scale except through ε, so the two
differ only there; the golden test of one step (``test_golden_caption2image``) sets Keras' ε so
that the first step matches and cannot see it. Here both run ``STEPS`` steps from the fixture's
weights on its two batches, alternating, under their cyclic schedule (one cycle, 1e-6 → 1e-3 →
1e-6), each on its own trajectory, through our model's masked path (the record's): the
reference is a NumPy restatement of ``torch.optim.Adam``, itself checked against the fixture's
Adam step written by PyTorch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_golden_caption2image import PARAM_TOL, build_ours, forward, load, to_theirs

STEPS = 100
TORCH_EPS, KERAS_EPS = 1e-8, 1e-7  # torch.optim.Adam's default; keras.optimizers.Adam's (the trainer's)
BETAS = (0.9, 0.999)
CLIP_CAP, CLIP_IMG = 0.05, 0.0025  # char_net.py:125 (their thresholds, on their averaged hinge)


class TorchAdam:
    """``torch.optim.Adam`` (no weight decay, no amsgrad) restated in NumPy (float64 state):
    ``m ← β₁m + (1 − β₁)g``, ``v ← β₂v + (1 − β₂)g²``,
    ``p ← p − lr / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + eps)``."""

    def __init__(self, eps: float = TORCH_EPS, betas=BETAS):
        self.eps, (self.b1, self.b2), self.t, self.m, self.v = eps, betas, 0, {}, {}

    def step(self, params: dict, grads: dict, lr: float) -> dict:
        self.t += 1
        out = {}
        for k, g in grads.items():
            g = np.asarray(g, np.float64)
            self.m[k] = self.b1 * self.m.get(k, 0.0) + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v.get(k, 0.0) + (1 - self.b2) * g * g
            denom = np.sqrt(self.v[k]) / math.sqrt(1 - self.b2 ** self.t) + self.eps
            out[k] = np.asarray(params[k], np.float64) - lr / (1 - self.b1 ** self.t) * self.m[k] / denom
        return out


def _clip(grads: dict, names, max_norm: float) -> dict:
    """``torch.nn.utils.clip_grad_norm`` (trainer.py:123-125): × max_norm / (norm + 1e-6) when below 1."""
    norm = math.sqrt(sum(float(np.sum(np.square(grads[n]))) for n in names))
    scale = min(1.0, max_norm / (norm + 1e-6))
    return {n: grads[n] * scale for n in names}


def test_the_reference_is_torch_adam_on_the_fixture():
    """One step at the fixture's lr_max from their clipped gradients: the NumPy reference gives
    the parameters PyTorch wrote (their b_v aside: its gradient is float32 noise)."""
    fx = load("char_gru_1head")
    names = [k[len("grad."):] for k in fx if k.startswith("grad.")]
    grads = {n: fx[f"grad.{n}"] for n in names}
    clipped = {**_clip(grads, [n for n in names if n.startswith("img.")], float(fx["clip.img_max_norm"])),
               **_clip(grads, [n for n in names if n.startswith("cap.")], float(fx["clip.cap_max_norm"]))}
    after = TorchAdam(eps=float(fx["adam.eps"]), betas=tuple(float(b) for b in fx["adam.betas"])).step(
        {n: fx[f"init.{n}"] for n in names}, clipped, float(fx["adam.lr_max"]))
    for n in names:
        if not n.endswith(".out.bias"):
            np.testing.assert_allclose(after[n], fx[f"after_lr_max.{n}"], rtol=0, atol=PARAM_TOL, err_msg=n)


def _trajectory(fx, *, scale: float | None, steps: int):
    """Per step: the parameters after it (their layout, by their names) and the caption and
    image embeddings of the step's batch before it. ``scale=None``: theirs (averaged hinge,
    their clipping, ``TorchAdam``); else ours: the averaged hinge × ``scale`` (our summed hinge
    is B² times theirs: 36 for the fixture's B = 6, 1,024 for the record's B = 32), clipping ×
    ``scale``, Keras' Adam with its default epsilon, as the trainer builds it."""
    import keras
    import tensorflow as tf

    from grounded_text.training.schedules import CyclicCosineSchedule

    pre, enc, img, variables = build_ours(fx, include_padding=False)
    unique = {v.path: v for v, _, _ in variables.values()}
    paths = list(unique)
    img_paths = {v.path for v in img.trainable_variables}
    factor = 1.0 if scale is None else float(scale)
    schedule = CyclicCosineSchedule(1e-6, 1e-3, steps)
    adam = keras.optimizers.Adam(learning_rate=1e-6, beta_1=BETAS[0], beta_2=BETAS[1], epsilon=KERAS_EPS)
    reference = TorchAdam()
    params, embeddings = [], []
    for t in range(steps):
        with tf.GradientTape() as tape:
            _, text, image, hinge, _ = forward(fx, t % 2, pre, enc, img, reduction="mean_matrix")
            loss = hinge * factor
        embeddings.append((text.numpy(), image.numpy()))
        # The embedding's gradient comes as IndexedSlices; Keras' Adam densifies it (every row's m
        # and v decay each step, as torch's do with a dense nn.Embedding gradient).
        grads = dict(zip(paths, (tf.convert_to_tensor(g).numpy()
                                 for g in tape.gradient(loss, [unique[p] for p in paths]))))
        clipped = {**_clip(grads, [p for p in paths if p in img_paths], CLIP_IMG * factor),
                   **_clip(grads, [p for p in paths if p not in img_paths], CLIP_CAP * factor)}
        lr = float(schedule(t))
        if scale is not None:
            adam.learning_rate.assign(lr)
            adam.apply_gradients([(tf.constant(clipped[p]), unique[p]) for p in paths])
        else:
            new = reference.step({p: unique[p].numpy() for p in paths}, clipped, lr)
            for p in paths:
                unique[p].assign(new[p].astype(np.float32))
        params.append(to_theirs(variables, {p: unique[p].numpy() for p in paths}))
    return params, embeddings


@pytest.fixture(scope="module")
def trajectories():
    fx = load("char_gru_1head")
    batch = int(fx["batch0.image_features"].shape[0])
    init = {k[len("init."):]: v for k, v in fx.items() if k.startswith("init.")}
    return init, {"theirs": _trajectory(fx, scale=None, steps=STEPS),
                  f"ours, B² = {batch ** 2}": _trajectory(fx, scale=batch ** 2, steps=STEPS),
                  "ours, B² = 1,024": _trajectory(fx, scale=32 ** 2, steps=STEPS)}


def _report(init, theirs, ours) -> dict:
    """The largest parameter difference, the largest embedding difference and how far the
    embeddings moved, over every step."""
    param, where = max((float(np.abs(a[n] - b[n]).max()), n) for a, b in zip(theirs[0], ours[0]) for n in a)
    moved = max(float(np.abs(theirs[0][-1][n] - init[n]).max()) for n in init)
    first = theirs[1][0]
    emb = max(float(np.abs(x - y).max()) for (a, b) in zip(theirs[1], ours[1]) for x, y in zip(a, b))
    emb_moved = max(float(np.abs(x - y).max()) for a in theirs[1][-2:] for x, y in zip(a, first)
                    if x.shape == y.shape)
    return {"param": param, "where": where, "moved": moved, "emb": emb, "emb_moved": emb_moved}


@pytest.mark.slow
def test_their_adam_and_ours_agree_over_many_steps(trajectories):
    """After each of the 100 steps the embeddings (unit vectors) of ours are within 1 % of how
    far theirs moved over the cycle; printed: the largest parameter and embedding differences.
    A parameter can differ by more where its gradient is near ε (the image weights of
    near-zero features), which is where a difference changes the output least."""
    init, runs = trajectories
    theirs = runs["theirs"]
    for name, ours in runs.items():
        if name == "theirs":
            continue
        r = _report(init, theirs, ours)
        print(f"\nAdam ε over {STEPS} steps, theirs against {name}: largest parameter difference {r['param']:.2e} "
              f"({r['where']}; largest movement {r['moved']:.2e}); largest embedding difference {r['emb']:.2e} (the "
              f"embeddings moved up to {r['emb_moved']:.2e})")
        assert r["moved"] > 1e-2 and r["emb_moved"] > 0.1  # the model really moved
        assert r["emb"] < 1e-2 * r["emb_moved"]
