# SPDX-License-Identifier: MIT
"""A connection's `encryption` option read into a `KeyRing`, and its stored jobs moved to
the ring's current key (`reencrypt`), the keys' text never repeated.

Keys are secrets that come from the environment, so the option takes them
the two ways a deployment hands secrets over (docs/encryption.md):

```toml
[connections.main.encryption]          # a table: one variable per key
keys = { k1 = "${QUEUE_KEY_1}", k2 = "${QUEUE_KEY_2}" }
current = "k2"                         # which one seals; the last listed when left out

[connections.main]                     # or the whole ring in one variable,
encryption = "${QUEUE_KEYS}"           # "k1:BASE64 k2:BASE64", the last one current
```

A key is 32 random bytes in base64 (standard or URL-safe, padding
optional). Every message here names the key id and what is wrong with the
key (its length, that it is not base64), never the key.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from .envelope import QueuedJob
from .envelope.sealing import KeyRing, SealedPayloadError, check_key_id, sealed_key_id
from .errors import ConfigurationError, UnknownOption
from .queue import Queue, RewritesStoredJobs

OPTION = "encryption"
"""The connection option that holds the key ring."""

_TABLE_KEYS = frozenset({"keys", "current"})
_PAIR_SEPARATORS = re.compile(r"[\s,;]+")


def key_ring_from_config(value: object, *, where: str = "the `encryption` option") -> KeyRing:
    """The key ring a connection's `encryption` option describes; `ConfigurationError` if none.

    Needs the `encryption` extra (`cryptography`); without it, the error names the extra.
    """
    if isinstance(value, str):
        return KeyRing(_pairs(value, where))
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{where} must be a table with `keys` (and `current`), or a string of `id:key` pairs"
        )
    for name in value:
        if name not in _TABLE_KEYS:
            raise UnknownOption(where, str(name), _TABLE_KEYS)
    keys = value.get("keys")
    if isinstance(keys, str):
        ring = _pairs(keys, f"{where}'s `keys`")
    elif isinstance(keys, Mapping) and keys:
        ring = {check_key_id(key_id): _decoded(key_id, key, where) for key_id, key in keys.items()}
    else:
        raise ConfigurationError(
            f"{where} needs `keys`: a table of key id to base64 key, such as "
            '{ k1 = "${QUEUE_KEY_1}" }, or a string of `id:key` pairs'
        )
    current = value.get("current")
    if current is not None and not isinstance(current, str):
        raise ConfigurationError(f"{where}'s `current` must be a key id, as text")
    return KeyRing(ring, current=current)


def _pairs(text: str, where: str) -> dict[str, bytes]:
    """`"k1:KEY k2:KEY"` (spaces, commas or semicolons between) as ids to key bytes, in order."""
    ring: dict[str, bytes] = {}
    for n, pair in enumerate(p for p in _PAIR_SEPARATORS.split(text.strip()) if p):
        key_id, colon, key = pair.partition(":")
        if not colon:
            raise ConfigurationError(
                f"{where}: item {n + 1} is not `id:key` (each key is written after its id "
                "and a colon, such as k1:BASE64)"
            )
        if key_id in ring:
            raise ConfigurationError(f"{where} names key `{check_key_id(key_id)}` twice")
        ring[check_key_id(key_id)] = _decoded(key_id, key, where)
    if not ring:
        raise ConfigurationError(
            f"{where} is empty: give at least one `id:key` pair (is its variable set?)"
        )
    return ring


def _decoded(key_id: str, key: object, where: str) -> bytes:
    if not isinstance(key, str) or not key.strip():
        raise ConfigurationError(f"{where}: key `{key_id}` must be base64 text, and is empty")
    text = key.strip()
    if "${" in text:
        raise ConfigurationError(
            f"{where}: key `{key_id}` still names an environment variable; set it"
        )
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded.encode("ascii"))
        return base64.b64decode(padded.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise ConfigurationError(
            f"{where}: key `{key_id}` is not base64 (make one with `rainier-queue encryption-key`)"
        ) from None


@dataclass(slots=True)
class Reencrypted:
    """What a `reencrypt` did: jobs moved per old key id, and those that would not open."""

    keys: KeyRing = field(repr=False)
    moved: Counter[str] = field(default_factory=Counter)
    """Jobs moved to `current`, by the key id they were sealed with."""
    failures: list[str] = field(default_factory=list)
    """Why each job that would not open was left as it is (key ids, never keys)."""
    count: int = 0
    """Jobs the driver wrote back (fewer than `moved` if some changed meanwhile)."""
    in_flight: int = 0
    """Jobs held by workers that the driver could not change under them (Redis), left
    under their key: run `reencrypt` again once they have settled."""

    @property
    def current(self) -> str:
        """The key id the jobs were moved to."""
        return self.keys.current

    def __call__(self, job: QueuedJob) -> QueuedJob | None:
        """The `Rewrite` a driver is handed: reseal under the current key; never raises."""
        try:
            new = self.keys.reseal(job)
        except SealedPayloadError as exc:
            self.failures.append(f"left as it is: {exc}")
            return None
        except Exception as exc:  # opened, but not a payload: kept as it is, and said
            # By the error's kind alone: its text could quote the opened payload.
            self.failures.append(
                f"left as it is: the payload of job `{job.name}` {job.id} opened with key "
                f"`{sealed_key_id(job.payload)}` but could not be sealed again "
                f"({type(exc).__name__})"
            )
            return None
        if new is not None:
            self.moved[sealed_key_id(job.payload) or "?"] += 1
        return new


async def reencrypt(queue: Queue) -> Reencrypted:
    """Move every job `queue` stores (waiting, delayed, running, failed) to its ring's
    current key. `ConfigurationError` if it has no ring; `UnsupportedOperation` if its
    driver cannot change a stored job (a log, a broker: docs/encryption.md)."""
    keys = queue.payload_keys
    if keys is None:
        raise ConfigurationError(f"{queue.describe()} has no `encryption` key ring")
    if not isinstance(queue, RewritesStoredJobs):
        from .errors import UnsupportedOperation

        raise UnsupportedOperation(
            f"the {queue.name} driver cannot change a job once it is stored, so its jobs stay "
            f"sealed with the key they were pushed with. New pushes use `{keys.current}` "
            "already; keep the older keys in the ring until the jobs sealed with them have "
            "drained (`rainier-queue size`), then remove them (docs/encryption.md)"
        )
    outcome = Reencrypted(keys=keys)
    done = await queue.rewrite_payloads(outcome)
    outcome.count, outcome.in_flight = done.rewritten, done.in_flight
    return outcome


__all__ = ["OPTION", "Reencrypted", "key_ring_from_config", "reencrypt"]
