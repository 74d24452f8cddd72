# SPDX-License-Identifier: MIT
"""The sealed form and the key ring (docs/encryption.md): what opens, what does not, and what
is never shown. The drivers' part is the contract suite's (tests/contract/test_encryption.py)."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import pickle
import sys

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueueManager
from rainier_queue.connections import QueueConfig, open_queue
from rainier_queue.encryption import key_ring_from_config
from rainier_queue.envelope import QueuedJob
from rainier_queue.envelope.sealing import SEALED, KeyRing, SealedPayloadError, is_sealed
from rainier_queue.errors import ConfigurationError, UnknownOption
from rainier_queue.queue import FailedJobListing
from rainier_queue.worker import Worker, WorkerOptions

K1, K2 = os.urandom(32), os.urandom(32)
T1, T2 = (base64.urlsafe_b64encode(k).decode() for k in (K1, K2))


def a_job(payload: object = None, name: str = "note") -> QueuedJob:
    return QueuedJob.create(name, {"text": "hello"} if payload is None else payload)


def test_a_sealed_payload_opens_with_the_ring_and_shows_nothing_of_itself() -> None:
    keys = KeyRing({"k1": K1})
    job = a_job()
    sealed = keys.seal(job)
    assert is_sealed(sealed.payload)
    assert sealed.payload["key"] == "k1"
    assert "hello" not in sealed.to_json()
    assert (sealed.id, sealed.name, sealed.queue) == (job.id, job.name, job.queue)
    assert keys.open(sealed) == {"text": "hello"}
    assert keys.seal(sealed) is sealed  # sealed once, never twice
    assert keys.seal(job).payload["data"] != sealed.payload["data"]  # a fresh nonce each time


def test_the_ring_seals_with_its_current_key_and_opens_with_any() -> None:
    old = KeyRing({"k1": K1}).seal(a_job())
    both = KeyRing({"k1": K1, "k2": K2})
    assert both.current == "k2"  # the last given
    assert both.seal(a_job()).payload["key"] == "k2"
    assert both.open(old) == {"text": "hello"}
    assert KeyRing({"k1": K1, "k2": K2}, current="k1").seal(a_job()).payload["key"] == "k1"
    moved = both.reseal(old)
    assert moved is not None
    assert moved.payload["key"] == "k2"
    assert KeyRing({"k2": K2}).open(moved) == {"text": "hello"}
    assert both.reseal(moved) is None  # already under the current key


def test_the_seal_is_bound_to_the_key_id_the_job_id_and_the_name() -> None:
    same = KeyRing({"k1": K1, "k2": K1})  # one key under two ids: only the bound id opens
    sealed = same.seal(a_job())
    relabelled = sealed.with_changes(payload={**sealed.payload, "key": "k1"})
    for changed in (
        relabelled,
        sealed.with_changes(id=a_job().id),
        sealed.with_changes(name="another-job"),
    ):
        with pytest.raises(SealedPayloadError, match="did not authenticate"):
            same.open(changed)
    assert same.open(sealed.with_changes(queue="elsewhere", attempts=2)) == {"text": "hello"}


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({SEALED: 1, "key": "k7", "data": "AAAA"}, "sealed with key `k7`, which is not in"),
        ({SEALED: 1, "key": "k1", "data": "not base64!"}, "no ciphertext"),
        ({SEALED: 1, "key": "k1", "data": 5}, "no ciphertext"),
        ({SEALED: 2, "key": "k1", "data": ""}, "sealed in form 2 with key `k1`"),
        ({SEALED: 1, "key": ["k1"]}, "names no usable key id"),
    ],
)
def test_a_payload_that_will_not_open_says_why_naming_the_key_id(
    payload: dict[str, object], says: str
) -> None:
    with pytest.raises(SealedPayloadError, match=says.replace("(", r"\(")) as caught:
        KeyRing({"k1": K1}).open(a_job(payload))
    assert T1 not in str(caught.value)


def test_no_key_shows_in_a_repr_and_a_ring_is_never_pickled() -> None:
    keys = KeyRing({"k1": K1, "k2": K2})
    assert repr(keys) == str(keys) == "KeyRing(current='k2', keys=['k1', 'k2'])"
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(keys)
    config = QueueConfig.from_mapping(
        {"connections": {"main": {"url": "memory://", "encryption": {"keys": {"k1": T1}}}}}
    )
    queue = config.open("main")
    for shown in (repr(config), repr(config.connections["main"]), repr(queue), queue.describe()):
        assert T1 not in shown


def test_keys_are_read_from_a_table_or_from_one_string() -> None:
    table = key_ring_from_config({"keys": {"k1": T1, "k2": T2}, "current": "k1"})
    assert (table.key_ids, table.current) == (("k1", "k2"), "k1")
    text = key_ring_from_config(f" k1:{T1}, k2:{T2.rstrip('=')} ")  # padding optional
    assert (text.key_ids, text.current) == (("k1", "k2"), "k2")
    standard = base64.b64encode(K1).decode()
    assert key_ring_from_config({"keys": {"k1": standard}}).open(
        KeyRing({"k1": K1}).seal(a_job())
    ) == {"text": "hello"}


REFUSED = [
    ({"keys": {"k1": base64.b64encode(os.urandom(16)).decode()}}, "key `k1` is 16 bytes"),
    ({"keys": {"k1": "%%%"}}, "key `k1` is not base64"),
    ({"keys": {"k1": ""}}, "key `k1` must be base64 text, and is empty"),
    ({"keys": {"k1": "${UNSET}"}}, "key `k1` still names an environment variable"),
    ({"keys": {"k1": T1}, "current": "k3"}, "the current encryption key `k3` is not in"),
    ({"keys": {}}, "needs `keys`"),
    ({"key": {"k1": T1}}, "does not take `key`"),
    ("", "is empty"),
    (f"k1={T1}", "item 1 is not `id:key`"),
    (f"k1:{T1} k1:{T2}", "names key `k1` twice"),
    (f"{T1.rstrip('=')}:k1", "key id given is not usable"),
    ({"keys": {"bad id": T1}}, "key id 'bad id' is not usable"),
    (5, "must be a table with `keys`"),
]
"""Key rings that cannot be used, each with what its error says (the ids: random keys are
no test name that every xdist process collects the same)."""


@pytest.mark.parametrize(("given", "says"), REFUSED, ids=[says for _, says in REFUSED])
def test_a_key_ring_that_cannot_be_used_is_refused_without_showing_a_key(
    given: object, says: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        key_ring_from_config(given)
    assert says in str(caught.value)
    assert T1 not in str(caught.value)
    assert T2 not in str(caught.value)
    if says.startswith("does not take"):
        assert isinstance(caught.value, UnknownOption)


def test_a_key_without_the_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'rainier-queue\[encryption\]'"):
        open_queue("memory://", {"encryption": {"keys": {"k1": T1}}})


def test_a_driver_that_stores_nothing_refuses_a_key_ring() -> None:
    with pytest.raises(ConfigurationError, match="no payload to encrypt"):
        open_queue("sync://", {"encryption": {"keys": {"k1": T1}}})


class Note(Job):
    name = "note"
    text: str

    async def handle(self, ctx: JobContext) -> None:
        ctx.resolve(list).append(self.text)


async def test_a_sealed_job_on_a_connection_without_a_ring_is_failed_saying_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker whose connection lost its `encryption` option: the job fails, kept sealed,
    with an error naming the key id and what to do; it never crashes or runs on nonsense."""
    queue = open_queue("memory://", {"encryption": {"keys": {"k1": T1}}})
    await QueueManager(queue, registry=JobRegistry([Note])).dispatch(Note(text="hello"))
    queue.payload_keys = None
    caplog.set_level(logging.DEBUG)
    worker = Worker(queue, JobRegistry([Note]), WorkerOptions(max_jobs=1))
    stats = await asyncio.wait_for(worker.run(), 60)
    assert stats.failed == 1
    assert isinstance(queue, FailedJobListing)
    [failed] = await queue.failed_jobs()
    assert "sealed with key `k1`, and this worker's connection has no `encryption`" in failed.error
    assert is_sealed(failed.job.payload)
    assert T1 not in caplog.text
