"""ugm_infer: discrete undirected graphical models in JAX.

Declare a model as an energy function, sample it with BlackJAX-style kernels, compute
exact answers on small models, and learn its parameters by stochastic approximation.

``import ugm_infer`` loads only the light core (domains, :class:`EnergyModel`,
:func:`fit`, model I/O); the subpackages (``kernels``, ``models``, ``exact``, ``learn``,
``smc``, ``diagnostics``, ``plots``, ``numpyro``, ``sharding``) and the applications'
facades (``dca``, ``predict``) are imported on first use, so BlackJAX, NumPyro, ArviZ
and matplotlib load only when a program needs them.
"""

from ugm_infer._lazy import lazy_attributes as _lazy_attributes
from ugm_infer.domains import Binary, Categorical, Domain, Spin
from ugm_infer.fit import FitDiverged, FitInterrupted, FitResult, PackedBits, fit
from ugm_infer.io import load_model, save_model
from ugm_infer.model import EnergyModel

__version__ = "0.1.0"

__getattr__, __dir__ = _lazy_attributes(
    __name__,
    {
        **{
            name: f"ugm_infer.{name}"
            for name in (
                "dca",
                "diagnostics",
                "exact",
                "kernels",
                "learn",
                "models",
                "numpyro",  # not in __all__: it would shadow the numpyro package on `import *`
                "plots",
                "predict",
                "sampling",
                "sharding",
                "smc",
            )
        },
        "sample": "ugm_infer.sampling:sample",
        "SampleResult": "ugm_infer.sampling:SampleResult",
    },
)

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
