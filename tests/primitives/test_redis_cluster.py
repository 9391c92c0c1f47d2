"""RedisTokenBucket on a real three-primary Redis Cluster started by the tests (conftest
``redis_cluster``): slot routing by hash tag, MOVED and ASK redirects, and four processes
sharing buckets on all three nodes without exceeding the window bound."""

from __future__ import annotations

import pytest

from concur.primitives import RedisTokenBucket

redis = pytest.importorskip("redis")
from redis.cluster import RedisCluster  # noqa: E402

pytestmark = pytest.mark.redis


def cluster_client(servers) -> RedisCluster:
    return RedisCluster(host="127.0.0.1", port=servers[0].port)


def tags_on_each_node(cluster: RedisCluster) -> dict[int, str]:
    """One bucket name per node port whose key ``concur:tb:{name}`` lives on that node."""
    found: dict[int, str] = {}
    for i in range(1000):
        node = cluster.get_node_from_key(f"concur:tb:{{user{i}}}")
        found.setdefault(int(node.port), f"user{i}")
        if len(found) == 3:
            return found
    raise AssertionError("three nodes, but no names found on all of them")


def node_ids(servers) -> dict[int, str]:
    return {s.port: redis.Redis(port=s.port).execute_command("CLUSTER", "MYID").decode() for s in servers}


def test_each_bucket_goes_to_its_slot_owner(redis_cluster):
    cluster = cluster_client(redis_cluster)
    for port, tag in tags_on_each_node(cluster).items():
        bucket = RedisTokenBucket(cluster, tag, 10, 1e-6, budget=5)
        cluster.delete(bucket.key)
        assert bucket.where == f"127.0.0.1:{port}"
        assert [bucket.try_acquire(4).allowed for _ in range(3)] == [True, True, False]
        assert float(redis.Redis(port=port).hget(bucket.key, "tokens")) == pytest.approx(2.0)
    cluster.close()


def set_slot_owner(servers, slot: int, owner_port: int) -> None:
    owner = node_ids(servers)[owner_port]
    for s in sorted(servers, key=lambda s: s.port != owner_port):  # the new owner first
        redis.Redis(port=s.port).execute_command("CLUSTER", "SETSLOT", slot, "NODE", owner)


def bucket_and_another_node(cluster: RedisCluster) -> tuple[RedisTokenBucket, int, int, int]:
    """A fresh bucket, its node's port, another node's port, and the bucket key's slot."""
    (home, tag), (other, _) = list(tags_on_each_node(cluster).items())[:2]
    bucket = RedisTokenBucket(cluster, tag, 10, 1e-6, on_error="closed", budget=5)
    cluster.delete(bucket.key)
    return bucket, home, other, cluster.keyslot(bucket.key)


def test_moved_is_followed_and_remembered(redis_cluster):
    cluster = cluster_client(redis_cluster)
    bucket, old_port, new_port, slot = bucket_and_another_node(cluster)
    assert bucket.where == f"127.0.0.1:{old_port}"  # from the client's slot map, no call yet
    set_slot_owner(redis_cluster, slot, new_port)  # a resharding moves the (empty) slot
    try:
        assert bucket.try_acquire(4).allowed  # MOVED, followed within the same decision
        assert bucket.where == f"127.0.0.1:{new_port}"  # and remembered
        assert bucket.try_acquire(4).allowed and not bucket.try_acquire(4).allowed
        assert bucket.errors == 0
        assert redis.Redis(port=new_port).exists(bucket.key)
        assert redis.Redis(port=old_port).execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    finally:
        redis.Redis(port=new_port).delete(bucket.key)
        set_slot_owner(redis_cluster, slot, old_port)
    cluster.close()


def test_ask_is_followed_during_a_migration(redis_cluster):
    cluster = cluster_client(redis_cluster)
    bucket, source_port, target_port, slot = bucket_and_another_node(cluster)
    ids = node_ids(redis_cluster)
    source, target = redis.Redis(port=source_port), redis.Redis(port=target_port)
    target.script_flush()  # the target has never seen the script: SCRIPT LOAD + ASKING + EVALSHA
    target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source_port])
    source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target_port])
    try:
        assert bucket.try_acquire(4).allowed  # the key is not on the source: ASK, then ASKING on the target
        assert bucket.where == f"127.0.0.1:{source_port}"  # ASK is for one command only
        assert bucket.try_acquire(4).allowed and not bucket.try_acquire(4).allowed  # state on the target
        assert bucket.errors == 0
    finally:
        pipe = target.pipeline(transaction=False)
        pipe.execute_command("ASKING")
        pipe.delete(bucket.key)
        pipe.execute()
        for node in (source, target):
            node.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
    cluster.close()


def _cluster_worker(port: int, tags: list[str], capacity: float, rate: float, calls: int, barrier, results) -> None:
    cluster = RedisCluster(host="127.0.0.1", port=port)
    buckets = [RedisTokenBucket(cluster, tag, capacity, rate, on_error="closed", budget=10) for tag in tags]
    for bucket in buckets:
        bucket.load()
    barrier.wait(timeout=120)
    admitted = [0] * len(buckets)
    for i in range(calls):
        k = i % len(buckets)
        admitted[k] += buckets[k].try_acquire().allowed
    results.put((admitted, sum(b.errors for b in buckets)))


def test_four_processes_admit_no_more_than_the_window_bound_on_each_node(redis_cluster, fleet):
    capacity, rate, processes, calls = 15, 10, 4, 450
    cluster = cluster_client(redis_cluster)
    tags = list(tags_on_each_node(cluster).values())  # one bucket on each primary
    for tag in tags:
        cluster.delete(f"concur:tb:{{{tag}}}")
    clock = redis.Redis(port=redis_cluster[0].port)  # the nodes share this host's clock
    args = (redis_cluster[0].port, tags, capacity, rate, calls)
    outcomes, elapsed = fleet(_cluster_worker, args, processes, clock)
    assert sum(errors for _, errors in outcomes) == 0, outcomes
    for k, tag in enumerate(tags):
        admitted = sum(per_key[k] for per_key, _ in outcomes)
        assert capacity <= admitted <= capacity + rate * elapsed, (tag, admitted, elapsed, outcomes)
    assert sum(sum(per_key) for per_key, _ in outcomes) < processes * calls  # throttled
    cluster.close()
