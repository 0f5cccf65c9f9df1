"""Benchmark tooling: `generate` writes synthetic knowledge bases of any size (CSV folder or
`.grist`); `python -m bench` (`make bench`) measures sync, index, search and ask on them
(`runner` runs the phases, `measure` times them and tracks peak memory, `report` prints and saves)."""
