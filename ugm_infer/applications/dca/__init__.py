"""Direct-coupling analysis (DCA): Potts models of protein sequence families.

A multiple sequence alignment of a protein family (``N`` sequences of ``L`` aligned
columns over ``q = 21`` states, 20 amino acids and the gap) is fitted with a dense
Potts model (:func:`ugm_infer.models.potts`) by maximum likelihood
("Boltzmann-machine DCA", bmDCA), so that its one- and two-point marginals match the
reweighted, pseudocount-regularised frequencies of the alignment; strongly coupled
column pairs predict residue contacts of the folded protein (Morcos et al. 2011;
Figliuzzi et al. 2018).  The pipeline, one module a stage (every name is also
``ui.dca.<name>``):

:mod:`~ugm_infer.applications.dca.alignment`
    :func:`read_fasta`, :func:`sequence_weights`, :func:`frequencies`, and the
    model-side statistics :func:`chain_frequencies`, :func:`connected_correlations`,
    :func:`pearson_connected`;
:mod:`~ugm_infer.applications.dca.learning`
    :func:`fit_dca` (persistent-chain stochastic maximum likelihood with the fast Potts
    Gibbs kernel :data:`~ugm_infer.models.potts.potts_gibbs`) and its :func:`gradient`;
:mod:`~ugm_infer.applications.dca.contacts`
    :func:`zero_sum_gauge`, :func:`frobenius_scores` (APC), :func:`read_contact_map`,
    :func:`contact_precision`.

The Potts model and its Gibbs kernel are part of the core (:mod:`ugm_infer.models.potts`);
the references are in the modules.
"""

from ugm_infer.applications.dca.alignment import (
    ALPHABET,
    ALPHABET_GAP_LAST,
    Alignment,
    chain_frequencies,
    connected_correlations,
    frequencies,
    pearson_connected,
    read_fasta,
    sequence_weights,
)
from ugm_infer.applications.dca.contacts import contact_precision, frobenius_scores, read_contact_map, zero_sum_gauge
from ugm_infer.applications.dca.learning import DCAResult, fit_dca, gradient
from ugm_infer.models.potts import potts_gibbs

__all__ = [
    "ALPHABET",
    "ALPHABET_GAP_LAST",
    "Alignment",
    "DCAResult",
    "chain_frequencies",
    "connected_correlations",
    "contact_precision",
    "fit_dca",
    "frequencies",
    "frobenius_scores",
    "gradient",
    "pearson_connected",
    "potts_gibbs",
    "read_contact_map",
    "read_fasta",
    "sequence_weights",
    "zero_sum_gauge",
]
