"""Running a session: the plan and the serial loop (session), disjoint core slots and parallel runs (slots,
parallel), and a Dask cluster (cluster). It drives backends and the store, then summarises and traces."""
