"""docker-compose.yml, Dockerfile and deploy/ agree with each other and with the code.

No Docker engine here: the files are parsed and cross-checked (services, pinned images, settings
names, CLI commands, the nginx upstream, ports, volumes, dependencies), the shell scripts are run
against a stand-in ``temporal`` command, and the image's healthcheck against a real HTTP server.
Each checker is a small function that returns what is wrong; next to the check of the real files,
a test feeds it a bad example, so no check can pass by construction. The section "REVIEW.md
section 5" checks the fix of each deployment finding of that review.
"""

from __future__ import annotations

import ast
import base64
import fnmatch
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from longtools._settings import Settings
from longtools.cli._commands import cli
from longtools.cli._launch import HTTP_KEEP_ALIVE_S, HTTP_SHUTDOWN_S
from longtools.server._app import create_app

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
NGINX_CONF = ROOT / "deploy" / "nginx.conf"
ENV_EXAMPLE = ROOT / "deploy" / ".env.example"
OPERATIONS = ROOT / "docs" / "operations.md"
HEALTHCHECK = ROOT / "deploy" / "healthcheck.py"
NAMESPACE_SCRIPT = ROOT / "deploy" / "temporal-namespace.sh"

SETTING_NAMES = frozenset(f"LONGTOOLS_{name.upper()}" for name in Settings.model_fields)
_LONGTOOLS_NAME = re.compile(r"\bLONGTOOLS_[A-Z0-9_]+")
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


# --- reading the files ------------------------------------------------------------------------


@cache
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def services() -> dict[str, dict[str, Any]]:
    found = compose()["services"]
    assert isinstance(found, dict)
    return found


def env_of(service: dict[str, Any]) -> dict[str, str | None]:
    """A service's `environment`, in either of compose's two forms (None: passed through if set)."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        pairs = (item.split("=", 1) if "=" in item else [item, None] for item in raw)
        return {key: value for key, value in pairs}
    return {key: None if value is None else str(value) for key, value in raw.items()}


def command_of(service: dict[str, Any]) -> list[str]:
    raw = service.get("command") or []
    return shlex.split(raw) if isinstance(raw, str) else [str(part) for part in raw]


def replicas(service: dict[str, Any]) -> int:
    return int((service.get("deploy") or {}).get("replicas", 1))


def longtools_services(subcommand: str) -> dict[str, dict[str, Any]]:
    """Services built from this repository that run `longtools <subcommand>`."""
    return {
        name: service
        for name, service in services().items()
        if "build" in service and command_of(service)[:1] == [subcommand]
    }


def services_with_image(prefix: str) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in services().items() if str(s.get("image", "")).startswith(prefix)}


def with_defaults(value: str) -> str:
    """Compose interpolation as if nothing were set: `${X:-d}` -> d, `${X}` / `${X:?e}` -> <X>."""

    def replace(match: re.Match[str]) -> str:
        name, operator, argument = match.groups()
        return argument if operator in (":-", "-") else f"<{name}>"

    return _INTERPOLATION.sub(replace, value)


@cache
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    instructions = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def dockerfile_args(instruction: str) -> list[str]:
    return [args for keyword, args in dockerfile() if keyword == instruction]


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for args in dockerfile_args("ENV"):
        for token in shlex.split(args):
            key, _, value = token.partition("=")
            env[key] = value
    return env


def exec_form(args: str) -> list[str]:
    parsed = yaml.safe_load(args)  # a JSON array is YAML too
    assert isinstance(parsed, list), f"not exec form (a JSON array): {args}"
    return [str(part) for part in parsed]


def cli_commands() -> set[str]:
    names = set()
    for info in cli.registered_commands:
        assert info.callback is not None
        names.add(info.name or info.callback.__name__.replace("_", "-"))
    return names


# --- the checkers, each tested on a bad example below --------------------------------------

_VERSION_TAG = re.compile(r"^v?\d+\.\d+(\.\d+)*([-.][A-Za-z0-9][A-Za-z0-9.]*)*$")
# Images whose releases are numbered major.minor: `postgres:16.15` names one release.
_TWO_PART_VERSIONS = ("postgres",)


def image_pin_problem(reference: str) -> str | None:
    """Why an image reference is not pinned to one release, or None if it is."""
    if "@sha256:" in reference:
        return None
    name, _, tag = reference.rpartition(":") if ":" in reference.split("/")[-1] else (reference, "", "")
    if not tag:
        return f"{reference}: no tag (means latest)"
    if "$" in tag:
        return f"{reference}: the tag is a variable"
    if not _VERSION_TAG.match(tag):
        return f"{reference}: {tag!r} is not a version"
    numbers = re.match(r"v?([\d.]+)", tag)
    assert numbers is not None
    parts = len(numbers.group(1).rstrip(".").split("."))
    if parts < (2 if name.split("/")[-1] in _TWO_PART_VERSIONS else 3):
        return f"{reference}: {tag!r} is a moving tag, not one release"
    return None


def unknown_settings(text: str) -> set[str]:
    return set(_LONGTOOLS_NAME.findall(text)) - SETTING_NAMES


def published_host_ip(port: str | dict[str, Any]) -> str | None:
    """The host address a `ports:` entry binds to (None: every interface)."""
    if isinstance(port, dict):
        return port.get("host_ip")
    parts = with_defaults(str(port)).split(":")
    return parts[0] if len(parts) == 3 else None


def published_container_port(port: str | dict[str, Any]) -> int:
    if isinstance(port, dict):
        return int(port["target"])
    return int(with_defaults(str(port)).split(":")[-1].split("/")[0])


def nginx_upstreams(conf: str) -> dict[str, list[tuple[str, int]]]:
    """{upstream name: [(host, port), ...]} from an nginx configuration."""
    conf = re.sub(r"#[^\n]*", "", conf)
    upstreams = {}
    for match in re.finditer(r"upstream\s+(\S+)\s*\{([^}]*)\}", conf):
        servers = re.findall(r"(?:^|[;{])\s*server\s+([^\s:;]+):(\d+)", match.group(2), re.MULTILINE)
        upstreams[match.group(1)] = [(host, int(port)) for host, port in servers]
    return upstreams


def nginx_directives(conf: str, name: str) -> list[str]:
    conf = re.sub(r"#[^\n]*", "", conf)
    return [value.strip() for value in re.findall(rf"(?:^|[;{{\s]){name}\s+([^;]+);", conf)]


def seconds(value: str) -> float:
    """An nginx time (`60s`, `75`) or a compose duration (`40s`, `1m30s`) in seconds."""
    parts = re.findall(r"(\d+)(ms|s|m|h)?", value)
    assert parts and "".join(n + u for n, u in parts) == value, value
    return sum(int(n) * {"ms": 0.001, "s": 1, "": 1, "m": 60, "h": 3600}[u] for n, u in parts)


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves `path` (or a parent of it) out of the build context."""
    ignored = False
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        candidates = [pattern, pattern.removeprefix("**/")]
        if any(fnmatch.fnmatchcase(prefix, p) for prefix in prefixes for p in candidates):
            ignored = not negate
    return ignored


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _load_runtime_lock() -> ModuleType:
    spec = importlib.util.spec_from_file_location("runtime_lock", ROOT / "deploy" / "runtime_lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runtime_lock_names(lock: str, pyproject: str) -> set[str]:
    module = _load_runtime_lock()
    text = module.runtime_lock(lock, pyproject)
    assert isinstance(text, str)
    return {module.canonical(line.split("==")[0]) for line in text.splitlines() if "==" in line[:80]}


FIRST_PARTY = ("longtools",)


def imported_distributions(sources: list[Path]) -> dict[str, set[str]]:
    """{distribution: {files importing it}} for what `sources` import when they are imported.

    Module-level imports only (also inside a top-level ``if`` or ``try``): an import inside a
    function is an optional feature's and runs only when used, and one under
    ``if TYPE_CHECKING:`` never runs. A module no installed distribution provides is reported as
    ``?<module>``.
    """
    providers = packages_distributions()
    found: dict[str, set[str]] = {}

    def owner(candidates: list[str]) -> list[str]:
        """The distribution(s) providing the first candidate module found (namespace packages
        such as `opentelemetry` are split over several distributions)."""
        top = candidates[0].split(".")[0]
        dists = providers.get(top, [f"?{top}"])
        if len(dists) == 1:
            return dists
        for module in candidates:
            stem = module.replace(".", "/")
            owners = [
                dist
                for dist in dists
                if any(
                    str(f) == f"{stem}.py" or str(f).startswith(f"{stem}/")
                    for f in distribution(dist).files or []
                )
            ]
            if owners:
                return owners
        return dists

    def visit(statements: list[ast.stmt], path: Path) -> None:
        for node in statements:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body, path)
                visit(node.orelse, path)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    visit(block, path)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    record([alias.name], path)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    record([f"{node.module}.{alias.name}", node.module], path)

    def record(candidates: list[str], path: Path) -> None:
        top = candidates[0].split(".")[0]
        if top in sys.stdlib_module_names or top in (*FIRST_PARTY, "__future__"):
            return
        for dist in owner(candidates):
            found.setdefault(re.sub(r"[-_.]+", "-", dist).lower(), set()).add(path.name)

    for path in sources:
        visit(ast.parse(path.read_text()).body, path)
    return found


def installed_closure(root: str) -> set[str]:
    """The distributions `root` needs here (markers evaluated, extras followed), from their metadata."""
    seen: set[tuple[str, frozenset[str]]] = set()

    def walk(name: str, extras: frozenset[str]) -> Iterator[str]:
        if (name, extras) in seen:
            return
        seen.add((name, extras))
        yield re.sub(r"[-_.]+", "-", name).lower()
        for text in distribution(name).requires or []:
            requirement = Requirement(text)
            envs = [{"extra": extra} for extra in (extras or {""})]
            if requirement.marker is None or any(requirement.marker.evaluate(env) for env in envs):
                yield from walk(requirement.name, frozenset(requirement.extras))

    return set(walk(root, frozenset()))


# --- docker-compose.yml ---------------------------------------------------------------------


def test_every_part_is_there_with_two_api_replicas_and_two_workers() -> None:
    assert services_with_image("postgres:"), "no PostgreSQL"
    assert services_with_image("temporalio/server:"), "no Temporal server"
    assert services_with_image("temporalio/ui:"), "no Temporal UI"
    assert services_with_image("nginx:"), "no load balancer"
    api = longtools_services("api")
    workers = longtools_services("worker")
    assert sum(replicas(s) for s in api.values()) >= 2, f"fewer than 2 API replicas: {api}"
    assert sum(replicas(s) for s in workers.values()) >= 2, f"fewer than 2 workers: {workers}"


def test_replicas_are_counted_from_deploy_or_from_services() -> None:
    assert replicas({"deploy": {"replicas": 3}}) == 3
    assert replicas({}) == 1


def test_every_image_is_pinned_to_one_release() -> None:
    references = [str(s["image"]) for s in services().values() if "image" in s]
    references += [args.split()[0] for args in dockerfile_args("FROM")]
    assert references
    assert [problem for ref in references if (problem := image_pin_problem(ref))] == []


@pytest.mark.parametrize(
    "reference",
    ["nginx", "nginx:latest", "postgres:16", "nginx:1.30-alpine", "temporalio/ui:${UI_VERSION}", "python:3"],
)
def test_a_floating_image_tag_is_refused(reference: str) -> None:
    assert image_pin_problem(reference) is not None


@pytest.mark.parametrize(
    "reference",
    ["postgres:16.15-bookworm", "temporalio/server:1.30.6", "nginx:1.30.4-alpine", "python:3.11.16-slim"],
)
def test_an_exact_image_tag_is_accepted(reference: str) -> None:
    assert image_pin_problem(reference) is None


def test_every_build_context_has_its_dockerfile() -> None:
    builds = [s["build"] for s in services().values() if "build" in s]
    assert builds
    for build in builds:
        context = build if isinstance(build, str) else build.get("context", ".")
        dockerfile_name = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        assert (ROOT / context / dockerfile_name).is_file(), build


def test_every_longtools_variable_named_anywhere_is_a_setting() -> None:
    for path in (COMPOSE, ENV_EXAMPLE, DOCKERFILE, OPERATIONS, NGINX_CONF):
        assert unknown_settings(path.read_text()) == set(), path.name
    named = {name for s in services().values() for name in env_of(s) if name.startswith("LONGTOOLS_")}
    assert named and named <= SETTING_NAMES


def test_an_unknown_longtools_variable_is_found() -> None:
    assert unknown_settings("LONGTOOLS_STATE_KEYS=x\nLONGTOOLS_STATE_KEY=y") == {"LONGTOOLS_STATE_KEY"}


def test_api_and_worker_commands_are_longtools_subcommands() -> None:
    commands = cli_commands()
    assert {"api", "worker"} <= commands
    assert "nonsense" not in commands
    for subcommand in ("api", "worker"):
        for name, service in longtools_services(subcommand).items():
            assert command_of(service)[0] in commands, name
    others = [
        s for s in services().values() if "build" in s and command_of(s)[:1] not in (["api"], ["worker"])
    ]
    assert others == [], "a service built here runs neither `longtools api` nor `longtools worker`"


def test_api_and_workers_share_temporal_and_the_data_volume() -> None:
    api, workers = longtools_services("api"), longtools_services("worker")
    temporal = next(iter(services_with_image("temporalio/server:")))
    shared = ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TASK_QUEUE", "DATA_DIR", "TOOLS", "EXAMPLES")
    expected = {
        f"LONGTOOLS_{key}": env_of(next(iter(api.values()))).get(f"LONGTOOLS_{key}") for key in shared
    }
    assert expected["LONGTOOLS_TEMPORAL_ADDRESS"] == f"{temporal}:7233"
    for name, service in {**api, **workers}.items():
        env = env_of(service)
        assert {key: env.get(key) for key in expected} == expected, name
        data_dir = env["LONGTOOLS_DATA_DIR"]
        mounts = [str(v).split(":") for v in service.get("volumes", [])]
        named = [m for m in mounts if len(m) >= 2 and m[1] == data_dir and not m[0].startswith((".", "/"))]
        assert len(named) == 1, f"{name} does not mount a named volume at {data_dir}"
        assert named[0][0] in (compose().get("volumes") or {}), named[0][0]
    volume_of = {
        str(v).split(":")[0] for s in {**api, **workers}.values() for v in s["volumes"] if ":/data" in str(v)
    }
    assert len(volume_of) == 1, f"API and workers mount different volumes: {volume_of}"
    assert dockerfile_env()["LONGTOOLS_DATA_DIR"] in " ".join(dockerfile_args("VOLUME"))


def test_the_namespace_registered_is_the_one_longtools_uses() -> None:
    api_namespace = env_of(next(iter(longtools_services("api").values())))["LONGTOOLS_TEMPORAL_NAMESPACE"]
    registered = [env_of(s)["NAMESPACE"] for s in services().values() if "NAMESPACE" in env_of(s)]
    assert registered == [api_namespace]


def required_from_env(value: str | None, name: str) -> bool:
    """Whether a compose value is `${NAME:?message}`: compose refuses to start while it is unset."""
    return re.fullmatch(rf"\$\{{{name}:\?[^}}]+\}}", value or "") is not None


def test_secrets_and_allowed_hosts_are_required_from_env() -> None:
    """`longtools api` refuses to start without either key ring, a worker without the payload
    ring; compose refuses sooner, naming the variable."""
    api_required = (
        "LONGTOOLS_STATE_KEYS",
        "LONGTOOLS_PAYLOAD_KEYS",
        "LONGTOOLS_ALLOWED_HOSTS",
        "LONGTOOLS_RESOURCE_URL",
    )
    for name, service in longtools_services("api").items():
        env = env_of(service)
        for key in api_required:
            assert required_from_env(env.get(key), key), (name, key)
        assert env["LONGTOOLS_HOST"] == "0.0.0.0"
    for name, service in longtools_services("worker").items():
        env = env_of(service)
        assert required_from_env(env.get("LONGTOOLS_PAYLOAD_KEYS"), "LONGTOOLS_PAYLOAD_KEYS"), name
        assert "LONGTOOLS_STATE_KEYS" not in env, f"{name} needs no requestState key"


def test_a_value_compose_does_not_require_is_found() -> None:
    assert required_from_env("${X:?set X}", "X")
    assert not required_from_env("${X:-}", "X")
    assert not required_from_env("${X}", "X")
    assert not required_from_env(None, "X")


def test_every_variable_compose_reads_is_documented_in_env_example() -> None:
    example = ENV_EXAMPLE.read_text()
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", example, re.MULTILINE))
    set_in_example = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", example, re.MULTILINE))
    text = COMPOSE.read_text()
    read = {match.group(1) for match in _INTERPOLATION.finditer(text)}
    required = {m.group(1) for m in _INTERPOLATION.finditer(text) if m.group(2) in (":?", "?")}
    passed = {name for s in services().values() for name, value in env_of(s).items() if value is None}
    assert read | passed <= documented, (read | passed) - documented
    assert required <= set_in_example, required - set_in_example


def test_only_the_load_balancer_and_the_ui_publish_ports_on_loopback() -> None:
    published = {name: s["ports"] for name, s in services().items() if s.get("ports")}
    lb = set(services_with_image("nginx:"))
    ui = set(services_with_image("temporalio/ui:"))
    assert set(published) == lb | ui
    for name, ports in published.items():
        for port in ports:
            assert published_host_ip(port) in ("127.0.0.1", "::1", "[::1]"), (name, port)


def test_a_port_published_on_every_interface_is_found() -> None:
    assert published_host_ip("8000:8000") is None
    assert published_host_ip("${BIND:-0.0.0.0}:8000:8000") == "0.0.0.0"
    assert published_host_ip("${BIND:-127.0.0.1}:${PORT:-80}:8000") == "127.0.0.1"
    assert published_container_port("${BIND:-127.0.0.1}:${PORT:-80}:8000/tcp") == 8000


def test_nginx_balances_over_the_api_services_on_their_port() -> None:
    conf = NGINX_CONF.read_text()
    upstreams = nginx_upstreams(conf)
    [passed_to] = nginx_directives(conf, "proxy_pass")
    upstream = passed_to.removeprefix("http://")
    assert upstream in upstreams, f"proxy_pass {passed_to} names no upstream"
    api = longtools_services("api")
    port = int(env_of(next(iter(api.values()))).get("LONGTOOLS_PORT") or dockerfile_env()["LONGTOOLS_PORT"])
    assert sorted(upstreams[upstream]) == sorted((name, port) for name in api)
    for name, service in api.items():
        assert str(port) in [str(p) for p in service.get("expose", [])], name
    assert str(port) in " ".join(dockerfile_args("EXPOSE"))
    [lb] = services_with_image("nginx:").values()
    listens = {int(value.split()[0].rsplit(":", 1)[-1]) for value in nginx_directives(conf, "listen")}
    assert {published_container_port(p) for p in lb["ports"]} <= listens
    assert any("nginx.conf" in str(v) for v in lb["volumes"])


def test_nginx_streams_and_waits_longer_than_a_held_round_without_stickiness() -> None:
    conf = NGINX_CONF.read_text()
    assert nginx_directives(conf, "proxy_buffering") == ["off"]
    mrtr_wait = Settings.model_fields["mrtr_wait_s"].default
    assert [seconds(v) for v in nginx_directives(conf, "proxy_read_timeout")] > [2 * mrtr_wait]
    for sticky in ("ip_hash", "hash", "sticky", "least_conn"):
        assert nginx_directives(conf + f"\n{sticky} x;", sticky)  # the finder finds it...
        assert not nginx_directives(conf, sticky), sticky  # ...and it is not there
    assert "$http_host" in nginx_directives(conf, "proxy_set_header Host")[0]
    assert re.search(r"location\s*=\s*/metrics\s*\{\s*(return 404|deny all);", conf), "/metrics is public"


def test_nginx_upstream_parser_reads_servers() -> None:
    conf = "upstream u { zone u 64k; server a:8000 resolve; # server c:1;\n server b:9000; }"
    assert nginx_upstreams(conf) == {"u": [("a", 8000), ("b", 9000)]}


def test_depends_on_names_existing_services_with_conditions_they_can_meet() -> None:
    healthy_by_image = {"build"}  # the Dockerfile's HEALTHCHECK
    assert dockerfile_args("HEALTHCHECK")
    for name, service in services().items():
        depends = service.get("depends_on") or {}
        items = (
            {d: {"condition": "service_started"} for d in depends} if isinstance(depends, list) else depends
        )
        for target, spec in items.items():
            assert target in services(), f"{name} depends on unknown {target}"
            condition = spec.get("condition", "service_started")
            assert condition in ("service_started", "service_healthy", "service_completed_successfully")
            if condition == "service_healthy":
                other = services()[target]
                check = other.get("healthcheck") or {}
                has_check = bool(check.get("test")) or bool(healthy_by_image & other.keys())
                assert has_check and not check.get("disable"), f"{name} waits for {target}, never healthy"


def test_api_and_workers_start_after_temporal_and_the_lb_after_the_api() -> None:
    def reaches(name: str, goal: str) -> bool:
        depends = services()[name].get("depends_on") or {}
        return goal in depends or any(reaches(d, goal) for d in depends)

    temporal = next(iter(services_with_image("temporalio/server:")))
    for name in {**longtools_services("api"), **longtools_services("worker")}:
        assert reaches(name, temporal), name
    [lb] = services_with_image("nginx:")
    assert all(reaches(lb, api) for api in longtools_services("api"))


def test_workers_turn_off_the_images_http_healthcheck() -> None:
    for name, service in longtools_services("worker").items():
        check = service.get("healthcheck") or {}
        assert check.get("disable") is True or check.get("test"), name


def test_every_bind_mount_exists() -> None:
    mounts = [str(v).split(":")[0] for s in services().values() for v in s.get("volumes", [])]
    binds = [m for m in mounts if m.startswith((".", "/"))]
    assert binds
    for bind in binds:
        assert (ROOT / bind).exists(), bind


# --- Dockerfile -----------------------------------------------------------------------------


def test_dockerfile_installs_the_lock_with_hashes_and_runs_longtools_unprivileged() -> None:
    runs = " ".join(dockerfile_args("RUN"))
    assert re.search(r"pip install --require-hashes --no-deps -r \S+", runs)
    assert "runtime_lock.py requirements.lock pyproject.toml" in runs
    assert "pip check" in runs
    assert "longtools --help" in runs  # the build fails if the code imports a package not installed
    users = dockerfile_args("USER")
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert exec_form(dockerfile_args("ENTRYPOINT")[-1]) == ["longtools"]
    assert exec_form(dockerfile_args("CMD")[-1])[0] in cli_commands()
    assert dockerfile_env()["LONGTOOLS_HOST"] == "0.0.0.0"
    [healthcheck] = dockerfile_args("HEALTHCHECK")
    assert "healthcheck.py" in healthcheck


def test_dockerfile_copies_only_what_exists_and_is_in_the_build_context() -> None:
    patterns = dockerignore_patterns()
    for args in dockerfile_args("COPY"):
        if args.startswith("--from"):
            continue
        for source in args.split()[:-1]:
            assert (ROOT / source).exists(), source
            assert not dockerignored(source, patterns), f"{source} is excluded by .dockerignore"
    for secret in (".env", ".venv", ".git", ".longtools"):
        assert dockerignored(secret, patterns), secret


def test_dockerignore_matching() -> None:
    assert dockerignored("longtools/__pycache__/x.pyc", ["**/__pycache__"])
    assert dockerignored("deploy/x.py", ["deploy"])
    assert not dockerignored("deploy/x.py", ["deploy", "!deploy/x.py"])
    assert not dockerignored("longtools", ["tests"])


def test_the_image_gets_every_runtime_dependency_and_no_test_tool() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    runtime = runtime_lock_names(lock, pyproject)
    try:
        needed = installed_closure("longtools") - {"longtools"}
    except PackageNotFoundError:
        pytest.skip("longtools is not installed in this environment (./dev installs it)")
    assert needed <= runtime, f"the image would lack {needed - runtime}"
    test_only = {"pytest", "mypy", "ruff", "fastmcp", "pytest-asyncio"}
    assert runtime & test_only == set()
    declared = tomllib.loads(pyproject)["project"]["dependencies"]
    assert {Requirement(d).name.lower() for d in declared} <= runtime


def test_the_image_has_every_package_the_code_imports() -> None:
    sources = [path for package in FIRST_PARTY for path in (ROOT / package).rglob("*.py")]
    imported = imported_distributions(sources)
    assert {"temporalio", "mcp", "pydantic"} <= imported.keys()
    runtime = runtime_lock_names(
        (ROOT / "requirements.lock").read_text(), (ROOT / "pyproject.toml").read_text()
    )
    missing = {dist: files for dist, files in imported.items() if dist not in runtime}
    assert missing == {}, f"imported but not a runtime dependency (add to pyproject.toml): {missing}"


def test_an_import_of_a_test_only_package_is_found(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "import os\nimport pytest\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mypy\n"
        "try:\n    import ruff\nexcept ImportError:\n    pass\n"
        "def later() -> None:\n    import packaging\n"
    )
    assert imported_distributions([source]) == {"pytest": {"mod.py"}, "ruff": {"mod.py"}}


def test_runtime_lock_refuses_a_dependency_the_lock_lacks() -> None:
    pyproject = '[project]\ndependencies = ["not-in-the-lock>=1"]\n'
    with pytest.raises(ValueError, match="not-in-the-lock"):
        runtime_lock_names((ROOT / "requirements.lock").read_text(), pyproject)


# --- REVIEW.md section 5: the deployment's findings, each fixed and kept fixed ----------------


def pg_isready_over_tcp(test: str | list[str]) -> bool:
    """Whether a healthcheck runs `pg_isready` against a TCP address, not the Unix socket.

    On its first start the postgres image runs its init scripts on a server that listens on the
    socket only, then restarts it: a socket check passes in between, and Temporal's schema job
    then meets a server that goes away.
    """
    words = shlex.split(test) if isinstance(test, str) else [w for part in test for w in shlex.split(part)]
    if "pg_isready" not in words:
        return False
    hosts = [words[i + 1] for i, word in enumerate(words[:-1]) if word in ("-h", "--host")]
    hosts += [word.split("=", 1)[1] for word in words if word.startswith("--host=")]
    return bool(hosts) and all(host in ("127.0.0.1", "localhost", "::1") for host in hosts)


def test_postgres_is_healthy_only_once_it_accepts_tcp_connections() -> None:
    """REVIEW.md 5.1: the first-boot race."""
    [postgres] = services_with_image("postgres:").values()
    assert pg_isready_over_tcp(postgres["healthcheck"]["test"])


@pytest.mark.parametrize(
    "test",
    [
        ["CMD-SHELL", "pg_isready -U temporal -d postgres"],  # the socket: passes during init
        ["CMD-SHELL", "pg_isready -h /var/run/postgresql -U temporal"],
        ["CMD", "true"],
    ],
)
def test_a_postgres_healthcheck_over_the_socket_is_found(test: list[str]) -> None:
    assert not pg_isready_over_tcp(test)


def test_a_postgres_healthcheck_over_tcp_is_accepted() -> None:
    assert pg_isready_over_tcp(["CMD-SHELL", "pg_isready -h 127.0.0.1 -p 5432 -U temporal -d postgres"])
    assert pg_isready_over_tcp("pg_isready --host=localhost")


def one_shot_restart_problem(restart: str | None) -> str | None:
    """Why a job that others wait for (`service_completed_successfully`) would fail `up` on a
    transient error, or never count as completed; None if it is retried on failure only.

    While Docker waits to restart a failed container its state is `restarting`, not `exited`,
    so compose keeps waiting; a job that always restarts never stays `exited` at all.
    """
    match = re.fullmatch(r"on-failure(?::(\d+))?", restart or "")
    if match is None:
        return f"restart: {restart}: a failed run is not retried, or a finished one is restarted"
    if match.group(1) is not None and int(match.group(1)) < 3:
        return f"restart: {restart}: too few retries to ride out a transient error"
    return None


def waited_for_completion() -> set[str]:
    """The services some other service waits on with `service_completed_successfully`."""
    return {
        target
        for service in services().values()
        if isinstance(service.get("depends_on"), dict)
        for target, spec in service["depends_on"].items()
        if spec.get("condition") == "service_completed_successfully"
    }


def test_one_shot_jobs_are_retried_and_waited_for() -> None:
    """REVIEW.md 5.1: the schema job (and the namespace job) must not fail `up` on a transient
    error, and everything after them waits for their success."""
    one_shots = waited_for_completion()
    schema = [
        n for n, s in services().items() if "temporal-schema.sh" in " ".join(map(str, s.get("volumes", [])))
    ]
    namespace = [
        n
        for n, s in services().items()
        if "temporal-namespace.sh" in " ".join(map(str, s.get("volumes", [])))
    ]
    assert schema and namespace
    assert set(schema + namespace) <= one_shots
    for name in one_shots:
        assert one_shot_restart_problem(services()[name].get("restart")) is None, name


@pytest.mark.parametrize("restart", [None, "no", "always", "unless-stopped", "on-failure:1"])
def test_a_one_shot_job_that_is_not_retried_or_never_completes_is_found(restart: str | None) -> None:
    assert one_shot_restart_problem(restart) is not None


@pytest.mark.parametrize("restart", ["on-failure", "on-failure:10"])
def test_a_one_shot_job_retried_on_failure_is_accepted(restart: str) -> None:
    assert one_shot_restart_problem(restart) is None


def nginx_block(conf: str, header: str) -> str:
    """The body of the first `header { ... }` block (comments dropped, nested blocks kept)."""
    conf = re.sub(r"#[^\n]*", "", conf)
    start = re.search(rf"(?:^|[;{{}}\s]){re.escape(header)}\s*\{{", conf)
    assert start is not None, f"no `{header}` block"
    depth, i = 1, start.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(conf[i], 0)
        i += 1
    return conf[start.end() : i - 1]


def upstream_idle_timeout(conf: str, upstream: str) -> float | None:
    """The explicit `keepalive_timeout` of an upstream's idle connections (None: nginx's default,
    which nothing here shows)."""
    values = nginx_directives(nginx_block(conf, f"upstream {upstream}"), "keepalive_timeout")
    return seconds(values[-1]) if values else None


def test_nginx_closes_idle_upstream_connections_before_uvicorn_does() -> None:
    """REVIEW.md 5.2: nginx must never send a request on a connection uvicorn is closing (a POST
    is not retried, so it is answered 502)."""
    conf = NGINX_CONF.read_text()
    [passed_to] = nginx_directives(conf, "proxy_pass")
    upstream = passed_to.removeprefix("http://")
    assert nginx_directives(nginx_block(conf, f"upstream {upstream}"), "keepalive"), "no pooled connections"
    idle = upstream_idle_timeout(conf, upstream)
    assert idle is not None, "set keepalive_timeout in the upstream block"
    assert idle <= HTTP_KEEP_ALIVE_S - 5, (idle, HTTP_KEEP_ALIVE_S)


def test_an_upstream_idle_timeout_is_read_from_its_own_block() -> None:
    conf = "http { keepalive_timeout 90s; upstream u { server a:1; keepalive 8; # keepalive_timeout 1s;\n} }"
    assert upstream_idle_timeout(conf, "u") is None  # the server's keepalive_timeout is not the upstream's
    assert upstream_idle_timeout("upstream u { keepalive 8; keepalive_timeout 1m; }", "u") == 60


def test_the_history_shard_count_is_fixed_before_the_first_start() -> None:
    """REVIEW.md 5.3: the count can never change once the cluster has started, so it is written
    in the compose file itself (not read from .env, which could drift) and documented."""
    [temporal] = services_with_image("temporalio/server:").values()
    shards = env_of(temporal).get("NUM_HISTORY_SHARDS")
    assert shards is not None and re.fullmatch(r"[1-9]\d*", shards), shards
    assert re.search(rf"`NUM_HISTORY_SHARDS`[^\n]*\({shards}\)", OPERATIONS.read_text())


def forwarded_proto_problem(conf: str) -> str | None:
    """Why the X-Forwarded-Proto nginx sends may not be the scheme the client used, or None.

    Good: `$scheme`, or a `map` from the X-Forwarded-Proto of a proxy in front whose default is
    `$scheme`. Bad: a fixed value (`http` behind TLS) or the client's header passed on unchecked.
    """
    values = nginx_directives(conf, "proxy_set_header X-Forwarded-Proto")
    if len(values) != 1:
        return f"X-Forwarded-Proto is set {len(values)} times"
    [value] = values
    if value == "$scheme":
        return None
    if not value.startswith("$"):
        return f"X-Forwarded-Proto is always {value!r}"
    head = re.search(rf"map\s+(\$\w+)\s+{re.escape(value)}\s*\{{", re.sub(r"#[^\n]*", "", conf))
    if head is None:
        return f"X-Forwarded-Proto is {value}, which no map sets"
    body = nginx_block(conf, head.group(0)[:-1].strip())
    entries = dict(line.split(None, 1) for line in (e.strip() for e in body.split(";")) if line)
    if head.group(1) != "$http_x_forwarded_proto" or entries.get("default") != "$scheme":
        return f"{value} is not the proxy's X-Forwarded-Proto with $scheme as the default"
    if set(entries.values()) - {"$scheme", "http", "https"}:
        return f"{value} passes on values other than http and https"
    return None


def test_the_api_names_itself_by_its_public_url_and_nginx_forwards_the_real_scheme() -> None:
    """REVIEW.md 5.4: behind TLS the resource metadata said http://. The API now names itself
    only by LONGTOOLS_RESOURCE_URL, which compose requires (checked above); the example value
    passes the code's own validation; nginx forwards the scheme the client used."""
    example = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", ENV_EXAMPLE.read_text(), re.MULTILINE))
    assert Settings(resource_url=example["LONGTOOLS_RESOURCE_URL"]).resource_url
    assert forwarded_proto_problem(NGINX_CONF.read_text()) is None


@pytest.mark.parametrize(
    "conf",
    [
        "proxy_set_header X-Forwarded-Proto http;",
        "proxy_set_header X-Forwarded-Proto $http_x_forwarded_proto;",
        "map $http_x_forwarded_proto $p { default $http_x_forwarded_proto; }\n"
        "proxy_set_header X-Forwarded-Proto $p;",
        "map $http_x_forwarded_proto $p { default $scheme; https https; x javascript; }\n"
        "proxy_set_header X-Forwarded-Proto $p;",
        "# proxy_set_header X-Forwarded-Proto $scheme;",
    ],
)
def test_a_forwarded_scheme_that_can_be_wrong_is_found(conf: str) -> None:
    assert forwarded_proto_problem(conf) is not None


def test_a_forwarded_scheme_from_scheme_or_a_checked_map_is_accepted() -> None:
    assert forwarded_proto_problem("proxy_set_header X-Forwarded-Proto $scheme;") is None
    mapped = "map $http_x_forwarded_proto $p {\n default $scheme;\n https https;\n}\n"
    mapped += "proxy_set_header X-Forwarded-Proto $p;"
    assert forwarded_proto_problem(mapped) is None


# The latest Temporal 1.30 patch release when the review was made (REVIEW.md 5.5): the earlier
# ones have known CVEs.
TEMPORAL_PATCHED = (1, 30, 6)


def release(reference: str) -> tuple[int, ...]:
    tag = reference.rpartition(":")[2]
    match = re.match(r"v?(\d+(?:\.\d+)*)", tag)
    assert match, reference
    return tuple(int(part) for part in match.group(1).split("."))


def test_temporal_server_and_admin_tools_are_one_patched_release() -> None:
    """REVIEW.md 5.5. The admin tools carry the schema of their own server version, so both move
    together."""
    images = {
        str(s["image"]) for s in services().values() if str(s.get("image", "")).startswith("temporalio/")
    }
    versions = {release(i) for i in images if i.startswith(("temporalio/server:", "temporalio/admin-tools:"))}
    assert len(versions) == 1, images
    assert versions.pop() >= TEMPORAL_PATCHED
    assert release("temporalio/server:1.30.1") < TEMPORAL_PATCHED <= release("temporalio/admin-tools:1.31.0")


def test_the_operations_guide_covers_each_deployment_finding() -> None:
    """REVIEW.md 5.3, 5.4, 5.6, 5.7 and the search attributes: what the compose file cannot show."""
    text = OPERATIONS.read_text()
    for needed in (
        "NUM_HISTORY_SHARDS",  # 5.3
        "LONGTOOLS_RESOURCE_URL",  # 5.4
        "X-Forwarded-Proto",
        "ALTER ROLE",  # 5.6
        "superuser",  # 5.7
        "TEMPORAL_DISABLE_WRITE_ACTIONS",
        "TEMPORAL_CSRF_COOKIE_INSECURE",
        "`/livez`",
        "`/readyz`",
        "stop_grace_period",
        "search-attribute create --name LongtoolsOwner --type Keyword",
        "search-attribute create --name LongtoolsDeciders --type KeywordList",
    ):
        assert needed in text, needed


def test_the_temporal_ui_is_read_only_and_keeps_its_cookie_secure_by_default() -> None:
    """REVIEW.md 5.7: the UI has no login, so by default nobody terminates or signals a task's
    workflow from it; its CSRF cookie stays Secure unless .env says otherwise (env names as in
    the UI 2.34 server's config template)."""
    [ui] = services_with_image("temporalio/ui:").values()
    env = env_of(ui)
    assert with_defaults(env.get("TEMPORAL_DISABLE_WRITE_ACTIONS") or "") == "true"
    assert with_defaults(env.get("TEMPORAL_CSRF_COOKIE_INSECURE") or "false") == "false"
    example = ENV_EXAMPLE.read_text()
    assert "TEMPORAL_DISABLE_WRITE_ACTIONS=" in example and "TEMPORAL_CSRF_COOKIE_INSECURE=" in example


def test_the_env_example_says_how_to_make_each_key_ring() -> None:
    example = ENV_EXAMPLE.read_text()
    for ring in ("LONGTOOLS_STATE_KEYS", "LONGTOOLS_PAYLOAD_KEYS"):
        assert re.search(rf"^{ring}=$", example, re.MULTILINE), ring
    assert "longtools keygen" in example and "token_bytes(32)" in example


# --- health checks: liveness for containers, readiness for the load balancer ----------------


def _load_healthcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("healthcheck", HEALTHCHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def served_paths() -> set[str]:
    """The paths the API app routes (built, not served: no side effects until served)."""
    keys = [base64.urlsafe_b64encode(bytes([n]) * 32).decode() for n in (1, 2)]
    app = create_app(Settings(no_auth=True, state_keys=keys[0], payload_keys=keys[1]))
    return {str(getattr(route, "path", "")) for route in app.routes}


def test_containers_check_liveness_and_the_load_balancer_readiness() -> None:
    """A Temporal outage must not mark every API container unhealthy (an orchestrator would
    restart them all, which does not bring Temporal back): the image checks /livez. The load
    balancer's check asks /readyz through nginx, which shows whether tools can be served."""
    healthcheck = _load_healthcheck()
    paths = served_paths()
    assert {healthcheck.LIVENESS_PATH, healthcheck.READINESS_PATH} <= paths
    assert (healthcheck.LIVENESS_PATH, healthcheck.READINESS_PATH) == ("/livez", "/readyz")
    [lb] = services_with_image("nginx:").values()
    assert re.search(r"https?://127\.0\.0\.1:8000/readyz$", " ".join(lb["healthcheck"]["test"]))
    for name, service in longtools_services("api").items():
        assert "healthcheck" not in service, f"{name}: the image's liveness check is the one to use"
    for path in (COMPOSE, DOCKERFILE, *sorted((ROOT / "deploy").iterdir())):
        if path.is_file():
            assert "/healthz" not in path.read_text(), f"{path.name} names the removed /healthz"


def _api_while_temporal_is_down(seen: list[str]) -> type[BaseHTTPRequestHandler]:
    """An API stand-in that is alive but not ready; it records the paths asked for."""

    class Probe(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response({"/livez": 200, "/readyz": 503}.get(self.path, 404))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Probe


@pytest.fixture
def probed_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    seen: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _api_while_temporal_is_down(seen))
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    monkeypatch.setenv("LONGTOOLS_HOST", "0.0.0.0")
    monkeypatch.setenv("LONGTOOLS_PORT", str(server.server_address[1]))
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_image_healthcheck_passes_while_temporal_is_down_and_readiness_does_not(
    probed_api: list[str],
) -> None:
    healthcheck = _load_healthcheck()
    assert healthcheck.main(["healthcheck.py"]) == 0
    assert healthcheck.main(["healthcheck.py", "/readyz"]) == 1
    assert healthcheck.main(["healthcheck.py", "/metrics"]) == 2
    assert probed_api == ["/livez", "/readyz"]


# --- stopping: Docker waits longer than longtools takes to stop cleanly ---------------------


def test_docker_waits_longer_than_api_and_workers_take_to_stop() -> None:
    """Running activities get LONGTOOLS_WORKER_SHUTDOWN_S to finish on SIGTERM, an API replica
    answers its held rounds and stops within uvicorn's graceful shutdown; Docker must not kill
    either first (REVIEW.md 3.4/3.5)."""
    api_stop = HTTP_SHUTDOWN_S
    for name, service in longtools_services("api").items():
        assert seconds(str(service.get("stop_grace_period", "10s"))) >= api_stop + 5, name
    for name, service in longtools_services("worker").items():
        shutdown = env_of(service).get("LONGTOOLS_WORKER_SHUTDOWN_S")
        assert shutdown is not None and "$" not in shutdown, f"{name}: set it beside stop_grace_period"
        assert seconds(str(service.get("stop_grace_period", "10s"))) >= float(shutdown) + 5, name


# --- deploy/*.sh: valid shell; the namespace job registers the search attributes -------------


def test_every_deploy_script_is_valid_sh() -> None:
    scripts = sorted((ROOT / "deploy").glob("*.sh"))
    assert len(scripts) >= 2
    for script in scripts:
        done = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, f"{script.name}: {done.stderr}"


# A stand-in for the admin-tools image's `temporal` CLI: logs each call (a line, its arguments
# separated by US, 0x1f) and answers like a cluster whose namespace exists.
# `search-attribute create --name NAME` fails for each NAME in STUB_CREATE_FAILS (space-separated);
# `search-attribute list` prints a table as the CLI 1.x does (two-space indent, padded columns, the
# type's short name: `Keyword`, `KeywordList`): two system attributes, then a row per NAME=TYPE in
# STUB_LISTED.
_FAKE_TEMPORAL = """#!/bin/sh
printf '%s\\037' "$@" >> "$STUB_LOG" && echo >> "$STUB_LOG"
case "$1 $2 $3" in
  "operator search-attribute create")
    for failing in ${STUB_CREATE_FAILS:-}; do
      if [ "$4 $5" = "--name $failing" ]; then echo "search attribute $failing already exists" >&2; exit 1; fi
    done ;;
  "operator search-attribute list")
    printf '  %-20s %-12s\\n' Name Type WorkflowId Keyword ExecutionStatus Keyword
    for row in ${STUB_LISTED:-}; do printf '  %-20s %-12s\\n' "${row%%=*}" "${row#*=}"; done ;;
esac
exit 0
"""


def run_namespace_script(tmp_path: Path, **stub: str) -> tuple[int, list[list[str]], str]:
    """deploy/temporal-namespace.sh against the stand-in: (exit status, the calls it made, stderr)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "temporal"
    fake.write_text(_FAKE_TEMPORAL)
    fake.chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TEMPORAL_ADDRESS": "temporal:7233",
        "NAMESPACE": "tasks",
        "RETENTION": "168h",
        "STUB_LOG": str(log),
        **stub,
    }
    done = subprocess.run(["sh", str(NAMESPACE_SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    calls = [line.removesuffix("\x1f").split("\x1f") for line in log.read_text().splitlines()]
    return done.returncode, calls, done.stderr


# Each search attribute longtools sets, with the type the CLI names it by.
ATTRIBUTES = {"LongtoolsOwner": "Keyword", "LongtoolsDeciders": "KeywordList"}
_CLUSTER = ["--namespace", "tasks", "--address", "temporal:7233"]


def created(calls: list[list[str]]) -> list[tuple[str, str]]:
    """The (name, type) of each `search-attribute create`, checking its other options."""
    found = []
    for call in calls:
        if call[:3] == ["operator", "search-attribute", "create"]:
            options = dict(zip(call[3::2], call[4::2], strict=True))
            assert {key: options.pop(key, None) for key in ("--namespace", "--address")} == {
                "--namespace": "tasks",
                "--address": "temporal:7233",
            }, call
            assert options.keys() == {"--name", "--type"}, call
            found.append((options["--name"], options["--type"]))
    return found


def probed(calls: list[list[str]]) -> list[str]:
    """The visibility queries the script waited on."""
    return [
        call[call.index("--query") + 1]
        for call in calls
        if call[:2] == ["workflow", "count"] and call[-4:] == _CLUSTER
    ]


def test_the_namespace_job_registers_each_search_attribute_with_its_type(tmp_path: Path) -> None:
    status, calls, _ = run_namespace_script(tmp_path)
    assert status == 0
    assert created(calls) == list(ATTRIBUTES.items())
    assert probed(calls) == [f"{name} = 'probe'" for name in ATTRIBUTES]


@pytest.mark.parametrize("name", ATTRIBUTES)
def test_the_namespace_job_tolerates_each_search_attribute_that_already_exists(
    tmp_path: Path, name: str
) -> None:
    listed = " ".join(f"{other}={kind}" for other, kind in ATTRIBUTES.items())
    status, calls, stderr = run_namespace_script(tmp_path, STUB_CREATE_FAILS=name, STUB_LISTED=listed)
    assert status == 0, stderr
    assert ["operator", "search-attribute", "list", *_CLUSTER] in calls
    assert created(calls) == list(ATTRIBUTES.items())  # the other one is created all the same
    assert probed(calls) == [f"{other} = 'probe'" for other in ATTRIBUTES]


@pytest.mark.parametrize("name", ATTRIBUTES)
@pytest.mark.parametrize("listing", ["missing", "another name", "another type"])
def test_the_namespace_job_fails_when_a_search_attribute_cannot_be_registered(
    tmp_path: Path, name: str, listing: str
) -> None:
    """The listing decides, by name and type: `LongtoolsDeciders` listed as `Keyword` (or
    `LongtoolsOwner` as `KeywordList`) is not registered, a longer name is not the name."""
    others = {other: kind for other, kind in ATTRIBUTES.items() if other != name}
    rows = {
        "missing": {},
        "another name": {f"{name}X": ATTRIBUTES[name]},
        "another type": {name: "KeywordList" if ATTRIBUTES[name] == "Keyword" else "Keyword"},
    }[listing]
    listed = " ".join(f"{key}={kind}" for key, kind in {**others, **rows}.items())
    status, calls, stderr = run_namespace_script(tmp_path, STUB_CREATE_FAILS=name, STUB_LISTED=listed)
    assert status == 1
    assert f"search attribute {name} ({ATTRIBUTES[name]}) could not be registered in tasks" in stderr
    assert f"{name} = 'probe'" not in probed(calls)


# temporalio's SearchAttributeKey constructors, by the type name the CLI takes.
_KEY_TYPES = {
    "keyword": "Keyword",
    "keyword_list": "KeywordList",
    "text": "Text",
    "int": "Int",
    "float": "Double",
    "bool": "Bool",
    "datetime": "Datetime",
}


def search_attributes_in(text: str) -> dict[str, str]:
    """{name: CLI type} of each `SearchAttributeKey.for_<type>("Name")` in Python source."""
    found = re.findall(r"SearchAttributeKey\.for_(\w+)\(\s*\"(\w+)\"\s*\)", text)
    return {name: _KEY_TYPES[kind] for kind, name in found}


def test_the_search_attributes_registered_are_the_ones_the_code_sets(tmp_path: Path) -> None:
    sources = [path for package in FIRST_PARTY for path in (ROOT / package).rglob("*.py")]
    in_code = {
        name: kind for path in sources for name, kind in search_attributes_in(path.read_text()).items()
    }
    assert in_code == ATTRIBUTES
    _, calls, _ = run_namespace_script(tmp_path)
    assert dict(created(calls)) == in_code


def test_a_search_attribute_is_read_from_the_code_with_its_type() -> None:
    text = 'A = SearchAttributeKey.for_keyword("A")\nB: Final = SearchAttributeKey.for_keyword_list("B")\n'
    assert search_attributes_in(text) == {"A": "Keyword", "B": "KeywordList"}
