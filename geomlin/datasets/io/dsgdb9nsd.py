"""Reader for the original QM9 distribution: one ``dsgdb9nsd_NNNNNN.xyz`` file per molecule.

Ramakrishnan et al. 2014 (Scientific Data 1, 140022; figshare collection 978904) publish QM9 as
``dsgdb9nsd.xyz.tar.bz2``, 133,885 small text files. Each file (the paper's Tables 2 and 3) is

* line 1: the number of atoms ``n``;
* line 2: ``gdb <index>`` and 15 properties ([`PROPERTY_NAMES`][]): ``A B C`` (GHz), ``mu``
  (D), ``alpha`` (a0^3), ``homo lumo gap`` (Hartree), ``r2`` (a0^2), ``zpve U0 U H G``
  (Hartree), ``Cv`` (cal/(mol K));
* lines 3 .. n+2: ``element x y z q``, the symbol, the position (Angstrom) and the Mulliken
  charge (e);
* line n+3: the harmonic vibrational frequencies (cm^-1);
* line n+4: the SMILES of the GDB-17 graph and of the relaxed B3LYP geometry;
* line n+5: the InChI, likewise.

Some numbers are written in Mathematica's exponent notation, ``1.2345*^-6`` for ``1.2345e-6``
([`MATHEMATICA_EXPONENT`][]). The reader takes a folder of such files or a tar archive of
them (``.tar.bz2`` as published, or gzip, xz or no compression), streamed member by member
in one pass, without unpacking to disk. Atom lines of all files are converted in one vectorised
``numpy.loadtxt`` call, which is what makes reading all 133,885 files fast. Every error is a
[`FileFormatError`][] naming the file (``archive/member`` inside an
archive) and the line.
"""

from __future__ import annotations

import importlib
import io
import os
import re
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from geomlin.datasets.elements import ATOMIC_NUMBERS
from geomlin.validation import FileFormatError, quote_line

#: The 15 properties of line 2, in file order, and their units.
PROPERTY_NAMES = ("A", "B", "C", "mu", "alpha", "homo", "lumo", "gap", "r2", "zpve", "U0", "U", "H", "G", "Cv")
PROPERTY_UNITS = ("GHz", "GHz", "GHz", "D", "a0^3", "Ha", "Ha", "Ha", "a0^2", "Ha", "Ha", "Ha", "Ha", "Ha",
                  "cal/(mol K)")
#: Name of the published archive and the pattern of its member files.
ARCHIVE_NAME = "dsgdb9nsd.xyz.tar.bz2"
FILE_PATTERN = re.compile(r"dsgdb9nsd_(\d+)\.xyz")
#: Mathematica's exponent marker in some numbers (``1.2345*^-6``).
MATHEMATICA_EXPONENT = b"*^"
#: Tag that opens line 2.
GDB_TAG = b"gdb"
#: Lines of a file besides its atom lines: count, properties, frequencies, SMILES, InChI.
EXTRA_LINES = 5
#: Columns of an atom line: symbol, x, y, z, Mulliken charge.
ATOM_COLUMNS = 5
#: Leading bytes of the compressed formats an archive may use, and the module that opens each.
COMPRESSION_MAGIC = ((b"BZh", "bz2"), (b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "lzma"))
#: Size of a tar header and the unit member data is padded to.
TAR_BLOCK = 512
#: Sources with more files than this show a progress bar by default.
PROGRESS_FILES = 4096
_ATOM_DTYPE = np.dtype([("symbol", "S3"), ("x", "f8"), ("y", "f8"), ("z", "f8"), ("charge", "f8")])


@dataclass
class GDB9Records:
    """QM9 molecules stored flat (concatenated over molecules), as read from the raw files.

    Attributes
    ----------
    index : (M,) int64
        The 1-based QM9 index of each molecule (``gdb <index>``; ``dsgdb9nsd_<index>.xyz``).
    num_atoms : (M,) int64
        Atoms per molecule.
    z : (A,) int64
        Atomic numbers, ``A = num_atoms.sum()``, in file order.
    pos : (A, 3) float64
        Positions in Angstrom.
    properties : (M, 15) float64
        The properties of [`PROPERTY_NAMES`][], in the file's units (``PROPERTY_UNITS``).
    files : list of str
        The file each molecule came from (``archive/member`` inside an archive), for messages.
    lines : (M,) int64
        The 1-based line of each molecule's first atom in its file, for messages.
    lines_per_atom : int
        1 where each atom has its own line (XYZ files), 0 where a molecule is one line (a table).
    """

    index: np.ndarray
    num_atoms: np.ndarray
    z: np.ndarray
    pos: np.ndarray
    properties: np.ndarray
    files: list[str]
    lines: np.ndarray
    lines_per_atom: int = 1

    def __len__(self) -> int:
        return len(self.index)

    @property
    def atom_offsets(self) -> np.ndarray:
        """``(M + 1,)`` start of each molecule's atoms in ``pos`` / ``z``."""
        return np.concatenate([[0], np.cumsum(self.num_atoms)])

    def atom_line(self, atom: int) -> tuple[str, int]:
        """``(file, line)`` of the flat atom index ``atom``, for messages."""
        k = int(np.searchsorted(np.cumsum(self.num_atoms), atom, side="right"))
        return self.files[k], int(self.lines[k]) + self.lines_per_atom * (atom - int(self.atom_offsets[k]))

    def select(self, keep: np.ndarray) -> GDB9Records:
        """The molecules at the integer positions ``keep`` ``(K,)``, in that order."""
        keep = np.asarray(keep, dtype=np.int64)
        off = self.atom_offsets
        atoms = _ranges(off[keep], self.num_atoms[keep])
        return GDB9Records(self.index[keep], self.num_atoms[keep], self.z[atoms], self.pos[atoms],
                           self.properties[keep], [self.files[k] for k in keep.tolist()], self.lines[keep],
                           self.lines_per_atom)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + n)`` for every ``(s, n)`` pair, without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return first + np.arange(total)


def symbols_to_z(symbols: np.ndarray) -> tuple[np.ndarray, bytes | None]:
    """Atomic numbers of an ``S`` array of element symbols; the first unknown symbol (or None)."""
    uniq, inverse = np.unique(symbols, return_inverse=True)
    table = np.empty(len(uniq), dtype=np.int64)
    for u, sym in enumerate(uniq):
        key = sym.decode("ascii", errors="replace").strip()
        z = ATOMIC_NUMBERS.get(key[:1].upper() + key[1:].lower())
        if z is None:
            return np.zeros(0, dtype=np.int64), sym
        table[u] = z
    return table[inverse.reshape(-1)], None


def iter_xyz_files(source: str | os.PathLike, progress: bool | None = None) -> Iterator[tuple[str, bytes]]:
    """``(name, bytes)`` of every ``dsgdb9nsd_*.xyz`` file of a folder or a tar archive.

    A folder's files come sorted by name; an archive's in member order, streamed (nothing is
    unpacked to disk). Other files are ignored. ``name`` is the file's path (``archive/member``
    inside an archive). Raises FileNotFoundError for a missing source and
    [`FileFormatError`][] for an archive that is not a readable tar file
    (corrupt or truncated).
    """
    source = os.fspath(source)
    if os.path.isdir(source):
        names = sorted(e.name for e in os.scandir(source) if FILE_PATTERN.fullmatch(e.name) and e.is_file())
        bar = _bar(source, len(names), progress)
        for name in names:
            path = os.path.join(source, name)
            with open(path, "rb") as f:
                yield path, f.read()
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()
        return
    if not os.path.isfile(source):
        raise FileNotFoundError(f"QM9 XYZ source not found: {source} (a folder of dsgdb9nsd_*.xyz files or "
                                f"the archive {ARCHIVE_NAME})")
    bar = _bar(source, None, progress if progress is not None else os.path.getsize(source) > 16 << 20)
    try:
        with _open_compressed(source) as stream:
            for name, data in tar_members(stream):
                if FILE_PATTERN.fullmatch(os.path.basename(name)):
                    yield f"{source}/{name}", data
                    if bar is not None:
                        bar.update()
    except (tarfile.TarError, EOFError, OSError, ValueError) as err:
        if isinstance(err, FileFormatError):
            raise
        raise FileFormatError(source, f"not a readable tar archive of dsgdb9nsd_*.xyz files "
                              f"({type(err).__name__}: {err})") from None
    finally:
        if bar is not None:
            bar.close()


def _open_compressed(path: str):
    """``path`` opened for reading, decompressed on the fly by bz2, gzip or lzma (told by its first bytes)."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, module in COMPRESSION_MAGIC:
        if head.startswith(magic):
            return importlib.import_module(module).open(path, "rb")
    return open(path, "rb")


def tar_members(stream) -> Iterator[tuple[str, bytes]]:
    """``(name, bytes)`` of every regular file of a tar stream, read front to back in one pass.

    Headers are parsed by ``tarfile.TarInfo.frombuf`` (ustar, GNU and pax layouts; GNU long
    names and pax ``path`` records are applied). This walks the stream itself rather than through
    ``tarfile.TarFile``'s stream mode, whose per-member bookkeeping costs about as much as
    decompressing QM9's 133,885 small members. A truncated stream raises ``EOFError``, a corrupt
    header ``tarfile.HeaderError``.
    """
    long_name = None
    while True:
        block = stream.read(TAR_BLOCK)
        if not block or block == bytes(TAR_BLOCK):
            return
        if len(block) < TAR_BLOCK:
            raise EOFError("the archive ends inside a tar header")
        info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
        data = stream.read(info.size)
        if len(data) < info.size:
            raise EOFError(f"the archive ends inside member {info.name!r}")
        stream.read(-info.size % TAR_BLOCK)
        if info.type == tarfile.GNUTYPE_LONGNAME:
            long_name = data.rstrip(b"\0").decode("utf-8", "surrogateescape")
        elif info.type == tarfile.XHDTYPE:
            long_name = _pax_path(data) or long_name
        elif info.type in tarfile.REGULAR_TYPES:
            yield long_name or info.name, data
            long_name = None
        else:
            long_name = None


def _pax_path(data: bytes) -> str | None:
    """The ``path`` record of a pax extended header (records ``"<length> <key>=<value>\\n"``)."""
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        length = int(data[pos:space])
        key, _, value = data[space + 1:pos + length - 1].partition(b"=")
        if key == b"path":
            return value.decode("utf-8", "surrogateescape")
        pos += length
    return None


def _bar(source: str, total: int | None, progress: bool | None):
    if not (progress or (progress is None and total is not None and total > PROGRESS_FILES)):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"reading {os.path.basename(source)}", unit="mol")


def read_qm9_xyz(source: str | os.PathLike, progress: bool | None = None) -> GDB9Records:
    """Every molecule of a folder or tar archive of ``dsgdb9nsd_*.xyz`` files.

    Parameters
    ----------
    source : str or os.PathLike
        A folder holding the files, or the archive (``dsgdb9nsd.xyz.tar.bz2``).
    progress : bool, optional
        Show a tqdm bar over files (default: for more than 4096 files or a large archive).

    Returns
    -------
    GDB9Records
        In the source's order (a folder's sorted by name, an archive's by member).

    Raises
    ------
    FileNotFoundError
        If the source is missing.
    geomlin.validation.FileFormatError
        Naming the file and line, for an archive that cannot be read, no molecule files, a bad
        atom count, a truncated file, a malformed ``gdb`` line or atom line (a missing column
        included), an unknown element symbol, or a malformed or non-finite number.
    """
    records = parse_qm9_xyz(iter_xyz_files(source, progress))
    if not len(records):
        raise FileFormatError(os.fspath(source), "no dsgdb9nsd_*.xyz files found")
    return records


def parse_qm9_xyz(files: Iterable[tuple[str, bytes]]) -> GDB9Records:
    """Parse ``(name, bytes)`` pairs of ``dsgdb9nsd`` XYZ files; see [`read_qm9_xyz`][]."""
    names, counts, indices, props, atom_lines = [], [], [], [], []
    for name, data in files:
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        lines = data.split(b"\n")
        try:
            n = int(lines[0])
        except ValueError:
            raise FileFormatError(name, f"expected the number of atoms, got {quote_line(lines[0])}", line=1) from None
        if n < 1:
            raise FileFormatError(name, f"the number of atoms must be >= 1, got {n}", line=1)
        if len(lines) < n + EXTRA_LINES or not lines[n + EXTRA_LINES - 1].strip():
            raise FileFormatError(name, f"truncated file: {n} atoms announced, so {n + EXTRA_LINES} lines "
                                  "(count, properties, atoms, frequencies, SMILES, InChI) are expected, got "
                                  f"{len([ln for ln in lines if ln.strip()])}", line=1)
        head = lines[1].split(None, 2)
        if len(head) < 3 or head[0] != GDB_TAG or not head[1].isdigit():
            raise FileFormatError(name, f"expected 'gdb <index>' and 15 properties, got {quote_line(lines[1])}", line=2)
        freq = lines[n + 2].split(None, 1)
        if not freq or not _is_number(freq[0]):
            raise FileFormatError(name, f"expected the harmonic frequencies after the {n} atom lines, got "
                                  f"{quote_line(lines[n + 2])} (is the atom count on line 1 right?)", line=n + 3)
        names.append(name)
        counts.append(n)
        indices.append(int(head[1]))
        props.append(head[2])
        atom_lines.extend(lines[2:2 + n])
    num_atoms = np.asarray(counts, dtype=np.int64)
    m = len(names)
    if m == 0:
        return GDB9Records(np.zeros(0, np.int64), num_atoms, np.zeros(0, np.int64), np.zeros((0, 3)),
                           np.zeros((0, len(PROPERTY_NAMES))), [], np.zeros(0, np.int64))
    properties = _load(props, len(PROPERTY_NAMES), lambda k: (names[k], 2), "15 properties after 'gdb <index>'")
    offsets = np.concatenate([[0], np.cumsum(num_atoms)])
    atom_mol = np.repeat(np.arange(m), num_atoms)

    def atom_where(k):
        r = int(atom_mol[k])
        return names[r], 3 + k - int(offsets[r])

    atoms = _load(atom_lines, None, atom_where, "atom line 'symbol x y z charge'")
    pos = np.stack([atoms["x"], atoms["y"], atoms["z"]], axis=1)
    bad = ~np.isfinite(pos).all(axis=1)
    if bad.any():
        raise _error(atom_where(int(np.flatnonzero(bad)[0])), "non-finite (NaN or infinite) coordinate")
    z, unknown = symbols_to_z(atoms["symbol"])
    if unknown is not None:
        raise _error(atom_where(int(np.flatnonzero(atoms["symbol"] == unknown)[0])),
                     f"unknown element symbol {unknown.decode(errors='replace')!r}")
    return GDB9Records(np.asarray(indices, dtype=np.int64), num_atoms, z, pos, properties, names,
                       np.full(m, 3, dtype=np.int64))


def _load(lines: list[bytes], width: int | None, where, what: str) -> np.ndarray:
    """Whitespace-separated numbers of ``lines`` in one ``numpy.loadtxt`` call.

    ``width`` float columns give a ``(len(lines), width)`` array; ``None`` gives the structured
    atom lines. On any malformed line the lines are checked one by one so that the error names
    the file and line (``where(k)`` -> ``(file, line)`` of ``lines[k]``).
    """
    text = b"\n".join(lines).replace(MATHEMATICA_EXPONENT, b"e")
    dtype = _ATOM_DTYPE if width is None else np.float64
    try:
        out = np.loadtxt(io.BytesIO(text), dtype=dtype, comments=None, ndmin=1 if width is None else 2)
        ok = len(out) == len(lines) and (width is None or out.shape[1] == width)
    except ValueError:
        ok = False
    if ok and width is not None and not np.isfinite(out).all():
        k = int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
        raise _error(where(k), f"non-finite (NaN or infinite) value in the {what}")
    if ok:
        return out
    need = ATOM_COLUMNS if width is None else width
    for k, line in enumerate(lines):
        tokens = line.replace(MATHEMATICA_EXPONENT, b"e").split()
        numbers = tokens[1:] if width is None else tokens
        if len(tokens) != need:
            raise _error(where(k), f"expected {need} columns ({what}), got {len(tokens)}: {quote_line(line)}")
        bad = [t for t in numbers if not _is_number(t)]
        if bad:
            raise _error(where(k), f"malformed number {quote_line(bad[0])} in the {what}")
    raise _error(where(0), f"could not read the {what}s")


def _error(where: tuple[str, int], message: str) -> FileFormatError:
    """A [`FileFormatError`][] at ``where = (file, line)``."""
    return FileFormatError(where[0], message, line=where[1])


def _is_number(token: bytes) -> bool:
    try:
        float(token.replace(MATHEMATICA_EXPONENT, b"e"))
    except ValueError:
        return False
    return True


