"""Griffe extension of the API reference: learners whose signature and docstring are completed at import.

:func:`ugm_infer.learn.skeleton.particle_learner` gives a learner the public
signature of the arguments the particle learners share, and it and
:func:`ugm_infer.learn.skeleton.shared_argument_docs` complete the learner's
docstring with their documentation.  The API reference is read from the source; for
the functions so decorated it takes the signature and the docstring of the imported
function instead.  Listed under ``extensions`` in ``mkdocs.yml``.
"""

from __future__ import annotations

import inspect
from typing import Any

import griffe

DECORATORS = ("particle_learner", "shared_argument_docs")


def _decorator_name(decorator: griffe.Decorator) -> str:
    return str(decorator.value).split("(")[0].rsplit(".", 1)[-1]


class CompletedLearners(griffe.Extension):
    """Signature and docstring of the imported function, for functions with one of :data:`DECORATORS`."""

    def on_function(self, *, func: griffe.Function, **kwargs: Any) -> None:
        if not any(_decorator_name(d) in DECORATORS for d in func.decorators):
            return
        runtime = griffe.dynamic_import(func.path)
        func.parameters = griffe.Parameters(
            *(
                griffe.Parameter(
                    p.name,
                    annotation=None if p.annotation is p.empty else str(p.annotation),
                    kind=griffe.ParameterKind(p.kind.description),
                    default=None if p.default is p.empty else repr(p.default),
                )
                for p in inspect.signature(runtime).parameters.values()
            )
        )
        static = func.docstring
        func.docstring = griffe.Docstring(
            runtime.__doc__,
            lineno=static.lineno if static else None,
            parent=func,
            parser=static.parser if static else None,
            parser_options=static.parser_options if static else None,
        )
