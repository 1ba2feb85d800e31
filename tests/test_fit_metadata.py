"""A stored fit whose metadata another version wrote, or someone edited: every command refuses
it in one line naming the file, the field and the fix (exit 3, nothing written), as it
refuses a fit of another format version, instead of an internal error (exit 1) or an answer.

Found by a trust pass (helper trustq, s57) on copies of a real fit with one metadata field
dropped or retyped: `predict` printed ``internal error: KeyError: 'default_context_tokens'``
for a fit written before the structured step (2026-12-01) stored its context fields, and
answered, exit 0, from a fit whose ``converged`` read "no"."""

from __future__ import annotations

import hashlib
import json

import h5py
import pytest

from ddtree_bayes.core.errors import ArtifactError
from ddtree_bayes.engine import store
from test_cli_support import FIT_ID, inputs_digest, listing, make_point_mass_workdir
from test_cli_support import run_cli as call

FIX = "(fix: re-run `ddtree-bayes fit`)"


def edit_meta(work, edit) -> str:
    """Apply ``edit`` to the point-mass fit's metadata in place; returns the fit's path."""
    path = store.resolve(work / "models")
    with h5py.File(path, "r+") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        edit(meta)
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    return str(path)


def refused(work, error: str) -> None:
    """predict, optimize and diff exit 3 with ``error`` as their one stderr line and write
    nothing; history lists the fit as unreadable with the same words."""
    before = listing(work)
    for argv in (("predict", "--accept", "14"), ("optimize",), ("diff", FIT_ID, FIT_ID)):
        code, out, err = call(work, *argv)
        assert (code, out, err) == (3, "", f"ddtree-bayes: error: {error}\n"), argv
    assert listing(work) == before
    code, out, _ = call(work, "history", "--format", "json")
    (row,) = json.loads(out)["rows"]
    assert code == 0 and (row["readable"], row["error"]) == (False, error)


@pytest.mark.parametrize("field", ["default_context_tokens", "context_unit_tokens"])
def test_a_fit_from_before_the_context_fields_is_refused_in_one_line(tmp_path, field):
    """A fit written before 2026-12-01 stores no model.context_unit_tokens nor
    model.default_context_tokens (same format version): internal error KeyError before."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = edit_meta(work, lambda m: m["model"].pop(field))
    refused(work, f"{path} lacks model.{field} in its metadata: an older ddtree-bayes wrote "
                  f"it, or it was edited {FIX}")


@pytest.mark.parametrize("field", ["fit_id", "converged", "data", "priors", "model"])
def test_a_fit_without_a_field_every_reader_needs_is_refused(tmp_path, field):
    work = make_point_mass_workdir(tmp_path / "w")
    path = edit_meta(work, lambda m: m.pop(field))
    refused(work, f"{path} lacks {field} in its metadata: an older ddtree-bayes wrote it, or "
                  f"it was edited {FIX}")


@pytest.mark.parametrize(("field", "value", "kind"), [
    ("converged", "no", "true or false"),          # answered, exit 0, before
    ("model", "x", "an object"),                   # internal error AttributeError before
    ("diagnostics", "x", "an object"),             # history too
    ("coords", [], "an object"),
    ("model.knee", "2", "a number"),               # internal error UFuncTypeError before
    ("model.default_context_tokens", None, "a number"),   # TypeError before
    ("model.default_context_tokens", True, "a number"),
])
def test_a_field_of_another_type_is_refused(tmp_path, field, value, kind):
    work = make_point_mass_workdir(tmp_path / "w")

    def edit(meta):
        *outer, name = field.split(".")
        (meta[outer[0]] if outer else meta)[name] = value

    path = edit_meta(work, edit)
    refused(work, f"{path}: its metadata's {field} is {json.dumps(value)}, not {kind} "
                  f"(an edited fit) {FIX}")


def test_a_field_this_version_does_not_know_is_read_past(tmp_path):
    """A newer version may add fields in the same format version (it changes the version
    when the draws mean something else): the answer is the one without them."""
    work = make_point_mass_workdir(tmp_path / "w")
    code, plain, _ = call(work, "predict", "--accept", "12", "--format", "json")
    edit_meta(work, lambda m: (m.update(added_later={"x": 1}),
                               m["model"].update(added_later=[1, 2])))
    code2, out, _ = call(work, "predict", "--accept", "12", "--format", "json")
    assert code == code2 == 0
    (row,) = [r for r in json.loads(out)["rows"] if r["engine"] == "sglang"]
    assert row["median"] == pytest.approx(600.0)   # 12 / 20 ms, the point mass by hand
    assert json.loads(out)["rows"] == json.loads(plain)["rows"]


def test_a_fit_missing_the_draws_of_a_parameter_it_diagnosed_is_refused(tmp_path):
    """Draws deleted from the file (its diagnostics name the parameter): internal error
    KeyError: 'noise_sd' before."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = edit_meta(work, lambda m: m["diagnostics"].update(parameters=[
        {"parameter": "noise_sd", "mean": 0.0, "sd": 0.0, "rhat": 1.0, "ess_bulk": 1000.0,
         "ess_tail": 1000.0, "mcse_mean": 0.0}]))
    with h5py.File(path, "r+") as fh:
        del fh["posterior"]["noise_sd"]
    with pytest.raises(ArtifactError) as caught:
        store.load_fit(store.resolve(work / "models"))
    assert str(caught.value) == (f"{path} lacks the draws of noise_sd, which its diagnostics "
                                 f"name {FIX}")
    code, out, err = call(work, "predict", "--accept", "14")
    assert (code, out, err) == (3, "", f"ddtree-bayes: error: {caught.value}\n")


def test_a_latest_json_naming_a_folder_is_refused_in_one_line(tmp_path):
    """h5py's error for a folder spans two lines (its time stamp ends in a newline)."""
    work = make_point_mass_workdir(tmp_path / "w")
    (work / "models" / store.LATEST).write_text(json.dumps({"file": "fits"}))
    code, out, err = call(work, "predict", "--accept", "14")
    assert code == 3 and out == "" and err.count("\n") == 1
    assert err.startswith(f"ddtree-bayes: error: {work / 'models' / 'fits'} is not a readable "
                          "ddtree-bayes fit (") and err.endswith(f"{FIX}\n")


def test_a_fit_without_the_model_card_a_question_needs_is_refused():
    """A structured fit of the linear or power MoE form made before 2026-12-03 stored no
    model card: a question pricing a drafter pass from it ended in 'internal error:
    KeyError: the fit stores no model card for kimi-k2.6'."""
    from ddtree_bayes.core.model_cards import required_card

    with pytest.raises(ArtifactError) as caught:
        required_card({"moe_form": "linear"}, "kimi-k2.6")
    assert str(caught.value) == ("the fit stores no model card for kimi-k2.6, which this "
                                 "question needs: an older ddtree-bayes wrote it, or it was "
                                 f"edited {FIX}")
    assert caught.value.exit_code == 3


@pytest.mark.parametrize(("attr", "edit", "said"), [
    (store.DATA_ATTR, lambda t: t + "kimi-k2.6,b300,8,sglang,ddtree,8,8,9,abc,,303,x,\n",
     "(stored data), row 4, column 'accept_len': not a number: 'abc'"),
    (store.PRIORS_ATTR, lambda t: t + "\n[[[bad\n", "priors stored in the fit: not valid TOML"),
])
def test_a_stored_text_that_no_longer_reads_is_the_fits_fault(tmp_path, attr, edit, said):
    """A fit's stored data or priors that no longer read (damaged, or older than this
    version's checks) said exit 2 (bad input) with the fix for a file the user edits ("write a
    plain number", "correct the TOML syntax"), which the fit's copy is not: exit 3, refit.
    The metadata's digests are those of the text as stored (a text this version's checks
    refuse that an older version wrote; an edit the digests do not record is refused before
    it is read: test_a_stored_text_whose_digest_disagrees_is_refused)."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    with h5py.File(path, "r+") as fh:
        fh.attrs[attr] = edit(fh.attrs[attr])
        texts = {k: fh.attrs[a] for k, a in (("data", store.DATA_ATTR), (
            "priors", store.PRIORS_ATTR), ("hardware", store.HARDWARE_ATTR))}
        meta = json.loads(fh.attrs[store.META_ATTR])
        meta["data"]["sha256"], meta["priors"]["sha256"] = (
            hashlib.sha256(texts[k].encode()).hexdigest() for k in ("data", "priors"))
        meta["inputs_sha256"] = inputs_digest(texts)
        fh.attrs[store.META_ATTR] = json.dumps(meta)
    # (and the files it was made on: otherwise predict warns they changed since the fit)
    (work / "data" / "measurements.csv").write_text(texts["data"])
    (work / "models" / "priors.toml").write_text(texts["priors"])
    before = listing(work)
    code, out, err = call(work, "predict", "--accept", "14")
    assert code == 3 and out == "" and err.count("\n") == 1 and said in err, err
    assert err.startswith(f"ddtree-bayes: error: {path}") and err.count(str(path)) == 1, err
    assert err.endswith("(the fit's stored copy, which this ddtree-bayes cannot read: "
                        f"damaged, or older than its checks) {FIX}\n"), err
    assert "write a plain number" not in err and "correct the TOML" not in err
    assert listing(work) == before


#: One edit per stored text that still reads (so no check of the text itself catches it):
#: (attribute, what is replaced, by what, the text's name and the metadata field holding its
#: digest, as the refusal names them).
EDITED_TEXTS = [
    (store.DATA_ATTR, ",8,8,9,4.4,,303,", ",8,8,9,4.4,,403,", "measurements (data.csv)",
     "data.sha256"),
    (store.PRIORS_ATTR, "mu = 10.0\nsigma = 2.5", "mu = 14.0\nsigma = 0.5",
     "priors (priors.toml)", "priors.sha256"),
    (store.HARDWARE_ATTR, "\nb300,HBM3e,288,8.0,", "\nb300,HBM3e,288,4.0,",
     "hardware table (hardware.csv)", "inputs_sha256"),
]


@pytest.mark.parametrize(("attr", "old", "new", "name", "field"), EDITED_TEXTS,
                         ids=["data", "priors", "hardware"])
def test_a_stored_text_whose_digest_disagrees_is_refused(tmp_path, attr, old, new, name, field):
    """A fit's stored data, priors or hardware table edited after the fit (each still reads)
    answered from the edited text, exit 0: an acceptance prior of mu 14 in the stored priors
    moved predict's default-question median from 504 to 710 tok/s on a real fit of the bundled
    data (helper qfix, s58). The metadata records each text's sha256 (the hardware table's
    through inputs_sha256, the hash of the three): a text that disagrees is refused, exit 3,
    one line naming the fit and the text, nothing written."""
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = call(work, "predict", "--accept", "12", "--format", "json")
    (row,) = [r for r in json.loads(out)["rows"] if r["engine"] == "sglang"]
    assert code == 0 and row["median"] == pytest.approx(600.0), err   # 12 / 20 ms by hand
    path = store.resolve(work / "models")
    with h5py.File(path, "r+") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        data, priors, hardware = (fh.attrs[a] for a in (store.DATA_ATTR, store.PRIORS_ATTR,
                                                        store.HARDWARE_ATTR))
        text = fh.attrs[attr]
        assert text.count(old) == 1
        edited = text.replace(old, new)
        fh.attrs[attr] = edited
    texts = {"data": data, "priors": priors, "hardware": hardware}   # (as made, then edited)
    texts[{"data.sha256": "data", "priors.sha256": "priors"}.get(field, "hardware")] = edited
    got = (inputs_digest(texts) if field == "inputs_sha256"
           else hashlib.sha256(edited.encode()).hexdigest())
    want = meta[field] if field == "inputs_sha256" else meta[field.split(".")[0]]["sha256"]
    error = (f"{path}: its stored copy of the {name} is not the text it was fit on (sha256 "
             f"{got[:12]}; its metadata's {field} records {want[:12]}): edited or damaged {FIX}")
    with pytest.raises(ArtifactError) as caught:
        store.load_fit(path)
    assert str(caught.value) == error and caught.value.exit_code == 3
    refused_to_answer(work, error)


def refused_to_answer(work, error: str) -> None:
    """predict, optimize, next and update exit 3 with ``error`` as their one stderr line and
    write nothing."""
    before = listing(work)
    for argv in (("predict", "--accept", "14"), ("predict",), ("optimize",), ("next",),
                 ("update",)):
        code, out, err = call(work, *argv)
        assert (code, out, err) == (3, "", f"ddtree-bayes: error: {error}\n"), argv
    assert listing(work) == before


def test_the_point_mass_fixture_records_its_texts_digests(tmp_path):
    """The test fits' metadata holds the digests a real fit records of the texts it stores
    (inputs_sha256 was the placeholder 'point-mass')."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    with h5py.File(path, "r") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        data, priors, hardware = (fh.attrs[a] for a in (store.DATA_ATTR, store.PRIORS_ATTR,
                                                        store.HARDWARE_ATTR))
    h = hashlib.sha256()
    for text in (data, hardware, priors):
        h.update(hashlib.sha256(text.encode()).digest())
    assert meta["inputs_sha256"] == h.hexdigest()
    assert meta["data"]["sha256"] == hashlib.sha256(data.encode()).hexdigest()
    assert meta["priors"]["sha256"] == hashlib.sha256(priors.encode()).hexdigest()
