"""`card add --bytes-per-weight` of a quantised checkpoint above its unquantised dtype's bytes
is bits typed as bytes, refused: an EXL2 config of 3.5 bits a weight carded with
``--bytes-per-weight 3.5`` wrote Llama-3.1-8B at 3.5 B/weight (28 GB of weights, 8x the
checkpoint's 3.5 GB), exit 0, and every roofline, transfer and memory check of a fit read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gguf_fixture
from ddtree_bayes.core.errors import InputError
from ddtree_bayes.workflows import card_files
from test_cli_support import listing, run_cli

FIX = Path(__file__).resolve().parent / "fixtures" / "cards"


def _config(tmp_path: Path, quantization_config: dict | None, dtype: str = "bfloat16") -> Path:
    cfg = json.loads((FIX / "llama-3.1-8b" / "config.json").read_text())
    cfg["torch_dtype"] = dtype
    if quantization_config is not None:
        cfg["quantization_config"] = quantization_config
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


EXL2 = {"quant_method": "exl2", "bits": 3.5}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}


@pytest.mark.parametrize("quant", [EXL2, AWQ], ids=["unread-exl2", "awq"])
def test_bits_given_as_bytes_for_a_quantised_config_are_refused(tmp_path, quant):
    path = _config(tmp_path, quant)
    with pytest.raises(InputError) as info:
        card_files.derive_from_hf_config(path, name="l8", bytes_per_weight=3.5)
    text = str(info.value)
    assert "--bytes-per-weight 3.5 is more than the 2 bytes of the checkpoint's unquantised " \
           "bfloat16 weights" in text
    assert "(fix: give bytes, not bits: 3.5 bits a weight is --bytes-per-weight 0.4375)" in text


def test_the_cli_writes_nothing(tmp_path):
    path = _config(tmp_path, EXL2)
    models = tmp_path / "models.csv"
    before = listing(tmp_path)
    code, out, err = run_cli(tmp_path, "card", "add", "--hf-config", str(path), "--name", "l8",
                             "--bytes-per-weight", "3.5", "--models-file", str(models))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "is more than the 2 bytes" in err and not models.exists()
    assert listing(tmp_path) == before


def test_bytes_of_a_quantised_config_and_16_bit_overrides_are_kept(tmp_path):
    # the bytes of 3.5 bits: as given, for every weight
    d = card_files.derive_from_hf_config(_config(tmp_path, EXL2), name="l8",
                                         bytes_per_weight=0.4375)
    assert d.card["bytes_per_weight"] == "0.4375"
    # as many bytes as the unquantised dtype: not more than it, kept
    d = card_files.derive_from_hf_config(_config(tmp_path, EXL2), name="l8",
                                         bytes_per_weight=2)
    assert d.card["bytes_per_weight"] == "2"
    # an unquantised float32 checkpoint served in float32 (its own note says to give 4)
    d = card_files.derive_from_hf_config(_config(tmp_path, None, "float32"), name="l8",
                                         bytes_per_weight=4)
    assert d.card["bytes_per_weight"] == "4"


def test_a_quantised_gguf_is_held_to_16_bit_too(tmp_path):
    path = gguf_fixture.write(tmp_path / "llama-3.1-8b-instruct-q4_k_m.gguf")
    with pytest.raises(InputError, match=r"--bytes-per-weight 3\.9 is more than the 2 bytes "
                                         r"of 16-bit weights, for a quantised GGUF file"):
        card_files.derive_from_gguf(path, name="l8", bytes_per_weight=3.9)
    d = card_files.derive_from_gguf(path, name="l8", bytes_per_weight=0.6)
    assert d.card["bytes_per_weight"] == "0.6"


def test_a_flag_below_any_quantisation_is_refused_as_the_flags(tmp_path):
    """`card add --bytes-per-weight 0.05` (a decimal slip for 0.5) passed the flag's range,
    [0.01, 4], and was refused only by the written file's check (81009f35: fewer than Q1_0's
    1.125 bits, 1.125 / 8 = 0.140625 bytes), which named "data/models.csv, row 18, column
    'bytes_per_weight'", a row the user never wrote, not the flag. The flag's floor is that
    same 0.140625: refused as the flag, nothing written."""
    from ddtree_bayes.core.data import MIN_BYTES_PER_WEIGHT

    assert MIN_BYTES_PER_WEIGHT == 1.125 / 8 == 0.140625
    path = _config(tmp_path, EXL2)
    models = tmp_path / "models.csv"
    before = listing(tmp_path)
    code, out, err = run_cli(tmp_path, "card", "add", "--hf-config", str(path), "--name", "l8",
                             "--bytes-per-weight", "0.05", "--models-file", str(models))
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err.startswith("ddtree-bayes: error: argument --bytes-per-weight: 0.05 is outside "
                          "[0.140625, 4] (fix: "), err
    assert "models.csv" not in err and listing(tmp_path) == before


def test_the_floor_itself_is_written_as_it_is_kept(tmp_path):
    """`card add --bytes-per-weight 0.140625` (Q1_0's 1.125 bits, the floor itself) was
    written to 4 decimals, 0.1406, below the floor the written row is held to: refused, "data/
    models.csv, row 18 ... bytes_per_weight 0.1406 is fewer than any quantisation stores".
    Written 0.140625, the card is kept and reads 0.140625 (8.0303 B x 0.140625 = 1.129 GB)."""
    path = _config(tmp_path, EXL2)
    models = tmp_path / "models.csv"
    code, out, err = run_cli(tmp_path, "card", "add", "--hf-config", str(path), "--name", "l8",
                             "--bytes-per-weight", "0.140625", "--models-file", str(models))
    assert code == 0, err
    from ddtree_bayes.core.model_cards import load_model_cards

    assert load_model_cards(models)["l8"].bytes_per_weight == 0.140625
