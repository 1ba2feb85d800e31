"""Flag errors say what is wrong with what was typed: ``--engine "sglang, native"`` was
refused with "names are lowercase, e.g. 'native'", though it was lowercase; the space after
the comma was the problem."""

from __future__ import annotations

from test_cli_support import make_point_mass_workdir, run_cli


def test_a_space_in_an_engine_list_is_named(tmp_path):
    work = make_point_mass_workdir(tmp_path / "w")
    code, out, err = run_cli(work, "predict", "--engine", "sglang, native", "--accept", "14")
    assert code == 2 and out == ""
    assert err == ("ddtree-bayes: error: argument --engine: ' native' has a space in it (fix: "
                   "write the list without spaces, e.g. 'sglang,native')\n")
    # spaces and capitals: both mended in the example
    code, _, err = run_cli(work, "predict", "--engine", "sglang , Native", "--accept", "14")
    assert code == 2 and err.endswith("(fix: write the list without spaces, e.g. "
                                      "'sglang,native')\n")
    # capitals alone keep their fix
    code, _, err = run_cli(work, "predict", "--engine", "SGLang", "--accept", "14")
    assert code == 2 and "names are lowercase, e.g. 'sglang'" in err

