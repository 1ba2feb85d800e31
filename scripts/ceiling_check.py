"""Every public measurement against the predictive cap (engine/ceiling.py): a row's measured
steps per second must not exceed the rate at which its GPUs read the card's active weights and
its streams' KV caches at 4.5 bits per value (engine/ceiling.py ``least_kv_share``, against
the card's own bits per value). A row above it
would say the cap is too strict.

    .venv/bin/python scripts/ceiling_check.py [--top 5]

Rows without ``accept_len`` count as acceptance 1, so their steps per second are an upper bound
(a speculative row without it may show above 1 by that alone; it is listed apart).

Then every row of an MoE card whose step routes two or more tokens (C >= 2 streams, or one
stream's tree or chain: the larger of C and M, engine/ceiling.py ``routed_tokens``) against
the rate of reading the experts balanced routing touches (``balanced_weights``, the read
predict's ``balanced_read`` answers with: each token picking top-k of the experts per layer
at random, beside the other active weights, at the full bandwidth): the least ratio of its
measured step to that read is what ``PUBLIC_ROUTING_MARGIN`` records, and the exit code is 1
when it is below 1 (a row faster than balanced routing allows: routing concentrated).
"""

from __future__ import annotations

import argparse
import csv
import glob
from pathlib import Path

from ddtree_bayes.core.model_cards import load_model_cards
from ddtree_bayes.core.pairs import pair_features
from ddtree_bayes.core.paths import bundled
from ddtree_bayes.engine.ceiling import balanced_weights, least_kv_share

ROOT = Path(__file__).resolve().parents[1]


def public_rows():
    """(file name, line, row, card, hardware row, GPUs, tok/s, C, context) of every distinct
    public row with a bundled card and hardware row and numeric gpus and tok_s (the corpus
    repeats its sweeps' rows: each once)."""
    cards = load_model_cards(bundled("models.csv"))
    with open(bundled("hardware.csv"), newline="") as fh:
        hardware = {r["hardware"]: r for r in csv.DictReader(fh)}
    files = sorted(glob.glob(str(ROOT / "data" / "public" / "**" / "*.csv"), recursive=True))
    seen = set()
    for path in files:
        with open(path, newline="") as fh:   # (closed before the rows are handed out)
            records = list(csv.DictReader(fh))
        for line, r in enumerate(records, start=2):
            if r.get("model") not in cards or r.get("hardware") not in hardware:
                continue
            try:
                gpus, tok = int(r["gpus"]), float(r["tok_s"])
            except (KeyError, ValueError):
                continue
            c = int(r.get("concurrency") or 1)
            ctx = float(r.get("context_tokens") or 0)
            key = (r["model"], r["hardware"], gpus, r["engine"], r["method"], r.get("block"),
                   r.get("budget"), c, ctx, tok)
            if key in seen:
                continue
            seen.add(key)
            yield (Path(path).name, line, r, cards[r["model"]], hardware[r["hardware"]], gpus,
                   tok, c, ctx)


def rows():
    for name, line, r, card, hw, gpus, tok, c, ctx in public_rows():
        f = pair_features(card, hw, gpus)
        kv = (card.kv_cache_gb(ctx, c) or 0.0) * least_kv_share(card)
        read_ms = f.stream_ms + kv / (f.bandwidth_tb_s * gpus)
        accept = float(r["accept_len"]) if r.get("accept_len") else None
        steps = tok / c / (accept or 1.0)
        yield (steps * read_ms / 1000, accept is not None, name, line, r, c, ctx)


def routing_rows():
    """(measured step / balanced-routing read, AR or with accept_len, file, line, row, C) of
    every distinct public row of an MoE card routing two or more tokens a step (rows without
    accept_len count as acceptance 1: a speculative one's step is then a lower bound, listed
    apart)."""
    for name, line, r, card, hw, gpus, tok, c, _ in public_rows():
        m = int(r.get("verify_tokens") or 1)
        read = balanced_weights(card, pair_features(card, hw, gpus), c, m)
        if read is None:   # (one token a step, or a dense card)
            continue
        accept = float(r["accept_len"]) if r.get("accept_len") else None
        step = 1000.0 * (accept or 1.0) * c / tok
        yield step / read.step_ms, accept is not None or r["method"] == "ar", name, line, r, c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=5)
    top = ap.parse_args().top
    found = sorted(rows(), key=lambda x: -x[0])
    with_accept = [x for x in found if x[1]]
    print(f"{len(found)} distinct public rows ({len(with_accept)} with accept_len); measured "
          "steps/s as a share of the cap:")
    for title, group in (("with accept_len", with_accept),
                         ("AR rows at C > 1 or context > 0", [x for x in found if x[1] and (
                             x[5] > 1 or x[6] > 0) and x[4]["method"] == "ar"]),
                         ("without accept_len (counted as 1: an upper bound)",
                          [x for x in found if not x[1]])):
        print(f"  {title}: {len(group)} rows, above the cap: "
              f"{sum(x[0] > 1 for x in group)}; closest:")
        for share, _, name, line, r, c, ctx in group[:top]:
            print(f"    {share:.3f}  {name} line {line}: {r['model']} {r['hardware']} x{r['gpus']} "
                  f"{r['engine']} {r['method']} C={c} context {ctx:.0f}")
    routed = sorted(routing_rows(), key=lambda x: x[0])
    sure = [x for x in routed if x[1]]
    print(f"{len(routed)} distinct public rows of an MoE card routing two or more tokens a step "
          f"({len(sure)} AR or with accept_len); measured step / balanced-routing read of the "
          "larger of C and M tokens, least first:")
    for ratio, _, name, line, r, c in sure[:top]:
        print(f"    {ratio:.2f}  {name} line {line}: {r['model']} {r['hardware']} x{r['gpus']} "
              f"{r['engine']} {r['method']} C={c} context {r.get('context_tokens') or 0}")
    return int(any(x[0] > 1 for x in with_accept) or any(x[0] < 1 for x in sure))


if __name__ == "__main__":
    raise SystemExit(main())
