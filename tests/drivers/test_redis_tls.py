# SPDX-License-Identifier: MIT
"""What is Redis's own about TLS; the promises every driver keeps are tests/contract/test_tls.py.

`doctor` reads how jobs travel from the URL alone (a cluster's seeds each
counted), and `insecure_skip_verify` on a URL without TLS, or with a value
that is neither true nor false, is refused at startup.
"""

from __future__ import annotations

import pytest

from rainier_queue.drivers import open_queue
from rainier_queue.drivers.redis.connection import transport_warnings
from rainier_queue.errors import ConfigurationError


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://:pw@10.0.0.5:6379/0", "not encrypted"),
        ("redis://db.internal:6379/0?prefix=app:", "not encrypted"),
        ("redis-cluster://127.0.0.1:7000,10.0.0.2:7000", "not encrypted"),
        ("rediss://db.internal:6380/0?insecure_skip_verify=true", "is not checked"),
        ("redis://127.0.0.1:6379/0", None),
        ("redis://localhost/0", None),
        ("unix:///run/redis/redis.sock?db=2", None),
        ("rediss://db.internal:6380/0?ssl_ca_certs=/etc/ca.pem", None),
    ],
)
def test_doctor_warns_of_jobs_sent_in_the_clear_or_to_an_unchecked_server(
    url: str, says: str | None
) -> None:
    warnings = transport_warnings(url)

    if says is None:
        assert warnings == []
    else:
        (warning,) = warnings
        assert says in warning
        assert "pw" not in warning  # the password never shows


def test_insecure_skip_verify_without_tls_or_with_a_vague_value_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="does not use TLS"):
        open_queue("redis://127.0.0.1:6379/0?insecure_skip_verify=true")
    with pytest.raises(ConfigurationError, match="neither true nor false"):
        open_queue("rediss://localhost:6380/0?insecure_skip_verify=maybe")
