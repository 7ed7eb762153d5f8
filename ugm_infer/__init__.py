"""ugm_infer: discrete undirected graphical models in JAX.

Declare a model as an energy function, sample it with BlackJAX-style kernels, compute
exact answers on small models, and learn its parameters by stochastic approximation.
"""

from ugm_infer import dca, diagnostics, exact, io, kernels, learn, models, numpyro, plots, predict, sharding, smc  # noqa: F401 (numpyro: not in __all__, would shadow the package on `import *`)
from ugm_infer.domains import Binary, Categorical, Domain, Spin
from ugm_infer.fit import FitDiverged, FitInterrupted, FitResult, PackedBits, fit
from ugm_infer.io import load_model, save_model
from ugm_infer.model import EnergyModel
from ugm_infer.sampling import SampleResult, sample

__version__ = "0.1.0"

__all__ = [
    "Binary",
    "Categorical",
    "Domain",
    "EnergyModel",
    "FitDiverged",
    "FitInterrupted",
    "FitResult",
    "PackedBits",
    "SampleResult",
    "Spin",
    "dca",
    "exact",
    "diagnostics",
    "fit",
    "io",
    "kernels",
    "learn",
    "load_model",
    "models",
    "plots",
    "predict",
    "sample",
    "save_model",
    "sharding",
    "smc",
]
