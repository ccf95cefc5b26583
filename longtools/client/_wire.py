"""The MCP 2026-07-28 wire as the terminal client speaks it: one JSON-RPC request per POST, on the
standard library's ``http.client``. CLI process.

Not the SDK's ``Client`` nor an HTTP library: ``longtools task get`` and ``longtools call`` must
start in well under half a second, and ``import mcp`` alone takes about 0.9 s, ``mcp_types``'
pydantic models 0.3 s, ``httpx2`` 0.1 s (``python -X importtime``; bench/README.md, "The terminal
client's start-up"). Messages are plain JSON objects; what a command reads of them it checks where
it reads it.

The usual proxy variables are honoured (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``), except
for a loopback server, which no proxy can reach for the caller.

Every request carries the per-request ``_meta`` (version, capabilities, client info) and the
routing headers (``Mcp-Method``, ``Mcp-Name``). A response is JSON or an SSE stream whose
notifications (``notifications/progress``) go to a callback before the response arrives.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

VERSION = "2026-07-28"
CLIENT_INFO: dict[str, str] = {"name": "longtools-cli", "version": "1"}
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 300
"""A held MRTR round sends a keep-alive comment every 15 s; 300 s of silence is a dead server."""

Notify = Callable[[Mapping[str, Any]], None]


class ClientError(Exception):
    """A failure a person reads: one line, what happened and what to do next."""


class RpcError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (error {code})")
        self.code = code
        self.message = message
        self.data = data


def _header_value(value: str) -> str:
    # Streamable HTTP: a value that is not plain printable ASCII goes as =?base64?...?=.
    if value.isascii() and value.isprintable():
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


class Connection:
    """One server's MCP endpoint, over one kept-alive HTTP connection (reopened after a failure)."""

    def __init__(self, url: str, token: str | None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ClientError(
                f"{url} is not a URL; give the server's MCP endpoint, e.g. http://host:8000/mcp"
            )
        self.url = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        try:
            self._port = parts.port
        except ValueError:
            raise ClientError(f"{url} has no valid port; give e.g. http://host:8000/mcp") from None
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._token = token
        self._proxy = _proxy_for(parts.scheme, self._host)
        self._http: http.client.HTTPConnection | None = None
        self._ids = 0

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._http is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            if self._proxy is None:
                self._http = kind(self._host, self._port, timeout=CONNECT_TIMEOUT_S)
            else:
                host, port, auth = self._proxy
                self._http = kind(host, port, timeout=CONNECT_TIMEOUT_S)
                if self._https:  # a CONNECT tunnel: the proxy sees only where to
                    self._http.set_tunnel(self._host, self._port, headers=auth)
        return self._http

    def _target(self, headers: dict[str, str], path: str | None = None) -> str:
        """What the request line names: the path (the endpoint's, unless ``path``), or through a
        plain-HTTP proxy the whole URL."""
        path = self._path if path is None else path
        if self._proxy is None or self._https:
            return path
        headers.update(self._proxy[2])
        return f"http://{self._host}{'' if self._port is None else f':{self._port}'}{path}"

    def beside(self, path: str) -> str:
        """The path of ``path`` (relative) beside the MCP endpoint: ``tasks/ID/ledger`` of
        ``http://host/mcp`` is ``/tasks/ID/ledger``, of ``https://host/tools/mcp`` (a proxy's
        prefix) ``/tools/tasks/ID/ledger``."""
        return self._path.split("?", 1)[0].rsplit("/", 1)[0] + "/" + path

    def get(self, path: str, accept: str) -> tuple[int, str, bytes]:
        """GET ``path`` of this server (``beside``), with the token: the status, the content type
        and the body. Redirects are not followed (the pages send a person without a session to
        sign in).

        Raises:
            ClientError: no HTTP answer (connection refused, timed out, broken).
        """
        headers = {"accept": accept}
        if self._token:
            headers["authorization"] = f"Bearer {self._token}"
        connection = self._connection()
        try:
            with self._failures():
                connection.request("GET", self._target(headers, self.beside(path)), headers=headers)
                response = connection.getresponse()
                if connection.sock is not None:
                    connection.sock.settimeout(READ_TIMEOUT_S)
                return response.status, response.getheader("content-type", ""), response.read()
        except BaseException:
            self.close()
            raise

    @contextmanager
    def _failures(self) -> Iterator[None]:
        """A failure to reach the server as one line for a person."""
        try:
            yield
        except (ConnectionRefusedError, socket.gaierror):
            raise ClientError(f"cannot connect to {self.url}: is the server running?") from None
        except TimeoutError:
            raise ClientError(f"{self.url} did not answer in time; is the server overloaded?") from None
        except (OSError, http.client.HTTPException) as exc:
            raise ClientError(f"the connection to {self.url} failed ({exc}); try again") from None

    def request(
        self,
        method: str,
        params: Mapping[str, Any],
        capabilities: Mapping[str, Any],
        *,
        notify: Notify | None = None,
        progress_token: str | None = None,
    ) -> dict[str, Any]:
        """The result of one request.

        Raises:
            RpcError: the server answered with a JSON-RPC error.
            ClientError: no MCP answer (connection, HTTP status, not JSON-RPC).
        """
        self._ids += 1
        meta: dict[str, Any] = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": dict(capabilities),
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        }
        if progress_token is not None:
            meta["progressToken"] = progress_token
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": {**params, "_meta": meta}}
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": VERSION,
            "mcp-method": method,
        }
        name = params.get("name", params.get("taskId"))
        if isinstance(name, str):
            headers["mcp-name"] = _header_value(name)
        if self._token:
            headers["authorization"] = f"Bearer {self._token}"
        try:
            return self._exchange(json.dumps(body).encode(), headers, notify)
        except BaseException:
            self.close()  # a half-read response (Ctrl-C, a timeout) leaves the connection unusable
            raise

    def _exchange(self, body: bytes, headers: dict[str, str], notify: Notify | None) -> dict[str, Any]:
        connection = self._connection()
        with self._failures():
            connection.request("POST", self._target(headers), body=body, headers=headers)
            response = connection.getresponse()
            if connection.sock is not None:
                connection.sock.settimeout(READ_TIMEOUT_S)
            return self._answer(response, notify)

    def _answer(self, response: http.client.HTTPResponse, notify: Notify | None) -> dict[str, Any]:
        kind = response.getheader("content-type", "")
        if kind.startswith("text/event-stream") and response.status == 200:
            message = _last_of_stream(response, notify)
        else:
            raw = response.read()
            try:
                message = json.loads(raw) if raw else None
            except ValueError:
                message = None
        error = message.get("error") if isinstance(message, dict) else None
        if (
            response.status == 401
            or not isinstance(message, dict)
            or not (isinstance(error, dict) or "result" in message)
        ):
            raise self._http_error(response.status)
        if isinstance(error, dict):
            code, text = error.get("code"), error.get("message")
            if code == -32022:
                offered = ", ".join((error.get("data") or {}).get("supported", [])) or "none"
                raise ClientError(f"the server does not speak MCP {VERSION} (it offers: {offered})")
            raise RpcError(code if isinstance(code, int) else 0, str(text), error.get("data"))
        result = message.get("result")
        if not isinstance(result, dict):
            raise ClientError(f"{self.url} answered with a result that is not an object")
        return result

    def _http_error(self, status: int) -> ClientError:
        if status == 401:
            if self._token:
                return ClientError(
                    "the server refused the token (HTTP 401); check --token or LONGTOOLS_TOKEN"
                )
            return ClientError("the server needs a token (HTTP 401); pass --token or set LONGTOOLS_TOKEN")
        if status == 403:
            return ClientError(
                "the server refused this request (HTTP 403): the token lacks a permission it needs"
            )
        if status in (404, 405):
            return ClientError(f"no MCP endpoint at {self.url} (HTTP {status}); it usually ends in /mcp")
        if status == 421:
            return ClientError("the server does not accept this host name (HTTP 421); use the name it serves")
        return ClientError(f"{self.url} did not answer as an MCP server (HTTP {status})")


def _proxy_for(scheme: str, host: str) -> tuple[str, int, dict[str, str]] | None:
    """The proxy a request to ``host`` goes through, from the environment as curl reads it: host,
    port and its ``Proxy-Authorization`` header when the proxy URL has credentials."""
    if _loopback(host):
        return None
    proxy = os.environ.get(f"{scheme}_proxy") or os.environ.get(f"{scheme.upper()}_PROXY")
    if not proxy:
        return None
    from urllib.request import proxy_bypass  # NO_PROXY; imported only when a proxy is set

    if proxy_bypass(host):
        return None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if not parts.hostname:
        raise ClientError(f"the {scheme.upper()}_PROXY setting {proxy!r} names no host")
    auth: dict[str, str] = {}
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        auth["Proxy-Authorization"] = f"Basic {base64.b64encode(pair.encode()).decode()}"
    return parts.hostname, parts.port or 8080, auth


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _last_of_stream(response: http.client.HTTPResponse, notify: Notify | None) -> Any:
    """The response an SSE stream ends with; each notification before it goes to ``notify``."""
    data: list[str] = []
    while True:
        line = response.readline()
        if not line:
            return None  # the stream ended without the response
        text = line.decode().rstrip("\r\n")
        if text.startswith("data:"):
            data.append(text[5:].removeprefix(" "))
            continue
        if text or not data:
            continue  # a comment (keep-alive), an event name or id, or an empty event
        try:
            message = json.loads("\n".join(data))
        except ValueError:
            message = None
        data = []
        if isinstance(message, dict) and ("result" in message or "error" in message):
            return message
        if isinstance(message, dict) and notify is not None and isinstance(message.get("method"), str):
            notify(message)
