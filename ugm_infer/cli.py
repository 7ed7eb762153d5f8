"""Command-line interface: ``ugm-infer``.

``ugm-infer demo`` is the embedded default: with no data and no options it trains a
small RBM on the bundled 14x14 binary digits by PCD, prints the exact average
log-likelihood before and after (the 2^16 hidden states are enumerated, the visibles
summed analytically), and writes a learning-curve plot and a metrics JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def _demo(args) -> int:
    import jax
    import numpy as np
    import optax

    import ugm_infer as ui
    from ugm_infer.datasets import load_digits14

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = load_digits14()
    train, test = data["train"], data["test"]
    if args.quick:
        train = train[:500]
    model = ui.models.rbm(train.shape[1], args.hidden)
    key = jax.random.key(args.seed)
    params = model.init_params(key, scale=0.01, data=train)

    def exact_ll(p):
        return {
            "train": float(ui.exact.average_log_likelihood(model, p, {"v": train})),
            "test": float(ui.exact.average_log_likelihood(model, p, {"v": test})),
        }

    print(f"ugm_infer demo: RBM {train.shape[1]}x{args.hidden} on {len(train)} binary 14x14 digits (PCD-1)")
    t0 = time.perf_counter()
    before = exact_ll(params)
    print(f"  exact average log-likelihood before: train {before['train']:.2f}  test {before['test']:.2f} nats")
    learner = ui.learn.pcd(model, optimizer=optax.sgd(args.learning_rate), num_particles=100)
    result = ui.fit(
        learner,
        jax.random.fold_in(key, 1),
        {"v": train},
        params=params,
        num_epochs=args.epochs,
        batch_size=100,
        eval_every=max(1, args.epochs // 10),
        eval_fn="auto",
        eval_data={"v": test},
        progress="auto",
    )
    after = exact_ll(result.params)
    elapsed = time.perf_counter() - t0
    print(f"  exact average log-likelihood after:  train {after['train']:.2f}  test {after['test']:.2f} nats")
    print(f"  {args.epochs} epochs in {elapsed:.1f} s")

    evaluations = result.history["evaluations"]
    metrics = {
        "model": f"rbm {train.shape[1]}x{args.hidden}",
        "learner": "pcd-1, 100 persistent chains, sgd",
        "learning_rate": args.learning_rate,
        "epochs": args.epochs,
        "num_train": int(len(train)),
        "num_test": int(len(test)),
        "before": before,
        "after": after,
        "seconds": elapsed,
        "eval_epochs": [float(x) for x in evaluations["epoch"]],
        "eval_train_log_likelihood": [float(x) for x in evaluations["train_log_likelihood"]],
        "eval_test_log_likelihood": [float(x) for x in evaluations["eval_log_likelihood"]],
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].plot(metrics["eval_epochs"], metrics["eval_train_log_likelihood"], "o-", label="train")
    axes[0].plot(metrics["eval_epochs"], metrics["eval_test_log_likelihood"], "s-", label="test")
    axes[0].set_xlabel("epoch")
    axes[0].set_ylabel("exact average log-likelihood (nats)")
    axes[0].legend()
    chains = np.asarray(result.state.particles["v"])[:16].reshape(4, 4, 14, 14)
    axes[1].imshow(np.block([[c for c in row] for row in chains]), cmap="gray_r")
    axes[1].set_title("persistent chains after training")
    axes[1].axis("off")
    fig.tight_layout()
    fig.savefig(out / "learning_curve.png", dpi=100)
    plt.close(fig)
    print(f"  wrote {out / 'learning_curve.png'} and {out / 'metrics.json'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ugm-infer", description="Discrete undirected graphical models in JAX.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="train a small RBM on bundled digits and report exact log-likelihoods")
    demo.add_argument("--out", default="out/demo", help="output folder (default: out/demo)")
    demo.add_argument("--epochs", type=int, default=30)
    demo.add_argument("--hidden", type=int, default=16, help="hidden units (<= 20 keeps the likelihood exact)")
    demo.add_argument("--learning-rate", type=float, default=0.05)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--quick", action="store_true", help="500 training images")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["demo"] + (argv or sys.argv[1:]))
    try:
        if args.command == "demo":
            if args.epochs < 1:
                raise CLIError("--epochs must be >= 1")
            if not 1 <= args.hidden <= 24:
                raise CLIError("--hidden must be between 1 and 24 (exact likelihood enumerates 2^hidden states)")
            return _demo(args)
        raise CLIError(f"unknown command {args.command!r}")
    except CLIError as err:
        print(f"ugm-infer: error: {err}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, FileNotFoundError) as err:
        if args.debug:
            raise
        print(f"ugm-infer: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
