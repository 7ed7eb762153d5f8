"""Applications built on the core: each a package with its model, estimation and tools.

:mod:`ugm_infer.applications.crf`
    conditional random fields and prediction (MAP by ICM / annealing, marginal modes);
:mod:`ugm_infer.applications.ergm`
    exponential random graph models: model, edge-toggle sampler, simulation, MPLE and
    MCMC-MLE;
:mod:`ugm_infer.applications.dca`
    direct-coupling analysis of protein families: alignments, bmDCA learning, contacts.

Applications import the core (:mod:`ugm_infer.model`, :mod:`ugm_infer.models`,
:mod:`ugm_infer.kernels`, :mod:`ugm_infer.learn`, ...); the core never imports them when
it is loaded.  Their public names are also reachable from the core's namespaces
(``ui.models.ergm``, ``ui.models.grid_crf``, ``ui.predict``, ``ui.dca``) through lazy
facades that import an application on first use.
"""
