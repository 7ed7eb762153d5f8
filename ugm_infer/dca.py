"""DCA names under ``ugm_infer.dca``: a facade of :mod:`ugm_infer.applications.dca`.

Direct-coupling analysis of protein families (alignments, bmDCA learning, contact
scores) lives in :mod:`ugm_infer.applications.dca`; this module re-exports its names
on first use, so ``ui.dca.fit_dca`` and ``from ugm_infer import dca`` keep working
without the core importing the application.
"""

from ugm_infer._lazy import reexport

__getattr__, __dir__ = reexport(
    __name__,
    (
        "ugm_infer.applications.dca",
        "ugm_infer.applications.dca.alignment",
        "ugm_infer.applications.dca.learning",
        "ugm_infer.applications.dca.contacts",
    ),
)
