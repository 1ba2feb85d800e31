#!/usr/bin/env python3
"""The user pages against the command line: flags and links.

    PYTHONPATH=src .venv/bin/python scripts/doc_check.py      # exit 1 and one line a problem

Three checks over README.md, docs/*.md and docs/howto/*.md, outside the generated example
blocks (``scripts/docs_examples.py`` makes those by running the commands):

- a flag written after a command (```ddtree-bayes predict --accept 14```, an indented
  command line, ``hardware add ... --dense-{bf16,fp8}-tflops``) is one that command's parser
  defines; text in quotes (``next --query "..."``) and after ``#`` is left out;
- every flag each parser defines is named on some page (``--help`` is the reference, the
  pages say what a flag is for);
- every relative link names a file that exists and, with ``#anchor``, a heading of it (as
  GitHub makes an anchor from a heading);
- docs/cli.md's section "Every command and flag" holds a table for every (sub)command with a
  row for each flag its parser defines and none for a flag it does not, and names the
  top-level flags (``--version``).
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "docs" / "howto").glob("*.md")))
GENERATED = re.compile(r"<!-- example: [\w-]+ -->.*?<!-- /example -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*(?:\{[a-z0-9,]+\}[a-z0-9-]*)?")
PROGRAMS = ("ddtree-bayes", ".venv/bin/ddtree-bayes")


def parser_flags(parser: argparse.ArgumentParser | None = None,
                 path: tuple[str, ...] = ()) -> Iterator[tuple[str, set[str]]]:
    """(command, its long flags) for every (sub)command: ``"hardware add"``, ``"predict"``."""
    if parser is None:
        from ddtree_bayes.cli.main import build_parser
        parser = build_parser()
    group = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            group = True
            for name, sub in action.choices.items():
                yield from parser_flags(sub, (*path, name))
    if path and not group:   # (`hardware` itself is only its subcommands)
        yield " ".join(path), {o for a in parser._actions for o in a.option_strings
                               if o.startswith("--") and o != "--help"}


def top_flags() -> set[str]:
    """The flags of ``ddtree-bayes`` itself (``--version``)."""
    from ddtree_bayes.cli.main import build_parser
    return {o for a in build_parser()._actions for o in a.option_strings
            if o.startswith("--") and o != "--help"}


def _expand(flag: str) -> list[str]:
    m = re.search(r"\{([a-z0-9,]+)\}", flag)
    if m is None:
        return [flag]
    return [flag[:m.start()] + part + flag[m.end():] for part in m.group(1).split(",")]


def _prose(text: str) -> str:
    """The page without its generated blocks (line numbers kept)."""
    return GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _commands(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every inline code span and indented line: command candidates."""
    for m in re.finditer(r"`([^`]+)`", text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("    ") and not lines[i - 1].rstrip().endswith("\\"):
            j, joined = i, line
            while joined.rstrip().endswith("\\") and j + 1 < len(lines):
                j += 1
                joined = joined.rstrip()[:-1] + " " + lines[j]
            yield i + 1, joined


def wrong_flags(page: str, text: str, commands: dict[str, set[str]]) -> list[str]:
    """A flag written after a command that the command does not define."""
    problems = []
    for line, span in _commands(_prose(text)):
        for part in re.split(r"&&|\|\||;|\|", span):
            part = re.sub(r"'[^']*'|\"[^\"]*\"", "", part.split(" #")[0])
            words = part.split()
            if words and words[0] in PROGRAMS:
                words = words[1:]
            if not words:
                continue
            name = " ".join(words[:2]) if " ".join(words[:2]) in commands else words[0]
            if name not in commands:
                continue
            for flag in FLAG.findall(part):
                for f in _expand(flag):
                    if f not in commands[name] and f != "--help":
                        problems.append(f"{page}:{line}: `{name}` has no {f} (`{span.strip()}`)")
    return problems


def unmentioned_flags(texts: dict[str, str], commands: dict[str, set[str]]) -> list[str]:
    """Flags a parser defines that no page names."""
    named = {f for text in texts.values() for flag in FLAG.findall(_prose(text))
             for f in _expand(flag)}
    return [f"{name} {flag}: defined by the parser, named on no page"
            for name, flags in sorted(commands.items()) for flag in sorted(flags - named)]


REFERENCE = "## Every command and flag"
CLI_PAGE = REPO / "docs" / "cli.md"


def cli_reference(page: str, text: str, commands: dict[str, set[str]],
                  top: set[str]) -> list[str]:
    """docs/cli.md's reference section against the parsers: a table (``### `COMMAND` ``)
    for every command, a row (``| `--flag ...` |``) for each of its flags, nothing else."""
    lines = text.split("\n")
    try:
        start = lines.index(REFERENCE)
    except ValueError:
        return [f"{page}: no section '{REFERENCE}' (fix: add it: a table a command)"]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    tables: dict[str, tuple[int, dict[str, int]]] = {}
    current: dict[str, int] | None = None
    for i in range(start + 1, end):
        heading = re.fullmatch(r"### `([a-z ]+)`", lines[i])
        if heading:
            current = {}
            tables[heading.group(1)] = (i + 1, current)
        elif current is not None and (row := re.match(r"\| `(--[a-z0-9-]+)", lines[i])):
            current[row.group(1)] = i + 1
    section = "\n".join(lines[start:end])
    problems = [f"{page}:{start + 1}: the section does not name ddtree-bayes {flag} "
                f"(fix: say what it does)"
                for flag in sorted(top) if not re.search(rf"{flag}(?![\w-])", section)]
    for name, flags in sorted(commands.items()):
        if name not in tables:
            problems.append(f"{page}:{start + 1}: no table for `{name}` (fix: add a heading "
                            f"### `{name}` and a row a flag)")
            continue
        line, rows = tables[name]
        problems += [f"{page}:{line}: `{name}`'s table has no row for {flag} (fix: add one; "
                     f"`ddtree-bayes {name} --help` says what it does)"
                     for flag in sorted(flags - set(rows))]
        problems += [f"{page}:{rows[flag]}: `{name}` has no {flag} (fix: drop the row)"
                     for flag in sorted(set(rows) - flags, key=rows.__getitem__)]
    problems += [f"{page}:{line}: no command `{name}` (fix: drop its table)"
                 for name, (line, _) in tables.items() if name not in commands]
    return problems


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} (.+)$", FENCE.sub("", text), re.M):
        s = _slug(m.group(1))
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def broken_links(page: Path, text: str) -> list[str]:
    problems = []
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), _prose(text))
    for m in re.finditer(r"\]\(([^)\s]+)\)", prose):
        link = m.group(1)
        if re.match(r"[a-z]+:", link):
            continue
        target, _, fragment = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        line = prose.count("\n", 0, m.start()) + 1
        if not path.exists():
            problems.append(f"{page.name}:{line}: {link}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path.read_text()):
            problems.append(f"{page.name}:{line}: {link}: no such heading in {path.name}")
    return problems


def check(pages: tuple[Path, ...] = PAGES) -> list[str]:
    commands = dict(parser_flags())
    texts = {str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p): p.read_text()
             for p in pages}
    problems = [p for page, text in texts.items() for p in wrong_flags(page, text, commands)]
    problems += unmentioned_flags(texts, commands)
    problems += [p for page in pages for p in broken_links(page, page.read_text())]
    if CLI_PAGE in pages:
        problems += cli_reference(str(CLI_PAGE.relative_to(REPO)), CLI_PAGE.read_text(),
                                  commands, top_flags())
    return problems


def main() -> int:
    problems = check()
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
