"""What `tether worker` and `tether serve --workers external` say when a setting is missing."""

from __future__ import annotations

import subprocess
import sys


def _tether(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _env(home, **extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    return env | {"TETHER_HOME": str(home)} | extra


def test_worker_without_a_database_says_which_setting(tmp_path):
    out = _tether("worker", env=_env(tmp_path))
    assert out.returncode == 2
    assert "database_url" in out.stderr and "Traceback" not in out.stderr


def test_worker_without_a_broker_says_which_setting(tmp_path, pg_url):
    out = _tether("worker", "--model", "scripted/plan", env=_env(tmp_path, TETHER_DATABASE_URL=pg_url))
    assert out.returncode == 2, out.stderr
    assert "broker_url" in out.stderr and "[dispatch]" in out.stderr and "Traceback" not in out.stderr


def test_serve_external_without_a_database_refuses_before_listening(tmp_path):
    out = _tether("serve", "--workers", "external", "--port", "0", "--model", "scripted/plan", env=_env(tmp_path))
    assert out.returncode == 2, out.stderr
    assert "database_url" in out.stderr and "listening" not in out.stderr


def test_a_database_url_with_a_password_is_never_printed(tmp_path):
    url = "postgresql://tether:hunter2@127.0.0.1:1/tether"
    out = _tether("runs", env=_env(tmp_path, TETHER_DATABASE_URL=url))
    assert out.returncode == 2, out.stderr
    assert "hunter2" not in out.stderr + out.stdout and "cannot connect to the database" in out.stderr
    (tmp_path / "config.toml").write_text('database_url = "mysql://root:hunter2@db/x"\n')
    out = _tether("runs", env=_env(tmp_path))
    assert out.returncode == 2 and "hunter2" not in out.stderr and "database_url" in out.stderr
