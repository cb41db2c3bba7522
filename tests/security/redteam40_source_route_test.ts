/**
 * Red team 40: a --net host agent source-routes its packets to the host's own listeners while
 * naming a remote destination to the connect guard.
 *
 * The guard's programs read the address given to `connect`/`sendto`. An IPv4 loose source route
 * (`IP_OPTIONS` with LSRR) makes the kernel route towards the option's first hop instead, and an IPv6 routing header (`IPV6_RTHDR`: type 2, or a type 4 segment list)
 * towards the header's address. Here the first hop is `127.0.0.1` / `::1` or the host's own
 * address, the named destination a documentation (remote) address.
 *
 * First run (stack in its own network namespace, a veth with `10.40.0.1/24` and `fd40::1/64`,
 * default routes through it, a TCP and UDP service on `0.0.0.0` and `[::]`): setting the LSRR
 * option was refused with EPERM (the kernel wants CAP_NET_RAW for it from an unprivileged
 * uid); a type 2 header was refused (EINVAL); a type 4 segment list was accepted, its datagrams
 * sent and its TCP connects timed out: the service heard nothing. A type 4 packet does reach the
 * first hop, but the host drops it (`seg6_enabled` 0), and where a host accepts segment routing
 * the final destination is the named, remote one. Held, by the kernel as much as by the guard.
 *
 * The test passes when the service hears nothing. About 20 s.
 */
import assert from "node:assert/strict";
import { rt40Stack, sleep, waitFor } from "./rt40_fixtures/stack.ts";

Deno.test({
  name: "red team 40 - a --net host agent cannot source-route to the host's own listeners",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt40Stack("sr", ["srcroute.py", "listener.py"], [
      ["ip", "link", "add", "rt40a", "type", "veth", "peer", "name", "rt40b"],
      ["ip", "addr", "add", "10.40.0.1/24", "dev", "rt40a"],
      ["ip", "-6", "addr", "add", "fd40::1/64", "dev", "rt40a", "nodad"],
      ["ip", "link", "set", "rt40a", "up"],
      ["ip", "link", "set", "rt40b", "up"],
      ["ip", "route", "add", "default", "via", "10.40.0.2"],
      ["ip", "-6", "route", "add", "default", "via", "fd40::2"],
    ]);
    let listener: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const tport = String(Number(s.port) + 1);
      const uport = String(Number(s.port) + 2);
      const got = `${s.work}/listener.log`;
      listener = s.spawnInNs(["/usr/bin/python3", `${s.work}/a/listener.py`, tport, uport, got]);
      await sleep(800);
      const m = await s.spawnAgent(
        "mallory",
        "srcroute.py",
        [tport, uport, "10.40.0.1", "fd40::1"],
        true,
      );
      assert.equal(m.code, 0, m.out);
      const agentLog = await waitFor(`${s.work}/a/srcroute.log`, /done/, 40_000);
      await sleep(1_000);
      const heard = (await Deno.readTextFile(got).catch(() => "")).trim();
      console.log(`agent:\n${agentLog.trim()}\nservice:\n${heard}`);
      assert.match(agentLog, /done/, "the agent ran");
      assert.deepEqual(heard.split("\n").filter((l) => l.startsWith("got")), []);
    } finally {
      try {
        listener?.kill("SIGKILL");
        await listener?.status;
      } catch {
        // Gone.
      }
      await s.close();
    }
  },
});
