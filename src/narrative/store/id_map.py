"""A compact map from row ids (int64) to int64 values, for the in-process indexes.

A Python ``dict`` of a million ints costs about 100 bytes an entry (the key and
value objects and the table); this map keeps two sorted numpy arrays, 16 bytes an
entry.  Ids from the database mostly arrive in increasing order (new rows), which
append in amortised O(1); an id below the largest is merged in (one sort), and a
removed id leaves a tombstone until tombstones outnumber live entries.  Lookups
are binary searches (``np.searchsorted``), one or many at a time.

It knows nothing of what the ids are (memories, passages, ...) nor what the values
mean (a row, a shard and a slot packed together, ...).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

Ids = npt.NDArray[np.int64]

MISSING = -1  # the value of an id the map does not hold (values stored must be >= 0)
_INITIAL = 64


class IdMap:
    """Sorted ids → non-negative int64 values.  Not thread-safe: the index that owns it locks."""

    def __init__(self) -> None:
        self._keys: Ids = np.empty(_INITIAL, dtype=np.int64)
        self._values: Ids = np.empty(_INITIAL, dtype=np.int64)
        self._size = 0  # used slots, tombstones included
        self._live = 0

    def __len__(self) -> int:
        return self._live

    def __contains__(self, ident: object) -> bool:
        return isinstance(ident, int | np.integer) and self.get(int(ident)) != MISSING

    @property
    def nbytes(self) -> int:
        return int(self._keys.nbytes + self._values.nbytes)

    def get(self, ident: int) -> int:
        """The value of ``ident``, or MISSING."""
        keys = self._keys[: self._size]
        at = int(np.searchsorted(keys, ident))
        if at < self._size and int(keys[at]) == ident:
            return int(self._values[at])
        return MISSING

    def get_many(self, idents: npt.ArrayLike) -> Ids:
        """The values of many ids at once (MISSING where absent)."""
        wanted = np.asarray(idents, dtype=np.int64).reshape(-1)
        keys = self._keys[: self._size]
        at = np.minimum(np.searchsorted(keys, wanted), max(self._size - 1, 0))
        if self._size == 0:
            return np.full(len(wanted), MISSING, dtype=np.int64)
        found = keys[at] == wanted
        values: Ids = np.where(found, self._values[at], MISSING)
        return values

    def set(self, ident: int, value: int) -> None:
        self.set_many(np.asarray([ident], dtype=np.int64), np.asarray([value], dtype=np.int64))

    def set_many(self, idents: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Insert or overwrite (``idents`` distinct within the call; ``values`` >= 0)."""
        keys_in = np.asarray(idents, dtype=np.int64).reshape(-1)
        values_in = np.asarray(values, dtype=np.int64).reshape(-1)
        if len(keys_in) == 0:
            return
        size = self._size
        keys = self._keys[:size]
        at = np.searchsorted(keys, keys_in)
        inside = at < size
        known = np.zeros(len(keys_in), dtype=bool)
        known[inside] = keys[at[inside]] == keys_in[inside]
        if known.any():
            revived = int(np.count_nonzero(self._values[at[known]] == MISSING))
            self._values[at[known]] = values_in[known]
            self._live += revived
        fresh_keys, fresh_values = keys_in[~known], values_in[~known]
        if len(fresh_keys) == 0:
            return
        order = np.argsort(fresh_keys, kind="stable")
        fresh_keys, fresh_values = fresh_keys[order], fresh_values[order]
        self._reserve(size + len(fresh_keys))
        if size == 0 or fresh_keys[0] > self._keys[size - 1]:  # the usual case: new rows, higher ids
            self._keys[size : size + len(fresh_keys)] = fresh_keys
            self._values[size : size + len(fresh_keys)] = fresh_values
        else:
            merged_keys = np.concatenate([self._keys[:size], fresh_keys])
            merged_values = np.concatenate([self._values[:size], fresh_values])
            order = np.argsort(merged_keys, kind="stable")
            self._keys[: len(order)] = merged_keys[order]
            self._values[: len(order)] = merged_values[order]
        self._size = size + len(fresh_keys)
        self._live += len(fresh_keys)

    def pop(self, ident: int) -> int:
        """Remove ``ident``; its value, or MISSING when it was not there."""
        keys = self._keys[: self._size]
        at = int(np.searchsorted(keys, ident))
        if at >= self._size or int(keys[at]) != ident or int(self._values[at]) == MISSING:
            return MISSING
        value = int(self._values[at])
        self._values[at] = MISSING
        self._live -= 1
        if self._size - self._live > max(_INITIAL, self._live):
            self._compact()
        return value

    def pop_many(self, idents: Iterable[int]) -> Ids:
        """Remove many ids; their values (MISSING for those not there)."""
        return np.asarray([self.pop(int(i)) for i in idents], dtype=np.int64)

    def ids(self) -> Ids:
        """Every live id, ascending (a copy)."""
        keys: Ids = self._keys[: self._size][self._values[: self._size] != MISSING]
        return keys.copy()

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]

    def _reserve(self, rows: int) -> None:
        capacity = len(self._keys)
        if rows <= capacity:
            return
        while capacity < rows:
            capacity *= 2
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            grown = np.empty(capacity, dtype=np.int64)
            grown[: self._size] = old[: self._size]
            setattr(self, name, grown)

    def _compact(self) -> None:
        keep = self._values[: self._size] != MISSING
        keys, values = self._keys[: self._size][keep], self._values[: self._size][keep]
        capacity = max(_INITIAL, 1 << max(0, int(len(keys) * 2 - 1).bit_length()))
        self._keys = np.empty(capacity, dtype=np.int64)
        self._values = np.empty(capacity, dtype=np.int64)
        self._keys[: len(keys)] = keys
        self._values[: len(values)] = values
        self._size = self._live = len(keys)
