"""Validation of the priors file (config.parse_priors / load_priors).

Every bad-input case is a modified copy of models/priors.toml. Edits go through
``replace_once`` so a test fails loudly (instead of passing vacuously) if the bundled
file changes under it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ddtree_bayes.core.config import (
    DISTRIBUTIONS,
    MODEL_PRIORS,
    AcceptancePrior,
    Prior,
    load_priors,
    parse_priors,
)
from ddtree_bayes.core.errors import InputError, PriorsError
from ddtree_bayes.core.methods import max_accept
from ddtree_bayes.core.paths import bundled

ROOT = Path(__file__).resolve().parents[1]
PRIORS = ROOT / "models" / "priors.toml"
TEXT = PRIORS.read_text()
NAME = "my-priors.toml"
BETA_EXTRA = ('\n[relations.turbo]\nbase = "native"\ndist = "beta"\nalpha = 2.0\nbeta = 2.0\n'
              'rationale = "r"\nsource = "s"\n')


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def table_span(text: str, header: str) -> tuple[int, int]:
    """(start, end) of the lines of ``header``'s table, up to the next blank line."""
    lines = text.splitlines(keepends=True)
    start = [line.rstrip("\n") for line in lines].index(header)
    end = start + 1
    while end < len(lines) and lines[end].strip():
        end += 1
    return start, end


def table_lines(text: str, header: str) -> list[str]:
    start, end = table_span(text, header)
    return text.splitlines()[start:end]


def drop_table(text: str, header: str) -> str:
    lines = text.splitlines(keepends=True)
    start, end = table_span(text, header)
    return "".join(lines[:start] + lines[end:])


def set_in_table(text: str, header: str, key: str, value: str | None) -> str:
    """Set (or with value None, delete) ``key`` inside ``header``'s table."""
    lines = text.splitlines(keepends=True)
    start, end = table_span(text, header)
    hits = [i for i in range(start + 1, end) if lines[i].split("=")[0].strip() == key]
    if value is None:
        assert len(hits) == 1, (header, key)
        del lines[hits[0]]
    elif hits:
        assert len(hits) == 1, (header, key)
        lines[hits[0]] = f"{key} = {value}\n"
    else:
        lines.insert(start + 1, f"{key} = {value}\n")
    return "".join(lines)


def acceptance_header_index(n: int) -> str:
    """The n-th (1-based) [[acceptance]] entry is addressed by its first key line."""
    return {1: 'method = "ar"', 2: "budget = 32", 3: "budget = 8", 4: 'method = "eagle3"'}[n]


def set_in_acceptance(text: str, n: int, key: str, value: str) -> str:
    blocks = text.split("[[acceptance]]\n")
    assert len(blocks) == 5
    assert acceptance_header_index(n) in blocks[n]
    body = blocks[n].splitlines(keepends=True)
    hits = [i for i, line in enumerate(body) if line.split("=")[0].strip() == key]
    if hits:
        body[hits[0]] = f"{key} = {value}\n"
    else:
        body.insert(0, f"{key} = {value}\n")
    blocks[n] = "".join(body)
    return "[[acceptance]]\n".join(blocks)


def expect_error(text: str, column: str | None, *fragments: str) -> PriorsError:
    with pytest.raises(PriorsError) as info:
        parse_priors(text, NAME)
    err = info.value
    assert isinstance(err, InputError)
    assert err.exit_code == 2
    assert err.file == NAME
    assert err.row is None
    assert err.column == column
    message = str(err)
    assert "\n" not in message
    assert "fix:" in message
    prefix = f"{NAME}, column '{column}': " if column else f"{NAME}: "
    assert message.startswith(prefix), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return err


def test_bundled_priors_file_matches_the_packaged_copy():
    assert TEXT == bundled("priors.toml").read_text()


def test_helpers_edit_what_they_claim():
    assert table_lines(TEXT, "[priors.noise_sd]")[1] == 'dist = "lognormal"'
    assert "[priors.noise_sd]" not in drop_table(TEXT, "[priors.noise_sd]")
    assert "[priors.moe_hw_sd]" in drop_table(TEXT, "[priors.noise_sd]")
    assert set_in_table(TEXT, "[priors.noise_sd]", "sigma", None).count("sigma = 0.3\n") == 0


# ------------------------------------------------------------------ positive
@pytest.mark.parametrize("path", [PRIORS, bundled("priors.toml")], ids=["models", "bundled"])
def test_bundled_priors_load(path):
    cfg = load_priors(path)
    assert cfg.path == str(path)
    assert cfg.text == TEXT
    assert (cfg.moe_form, cfg.step_form) == ("roofline", "structured")
    assert cfg.context_unit_tokens == 65536.0
    assert cfg.default_context_tokens == 0.0
    from ddtree_bayes.core.config import FORM_PRIORS, MOE_FORMS

    every_form = {n for names in FORM_PRIORS.values() for n in names}
    from ddtree_bayes.core.context_cost import CTX_READ, CTX_READ_ONE_HEAD
    from ddtree_bayes.core.pairs import PAIR_PRIORS
    from ddtree_bayes.core.spec import AMD_MU, AMD_SD, CTX_BATCH, RECURRENT_SD, TP_LINKS, tp_prior
    from ddtree_bayes.engine.structure import CONCURRENCY_SD

    assert set(cfg.priors) == (set(MODEL_PRIORS) | set(MOE_FORMS.values()) | every_form
                               | set(PAIR_PRIORS) | {CTX_BATCH, CONCURRENCY_SD, RECURRENT_SD}
                               | {AMD_MU, AMD_SD, CTX_READ, CTX_READ_ONE_HEAD}
                               | {tp_prior(link) for link in TP_LINKS})
    for name, per in MODEL_PRIORS.items():
        assert cfg.priors[name].per == per, name
    assert cfg.priors["noise_sd"] == Prior(
        name="noise_sd", dist="lognormal", params={"median": 0.03, "sigma": 0.3},
        per="global", rationale=cfg.priors["noise_sd"].rationale,
        source="voipmonitor/rtx6kpro models/kimi-k26.md (Turin retest note: AR on that host "
               "~3% slower)")
    assert cfg.priors["moe_share"].mean() == pytest.approx(0.4)
    assert cfg.priors["moe_exponent_mu"].mean() == pytest.approx(0.42)

    assert {e: r.base for e, r in cfg.relations.items()} == {"native": "sglang"}
    native = cfg.relations["native"]
    assert native.engine == "native"
    assert (native.prior.dist, native.prior.params) == ("beta", {"alpha": 4.0, "beta": 6.0})
    assert native.prior.name == "native"

    assert len(cfg.acceptance) == 4
    assert [(a.method, a.block, a.budget) for a in cfg.acceptance] == [
        ("ar", None, None), ("ddtree", 16, 32), ("ddtree", 8, 8), ("eagle3", 3, None)]


def test_acceptance_for_default_scenario():
    cfg = parse_priors(TEXT, NAME)
    entry = cfg.acceptance_for("ddtree", 16, 33)
    assert isinstance(entry, AcceptancePrior)
    assert entry is cfg.acceptance[1]
    assert (entry.method, entry.block, entry.budget) == ("ddtree", 16, 32)
    assert entry.prior.dist == "truncnormal"
    assert entry.prior.params == {"mu": 10.0, "sigma": 2.5, "lower": 1.0, "upper": 16.0}
    assert entry.prior.params["mu"] == 10
    assert entry.describe() == "truncnormal(mu=10, sigma=2.5, lower=1, upper=16)"


@pytest.mark.parametrize(("query", "expected"), [
    (("ar", None, 1), ("point", {"value": 1.0})),
    (("ar", 16, 33), ("point", {"value": 1.0})),
    (("ddtree", 8, 9), ("truncnormal", {"mu": 4.6, "sigma": 0.8, "lower": 1.0, "upper": 8.0})),
    (("eagle3", 3, 4), ("truncnormal", {"mu": 1.94, "sigma": 0.15, "lower": 1.0,
                                        "upper": 4.0})),
    (("eagle3", 3, 65), ("truncnormal", {"mu": 1.94, "sigma": 0.15, "lower": 1.0,
                                         "upper": 4.0})),
    (("ddtree", 16, 65), None),
    (("ddtree", 8, 33), None),
    (("eagle3", 4, 5), None),
    (("dflash-chain", 16, 17), None),
])
def test_acceptance_for_other_queries(query, expected):
    entry = parse_priors(TEXT, NAME).acceptance_for(*query)
    if expected is None:
        assert entry is None
    else:
        assert (entry.prior.dist, entry.prior.params) == expected


def test_first_matching_acceptance_entry_wins():
    catch_all = ('[[acceptance]]\ndist = "point"\nvalue = 2.0\nrationale = "r"\n'
                 'source = "s"\n\n')
    text = replace_once(TEXT, "[[acceptance]]\nmethod = \"ar\"",
                        catch_all + "[[acceptance]]\nmethod = \"ar\"")
    cfg = parse_priors(text, NAME)
    assert len(cfg.acceptance) == 5
    assert cfg.acceptance_for("ddtree", 16, 33).prior.params == {"value": 2.0}
    assert cfg.acceptance_for("anything", None, 1).prior.params == {"value": 2.0}


def test_linear_moe_form_needs_the_slope_prior_only():
    linear = replace_once(TEXT, 'moe_form = "roofline"\n', 'moe_form = "linear"\n')
    cfg = parse_priors(drop_table(linear, "[priors.moe_exponent_mu]"), NAME)
    assert cfg.moe_form == "linear"
    assert "moe_exponent_mu" not in cfg.priors
    expect_error(drop_table(linear, "[priors.moe_slope_mu]"), "priors.moe_slope_mu",
                 "missing prior")


def test_power_form_does_not_need_the_slope_prior():
    cfg = parse_priors(drop_table(TEXT, "[priors.moe_slope_mu]"), NAME)
    assert "moe_slope_mu" not in cfg.priors


def test_model_table_defaults():
    # a priors file without a [model] table (written before the structured forms) keeps the
    # forms it was written for
    start = TEXT.index("[model]")
    end = TEXT.index("[priors.step_ar_ms]")
    cfg = parse_priors(TEXT[:start] + TEXT[end:], NAME)
    assert (cfg.moe_form, cfg.context_unit_tokens, cfg.default_context_tokens) == (
        "power", 65536.0, 0.0)


def test_relations_and_acceptance_are_optional():
    text = (TEXT[:TEXT.index("# Relations between engines")]
            + TEXT[TEXT.index("# How each speculative method drafts"):])  # keep [methods.*]
    cfg = parse_priors(text, NAME)
    assert cfg.relations == {}
    assert cfg.acceptance == ()
    assert cfg.acceptance_for("ddtree", 16, 33) is None


def test_sha256_tracks_the_text():
    a = parse_priors(TEXT, NAME)
    b = parse_priors(TEXT + "\n# comment\n", NAME)
    assert a.sha256 != b.sha256
    assert len(a.sha256) == 64


# ------------------------------------------------------------------ file-level errors
def test_invalid_toml():
    line = TEXT.splitlines().index('moe_form = "roofline"') + 1
    text = replace_once(TEXT, 'moe_form = "roofline"\n', 'moe_form = "roofline\n')
    err = expect_error(text, None, "not valid TOML: ", f"(at line {line}, column 21)")
    assert err.fix == "correct the TOML syntax"


@pytest.mark.parametrize("text", ["[priors\n", "a = 1\na = 2\n", "x = \n"],
                         ids=["unclosed-table", "duplicate-key", "missing-value"])
def test_other_invalid_toml(text):
    expect_error(text, None, "not valid TOML")


def test_missing_priors_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(PriorsError) as info:
        load_priors(path)
    err = info.value
    assert (err.file, err.row, err.column) == (str(path), None, None)
    assert str(err) == (f"{path}: cannot read priors file: No such file or directory "
                        "(fix: pass an existing file with --priors)")


def test_load_priors_reports_the_path(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(replace_once(TEXT, 'moe_form = "roofline"\n', 'moe_form = "cubic"\n'))
    with pytest.raises(PriorsError) as info:
        load_priors(path)
    assert (info.value.file, info.value.column) == (str(path), "model.moe_form")


# ------------------------------------------------------------------ [model]
@pytest.mark.parametrize("value", ['"cubic"', '"Power"', '""', "1"])
def test_unknown_moe_form(value):
    text = replace_once(TEXT, 'moe_form = "roofline"\n', f"moe_form = {value}\n")
    err = expect_error(text, "model.moe_form", "unknown moe_form ")
    assert err.fix == "use 'power', 'linear', 'roofline'"


@pytest.mark.parametrize(("key", "value"), [
    ("context_unit_tokens", "0"),
    ("context_unit_tokens", "-65536"),
    ("context_unit_tokens", '"64k"'),
    ("context_unit_tokens", "true"),
    ("context_unit_tokens", "nan"),
    ("default_context_tokens", "-1"),
    ("default_context_tokens", '"0"'),
])
def test_bad_model_numbers(key, value):
    text = set_in_table(TEXT, "[model]", key, value)
    expect_error(text, f"model.{key}", "bad value ")


@pytest.mark.parametrize(("key", "value", "fix"), [
    # 2 ** 40 + 1 tokens: one past what --context and a row's context_tokens take
    ("default_context_tokens", "1099511627777",
     "give 0 to 1099511627776 (2 ** 40) tokens, as a row's context_tokens"),
    ("default_context_tokens", "1e30",
     "give 0 to 1099511627776 (2 ** 40) tokens, as a row's context_tokens"),
    # 131072 tokens / 1e-300 overflows to inf: no unit below one token
    ("context_unit_tokens", "1e-300", "give 1 to 1099511627776 (2 ** 40) tokens"),
    ("context_unit_tokens", "0.5", "give 1 to 1099511627776 (2 ** 40) tokens"),
    ("context_unit_tokens", "2e12", "give 1 to 1099511627776 (2 ** 40) tokens"),
])
def test_model_context_numbers_within_what_a_row_takes(key, value, fix):
    """A default context of 1e30 tokens was accepted: `fit` read every blank-context row at
    1e30 tokens, sampled 146 s through three remedies and exited 5 telling the user to re-run
    `fit`. The bound is a row's and --context's, 2 ** 40 = 1099511627776 tokens."""
    text = set_in_table(TEXT, "[model]", key, value)
    err = expect_error(text, f"model.{key}", "bad value ")
    assert err.fix == fix


def test_model_context_numbers_at_the_bounds_are_kept():
    text = set_in_table(TEXT, "[model]", "default_context_tokens", "1099511627776")
    text = set_in_table(text, "[model]", "context_unit_tokens", "1")
    cfg = parse_priors(text, NAME)
    assert (cfg.default_context_tokens, cfg.context_unit_tokens) == (2.0 ** 40, 1.0)


# ------------------------------------------------------------------ [priors.*]
@pytest.mark.parametrize("dist", ['"gamma"', '"Normal"', '"half-normal"', "3"])
def test_unknown_dist(dist):
    text = set_in_table(TEXT, "[priors.noise_sd]", "dist", dist)
    err = expect_error(text, "priors.noise_sd", "unknown dist ")
    assert err.fix == "use one of " + ", ".join(sorted(DISTRIBUTIONS))
    assert err.fix == "use one of beta, halfnormal, lognormal, normal, point, truncnormal, uniform"


def test_missing_dist():
    text = set_in_table(TEXT, "[priors.noise_sd]", "dist", None)
    expect_error(text, "priors.noise_sd", "unknown dist None")


def test_prior_that_is_not_a_table():
    text = replace_once(TEXT, "[priors.noise_sd]\n", "[priors]\nnoise_sd = 0.03\n[priors.x]\n")
    expect_error(text, "priors.noise_sd", "must be a table")


@pytest.mark.parametrize(("header", "key", "dist"), [
    ("[priors.noise_sd]", "sigma", "lognormal"),
    ("[priors.noise_sd]", "median", "lognormal"),
    ("[priors.moe_share]", "alpha", "beta"),
    ("[priors.overhead_logit_mu]", "mu", "normal"),
    ("[priors.moe_hw_sd]", "sigma", "halfnormal"),
])
def test_missing_parameter(header, key, dist):
    text = set_in_table(TEXT, header, key, None)
    err = expect_error(text, header[1:-1], f"{dist} needs a finite number '{key}'")
    assert err.fix == f"add {key} = <number>"


@pytest.mark.parametrize("value", ['"0.3"', "nan", "inf", "true", "[0.3]"])
def test_non_numeric_or_non_finite_parameter(value):
    text = set_in_table(TEXT, "[priors.noise_sd]", "sigma", value)
    expect_error(text, "priors.noise_sd", "lognormal needs a finite number 'sigma'")


@pytest.mark.parametrize(("header", "key", "value", "shown"), [
    ("[priors.moe_hw_sd]", "sigma", "0.0", "0.0"),
    ("[priors.noise_sd]", "sigma", "-0.3", "-0.3"),
    ("[priors.overhead_logit_mu]", "sigma", "0", "0"),
    ("[priors.noise_sd]", "median", "0", "0"),
    ("[priors.moe_share]", "beta", "-1.0", "-1.0"),
])
def test_non_positive_parameter(header, key, value, shown):
    text = set_in_table(TEXT, header, key, value)
    err = expect_error(text, header[1:-1], f"'{key}' must be > 0, got {shown}")
    assert err.fix == f"set {key} to a positive number"


def test_integer_parameters_are_accepted_as_floats():
    cfg = parse_priors(set_in_table(TEXT, "[priors.moe_share]", "alpha", "4"), NAME)
    assert cfg.priors["moe_share"].params["alpha"] == 4.0
    assert isinstance(cfg.priors["moe_share"].params["alpha"], float)


@pytest.mark.parametrize(("lower", "upper"), [("1.0", "1.0"), ("17.0", "1.0"), ("2", "1.5")])
def test_acceptance_lower_not_below_upper(lower, upper):
    text = set_in_acceptance(set_in_acceptance(TEXT, 2, "lower", lower), 2, "upper", upper)
    err = expect_error(text, "acceptance[2]", "'lower' must be below 'upper'")
    assert err.fix == "swap or widen the bounds"


def test_uniform_prior_lower_not_below_upper():
    header = "[priors.ctx_verify_exponent]"
    text = set_in_table(TEXT, header, "dist", '"uniform"')
    text = set_in_table(set_in_table(text, header, "alpha", None), header, "beta", None)
    ok = set_in_table(set_in_table(text, header, "lower", "0.0"), header, "upper", "1.0")
    assert parse_priors(ok, NAME).priors["ctx_verify_exponent"].mean() == 0.5
    bad = set_in_table(set_in_table(text, header, "lower", "1.0"), header, "upper", "0.0")
    expect_error(bad, "priors.ctx_verify_exponent", "'lower' must be below 'upper'")


@pytest.mark.parametrize("key", ["rationale", "source"])
@pytest.mark.parametrize("header", ["[priors.moe_share]", "[priors.step_ar_ms]",
                                    "[priors.noise_sd]"])
def test_missing_rationale_or_source(header, key):
    text = set_in_table(TEXT, header, key, None)
    err = expect_error(text, header[1:-1], f"missing '{key}'")
    assert err.fix == f'add {key} = "..." saying why this prior is what it is'


@pytest.mark.parametrize("value", ['""', '"   "', "1", "true"])
def test_blank_or_non_string_rationale(value):
    text = set_in_table(TEXT, "[priors.moe_share]", "rationale", value)
    expect_error(text, "priors.moe_share", "missing 'rationale'")


def test_missing_required_prior():
    text = drop_table(TEXT, "[priors.noise_sd]")
    err = expect_error(text, "priors.noise_sd", "missing prior")
    assert str(err) == (
        f"{NAME}, column 'priors.noise_sd': missing prior "
        "(fix: add a [priors.noise_sd] table (see the bundled models/priors.toml))")


@pytest.mark.parametrize("name", sorted(MODEL_PRIORS) + ["moe_distinct_exponent_mu"])
def test_every_required_prior_is_required(name):
    expect_error(drop_table(TEXT, f"[priors.{name}]"), f"priors.{name}", "missing prior")


def test_misspelt_prior_is_reported_as_missing():
    text = replace_once(TEXT, "[priors.noise_sd]", "[priors.noise_SD]")
    expect_error(text, "priors.noise_sd", "missing prior")


@pytest.mark.parametrize(("name", "per", "required"), [
    ("step_ar_ms", '"global"', "system"),
    ("ctx_ms_per_unit", '"global"', "system"),
    ("noise_sd", '"system"', "global"),
    ("moe_distinct_exponent_mu", '"system"', "global"),
])
def test_wrong_per(name, per, required):
    text = set_in_table(TEXT, f"[priors.{name}]", "per", per)
    err = expect_error(text, f"priors.{name}", f'must have per = "{required}"')
    assert err.fix == f'set per = "{required}"'


def test_omitted_per_means_global():
    text = set_in_table(TEXT, "[priors.step_ar_ms]", "per", None)
    expect_error(text, "priors.step_ar_ms", 'must have per = "system"')


@pytest.mark.parametrize("per", ['"gpu"', '"System"', "1"])
def test_invalid_per_value(per):
    text = set_in_table(TEXT, "[priors.noise_sd]", "per", per)
    expect_error(text, "priors.noise_sd", "'per' must be 'global' or 'system', got ")


# ------------------------------------------------------------------ [relations.*]
def test_relation_with_non_beta_dist():
    header = "[relations.native]"
    text = set_in_table(TEXT, header, "dist", '"normal"')
    text = set_in_table(set_in_table(text, header, "alpha", None), header, "beta", None)
    text = set_in_table(set_in_table(text, header, "mu", "0.4"), header, "sigma", "0.1")
    err = expect_error(text, "relations.native", "a relation's reduction must be a beta prior")
    assert err.fix == 'set dist = "beta"'


def test_relation_with_invalid_prior_names_the_relation():
    text = set_in_table(TEXT, "[relations.native]", "alpha", "-4.0")
    expect_error(text, "relations.native", "'alpha' must be > 0, got -4.0")
    text = set_in_table(TEXT, "[relations.native]", "source", None)
    expect_error(text, "relations.native", "missing 'source'")


@pytest.mark.parametrize("base", [None, '""', "5", '"native"'],
                         ids=["missing", "empty", "number", "itself"])
def test_relation_with_missing_or_circular_base(base):
    text = set_in_table(TEXT, "[relations.native]", "base", base)
    err = expect_error(text, "relations.native.base", "missing or circular 'base' engine")
    assert err.fix == 'name the measured engine it is relative to, e.g. base = "sglang"'


def test_relation_whose_base_has_a_relation():
    text = TEXT + BETA_EXTRA
    err = expect_error(text, "relations.turbo.base", "base engine 'native' has a relation itself")
    assert err.fix == "relate every engine directly to a measured engine"


def test_two_relations_on_measured_engines_are_fine():
    text = TEXT + BETA_EXTRA.replace('base = "native"', 'base = "vllm"')
    cfg = parse_priors(text, NAME)
    assert {e: r.base for e, r in cfg.relations.items()} == {"native": "sglang",
                                                             "turbo": "vllm"}


# ------------------------------------------------------------------ [[acceptance]]
@pytest.mark.parametrize(("n", "key", "value"), [
    (2, "lower", "0.5"),
    (3, "lower", "0.0"),
    (4, "lower", "-1.0"),
    (1, "value", "0.5"),
])
def test_acceptance_below_one(n, key, value):
    text = set_in_acceptance(TEXT, n, key, value)
    err = expect_error(text, f"acceptance[{n}]", "acceptance cannot be below 1 token per step")
    assert err.fix == "set lower >= 1"


def test_acceptance_lower_exactly_one_is_fine():
    cfg = parse_priors(set_in_acceptance(TEXT, 1, "value", "1"), NAME)
    assert cfg.acceptance[0].prior.params == {"value": 1.0}


@pytest.mark.parametrize(("key", "value"), [
    ("block", "0"), ("block", '"16"'), ("block", "16.0"), ("budget", "-32"),
])
def test_acceptance_block_budget_must_be_positive_integers(key, value):
    text = set_in_acceptance(TEXT, 2, key, value)
    err = expect_error(text, f"acceptance[2].{key}", f"'{key}' must be a positive integer")
    assert err.fix == f"set {key} = <integer>"


def test_acceptance_entry_missing_rationale():
    blocks = TEXT.split("[[acceptance]]\n")
    body = [x for x in blocks[4].splitlines(keepends=True) if not x.startswith("rationale")]
    blocks[4] = "".join(body)
    text = "[[acceptance]]\n".join(blocks)
    expect_error(text, "acceptance[4]", "missing 'rationale'")


def test_acceptance_unknown_dist():
    text = set_in_acceptance(TEXT, 3, "dist", '"beta-binomial"')
    expect_error(text, "acceptance[3]", "unknown dist 'beta-binomial'")


# ------------------------------------------------------------------ wrong top-level types
@pytest.mark.parametrize(("text", "column"), [
    ("model = 5\n", "model"),
    ('moe = 1\npriors = "x"\n', "priors"),
])
def test_non_table_sections_raise_priors_error(text, column):
    with pytest.raises(PriorsError) as info:
        parse_priors(text, NAME)
    assert info.value.column == column


@pytest.mark.parametrize("key,value,fragment", [
    ("context_unit_tokens", "inf", "give 1 to 1099511627776"),
    ("context_unit_tokens", "0", "give 1 to 1099511627776"),
    ("default_context_tokens", "inf", "give 0 to 1099511627776"),
])
def test_model_context_values_must_be_finite(key, value, fragment):
    text = set_in_table(TEXT, "[model]", key, value)
    err = expect_error(text, f"model.{key}", "bad value")
    assert fragment in str(err)


def test_acceptance_prior_must_be_bounded_below():
    # a truncnormal entry turned normal keeps its bounds, which a normal prior does not read
    text = set_in_acceptance(TEXT, 4, "dist", '"normal"')
    expect_error(text, "acceptance[4]", "unknown key 'lower' in a normal prior")
    n = len(tomllib.loads(TEXT)["acceptance"]) + 1
    text = TEXT + ('\n[[acceptance]]\nmethod = "zz"\ndist = "normal"\nmu = 3\nsigma = 1\n'
                   'rationale = "r"\nsource = "s"\n')
    expect_error(text, f"acceptance[{n}]", "bounded below by 1")


def test_acceptance_block_cannot_be_a_boolean():
    text = set_in_acceptance(TEXT, 2, "block", "true")
    expect_error(text, "acceptance[2].block", "positive integer")


def test_acceptance_that_is_not_a_table_gets_a_usable_hint():
    with pytest.raises(PriorsError) as info:
        renamed = "\n".join("[[unused_entries]]" if line == "[[acceptance]]" else line
                             for line in TEXT.splitlines())
        parse_priors("acceptance = [3]\n" + renamed, NAME)
    assert "[[acceptance]]" in str(info.value) and "[." not in str(info.value)


def test_unknown_section_is_an_error_not_ignored():
    typo = TEXT + '\n[relation.turbo]\nbase = "sglang"\n'   # 'relation' for 'relations'
    err = expect_error(typo, "relation", "unknown section 'relation'")
    assert "typo" in str(err)


@pytest.mark.parametrize("key", ["step_fom", "moeform", "knee_sharpnes"])
def test_an_unknown_model_key_is_an_error_not_the_default_form(key):
    """A typo in [model] was ignored: `step_fom = "structured"` left step_form at its
    default, so `fit` sampled the fraction form without a word."""
    old = {"step_fom": "step_form", "moeform": "moe_form",
           "knee_sharpnes": "knee_sharpness"}[key]
    text = TEXT.replace(f"\n{old} = ", f"\n{key} = ", 1)
    err = expect_error(text, f"model.{key}", f"unknown key {key!r}")
    assert old in str(err)   # the fix names the key meant


NU = ('\n[priors.likelihod_nu]\ndist = "point"\nvalue = 4\nrationale = "r"\nsource = "s"\n')


def test_an_unknown_prior_name_is_an_error_not_ignored():
    """A misspelt prior table was ignored: `[priors.likelihod_nu]` (the Student-t likelihood
    the user asked for) left the fit on the normal likelihood without a word."""
    err = expect_error(TEXT + NU, "priors.likelihod_nu", "unknown prior 'likelihod_nu'")
    assert "did you mean likelihood_nu?" in str(err) and "typo" in str(err)
    assert parse_priors(TEXT + NU.replace("likelihod_nu", "likelihood_nu"), NAME).priors[
        "likelihood_nu"].params == {"value": 4.0}


def test_every_prior_the_code_reads_is_a_known_name():
    """KNOWN_PRIORS (config.py, below the modules that read them) holds every name they do."""
    from ddtree_bayes.core.config import FORM_PRIORS, KNOWN_PRIORS, MOE_FORMS
    from ddtree_bayes.core.likelihood import CONFIG_SHARE
    from ddtree_bayes.core.pairs import PAIR_PRIORS
    from ddtree_bayes.core.spec import AMD_MU, AMD_SD, CTX_BATCH, RECURRENT_SD, tp_prior
    from ddtree_bayes.engine.structure import CONCURRENCY_SD

    read = {*MODEL_PRIORS, *MOE_FORMS.values(), *(n for v in FORM_PRIORS.values() for n in v),
            *PAIR_PRIORS, CTX_BATCH, CONCURRENCY_SD, CONFIG_SHARE, "likelihood_nu", RECURRENT_SD,
            AMD_MU, AMD_SD,
            tp_prior("pcie"), tp_prior("fabric")}
    assert read <= set(KNOWN_PRIORS)
    assert set(parse_priors(TEXT, NAME).priors) <= set(KNOWN_PRIORS)


# ------------------------------------------------------------------ what a step can emit
def test_an_acceptance_entry_above_what_its_configuration_can_emit_is_refused():
    """The block-16 budget-32 entry's upper is block = 16 (core/methods.py max_accept: the
    anchor and 15 drafted positions); 17 and 20 are more than a block-16 DFlash drafter can
    emit, though below the 33 tokens it verifies."""
    assert parse_priors(TEXT, NAME).acceptance_for("ddtree", 16, 33).prior.params["upper"] == 16
    for upper in ("20", "17"):
        text = set_in_acceptance(TEXT, 2, "upper", f"{upper}.0")
        expect_error(text, "acceptance[2].upper", f"upper {upper} is above what ddtree with "
                     "block 16 can emit (at most 16 tokens per step: block - 1 drafts + 1)",
                     "fix: set upper = 16 or lower")
    text = set_in_acceptance(TEXT, 3, "upper", "9.0")   # ddtree block 8 budget 8: at most 8
    expect_error(text, "acceptance[3].upper", "upper 9 is above what ddtree with block 8 can "
                 "emit (at most 8 tokens per step: block - 1 drafts + 1)")
    text = set_in_acceptance(TEXT, 4, "upper", "4.5")   # eagle3 block 3: a depth-3 chain
    expect_error(text, "acceptance[4].upper", "(at most 4 tokens per step: depth + 1 "
                 "(block = depth))")


def test_a_method_wide_acceptance_entry_is_truncated_per_configuration():
    """An entry without block applies to every block: each query's draws stop at its own
    limit, and the description says so."""
    text = TEXT.replace('[[acceptance]]\nmodel = "kimi-k2.6"\nmethod = "ddtree"\nblock = 8\nbudget = 8\n',
                        '[[acceptance]]\nmethod = "ddtree"\n')
    cfg = parse_priors(text, NAME)
    wide = cfg.acceptance_for("ddtree", 4, 5)
    assert wide.prior.params["upper"] == 8.0 and wide.capped_by is None
    capped = wide.capped(max_accept("ddtree", 4, 4, cfg.methods, 5))
    assert capped.prior.params == {**wide.prior.params, "upper": 4.0}
    assert capped.describe() == ("truncnormal(mu=4.6, sigma=0.8, lower=1, upper=4, "
                                 "truncated at block - 1 drafts + 1)")
    assert wide.capped(max_accept("ddtree", 16, 32, cfg.methods, 33)) is wide   # 8 <= 16


def test_methods_depth_is_block_block_minus_1_budget_or_absent():
    cfg = parse_priors(TEXT, NAME)
    # DFlash and DDTree: the block's position 0 is the anchor, block - 1 positions drafted
    assert {n for n, m in cfg.methods.items() if m.depth == "block - 1"} == {"dflash", "ddtree"}
    assert {m.depth for m in cfg.methods.values()} == {"block", "block - 1"}
    text = set_in_table(TEXT, "[methods.ddtree]", "depth", '"budget"')
    cfg = parse_priors(text, NAME)
    # only the node budget bounds a "budget" tree: budget + 1
    assert max_accept("ddtree", 16, 32, cfg.methods, 33).describe() == (
        "at most 33 tokens per step: budget + 1")
    assert parse_priors(set_in_table(TEXT, "[methods.ddtree]", "depth", None), NAME).methods[
        "ddtree"].depth == "block"
    expect_error(set_in_table(TEXT, "[methods.ddtree]", "depth", '"tree"'),
                 "methods.ddtree.depth", "depth must be \"block\", \"block - 1\" or \"budget\", "
                 "got 'tree'")


def test_an_acceptance_entry_of_one_model_answers_only_that_model():
    """The bundled eagle3 block-3 entry is Kimi K2.6's (server accept rate 0.31-0.32): it
    answers Kimi under any deployment name, or an artifact naming no model, and no other
    model (whose query then falls to its measured acceptance or the default prior)."""
    cfg = parse_priors(TEXT, NAME)
    assert cfg.acceptance_for("eagle3", 3, 4, "kimi-k2.6").prior.params["mu"] == 1.94
    assert cfg.acceptance_for("eagle3", 3, 4, "kimi-k2.6-int4") is not None
    assert cfg.acceptance_for("eagle3", 3, 4, None) is not None
    assert cfg.acceptance_for("eagle3", 3, 4, "llama-3.1-8b-instruct") is None
    assert cfg.acceptance_for("ar", None, 1, "llama-3.1-8b-instruct").prior.dist == "point"
    bad = TEXT.replace('[[acceptance]]\nmodel = "kimi-k2.6"\nmethod = "eagle3"',
                       '[[acceptance]]\nmodel = 5\nmethod = "eagle3"')
    assert bad != TEXT
    with pytest.raises(PriorsError, match="'model' must be a model name"):
        parse_priors(bad, NAME)


def test_the_acceptance_curve_names_its_model_through_the_same_check():
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve

    assert parse_acceptance_curve(TEXT, NAME).model == "kimi-k2.6"
    bad = TEXT.replace('[acceptance_curve]\nmodel = "kimi-k2.6"', '[acceptance_curve]\nmodel = ""')
    assert bad != TEXT
    with pytest.raises(PriorsError, match="'model' must be a model name") as err:
        parse_acceptance_curve(bad, NAME)
    assert err.value.column == "acceptance_curve.model"


@pytest.mark.parametrize("table, message", [
    ('dist = "point"\nvalue = 2.0', "must be a fixed value above 2, not point"),
    ('dist = "lognormal"\nmedian = 4.0\nsigma = 0.5', "must be a fixed value above 2, not lognormal"),
])
def test_likelihood_nu_must_be_a_fixed_value_above_2(table, message):
    """The optional Student-t degrees of freedom: a fixed value above 2 (a finite variance),
    refused otherwise with the entry named; a valid one is kept."""
    entry = f'\n[priors.likelihood_nu]\n{table}\nrationale = "r"\nsource = "s"\n'
    with pytest.raises(PriorsError, match=message) as info:
        parse_priors(TEXT + entry, NAME)
    assert "priors.likelihood_nu" in str(info.value)
    ok = parse_priors(TEXT + entry.replace(table, 'dist = "point"\nvalue = 4.0'), NAME)
    assert ok.priors["likelihood_nu"].params["value"] == 4.0


def test_a_chain_entry_with_a_budget_is_the_prior_whether_or_not_budget_is_written():
    """An [[acceptance]] entry's budget is the draft tokens a step verifies (M - 1): predict
    matched a chain by its written budget, so an eagle3 entry of budget 3 answered ``--budget
    3`` and not the same question without it, while the fit's inferred acceptance took it."""
    from ddtree_bayes.core import acceptance_latent as AL
    from ddtree_bayes.engine.scenario import Scenario, acceptance_prior

    text = TEXT.replace('method = "eagle3"\nblock = 3\n', 'method = "eagle3"\nblock = 3\n'
                        'budget = 3\n', 1).replace("mu = 1.94", "mu = 3.0", 1)
    cfg = parse_priors(text, NAME)
    asked = [Scenario("h100", 8, "vllm", "eagle3", 3, budget, 4, 0.0, model="kimi-k2.6")
             for budget in (None, 3)]
    found = [acceptance_prior(cfg, sc) for sc in asked]
    assert [f.prior.params["mu"] for f in found] == [3.0, 3.0]
    prior, _ = AL.group_prior(cfg, "eagle3", 3, 3, 4, "kimi-k2.6")
    assert prior.params["mu"] == 3.0
    # a chain of depth 4 (M = 5) is another configuration
    assert cfg.acceptance_for("eagle3", 3, 5, "kimi-k2.6") is None


def test_a_saved_fits_priors_are_read_as_they_were_fitted():
    """A key or prior name this version does not know is refused in a file given now, but a
    saved fit that holds one (made when it was read, or by a version that read it) stays
    readable: predict, report and update load its priors with stored=True."""
    from ddtree_bayes.core.config import parse_priors
    from ddtree_bayes.core.errors import PriorsError
    from ddtree_bayes.core.paths import bundled

    text = bundled("priors.toml").read_text()
    old = text.replace("[model]\n", "[model]\nretired_key = 1\n", 1) + (
        '\n[priors.retired_prior]\ndist = "point"\nvalue = 1.0\nrationale = "r"\nsource = "s"\n')
    with pytest.raises(PriorsError, match="unknown key 'retired_key'"):
        parse_priors(old, "p.toml")
    stored = parse_priors(old, "priors stored in the fit", stored=True)
    assert stored.moe_form == parse_priors(text).moe_form
    assert "retired_prior" in stored.priors


@pytest.mark.parametrize(("table", "typo", "column", "meant"), [
    ("[priors.step_ar_ms]", "sigam = 0.9", "priors.step_ar_ms", "sigma"),
    ("[relations.native]", "bsae = \"sglang\"", "relations.native", "base"),
    ("[transfer.system_sd]", "medain = 0.3", "transfer.system_sd", "median"),
    ("[[acceptance]]", "methdo = \"ddtree\"", "acceptance[1]", "method"),
])
def test_a_misspelt_key_inside_a_prior_is_an_error(table, typo, column, meant):
    """A trust pass: `sigam = 0.2` beside `sigma` in [priors.step_ar_ms] parsed, and the key
    was never read (a relation's, a transfer prior's and an acceptance entry's likewise)."""
    assert table in TEXT
    text = TEXT.replace(table + "\n", f"{table}\n{typo}\n", 1)
    key = typo.split(" =")[0]
    err = expect_error(text, column, f"unknown key {key!r}")
    assert f"did you mean {meant}?" in str(err)
    # a saved fit's priors are read as they were fitted
    assert parse_priors(text, NAME, stored=True).moe_form == parse_priors(TEXT, NAME).moe_form


@pytest.mark.parametrize(("table", "typo", "column", "meant"), [
    ("[acceptance_curve]", 'metod = "eagle3"', "acceptance_curve", "method"),
    ("[acceptance_curve.gain]", "sigam = 0.9", "acceptance_curve.gain", "sigma"),
])
def test_a_misspelt_key_in_the_acceptance_curve_is_an_error(table, typo, column, meant):
    """A trust pass: `metod = "eagle3"` in [acceptance_curve] was never read (optimize then
    answered with the curve of method ddtree, the default), nor `sigam` in one of its priors.
    A curve stored in a fit is read as it was fitted."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve

    assert table + "\n" in TEXT
    text = TEXT.replace(table + "\n", f"{table}\n{typo}\n", 1)
    key = typo.split(" =")[0]
    with pytest.raises(PriorsError) as err:
        parse_acceptance_curve(text, NAME)
    assert err.value.column == column
    assert f"unknown key {key!r}" in str(err.value) and f"did you mean {meant}?" in str(err.value)
    stored = parse_acceptance_curve(text, "priors stored in the fit", stored=True)
    assert stored == parse_acceptance_curve(TEXT, "priors stored in the fit")


def test_an_acceptance_model_in_capitals_is_refused():
    """A walkthrough: `model = "Kimi-K2.6"` in an [[acceptance]] entry fitted, and `predict`
    later failed with a misleading "no acceptance prior" (no model is named in capitals). The
    entry and the curve's model are refused as the data files' names are; a saved fit's
    priors are read as they were fitted."""
    from ddtree_bayes.core.acceptance_config import parse_acceptance_curve

    old = '[[acceptance]]\nmodel = "kimi-k2.6"\nmethod = "eagle3"'
    bad = replace_once(TEXT, old, old.replace("kimi-k2.6", "Kimi-K2.6"))
    i = 4   # the fourth [[acceptance]] entry
    assert tomllib.loads(TEXT)["acceptance"][i - 1]["method"] == "eagle3"
    expect_error(bad, f"acceptance[{i}].model", "'Kimi-K2.6' is not a lowercase name "
                 "(fix: write it in lowercase, e.g. 'kimi-k2.6')")
    assert parse_priors(bad, NAME, stored=True).acceptance[i - 1].model == "Kimi-K2.6"
    curve = replace_once(TEXT, '[acceptance_curve]\nmodel = "kimi-k2.6"',
                         '[acceptance_curve]\nmodel = "Kimi-K2.6"')
    with pytest.raises(PriorsError) as err:
        parse_acceptance_curve(curve, NAME)
    assert str(err.value) == (
        f"{NAME}, column 'acceptance_curve.model': 'Kimi-K2.6' is not a lowercase name "
        "(fix: write it in lowercase, e.g. 'kimi-k2.6')")
    assert parse_acceptance_curve(curve, NAME, stored=True).model == "Kimi-K2.6"


# ------------------------------------------------------------------ a prior inside its parameter
@pytest.mark.parametrize(("header", "table", "column", "fragment"), [
    # a standard deviation of log tok/s: a normal prior put 37% of a fit's noise_sd draws
    # below 0 (`fit --priors` converged, exit 0, and reported noise_sd 0.005)
    ("[priors.noise_sd]", 'dist = "normal"\nmu = 0.03\nsigma = 0.03', "priors.noise_sd",
     "normal(mu=0.03, sigma=0.03) reaches below 0"),
    # a share of the step: outside [0, 1] the fixed part of the step is negative
    ("[priors.moe_share]", 'dist = "normal"\nmu = 0.4\nsigma = 0.2', "priors.moe_share",
     "reaches outside [0, 1]"),
    ("[priors.moe_share]", 'dist = "uniform"\nlower = 0.0\nupper = 1.5', "priors.moe_share",
     "uniform(lower=0, upper=1.5) reaches outside [0, 1]"),
    ("[priors.step_ar_ms]", 'dist = "truncnormal"\nmu = 10.0\nsigma = 5.0\nlower = -1.0\n'
     'upper = 40.0', "priors.step_ar_ms", "reaches below 0"),
    ("[priors.step_ar_ms]", 'dist = "point"\nvalue = 0.0', "priors.step_ar_ms",
     "point(value=0) is not above 0"),
    ("[priors.tp_busbw_pcie_gb_s]", 'dist = "normal"\nmu = 15.0\nsigma = 5.0',
     "priors.tp_busbw_pcie_gb_s", "reaches below 0"),
    ("[priors.spec_tree_log_sd]", 'dist = "point"\nvalue = -0.8', "priors.spec_tree_log_sd",
     "point(value=-0.8) reaches below 0"),
    ("[transfer.interconnect_factor]", 'dist = "normal"\nmu = 1.4\nsigma = 0.5',
     "transfer.interconnect_factor", "reaches below 0"),
    ("[transfer.bandwidth_elasticity]", 'dist = "uniform"\nlower = 0.0\nupper = 2.0',
     "transfer.bandwidth_elasticity", "reaches outside [0, 1]"),
])
def test_a_prior_reaching_outside_its_parameter_is_refused(header, table, column, fragment):
    """A trust pass: a prior's distribution was checked for its own parameters only, never
    against what the parameter can be. `[priors.noise_sd]` as a normal prior fitted, converged
    and saved with 37% of its draws negative (exit 0); a share above 1, a negative step time
    or bus bandwidth, a negative interconnect factor likewise."""
    start, end = table_span(TEXT, header)
    lines = TEXT.splitlines(keepends=True)
    body = [ln for ln in lines[start + 1:end] if ln.split("=")[0].strip() in
            ("rationale", "source", "per")]
    text = "".join(lines[:start] + [header + "\n", table + "\n", *body] + lines[end:])
    err = expect_error(text, column, fragment)
    assert "fix: " in str(err)
    # a saved fit's priors are read as they were fitted
    assert parse_priors(text, NAME, stored=True).moe_form == "roofline"


@pytest.mark.parametrize(("header", "table"), [
    ("[priors.moe_share]", 'dist = "uniform"\nlower = 0.0\nupper = 1.0'),
    ("[priors.moe_share]", 'dist = "truncnormal"\nmu = 0.4\nsigma = 0.2\nlower = 0.0\nupper = 1.0'),
    ("[priors.noise_sd]", 'dist = "halfnormal"\nsigma = 0.05'),
    ("[priors.spec_tree_log_sd]", 'dist = "point"\nvalue = 0.0'),   # no scatter: allowed
    ("[priors.moe_exponent_mu]", 'dist = "normal"\nmu = 0.42\nsigma = 3.0'),  # any real
    ("[priors.ctx_ms_per_unit]", 'dist = "point"\nvalue = 0.0'),
])
def test_a_prior_inside_its_parameter_is_accepted(header, table):
    start, end = table_span(TEXT, header)
    lines = TEXT.splitlines(keepends=True)
    body = [ln for ln in lines[start + 1:end] if ln.split("=")[0].strip() in
            ("rationale", "source", "per")]
    text = "".join(lines[:start] + [header + "\n", table + "\n", *body] + lines[end:])
    assert parse_priors(text, NAME).priors[header[8:-1]].dist == table.split('"')[1]


def test_every_prior_the_code_reads_has_a_domain():
    from ddtree_bayes.core.config import KNOWN_PRIORS, PRIOR_DOMAINS, TRANSFER_PRIORS

    assert set(PRIOR_DOMAINS) == {*KNOWN_PRIORS, *(f"transfer.{n}" for n in TRANSFER_PRIORS)}


@pytest.mark.parametrize(("value", "fragment", "fix"), [
    ('"eagel3"', "method 'eagel3' is not one the file declares",
     "did you mean eagle3? it takes ar, "),
    ('"EAGLE3"', "method 'EAGLE3' is not one the file declares", "did you mean eagle3?"),
    ("3", "'method' must be a method name, not 3", 'set method = "eagle3"'),
])
def test_an_acceptance_entry_of_a_method_nobody_declares_is_refused(value, fragment, fix):
    """A trust pass: `method = "eagel3"` in an [[acceptance]] entry parsed, and the entry never
    matched a query: predict of eagle3 without --accept then drew acceptance from another
    prior (the entries are matched by method name, and no row names 'eagel3'), exit 0."""
    text = set_in_acceptance(TEXT, 4, "method", value)
    err = expect_error(text, "acceptance[4].method", fragment)
    assert fix in err.fix, err.fix
    # a saved fit's priors are read as they were fitted
    assert parse_priors(text, NAME, stored=True).acceptance[3].block == 3


def test_an_acceptance_entry_of_a_declared_method_or_ar_is_accepted():
    cfg = parse_priors(TEXT, NAME)
    assert [a.method for a in cfg.acceptance] == ["ar", "ddtree", "ddtree", "eagle3"]
