"""How vectors travel to PostgreSQL: pgvector's text form in bind parameters, its binary
form in the write path's COPY.

Text keeps pack() free of per-connection type registration (an extra round trip on
a connection the caller owns). The write path copies every note's vector: there
pgvector's binary form (:func:`vector_binary_dumper`) saves formatting 384 numbers on
the client and parsing them on the server (a vector column copied as text took ~100 µs
per row, in binary ~6 µs: docs/performance.md); a statement that runs before the COPY
reads the type's oid.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg.adapt import Dumper
from psycopg.pq import Format


@cache
def _template(dimension: int) -> str:
    return "[" + ",".join(["%.9g"] * dimension) + "]"


def vector_literal(vector: npt.NDArray[np.floating]) -> str:
    """pgvector's text form of a vector, each value exactly as float32 holds it.

    Nine significant digits identify every float32 (pgvector parses each with
    ``strtof``); one ``%`` over the whole vector is several times faster than a
    ``repr`` per value, which matters on the write path (one literal per note).
    """
    values = np.asarray(vector, dtype=np.float32).ravel().tolist()
    return _template(len(values)) % tuple(values)


_HEADER = struct.Struct(">hh")


@cache
def vector_binary_dumper(oid: int) -> type[Dumper]:
    """A psycopg dumper of vectors (numpy arrays, sequences of numbers) in pgvector's binary
    form, for the database whose ``vector`` type has ``oid``: registered by oid only, it
    serves a binary COPY whose column types were set (``Copy.set_types``).

    The form is ``vector_recv``'s: the dimension and an unused int16, then each value as a
    big-endian float32 — exactly the float32 values, nothing formatted or parsed.
    """

    class VectorBinaryDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            values = np.asarray(obj, dtype=">f4").ravel()
            return _HEADER.pack(len(values), 0) + values.tobytes()

    VectorBinaryDumper.oid = oid
    return VectorBinaryDumper
