"""Chemical element symbols <-> atomic numbers (IUPAC periodic table, Z = 1 ... 118)."""

from __future__ import annotations

#: Element symbols indexed by atomic number (index 0 is a placeholder for "no element").
SYMBOLS = (
    "X", "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si", "P", "S", "Cl",
    "Ar", "K", "Ca", "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As", "Se",
    "Br", "Kr", "Rb", "Sr", "Y", "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb",
    "Te", "I", "Xe", "Cs", "Ba", "La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er",
    "Tm", "Yb", "Lu", "Hf", "Ta", "W", "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At",
    "Rn", "Fr", "Ra", "Ac", "Th", "Pa", "U", "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No",
    "Lr", "Rf", "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og",
)

#: Largest atomic number (Oganesson).
MAX_ATOMIC_NUMBER = len(SYMBOLS) - 1

#: Atomic number of each symbol; deuterium and tritium (``D``, ``T``) count as hydrogen.
ATOMIC_NUMBERS = {s: z for z, s in enumerate(SYMBOLS) if z > 0} | {"D": 1, "T": 1}


def atomic_number(symbol: str, where: str = "") -> int:
    """Atomic number of ``symbol`` (case-insensitive, e.g. ``"C"``, ``"cl"``); ValueError if unknown."""
    key = symbol.strip()
    z = ATOMIC_NUMBERS.get(key[:1].upper() + key[1:].lower())
    if z is None:
        at = f"{where}: " if where else ""
        raise ValueError(f"{at}unknown element symbol {symbol.strip()!r}")
    return z
