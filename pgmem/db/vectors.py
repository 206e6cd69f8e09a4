"""How vectors travel to PostgreSQL: pgvector's text form, cast in SQL.

Text keeps pack() free of per-connection type registration (an extra round trip on
a connection the caller owns) and works in COPY as well as in bind parameters.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def vector_literal(vector: npt.NDArray[np.floating]) -> str:
    """pgvector's text form of a vector: the shortest repr that round-trips float32."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"
