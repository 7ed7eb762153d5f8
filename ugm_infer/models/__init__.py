"""Built-in models: each an :class:`~ugm_infer.EnergyModel` subclass with declared structure.

Every model documents its params pytree, declares its ``blocks`` and ``multilinear``
(no probing needed), checks params with ``model.validate_params(params)`` (a
``ValueError`` naming the param and the expected shape) and has
``init_params(rng_key, ...)`` returning float32 params.  States may be stored in any
dtype (``int8`` included); energies cast them to the params' float dtype.

``ising(n, edges=None, domain="spin")``
    variable ``s``: Spin or Binary ``(n,)``.  Dense: ``W (n, n)`` symmetric with zero
    diagonal, ``h (n,)``, :math:`E = -\\tfrac12 s^\\top W s - h^\\top s`.  Edge list
    ``(m, 2)``: ``w (m,)``, ``h (n,)``, :math:`E = -\\sum_e w_e s_i s_j - h^\\top s`.
``boltzmann_machine(n, edges=None)``
    ``ising(..., domain="binary")``: units in {0, 1}.
``lattice_ising(H, W, periodic=True, domain="spin", dtype=float32)``
    variable ``s``: Spin or Binary ``(H, W)``; scalars ``J``, ``h``;
    :math:`E = -J \\sum_{\\langle ij \\rangle} s_i s_j - h \\sum_i s_i`.
``potts(n, q, edges=None)``
    variable ``x``: Categorical ``(n,)`` with ``q`` states.  Dense: ``J (n, n, q, q)``
    with ``J[i, j, a, b] = J[j, i, b, a]`` and ``J[i, i] = 0``, ``h (n, q)``,
    :math:`E = -\\sum_{i<j} J_{ij}(x_i, x_j) - \\sum_i h_i(x_i)`.  Edge list:
    ``J (m, q, q)``, ``h (n, q)``, :math:`E = -\\sum_e J_e(x_i, x_j) - \\sum_i h_i(x_i)`.
``lattice_potts(H, W, q, periodic=False)``
    ``potts(H * W, q, edges=lattice_edges(H, W, periodic))``; ``x`` has shape
    ``(H * W,)``, row-major.
``potts_gibbs``
    fast exact single-site Gibbs kernel for Potts models: each site's local field
    :math:`h_i + \\sum_j J_{ij}(\\cdot, x_j)` in O(n q) (BlackJAX API; used by
    :mod:`ugm_infer.applications.dca`).
``rbm(n_v, n_h)``
    variables ``v``: Binary ``(n_v,)``, ``h``: Binary ``(n_h,)``; ``W (n_v, n_h)``,
    ``b (n_v,)``, ``c (n_h,)``; :math:`E = -v^\\top W h - b^\\top v - c^\\top h`; free
    energies with either layer summed out.
``semi_rbm(n_v, n_h, edges=None)``
    RBM params plus ``L (n_v, n_v)`` symmetric with zero diagonal (or ``L (m,)``, one
    per visible edge); :math:`E = E_{\\rm RBM} - \\tfrac12 v^\\top L v`; free energy
    with the hiddens summed out.

Blocks: single sites for dense couplings (``ising``, ``potts``, the visibles of
``semi_rbm``), the greedy colouring of the graph for edge lists, the checkerboard for
lattices (three colours for an odd periodic size), ``[{v}, {h}]`` for ``rbm``.
Lattice helpers: :func:`lattice_edges` (row-major site numbering),
:func:`checkerboard_blocks`, :func:`lattice_colors`.

The application models are here too, resolved on first use from
:mod:`ugm_infer.applications`: ``crf``, ``pairwise_crf``, ``grid_crf``,
``multilabel_crf``, ``difference_features`` (CRFs) and ``ergm``, ``ergm_toggle``,
``ergm_simulate``, ``ergm_mple``, ``ergm_mcmc_mle``, ``change_stats``,
``to_adjacency``, ``from_adjacency`` (ERGMs).
"""

# The application models (CRFs, ERGMs) are reachable as ``ui.models.<name>`` and through
# the facade modules ``ugm_infer.models.crf`` / ``ugm_infer.models.ergm``, but live in
# ``ugm_infer.applications`` and are imported on first use: the core does not load
# them.  The facades are loaded here (they import nothing) so that the names ``crf``
# and ``ergm`` below stay the functions, not the modules of the same name.
from ugm_infer._lazy import lazy_attributes as _lazy_attributes
from ugm_infer.models import crf as _crf_facade  # noqa: F401
from ugm_infer.models import ergm as _ergm_facade  # noqa: F401
from ugm_infer.models.dbm import DBM, dbm
from ugm_infer.models.grid_hidden import (
    GridHidden,
    grid_hidden,
    grid_log_likelihood,
    grid_log_partition,
    random_grid_hidden,
)
from ugm_infer.models.ising import Ising, boltzmann_machine, ising
from ugm_infer.models.lattice import (
    CRITICAL_COUPLING,
    LatticeIsing,
    checkerboard_blocks,
    lattice_colors,
    lattice_edges,
    lattice_ising,
)
from ugm_infer.models.potts import Potts, PottsLogDensity, lattice_potts, potts, potts_gibbs
from ugm_infer.models.rbm import RBM, SemiRBM, rbm, semi_rbm
from ugm_infer.models.sbn import SigmoidBeliefNet, sigmoid_belief_net

del crf, ergm  # noqa: F821 (the facade submodules; the public names are the functions, resolved lazily)

#: The application models resolved on first use: module -> names.
_APPLICATION_NAMES = {
    "ugm_infer.applications.crf.model": (
        "CRF",
        "MultilabelCRF",
        "PairwiseCRF",
        "crf",
        "difference_features",
        "grid_crf",
        "multilabel_crf",
        "pairwise_crf",
    ),
    "ugm_infer.applications.ergm": (
        "ERGM",
        "change_stats",
        "ergm",
        "ergm_mcmc_mle",
        "ergm_mple",
        "ergm_simulate",
        "ergm_toggle",
        "from_adjacency",
        "to_adjacency",
    ),
}
__getattr__, __dir__ = _lazy_attributes(
    __name__, {name: f"{module}:{name}" for module, names in _APPLICATION_NAMES.items() for name in names}
)

__all__ = [
    "CRITICAL_COUPLING",
    "DBM",
    "SigmoidBeliefNet",
    "sigmoid_belief_net",
    "GridHidden",
    "dbm",
    "grid_hidden",
    "grid_log_likelihood",
    "grid_log_partition",
    "random_grid_hidden",
    "RBM",
    "Ising",
    "LatticeIsing",
    "Potts",
    "PottsLogDensity",
    "SemiRBM",
    "boltzmann_machine",
    "checkerboard_blocks",
    "ising",
    "lattice_colors",
    "lattice_edges",
    "lattice_ising",
    "lattice_potts",
    "potts",
    "potts_gibbs",
    "rbm",
    "semi_rbm",
]
__all__ += [name for names in _APPLICATION_NAMES.values() for name in names]
