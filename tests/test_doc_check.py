"""scripts/doc_check.py: the user pages name only flags their command defines, name every
flag some parser defines, and link only to files and headings that exist."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from conftest import REPO

SCRIPT = REPO / "scripts" / "doc_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("doc_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_check"] = module
    spec.loader.exec_module(module)
    return module


def test_the_pages_name_real_flags_every_flag_and_real_anchors():
    assert _module().check() == []


def test_the_parsers_are_read_whole():
    commands = dict(_module().parser_flags())
    assert {"--accept", "--kv-cache", "--explain"} <= commands["predict"]
    assert "--dense-int8-tflops" in commands["hardware add"]
    assert "--help" not in commands["fit"]
    assert "hardware" not in commands   # a group of subcommands has no flags of its own


def test_a_flag_its_command_lacks_is_named_with_page_and_line():
    dc = _module()
    commands = dict(dc.parser_flags())
    page = ("Ask `ddtree-bayes predict --acept 14`; `update --chains 2` is fine.\n"
            "\n"
            "    ddtree-bayes hardware add x --like b300 --dense-{bf16,fp9}-tflops 3 \\\n"
            "        --nope 1   # --not-a-flag: a comment\n"
            '`next --query "--concurrency 16"` and `fit && predict --bogus`\n'
            "<!-- example: x -->\n```\n$ ddtree-bayes predict --made-by-the-tool\n```\n"
            "<!-- /example -->\n")
    assert dc.wrong_flags("p.md", page, commands) == [
        "p.md:1: `predict` has no --acept (`ddtree-bayes predict --acept 14`)",
        "p.md:5: `predict` has no --bogus (`fit && predict --bogus`)",
        "p.md:3: `hardware add` has no --dense-fp9-tflops (`ddtree-bayes hardware add x --like "
        "b300 --dense-{bf16,fp9}-tflops 3          --nope 1   # --not-a-flag: a comment`)",
        "p.md:3: `hardware add` has no --nope (`ddtree-bayes hardware add x --like "
        "b300 --dense-{bf16,fp9}-tflops 3          --nope 1   # --not-a-flag: a comment`)",
    ]


def test_a_flag_no_page_names_is_listed():
    dc = _module()
    commands = {"diff": {"--all", "--seed"}, "history": {"--format"}}
    pages = {"a.md": "`diff --seed 1`", "b.md": "--format json\n"
                                               "<!-- example: d -->\n```\n$ ddtree-bayes diff "
                                               "--all\n```\n<!-- /example -->\n"}
    assert dc.unmentioned_flags(pages, commands) == [
        "diff --all: defined by the parser, named on no page"]


def test_a_link_to_a_missing_heading_or_file_is_named(tmp_path: Path):
    dc = _module()
    (tmp_path / "other.md").write_text("# Other page\n\n## Concurrency: C <= 4 (issue 22)\n"
                                       "```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#concurrency-c--4-issue-22) [b](other.md#concurrency-issue-22)\n"
                    "[c](missing.md) [d](other.md#not-a-heading) [e](https://example.org/#x)\n"
                    "[f](#local)\n\n## Local\n")
    assert dc.broken_links(page, page.read_text()) == [
        "page.md:1: other.md#concurrency-issue-22: no such heading in other.md",
        "page.md:2: missing.md: no such file",
        "page.md:2: other.md#not-a-heading: no such heading in other.md",
    ]


def test_cli_md_has_a_row_for_every_flag_of_every_command():
    """docs/cli.md's "Every command and flag": a table a (sub)command, a row a flag its parser
    defines, and no row for a flag it does not (a flag named only in prose elsewhere, such as
    `fit --compile-only` in the README, left `cli.md` without it)."""
    dc = _module()
    commands = dict(dc.parser_flags())
    assert dc.cli_reference("docs/cli.md", (REPO / "docs" / "cli.md").read_text(),
                            commands, dc.top_flags()) == []


def test_a_missing_or_gone_flag_row_is_named_with_its_line():
    dc = _module()
    commands = {"diff": {"--all", "--seed"}, "hardware add": {"--like"}, "history": {"--format"}}
    page = ("# CLI\n"                                       # 1
            "\n"                                            # 2
            "## Every command and flag\n"                   # 3
            "\n"                                            # 4
            "`ddtree-bayes --version` prints it.\n"         # 5
            "\n"                                            # 6
            "### `diff`\n"                                  # 7
            "\n"                                            # 8
            "| flag | what it does |\n"                     # 9
            "|---|---|\n"                                   # 10
            "| `--all` | include the `*_z` |\n"             # 11
            "| `--bogus N` | gone |\n"                      # 12
            "\n"                                            # 13
            "### `history`\n"                               # 14
            "\n"                                            # 15
            "| `--format F` | table or json |\n"            # 16
            "\n"                                            # 17
            "### `trak`\n"                                  # 18
            "\n"                                            # 19
            "## Issue 12\n"                                 # 20
            "\n"                                            # 21
            "| `--seed N` | outside the section: not a row of diff's table |\n")
    assert dc.cli_reference("p.md", page, commands, {"--version", "--debug"}) == [
        "p.md:3: the section does not name ddtree-bayes --debug (fix: say what it does)",
        "p.md:7: `diff`'s table has no row for --seed (fix: add one; "
        "`ddtree-bayes diff --help` says what it does)",
        "p.md:12: `diff` has no --bogus (fix: drop the row)",
        "p.md:3: no table for `hardware add` (fix: add a heading ### `hardware add` "
        "and a row a flag)",
        "p.md:18: no command `trak` (fix: drop its table)",
    ]
    assert dc.cli_reference("p.md", "# CLI\n", commands, set()) == [
        "p.md: no section '## Every command and flag' (fix: add it: a table a command)"]
