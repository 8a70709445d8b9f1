#!/usr/bin/env python3
"""A user bug: rank 0 raises the same exception on every attempt (a bad sample in its shard); the other ranks
wait, as they would inside their first collective. No torch, so the test is fast."""
import os
import time


def load_sample(index):
    raise ValueError("bad sample %d in shard 0" % index)


rank = int(os.environ["RANK"])
print("rank %d of attempt %s starting" % (rank, os.environ.get("SHEPHERD_ATTEMPT")), flush=True)
time.sleep(1.0)
if rank == 0:
    load_sample(3)
time.sleep(600)
