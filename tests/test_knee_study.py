"""scripts/knee_study.py: a system's rows as a likelihood of its log compute efficiency, a
kernel family's mean from its other systems, and leave-one-system-out, on numbers computed by
hand (no fit)."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("knee_study", REPO / "scripts" / "knee_study.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KS = _module()
PRIOR_VAR = 0.6 ** 2 + 0.4 ** 2   # 0.52: mu's prior and the system spread


def _rec(name, y, v, kernels="ggml-mmq", gpu_class="GDDR"):
    """A system whose rows say log eff ~ Normal(y, v) (a likelihood), seen through the prior
    Normal(-1.2, 0.52): posterior precision 1 / 0.52 + 1 / v, mean the precision-weighted one."""
    prec = 1.0 / PRIOR_VAR + 1.0 / v
    mean = (-1.2 / PRIOR_VAR + y / v) / prec
    return {"system": name, "log_eff_median": mean, "log_eff_sd": math.sqrt(1.0 / prec),
            "kernels": kernels, "dtype": "int8" if kernels == "ggml-mmq" else "bf16",
            "gpu_class": gpu_class}


def test_a_systems_likelihood_is_its_posterior_less_the_prior():
    """Rows saying -1.7 with variance 0.25: posterior precision 1 / 0.52 + 4 = 5.923, mean
    (-1.2 / 0.52 - 1.7 x 4) / 5.923 = -1.5377; divided by the prior again, -1.7 and 0.25."""
    rec = _rec("a", -1.7, 0.25)
    assert rec["log_eff_median"] == pytest.approx(-1.537662, abs=1e-6)
    y, v = KS.likelihood(rec)
    assert y == pytest.approx(-1.7)
    assert v == pytest.approx(0.25)


def test_a_posterior_no_narrower_than_the_prior_says_nothing():
    assert KS.likelihood({"log_eff_median": -1.2, "log_eff_sd": math.sqrt(PRIOR_VAR)}) is None
    assert KS.likelihood({"log_eff_median": -0.5, "log_eff_sd": 0.9}) is None


def test_a_familys_mean_weighs_each_system_by_its_likelihood_plus_the_spread():
    """Two systems saying -1.5 and -1.9, each with variance 0.09: each weighs 1 / (0.09 +
    0.4^2) = 4 beside mu's prior Normal(-1.2, 0.6), precision 1 / 0.36 = 2.778: mu's
    precision 10.778, mean (-1.2 / 0.36 - 4 x 1.5 - 4 x 1.9) / 10.778 = -1.5711, sd 0.3046."""
    mu, sd = KS.family_prior([_rec("a", -1.5, 0.09), _rec("b", -1.9, 0.09)])
    assert mu == pytest.approx(-16.93333 / 10.77778, abs=1e-5)
    assert sd == pytest.approx(1.0 / math.sqrt(10.77778), abs=1e-5)
    # no other system: mu's prior
    assert KS.family_prior([]) == pytest.approx((-1.2, 0.6))


def test_leave_one_system_out_pools_within_a_category_and_falls_back_to_all():
    """Medians -1, -2 (ggml-mmq) and 0 (cublas). Pooled: A from mean(-2, 0) = -1, error 0;
    B from -0.5, error -1.5; C from -1.5, error +1.5: RMS sqrt(1.5). By kernels: A from B,
    +1; B from A, -1; C alone in its family, from both, +1.5: RMS sqrt(4.25 / 3)."""
    recs = [{"system": s, "log_eff_median": m, "kernels": k, "dtype": "x", "gpu_class": "GDDR"}
            for s, m, k in (("A", -1.0, "ggml-mmq"), ("B", -2.0, "ggml-mmq"), ("C", 0.0, "cublas"))]
    got = KS.loso(recs)
    assert [e["error"] for e in got["none"]["errors"]] == pytest.approx([0.0, -1.5, 1.5])
    assert got["none"]["rms"] == pytest.approx(math.sqrt(1.5))
    assert [e["error"] for e in got["kernels"]["errors"]] == pytest.approx([1.0, -1.0, 1.5])
    assert [e["pooled_within"] for e in got["kernels"]["errors"]] == [True, True, False]
    assert got["kernels"]["rms"] == pytest.approx(math.sqrt(4.25 / 3))
    # one GPU class: the same as pooled
    assert got["gpu_class"]["rms"] == pytest.approx(got["none"]["rms"])


def test_a_held_out_system_is_scored_against_its_familys_other_systems():
    """Three ggml systems saying -1.5, -1.9 and -1.7 (variance 0.09 each): the third held out
    is predicted from the first two, mu -1.5711 (sd 0.3046), as a new system sd
    sqrt(0.3046^2 + 0.16) = 0.5028; today's prior Normal(-1.2, 0.72) scores it too."""
    recs = [_rec("a", -1.5, 0.09), _rec("b", -1.9, 0.09), _rec("c", -1.7, 0.09)]
    got = {f["system"]: f for f in KS.family_loso(recs, "kernels")}
    c = got["c"]
    assert c["others"] == 2
    assert c["predicted"] == pytest.approx(-1.57113, abs=1e-5)
    assert c["predicted_sd"] == pytest.approx(math.sqrt(1.0 / 10.77778 + 0.16), abs=1e-5)
    assert c["z"] == pytest.approx((recs[2]["log_eff_median"] + 1.57113) / c["predicted_sd"],
                                   abs=1e-4)
    assert c["z_today"] == pytest.approx((recs[2]["log_eff_median"] + 1.2) / math.sqrt(0.52))
