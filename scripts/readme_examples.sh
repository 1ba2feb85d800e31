#!/usr/bin/env bash
# Run every command whose output README.md shows, in a scratch copy of this repository,
# and write the outputs to OUT (default /tmp/readme-examples). The README's blocks are
# pasted from these files; nothing here edits the README.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-/tmp/readme-examples}"
bin="$repo/.venv/bin/ddtree-bayes"
rm -rf "$out" && mkdir -p "$out"
work="$(mktemp -d)"
mkdir -p "$work/models" && cp -r "$repo/data" "$work/" && cp "$repo/models/priors.toml" "$work/models/"
chmod u+w "$work/data/measurements.csv"
cd "$work"
run() { local name="$1"; shift; echo "\$ ddtree-bayes $*" > "$out/$name.txt"; "$bin" "$@" >> "$out/$name.txt" 2>&1 || echo "(exit $?)" >> "$out/$name.txt"; }
run fit fit
run predict predict --accept 12:16
run h200 predict --hardware h200 --accept 14
run optimize optimize --hardware b300 --engine native
run optimize_acc optimize --hardware b300 --engine native --acceptance-file data/acceptance_reference.csv
run next next --query "--hardware b300 --engine native --method ddtree --block 16 --budget 32 --accept 14"
run report report
cp "$work"/reports/*/summary.md "$out/report_summary.md" 2>/dev/null || true
cp "$work"/reports/*/summary.json "$out/report_summary.json" 2>/dev/null || true
# compare: the earlier default forms fitted next to the default
run fit_old fit --quiet --moe-form power --step-form fraction
run compare compare
run average predict --accept 12,16 --model-average
# the living-posterior walk-through (its own scratch copy)
w2="$(mktemp -d)"; mkdir -p "$w2/models" && cp -r "$repo/data" "$w2/" && cp "$repo/models/priors.toml" "$w2/models/"
chmod u+w "$w2/data/measurements.csv"; cd "$w2"
run u1_fit fit --quiet
run u2_track track --hardware rtx-pro-6000 --engine vllm --method eagle3 --block 3 --context 32k --accept 1.95
run u3_add add --hardware b300 --engine sglang --method ddtree --block 16 --budget 32 --accept 13.1 --tok-s 612 --source "HYPOTHETICAL example for the README, not a measurement"
run u4_update update --quiet
run u5_add add --hardware b300 --engine sglang --method ddtree --block 16 --budget 32 --accept 13.1 --tok-s 900 --source "HYPOTHETICAL surprise for the README"
run u6_reject update --quiet --reject-surprises
run u7_history history
run u8_diff diff "$(ls models/fits | head -1 | sed 's/.nc$//')" latest
echo "outputs in $out (scratch dirs $work $w2)"
