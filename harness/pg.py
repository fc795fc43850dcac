"""A real PostgreSQL server for the tests: Debian's binaries (`make test` installs the
`postgresql` package, as it installs chromium), `initdb` + `pg_ctl` into a temporary folder,
listening on a free loopback port. As root the server runs as the unprivileged `postgres`
user (PostgreSQL refuses to run as root), through `runuser`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from harness.browser import free_port


class PostgresMissing(RuntimeError):
    pass


def pg_bin() -> Path | None:
    """The folder of initdb and pg_ctl: $CONCEPTLENS_PG_BIN, Debian's newest, or pg_config's."""
    if os.environ.get("CONCEPTLENS_PG_BIN"):
        return Path(os.environ["CONCEPTLENS_PG_BIN"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        d = Path(out.stdout.strip())
        if (d / "initdb").exists():
            return d
    return None


def _as_server_user() -> tuple[list[str], str | None]:
    if os.geteuid() != 0:
        return [], None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresMissing(
            "running as root needs the `postgres` user (Debian's postgresql package)"
        ) from None
    return ["runuser", "-u", "postgres", "--"], "postgres"


@contextlib.contextmanager
def postgres_server():
    """Start a throw-away server; yields the URL of its `postgres` database."""
    bindir = pg_bin()
    if bindir is None or not (bindir / "pg_ctl").exists():
        raise PostgresMissing("PostgreSQL's initdb/pg_ctl are missing: apt-get install postgresql")
    prefix, user = _as_server_user()
    # Not under pytest's tmp folder: that one is root-only, the postgres user could not enter it.
    tmp = Path(tempfile.mkdtemp(prefix="conceptlens-pg-"))
    if user:
        shutil.chown(tmp, user, user)
    data, log = tmp / "data", tmp / "server.log"
    port = free_port()
    run = lambda *cmd: subprocess.run([*prefix, *map(str, cmd)], check=True, capture_output=True, text=True)  # noqa: E731
    try:
        run(bindir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
        run(
            bindir / "pg_ctl",
            "-D",
            data,
            "-l",
            log,
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c max_connections=300",
            "start",
        )
    except subprocess.CalledProcessError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {e.stderr or e.stdout}") from None
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(tmp, ignore_errors=True)


def fresh_database(server_url: str) -> str:
    """A new empty database on the server; its URL."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server_url, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name


def require(pytest) -> None:
    """Skip (fail in CI, which must run these tests) when no PostgreSQL server can be started."""
    try:
        if pg_bin() is None:
            raise PostgresMissing("PostgreSQL's initdb/pg_ctl are missing: apt-get install postgresql")
        _as_server_user()
        import psycopg  # noqa: F401
    except (PostgresMissing, ImportError) as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{e} (in CI `make test` installs it: make postgres-deps)")
        pytest.skip(str(e))
