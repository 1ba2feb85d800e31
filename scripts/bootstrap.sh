#!/usr/bin/env bash
# Create .venv with a Python >= 3.12 and install ddtree-bayes into it (editable).
#   scripts/bootstrap.sh          runtime dependencies
#   scripts/bootstrap.sh --dev    plus pytest, ruff, mypy
# Finds the interpreter itself: $DDTREE_PYTHON, then python3.13/python3.12/python3 on PATH,
# then pyenv's versions, then /usr/local/bin and /usr/bin. Re-running is cheap: it only
# reinstalls when pyproject.toml changed. Once per install it also compiles the bundled model
# into the on-disk cache (`ddtree-bayes fit --compile-only`, ~30 s; DDTREE_SKIP_COMPILE=1
# skips it; a compile that failed is tried again on the next run).
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"

ok() {  # is $1 a Python >= 3.12?
    [ -n "$1" ] && [ -x "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null
}

find_python() {
    local c
    if [ -n "${DDTREE_PYTHON:-}" ]; then ok "$DDTREE_PYTHON" && { echo "$DDTREE_PYTHON"; return; }; fi
    for c in python3.13 python3.12 python3; do
        c=$(command -v "$c" 2>/dev/null || true)
        ok "$c" && { echo "$c"; return; }
    done
    local root="${PYENV_ROOT:-$HOME/.pyenv}"
    if command -v pyenv >/dev/null 2>&1; then root=$(pyenv root); fi
    for c in $(ls -d "$root"/versions/3.1[2-9]* "$root"/versions/3.[2-9][0-9]* 2>/dev/null | sort -rV); do
        ok "$c/bin/python" && { echo "$c/bin/python"; return; }
    done
    for c in /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
        ok "$c" && { echo "$c"; return; }
    done
    return 1
}

if ! ok .venv/bin/python; then
    py=$(find_python) || {
        echo "bootstrap: no Python >= 3.12 found (PyMC 6 / ArviZ 1.x need it)." >&2
        echo "bootstrap: fix: install one (e.g. 'pyenv install 3.12') or set DDTREE_PYTHON=/path/to/python3.12" >&2
        exit 1
    }
    echo "bootstrap: creating .venv with $py ($("$py" -V 2>&1))" >&2
    rm -rf .venv
    "$py" -m venv .venv
fi

stamp=".venv/.installed${extras:+-dev}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "bootstrap: installing ddtree-bayes$extras into .venv (first time: about a minute)" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".$extras"
    touch "$stamp"
    rm -f .venv/.compiled   # new code: its model compiles again
fi
# the package's own bytecode: an editable install leaves src/ without it, and where
# PYTHONDONTWRITEBYTECODE is set every process would compile it again (-0.13 s a predict)
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m compileall -q src > /dev/null || true
if [ "${DDTREE_SKIP_COMPILE:-0}" != "1" ] && [ ! -f .venv/.compiled ]; then
    # numba types the model's log density once per machine (~30 s); doing it here, like a
    # package's precompile step, lets the first fit of the bundled data load it from the cache
    echo "bootstrap: compiling the model once for this machine (about 30 s)" >&2
    if .venv/bin/ddtree-bayes fit --compile-only --quiet; then
        touch .venv/.compiled
    else
        rc=$?
        [ "$rc" -eq 130 ] && exit 130   # interrupted: stop the chain it started
        echo "bootstrap: the compile failed (exit $rc); the first fit will compile instead" >&2
    fi
fi
