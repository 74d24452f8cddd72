# SPDX-License-Identifier: MIT
"""Where the queues are, from the environment, as a user meets it on the command line.

A connection that names its `driver` and leaves its `url` out takes the URL
from the platform's variable (`REDIS_URL` here, against the real Redis); a
`RAINIER_QUEUE_URL` beside a config file that declares connections is
refused, naming both, where it used to win without a word; a flag still
chooses; and an option spelt the upstream's way in a config file is
refused with the name it has here.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import redis

from ..services import require_port
from .harness import APP, ROOT, clean_env, no_traceback, run

PAYLOAD = '{"text": "x"}'


def env_here(**extra: str) -> dict[str, str]:
    """The environment of a command run in a folder of its own, the sample jobs importable."""
    return clean_env(PYTHONPATH=str(ROOT), **extra)


def write_config(folder: Path, body: str) -> Path:
    config = folder / "rainier-queue.toml"
    config.write_text(f'app = "{APP}"\n{body}', encoding="utf-8")
    return config


def test_a_connection_without_a_url_takes_it_from_redis_url(tmp_path: Path) -> None:
    require_port("redis", 6379)
    prefix = f"rq{uuid.uuid4().hex[:10]}:"
    write_config(tmp_path, f'[connections.hot]\ndriver = "redis"\nprefix = "{prefix}"\n')
    env = env_here(REDIS_URL="redis://127.0.0.1:6379/0")
    client = redis.Redis(host="127.0.0.1", port=6379)
    try:
        pushed = run("dispatch", "note", "--payload", PAYLOAD, cwd=tmp_path, env=env)
        sizes = run("size", "--json", "default", cwd=tmp_path, env=env)

        assert pushed.code == 0, pushed.output
        assert sizes.json() == {"default": 1}
        assert client.keys(f"{prefix}*"), "the job is on the Redis REDIS_URL names"
    finally:
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
        client.close()


def test_a_connection_whose_variable_is_not_set_is_refused_naming_it_when_used(
    tmp_path: Path,
) -> None:
    write_config(
        tmp_path,
        'default = "main"\n'
        f'[connections.main]\nurl = "sqlite:///{tmp_path / "jobs.db"}"\n'
        '[connections.hot]\ndriver = "redis"\n',
    )

    used = run("--connection", "hot", "size", "default", cwd=tmp_path, env=env_here())
    other = run("size", "--json", "default", cwd=tmp_path, env=env_here())

    assert used.code == 2, used.output
    assert "connection `hot`" in used.stderr
    assert "REDIS_URL, which is not set" in used.stderr
    assert no_traceback(used)
    assert other.code == 0, other.output
    assert other.json() == {"default": 0}, "a connection that is not used needs no variable"


def test_rainier_queue_url_beside_a_config_with_connections_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path, f'[connections.main]\nurl = "sqlite:///{tmp_path / "file.db"}"\n'
    )
    env = env_here(RAINIER_QUEUE_URL=f"sqlite:///{tmp_path / 'env.db'}")

    refused = run("dispatch", "note", "--payload", PAYLOAD, cwd=tmp_path, env=env)

    assert refused.code == 2, refused.output
    assert "RAINIER_QUEUE_URL (sqlite:///" in refused.stderr
    assert f"{config} (connections `main`)" in refused.stderr
    assert "neither wins silently" in refused.stderr
    assert "Unset RAINIER_QUEUE_URL to use the file" in refused.stderr
    assert "--url URL" in refused.stderr
    assert f"--config {config}" in refused.stderr
    assert no_traceback(refused)
    assert not (tmp_path / "env.db").exists(), "nothing was opened, let alone dispatched"
    assert not (tmp_path / "file.db").exists()


def test_a_flag_still_chooses_between_the_url_and_the_file(tmp_path: Path) -> None:
    write_config(tmp_path, f'[connections.main]\nurl = "sqlite:///{tmp_path / "file.db"}"\n')
    env_url = f"sqlite:///{tmp_path / 'env.db'}"
    env = env_here(RAINIER_QUEUE_URL=env_url)

    by_flag = run("--url", env_url, "dispatch", "note", "--payload", PAYLOAD, cwd=tmp_path, env=env)
    from_file = run("size", "--json", "default", cwd=tmp_path, env=env_here())

    assert by_flag.code == 0, by_flag.output
    assert from_file.json() == {"default": 0}, "the flag's URL got the job, not the file's"
    by_url = run("--url", env_url, "size", "--json", "default", cwd=tmp_path, env=env_here())
    assert by_url.json() == {"default": 1}


def test_rainier_queue_url_beside_a_file_that_declares_no_connection_still_works(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.rainier-queue]\nqueues = ["default"]\n', encoding="utf-8"
    )
    url = f"sqlite:///{tmp_path / 'env.db'}"
    env = env_here(RAINIER_QUEUE_URL=url, RAINIER_QUEUE_APP=APP)

    pushed = run("dispatch", "note", "--payload", PAYLOAD, cwd=tmp_path, env=env)

    assert pushed.code == 0, pushed.output
    sizes = run(
        "--url", url, "size", "--json", "default", cwd=tmp_path, env=env_here(RAINIER_QUEUE_APP=APP)
    )
    assert sizes.json() == {"default": 1}


def test_an_upstream_option_in_a_config_file_is_refused_with_our_name(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        f'[connections.main]\nurl = "sqlite:///{tmp_path / "jobs.db"}"\nretry_after = 90\n',
    )

    refused = run("size", "default", cwd=tmp_path, env=env_here())

    assert refused.code == 2, refused.output
    assert "queue connection `main`: the `sqlite` driver does not take `retry_after`" in (
        refused.stderr
    )
    assert "this library calls it `lease`" in refused.stderr
    assert no_traceback(refused)
