/**
 * Red team 40: a --net host agent reaches the host's wildcard-bound services through addresses
 * the kernel treats as the host's own but that are no interface's address.
 *
 * The connect guard (`connect_guard.ts`) closes `127.0.0.0/8`, `0.0.0.0`, `::1`, `::`, multicast,
 * limited broadcast and the host's own addresses as `Deno.networkInterfaces()` lists them (each
 * IPv4 address and its subnet's broadcast, each IPv6 address). What the kernel delivers locally
 * is decided by the local routing table instead, which holds more than that list:
 * - an IPv4 address with a prefix on `lo` (`ip addr add 10.40.0.1/16 dev lo`, a service block
 *   on the loopback) makes the kernel add `local 10.40.0.0/16 dev lo`: every address of the
 *   block is the host's, but only `10.40.0.1` and `10.40.255.255` are listed;
 * - "AnyIP" local routes (`ip route add local 10.41.0.0/16 dev lo`,
 *   `ip -6 route add local fd40:41::/64 dev lo`: transparent proxies, anycast service blocks)
 *   belong to no interface at all.
 *
 * First run (stack in its own network namespace, those three set up before `cotal up`, a TCP and
 * UDP service on `0.0.0.0` and `[::]`): `127.0.0.1` and `10.40.0.1` were refused with EPERM
 * (TCP and UDP), while `10.40.7.7`, `10.41.3.3`, `::ffff:10.41.3.3` and `fd40:41::9` each
 * reached the service over TCP and UDP: the service logged all eight.
 *
 * The test passes when none of the agent's connects or datagrams reaches the host-only service.
 * About 30 s.
 */
import assert from "node:assert/strict";
import { rt40Stack, sleep, waitFor } from "./rt40_fixtures/stack.ts";

Deno.test({
  name:
    "red team 40 - a --net host agent cannot reach host services through local routes that are no interface's address",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt40Stack("lr", ["probe.py", "listener.py"], [
      ["ip", "addr", "add", "10.40.0.1/16", "dev", "lo"],
      ["ip", "route", "add", "local", "10.41.0.0/16", "dev", "lo"],
      ["ip", "-6", "route", "add", "local", "fd40:41::/64", "dev", "lo"],
    ]);
    let listener: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const tport = String(Number(s.port) + 1);
      const uport = String(Number(s.port) + 2);
      const got = `${s.work}/listener.log`;
      listener = s.spawnInNs(["/usr/bin/python3", `${s.work}/a/listener.py`, tport, uport, got]);
      await sleep(1_000);
      const controls = ["127.0.0.1", "10.40.0.1"];
      const targets = ["10.40.7.7", "10.41.3.3", "::ffff:10.41.3.3", "fd40:41::9"];
      const m = await s.spawnAgent(
        "mallory",
        "probe.py",
        [tport, uport, ...controls, ...targets],
        true,
      );
      assert.equal(m.code, 0, m.out);
      const agentLog = await waitFor(`${s.work}/a/probe.log`, /done/, 30_000);
      await sleep(1_000);
      const heard = await Deno.readTextFile(got).catch(() => "");
      console.log("agent:\n" + agentLog.trim());
      console.log("host-only wildcard service:\n" + heard.trim());
      assert.match(agentLog, /tcp 127\.0\.0\.1 refused: Operation not permitted/, "the guard runs");
      assert.match(agentLog, /tcp 10\.40\.0\.1 refused: Operation not permitted/, "own address");
      const reached = heard.split("\n").filter((l) => l.startsWith("got"));
      assert.deepEqual(reached, [], "no connect or datagram of the agent reaches a host service");
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
