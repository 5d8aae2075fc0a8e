"""The reference side of `memlab bench perf --against reference`, run in the reference's own interpreter.

This file is executed as a script by the reference package's virtualenv (build/reference-venv),
so it imports nothing from memlab: only the standard library, langchain-core and the reference
package (`memory_middleware`, or the module named by `--module`). It speaks JSON lines: one
request per line on stdin, one answer per line on stdout (everything else the reference prints
goes to stderr). Requests:

- `{"op": "hello"}` -> the module, its version and the SQLite driver it runs on;
- `{"op": "build", "meta": PATH, "vectors": PATH, "dim": D, "db": PATH, "batch": B}` -> the
  store built: `meta` holds one JSON object per record (user, text, age_s, type, theme,
  strengthen_num, id), `vectors` the same records' float32 vectors, row-major;
- `{"op": "retrieve", "user": U, "text": T, "vector": [...]}` -> one per-event retrieval of the
  reference, timed here with `time.perf_counter` (IPC is not in `seconds`): the middleware's
  `_extract_fragments_by_time` (candidate search `FragmentsMemoryRAG.query_context_distance`
  with `MemoryConfig.retrieve_k`, S(m) scoring of every candidate, top-k selection) with the
  current theme set to the query text; `candidates` = how many of the user's records it scored;
- `{"op": "close"}` -> closes the store and exits.

Embeddings: the reference embeds through an injected langchain `Embeddings`; the one injected
here returns the vectors memlab's side stored (for documents) and memlab's hash embedding of the
query sent with the request (for the query), so both sides search the same vectors.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import importlib
import json
import os
import sys
import time
import traceback

_OUT = sys.stdout  # the protocol stream; main() points sys.stdout at stderr (importing this module changes nothing)


def _sqlite_with_extensions() -> str:
    """Make `import sqlite3` load extensions (sqlite-vec needs it): the stdlib one if it can, else
    sqlean.py or pysqlite3 put in its place before the reference imports it."""
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return "sqlite3"
    for name in ("sqlean", "pysqlite3.dbapi2"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod.Connection, "enable_load_extension"):
            sys.modules["sqlite3"] = mod
            return name
    return "sqlite3 (no extension loading)"


def _send(obj: dict) -> None:
    _OUT.write(json.dumps(obj) + "\n")
    _OUT.flush()


class _ParamsLLM:
    """The middleware asks an LLM for the formula's weights once per (user, theme); answered at
    once with the reference's own defaults (TimeMemoryFormulaParam()), so no model is timed."""

    def __init__(self, params_cls):
        self._cls = params_cls

    async def ainvoke(self, messages):
        return self._cls()


def _planned_embeddings(dim: int):
    from langchain_core.embeddings import Embeddings

    class PlannedEmbeddings(Embeddings):
        """Returns the vectors it is handed: `docs` for the next embed_documents, `query` for its text."""

        def __init__(self):
            self.dim = dim
            self.docs: list[list[float]] | None = None
            self.query: tuple[str, list[float]] | None = None

        def embed_documents(self, texts):
            vecs, self.docs = self.docs, None
            if vecs is None or len(vecs) != len(texts):
                raise RuntimeError(f"no planned vectors for {len(texts)} documents")
            return vecs

        def embed_query(self, text):
            if self.query is not None and self.query[0] == text:
                return self.query[1]
            if self.query is None:  # the store's dimensionality probe at table creation
                return [1.0] + [0.0] * (self.dim - 1)
            raise RuntimeError("query text does not match the planned query vector")

    return PlannedEmbeddings()


class Worker:
    def __init__(self, module: str):
        self.driver = _sqlite_with_extensions()
        self.mod = importlib.import_module(module)
        self.loop = asyncio.new_event_loop()
        self.mw = None
        self.emb = None

    def hello(self, req: dict) -> dict:
        return {"module": self.mod.__name__, "version": getattr(self.mod, "__version__", None),
                "sqlite_driver": self.driver, "python": sys.version.split()[0]}

    def build(self, req: dict) -> dict:
        from langchain_core.documents import Document

        dim, batch = int(req["dim"]), int(req.get("batch", 500))
        self.emb = _planned_embeddings(dim)
        config = self.mod.MemoryConfig(rag_db_path=req["db"], embeddings=self.emb)
        self.mw = self.mod.BalancedMultiDimensionMemory(config, summary_llm=_ParamsLLM(self.mod.TimeMemoryFormulaParam))
        rag = self.mw.memory_fragments_rag
        now = time.time()
        n, seconds, row_bytes = 0, 0.0, 4 * dim
        with open(req["meta"], encoding="utf-8") as meta, open(req["vectors"], "rb") as vecs:
            while True:
                lines = [line for _, line in zip(range(batch), meta)]
                if not lines:
                    break
                flat = array.array("f")
                flat.frombytes(vecs.read(row_bytes * len(lines)))
                docs, planned = [], []
                for i, line in enumerate(lines):
                    rec = json.loads(line)
                    docs.append(Document(page_content=rec["text"], metadata={
                        "theme": rec.get("theme", ""), "type": list(rec.get("type", ["fact"])),
                        "time": now - float(rec.get("age_s", 0.0)), "strengthen_num": int(rec.get("strengthen_num", 0)),
                        "user_id": rec["user"], "id": int(rec["id"])}))
                    planned.append(flat[i * dim:(i + 1) * dim].tolist())
                self.emb.docs = planned
                t0 = time.perf_counter()
                self.loop.run_until_complete(rag.add(docs))
                seconds += time.perf_counter() - t0
                n += len(docs)
        # retrieve_k None = SQLiteVecStore's own cap (k=4096 nearest of the whole table)
        return {"records": n, "ingest_seconds": seconds, "retrieve_k": getattr(config, "retrieve_k", None)}

    def retrieve(self, req: dict) -> dict:
        if self.mw is None:
            raise RuntimeError("build before retrieve")
        user, text = req["user"], req["text"]
        self.emb.query = (text, [float(x) for x in req["vector"]])
        self.mw.memory_spliter.dialogue_theme_by_user[user] = text
        t0 = time.perf_counter()
        picked = self.loop.run_until_complete(self.mw._extract_fragments_by_time(user))
        seconds = time.perf_counter() - t0
        # every event that returns fragments logs all the candidates it scored (bounded list, last = this one)
        scored = self.mw._scoring_log[-1]["candidates"] if picked else []
        return {"seconds": seconds, "candidates": len(scored),
                "picked": [(d.metadata or {}).get("id") for d, _ in (picked or [])]}

    def close(self, req: dict) -> dict:
        rag = getattr(self.mw, "memory_fragments_rag", None)
        store = getattr(rag, "vector_store", None)
        if store is not None and hasattr(store, "close"):
            store.close()
        return {}


def main(argv: list[str] | None = None) -> int:
    global _OUT
    _OUT, sys.stdout = sys.stdout, sys.stderr  # the reference's prints and logs must not reach the protocol stream
    p = argparse.ArgumentParser(description="memlab bench perf --against reference: the reference's side")
    p.add_argument("--module", default="memory_middleware")
    args = p.parse_args(argv)
    try:
        worker = Worker(args.module)
    except Exception as exc:  # the parent reads this and says what is missing
        _send({"ok": False, "error": f"cannot import {args.module}: {exc!r}"})
        return 1
    _send({"ok": True, "ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req.get("op")
            handler = {"hello": worker.hello, "build": worker.build, "retrieve": worker.retrieve,
                       "close": worker.close}.get(op)
            if handler is None:
                raise ValueError(f"unknown op {op!r}")
            _send({"ok": True, **handler(req)})
            if op == "close":
                return 0
        except Exception as exc:
            _send({"ok": False, "error": repr(exc), "trace": traceback.format_exc()})
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
