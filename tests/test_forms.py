"""Overriding the priors file's model forms (`fit --moe-form/--step-form`, `update`)."""

import dataclasses

import pytest

from ddtree_bayes.core.config import form_label
from ddtree_bayes.core.errors import PriorsError
from ddtree_bayes.engine import fitting


def test_override_both_forms(bundled_inputs):
    _, cfg = bundled_inputs
    assert (cfg.moe_form, cfg.step_form) == ("roofline", "structured")
    old = fitting.with_forms(cfg, "power", "fraction")
    assert (old.moe_form, old.step_form) == ("power", "fraction")
    only_step = fitting.with_forms(cfg, None, "fraction")
    assert (only_step.moe_form, only_step.step_form) == ("roofline", "fraction")
    assert form_label({"model": {"moe_form": "power", "step_form": "fraction"}}) == \
        "power/fraction"
    assert form_label({"model": {"moe_form": "linear"}}) == "linear/fraction"  # older fits


def test_a_form_without_its_priors_is_refused(bundled_inputs):
    _, cfg = bundled_inputs
    no_frac = dataclasses.replace(cfg, priors={k: v for k, v in cfg.priors.items()
                                               if k != "overhead_logit_mu"})
    with pytest.raises(PriorsError, match="the fraction form needs a prior") as info:
        fitting.with_forms(no_frac, None, "fraction")
    assert info.value.column == "priors.overhead_logit_mu"
    no_methods = dataclasses.replace(cfg, step_form="fraction", methods={})
    with pytest.raises(PriorsError, match=r"needs a \[methods.<name>\] table"):
        fitting.with_forms(no_methods, None, "structured")
    with pytest.raises(PriorsError, match="unknown step form"):
        fitting.with_forms(cfg, None, "cubic")


def test_fit_step_form_flag_is_parsed():
    from ddtree_bayes.cli.main import build_parser

    args = build_parser().parse_args(["fit", "--step-form", "fraction", "--moe-form", "power"])
    assert (args.moe_form, args.step_form) == ("power", "fraction")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fit", "--step-form", "cubic"])
    up = build_parser().parse_args(["update", "--moe-form", "roofline"])
    assert (up.moe_form, up.step_form) == ("roofline", None)
