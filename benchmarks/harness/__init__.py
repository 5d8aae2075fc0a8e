"""The reliability harness: one module per property, outside the library.

- `common`: the config, facts and markers every harness shares.
- `concurrency`: concurrent writers on one SQLite file, concurrent CLI replays, the cross-user probe.
- `crash`: SIGKILL plans and the crash worker they kill.
- `faults`: fault injection, one function per fault family.
- `hostile`: hostile inputs, one function per input family.
- `clock`: scripted replays under a frozen and jumping wall clock (time only from the clock).
- `soak`: many turns over many users in one process, RSS and in-process structures sampled.
- `report`: `reliability_main`, the `--quick` / `--full` report and its JSON.

`engine/` never imports from here; the tests and `benchmarks/reliability.py` do.
"""
