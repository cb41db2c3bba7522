/**
 * Red team 37: a --net host agent sends UDP-Lite datagrams to host loopback services past the
 * connect guard.
 *
 * `connect_guard.ts` refuses loopback connects (`BPF_CGROUP_INET4/6_CONNECT`) and unconnected
 * UDP sends (`UDP4/6_SENDMSG`) but to the agent's relay and DNS. The kernel runs the connect
 * hook only through a protocol's `pre_connect` (`BPF_CGROUP_PRE_CONNECT_ENABLED`), which TCP
 * and UDP have and UDP-Lite (`IPPROTO_UDPLITE`, 136; allowed by the seccomp filter, which
 * checks the family and type but not the protocol) does not; and the sendmsg hook runs only
 * for a send with no connected peer. So `socket(AF_INET, SOCK_DGRAM, 136)`, `connect
 * 127.0.0.1:P`, `send` reaches a host-only listener on P, IPv4 and IPv6 alike (first run: both
 * connected sends arrived; the plain UDP and unconnected UDP-Lite sends were refused with
 * EPERM). Only UDP-Lite listeners are reachable (rare: it is a different IP protocol), so the
 * reach is narrow; the test freezes that the guard's "no loopback but relay and DNS" holds for
 * every datagram protocol the filter lets the agent open. About 30 s.
 */
import assert from "node:assert/strict";
import { rt37Stack, sleep } from "./rt37_fixtures/stack.ts";

Deno.test({
  name:
    "red team 37 - a --net host agent cannot reach a host loopback UDP-Lite service by connecting its socket first",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt37Stack("ul", ["udplite.py", "udplite_listener.py"]);
    let listener: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const svcPort = String(Number(s.port) + 1);
      const got = `${s.work}/listener.log`;
      listener = new Deno.Command("nsenter", {
        args: [
          `--net=/proc/${s.holder}/ns/net`,
          "/usr/bin/python3",
          `${s.work}/a/udplite_listener.py`,
          svcPort,
          got,
        ],
        stdout: "null",
        stderr: "null",
      }).spawn();
      await sleep(1_000);
      const m = await s.spawnHostAgent("mallory", "udplite.py", [svcPort]);
      assert.equal(m.code, 0, m.out);
      let agentLog = "";
      for (let i = 0; i < 30 && !/done/.test(agentLog); i++) {
        await sleep(1_000);
        agentLog = await Deno.readTextFile(`${s.work}/a/udplite.log`).catch(() => "");
      }
      await sleep(1_000);
      const heard = await Deno.readTextFile(got).catch(() => "");
      console.log("agent:\n" + agentLog.trim());
      console.log("host-only loopback service:\n" + heard.trim());
      assert.match(agentLog, /udp\/v4 connect\+send: Operation not permitted/, "the guard runs");
      const reached = heard.split("\n").filter((l) => l.startsWith("got"));
      assert.deepEqual(reached, [], "no datagram of the agent reaches a host loopback service");
    } finally {
      try {
        listener?.kill("SIGKILL");
        await listener?.status;
      } catch {
        // Gone.
      }
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
    }
  },
});
