"""Stores read over http:// from a web server on loopback, through obstore (the default for http and https).

A server that answers Range headers gets ranged GETs; one that ignores them (``python -m http.server``) gets
one streamed GET per shard, after it refused the first ranged one.
"""

from __future__ import annotations

import functools
import http.server
import io
import os
import re
import threading

import numpy as np
import pytest

import stoker

pytestmark = pytest.mark.usefixtures("obstore_client")


class Plain(http.server.SimpleHTTPRequestHandler):
    """A static file server that ignores Range headers (as ``python -m http.server`` does), quiet."""

    def log_message(self, *args):  # noqa: ANN201
        pass


class Ranged(Plain):
    """A static file server that answers ``Range: bytes=A-B`` with 206 and those bytes."""

    def send_head(self):  # noqa: ANN201 - http.server's own signature
        path, asked = self.translate_path(self.path), self.headers.get("Range")
        if not asked or not os.path.isfile(path):
            return super().send_head()
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", asked)
        size = os.path.getsize(path)
        a, b = int(m.group(1)), int(m.group(2) or size - 1)
        with open(path, "rb") as f:
            f.seek(a)
            body = f.read(b - a + 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@pytest.fixture(params=[Ranged, Plain], ids=["ranges", "no-ranges"])
def served(request, tmp_path):
    """A store of 3,000 rows in 8 KB shards under a loopback web server: its URL, and whether the server takes ranges."""
    stoker.write(tmp_path / "site" / "st", {"x": np.arange(3000)}, shard_size="8KB")
    handler = functools.partial(request.param, directory=str(tmp_path / "site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/st", request.param is Ranged
    server.shutdown()
    server.server_close()


def test_a_store_reads_over_http_through_obstore(served, tmp_path):
    url, ranges = served
    ds = stoker.open(url, cache_dir=tmp_path / "cache", verify=True)
    assert ds.num_shards > 1 and ds[:]["x"].tolist() == list(range(3000))
    assert ds.remote_stats()["client"] == "obstore" and ds.remote_stats()["shards_fetched"] == ds.num_shards
    assert ds.remote.remote.fetcher.ranged is ranges  # ranged GETs where the server takes them
