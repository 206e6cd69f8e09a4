"""How vectors travel to PostgreSQL: pgvector's text form, cast in SQL.

Text keeps pack() free of per-connection type registration (an extra round trip on
a connection the caller owns) and works in COPY as well as in bind parameters.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt


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
