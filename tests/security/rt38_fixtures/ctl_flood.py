#!/usr/bin/python3
# Red team 38: connect to the supervisor's control socket (bound into the sandbox at
# /run/cotal/control.sock) and close, in a loop, from several processes. The supervisor's
# accept loop takes every connection, closes those past its two, and has no accept rate.
# Usage: ctl_flood.py <dir> <procs> <seconds> [socket path]
import os, socket, sys, time
d, procs, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
path = sys.argv[4] if len(sys.argv) > 4 else "/run/cotal/control.sock"
out = open(f"{d}/ctl_flood.log", "a", buffering=1)
def say(*a): out.write("%.1f " % time.time() + " ".join(str(x) for x in a) + "\n")
say("start", procs, "procs", secs, "s", path)
kids = []
for i in range(procs):
    pid = os.fork()
    if pid == 0:
        end = time.time() + secs; n = 0; err = 0
        while time.time() < end:
            for _ in range(200):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(path); n += 1
                except OSError:
                    err += 1
                s.close()
        say("proc", i, "connects", n, "errors", err)
        os._exit(0)
    kids.append(pid)
for k in kids: os.waitpid(k, 0)
say("done")
time.sleep(600)
