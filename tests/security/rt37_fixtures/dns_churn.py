#!/usr/bin/python3
# Red team 37: connects to port 53 on the host's loopback are exempt from the connect rate of
# a --net host agent (connect_guard.ts allows the DNS port before counting). This connects
# and closes towards <host>:53 from <procs> processes for <seconds>, and logs its rate.
# Usage: dns_churn.py <dir> <host> <procs> <seconds>
import socket, sys, time, os
d, host, procs, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
out = open(f"{d}/churn.log", "a", buffering=1)
for k in range(procs):
    if os.fork() == 0:
        r = {}; t0 = time.time()
        while time.time() - t0 < secs:
            s = socket.socket()
            try: s.connect((host, 53)); key = "ok"
            except OSError as e: key = e.strerror
            s.close(); r[key] = r.get(key, 0) + 1
        out.write(f"child {k}: {r} in {secs}s\n"); os._exit(0)
for k in range(procs): os.wait()
out.write("done\n")
time.sleep(600)
