"""File readers: plain functions from a path to tensors / arrays, no dataset logic.

``sdf`` (MDL V2000 molfiles), ``xyz`` (plain and extended XYZ), ``off`` (Object
File Format, including ModelNet's header bug), ``ply`` (ASCII and binary PLY),
``obj`` (Wavefront OBJ vertices and faces).
"""
