"""The data source's authentication and TLS options reach the connection (real servers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _jwt import make_decentralized, new_user_nkey
from _spark import make_source, read_all
from pyspark.sql.types import BinaryType, StructField, StructType

from jsclient.errors import AuthorizationError, NoServersError, SparkReadError
from jsclient.server import NatsServer, make_tls_files
from jsclient.spark.options import ConnectionOptions
from jsclient.spark.source import SCHEMA


def roundtrip(**options: Any) -> None:
    """Connect as a task would and prove the connection works."""
    nc = ConnectionOptions.parse(options).connect()
    try:
        sub = nc.subscribe("auth.check")
        nc.publish("auth.check", b"ok")
        assert sub.next_msg(timeout=5).data == b"ok"
    finally:
        nc.close()


def test_token_user_password_nkey_and_creds(nats_server_factory: Any, tmp_path: Path) -> None:
    srv = nats_server_factory(jetstream=False, token="t0ken")
    roundtrip(servers=srv.url, token="t0ken")
    with pytest.raises(AuthorizationError, match="refused the credentials"):
        roundtrip(servers=srv.url, token="wrong")

    srv = nats_server_factory(jetstream=False, user="alice", password="pa$$")
    roundtrip(servers=srv.url, user="alice", password="pa$$")
    with pytest.raises(AuthorizationError) as info:
        roundtrip(servers=srv.url, user="alice", password="nope")
    assert "nope" not in str(info.value)

    key = new_user_nkey()
    srv = nats_server_factory(jetstream=False, nkey_users=[key.public])
    roundtrip(servers=srv.url, nkeySeed=key.seed.decode())
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(key.seed + b"\n")
    roundtrip(servers=srv.url, nkeySeed=str(seed_file))

    d = make_decentralized()
    srv = nats_server_factory(jetstream=False, config=d.server_config())
    roundtrip(servers=srv.url, creds=d.write_creds(tmp_path / "user.creds"))


def test_read_and_write_over_tls_with_a_client_certificate(
    nats_server_factory: Any, tmp_path: Path
) -> None:
    tls = make_tls_files(tmp_path / "tls")
    srv: NatsServer = nats_server_factory(
        jetstream=True, tls=tls.server_config(verify=True), user="spark", password="s3cret"
    )
    url = srv.url
    options = {
        "servers": url,
        "user": "spark",
        "password": "s3cret",
        "tlsCaFile": tls.ca_file,
        "tlsCertFile": tls.client_cert_file,
        "tlsKeyFile": tls.client_key_file,
    }
    conn = ConnectionOptions.parse(options)
    nc = conn.connect()
    try:
        nc.jetstream().create_stream(name="SECURE", subjects=["secure.>"])
    finally:
        nc.close()
    schema = StructType([StructField("data", BinaryType())])
    writer = make_source(subject="secure.x", **options).writer(schema, False)
    batch = pa.RecordBatch.from_pylist(
        [{"data": b"a"}, {"data": b"b"}], schema=pa.schema([("data", pa.binary())])
    )
    assert writer.write_partition(iter([batch]), 0).published == 2
    table = read_all(make_source(stream="SECURE", **options).reader(SCHEMA))
    assert table.column("data").to_pylist() == [b"a", b"b"]
    # Without the CA the server's certificate is not trusted: a clear error, at once.
    without_ca = {k: v for k, v in options.items() if k != "tlsCaFile"}
    with pytest.raises(SparkReadError, match=r"cannot connect.*(certificate|TLS)"):
        make_source(stream="SECURE", **without_ca).reader(SCHEMA).partitions()
    with pytest.raises(NoServersError, match="cannot connect"):
        ConnectionOptions.parse(without_ca).connect()
