"""Every word `predict`'s table and `--explain` print is defined where a user looks: a term of
the README's glossary. The outputs are the generated ones (docs/examples/, made by
scripts/docs_examples.py and checked against the code in the slow tier)."""

from __future__ import annotations

import re

from conftest import REPO

EXAMPLES = REPO / "docs" / "examples"
#: the default table, --target, --concurrency, --explain, a GPU never measured, an unmeasured engine
OUTPUTS = ("predict", "predict-target", "predict-concurrency", "predict-explain", "predict-h200",
           "cli-engine-typo")
#: words of the notes under the table (as printed -> the glossary's term); each must still be
#: printed by one of OUTPUTS, so a word the tool stops using leaves this list
NOTES = {
    "posterior predictive": "posterior predictive",
    "run-to-run noise": "run-to-run noise",
    "'original' is the deterministic estimate": "original +-30%",
    "U(lo,hi)": "U(lo,hi)",
    "(1 - reduction)": "reduction",
    "overhead of measured group": "overhead group",
    "anchored to the measured": "anchored",
    "carried from": "carried",
    "transferred from": "transferred",
    "drawn from the pooled population": "pooled population",
    "priced by a generic ddtree drafter": "generic drafter",
    "roofline": "roofline",
    "compute knee": "compute knee",
    "prior-driven": "prior-driven",
    "structural discrepancy": "discrepancy",
}
#: printed where no example shows it: a --target with --concurrency, --explain's row of draws
#: capped at the memory read, its `from` of a measured system ("fitted to b300x8's rows")
NOT_IN_EXAMPLES = ("P(user>=T)", "memory-read cap", "fitted")


def glossary_terms(readme: str) -> list[str]:
    """The first cells of the README's glossary table, without backticks."""
    section = readme.split("\n## Glossary\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1).replace("`", "") for m in re.finditer(r"^\| ([^|]+?) \|", section, re.M)
            if m.group(1) not in ("term", "---")]


def defined(term: str, terms: list[str]) -> bool:
    pattern = rf"(?<![\w]){re.escape(term)}(?![\w])"
    return any(re.search(pattern, t, re.I) for t in terms)


def _columns(dashes: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"-+", dashes)]


def printed_terms(text: str) -> set[str]:
    """Column headers of every table in an output, and the `term` column of --explain's."""
    lines = text.split("\n")
    out = set()
    for i, line in enumerate(lines):
        if i == 0 or not re.fullmatch(r"-+( +-+)*", line):
            continue
        spans = _columns(line)
        heads = [lines[i - 1][a:b if k < len(spans) - 1 else None].strip()
                 for k, (a, b) in enumerate(spans)]
        out |= set(heads)
        if "term" in heads:
            a, b = spans[heads.index("term")]
            for row in lines[i + 1:]:
                if not row.strip() or row.startswith(("tok/s", "  ")) and not row[a:b].strip():
                    break
                out.add(row[a:b].strip())
    normal = set()
    for h in out - {""}:
        h = re.sub(r"^P\((user)?>=[\d.]+\)$", lambda m: f"P({m.group(1) or ''}>=T)", h)
        h = re.sub(r"^total, \d+%$", "total", h)
        normal.add(re.sub(r"^(\d+)%$", r"\1% interval", h))
    return normal


def test_printed_terms_are_read_off_the_tables():
    text = ("b300 x8\n"
            "engine  accept  C  per user  90% interval  total, 90%  P(user>=800)\n"
            "------  ------  -  --------  ------------  ----------  ------------\n"
            "sglang  14      1       710       608-853  710 (1-2)           0.14\n"
            "tok/s, posterior predictive\n"
            "engine  accept  term          share  90%  from\n"
            "------  ------  ------------  -----  ---  -------\n"
            "sglang  14      acceptance       0%  -    given\n"
            "                target step     63%  -    fitted to b300x8's rows\n"
            "\n")
    assert printed_terms(text) == {"engine", "accept", "C", "per user", "90% interval", "total",
                                   "P(user>=T)", "term", "share", "from", "acceptance",
                                   "target step"}


def test_every_term_predict_prints_is_in_the_glossary():
    terms = glossary_terms((REPO / "README.md").read_text())
    outputs = "\n".join((EXAMPLES / f"{name}.txt").read_text() for name in OUTPUTS)
    printed = set().union(*(printed_terms((EXAMPLES / f"{name}.txt").read_text())
                            for name in OUTPUTS))
    assert {"original +-30%", "50% interval", "P(>=T)", "P(> AR)", "per user", "share",
            "speculative overhead", "noise and discrepancy"} <= printed
    assert [phrase for phrase in NOTES if phrase not in outputs] == []
    wanted = sorted(printed | set(NOTES.values()) | set(NOT_IN_EXAMPLES))
    assert [t for t in wanted if not defined(t, terms)] == []
