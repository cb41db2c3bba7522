/**
 * Red team 37: a --net host agent squats the host's abstract unix socket names.
 *
 * docs/SECURITY.md lists the host's abstract unix sockets as shared with a `--net host` agent
 * (a cgroup hook for unix connects needs Linux 6.7). What that note and the listen ban
 * (seccomp, red team 34) leave open is `bind(2)`: a bound stream socket that never listens
 * still holds its abstract name, so a host service that binds the name after the agent fails
 * with EADDRINUSE (its start is denied), and a bound datagram socket receives what host
 * processes send to the name (a notify or log socket's traffic). First run: both names bound
 * inside the agent, the host service's bind refused "Address already in use", the host's
 * datagram read by the agent. The test passes when the agent cannot take a name a host service
 * then needs. About 30 s.
 */
import assert from "node:assert/strict";
import { rt37Stack, sleep } from "./rt37_fixtures/stack.ts";

const HOST_SIDE = `
import socket, sys
name = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind("\\0" + name + "-stream"); s.listen(1); print("host service bind: ok")
except OSError as e:
    print("host service bind:", e.strerror)
c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    c.sendto(b"host secret datagram", "\\0" + name + "-dgram"); print("host datagram: sent")
except OSError as e:
    print("host datagram:", e.strerror)
`;

Deno.test({
  name:
    "red team 37 - a --net host agent cannot take a host service's abstract unix socket name (bind without listen)",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt37Stack("ab", ["abstract_squat.py"]);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const name = `rt37-svc-${crypto.randomUUID().slice(0, 8)}`;
      const m = await s.spawnHostAgent("mallory", "abstract_squat.py", [name]);
      assert.equal(m.code, 0, m.out);
      let log = "";
      for (let i = 0; i < 30 && !/done/.test(log); i++) {
        await sleep(1_000);
        log = await Deno.readTextFile(`${s.work}/a/squat.log`).catch(() => "");
      }
      const host = await s.inNs(["/usr/bin/python3", "-c", HOST_SIDE, name]);
      await sleep(2_000);
      log = await Deno.readTextFile(`${s.work}/a/squat.log`).catch(() => "");
      console.log("agent:\n" + log.trim());
      console.log("host:\n" + host.out.trim());
      assert.match(host.out, /host service bind: ok/, "the host service gets its own name");
      assert.doesNotMatch(log, /received/, "the agent reads no host datagram");
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
    }
  },
});
