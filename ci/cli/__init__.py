"""The `plangate` command line: argument parsing and printing only, calling the library.

- `_main`: the parser and the table of handlers (each loaded when its command runs);
- `_arguments`: every command's arguments, one spelling for the same thing everywhere;
- one module per command group: `_run` (run, variants, domains, models), `_runs` (runs, plan,
  resume), `_dataset` (record, dataset, replay) with `_build` (dataset build), `_eval` (import,
  eval), `_gate` (gate, compare), `_server` (phoenix up, down, status: nothing heavy), `_phoenix`
  (the other phoenix commands), `_demo`;
- `_exporting`: the Phoenix export a command asks for, reported on stderr, and the Phoenix
  server and project a command talks to; `_printing`: what several commands print.

Nothing outside this package imports it; it may import any of plangate.
"""

from plangate.ci.cli._main import main

__all__ = ["main"]
