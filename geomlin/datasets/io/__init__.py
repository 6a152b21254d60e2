"""File readers: plain functions from a path to tensors / arrays, no dataset logic.

``sdf`` (MDL V2000 molfiles), ``xyz`` (plain and extended XYZ), ``dsgdb9nsd`` (QM9's
original XYZ files, a folder or a streamed tar archive), ``qm9pack`` (the qm9pack package's QM9
tables), ``off`` (Object File Format, including ModelNet's header bug), ``ply`` (ASCII and
binary PLY), ``obj`` (Wavefront OBJ vertices and faces).
"""
