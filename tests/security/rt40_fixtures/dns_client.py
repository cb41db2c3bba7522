#!/usr/bin/python3
# Red team 40: an honest host process asking the host's resolver: one query every 50 ms, each
# waiting up to 500 ms for its answer, for <secs> seconds. Prints "answered <a> of <n>".
# Usage: dns_client.py <addr> <port> <secs>
import socket, sys, time, os
addr, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((addr, port))
n = a = 0
end = time.time() + secs
while time.time() < end:
    q = b"honest %d %s" % (n, os.urandom(4).hex().encode())
    n += 1
    s.send(q)
    s.settimeout(0.5)
    t = time.time()
    try:
        while True:
            r = s.recv(512)
            if r == b"A " + q: a += 1; break
            s.settimeout(max(0.001, 0.5 - (time.time() - t)))
    except socket.timeout:
        pass
    time.sleep(0.05)
print(f"answered {a} of {n}")
