"""A rank for the relay end-to-end test: reports a step every 0.1 s through shepherd_client, and saves (and
reports) a checkpoint whenever the file <work>/checkpoint-now appears, then writes <work>/saved-<step>.
Usage: relay_rank.py WORK_DIR CKPT_DIR"""
import os
import sys
import time

from shepherd_client import ShepherdClient

work, ckpt_dir = sys.argv[1], sys.argv[2]
client = ShepherdClient.from_env()
trigger = os.path.join(work, "checkpoint-now")
step = 0
while True:
    step += 1
    time.sleep(0.1)
    client.step(step, loss=1.0 / step, step_time_s=0.1)
    if os.path.exists(trigger):
        os.unlink(trigger)
        path = os.path.join(ckpt_dir, "step-%d.pt" % step)
        with open(path, "w") as f:
            f.write("state")
        client.checkpoint_saved(step, path, replicated=True)
        with open(os.path.join(work, ".saved"), "w") as f:
            f.write(str(step))
        os.rename(os.path.join(work, ".saved"), os.path.join(work, "saved-%d" % step))
