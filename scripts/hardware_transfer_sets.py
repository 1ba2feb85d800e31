#!/usr/bin/env python3
"""Write the measurement files of the hardware-transfer check (docs/validation.md, "Hardware
transfer of one model"): public sweeps that measured one model and engine on several GPUs,
each sweep's AR rows and its speculative rows with an acceptance, under the deployment card.

    .venv/bin/python scripts/hardware_transfer_sets.py OUT_DIR
    .venv/bin/ddtree-bayes validate --data OUT_DIR/llamacpp.csv --group hardware --format json
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLUMNS = ("model,hardware,gpus,engine,method,block,budget,verify_tokens,accept_len,"
           "context_tokens,tok_s,source,notes").split(",")
#: set -> (sweep files in data/public, the model card its rows go under; None: as written)
SETS = {
    "llamacpp": (("llamacpp_mtp_qwen38_27b_rtx5090", "llamacpp_mtp_qwen38_27b_rtx3090_oc",
                  "llamacpp_mtp_qwen38_27b_v100_code"), "qwen3.8-27b-q4_k_m"),
    "lucebox36": (("lucebox_ddtree_qwen36_27b_rtx4090_budget",
                   "lucebox_ddtree_qwen36_27b_rtx5090_q4km_budget"), None),
    "lucebox35": (("lucebox_ddtree_qwen35_27b_rtx3090_budget",
                   "lucebox_ddtree_qwen35_27b_rtx4090_budget"), None),
}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, (sweeps, model) in SETS.items():
        rows = []
        for sweep in sweeps:
            with open(REPO / "data" / "public" / f"{sweep}.csv", newline="") as fh:
                for r in csv.DictReader(fh):
                    if not r["tok_s"] or (r["method"] != "ar" and not r["accept_len"]):
                        continue
                    rows.append({c: (model if c == "model" and model else r.get(c, ""))
                                 for c in COLUMNS})
        with open(out / f"{name}.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        print(f"{out / (name + '.csv')}: {len(rows)} rows", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "hardware_sets"))
