/**
 * Red team 38: a --net host agent reaches the host's own listeners through the host's
 * non-loopback addresses, past the connect guard.
 *
 * `connect_guard.ts` treats as "the host's loopback" only `127.0.0.0/8`, `0.0.0.0`, `::1`, `::`
 * and their IPv4-mapped forms. Every address of the host's own interfaces (its LAN address, a
 * unique-local or link-local IPv6 address, a docker bridge's gateway) is local too: a connect or
 * send there is routed through `lo` and reaches every service bound to the wildcard address
 * (`0.0.0.0`/`::`: dev servers started with `--host`, databases, docker-proxy's published ports,
 * the broker or its monitoring port when given a `--host`/`--monitor` host of `0.0.0.0`). A host
 * firewall on the LAN interface does not apply, since the packets never cross it. For UDP, the
 * directed broadcast of the host's subnet (with `SO_BROADCAST`, which needs no privilege) is
 * delivered to the same listeners. The guard counts such TCP connects like any remote one, but
 * refuses none of them.
 *
 * First run (a stack in its own network namespace with a veth carrying 10.38.0.1/24 and
 * fd38::1/64; a TCP+UDP service on 0.0.0.0 and [::]): 127.0.0.1 and ::1 were refused with
 * EPERM for TCP and UDP, while 10.38.0.1, ::ffff:10.38.0.1 and fd38::1 reached the service over
 * TCP and UDP, and 10.38.0.255 over UDP; the service logged all seven.
 *
 * The test passes when none of the agent's connects or datagrams reaches the host-only service.
 * About 30 s.
 */
import assert from "node:assert/strict";
import { HOST_V4, HOST_V4_BCAST, HOST_V6, rt38Stack, sleep } from "./rt38_fixtures/stack.ts";

Deno.test({
  name:
    "red team 38 - a --net host agent cannot reach the host's wildcard-bound services through the host's own non-loopback addresses",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt38Stack("ha", ["hostaddr.py", "wild_listener.py"]);
    let listener: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const tport = String(Number(s.port) + 1);
      const uport = String(Number(s.port) + 2);
      const got = `${s.work}/listener.log`;
      listener = s.spawnInNs([
        "/usr/bin/python3",
        `${s.work}/a/wild_listener.py`,
        tport,
        uport,
        got,
      ]);
      await sleep(1_000);
      const targets = ["127.0.0.1", "::1", HOST_V4, `::ffff:${HOST_V4}`, HOST_V6, HOST_V4_BCAST];
      const m = await s.spawnAgent("mallory", "hostaddr.py", [tport, uport, ...targets], true);
      assert.equal(m.code, 0, m.out);
      let agentLog = "";
      for (let i = 0; i < 30 && !/done/.test(agentLog); i++) {
        await sleep(1_000);
        agentLog = await Deno.readTextFile(`${s.work}/a/hostaddr.log`).catch(() => "");
      }
      await sleep(1_000);
      const heard = await Deno.readTextFile(got).catch(() => "");
      console.log("agent:\n" + agentLog.trim());
      console.log("host-only wildcard service:\n" + heard.trim());
      assert.match(agentLog, /tcp 127\.0\.0\.1 refused: Operation not permitted/, "the guard runs");
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
