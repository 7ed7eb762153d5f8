"""Multi-label CRF with all pairwise label couplings: exact CML versus PCD versus PF versus logistic regression.

The multi-label model of the PSMC paper's section 7.1, on a data set available offline
(scikit-learn's ``make_multilabel_classification``):

* data: ``n`` documents, ``D`` count features (standardised), ``L`` labels (default
  ``L = 8``, so the ``2^L = 256`` labellings can be enumerated), 2/3 train, 1/3 test;
* model: ``ui.models.multilabel_crf(L, D)``,
  :math:`E(\\theta, x, y) = -y^\\top (W^\\top x + b) - \\tfrac12 y^\\top V y` (a coupling
  for every pair of labels);
* learners (full-batch Adam on the average conditional log-likelihood, the same
  L2 penalty ``weight_decay`` on every parameter, all from :math:`\\theta = 0`):

  - **exact**: ``ui.learn.conditional.conditional_exact_ml`` (``log Z(x_n)`` by
    enumeration of the 256 labellings of every input);
  - **PCD**: ``conditional_pcd`` with ``S`` persistent particles per training input;
  - **PF**: ``conditional_pf_mcmc_mle`` (per-input weights and resampling);

* baselines: independent per-label logistic regression (scikit-learn,
  ``C = 1 / (weight_decay * n_train)``, the same penalty), and the CRF with ``V = 0``;
* prediction: the exact MAP labelling (enumeration), ICM (from the independent-label
  labelling) and the max-marginal labelling (marginals from Gibbs samples);
* metrics on the test split: micro-averaged precision / recall / F1 (scikit-learn),
  Hamming loss, subset accuracy, and the exact average test conditional
  log-likelihood.

Run ``python examples/crf_multilabel.py`` (full) or ``--quick`` (CI, < 90 s of CPU).
Writes ``crf_multilabel.json`` into ``--out`` (default ``out/crf_multilabel``), in both
modes.  Results: ``docs/results/crf_multilabel.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.datasets import make_multilabel_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, hamming_loss, precision_score, recall_score
from sklearn.preprocessing import StandardScaler

from ugm_infer.applications.crf import multilabel_crf, predict
from ugm_infer.learn import conditional as cl

METHODS = ("exact", "PCD", "PF")


def make_data(args):
    x, y = make_multilabel_classification(
        n_samples=args.num_samples,
        n_features=args.num_features,
        n_classes=args.num_labels,
        n_labels=args.avg_labels,
        allow_unlabeled=True,
        random_state=args.seed,
    )
    n_train = (2 * len(x)) // 3
    scaler = StandardScaler().fit(x[:n_train])
    x = scaler.transform(x).astype(np.float32)
    y = y.astype(np.float32)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def scores(y_true, y_pred) -> dict:
    return {
        "precision": float(precision_score(y_true, y_pred, average="micro", zero_division=0)),
        "recall": float(recall_score(y_true, y_pred, average="micro", zero_division=0)),
        "f1": float(f1_score(y_true, y_pred, average="micro", zero_division=0)),
        "hamming_loss": float(hamming_loss(y_true, y_pred)),
        "subset_accuracy": float(np.mean(np.all(y_true == y_pred, axis=1))),
    }


def run(args) -> dict:
    xtr, ytr, xte, yte = make_data(args)
    L, D = args.num_labels, args.num_features
    model = multilabel_crf(L, D)
    train = {"x": jnp.asarray(xtr), "y": jnp.asarray(ytr)}
    test = {"x": jnp.asarray(xte), "y": jnp.asarray(yte)}
    print(f"data: {len(xtr)} train, {len(xte)} test, D={D}, L={L}, mean labels/doc {ytr.sum(1).mean():.2f}")
    all_y = jnp.asarray(((np.arange(2**L)[:, None] >> np.arange(L - 1, -1, -1)) & 1).astype(np.float32))

    @jax.jit
    def evaluate_with(theta, key, test):
        cll = cl.exact_conditional_log_likelihood(model, theta, test)

        def one(k, xi):
            cp = model.condition(theta, xi)
            energies = model.energies(cp, {"y": all_y})
            map_y = all_y[jnp.argmin(energies)]
            field = xi @ theta["W"] + theta["b"]
            icm_y = predict.icm(model, cp, {"y": (field > 0).astype(jnp.float32)}).state["y"]
            mm = predict.max_marginals(k, model, cp, {"y": map_y * 0}, num_samples=args.mpm_samples, num_burnin=10)
            return map_y, icm_y, mm.state["y"]

        preds = jax.vmap(one)(jax.random.split(key, xte.shape[0]), test["x"])
        return cll, preds

    def evaluate(theta, key):
        return evaluate_with(theta, key, test)

    results = {"methods": {}}
    theta0 = model.init_params(jax.random.key(0))

    def opt():
        return optax.chain(optax.add_decayed_weights(args.weight_decay), optax.adam(args.lr))

    for name in args.methods:
        if name == "exact":
            learner = cl.conditional_exact_ml(model, opt())
        elif name == "PCD":
            learner = cl.conditional_pcd(model, opt(), args.num_particles)
        else:
            learner = cl.conditional_pf_mcmc_mle(
                model, None, opt(), args.num_particles, ess_threshold=args.ess_threshold, num_burnin_steps=10
            )
        state = learner.init(jax.random.key(args.seed + 1), theta0, train)
        run_all = jax.jit(
            lambda s, keys, d, learner=learner: jax.lax.scan(lambda s, k: (learner.step(k, s, d)[0], None), s, keys)[0]
        )
        keys = jax.random.split(jax.random.key(args.seed + 2), args.updates)
        t0 = time.perf_counter()
        compiled = run_all.lower(state, keys, train).compile()
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        state = jax.block_until_ready(compiled(state, keys, train))
        elapsed = time.perf_counter() - t0
        cll, (map_y, icm_y, mm_y) = evaluate(state.params, jax.random.key(args.seed + 3))
        entry = {
            "train_time_s": elapsed,
            "compile_time_s": compile_s,
            "test_cll": float(cll),
            "train_cll": float(jax.jit(cl.exact_conditional_log_likelihood, static_argnums=0)(model, state.params, train)),
            "map": scores(yte, np.asarray(map_y)),
            "icm": scores(yte, np.asarray(icm_y)),
            "max_marginals": scores(yte, np.asarray(mm_y)),
            "coupling_abs_mean": float(jnp.mean(jnp.abs(state.params["V"]))),
        }
        if name == "PF":
            entry["resample_fraction"] = float(np.mean(np.asarray(state.num_resampled)) / args.updates)
        results["methods"][name] = entry
        print(
            f"{name:6s} test CLL {entry['test_cll']:.4f}  MAP F1 {entry['map']['f1']:.4f} "
            f"(P {entry['map']['precision']:.3f} R {entry['map']['recall']:.3f})  ICM F1 {entry['icm']['f1']:.4f}  "
            f"max-marg F1 {entry['max_marginals']['f1']:.4f}  subset acc {entry['map']['subset_accuracy']:.3f}  "
            f"train {elapsed:.1f}s",
            flush=True,
        )
        if name == "exact":
            # the same CRF without couplings: independent logistic regressions fitted by exact CML
            indep = cl.conditional_exact_ml(
                model, optax.chain(opt(), optax.masked(optax.set_to_zero(), {"W": False, "b": False, "V": True}))
            )
            s = indep.init(None, theta0, train)
            s = jax.jit(
                lambda s: jax.lax.scan(lambda s, _: (indep.step(None, s, train)[0], None), s, None, length=args.updates)[0]
            )(s)
            cll0, (map0, _, _) = evaluate(s.params, jax.random.key(0))
            results["methods"]["CRF V=0"] = {"test_cll": float(cll0), "map": scores(yte, np.asarray(map0))}
            print(f"CRF V=0 test CLL {float(cll0):.4f}  MAP F1 {results['methods']['CRF V=0']['map']['f1']:.4f}")

    # independent per-label logistic regression (scikit-learn), same L2 penalty
    c = 1.0 / (args.weight_decay * len(xtr))
    pred, logp = np.zeros_like(yte), 0.0
    for j in range(L):
        if len(np.unique(ytr[:, j])) < 2:
            pred[:, j] = ytr[0, j]
            continue
        lr = LogisticRegression(C=c, max_iter=2000).fit(xtr, ytr[:, j])
        pred[:, j] = lr.predict(xte)
        p = np.clip(lr.predict_proba(xte)[np.arange(len(xte)), yte[:, j].astype(int)], 1e-12, 1)
        logp += np.mean(np.log(p))
    results["methods"]["logistic regression"] = {"test_cll": float(logp), "map": scores(yte, pred)}
    print(f"logreg test CLL {logp:.4f}  F1 {results['methods']['logistic regression']['map']['f1']:.4f}")
    return results


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="CI: 300 documents, 60 updates")
    p.add_argument("--out", default="out/crf_multilabel")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-samples", type=int, default=None, help="documents (default 1500, quick 300)")
    p.add_argument("--num-features", type=int, default=20)
    p.add_argument("--num-labels", type=int, default=8)
    p.add_argument("--avg-labels", type=int, default=3, help="make_multilabel_classification n_labels")
    p.add_argument("--updates", type=int, default=None, help="full-batch updates (default 300, quick 60)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--weight-decay", type=float, default=1e-3)
    p.add_argument("--num-particles", type=int, default=5, help="S, particles per training input")
    p.add_argument("--ess-threshold", type=float, default=0.8, help="PF resamples an input when ESS < this * S")
    p.add_argument("--mpm-samples", type=int, default=100)
    p.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(METHODS))
    args = p.parse_args(argv)
    args.num_samples = args.num_samples or (300 if args.quick else 1500)
    args.updates = args.updates or (60 if args.quick else 300)
    t0 = time.time()
    results = run(args)
    results["config"] = dict(vars(args))
    results["platform"] = {"python": sys.version.split()[0], "jax": jax.__version__, "machine": platform.machine()}
    results["total_wall_s"] = time.time() - t0
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "crf_multilabel.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {args.out}/crf_multilabel.json")
    print(f"total {results['total_wall_s']:.1f}s")
    return results


if __name__ == "__main__":
    main()
