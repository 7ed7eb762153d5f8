"""Applications built on the core: each folder holds a model family, its estimation and its tools.

They import the core (``ugm_infer.model``, ``ugm_infer.learn``, ...), never the reverse.
"""
