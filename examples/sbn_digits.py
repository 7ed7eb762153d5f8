"""Saul, Jaakkola and Jordan (1996), section 5: digit classification with sigmoid belief nets.

One sigmoid belief network per digit class is trained by maximising the mean-field
lower bound on the log-likelihood of that class's training images
(:func:`ugm_infer.learn.sbn_meanfield.mean_field_learner`); a test image gets the
label whose network gives it the highest bound.  Data: scikit-learn's bundled 8x8
digits (1797 images, 64 pixels in 0..16) binarized at ``pixel >= 8``, a fixed
stratified 75/25 train/test split (``random_state=0``).  Baseline: multinomial
logistic regression (scikit-learn) on the same binary pixels.

Second part: a small SBN (784-H) trained by the same bound on a subset of binarized
MNIST (not shipped with the repository: ``../shared/data/binarized_mnist.npz`` beside
the repository root, or the folder named by ``UGM_DATA``); its mean-field bound is compared
with the exact test log-likelihood (hidden configurations enumerated by
``ui.exact.log_likelihood``), which measures how tight the bound is after learning.

The ten class networks are trained together: their parameters carry a leading class
axis and one jitted ``lax.scan`` over steps ``vmap``s the learner's step over the
classes (minibatches drawn with replacement from each class).

Usage::

    python examples/sbn_digits.py --quick --out results/sbn      # < 90 s on 2 CPU cores
    python examples/sbn_digits.py --out results/sbn              # default settings (about 10 min on 2 loaded CPU cores)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ugm_infer as ui
from ugm_infer.learn.sbn_meanfield import mean_field_bound, mean_field_learner
from ugm_infer.models.sbn import sigmoid_belief_net

# binarized MNIST is not shipped with the repository: ../shared/data beside the repository root, or $UGM_DATA
REPO_ROOT = Path(__file__).resolve().parents[1]
MNIST = Path(os.environ.get("UGM_DATA", REPO_ROOT.parent / "shared" / "data")) / "binarized_mnist.npz"

SETTINGS = {
    "quick": dict(
        digits_layers=(64, 8),
        digits_steps=60,
        batch=10,
        lr=0.05,
        mf_iterations=3,
        xi_iterations=6,
        mnist_layers=(784, 6),
        mnist_train=500,
        mnist_test=100,
        mnist_steps=30,
    ),
    "full": dict(
        digits_layers=(64, 16),
        digits_steps=300,
        batch=16,
        lr=0.03,
        mf_iterations=5,
        xi_iterations=8,
        mnist_layers=(784, 10),
        mnist_train=2000,
        mnist_test=500,
        mnist_steps=200,
    ),
}


def load_digits_binary(seed: int = 0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xb = (X >= 8).astype(np.float32)
    return train_test_split(Xb, y, test_size=0.25, stratify=y, random_state=seed)


def init_class_params(model, key, data_by_class):
    """Per-class params (leading class axis): small random weights, visible biases at the data logits."""
    keys = jax.random.split(key, len(data_by_class))
    out = []
    for k, x in zip(keys, data_by_class):
        p = model.init_params(k, scale=0.1)
        m = np.clip(x.mean(0), 0.02, 0.98)
        p["b0"] = jnp.asarray(np.log(m) - np.log1p(-m), jnp.float32)
        out.append(p)
    return jax.tree.map(lambda *xs: jnp.stack(xs), *out)


def train_per_class(model, params, data_by_class, steps, batch, lr, mf_iterations, xi_iterations, key, log_every):
    """Train one network per class at once (vmap over classes, scan over steps)."""
    learner = mean_field_learner(model, optax.adam(lr), num_iterations=mf_iterations, xi_iterations=xi_iterations)
    counts = np.array([len(x) for x in data_by_class])
    padded = np.zeros((len(data_by_class), counts.max(), model.layer_sizes[0]), np.float32)
    for c, x in enumerate(data_by_class):
        padded[c, : len(x)] = x
    padded, counts = jnp.asarray(padded), jnp.asarray(counts)
    state = jax.vmap(lambda p: learner.init(jax.random.key(0), p))(params)

    def one_step(state, k):
        def per_class(st, data, n, kc):
            idx = jax.random.randint(kc, (batch,), 0, n)
            return learner.step(kc, st, {"v": data[idx]})

        keys = jax.random.split(k, len(data_by_class))
        state, info = jax.vmap(per_class)(state, padded, counts, keys)
        return state, info.bound

    @jax.jit
    def run(state, keys):
        return jax.lax.scan(one_step, state, keys)

    curves = []
    for start in range(0, steps, log_every):
        n = min(log_every, steps - start)
        state, bounds = run(state, jax.random.split(jax.random.fold_in(key, start), n))
        curves.append(np.asarray(bounds))
        print(f"  step {start + n}: mean minibatch bound {curves[-1][-1].mean():.2f}", flush=True)
    return state.params, np.concatenate(curves)


def class_bounds(model, params, X, mf_iterations, xi_iterations):
    """(num_images, num_classes) optimised mean-field bounds: one jitted vmap over the class networks."""
    from ugm_infer.learn.sbn_meanfield import _solve_one

    L, sizes = model.num_hidden_layers, model.layer_sizes

    @jax.jit
    def run(params, X):
        def one_class(p):
            return jax.vmap(lambda x: _solve_one(p, L, sizes, x, None, mf_iterations, xi_iterations, 1e-4)[0])(X)

        return jax.vmap(one_class)(params)

    return np.asarray(run(params, jnp.asarray(X, jnp.float32))).T


def digits_experiment(cfg, key):
    from sklearn.linear_model import LogisticRegression

    Xtr, Xte, ytr, yte = load_digits_binary()
    model = sigmoid_belief_net(cfg["digits_layers"])
    by_class = [Xtr[ytr == c] for c in range(10)]
    params = init_class_params(model, key, by_class)
    t0 = time.perf_counter()
    params, curve = train_per_class(
        model,
        params,
        by_class,
        cfg["digits_steps"],
        cfg["batch"],
        cfg["lr"],
        cfg["mf_iterations"],
        cfg["xi_iterations"],
        key,
        log_every=max(cfg["digits_steps"] // 10, 1),
    )
    train_s = time.perf_counter() - t0
    print(f"  trained in {train_s:.1f} s", flush=True)
    scores = class_bounds(model, params, Xte, cfg["mf_iterations"], cfg["xi_iterations"])
    pred = scores.argmax(1)
    sbn_err = float(np.mean(pred != yte))
    own_bound = float(np.mean(scores[np.arange(len(yte)), yte]))
    logreg = LogisticRegression(max_iter=5000, C=1.0).fit(Xtr, ytr)
    lr_err = float(np.mean(logreg.predict(Xte) != yte))
    confusion = np.zeros((10, 10), int)
    np.add.at(confusion, (yte, pred), 1)
    return {
        "layers": list(cfg["digits_layers"]),
        "num_train": int(len(ytr)),
        "num_test": int(len(yte)),
        "sbn_test_error": sbn_err,
        "logreg_test_error": lr_err,
        "mean_test_bound_own_class": own_bound,
        "train_seconds": train_s,
        "confusion": confusion.tolist(),
    }, curve


def mnist_experiment(cfg, key):
    if not MNIST.is_file():
        raise SystemExit(
            f"error: {MNIST} not found; binarized MNIST is not part of the repository: put binarized_mnist.npz in "
            "../shared/data beside the repository root or set UGM_DATA to the folder holding it"
        )
    data = np.load(MNIST)
    train = np.unpackbits(data["train"][: cfg["mnist_train"]], axis=1, count=784).astype(np.float32)
    test = np.unpackbits(data["test"][: cfg["mnist_test"]], axis=1, count=784).astype(np.float32)
    model = sigmoid_belief_net(cfg["mnist_layers"])
    params = init_class_params(model, key, [train])
    t0 = time.perf_counter()
    params, curve = train_per_class(
        model,
        params,
        [train],
        cfg["mnist_steps"],
        cfg["batch"],
        cfg["lr"],
        cfg["mf_iterations"],
        cfg["xi_iterations"],
        key,
        log_every=max(cfg["mnist_steps"] // 10, 1),
    )
    train_s = time.perf_counter() - t0
    params = jax.tree.map(lambda x: x[0], params)
    bound = np.asarray(
        mean_field_bound(
            model, params, test, num_iterations=2 * cfg["mf_iterations"], xi_iterations=cfg["xi_iterations"]
        ).bound
    )
    exact = np.asarray(ui.exact.log_likelihood(model, params, {"v": test}))
    return (
        {
            "layers": list(cfg["mnist_layers"]),
            "num_train": int(len(train)),
            "num_test": int(len(test)),
            "train_steps": cfg["mnist_steps"],
            "test_bound": float(bound.mean()),
            "test_exact_log_likelihood": float(exact.mean()),
            "mean_gap": float((exact - bound).mean()),
            "max_gap": float((exact - bound).max()),
            "min_gap": float((exact - bound).min()),
            "train_seconds": train_s,
        },
        curve[:, 0],
        bound,
        exact,
    )


def plot(path, digits_curve, mnist_curve, bound, exact):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(12, 3.4))
    for c in range(digits_curve.shape[1]):
        ax[0].plot(digits_curve[:, c], lw=0.8, label=str(c))
    ax[0].set(xlabel="step", ylabel="minibatch bound (nats)", title="8x8 digits: one SBN per class")
    ax[0].legend(ncol=5, fontsize=6)
    ax[1].plot(mnist_curve, lw=0.8)
    ax[1].set(xlabel="step", ylabel="minibatch bound (nats)", title="MNIST SBN training")
    ax[2].scatter(exact, bound, s=4)
    lo, hi = min(exact.min(), bound.min()), max(exact.max(), bound.max())
    ax[2].plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax[2].set(xlabel="exact ln P(v)", ylabel="mean-field bound", title="MNIST test images")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small settings (< 90 s on 2 CPU cores)")
    parser.add_argument("--out", type=Path, default=None, help="folder for sbn_digits.json and sbn_digits.png")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cfg = SETTINGS["quick" if args.quick else "full"]
    key = jax.random.key(args.seed)
    t0 = time.perf_counter()
    digits, digits_curve = digits_experiment(cfg, jax.random.fold_in(key, 0))
    print(
        f"digits {digits['layers']}: SBN test error {digits['sbn_test_error']:.4f}, "
        f"logistic regression {digits['logreg_test_error']:.4f} ({digits['num_test']} test images)"
    )
    mnist, mnist_curve, bound, exact = mnist_experiment(cfg, jax.random.fold_in(key, 1))
    print(
        f"MNIST {mnist['layers']}: test bound {mnist['test_bound']:.2f}, exact {mnist['test_exact_log_likelihood']:.2f} "
        f"nats (gap mean {mnist['mean_gap']:.3f}, min {mnist['min_gap']:.3f})"
    )
    result = {
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
        "quick": args.quick,
        "seed": args.seed,
        "digits": digits,
        "mnist": mnist,
        "wall_seconds": time.perf_counter() - t0,
    }
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sbn_digits.json").write_text(json.dumps(result, indent=2))
        plot(args.out / "sbn_digits.png", digits_curve, mnist_curve, bound, exact)
        print(f"wrote {args.out / 'sbn_digits.json'} and {args.out / 'sbn_digits.png'}")
    return result


if __name__ == "__main__":
    main()
