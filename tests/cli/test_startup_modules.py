"""Each data command imports only what it uses (issue 23, item 7), checked by the modules a
fresh interpreter has loaded after running it — never by wall time.

``dpfair median-ci`` loads NumPy and DuckDB and nothing else heavy: no SciPy at all (the rank
targets use :mod:`dpfair.median._binomial`, the printed "(implies ε …)" the SciPy-free zCDP
conversion), no pandas, scikit-learn or Arrow; with ``--json`` not even rich. ``dpfair
quantile-ci`` still needs SciPy for its default method (the CDF tree's Gaussian mixture tail,
``median/_cdf.py``) but no pandas or scikit-learn. ``dpfair fdp keygen`` is checked to add
nothing to what importing the key module itself loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HEAVY = ("sklearn", "pandas", "matplotlib", "pyarrow", "dask", "scipy.optimize",
         "scipy.stats", "scipy.special", "scipy", "duckdb", "numpy", "rich", "cryptography")
SCIPY = {"scipy", "scipy.optimize", "scipy.stats", "scipy.special"}


def _loaded_after(code: str) -> set[str]:
    probe = (
        "import sys, json\n"
        f"{code}\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _main(argv: list[str]) -> str:
    return (
        "from dpfair.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )


@pytest.fixture(scope="module")
def ages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ages") / "ages.csv"
    x = np.random.default_rng(0).integers(17, 91, 5000)
    path.write_text("age\n" + "".join(f"{v}\n" for v in x))
    return path


def test_median_ci_json_loads_numpy_and_duckdb_only(ages: Path) -> None:
    loaded = _loaded_after(_main(["median-ci", str(ages), "-c", "age", "--rho", "0.5",
                                  "--bounds", "0", "120", "--json"]))
    assert loaded == {"numpy", "duckdb"}, loaded


def test_median_ci_table_with_its_implied_epsilon_loads_no_scipy(ages: Path) -> None:
    # The table prints "(implies (ε, 1e-06)-DP)": the CKS conversion runs, without SciPy.
    code = (
        "import contextlib, io\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        + "".join(f"    {line}\n" for line in _main(
            ["median-ci", str(ages), "-c", "age", "--rho", "0.5", "--bounds", "0", "120"]
        ).splitlines())
        + "assert 'implies' in buf.getvalue(), buf.getvalue()\n"
    )
    loaded = _loaded_after(code)
    assert not loaded & (SCIPY | {"sklearn", "pandas", "pyarrow", "matplotlib"}), loaded
    assert loaded == {"numpy", "duckdb", "rich"}, loaded


def test_quantile_ci_loads_no_scikit_learn_or_pandas(ages: Path) -> None:
    loaded = _loaded_after(_main(["quantile-ci", str(ages), "-c", "age", "--rho", "0.5",
                                  "--bounds", "0", "120", "--q", "0.25", "0.5", "--json"]))
    assert not loaded & {"sklearn", "pandas", "matplotlib", "pyarrow"}, loaded


def test_facility_loads_no_scikit_learn_or_pandas(ages: Path) -> None:
    loaded = _loaded_after(_main(["facility", str(ages), "-c", "age", "--epsilon", "1",
                                  "--domain", "0", "120", "--json"]))
    assert not loaded & {"sklearn", "pandas", "matplotlib", "pyarrow", "rich"}, loaded


def test_fdp_keygen_adds_nothing_to_the_key_module(tmp_path: Path) -> None:
    own = _loaded_after("import dpfair.fairclass.federated._keys")
    loaded = _loaded_after(_main(["fdp", "keygen", "--out", str(tmp_path / "alice")]))
    assert (tmp_path / "alice.key").exists()
    assert loaded <= own | {"rich"} - {"duckdb"}, loaded - own
    assert "duckdb" not in loaded - own


def test_the_command_modules_load_nothing_heavy_at_import() -> None:
    for module in ("dpfair.cli.median", "dpfair.cli.facility", "dpfair.cli.fdp",
                   "dpfair.cli.inspect", "dpfair.cli.report", "dpfair.cli.reproduce",
                   "dpfair.cli.datasets"):
        loaded = _loaded_after(f"import {module}")
        assert loaded <= {"rich"}, (module, loaded)


def test_fdp_centre_setup_loads_no_scikit_learn_or_pandas(tmp_path: Path) -> None:
    # The protocol's config used to import a constant from the scikit-learn estimators;
    # setup, the site rounds and aggregate (10 of the walkthrough's 15 processes) now load
    # neither scikit-learn nor pandas (finalize and predict: the next test).
    from dpfair.fairclass.federated import generate_keypair

    (tmp_path / "keys").mkdir()
    for party in ("centre", "h1", "h2"):
        generate_keypair(tmp_path / "keys" / party)
    k = tmp_path / "keys"
    argv = ["fdp", "centre", "setup", "--key", str(k / "centre.key"),
            "--site", "h1:2000:1:1e-6", "--site", "h2:2000:1:1e-6",
            "--site-key", f"h1={k / 'h1.pub'}", "--site-key", f"h2={k / 'h2.pub'}",
            "--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1",
            "--alpha", "0.1", "--out", str(tmp_path / "setup.json")]
    loaded = _loaded_after(_main(argv))
    assert (tmp_path / "setup.json").exists()
    assert not loaded & {"sklearn", "pandas", "pyarrow", "matplotlib", "scipy.stats"}, loaded


def test_fdp_finalize_and_predict_read_the_released_model_without_scikit_learn() -> None:
    # FederatedModel and the certificate's verdict live in federated/_released.py, apart
    # from the scikit-learn estimator: reading and applying a released model is
    # post-processing of public numbers and needs neither scikit-learn nor pandas.
    finalize = ("from dpfair.fairclass import uncertified_message\n"
                "from dpfair.fairclass.federated import (CENTRE, Centre, "
                "certified_from_thresholds, load_signer, read_setup, seed_of, "
                "uncertified_detail, write_message)")
    predict = ("from dpfair.fairclass.federated import (FederatedModel, load_public_key, "
               "read_message, read_site_data)\n"
               "from dpfair.fairclass.metrics import (demographic_disparity, "
               "equal_opportunity_difference, misclassification_error)")
    for code in (finalize, predict):
        loaded = _loaded_after(code)
        assert not loaded & {"sklearn", "pandas", "pyarrow", "matplotlib"}, (code, loaded)

