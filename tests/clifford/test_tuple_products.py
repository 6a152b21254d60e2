"""Products of tuples of vectors in G(3) and their invariants: the formulas written out (dot and cross
products, determinants), and chirality under a reflection."""

import torch

from geomlin.clifford.tuple_products import G3, embed_vectors, product_invariants, tuple_products

DT = torch.float64


def test_invariants_written_out():
    a, b, c = torch.randn(3, 4, 3, dtype=DT)
    A, B, C = embed_vectors(a), embed_vectors(b), embed_vectors(c)
    ab = G3.geometric_product(A, B)
    abc = G3.geometric_product(ab, C)
    dot = lambda x, y: (x * y).sum(-1, keepdim=True)
    torch.testing.assert_close(product_invariants(A, 1), a.norm(dim=-1, keepdim=True))
    torch.testing.assert_close(product_invariants(ab, 2),
                               torch.cat([dot(a, b), torch.cross(a, b, dim=-1).norm(dim=-1, keepdim=True)], -1))
    vec = dot(a, b) * c - dot(a, c) * b + dot(b, c) * a
    det = torch.linalg.det(torch.stack([a, b, c], -1))[:, None]
    torch.testing.assert_close(product_invariants(abc, 3), torch.cat([vec.norm(dim=-1, keepdim=True), det], -1))
    torch.testing.assert_close(product_invariants(abc, 3, parity_invariant=True)[:, 1:], det.abs())
    # chirality: a reflection flips det[a b c] and nothing else
    P = torch.diag(torch.tensor([1.0, 1.0, -1.0], dtype=DT))
    ref = [embed_vectors(x @ P) for x in (a, b, c)]
    flipped = product_invariants(tuple_products(ref)["single"][0][1], 3)
    torch.testing.assert_close(flipped, product_invariants(abc, 3) * torch.tensor([1.0, -1.0], dtype=DT))
