"""A real S3-protocol server on loopback (moto's, on an ephemeral port) for the remote-store tests.

Tests using it are skipped, with a message, where ``moto[server]`` or ``s3fs`` is not installed (``pip install
'stoker[remote]'`` and moto[server] from the dev extra). The server's state lives in this test
process, so a server stopped and started again on the same port still holds its buckets.
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

KEY, SECRET = "stokertestkey", "stoker-test-secret-d41d8cd98f00b204"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3:
    """The running server: its endpoint, a client, and the storage_options that reach it."""

    port: int
    server: Any = None
    made: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def options(self, **extra: Any) -> dict[str, Any]:
        opts: dict[str, Any] = {"key": KEY, "secret": SECRET, "endpoint_url": self.endpoint}
        opts.update(extra)
        return opts

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        )

    def bucket(self) -> str:
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()

    def stop(self) -> None:
        """Stop serving and close the listening socket: a connection is refused at once, as from a server that is gone."""
        if self.server is not None:
            inner = getattr(self.server, "_server", None)
            self.server.stop()
            if inner is not None:
                inner.server_close()
            self.server = None


@pytest.fixture(scope="session")
def s3_server():
    # skipped here, not at import: a skip while pytest loads a conftest aborts the whole run
    pytest.importorskip("moto.server", reason="the remote-store tests need moto[server] (dev extra)")
    pytest.importorskip("s3fs", reason="the remote-store tests need s3fs: pip install 'stoker[remote]'")
    pytest.importorskip("boto3", reason="the remote-store tests need boto3 (installed with moto)")
    server = S3(_free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The server (started again if a test stopped it), with the environment's AWS variables pointing at it."""
    if s3_server.server is None:
        s3_server.start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield s3_server
    if s3_server.server is None:
        s3_server.start()


@pytest.fixture
def obstore_client(monkeypatch):
    """Remote stores read and written through obstore (``STOKER_REMOTE_CLIENT=obstore``)."""
    pytest.importorskip("obstore", reason="these runs need obstore: pip install 'stoker[remote]'")
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", "obstore")
