"""Objects built from options: optimizers, learners, kernels, temperature ladders."""

from __future__ import annotations

from ugm_infer.cli._options import CLIError


def betas(num: int, low: float):
    """``num`` inverse temperatures uniform in ``[low, 1]`` (options already checked)."""
    from ugm_infer.kernels.tempered_transitions import uniform_ladder

    return uniform_ladder(num, low)


def sampling_algorithm(args, model, params):
    """The kernel named by ``--kernel`` on ``(model, params)``, and its ladder (or ``None``)."""
    import ugm_infer as ui

    if args.kernel == "gibbs":
        return ui.kernels.gibbs(model, params), None
    if args.kernel == "metropolis":
        return ui.kernels.metropolis(model, params), None
    ladder = betas(args.num_betas, args.beta_min)
    return getattr(ui.kernels, args.kernel)(model, params, betas=ladder), ladder


def schedule(args):
    """The learning rate (a float or an optax schedule) from ``--learning-rate`` and ``--schedule``."""
    from ugm_infer.learn.schedules import constant_then_robbins_monro, robbins_monro

    lr, b = args.learning_rate, args.decay_offset
    if args.schedule == "constant":
        return lr
    if args.schedule == "robbins_monro":  # lr * b / (b + t): starts at lr
        return robbins_monro(lr * b, b)
    return constant_then_robbins_monro(lr, args.constant_steps, lr * b, b)


def optimizer(args):
    import optax

    lr = schedule(args)
    if args.optimizer == "sgd":
        return optax.sgd(lr)
    if args.optimizer == "momentum":
        return optax.sgd(lr, momentum=0.9)
    return optax.adam(lr)


def learner(args, model):
    """The learner named by ``--learner`` on ``model``."""
    import ugm_infer as ui

    opt = optimizer(args)
    n = args.num_chains
    name = args.learner
    if name == "pcd":
        return ui.learn.pcd(model, optimizer=opt, num_particles=n, num_sweeps=args.sweeps)
    if name == "cd":
        return ui.learn.cd(model, k=args.sweeps, optimizer=opt)
    if name == "sap":
        if args.kernel not in ("gibbs", "metropolis"):
            raise CLIError(f"--kernel {args.kernel} is used through --learner trans_sap / pt_sap, not sap")
        kernel = getattr(ui.kernels, args.kernel)
        return ui.learn.sap(model, kernel=kernel, optimizer=opt, num_particles=n, num_steps_per_update=args.sweeps)
    if name == "trans_sap":
        return ui.learn.trans_sap(model, optimizer=opt, num_particles=n, betas=betas(args.num_betas, args.beta_min))
    if name == "pt_sap":
        return ui.learn.pt_sap(model, optimizer=opt, num_particles=n, betas=betas(args.num_betas, args.beta_min))
    if name == "exact_ml":
        return ui.learn.exact_ml(model, optimizer=opt)
    if name == "pseudo_likelihood":
        return ui.learn.pseudo_likelihood(model, optimizer=opt)
    if name == "mcmc_mle":
        return ui.learn.mcmc_mle(model, optimizer=opt, num_particles=n)
    if name == "pf_mcmc_mle":
        return ui.learn.pf_mcmc_mle(model, optimizer=opt, num_particles=n)
    if name == "psmc":
        return ui.learn.psmc(model, optimizer=opt, num_particles=n)
    return ui.learn.smc(model, optimizer=opt, num_particles=n)


def replicas(args) -> int:
    """Copies of the chains a learner or kernel keeps (one per temperature when tempering)."""
    tempered = getattr(args, "learner", None) in ("trans_sap", "pt_sap") or getattr(args, "kernel", None) in (
        "tempered_transitions",
        "parallel_tempering",
    )
    return args.num_betas if tempered else 1
