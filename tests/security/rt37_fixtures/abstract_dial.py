#!/usr/bin/python3
# A --net host agent dials the host's abstract unix sockets: a stream connect and a datagram
# sendto to names a host service made. Abstract names live in the network namespace, which a
# --net host agent shares, and no mount allowlist hides them.
#
# Usage: abstract_dial.py <dir> <name>
import socket, sys, time
d, name = sys.argv[1], sys.argv[2]
out = open(f"{d}/dial.log", "a", buffering=1)
end = time.time() + 30
done = set()
while time.time() < end and len(done) < 2:
    if "stream" not in done:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(f"\0{name}-stream"); s.sendall(b"agent stream secret")
            out.write("stream: connected\n"); done.add("stream")
        except OSError as e:
            if e.errno != 111: out.write(f"stream: {e.strerror}\n"); done.add("stream")
        s.close()
    if "dgram" not in done:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            c.sendto(b"agent dgram secret", f"\0{name}-dgram")
            out.write("dgram: sent\n"); done.add("dgram")
        except OSError as e:
            if e.errno != 111: out.write(f"dgram: {e.strerror}\n"); done.add("dgram")
        c.close()
    time.sleep(0.5)
out.write("done\n")
time.sleep(600)
