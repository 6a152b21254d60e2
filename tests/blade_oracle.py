"""The brute-force blade product shared by the Clifford-algebra and PGA oracles of the tests."""


def brute_blade_product(a: tuple, b: tuple, metric) -> tuple[float, tuple]:
    """Multiply basis blades given as sorted index tuples by bubble-sorting the concatenation.

    Independent of the engine: swaps are counted one adjacent transposition at a time and
    equal neighbours contract to their metric square.
    """
    word = list(a) + list(b)
    sign = 1.0
    changed = True
    while changed:
        changed = False
        for i in range(len(word) - 1):
            if word[i] > word[i + 1]:
                word[i], word[i + 1] = word[i + 1], word[i]
                sign = -sign
                changed = True
    out = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == word[i + 1]:
            sign *= metric[word[i]]
            i += 2
        else:
            out.append(word[i])
            i += 1
    return sign, tuple(out)
