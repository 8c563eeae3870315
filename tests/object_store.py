"""A local S3 server for the tests of trace tables in object storage.

moto's server speaks the S3 protocol over HTTP on a local port; pyarrow's own S3 client talks to
it as to AWS, found through the variables a team sets for any S3-compatible store
(`AWS_ENDPOINT_URL`, the access key and secret). Nothing leaves the machine: the instance
metadata service, which the AWS SDK would ask for credentials, is turned off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs
import pytest

BUCKET = "lake"


@dataclass(frozen=True)
class ObjectStore:
    endpoint: str
    """The server's URL (`http://127.0.0.1:PORT`)."""
    filesystem: pafs.FileSystem
    """The bucket's filesystem, to write what the tests read."""

    def upload(self, folder: Path, prefix: str) -> str:
        """Copy a folder's tree under `prefix` in the bucket; its URI (`s3://lake/prefix`)."""
        self.filesystem.create_dir(f"{BUCKET}/{prefix}")
        pafs.copy_files(str(folder), f"{BUCKET}/{prefix}", destination_filesystem=self.filesystem)
        return f"s3://{BUCKET}/{prefix}"


@contextmanager
def object_store() -> Iterator[ObjectStore]:
    """A local S3 server with an empty bucket, this process's AWS variables set for it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in environment(endpoint).items():
                patch.setenv(name, value)
            filesystem = pafs.S3FileSystem(endpoint_override=endpoint, allow_bucket_creation=True)
            filesystem.create_dir(BUCKET)
            yield ObjectStore(endpoint=endpoint, filesystem=filesystem)
    finally:
        server.stop()


def environment(endpoint: str) -> dict[str, str]:
    """The variables that point an AWS client at the local server, with its test credentials."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def plangate_with(endpoint: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `plangate` command line in a child process, pointed at the local server."""
    return subprocess.run(
        [sys.executable, "-m", "plangate", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **environment(endpoint)},
        check=False,
    )
