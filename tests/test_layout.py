"""The package layout: a light ``import ugm_infer``, and every public name where users find it.

The applications (CRFs, ERGMs, DCA) live in ``ugm_infer.applications``; their names stay
reachable from the core's namespaces (``ui.models.ergm``, ``ui.predict.icm``,
``ui.dca.fit_dca``, ``from ugm_infer.models.crf import grid_crf``) through lazy facades,
and each path gives the very same object.  Checks that need a fresh interpreter run in
a subprocess.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _fresh(code: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_ugm_infer_is_light():
    loaded = _fresh(
        "import json, sys\nimport ugm_infer\n"
        "heavy = ('numpyro', 'matplotlib', 'arviz', 'xarray', 'blackjax', 'optax', 'scipy', 'tqdm')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy "
        "or m.startswith('ugm_infer.applications'))))"
    )
    assert loaded == [], f"`import ugm_infer` loaded {loaded}"


def test_first_use_loads_what_it_needs():
    out = _fresh(
        "import json, sys\nimport ugm_infer as ui\n"
        "m = ui.models.ising(3)\nbefore = 'ugm_infer.applications' in sys.modules\n"
        "f = ui.models.ergm\nafter = 'ugm_infer.applications.ergm' in sys.modules\n"
        "print(json.dumps([before, after, callable(f), 'numpyro' in sys.modules]))"
    )
    assert out == [False, True, True, False]


#: The application names ARCHITECTURE.md lists under ``ui.models`` (and their classes).
ERGM_NAMES = "ERGM change_stats ergm ergm_mcmc_mle ergm_mple ergm_simulate ergm_toggle from_adjacency to_adjacency".split()
CRF_NAMES = "CRF MultilabelCRF PairwiseCRF crf difference_features grid_crf multilabel_crf pairwise_crf".split()


@pytest.mark.parametrize("name", ERGM_NAMES)
def test_ergm_names(name):
    import ugm_infer as ui
    import ugm_infer.applications.ergm as app

    facade = importlib.import_module("ugm_infer.models.ergm")  # `import ... as` would give the function

    assert getattr(ui.models, name) is getattr(app, name) is getattr(facade, name)
    assert name in dir(ui.models) and name in dir(facade)


@pytest.mark.parametrize("name", CRF_NAMES)
def test_crf_names(name):
    import ugm_infer as ui
    import ugm_infer.applications.crf as app

    facade = importlib.import_module("ugm_infer.models.crf")

    assert getattr(ui.models, name) is getattr(app, name) is getattr(facade, name)


def test_predict_and_dca_facades():
    import ugm_infer as ui
    import ugm_infer.applications.crf.predict as predict
    import ugm_infer.applications.dca as dca
    import ugm_infer.dca
    import ugm_infer.predict

    for name in ugm_infer.predict.__all__:
        assert getattr(ui.predict, name) is getattr(predict, name)
    for name in ugm_infer.dca.__all__:
        assert getattr(ui.dca, name) is getattr(dca, name)
    assert ui.dca.potts_gibbs is ui.models.potts_gibbs
    with pytest.raises(AttributeError, match="no_such_name"):
        ui.dca.no_such_name  # noqa: B018


def test_function_names_survive_importing_the_facade_modules():
    """``ugm_infer.models.crf`` / ``.ergm`` are modules and functions of the same name: the name stays the function."""
    out = _fresh(
        "import json\nimport ugm_infer as ui\n"
        "from ugm_infer.models.ergm import ergm_mple\nimport ugm_infer.models.crf\n"
        "from ugm_infer.models.crf import grid_crf\n"
        "print(json.dumps([type(ui.models.ergm).__name__, type(ui.models.crf).__name__, ui.models.ergm(4).num_dyads]))"
    )
    assert out == ["function", "function", 6]


def test_every_name_of_all_resolves():
    import ugm_infer as ui

    for module in (ui, ui.models, ui.dca, ui.predict, ui.learn, ui.kernels, ui.smc):
        for name in module.__all__:
            assert getattr(module, name) is not None, (module.__name__, name)
