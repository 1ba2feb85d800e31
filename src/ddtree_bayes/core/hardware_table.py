"""The hardware table a run uses: the built-in GPUs, overlaid by the user's own rows.

The package ships a sourced table of the GPUs people run inference on (``_bundled/hardware.csv``,
a copy of the repository's ``data/hardware.csv``). A working directory's ``data/hardware.csv``
(or ``--hardware-file``) need only hold what differs: a row whose ``hardware`` name is built in
replaces that GPU's row, a new name adds a GPU. A column the user's file does not have at all
(a copy made before the column existed) is taken from the built-in row: the file says nothing
about it. A cell the user's file leaves blank where the built-in row has a value stays blank
(the user may mean it) and is listed in :attr:`HardwareTable.shadowed`, which ``fit`` and
``hardware list`` report in one line. Both files are validated on their own, so an error names
the file, row and column the user typed. The effective table is what a fit
stores (:attr:`HardwareTable.text`); it is the built-in text unchanged when the user's file
adds nothing to it. numpy-free: the standard library only.
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

from ddtree_bayes.core import paths
from ddtree_bayes.core.data import HARDWARE_NUMBERS, load_hardware, read_records

#: The columns the model reads (a blank the user leaves in one of them is reported).
USED_COLUMNS = (*HARDWARE_NUMBERS, "interconnect", "compute_capability")
#: The columns that say where a row's figures came from: text no answer reads (a row whose
#: sources alone differ is the same GPU to the model).
SOURCE_COLUMNS = ("source", "flops_source")
#: Where a row of the effective table came from.
BUILT_IN, ADDED, OVERRIDES = "built-in", "user", "user-override"


@dataclass(frozen=True)
class HardwareTable:
    """The effective hardware table: ``rows`` by name, where each came from, and its CSV text.

    ``origins[name]`` is :data:`BUILT_IN`, :data:`ADDED` (a GPU only the user's file has) or
    :data:`OVERRIDES` (the user's row replaces a built-in row with other values; a user row
    identical to the built-in one stays :data:`BUILT_IN`). ``user_file`` is None without one.
    """

    rows: dict[str, dict[str, str]]
    origins: dict[str, str]
    header: tuple[str, ...]
    text: str
    user_file: str | None
    #: (GPU, column) cells the user's row leaves blank where the built-in row has a value
    shadowed: tuple[tuple[str, str], ...] = ()
    #: sha256 of the user's file as the loaders read it (universal newlines, no BOM; what
    #: ``engine/scenario.holds_fitted`` compares), from the text read once; None without one
    user_sha256: str | None = None

    def shadowed_note(self) -> str | None:
        """One line naming the built-in values the user's file blanks (None: it blanks none),
        the file named as the user would type it.

        >>> t = HardwareTable({}, {}, (), "", "data/hardware.csv",
        ...                   (("rtx-a6000", "dense_bf16_tflops"), ("v100", "link")))
        >>> t.shadowed_note().split(" the built-in table has ")[1].split(":")[0]
        '(rtx-a6000 dense_bf16_tflops, v100 link)'
        """
        if not self.shadowed:
            return None
        cells = ", ".join(f"{gpu} {col}" for gpu, col in self.shadowed[:4])
        more = f" and {len(self.shadowed) - 4} more" if len(self.shadowed) > 4 else ""
        return (f"{paths.shown(self.user_file or '')} leaves blank {len(self.shadowed)} value"
                f"{'s' * (len(self.shadowed) > 1)} the built-in table has ({cells}{more}): this "
                "run does not use them (fix: fill those cells, or drop those columns from your "
                "file to use the built-in values)")


def user_hardware_file(workdir: str | Path | None = None,
                       hardware_file: str | Path | None = None) -> Path | None:
    """The user's hardware table: ``hardware_file`` if given, else ``<workdir>/data/hardware.csv``
    when it exists, else None (the built-in table alone)."""
    if hardware_file:
        return Path(hardware_file)
    local = paths.data_file("hardware.csv", workdir)
    return None if local == paths.bundled("hardware.csv") else local


def hardware_table(workdir: str | Path | None = None,
                   hardware_file: str | Path | None = None) -> HardwareTable:
    """The built-in table overlaid by the user's (see :func:`user_hardware_file`).

    >>> table = hardware_table(workdir="/nonexistent")
    >>> table.user_file is None, table.origins["rtx-4090"], table.rows["rtx-4090"]["mem_bw_tb_s"]
    (True, 'built-in', '1.008')
    """
    return merge_tables(user_hardware_file(workdir, hardware_file))


def merge_tables(user_file: str | Path | None, builtin: str | Path | None = None, *,
                 user_text: str | None = None) -> HardwareTable:
    """Validate the built-in table and ``user_file`` (each with its own file, row and column in
    errors), then overlay the user's rows on the built-in ones by name. ``user_text``: the
    user's file as it would be written (not read from disk)."""
    builtin_path = Path(builtin) if builtin is not None else paths.bundled("hardware.csv")
    builtin_records = read_records(builtin_path)
    builtin_text, builtin_header, _ = builtin_records
    base = load_hardware(builtin_path, records=builtin_records)
    header = list(builtin_header)
    if user_file is None:
        return HardwareTable(base, dict.fromkeys(base, BUILT_IN), tuple(header), builtin_text, None)
    user_path = str(user_file)
    user_records = read_records(user_path, user_text, "--hardware-file")
    user_text, user_header, _ = user_records
    own = load_hardware(user_path, records=user_records)
    header += [h for h in user_header if h and h not in header]
    rows = dict(base)
    origins = dict.fromkeys(base, BUILT_IN)
    missing = [h for h in builtin_header if h and h not in user_header]
    shadowed = []
    for name, row in own.items():
        if name not in base:
            origins[name] = ADDED
        else:
            # a column the user's file lacks says nothing: the built-in value stands
            row = {**row, **{h: base[name].get(h, "") for h in missing}}
            shadowed += [(name, h) for h in USED_COLUMNS
                         if h in user_header and not row.get(h, "").strip()
                         and base[name].get(h, "").strip()]
            if _cells(row, header) != _cells(base[name], header):
                origins[name] = OVERRIDES
        rows[name] = row
    if all(o == BUILT_IN for o in origins.values()) and len(header) == len(builtin_header):
        text = builtin_text   # the user's file adds nothing: the fit stores the built-in text
    else:
        text = _csv_text(header, rows)
    return HardwareTable(rows, origins, tuple(header), text, user_path, tuple(shadowed),
                         hashlib.sha256(user_text.encode()).hexdigest())


def _cells(row: dict[str, str], header: list[str]) -> tuple[str, ...]:
    return tuple(row.get(h, "") for h in header)


def _csv_text(header: list[str], rows: dict[str, dict[str, str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows.values():
        writer.writerow(_cells(row, header))
    return buf.getvalue()
