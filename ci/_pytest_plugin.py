"""`pytest --plangate GATE.toml`: the gate's golden cases as pytest items.

    pytest --plangate ci/gate.toml                  # the gate alone
    pytest tests --plangate ci/gate.toml            # the given tests, then the gate
    pytest --plangate ci/gate.toml -k obs-008       # one session's items

The gate file is collected as a file whose children are the golden cases (dataset, session,
turn), named like `observability-core/obs-008/turn-0`, each holding one item per evaluator
(`...::task_completion`); after the cases comes one item per evaluator for its verdict
(`verdict[task_completion]`), because a gate can fail on the aggregate (a significant sign test,
a pass rate under `min_pass_rate`) when no single case says so.

The gate runs once, when the first gate item runs, and over all of the gate's cases whatever
`-k` selected: a case's seeds depend on its position among the gate's cases, so a subset would
replay other seeds and could show another outcome than the full gate does. A regressed case
(or one under its own minimum pass rate) fails with the evaluator's explanation, a flaky one is
skipped, the others pass (see `check_case`). pytest's exit status is therefore stricter than
the gate's: one regressed case fails the run, while the gate only fails on a significant
regression; the terminal summary gives the gate's own verdict. A gate that cannot run (a
model without its API key, say) fails every gate item with the reason.

pytest loads this module in every run of anyone who installs plangate, so importing it stays
cheap: the gate, pandas and pyarrow are imported only when `--plangate` is given.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from plangate.ci.gate import Case, CaseResult, GateFile, Side, Verdict


class ItemFailed(Exception):
    """A gate item's failure; pytest shows its message, without a traceback."""


@dataclasses.dataclass(slots=True, kw_only=True)
class GateRun:
    """The gate of one pytest session: its cases, read when pytest starts, and its verdict."""

    gate: GateFile
    cases: list[Case]
    """The gate's golden turns, in the gate's order."""
    report: Path | None = None
    """Where to write the gate's reports, if anywhere."""
    verdict: Verdict | None = None
    """Set once the gate has run."""
    error: str | None = None
    """Why the gate could not run, once it has tried."""
    reports: dict[str, Path] = dataclasses.field(default_factory=dict)

    def decide(self) -> Verdict:
        """The verdict, running the gate the first time it is asked for."""
        if self.verdict is None and self.error is None:
            self.verdict = self._run()
        if self.verdict is None:
            raise ItemFailed(f"the gate could not run: {self.error}")
        return self.verdict

    def _run(self) -> Verdict | None:
        import asyncio

        from plangate.ci.gate import run_gate, write_outputs
        from plangate.harness import PlangateError

        try:
            verdict = asyncio.run(run_gate(self.gate))
        except PlangateError as exc:
            self.error = str(exc)
            return None
        except Exception as exc:
            # A bug: its traceback shows on this item; the items after it only repeat the name.
            self.error = f"{exc!r} (traceback under the first gate item that ran)"
            raise
        if self.report is not None:
            self.reports = write_outputs(verdict, self.report)
        return verdict

    def result(self, case: Case, evaluator: str) -> CaseResult:
        """One case's result under one evaluator."""
        key = (*case, evaluator)
        for result in self.decide().cases:
            if (result.dataset, result.session_id, result.turn_index, result.evaluator) == key:
                return result
        raise ItemFailed(f"the verdict has no result for {case!r} under {evaluator!r}")


RUN = pytest.StashKey[GateRun]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add `--plangate`, `--plangate-repeats` and `--plangate-report`."""
    group = parser.getgroup("plangate", "plangate regression gate")
    group.addoption(
        "--plangate",
        metavar="GATE.toml",
        help="collect a plangate gate file's golden cases as test items; without test paths, "
        "only the gate runs",
    )
    group.addoption("--plangate-repeats", type=int, metavar="N", help="override gate.repeats")
    group.addoption(
        "--plangate-report",
        metavar="DIR",
        help="also write the gate's reports (verdict.json, summary.md, junit.xml, ...) to DIR",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Read the gate file and its cases, and put the gate file among the paths to collect."""
    option = config.getoption("plangate")
    if option is None:
        return
    run = load_run(config, option)
    config.stash[RUN] = run
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(str(run.gate.path))
    else:
        # No paths given: the default ones (testpaths, the current folder) give way to the gate.
        config.args[:] = [str(run.gate.path)]
        config.args_source = pytest.Config.ArgsSource.ARGS


def load_run(config: pytest.Config, option: str) -> GateRun:
    """The gate file and its cases; any problem is a usage error naming the file and the key."""
    from plangate.ci.gate import gate_cases, load_gate
    from plangate.harness import PlangateError

    repeats = config.getoption("plangate_repeats")
    if repeats is not None and repeats < 1:
        raise pytest.UsageError(f"--plangate-repeats must be 1 or more, not {repeats}")
    report = config.getoption("plangate_report")
    try:
        # Absolute as pytest makes its own paths (no symlinks resolved): the collected file's
        # path must equal it.
        gate = load_gate(os.path.abspath(config.invocation_params.dir / option))
        cases = gate_cases(gate)
    except PlangateError as exc:
        raise pytest.UsageError(f"--plangate: {exc}") from exc
    if repeats is not None:
        gate = dataclasses.replace(gate, repeats=repeats)
    return GateRun(
        gate=gate,
        cases=cases,
        report=None if report is None else config.invocation_params.dir / report,
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> GateCollector | None:
    """Collect the `--plangate` file; no other file."""
    run = parent.config.stash.get(RUN, None)
    if run is None or file_path != run.gate.path:
        return None
    return GateCollector.from_parent(parent, path=file_path)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Which gate, which sides, how many cases."""
    run = config.stash.get(RUN, None)
    if run is None:
        return None
    gate = run.gate
    return (
        f"plangate: {gate.path}: {len(run.cases)} cases, {gate.repeats} repeats per side; "
        f"baseline {_side(gate.baseline)}, candidate {_side(gate.candidate)}"
    )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """The gate's own verdict, as `plangate gate` prints it."""
    run = config.stash.get(RUN, None)
    if run is None or (run.verdict is None and run.error is None):
        return
    terminalreporter.section("plangate")
    if run.verdict is None:
        terminalreporter.write_line(f"plangate gate: could not run: {run.error}", red=True)
        return
    verdict = run.verdict
    terminalreporter.write_line(
        f"plangate gate: {verdict.word.upper()} ({run.gate.path.name}: all {len(run.cases)} "
        f"cases, {verdict.repeats} repeat{'s' * (verdict.repeats != 1)} per side)",
        green=verdict.passed,
        red=not verdict.passed,
    )
    if verdict.undecided is not None:
        terminalreporter.write_line(f"  no verdict: {verdict.undecided}", red=True)
    for v in verdict.evaluators:
        terminalreporter.write_line(f"  {'✗' if v.failed else '✓'} {v.evaluator}: {v.reason}")
    if run.reports:
        terminalreporter.write_line("reports: " + ", ".join(str(p) for p in run.reports.values()))


class GateCollector(pytest.File):
    """The gate file: its cases, then one verdict item per evaluator."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        """Cases in the gate's order, then the verdicts."""
        run = self.config.stash[RUN]
        for case in run.cases:
            dataset, session_id, turn_index = case
            name = f"{dataset}/{session_id}/turn-{turn_index}"
            yield CaseCollector.from_parent(self, name=name, case=case)
        for evaluator in run.gate.evaluators:
            yield VerdictItem.from_parent(self, name=f"verdict[{evaluator}]", evaluator=evaluator)


class CaseCollector(pytest.Collector):
    """One golden turn: one item per evaluator."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def collect(self) -> Iterator[pytest.Item]:
        """The gate's evaluators."""
        for evaluator in self.config.stash[RUN].gate.evaluators:
            yield CaseItem.from_parent(self, name=evaluator, case=self.case, evaluator=evaluator)


class GateItem(pytest.Item):
    """An item whose failure is a message, not a traceback."""

    def __init__(self, *, evaluator: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.evaluator = evaluator

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        """The message of an `ItemFailed`; anything else is a bug and keeps its traceback."""
        if isinstance(excinfo.value, ItemFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """The gate file and the item's id under it, as the failure's headline."""
        return self.path, None, self.nodeid.split("::", 1)[-1]


class CaseItem(GateItem):
    """One golden turn under one evaluator."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        """Fail a regression, skip a flaky case, pass the rest."""
        check_case(self.config.stash[RUN].result(self.case, self.evaluator))


class VerdictItem(GateItem):
    """One evaluator's verdict over all the gate's cases."""

    def runtest(self) -> None:
        """Fail when the evaluator fails the gate, with its reason; or when there is no verdict."""
        verdict = self.config.stash[RUN].decide()
        if verdict.undecided is not None:
            raise ItemFailed(f"the gate cannot decide: {verdict.undecided}")
        decision = next(v for v in verdict.evaluators if v.evaluator == self.evaluator)
        if decision.failed:
            raise ItemFailed(f"{self.evaluator} fails the gate: {decision.reason}")


def check_case(result: CaseResult) -> None:
    """Raise `ItemFailed` for a regressed case or one below its own minimum; skip a flaky one.

    A flaky case (outcomes differ across one side's repeats) is skipped, not failed: the gate
    does not fail on a flaky case alone. A case both sides fail on every repeat (`fail`) passes:
    the gate compares the candidate with the baseline, and an equal failure is no change; a low
    absolute pass rate is for the verdict item to flag, through `min_pass_rate`. Nor is it a
    warning: under `filterwarnings = error`, common in CI, a warning would fail an item the
    gate passes. `pass` and `improved` pass. A case the evaluator cannot judge on a side (`n/a`)
    is skipped with the reason; one whose every repeat on a side errored is an error.
    """
    outcomes = f"baseline {_marks(result.baseline)}"
    if result.noise:
        outcomes += f" + noise floor {_marks(result.noise)}"
    outcomes += f" → candidate {_marks(result.candidate)}"
    if result.status == "below_minimum":
        raise ItemFailed(
            f"below the case's minimum pass rate {result.min_pass_rate:.0%} ({outcomes}): "
            f"{result.explanation}"
        )
    if result.status == "regressed":
        raise ItemFailed(f"regressed ({outcomes}): {result.explanation}")
    if result.status == "flaky":
        pytest.skip(f"flaky ({outcomes}): {result.explanation}")
    if result.status == "n/a":
        pytest.skip(result.why_not_applicable)
    if result.status == "error":
        raise ItemFailed(f"not judged, the turn errored: {result.explanation}")


def _marks(outcomes: tuple[bool, ...]) -> str:
    return "".join("✓" if ok else "✗" for ok in outcomes)


def _side(side: Side) -> str:
    if side.variant is None:
        return f"stored scores {side.label}"
    return f"{side.variant} ({side.model}, {side.tools} tools)"
