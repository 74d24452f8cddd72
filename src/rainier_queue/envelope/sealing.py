# SPDX-License-Identifier: MIT
"""Sealed payloads: a job's fields encrypted, its envelope left readable, keys that rotate.

A queue's storage is read by more people and programs than the jobs'
authors meant: a DBA at `psql`, a backup, a Kafka mirror, a support
engineer at `redis-cli`. A connection given a key ring (docs/encryption.md)
therefore stores each job's payload sealed, and only the payload: what a
worker and an operator need to route, count, delay and retry a job (id,
name, queue, attempts, due time) stays as it was, so every driver, the
failed store and the CLI work on sealed jobs unchanged.

The sealed form is a JSON object put where the payload was:

```json
{"rainier-queue:sealed": 1, "key": "k2", "data": "<base64url: nonce, ciphertext, tag>"}
```

- `1` is the form: AES-256-GCM (`cryptography`'s `AESGCM`), a fresh random
  96-bit nonce per seal, the 128-bit tag after the ciphertext.
- `key` is the id of the key that sealed it, so a ring of several keys opens
  jobs sealed by any of them, and seals new ones with its current key.
- The associated data binds the ciphertext to the form, the key id, the
  job's id and its name: a sealed payload copied into another job, or
  relabelled with another key id, does not open.

Opening a payload that will not open (a key id the ring lacks, bytes
changed) raises `SealedPayloadError`, naming the key id and the job, never
a key; the worker fails such a job into the failed store as it is, sealed,
so it can be retried once the key is back in the ring.

`cryptography` is imported only when a ring is built, so an application
that encrypts nothing never loads it; it is the `encryption` extra.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, PayloadError
from .encoding import decode_payload, encode_payload
from .model import JSONValue, QueuedJob

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SEALED = "rainier-queue:sealed"
"""The key that marks a payload as sealed (no job field can be named so: it has a colon)."""

FORM = 1
"""The sealed form this code writes and reads: AES-256-GCM, random 96-bit nonce."""

KEY_BYTES = 32
"""AES-256: every key is 32 random bytes, given as base64."""

NONCE_BYTES = 12
TAG_BYTES = 16

KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")
"""What a key id may be: short, printable, safe in a log line and a config string; never as
long as a key in base64 (43 characters and more), so a key given as an id is refused unshown."""

_AAD_PREFIX = b"rainier-queue:sealed:1\x00"


class SealedPayloadError(PayloadError):
    """A sealed payload that this ring cannot open. Names the key id and the job, never a key."""

    def __init__(self, message: str, *, key_id: str | None) -> None:
        super().__init__(message)
        self.key_id = key_id


def is_sealed(payload: object) -> bool:
    """Whether `payload` is in the sealed form (cheap: one type test and one key lookup)."""
    return type(payload) is dict and SEALED in payload


def sealed_key_id(payload: object) -> str | None:
    """The key id a sealed payload names, if it names a sane one."""
    if not isinstance(payload, dict) or SEALED not in payload:
        return None
    key_id = payload.get("key")
    return key_id if isinstance(key_id, str) and KEY_ID.fullmatch(key_id) else None


class KeyRing:
    """The keys one connection seals and opens payloads with, by id; the current one seals.

    Holds the ciphers, never the key text: its repr, its `str` and every
    error it raises name key ids only.
    """

    __slots__ = ("_ciphers", "current")

    def __init__(self, keys: Mapping[str, bytes], *, current: str | None = None) -> None:
        if not keys:
            raise ConfigurationError("an encryption key ring needs at least one key")
        aesgcm = _aesgcm()
        ciphers: dict[str, AESGCM] = {}
        for key_id, key in keys.items():
            check_key_id(key_id)
            if len(key) != KEY_BYTES:
                raise ConfigurationError(
                    f"encryption key `{key_id}` is {len(key)} bytes; AES-256 takes {KEY_BYTES} "
                    "random bytes (make one with `rainier-queue encryption-key`)"
                )
            ciphers[key_id] = aesgcm(key)
        chosen = current if current is not None else list(keys)[-1]
        if chosen not in ciphers:
            raise ConfigurationError(
                f"the current encryption key `{chosen}` is not in the key ring "
                f"({', '.join(f'`{k}`' for k in ciphers)})"
            )
        self._ciphers = ciphers
        self.current = chosen
        """The id of the key new payloads are sealed with."""

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of every key the ring opens with, in the order given."""
        return tuple(self._ciphers)

    def __repr__(self) -> str:
        return f"KeyRing(current={self.current!r}, keys={list(self._ciphers)!r})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a KeyRing holds keys and is not pickled; build it from config instead")

    # -- sealing ---------------------------------------------------------------------

    def seal(self, job: QueuedJob) -> QueuedJob:
        """`job` with its payload sealed under the current key (already sealed: as it is)."""
        if is_sealed(job.payload):
            return job
        return job.with_changes(payload=self._sealed(job, self.current))

    def _sealed(self, job: QueuedJob, key_id: str) -> dict[str, JSONValue]:
        plain = encode_payload(job.payload).encode("utf-8")
        nonce = os.urandom(NONCE_BYTES)
        data = nonce + self._ciphers[key_id].encrypt(nonce, plain, _aad(key_id, job))
        return {
            SEALED: FORM,
            "key": key_id,
            "data": base64.urlsafe_b64encode(data).decode("ascii"),
        }

    def reseal(self, job: QueuedJob) -> QueuedJob | None:
        """`job` sealed under the current key, or None if it already is (or was never sealed).

        `SealedPayloadError` if its payload does not open with this ring.
        """
        if not is_sealed(job.payload) or job.payload.get("key") == self.current:
            return None
        plain = self.open(job)
        return job.with_changes(payload=self._sealed(job.with_changes(payload=plain), self.current))

    # -- opening ---------------------------------------------------------------------

    def open(self, job: QueuedJob) -> JSONValue:
        """The payload of `job`, opened if it is sealed; `SealedPayloadError` if it will not."""
        payload = job.payload
        if not is_sealed(payload):
            return payload
        return self._opened(job, payload)

    def _opened(self, job: QueuedJob, sealed: dict[str, Any]) -> JSONValue:
        key_id = sealed_key_id(sealed)
        where = f"job `{job.name}` {job.id}"
        if key_id is None:
            raise SealedPayloadError(
                f"the sealed payload of {where} names no usable key id", key_id=None
            )
        if sealed.get(SEALED) != FORM:
            raise SealedPayloadError(
                f"the payload of {where} is sealed in form {sealed.get(SEALED)!r} with key "
                f"`{key_id}`; this version of rainier-queue reads form {FORM}",
                key_id=key_id,
            )
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise SealedPayloadError(
                f"the payload of {where} is sealed with key `{key_id}`, which is not in this "
                f"connection's key ring ({', '.join(f'`{k}`' for k in self._ciphers)}): put "
                "that key back in the ring",
                key_id=key_id,
            )
        try:
            data = base64.urlsafe_b64decode(_text(sealed.get("data")))
        except (binascii.Error, ValueError):
            data = b""
        if len(data) < NONCE_BYTES + TAG_BYTES:
            raise SealedPayloadError(
                f"the sealed payload of {where} (key `{key_id}`) has no ciphertext it could "
                "have been sealed with",
                key_id=key_id,
            )
        from cryptography.exceptions import InvalidTag

        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], _aad(key_id, job))
        except InvalidTag:
            raise SealedPayloadError(
                f"the sealed payload of {where} did not authenticate with key `{key_id}`: it "
                "was changed after it was sealed, or moved from another job",
                key_id=key_id,
            ) from None
        return decode_payload(plain)


def check_key_id(key_id: object) -> str:
    """`key_id` if it is a usable key id; a `ConfigurationError` saying what one is otherwise."""
    if not isinstance(key_id, str) or not KEY_ID.fullmatch(key_id):
        shown = repr(key_id) if isinstance(key_id, str) and len(key_id) <= 32 else "given"
        raise ConfigurationError(
            f"encryption key id {shown} is not usable: a key id is 1 to 32 letters, digits, "
            "`.`, `_` or `-`, starting with a letter or digit"
        )
    return key_id


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("not text")
    return value


def _aad(key_id: str, job: QueuedJob) -> bytes:
    """What the ciphertext is bound to: the form, the key id, the job's id and name."""
    return b"\x00".join(
        (_AAD_PREFIX, key_id.encode(), job.id.encode("utf-8"), job.name.encode("utf-8"))
    )


def _aesgcm() -> type[AESGCM]:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise ConfigurationError(
            "an encryption key is configured, and encrypting payloads needs the 'encryption' "
            "extra: pip install 'rainier-queue[encryption]'"
        ) from None
    return AESGCM


__all__ = [
    "FORM",
    "KEY_BYTES",
    "SEALED",
    "KeyRing",
    "SealedPayloadError",
    "check_key_id",
    "is_sealed",
    "sealed_key_id",
]
