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
from pathlib import Path

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


@pytest.mark.parametrize(("attr", "old", "new", "name", "field"), EDITED_TEXTS,
                         ids=["data", "priors", "hardware"])
def test_history_lists_a_fit_whose_stored_text_was_edited_as_unreadable(tmp_path, attr, old,
                                                                        new, name, field):
    """`history` read the metadata alone: a fit whose stored data, priors or hardware table was
    edited (which predict refuses, exit 3) was listed as readable and converged ("yes"). It
    checks the stored texts' digests too (sha256 of three short texts, no draws read): the fit
    is listed UNREADABLE with predict's words, in the table and in the JSON."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    with h5py.File(path, "r+") as fh:
        fh.attrs[attr] = fh.attrs[attr].replace(old, new)
    code, _, err = call(work, "predict", "--accept", "14")
    assert code == 3 and f"its stored copy of the {name} is not the text it was fit on" in err
    error = err.removeprefix("ddtree-bayes: error: ").removesuffix("\n")
    code, out, _ = call(work, "history", "--format", "json")
    (row,) = json.loads(out)["rows"]
    assert code == 0 and (row["readable"], row["error"]) == (False, error)
    code, out, _ = call(work, "history")
    (line,) = [ln for ln in out.splitlines() if ln.startswith(FIT_ID)]
    assert code == 0 and line.endswith(f"latest, UNREADABLE: {error}"), out


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


def test_converged_that_contradicts_the_failures_is_refused(tmp_path):
    """``converged`` false beside an empty failures list (or true beside failed gates): the fit
    wrote ``converged = not failures``, so one of them was edited. Before, the flipped flag
    sent predict to exit 5 (unconverged) and update to answer from the fit, exit 0."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = edit_meta(work, lambda m: m.update(converged=False, failures=[]))
    refused(work, f"{path}: its metadata says converged false but lists 0 failed gates (an "
                  f"edited fit) {FIX}")
    path = edit_meta(work, lambda m: m.update(converged=True, failures=["max R-hat 1.2 > 1.01"]))
    refused(work, f"{path}: its metadata says converged true but lists 1 failed gate (an "
                  f"edited fit) {FIX}")


@pytest.mark.parametrize("value", [{"x": 1}, None, ["b300x8/sglang/ddtree", 3]])
def test_coordinates_that_are_not_a_list_of_names_are_refused(tmp_path, value):
    """coords.overhead_group as an object or an empty list answered predict with other numbers,
    exit 0 (on a real fit of the bundled data: the B300 DDTree median 504 read 478); null
    ended in 'internal error: TypeError'."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = edit_meta(work, lambda m: m["coords"].update(overhead_group=value))
    said = f"{json.dumps(value)}, not a list of names"
    refused(work, f"{path}: its metadata's coords.overhead_group is {said} (an edited fit) "
                  f"{FIX}")


def _label_draws(path, dim: str, labels: list[str], *variables: str) -> None:
    """Store ``dim``'s labels in the fit's posterior group as xarray writes a coordinate (a
    dimension scale of strings), as every fit made by `fit` holds them, and attach them to the
    first dimension after (chain, draw) of ``variables``."""
    with h5py.File(path, "r+") as fh:
        post = fh["posterior"]
        post.create_dataset(dim, data=labels, dtype=h5py.string_dtype())
        post[dim].make_scale(dim)
        for name in variables:
            post[name].dims[2].attach_scale(post[dim])


@pytest.mark.parametrize(("meta_labels", "said"), [
    (["b300x4"], '["b300x4"], not the labels its draws hold (["b300x8"])'),
    (["b300x8", "h100x8"], '["b300x8", "h100x8"], not the labels its draws hold (["b300x8"])'),
])
def test_coordinates_other_than_the_draws_labels_are_refused(tmp_path, meta_labels, said):
    """The draws of ``step_ar_ms[i]`` belong to the i-th system of the posterior's own
    ``system`` coordinate; metadata naming other systems (renamed, reordered, one added)
    priced one system with another's draws."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    _label_draws(path, "system", ["b300x8"])
    code, out, err = call(work, "predict", "--accept", "12", "--format", "json")
    (row,) = [r for r in json.loads(out)["rows"] if r["engine"] == "sglang"]
    assert code == 0 and row["median"] == pytest.approx(600.0), err   # labelled: as before
    path = edit_meta(work, lambda m: m["coords"].update(system=meta_labels))
    refused(work, f"{path}: its metadata's coords.system is {said} (an edited fit) {FIX}")


def test_a_labelled_dimension_the_metadata_does_not_name_is_refused(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    _label_draws(path, "relation", ["native"])
    path = edit_meta(work, lambda m: m["coords"].pop("relation"))
    refused(work, f"{path} lacks coords.relation in its metadata: an older ddtree-bayes wrote "
                  f"it, or it was edited {FIX}")


@pytest.mark.parametrize(("field", "value", "kind"), [
    ("data.path", None, "lacks"),              # internal error KeyError: 'path' before
    ("data.path", 7, "a non-empty string"),    # internal error TypeError before
    ("data.path", "", "a non-empty string"),   # exit 2 '.: Is a directory' before
    ("priors.path", None, "lacks"),
    ("data.sha256", None, "lacks"),            # internal error KeyError: 'sha256' before
    ("priors.sha256", 7, "a non-empty string"),
    ("inputs_sha256", None, "lacks"),          # update answered, exit 0, before
    ("fit_id", "", "a non-empty string"),      # predict named fit '' before
])
def test_the_inputs_records_every_fit_has_are_required(tmp_path, field, value, kind):
    """Every fit since the first records its inputs' paths and digests and a fit id; one
    lacking or of another type ended in an internal error, or in update answering from it."""
    work = make_point_mass_workdir(tmp_path / "w")

    def edit(meta):
        *outer, name = field.split(".")
        holder = meta[outer[0]] if outer else meta
        if value is None:
            del holder[name]
        else:
            holder[name] = value

    path = edit_meta(work, edit)
    if kind == "lacks":
        refused(work, f"{path} lacks {field} in its metadata: an older ddtree-bayes wrote it, "
                      f"or it was edited {FIX}")
    else:
        refused(work, f"{path}: its metadata's {field} is {json.dumps(value)}, not {kind} (an "
                      f"edited fit) {FIX}")


@pytest.mark.parametrize(("field", "value", "said"), [
    # what the fit derives from its priors (the bundled priors: the context unit 65536
    # tokens, native based on sglang), which a reader took as it was
    ("context_unit_tokens", 0, "not what its stored priors give (65536.0)"),  # ZeroDivision
    ("relation_bases", {}, 'not what its stored priors give ({"native": "sglang"})'),
    # the forms, against the draws (the point mass is of the linear MoE, fraction form)
    ("moe_form", "", "not one of power, linear, roofline"),      # internal error KeyError ''
    ("moe_form", "roofline", "not the form of its draws (they hold no moe_distinct_exponent)"),
    ("step_form", "structured", "not the form of its draws (they hold no spec_fixed_ratio)"),
    ("target_model", "llama-3.1-8b-instruct", 'not the model its stored data holds '
                                              '("kimi-k2.6")'),
])
def test_model_fields_that_are_not_what_the_fit_computed_with_are_refused(tmp_path, field,
                                                                          value, said):
    """An edited meta["model"] field answered from the edit (exit 0) or ended in an internal
    error: each is checked against what it is derived from (the stored priors and data,
    whose digests are checked, or the draws), when the fit is read for its draws (history,
    which reads the metadata alone, lists it)."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = edit_meta(work, lambda m: m["model"].update({field: value}))
    refused_to_answer(work, f"{path}: its metadata's model.{field} is {json.dumps(value)}, "
                            f"{said} (an edited fit) {FIX}")


@pytest.mark.parametrize("field", ["target_model", "knee"])
def test_a_model_field_derived_from_the_stored_inputs_is_told_when_lacking(tmp_path, field):
    """A fit made before it recorded ``target_model`` (2026-12-01), or with ``knee`` lacking,
    answers as the fit computed: the stored data's model, the stored priors' knee (on a real
    fit of the bundled data the knee's reader default 3 moved predict's intervals, and a
    lacking target_model its median 504 -> 502, exit 0)."""
    work = make_point_mass_workdir(tmp_path / "w")
    edit_meta(work, lambda m: m["model"].pop(field, None))
    code, out, err = call(work, "predict", "--accept", "12", "--format", "json")
    (row,) = [r for r in json.loads(out)["rows"] if r["engine"] == "sglang"]
    assert code == 0 and row["median"] == pytest.approx(600.0), err   # 12 / 20 ms by hand
    fit = store.load_fit(store.resolve(work / "models"))
    assert (fit.meta["model"]["target_model"], fit.meta["model"]["knee"]) == ("kimi-k2.6", 2.0)


#: Edits of a real structured fit's metadata (the bundled data's default fit), each refused
#: naming the field: (what is edited, the edit, the field the refusal names).
STRUCTURED_EDITS = [
    ("del engines", lambda m: m["model"].pop("engines"), "model.engines"),
    ("engines []", lambda m: m["model"].update(engines=[]), "model.engines"),
    ("del group_varies", lambda m: m["model"].pop("group_varies"), "model.group_varies"),
    ("group_varies {}", lambda m: m["model"].update(group_varies={}),
     "model.group_varies.pass"),
    ("group_varies.pass short", lambda m: m["model"]["group_varies"].update({"pass": [True]}),
     "model.group_varies.pass"),
    ("del methods", lambda m: m["model"].pop("methods"), "model.methods"),
    ("methods.ddtree", lambda m: m["model"]["methods"].update(ddtree={"passes": 2,
                                                                      "tree": True}),
     "model.methods"),
    ("del step_form", lambda m: m["model"].pop("step_form"), "model.step_form"),
    ("pass_roofline.bw_eff", lambda m: m["model"]["pass_roofline"].update(bw_eff=0.5),
     "model.pass_roofline"),
    ("card.layers text", lambda m: m["model"]["card"].update(layers="61"), "model.card"),
    ("del card", lambda m: m["model"].pop("card"), "model.card"),
    ("drafter_cards null", lambda m: m["model"].update(drafter_cards=None),
     "model.drafter_cards"),
    ("overhead groups reversed", lambda m: m["coords"]["overhead_group"].reverse(),
     "coords.overhead_group"),
    ("group_engine out of range", lambda m: m["model"].update(
        group_engine=[5] * len(m["model"]["group_engine"])), "model.group_engine"),
]


def copy_workdir(work: Path, copy: Path) -> Path:
    """A copy of ``work``'s latest fit (the path it returns), its latest pointer and priors in
    ``copy``, whose data/ links to ``work``'s."""
    (copy / "models" / "fits").mkdir(parents=True)
    source = store.resolve(work / "models")
    target = copy / "models" / "fits" / source.name
    target.write_bytes(source.read_bytes())
    (copy / "models" / store.LATEST).write_text((work / "models" / store.LATEST).read_text())
    (copy / "data").symlink_to(work / "data")
    (copy / "models" / "priors.toml").write_text((work / "models" / "priors.toml").read_text())
    return target


def one_line_refusals(work: Path, what: str) -> list[str]:
    """The stderr of predict, optimize and next in ``work``, each asserted to exit 3 with one
    line and nothing on stdout, none writing a file."""
    before, errs = listing(work), []
    for argv in (("predict", "--accept", "12"), ("optimize",), ("next",)):
        code, out, err = call(work, *argv)
        assert code == 3 and out == "" and err.count("\n") == 1, (what, argv, err)
        errs.append(err)
    assert listing(work) == before, what
    return errs


def test_a_structured_fits_model_fields_are_checked(fitted_workdir, tmp_path):
    """On copies of a real structured fit with one field of its metadata deleted, emptied or
    retyped (helper qfix, s58, on a fit of the bundled data): `predict`, `optimize` and
    `next` answered other numbers, exit 0 (group_varies lacking or empty, relation_bases
    emptied, the engines' or groups' order), or ended in an internal error (KeyError
    'overhead_frac' for a lacking step_form, IndexError for lacking engines, TypeError for a
    card field of another type); a lacking methods table listed no method in its fix. Each
    is refused in one line naming the fit and the field (exit 3), nothing written."""
    work, _ = fitted_workdir
    code, plain, err = call(work, "predict", "--accept", "12", "--format", "json")
    assert code == 0, err
    for what, edit, field in STRUCTURED_EDITS:
        copy = tmp_path / what.replace(" ", "_").replace(".", "_")
        target = copy_workdir(work, copy)
        edit_meta(copy, lambda m, edit=edit: (m.pop("derived_sha256"), edit(m)))
        for err in one_line_refusals(copy, what):
            assert err.startswith(f"ddtree-bayes: error: {target}"), (what, err)
            assert field in err and err.endswith(f"{FIX}\n"), (what, err)
    # a copy left as it was answers as the fit does
    code, out, _ = call(work, "predict", "--accept", "12", "--format", "json")
    assert code == 0 and json.loads(out)["rows"] == json.loads(plain)["rows"]


def _diagnose(path, rows: list[dict]) -> None:
    """Record ``rows`` as the fit's diagnostics (what `fit` records of each parameter)."""
    def edit(meta):
        meta["diagnostics"]["parameters"] = rows

    with h5py.File(path, "r+") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
        edit(meta)
        fh.attrs[store.META_ATTR] = json.dumps(meta)


def _row(parameter: str, mean: float) -> dict:
    return {"parameter": parameter, "mean": mean, "sd": 0.0, "rhat": 1.0, "ess_bulk": 1000.0,
            "ess_tail": 1000.0, "mcse_mean": 0.0}


@pytest.mark.parametrize("labelled", [True, False], ids=["step_ar_ms[b300x8]", "noise_sd"])
def test_draws_other_than_the_ones_the_fit_diagnosed_are_refused(tmp_path, labelled):
    """The fit records each parameter's posterior mean in its diagnostics, computed from the
    draws it saved. Draws edited after the fit answered from the edit, exit 0: the point
    mass's AR step 8 ms -> 16 ms moved the default question at acceptance 12 from 600 tok/s
    (12 / 20 ms) to 300, exit 0. A parameter whose draws average otherwise than the
    diagnostics say is refused, exit 3, naming it."""
    import numpy as np

    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    if labelled:
        _label_draws(path, "system", ["b300x8"], "step_ar_ms")
    name, rows = (("step_ar_ms[b300x8]", [_row("step_ar_ms[b300x8]", 8.0)]) if labelled
                  else ("noise_sd", [_row("noise_sd", 0.0)]))
    _diagnose(path, rows)
    code, out, err = call(work, "predict", "--accept", "12", "--format", "json")
    (row,) = [r for r in json.loads(out)["rows"] if r["engine"] == "sglang"]
    assert code == 0 and row["median"] == pytest.approx(600.0), err   # as diagnosed: as before
    variable = name.split("[")[0]
    with h5py.File(path, "r+") as fh:
        ds = fh["posterior"][variable]
        ds[...] = np.asarray(ds[...]) + (8.0 if labelled else 0.5)
    mean = 16.0 if labelled else 0.5
    refused_to_answer(work, f"{path}: its draws of {name} average {mean:g}, not the "
                            f"{rows[0]['mean']:g} its diagnostics record (edited or damaged) "
                            f"{FIX}")


def _two_chains(path, noise_sd) -> None:
    """Store the point-mass fit's draws as two chains (each the one it has), ``noise_sd``'s
    replaced by the (2, n) array given, and label ``step_ar_ms`` by its system as `fit` does."""
    import numpy as np

    with h5py.File(path, "r+") as fh:
        post = fh["posterior"]
        for name in list(post):
            arr = np.asarray(post[name][...])
            del post[name]
            post[name] = noise_sd if name == "noise_sd" else np.concatenate([arr, arr])
    _label_draws(path, "system", ["b300x8"], "step_ar_ms")


def test_converged_that_the_stored_diagnostics_fail_is_refused(tmp_path):
    """``converged`` true with failures emptied, beside diagnostics that fail the gates (an R-hat
    above 1.01, a bulk ESS below 400, divergences): on an unconverged fit of the bundled data
    (2 chains x 400 draws, max R-hat 1.018), editing ``converged`` to true and ``failures`` to
    [] made predict answer it without --allow-unconverged, exit 0 (B300 DDTree at 12: 607)."""
    work = make_point_mass_workdir(tmp_path / "w")
    rows = [{**_row("noise_sd", 0.0), "rhat": 1.018}]
    path = edit_meta(work, lambda m: m["diagnostics"].update(parameters=rows))
    error = (f"{path}: its metadata says converged, but its diagnostics record max R-hat 1.018 > "
             "1.01 (noise_sd) (an edited fit) (fix: re-run `ddtree-bayes fit`, or pass --fit "
             "to use another fit)")
    refused(work, error)
    refused_to_answer(work, error)
    rows = [{**_row("noise_sd", 0.0), "ess_bulk": 241.0}]
    path = edit_meta(work, lambda m: m["diagnostics"].update(parameters=rows, divergences=3))
    refused(work, f"{path}: its metadata says converged, but its diagnostics record min bulk ESS "
                  "241 < 400 (noise_sd); 3 divergent transitions (an edited fit) (fix: re-run "
                  "`ddtree-bayes fit`, or pass --fit to use another fit)")


def test_converged_that_the_draws_fail_is_refused(tmp_path):
    """The stored R-hat and ESS edited too (to 1.0 and 1000): the gates re-derived from the
    draws (R-hat and bulk ESS as arviz-stats computes them) fail, and the fit is refused. Two
    chains of noise_sd around 0.02 and 0.03 give R-hat 1.83 and bulk ESS 3; the same draws in one order
    per chain (no difference between chains) pass and answer 600 tok/s (12 / 20 ms)."""
    import arviz_stats as azs
    import numpy as np

    rng = np.random.default_rng(1)
    apart = np.stack([0.02 + 0.001 * rng.standard_normal(500),
                      0.03 + 0.001 * rng.standard_normal(500)])
    mixed = rng.permutation(apart.ravel()).reshape(2, 500)
    want = float(azs.rhat(apart[None, ...], chain_axis=1, draw_axis=2)[0])
    ess = float(azs.ess(apart[None, ...], chain_axis=1, draw_axis=2, method="bulk")[0])
    assert want > 1.5 and ess < 400
    for draws, answers in ((mixed, True), (apart, False)):
        work = make_point_mass_workdir(tmp_path / str(answers), n=500)
        path = store.resolve(work / "models")
        _two_chains(path, draws)
        _diagnose(path, [{**_row("noise_sd", float(draws.mean())), "sd": float(draws.std())}])
        code, out, err = call(work, "predict", "--accept", "12", "--format", "json")
        if answers:
            assert code == 0, err
            (row,) = [r for r in json.loads(out)["rows"] if r["engine"] == "sglang"]
            assert code == 0 and row["median"] == pytest.approx(600.0, rel=0.05), err
            continue
        refused_to_answer(work, f"{path}: its metadata says converged, but its draws give "
                                f"max R-hat {want:.3f} > 1.01 (noise_sd); min bulk ESS "
                                f"{ess:.0f} < 400 (noise_sd) (an edited fit) (fix: re-run "
                                "`ddtree-bayes fit`, or pass --fit to use another fit)")


def test_the_gates_are_rederived_from_the_draws_of_a_fit_up_to_a_size(tmp_path, monkeypatch):
    """Re-deriving R-hat and bulk ESS from the draws costs ~0.4 us a stored value (0.1 s for
    the bundled fit's 68 parameters x 4,000 draws; 3-7 s for a fit of ten models, 526 x
    12,000, on every predict): a fit of more than REDERIVE_MAX_VALUES stored values has its
    stored diagnostics gated and its divergences counted, its draws not re-diagnosed
    (docs/robustness.md). The same small fit: re-derived at the default bound (its 2 chains
    x 500 draws of noise_sd), not at a bound below its size."""
    import numpy as np

    from ddtree_bayes.core import gates

    calls = []
    real = gates.rederived_rows
    monkeypatch.setattr(gates, "rederived_rows",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(2)   # (R-hat 0.9999, bulk ESS 1042 by arviz-stats: converged)
    mixed = (0.025 + 0.001 * rng.standard_normal(1000)).reshape(2, 500)
    work = make_point_mass_workdir(tmp_path / "w", n=500)
    path = store.resolve(work / "models")
    _two_chains(path, mixed)
    _diagnose(path, [{**_row("noise_sd", float(mixed.mean())), "sd": float(mixed.std())}])
    assert store.REDERIVE_MAX_VALUES == 1_000_000
    store.load_fit(path)
    assert len(calls) == 1
    monkeypatch.setattr(store, "REDERIVE_MAX_VALUES", 999)
    store.load_fit(path)
    assert len(calls) == 1   # (not called again: 1,000 stored values > 999)


def test_fit_reads_back_what_it_wrote_without_diagnosing_it_again(tmp_path, monkeypatch):
    """``fit`` reads the fit it just saved back for its posterior predictive check: its
    R-hat and bulk ESS were computed from these draws a moment before (arviz-stats), so
    they are not derived again (``load_fit(rederive=False)``, ~0.05 s); its stored
    diagnostics are still gated. A plain read derives them, as before."""
    import numpy as np

    from ddtree_bayes import api
    from ddtree_bayes.core import gates
    from ddtree_bayes.engine.inference import FitResult

    calls = []
    real = gates.rederived_rows
    monkeypatch.setattr(gates, "rederived_rows",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(2)   # (converged: see the test above)
    mixed = (0.025 + 0.001 * rng.standard_normal(1000)).reshape(2, 500)
    work = make_point_mass_workdir(tmp_path / "w", n=500)
    path = store.resolve(work / "models")
    _two_chains(path, mixed)
    _diagnose(path, [{**_row("noise_sd", float(mixed.mean())), "sd": float(mixed.std())}])
    store.load_fit(path, rederive=False)
    assert calls == []
    store.load_fit(path)
    assert calls == [1]
    fit_id = path.stem
    monkeypatch.setattr(api, "fit", lambda *a, **k: FitResult(
        fit_id=fit_id, path=path, converged=True, failures=[], diagnostics=[],
        divergences=0))
    code, out, err = call(work, "fit", "--quiet", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["fit_id"] == fit_id
    assert calls == [1]   # (the fit's own read: not again)
    rows = [{**_row("noise_sd", float(mixed.mean())), "ess_bulk": 241.0}]
    _diagnose(path, rows)   # (its stored diagnostics: still gated)
    code, out, err = call(work, "fit", "--quiet", "--format", "json")
    assert code != 0 and "min bulk ESS 241 < 400 (noise_sd)" in err, err


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gates_rederived_from_the_draws_are_arviz_stats(seed):
    """core.gates.rederived_rows (numpy alone: predict imports no arviz) gives the R-hat and
    bulk ESS arviz-stats gives (engine.inference.diagnose's), ties and a labelled dimension
    included, to the bit (before core.convergence: its own numpy, 1e-12 apart)."""
    import arviz_stats as azs
    import numpy as np

    from ddtree_bayes.core.gates import rederived_rows

    rng = np.random.default_rng(seed)
    chains, n = 4, 301   # (an odd length: split chains drop the middle draw)
    walk = np.cumsum(rng.standard_normal((chains, n, 2)), axis=1) * 0.1
    walk[..., 1] = np.round(walk[..., 1], 1)   # ties
    walk[..., 1] += np.arange(chains)[:, None] * 0.05
    rows = rederived_rows({"x": walk.reshape(chains * n, 2)}, chains, {"x": ["a", "b"]})
    assert [r["parameter"] for r in rows] == ["x[a]", "x[b]"]
    for j, row in enumerate(rows):
        ary = walk[None, :, :, j]
        assert row["rhat"] == float(azs.rhat(ary, chain_axis=1, draw_axis=2)[0])
        assert row["ess_bulk"] == float(azs.ess(ary, chain_axis=1, draw_axis=2, method="bulk")[0])


def test_a_real_fits_gates_rederived_on_read_are_its_own(fitted_workdir):
    """On a real fit of the bundled data, the R-hat and bulk ESS store.load_fit re-derives from
    the draws are the ones its diagnostics record (arviz-stats' at fit time), exactly (one
    function, core.convergence, computes both): a fit `fit` marked converged is never refused
    by the re-derived gates."""
    from ddtree_bayes.core.gates import rederived_rows

    work, _ = fitted_workdir
    fit = store.load(workdir=work)

    with h5py.File(fit.path, "r") as fh:
        chains = fh["posterior"]["chain"].shape[0]
        dims = {name: ds.dims[2][0].name.rsplit("/", 1)[-1] for name, ds in fh["posterior"].items()
                if ds.ndim > 2 and len(ds.dims[2])}
    labels = {name: fit.meta["coords"][dim] for name, dim in dims.items()}
    redone = {r["parameter"]: r for r in rederived_rows(fit.variables, chains, labels)}
    stored = {r["parameter"]: r for r in fit.meta["diagnostics"]["parameters"]}
    assert fit.meta["converged"] and set(redone) == set(stored)
    for name, row in stored.items():
        assert redone[name]["rhat"] == row["rhat"], name
        assert redone[name]["ess_bulk"] == row["ess_bulk"], name


#: Stored derived values of a real structured fit edited (each still of its type and length),
#: and what the refusal names: the first field that differs, to its key or index, with its
#: stored and derived values (an x2 edit of the value itself reads twice or half the other).
#: Before, each answered other numbers, exit 0 (helper trust3, s59, a fit of the bundled data:
#: group_varies.tree of B300's DDTree group true moved `predict --accept 14`'s 90% interval
#: from 597-845 to 605-850; the card's params_active_b x2 moved an H100 x8 transfer from 575
#: to 547 tok/s), or went unread by the answers checked.
DERIVED_EDITS = [
    ("group_varies", lambda m: m["model"]["group_varies"]["tree"].__setitem__(0, True),
     "model.group_varies.tree[0] is true, not what its stored inputs and cards give (false)"),
    ("group_pass_roof_ms", lambda m: m["model"]["group_pass_roof_ms"].__setitem__(
        0, 2 * m["model"]["group_pass_roof_ms"][0]), "model.group_pass_roof_ms[0] is "
     "1.0386885245901638, not what its stored inputs and cards give (0.5193442622950819)"),
    # (a card edited in a fit saved before fits recorded cards_sha256, which refuses it first:
    # test_a_fit_records_the_digest_of_its_cards)
    ("card params_active_b", lambda m: (m.pop("cards_sha256", None), m["model"]["card"].update(
        params_active_b=2 * m["model"]["card"]["params_active_b"])),
     "model.group_pass_roof_ms[0] is 0.5193442622950819, not what its stored inputs and cards "
     "give (0.5586885245901639)"),
    ("card kv_bytes_per_token", lambda m: (m.pop("cards_sha256", None), m["model"]["card"].update(
        kv_bytes_per_token=2 * m["model"]["card"]["kv_bytes_per_token"])),
     "model.system_ctx_prior.b300x8.median is 0.34540093439999997, not what its stored inputs "
     "and cards give (0.6908018687999999)"),
    ("system_flop_ms", lambda m: m["model"]["system_flop_ms"].update(
        {k: 2 * v for k, v in m["model"]["system_flop_ms"].items()}),
     "model.system_flop_ms.b300x8 is 0.007111111111111111, not what its stored inputs and cards "
     "give (0.0035555555555555553)"),
]


def test_a_structured_fits_derived_values_are_derived_again(fitted_workdir, tmp_path):
    """The fields a fit derives from its stored inputs and cards (core.spec.model_meta) were
    only type- and length-checked on read: an edited value answered from the edit. Each is
    derived again from the stored data, priors, hardware table and cards and compared: a
    disagreeing value (or a stored card whose derived values no longer follow from it) is
    refused in one line naming the fit and the field, exit 3, nothing written; the fit as made
    answers as before. (On a fit saved without ``derived_sha256``, as an older one was.)"""
    work, _ = fitted_workdir
    code, plain, err = call(work, "predict", "--accept", "12", "--format", "json")
    assert code == 0, err
    for what, edit, field in DERIVED_EDITS:
        copy = tmp_path / what.replace(" ", "_")
        target = copy_workdir(work, copy)
        edit_meta(copy, lambda m, edit=edit: (m.pop("derived_sha256"), edit(m)))
        for err in one_line_refusals(copy, what):
            assert err == (f"ddtree-bayes: error: {target}: its metadata's {field}: edited, "
                           f"or made by an older ddtree-bayes {FIX}\n"), (what, err)
    code, out, _ = call(work, "predict", "--accept", "12", "--format", "json")
    assert code == 0 and json.loads(out)["rows"] == json.loads(plain)["rows"]


def _derived_sha256(value) -> str:
    """The digest of one stored derived value worked out here: sha256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def test_a_fit_records_the_digest_of_each_derived_value(fitted_workdir):
    """`fit` records ``derived_sha256``: for each derived field it stores (store.DERIVED_FIELDS),
    the sha256 of its canonical JSON."""
    work, _ = fitted_workdir
    meta = store.load_meta(store.resolve(work / "models"))
    stored = {k: meta["model"][k] for k in store.DERIVED_FIELDS if k in meta["model"]}
    assert "group_varies" in stored and "group_pass_roof_ms" in stored
    assert meta["derived_sha256"] == {k: _derived_sha256(v) for k, v in stored.items()}


def test_an_edited_derived_value_is_refused_by_its_digest(fitted_workdir, tmp_path):
    """A derived value edited after the fit disagrees with the digest the fit recorded:
    refused, exit 3, in one line naming the field and saying "edited or damaged" (before, the
    same words as a fit an older ddtree-bayes derived otherwise: "edited, or made by an older
    ddtree-bayes"); `history` lists it UNREADABLE with those words, reading no draws. A field
    deleted is named as lacking (its words read "is lacking (; its derived_sha256 records"
    before)."""
    work, _ = fitted_workdir
    for what, edit, field, found in (
            ("tree", lambda m: m["model"]["group_varies"]["tree"].__setitem__(0, True),
             "group_varies", "is not the value it was fit with (sha256 "),
            ("deleted", lambda m: m["model"].pop("group_pass_roof_ms"), "group_pass_roof_ms",
             "is lacking (its derived_sha256 records ")):
        copy = tmp_path / what
        target = copy_workdir(work, copy)
        edit_meta(copy, edit)
        with h5py.File(target, "r") as fh:
            meta = json.loads(fh.attrs[store.META_ATTR])
        want = meta["derived_sha256"][field][:12]
        for err in one_line_refusals(copy, what):
            assert err.startswith(f"ddtree-bayes: error: {target}: its metadata's model.{field} "
                                  f"{found}"), (what, err)
            assert err.endswith(f"derived_sha256 records {want}): edited or damaged {FIX}\n"), err
        code, out, _ = call(copy, "history", "--format", "json")
        (row,) = json.loads(out)["rows"]
        assert code == 0 and row["readable"] is False, row
        assert row["error"].startswith(f"{target}: its metadata's model.{field} "), row


def test_a_derived_value_an_older_version_derived_otherwise_is_not_called_an_edit(
        fitted_workdir, tmp_path):
    """A fit whose stored derived value agrees with its recorded digest, but not with what this
    version derives from its stored inputs (the derivation changed since it was made, as
    261dfa1 changed a named drafter's acceptance prior), is refused as made by an older
    ddtree-bayes, not as edited: the digest says the values it was fit with are intact."""
    work, _ = fitted_workdir
    target = copy_workdir(work, tmp_path / "older")

    def older(meta):   # (the value and its digest as an older derivation would have saved them)
        meta["model"]["group_varies"]["tree"][0] = True
        meta["derived_sha256"]["group_varies"] = _derived_sha256(meta["model"]["group_varies"])

    edit_meta(tmp_path / "older", older)
    for err in one_line_refusals(tmp_path / "older", "older"):
        assert err == (f"ddtree-bayes: error: {target}: its metadata's model.group_varies.tree[0] "
                       "is true, not what its stored inputs and cards give (false): made by an "
                       "older ddtree-bayes that derived it otherwise (its derived_sha256 says the "
                       f"values it was fit with are intact: not an edit) {FIX}\n"), err


def test_a_derived_flag_its_stored_inputs_do_not_give_is_refused(tmp_path):
    """A derived field the stored inputs do not give at all (``concurrent``: rows at C > 1,
    which the point mass's B300 rows have none of) is refused as an edit too, naming what the
    inputs give: none."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    _label_draws(path, "system", ["b300x8"], "step_ar_ms")
    code, _, err = call(work, "predict", "--accept", "12")
    assert code == 0, err
    edit_meta(work, lambda m: m["model"].update(concurrent=True))
    refused_to_answer(work, f"{path}: its metadata's model.concurrent is true, not what its "
                            "stored inputs and cards give (none): edited, or made by an older "
                            f"ddtree-bayes {FIX}")


def test_a_derived_field_its_digests_do_not_record_is_refused_as_an_edit(tmp_path):
    """A fit that records ``derived_sha256`` recorded a digest for every derived field it
    stored, so a derived field without one was added (or its digest taken away) after the
    fit: ``concurrent`` set true on such a fit was refused as "made by an older ddtree-bayes
    that derived it otherwise (its derived_sha256 says the values it was fit with are intact:
    not an edit)", and `history` listed it readable. Now refused as edited or damaged, by
    every command and by `history` alike."""
    work = make_point_mass_workdir(tmp_path / "w")
    path = store.resolve(work / "models")
    _label_draws(path, "system", ["b300x8"], "step_ar_ms")
    edit_meta(work, lambda m: m.update(derived_sha256={}))   # (it stores no derived value)
    code, _, err = call(work, "predict", "--accept", "12")
    assert code == 0, err
    edit_meta(work, lambda m: m["model"].update(concurrent=True))
    refused(work, f"{path}: its metadata's model.concurrent is not a value it was fit with (its "
                  f"derived_sha256 records none for it): edited or damaged {FIX}")


def _cards_sha256(model: dict) -> str:
    """The digest of a model's cards worked out here: sha256 of the canonical JSON of its
    card, model_cards and drafter_cards (those present)."""
    cards = {k: model[k] for k in ("card", "model_cards", "drafter_cards") if model.get(k)}
    return hashlib.sha256(json.dumps(cards, sort_keys=True).encode()).hexdigest()


def test_a_stored_card_edited_after_the_fit_is_refused_by_its_digest(tmp_path):
    """A stored card's field that feeds no derived value the fit stores (experts,
    experts_topk: the distinct experts a query's verify pass reads) answered from the edit,
    exit 0 (a fit of the bundled data: `predict --accept 14 --block 16 --budget 64` 605 ->
    678 tok/s with experts 384 -> 192). A fit records the sha256 of its cards
    (``cards_sha256``) and a card that disagrees is refused, exit 3."""
    import dataclasses

    from ddtree_bayes.core.model_cards import load_model_cards
    from ddtree_bayes.core.paths import bundled

    work = make_point_mass_workdir(tmp_path / "w")
    card = dataclasses.asdict(load_model_cards(bundled("models.csv"))["kimi-k2.6"])
    card = json.loads(json.dumps(card))
    path = edit_meta(work, lambda m: m["model"].update(card=card))
    edit_meta(work, lambda m: m.update(cards_sha256=_cards_sha256(m["model"])))
    code, out, err = call(work, "predict", "--accept", "12", "--format", "json")
    assert code == 0, err   # (the digest of the cards as stored)
    edit_meta(work, lambda m: m["model"]["card"].update(experts=192))
    with h5py.File(path, "r") as fh:
        meta = json.loads(fh.attrs[store.META_ATTR])
    got, want = _cards_sha256(meta["model"]), meta["cards_sha256"]
    error = (f"{path}: its stored model and drafter cards are not the ones it was fit with "
             f"(sha256 {got[:12]}; its metadata's cards_sha256 records {want[:12]}): edited or "
             f"damaged {FIX}")
    refused_to_answer(work, error)
    # history hashes the stored cards too (metadata only): listed UNREADABLE, not "yes"
    code, out, _ = call(work, "history", "--format", "json")
    (row,) = json.loads(out)["rows"]
    assert code == 0 and (row["readable"], row["error"]) == (False, error)


def test_a_fit_records_the_digest_of_its_cards(fitted_workdir, tmp_path):
    """`fit` records ``cards_sha256``, the digest of the cards it stores, and reading the fit
    checks it: the card's experts edited (384 -> 192) is refused, exit 3."""
    work, _ = fitted_workdir
    source = store.resolve(work / "models")
    meta = store.load_meta(source)
    assert meta["cards_sha256"] == _cards_sha256(meta["model"])
    copy = tmp_path / "copy"
    (copy / "models" / "fits").mkdir(parents=True)
    target = copy / "models" / "fits" / source.name
    target.write_bytes(source.read_bytes())
    (copy / "models" / store.LATEST).write_text((work / "models" / store.LATEST).read_text())
    (copy / "data").symlink_to(work / "data")
    edit_meta(copy, lambda m: m["model"]["card"].update(experts=192))
    code, out, err = call(copy, "predict", "--accept", "12")
    assert code == 3 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"ddtree-bayes: error: {target}: its stored model and drafter cards "
                          "are not the ones it was fit with"), err


#: Two rows of Kimi K2.6 on 8x RTX PRO 6000 without an accept_len (each its own latent
#: acceptance group): one drafted by the default EAGLE-3 head, one by the K2.5 head the bundled
#: drafter cards name (default no), which the rows name in the ``drafter`` column.
LATENT_ROWS = ("kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,,0,125.0,s,,\n"
               "kimi-k2.6,rtx-pro-6000,8,vllm,eagle3,3,3,4,,0,112.5,s,,"
               "lightseekorg/kimi-k2.5-eagle3-mla\n")
#: prior_from of a named drafter's group as fits made before 6e97447 (s59, 11:36) stored it
OLD_PRIOR_FROM = ("default uniform(lower=1, upper=4) (a drafter a row names: the [[acceptance]] "
                  "entries are of the default drafter)")


def _latent_fit():
    """A fit of the bundled rows and :data:`LATENT_ROWS` whose ``meta["model"]`` is what
    `fit` derives (core.spec.model_meta under the stored forms), as _check_derived reads it."""
    import dataclasses

    from ddtree_bayes.core import spec as S
    from ddtree_bayes.engine.testing import point_mass_draws

    fit = point_mass_draws()
    lines = fit.data_csv.splitlines()
    text = "\n".join([lines[0] + ",drafter", *(ln + "," for ln in lines[1:])]) + "\n"
    fit = fit.view(data_csv=text + LATENT_ROWS)
    priors = dataclasses.replace(fit.priors, moe_form="power", step_form="fraction")
    model = json.loads(json.dumps(S.model_meta(S.build_spec(fit.measurements, priors,
                                                            hardware=fit.hardware), priors)))
    assert [g["drafter"] for g in model["acceptance_groups"]] == [
        None, "lightseekorg/kimi-k2.5-eagle3-mla"]
    return fit.view(meta={**fit.meta, "model": model})


def test_derived_values_an_older_version_stored_otherwise_are_not_edits():
    """Re-deriving a fit's model values on read refused 12 fits made on this machine by this
    repo earlier the same day (exit 3, "its metadata's model.acceptance_groups is ..., not what
    its stored inputs and cards give ...: edited, or made by an older ddtree-bayes"), each of
    which predicted before: an acceptance group stored without the ``drafter`` key (added
    since: null for a row naming no drafter; /tmp/trustq_mm, /tmp/me/dk), and a named drafter's
    group whose ``prior_from`` (where its prior came from, for people) was worded otherwise
    (/tmp/lead_dfit, /tmp/s58/ws). Neither is read by a number an answer gives: both load. A
    value that is read (the prior's bounds, the rows) edited is still refused."""
    fit = _latent_fit()
    store._check_derived(fit)
    old = json.loads(json.dumps(fit.meta))
    for group in old["model"]["acceptance_groups"]:
        if group["drafter"] is None:
            del group["drafter"]
        else:
            group["prior_from"] = OLD_PRIOR_FROM
    store._check_derived(fit.view(meta=old))
    group = "model.acceptance_groups['kimi-k2.6/eagle3/b3/B3 drafter lightseekorg/kimi-k2.5-"
    for edit, differs in (
            (lambda g: g["prior"]["params"].update(upper=8.0), "eagle3-mla'].prior.params."
                                                               "upper is 8.0, not what its "
                                                               "stored inputs and cards give "
                                                               "(4.0)"),
            (lambda g: g.update(rows=[2]), "eagle3-mla'].rows[0] is 2, not what its stored "
                                           "inputs and cards give (12)"),
            (lambda g: g.update(drafter="x"), "eagle3-mla'].drafter is \"x\", not what its "
                                              "stored inputs and cards give (\"lightseekorg/"
                                              "kimi-k2.5-eagle3-mla\")")):
        edited = json.loads(json.dumps(old))
        edit(edited["model"]["acceptance_groups"][1])
        with pytest.raises(ArtifactError) as err:
            store._check_derived(fit.view(meta=edited))
        assert str(err.value) == (f"point-mass.nc: its metadata's {group}{differs}: edited, or "
                                  f"made by an older ddtree-bayes {FIX}")


@pytest.mark.parametrize(("rhat", "ess", "refused"), [
    (1.01, 400.0, False), (1.0100000000000002, 399.99999999999994, False),
    (1.0101, 400.0, True), (1.01, 399.9, True)])
def test_gates_rederived_a_rounding_apart_from_the_stored_ones_pass(monkeypatch, rhat, ess,
                                                                  refused):
    """A fit passes its gates at R-hat 1.01 and bulk ESS 400 (the thresholds: R-hat > 1.01 or
    ESS < 400 fails). The R-hat and ESS re-derived on read (numpy) agree with arviz-stats'
    at fit time to ~1e-15 (2.2e-16 and 6.4e-15 on this machine's real fits), not exactly: one
    a rounding above the threshold refused a fit its stored diagnostics pass, exit 3. They
    are held to the thresholds to 1e-9 relative; a value past that is still refused."""
    from ddtree_bayes.core import gates

    stored = [{"parameter": "x", "mean": 0.0, "rhat": 1.01, "ess_bulk": 400.0,
               "ess_tail": 400.0}]
    meta = {"converged": True, "diagnostics": {"parameters": stored, "divergences": 0}}
    assert gates.row_failures(stored) == []
    monkeypatch.setattr(gates, "rederived_rows", lambda *a, **k: [
        {"parameter": "x", "rhat": rhat, "ess_bulk": ess}])
    draws = store._Draws({}, 4, {}, None)
    if not refused:
        store._check_gates(meta, "f.nc", draws)
        return
    with pytest.raises(ArtifactError, match="its metadata says converged, but its draws give"):
        store._check_gates(meta, "f.nc", draws)


def test_a_value_an_older_version_derived_otherwise_names_what_differs(tmp_path):
    """A fit an older ddtree-bayes derived otherwise was refused with the whole stored field
    and the whole derived one as JSON cut at 60 characters ({"b300x8": {"median": 0.5,
    "sigma": 0.8, "how": "the card's KV rea...), which hid what changed. The line names the
    first field that differs, down to its key, and its stored and derived values; the fix
    (re-run fit) stays. Here the point mass's context-cost prior: the card's KV read of
    0.288 ms per 65536 tokens x ctx_read_ratio 1.2 = 0.3454 ms, stored by "an older version"
    as 0.5 with its digest."""
    work = make_point_mass_workdir(tmp_path / "w")
    _label_draws(store.resolve(work / "models"), "system", ["b300x8"], "step_ar_ms")
    fit = store.load(workdir=work)
    priors, structure = store.stored_structure(fit)
    from ddtree_bayes.core import spec as S

    now = json.loads(json.dumps(S.model_meta(S.build_spec(fit.measurements, priors,
                                                          **structure), priors)))
    derived = now["system_ctx_prior"]
    assert derived["b300x8"]["median"] == pytest.approx(0.288 * 1.2, rel=2e-3)
    older = {"b300x8": {**derived["b300x8"], "median": 0.5, "how": "older words"}}

    def edit(meta):
        meta["model"]["system_ctx_prior"] = older
        meta["derived_sha256"] = {"system_ctx_prior": _derived_sha256(older)}

    path = edit_meta(work, edit)
    refused_to_answer(work, (
        f"{path}: its metadata's model.system_ctx_prior.b300x8.median is 0.5, not what its "
        f"stored inputs and cards give ({json.dumps(derived['b300x8']['median'])}): made by an "
        "older ddtree-bayes that derived it otherwise (its derived_sha256 says the values it "
        f"was fit with are intact: not an edit) {FIX}"))


def test_the_first_difference_of_a_derived_value_is_named_to_its_key():
    """What the refusal names: an acceptance group's prior bound 65 -> 16 (a list entry named
    by its label), past a record's explaining words (not compared), a key one side lacks
    (none) and a list of another length (its entries)."""
    group = {"label": "kimi-k2.6 ddtree b16/B64", "model": "kimi-k2.6", "rows": [3, 4],
             "prior": {"dist": "uniform", "params": {"lower": 1.0, "upper": 65.0}},
             "prior_from": "older words"}
    now = {**group, "prior": {"dist": "uniform", "params": {"lower": 1.0, "upper": 16.0}},
           "prior_from": "default"}
    first = store.first_difference
    assert first([group], [now], "model.acceptance_groups") == (
        "model.acceptance_groups['kimi-k2.6 ddtree b16/B64'].prior.params.upper", "65.0",
        "16.0")
    assert first([group], [{**group, "prior_from": "reworded"}], "g") is None
    assert first({"a": 1, "b": [True, False]}, {"a": 1, "b": [True, True]}, "m.x") == (
        "m.x.b[1]", "false", "true")
    assert first({"a": 1}, {"a": 1, "b": 2}, "m") == ("m.b", "none", "2")
    assert first({"a": 1}, {"a": 1, "b": None}, "m") is None   # (added since, null: older)
    assert first({"a": 1, "b": 2}, {"a": 1}, "m") == ("m.b", "2", "none")
    assert first([1, 2], [1, 2, 3], "m") == ("m", "2 entries", "3 entries")
    assert first(1.0, 1.0 + 1e-12, "m") is None and first(1.0, 1.1, "m") == ("m", "1.0", "1.1")


def test_a_fit_and_a_reweighted_fit_record_their_inputs_by_one_function(tmp_path):
    """``fit`` (engine/fitting.py ``metadata``) and ``update``'s reweighted fit
    (workflows/living/reweight.py ``save_reweighted``) each wrote the ``data``, ``priors`` and
    ``inputs_sha256`` fields themselves, the same seven lines twice; both now take them from
    ``store.inputs_meta``. On the bundled files: the measurement file's resolved path, the
    SHA-256 of its text and its rows, the priors file's path and SHA-256."""
    import inspect
    import shutil

    from ddtree_bayes.core.config import load_priors
    from ddtree_bayes.core.data import load_hardware, load_measurements
    from ddtree_bayes.core.paths import bundled
    from ddtree_bayes.engine import fitting
    from ddtree_bayes.workflows.living import reweight

    shutil.copy(bundled("measurements.csv"), tmp_path / "m.csv")
    shutil.copy(bundled("priors.toml"), tmp_path / "p.toml")
    link = tmp_path / "via"
    link.symlink_to(tmp_path)
    text = (tmp_path / "m.csv").read_text()
    m = load_measurements(str(link / "m.csv"), load_hardware(str(bundled("hardware.csv"))))
    cfg = load_priors(link / "p.toml")
    rows = sum(1 for line in text.splitlines()[1:] if line.strip())
    assert store.inputs_meta(m, cfg, "abc") == {
        "data": {"path": str(tmp_path / "m.csv"),
                 "sha256": hashlib.sha256(text.encode()).hexdigest(), "rows": rows},
        "priors": {"path": str(tmp_path / "p.toml"),
                   "sha256": hashlib.sha256((tmp_path / "p.toml").read_bytes()).hexdigest()},
        "inputs_sha256": "abc"}
    for writer in (fitting.metadata, reweight.save_reweighted):
        source = inspect.getsource(writer)
        assert "store.inputs_meta(measurements, cfg, inputs_hash)" in source
        assert '"sha256": measurements.sha256' not in source
