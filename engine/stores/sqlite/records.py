"""SQLiteStore's records: rows, their vec0 and float vectors, full text, counts, in one transaction.

A mixin of SQLiteStore (engine.stores.sqlite.store), which provides `_read()`, `_write()`,
`_temp_on_disk()`, `dim`, `_bump(conn, user_id, patch)` (record a write to the user's vectors or
validity, patching the in-memory copy), `_vector_partition(conn, user_id, build=...)` and
`_partition_sizes`. Every write to records also keeps the user's row in `record_counts`, so
`count_records` reads one row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields
from datetime import datetime
from typing import Any

import numpy as np

from engine.core.clock import ensure_aware
from engine.core.errors import ConfigError, MemlabUsageError
from engine.core.records import MemoryRecord
from engine.stores.dialect import to_json
from engine.stores.sql import check_vector
from engine.stores.sqlite.rows import (
    MUTABLE_COLUMNS,
    RECORD_COLUMNS,
    fts_body,
    ids_json,
    insert_values,
    mutable_values,
    record_from_row,
)

__all__ = ["SQLiteRecords", "sign_bits"]

_VEC_INSERT = "INSERT INTO records_vec(rowid, user_id, valid, embedding_bits) VALUES (?, ?, ?, vec_bit(?))"
_FTS_INSERT = "INSERT INTO records_fts(rowid, body) VALUES (?, ?)"
#: After an insert of at most `FTS_MERGE_MAX_ROWS` rows (a session's memory event), up to this many
#: pages of segment merging (with usermerge 2, migration 8): a term lookup probes every segment, and
#: FTS5's own automerge leaves one more every few events. Larger inserts (imports, bulk loads) leave
#: merging to FTS5's automerge and `bulk_load`'s optimize at its end: merging on every batch of a
#: 1M-record load cost 11% of its rate.
FTS_MERGE_PAGES = 100
FTS_MERGE_MAX_ROWS = 64
_FTS_MERGE = "INSERT INTO records_fts(records_fts, rank) VALUES ('merge', ?)"


def sign_bits(arr: np.ndarray) -> bytes:
    """The vector's sign bits, packed as vec0's bit[] column wants them (zero padded to whole bytes)."""
    return np.packbits(arr > 0, bitorder="little").tobytes()


_RECORD_FIELDS = tuple(f.name for f in fields(MemoryRecord))


def _with_id(r: MemoryRecord, rid: int) -> MemoryRecord:
    """`replace(r, id=rid)` without validating the record again (it was when it was made): 10x faster."""
    return _changed(r, id=rid)


def _changed(r: MemoryRecord, **values: Any) -> MemoryRecord:
    """`replace(r, **values)` without validating the record again (the caller's values are valid)."""
    new = object.__new__(MemoryRecord)
    for name in _RECORD_FIELDS:
        object.__setattr__(new, name, values[name] if name in values else getattr(r, name))
    return new


#: `records` reads of at most this many rows (the turn path's bounded reads) ask for ids and take
#: the records kept in memory (`get_records`' cache), reading only the others.
KEPT_READ_MAX = 1024


class SQLiteRecords:
    """add/get/list/count/update/reinforce/supersede records and their vectors (see module docstring)."""

    def _vector(self, vector: Sequence[float], what: str) -> np.ndarray:
        return check_vector(vector, self.dim, what)

    def _matrix(self, vectors: Sequence[Sequence[float]]) -> np.ndarray:
        """The vectors as one float32 (n, dim) matrix in one numpy pass; each vector checked alone
        (for the error that names it) only when the whole is not a finite (n, dim) matrix."""
        if not len(vectors):
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            mat = np.asarray(vectors, dtype=np.float32)
        except (ValueError, TypeError):
            mat = None
        if mat is not None and mat.ndim == 2 and mat.shape[1] == self.dim and np.isfinite(mat).all():
            return np.ascontiguousarray(mat)
        return np.stack([self._vector(v, f"vector {i}") for i, v in enumerate(vectors)])

    def _insert_vec(self, conn: Any, rid: int, user_id: str, valid: bool, arr: np.ndarray) -> None:
        conn.execute("INSERT OR REPLACE INTO record_vectors(id, embedding) VALUES (?, ?)", (rid, arr.tobytes()))
        conn.execute(_VEC_INSERT, (rid, user_id, int(valid), sign_bits(arr)))

    @staticmethod
    def _count_change(conn: Any, user_id: str, total: int, current: int) -> None:
        conn.execute(
            "INSERT INTO record_counts(user_id, total, current) VALUES (?, ?, ?) ON CONFLICT(user_id) DO UPDATE "
            "SET total = total + excluded.total, current = current + excluded.current",
            (user_id, int(total), int(current)),
        )

    @staticmethod
    def _assign_ids(conn: Any, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Ids for records without one, assigned while the write lock is held (rows then go in batches)."""
        next_id = conn.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'records'), 0), "
            "coalesce((SELECT max(id) FROM records), 0))"
        ).fetchone()[0]
        out = []
        for r in records:
            if r.id is None:
                next_id += 1
                out.append(_with_id(r, next_id))
            else:
                next_id = max(next_id, int(r.id))
                out.append(r)
        return out

    def add_records(self, records: Sequence[MemoryRecord], vectors: Sequence[Sequence[float]]) -> list[MemoryRecord]:
        if len(records) != len(vectors):
            raise ConfigError(f"add_records got {len(records)} records but {len(vectors)} vectors; give one vector per record")
        mat = self._matrix(vectors)
        bodies = [fts_body(r) for r in records]  # outside the write lock: tokenising is the slow part
        bits = np.packbits(mat > 0, axis=1, bitorder="little")
        with self._write() as conn:
            before = self._record_writes(conn) if self._by_id else None  # nothing kept: nothing to carry
            out = self._assign_ids(conn, records)
            conn.executemany(
                f"INSERT INTO records(id, user_id, {MUTABLE_COLUMNS}, created_at, created_ts, invalid_at, "
                f"superseded_by, valid) VALUES ({', '.join('?' * (len(MUTABLE_COLUMNS.split(',')) + 7))})",
                [insert_values(r) for r in out],
            )
            conn.executemany(_FTS_INSERT, [(r.id, b) for r, b in zip(out, bodies, strict=True)])
            if len(out) <= FTS_MERGE_MAX_ROWS:
                conn.execute(_FTS_MERGE, (FTS_MERGE_PAGES,))
            self._postings.written((r.id, None, b) for r, b in zip(out, bodies, strict=True))
            conn.executemany("INSERT INTO record_vectors(id, embedding) VALUES (?, ?)",
                             [(r.id, a.tobytes()) for r, a in zip(out, mat, strict=True)])  # fmt: skip
            conn.executemany(_VEC_INSERT, [(r.id, r.user_id, int(r.invalid_at is None), b.tobytes())
                                           for r, b in zip(out, bits, strict=True)])  # fmt: skip
            self._partition_sizes.clear()
            by_user: dict[str, list[int]] = {}
            for i, r in enumerate(out):
                by_user.setdefault(r.user_id, []).append(i)
            for uid, idx in by_user.items():
                self._doclens.noted(uid, conn, [out[i].id for i in idx])
                self._count_change(conn, uid, len(idx), sum(out[i].invalid_at is None for i in idx))
                self._bump(conn, uid, lambda part, idx=idx: part.append(
                    [out[i].id for i in idx], mat[idx],
                    [out[i].invalid_at is None for i in idx]))
            self._kept_across(conn, before)  # new rows: every kept record is as it was
        return out

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Many `add_records` at once (an import, a benchmark's store): on leaving the outermost block
        the full-text index is merged into one segment (FTS5 'optimize': ~0.13 s at 100k records),
        so every term lookup probes one segment instead of the ~20 that batch inserts leave. Nothing
        else changes: writes inside are ordinary writes, committed as they go; nested blocks join."""
        with self._lock:
            self._bulk_depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._bulk_depth -= 1
                outer = self._bulk_depth == 0
        if outer:  # not after an error: what landed is searchable as it is
            with self._temp_on_disk(), self._write() as conn:  # the merge rewrites the whole index
                conn.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")

    def get_records(self, user_id: str, ids: Sequence[int]) -> list[MemoryRecord]:
        """The user's records of `ids`, in id order. The records read are kept while `record_writes`
        is unchanged (see `_newest_tagged_cached`), and only the others read."""
        with self._read() as conn:
            n = self._record_writes(conn)
            if n is None:
                return self._get_records(conn, user_id, ids)
            have = self._kept_records(conn, n, user_id, ids)
            return [have[i] for i in sorted(have)]

    def _kept_records(self, conn: Any, n: int, user_id: str, ids: Sequence[int]) -> dict[int, MemoryRecord]:
        """The user's records of `ids` by id (absent: not the user's), those kept at `record_writes`
        `n` from memory and the others read (and kept)."""
        if self._by_id_at != n:
            self._by_id.clear()
            self._by_id_at = n
        kept, todo = self._by_id, []
        have: dict[int, MemoryRecord] = {}
        for i in ids:
            rid = int(i)
            r = kept.get((user_id, rid))
            if r is None:
                todo.append(rid)
            else:
                have[rid] = r
        if todo:
            got = self._get_records(conn, user_id, todo)
            if len(kept) + len(got) > 1 << 16:
                kept.clear()
            for r in got:
                have[r.id] = r
                kept[(user_id, r.id)] = r
        return have

    def _get_records(self, conn: Any, user_id: str, ids: Sequence[int]) -> list[MemoryRecord]:
        rows = conn.execute(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE +user_id = ? "
            "AND id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (user_id, ids_json(ids)),
        )
        return [record_from_row(r) for r in rows]

    @staticmethod
    def _record_writes(conn: Any) -> int | None:
        row = conn.execute("SELECT n FROM record_writes").fetchone()
        return None if row is None else int(row[0])

    def records(
        self,
        user_id: str,
        *,
        include_invalid: bool = False,
        memory_type: str | None = None,
        tags_any: Sequence[str] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        after_id: int | None = None,
        time_between: tuple[datetime | None, datetime | None] | None = None,
    ) -> list[MemoryRecord]:
        # records_user (user_id, id) serves history reads, records_user_valid (user_id, valid, id) current ones,
        # record_tags (user_id, tag, valid, id) tagged ones
        if tags_any is not None:
            tags = list(dict.fromkeys(str(t) for t in tags_any))
            if not tags:
                return []
            plain = memory_type is None and time_between is None and after_id is None
            if plain and limit is not None and not include_invalid:
                return self._newest_tagged_cached(user_id, tags, int(limit), newest_first)
        sql = "FROM records WHERE user_id = ?"  # the select list is chosen below
        args: list[Any] = [user_id]
        if not include_invalid:
            sql += " AND valid = 1"
        if after_id is not None:
            sql += " AND id > ?"
            args.append(int(after_id))
        if memory_type is not None:
            sql += " AND memory_type = ?"
            args.append(memory_type)
        if time_between is not None:
            lo, hi = time_between
            sql += " AND start_ts IS NOT NULL"
            if lo is not None:
                sql += " AND end_ts >= ?"
                args.append(ensure_aware(lo, what="time_between start").timestamp())
            if hi is not None:
                sql += " AND start_ts <= ?"
                args.append(ensure_aware(hi, what="time_between end").timestamp())
        if tags_any is not None:
            sql += (" AND id IN (SELECT id FROM record_tags WHERE user_id = ?1b AND tag IN (SELECT value FROM json_each(?))"
                    + ("" if include_invalid else " AND valid = 1") + ")")
            sql = sql.replace("?1b", "?")
            args.extend([user_id, to_json(tags)])
        sql += " ORDER BY id DESC" if newest_first else " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self._read() as conn:
            n = self._record_writes(conn) if limit is not None and limit <= KEPT_READ_MAX else None
            if n is None:
                return [record_from_row(r) for r in conn.execute(f"SELECT {RECORD_COLUMNS} {sql}", args)]
            # a bounded read on the turn path (a question's time window: up to 200 records) asks only
            # for the ids and takes the records kept in memory, reading just the others
            ids = [r[0] for r in conn.execute(f"SELECT id {sql}", args)]
            have = self._kept_records(conn, n, user_id, ids)
            # a record read after the ids (another process may have superseded it meanwhile) stays out
            return [r for i in ids if (r := have.get(i)) is not None and (include_invalid or r.is_current)]

    def _newest_tagged_cached(self, user_id: str, tags: list[str], limit: int, newest_first: bool
                              ) -> list[MemoryRecord]:
        """`_newest_tagged`, kept while `record_writes` (bumped by a trigger on every insert, update
        and delete of records, by any connection or process) is unchanged: every retrieve reads the
        same floor, safety and pinned records. The counter is read first and the rows after it, so a
        kept answer is never older than its counter. Inside a transaction the counter counts the
        transaction's own writes too; a rollback takes it back, so every rollback drops what was
        kept (`SQLiteStore._drop_caches`): a later write reaching the same count cannot meet
        records that never landed."""
        with self._read() as conn:
            n = self._record_writes(conn)
            key = (user_id, tuple(tags), limit, newest_first)
            hit = self._tagged_cache.get(key)
            if hit is not None and n is not None and hit[0] == n:
                return list(hit[1])
            got = self._newest_tagged(user_id, tags, limit, newest_first)
            if n is not None:
                if len(self._tagged_cache) >= 1024:
                    self._tagged_cache.clear()
                self._tagged_cache[key] = (n, tuple(got))
            return got

    def _newest_tagged(self, user_id: str, tags: list[str], limit: int, newest_first: bool) -> list[MemoryRecord]:
        """The first `limit` current records (by id, either way) carrying any of the tags: each tag's
        first `limit` are an index range of record_tags, and the answer lies within their union."""
        order = "DESC" if newest_first else "ASC"
        per_tag = " UNION ".join(
            f"SELECT id FROM (SELECT id FROM record_tags WHERE user_id = ? AND tag = ? AND valid = 1 "
            f"ORDER BY id {order} LIMIT ?)" for _ in tags)
        args: list[Any] = []
        for t in tags:
            args.extend([user_id, t, limit])
        sql = (f"SELECT {RECORD_COLUMNS} FROM records WHERE id IN ({per_tag}) AND +user_id = ? AND valid = 1 "
               f"ORDER BY id {order} LIMIT ?")
        with self._read() as conn:
            return [record_from_row(r) for r in conn.execute(sql, [*args, user_id, limit])]

    def count_records(self, user_id: str | None = None, *, include_invalid: bool = True) -> int:
        column = "total" if include_invalid else "current"
        sql, args = f"SELECT coalesce(sum({column}), 0) FROM record_counts", ()
        if user_id is not None:
            sql, args = sql + " WHERE user_id = ?", (user_id,)
        with self._read() as conn:
            return int(conn.execute(sql, args).fetchone()[0])

    @staticmethod
    def _require_record(conn: Any, user_id: str, rid: Any, action: str) -> tuple:
        row = conn.execute("SELECT id, valid FROM records WHERE id = ? AND user_id = ?", (rid, user_id)).fetchone()
        if row is None:
            raise MemlabUsageError(
                f"cannot {action}: record {rid!r} of user {user_id!r} does not exist; add it with add_records first"
            )
        return row

    def update_record(self, record: MemoryRecord, vector: Sequence[float] | None = None) -> MemoryRecord:
        arr = None if vector is None else self._vector(vector, "update_record vector")
        with self._write() as conn:
            before = self._record_writes(conn)
            found = conn.execute(f"SELECT valid, {RECORD_COLUMNS} FROM records WHERE id = ? AND user_id = ?",
                                 (record.id, record.user_id)).fetchone()
            if found is None:
                self._require_record(conn, record.user_id, record.id, "update a record")  # raises, saying why
            valid, old = found[0], found[1:]
            body = fts_body(record)
            self._postings.written([(record.id, fts_body(record_from_row(old)), body)])  # the terms it loses and gains
            sets = ", ".join(f"{c.strip()} = ?" for c in MUTABLE_COLUMNS.split(","))
            conn.execute(f"UPDATE records SET {sets} WHERE id = ? AND user_id = ?",
                         [*mutable_values(record), record.id, record.user_id])  # fmt: skip
            conn.execute("UPDATE records_fts SET body = ? WHERE rowid = ?", (body, record.id))
            self._doclens.noted(record.user_id, conn, [record.id])
            if arr is not None:
                # vec0 0.1.9 cannot UPDATE a bit[] column; replace the row inside this transaction
                conn.execute("DELETE FROM records_vec WHERE rowid = ?", (record.id,))
                self._insert_vec(conn, record.id, record.user_id, bool(valid), arr)
                self._bump(conn, record.user_id, lambda part: part.set_vector(record.id, arr))
            row = conn.execute(f"SELECT {RECORD_COLUMNS} FROM records WHERE id = ?", (record.id,)).fetchone()
            updated = record_from_row(row)
            self._kept_across(conn, before, {(record.user_id, record.id): updated})
            return updated

    def reinforce(self, user_id: str, ids: Sequence[int], at: datetime) -> None:
        ensure_aware(at, what="reinforce time")
        with self._write() as conn:
            before = self._record_writes(conn)
            conn.execute(
                "UPDATE records SET strengthen_count = strengthen_count + 1, last_reinforced_at = ? "
                "WHERE +user_id = ? AND id IN (SELECT value FROM json_each(?))",
                (at.isoformat(), user_id, ids_json(ids)),
            )
            after = self._record_writes(conn)
            when = datetime.fromisoformat(at.isoformat())  # as a read of the row gives it back
            mine = {int(i) for i in ids}

            def patched(r: MemoryRecord) -> MemoryRecord:
                return _changed(r, strengthen_count=r.strengthen_count + 1, last_reinforced_at=when)

            self._kept_across(conn, before, self._kept_changed(user_id, mine, patched), after=after)
            # the floor's tagged reads too: a reinforcement changes no record's tags or validity
            if before is not None and after is not None:
                for key, (n, got) in list(self._tagged_cache.items()):
                    if n == before:  # another user's kept records are as they were
                        self._tagged_cache[key] = (after, tuple(patched(r) if r.id in mine else r for r in got)
                                                   if key[0] == user_id else got)

    def _kept_changed(self, user_id: str, ids: Iterable[int],
                      change: Callable[[MemoryRecord], MemoryRecord]) -> dict[tuple[str, int], MemoryRecord]:
        """The kept records of `ids`, as `change` makes them (what a write of known values did to them)."""
        return {key: change(r) for key in ((user_id, int(i)) for i in ids)
                if (r := self._by_id.get(key)) is not None}

    def _kept_across(self, conn: Any, before: int | None,
                     changed: Mapping[tuple[str, int], MemoryRecord] | None = None, *,
                     after: int | None = None) -> None:
        """Carry the records `get_records` keeps across this connection's own write of record rows:
        when nothing else wrote since they were read (their counter is `before`), the write's
        `changed` rows (as a read gives them back) replace the kept ones and the rest stay (an
        insert changes no kept row); `after`: the counter after the write, read here when not
        given. The tagged reads are read again unless the writer patches them (a new or superseded
        record changes which are newest). A rollback drops everything kept, as for any write."""
        if before is None or self._by_id_at != before:
            return
        after = self._record_writes(conn) if after is None else after
        if after is None:
            return
        for key, rec in (changed or {}).items():
            if key in self._by_id:
                self._by_id[key] = rec
        self._by_id_at = after

    def supersede(self, user_id: str, old_id: int, new_id: int, at: datetime) -> None:
        ensure_aware(at, what="supersede time")
        with self._write() as conn:
            before = self._record_writes(conn)
            _, was_valid = self._require_record(conn, user_id, old_id, "supersede a record")
            self._require_record(conn, user_id, new_id, "supersede with a record")
            conn.execute(
                "UPDATE records SET invalid_at = ?, superseded_by = ?, valid = 0 WHERE id = ? AND user_id = ?",
                (at.isoformat(), int(new_id), int(old_id), user_id),
            )
            conn.execute("UPDATE records_vec SET valid = 0 WHERE rowid = ?", (int(old_id),))
            if was_valid:
                self._count_change(conn, user_id, 0, -1)
            self._bump(conn, user_id, lambda part: part.set_valid(int(old_id), False))
            when = datetime.fromisoformat(at.isoformat())  # as a read of the row gives it back
            self._kept_across(conn, before, self._kept_changed(
                user_id, [old_id], lambda r: _changed(r, invalid_at=when, superseded_by=int(new_id))))

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        with self._read() as conn:
            part = self._vector_partition(conn, user_id, build=False)
            if part is not None:  # the partition is in memory and current: no need to read the blobs
                return {rid: vec.astype(float).tolist() for rid, vec in sorted(part.vectors(ids).items())}
            for rid, blob in self._blobs(conn, user_id, ids):
                out[rid] = np.frombuffer(blob, dtype=np.float32).astype(float).tolist()
        return out

    @staticmethod
    def _blobs(conn: Any, user_id: str, ids: Sequence[int]) -> list[tuple[int, bytes]]:
        return conn.execute(
            "SELECT DISTINCT r.id, v.embedding FROM json_each(?) j CROSS JOIN records r ON r.id = j.value "
            "JOIN record_vectors v ON v.id = r.id WHERE r.user_id = ? ORDER BY r.id",
            (ids_json(ids), user_id),
        ).fetchall()

    def replace_vectors(self, user_id: str, vectors: Mapping[int, Sequence[float]]) -> None:
        arrays = {int(k): self._vector(v, f"vector of record {k}") for k, v in vectors.items()}
        with self._write() as conn:
            owned = dict(conn.execute(
                "SELECT id, valid FROM records WHERE +user_id = ? AND id IN (SELECT value FROM json_each(?)) ORDER BY id",
                (user_id, ids_json(list(arrays))),
            ).fetchall())  # fmt: skip
            missing = sorted(set(arrays) - set(owned))
            if missing:
                raise MemlabUsageError(
                    f"cannot replace vectors: records {missing} of user {user_id!r} do not exist; pass only the user's ids"
                )
            for rid, arr in arrays.items():
                conn.execute("DELETE FROM records_vec WHERE rowid = ?", (rid,))
                self._insert_vec(conn, rid, user_id, bool(owned[rid]), arr)
            self._bump(conn, user_id, lambda part: [part.set_vector(rid, arr) for rid, arr in arrays.items()])
