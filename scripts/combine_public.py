#!/usr/bin/env python3
"""One measurement file of several models: data/measurements.csv plus the public sweeps of
data/public/ that report acceptance and absolute tok/s, in the measurement schema.

    .venv/bin/python scripts/combine_public.py [--out data/examples/public_multi_model.csv]

Per sweep file: the ``sweep`` and ``derived`` columns are dropped (a non-empty ``derived`` is
appended to ``notes`` as "derived: ..."); rows without tok_s or gpus are left out, and so
are autoregressive rows without accept_len; a speculative row without accept_len is kept
(the fit infers its group's acceptance; ``--known-acceptance`` leaves such rows out), unless
it gives no block, budget or verify_tokens, or only the block of a method that always verifies
a tree (``core.data.states_verify_tokens``, the package's own rule: the block is the tree's
depth, not its size), so its step cannot be placed; a
sweep in relative units (the DDTree paper's speedups) is skipped, as is a sweep whose model
has no card in data/models.csv (a sweep in DEPLOYMENT_CARDS names its quantisation's own
card); a public row that repeats a bundled measurement (same
configuration and tok/s) is left out so it is not counted twice; the two prompt sweeps of
a source that gives one acceptance per rung for both are pooled into one row per rung
(:data:`POOLED_PROMPTS`); the files of :data:`NOT_IN_CORPUS` are not read. Prints what it
kept and skipped; the standard library and the package's core.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))   # (run from a checkout: the package's own rule)
try:
    from ddtree_bayes.core.data import states_verify_tokens
except ModuleNotFoundError as err:   # (a Python without the project's packages)
    sys.exit(f"combine_public.py: {err} (fix: run it with the project's interpreter, "
             ".venv/bin/python scripts/combine_public.py, after scripts/bootstrap.sh --dev)")

COLUMNS = ("model", "hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
           "accept_len", "context_tokens", "tok_s", "source", "notes")
KEY = ("model", "hardware", "gpus", "engine", "method", "block", "budget", "verify_tokens",
       "accept_len", "context_tokens", "tok_s", "drafter")
#: The measurement schema's optional ``drafter`` column (the drafter card a row names when it
#: is not its target's default one, data/public/README.md): written when a kept row fills it.
DRAFTER = "drafter"
#: Sweeps whose quantisation streams a weight size other than their model card's: their rows
#: name the deployment's own card (data/models.csv), so the pair roofline streams the bytes
#: the deployment reads (GGUF bits per weight from llama.cpp's quantize README).
DEPLOYMENT_CARDS = {
    "llamacpp-mtp-qwen38-27b-rtxpro6000maxq": "qwen3.8-27b-q8_0",     # Q8_0
    "llamacpp-mtp-qwen38-27b-v100-code": "qwen3.8-27b-q4_k_m",        # Q4_K_M
    "llamacpp-mtp-qwen38-27b-v100-prose": "qwen3.8-27b-q4_k_m",       # Q4_K_M
    "llamacpp-mtp-qwen38-27b-rtx5090": "qwen3.8-27b-q4_k_m",          # UD-Q4_K_XL (>= Q4_K_M)
    "llamacpp-mtp-qwen38-27b-rtx3090-oc": "qwen3.8-27b-q4_k_m",       # UD-Q4_K_XL (>= Q4_K_M)
}


#: Rows measured on another setup than the rest of their sweep, whose source says so: in the
#: combined file they would pair a speculative step with a step it was not compared against.
#: (sweep, method): why. The per-sweep files keep them, with the same note.
NOT_COMPARABLE = {
    ("vllm-specdec-qwen38-27b-rtx3090-syvai", "ar"):
        "the no-speculation row is the repo's batch mode, a different launch from its "
        "speculative rows (single-user/README.md: 'Batch mode does 45-46 tok/s')",
}


#: Two prompt sweeps of one server boot per rung whose source gives ONE acceptance length per
#: rung, not one per prompt (club-3090: "AL is ONE value per rung"; code and narrative differ by
#: up to 0.41 in log tok/s at that AL): a row pairing one prompt's tok/s with it is wrong for at
#: least one prompt, and the two rows of a rung read as repeated runs of one configuration, so
#: their spread became the corpus's run-to-run noise (noise_sd 0.079 with them, 0.046 without the
#: narrative rows; docs/validation.md). The corpus gets one row per rung: the prompts' rates
#: pooled into the boot's aggregate rate (token-weighted harmonic mean, each prompt weighted by
#: its max_tokens, as if both ran to it), the AL read as the boot's aggregate over both prompts
#: (an assumption; the source does not say). (sweep, sweep): (max_tokens of each). The
#: per-sweep files keep their rows.
POOLED_PROMPTS = {
    ("club3090-vllm-mtp-qwen38-27b-int4-rtx3090x2-narr",
     "club3090-vllm-mtp-qwen38-27b-int4-rtx3090x2-code"): (1000, 800),
}


#: Sweep files not in the corpus yet: the lucebox DDTree budget sweeps came after it (commit
#: 13be7e2), and so did the three of the second data pass (34256d1); every corpus figure in
#: docs/validation.md was measured without them, and the extrapolation modes of ``validate``
#: score them. Adding them is its own, measured step. The TensorRT-LLM "MTP vanilla" sweep also
#: measures DeepSeek-R1 on 8x B200 in another build than the corpus's tech-blog sweep (AR 151
#: against 111 tok/s): in one file the two would read as repeated runs 0.31 apart in log tok/s.
#: The AMD MI300X draft-model rows (ssd_draft_*) name neither the draft length (7 assumed) nor
#: the acceptance, so a corpus fit could not tell their overhead from their acceptance; they
#: are there for ``fit --data`` and a later, measured step. So are the consumer-AMD (Radeon RX
#: 7900 XTX / XT) llama.cpp MTP sweeps (llamacpp_mtp_qwen38_27b_rx7900*), first for an AMD
#: experiment: the corpus figures of docs/validation.md were measured without them.
NOT_IN_CORPUS = ("lucebox_", "trtllm_mtp_vanilla_", "sglang_eagle3_qwen3_30b_a3b_h100x4_angelslim",
                 "sglang_mtp_qwen38_27b_gb300_", "ssd_draft_", "llamacpp_mtp_qwen38_27b_rx7900")


def pooled_rows(first: list[dict], second: list[dict], weights: tuple[int, int]) -> list[dict]:
    """One row per configuration of two prompt sweeps (:data:`POOLED_PROMPTS`): the second's
    row with tok/s the token-weighted harmonic mean of both, a ``derived`` and a note saying so.

    >>> a = [{"sweep": "s-narr", "method": "mtp", "verify_tokens": "2", "accept_len": "1.94",
    ...       "tok_s": "52.66", "derived": "", "notes": "MTP n=1; prompt=narrative"}]
    >>> b = [{**a[0], "sweep": "s-code", "tok_s": "64.15", "notes": "MTP n=1; prompt=code"}]
    >>> row = pooled_rows(a, b, (1000, 800))[0]
    >>> row["tok_s"], row["sweep"]
    ('57.21', 's-narr+s-code')
    """
    def config(r: dict) -> tuple:
        return tuple(_num(r.get(c, "")) for c in KEY if c != "tok_s")

    by_config = {config(r): r for r in first}
    if len(by_config) != len(first) or {config(r) for r in second} != set(by_config) \
            or len(second) != len(first):
        raise SystemExit(f"{first[0]['sweep']} and {second[0]['sweep']}: not one row each per "
                         "configuration, so they cannot be pooled rung by rung")
    out = []
    for r in second:
        other = by_config[config(r)]
        w1, w2 = weights
        t1, t2 = float(other["tok_s"]), float(r["tok_s"])
        rate = (w1 + w2) / (w1 / t1 + w2 / t2)
        how = (f"tok_s {rate:.2f} pooled from {other['sweep']} ({t1:g}, max_tokens {w1}) and "
               f"{r['sweep']} ({t2:g}, max_tokens {w2}): token-weighted harmonic mean, the "
               "boot's aggregate rate if both prompts ran to max_tokens; the source's one AL "
               "per rung read as that boot's aggregate (assumed)")
        notes = r.get("notes", "").replace("prompt=code; ", "").replace("prompt=code", "")
        out.append({**r, "sweep": f"{other['sweep']}+{r['sweep']}", "tok_s": f"{rate:.2f}",
                    "derived": "; ".join(x for x in (r.get("derived", "").strip(), how) if x),
                    "notes": f"prompts pooled (narrative + code); {notes}"})
    return out


def read_sweeps(public: list[Path]) -> list[tuple[str, list[dict]]]:
    """(name, rows) of each public sweep file, the two files of a :data:`POOLED_PROMPTS` pair
    as one (their rows pooled), named by both."""
    sweeps: list[tuple[str, list[dict]]] = []
    held: dict[str, tuple[str, list[dict]]] = {}
    wanted = {s for pair in POOLED_PROMPTS for s in pair}
    for path in public:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            recs = list(reader)
        name = str(path.relative_to(ROOT))
        for rec in recs:   # an unquoted comma shifts the cells after it (notes lost)
            if None in rec or None in rec.values():
                raise SystemExit(f"{name}: a row does not have the header's "
                                 f"{len(reader.fieldnames or ())} fields (quote a cell that "
                                 "holds a comma)")
        sweep = recs[0].get("sweep", "").strip() if recs else ""
        if sweep not in wanted:
            sweeps.append((name, recs))
            continue
        held[sweep] = (name, recs)
        for (a, b), weights in POOLED_PROMPTS.items():
            if a in held and b in held:
                sweeps.append((f"{held[a][0]} + {held[b][0]} (prompts pooled)",
                               pooled_rows(held[a][1], held[b][1], weights)))
    alone = wanted & set(held) - {s for pair in POOLED_PROMPTS if set(pair) <= set(held)
                                  for s in pair}
    if alone:
        raise SystemExit(f"{', '.join(sorted(alone))}: its prompt partner (POOLED_PROMPTS) is "
                         "missing from data/public")
    return sweeps


def _num(text: str) -> str:
    """A numeric cell normalised for comparison ('0' and '' stay distinct, 8 == 8.0)."""
    try:
        return f"{float(text):g}"
    except ValueError:
        return text.strip()


def key(row: dict) -> tuple:
    return tuple(_num(row.get(c, "")) if c not in ("model", "hardware", "engine", "method",
                                                     DRAFTER)
                 else (row.get(c) or "").strip() for c in KEY)


def combine(bundled: Path, public: list[Path], cards: set[str], known_only: bool = False
            ) -> tuple[str, list[str]]:
    with open(bundled, newline="", encoding="utf-8") as fh:
        base = list(csv.DictReader(fh))
    seen = {key(r) for r in base}
    out_rows = [{c: r.get(c, "") for c in COLUMNS} for r in base]
    log = [f"{bundled.relative_to(ROOT)}: {len(base)} rows"]
    for name, recs in read_sweeps(public):
        if not recs or "sweep" not in recs[0]:
            continue
        if any("relative units" in r.get("derived", "").lower() for r in recs):
            log.append(f"{name}: skipped (tok/s in relative units)")
            continue
        models = {DEPLOYMENT_CARDS.get(r["sweep"].strip(), r["model"]) for r in recs}
        if not models <= cards:
            log.append(f"{name}: skipped (no model card for {', '.join(sorted(models - cards))})")
            continue
        kept = repeats = inferred_rows = apart = 0
        for r in recs:
            if (r["sweep"].strip(), r["method"].strip()) in NOT_COMPARABLE:
                apart += 1
                continue
            inferred = not r["accept_len"].strip() and r["method"].strip() != "ar"
            if not ((r["accept_len"].strip() or (inferred and not known_only))
                    and r["tok_s"].strip() and r["gpus"].strip()
                    and states_verify_tokens(r)):
                continue
            if key(r) in seen:
                repeats += 1
                continue
            row = {c: r.get(c, "").strip() for c in (*COLUMNS, DRAFTER)}
            card = DEPLOYMENT_CARDS.get(r["sweep"].strip())
            if card is not None:   # (the configuration key keeps the sweep's model name)
                row["model"] = card
            derived = r.get("derived", "").strip()
            if derived:
                row["notes"] = f"{row['notes']}; derived: {derived}" if row["notes"] else \
                    f"derived: {derived}"
            out_rows.append(row)
            seen.add(key(r))
            kept += 1
            inferred_rows += inferred
        left = len(recs) - kept - repeats - apart
        log.append(f"{name}: {kept} rows"
                   + (f" ({apart} from another setup left out: NOT_COMPARABLE)" if apart else "")
                   + (f" ({inferred_rows} without accept_len: inferred)" if inferred_rows else "")
                   + (f", {repeats} already in the bundled data"
                                             if repeats else "")
                   + (f", {left} without acceptance, tok/s, GPU count or draft shape" if left else ""))
    buf = io.StringIO()
    named = any(r.get(DRAFTER) for r in out_rows)
    writer = csv.DictWriter(buf, fieldnames=[*COLUMNS, *((DRAFTER,) if named else ())],
                            restval="", extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(out_rows)
    return buf.getvalue(), log


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "data" / "examples" / "public_multi_model.csv"))
    ap.add_argument("--known-acceptance", action="store_true",
                    help="leave out speculative rows without accept_len (default: keep them; "
                         "the fit infers their acceptance)")
    args = ap.parse_args(argv)
    with open(ROOT / "data" / "models.csv", newline="", encoding="utf-8") as fh:
        cards = {r["model"] for r in csv.DictReader(fh)}
    files = sorted(p for p in (ROOT / "data" / "public").glob("*.csv")
                   if p.name != "hardware_flops.csv" and not p.name.startswith(NOT_IN_CORPUS))
    text, log = combine(ROOT / "data" / "measurements.csv", files, cards, args.known_acceptance)
    Path(args.out).write_text(text, encoding="utf-8")
    for line in log:
        print(line, file=sys.stderr)
    print(f"wrote {text.count(chr(10)) - 1} rows to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
