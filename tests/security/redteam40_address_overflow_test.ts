/**
 * Red team 40: once the host has more addresses than the connect guard compares, an address the
 * host gains after a --net host agent's spawn stays open to that agent for good.
 *
 * `ownAddresses()` throws past `MAX_OWN_ADDRESSES` (64: each IPv4 address counts twice, itself
 * and its subnet's broadcast, each IPv6 address once). At spawn that refuses the agent (closed);
 * but the 2 s poll that refreshes every live guard (`pollAddresses` / `refreshConnectGuards`)
 * swallows the throw and "the guards keep what they have": every address added from then on is
 * reachable. A docker host gains a bridge (an IPv4 address, its broadcast, a link-local and often
 * a ULA address) per compose network, so crossing 64 after an agent started is ordinary.
 *
 * First run (stack in its own network namespace; a veth with no IPv6 link-local carrying 32
 * IPv4 /24 addresses: 64 entries, the most a spawn accepts; a TCP and UDP service on `0.0.0.0`):
 * the agent was spawned, then `10.40.200.1/24` was added (66 entries). From 6 s on, probing
 * every half second for 8 s, all 17 of the agent's TCP connects to `10.40.200.1` connected and
 * all 17 datagrams were sent; the service logged all 34, while `10.40.1.1` (an address it had at
 * spawn) stayed refused with EPERM 17 of 17. A second `--net host` spawn at that moment was
 * refused: "the host has 66 own addresses, more than the 64 the connect guard compares".
 * Control (same run with 31 addresses, so the added one makes exactly 64): 0 of 17 connected,
 * the service heard nothing: the refresh works up to the bound and fails open past it.
 *
 * The test passes when no connect or datagram of the agent reaches the service. About 40 s.
 */
import assert from "node:assert/strict";
import { rt40Stack, sleep, waitFor } from "./rt40_fixtures/stack.ts";

Deno.test({
  name:
    "red team 40 - an address the host gains past the connect guard's 64 is closed to a --net host agent spawned before (run only with COTAL_SLOW_TESTS=1: the loopback egress check that closes it needs no address list; tests/manager/connect_guard_test.ts checks an unlisted local address in the suite)",
  ignore: !Deno.env.get("COTAL_SLOW_TESTS"),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const setup = [
      ["ip", "link", "add", "rt40a", "type", "veth", "peer", "name", "rt40b"],
      ["ip", "link", "set", "rt40a", "addrgenmode", "none"],
      ["ip", "link", "set", "rt40b", "addrgenmode", "none"],
      ...Array.from({ length: 32 }, (_, i) => [
        "ip",
        "addr",
        "add",
        `10.40.${i + 1}.1/24`,
        "dev",
        "rt40a",
      ]),
      ["ip", "link", "set", "rt40a", "up"],
      ["ip", "link", "set", "rt40b", "up"],
    ];
    const s = await rt40Stack("ao", ["probe.py", "listener.py"], setup);
    let listener: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const tport = String(Number(s.port) + 1);
      const uport = String(Number(s.port) + 2);
      const got = `${s.work}/listener.log`;
      listener = s.spawnInNs(["/usr/bin/python3", `${s.work}/a/listener.py`, tport, uport, got]);
      await sleep(1_000);
      // The agent waits 6 s, then probes every half second for 8 s.
      const m = await s.spawnAgent(
        "mallory",
        "probe.py",
        [tport, uport, "wait=6", "loop=8", "10.40.1.1", "10.40.200.1"],
        true,
      );
      assert.equal(m.code, 0, m.out);
      const add = await s.inNs(["ip", "addr", "add", "10.40.200.1/24", "dev", "rt40a"]);
      assert.equal(add.code, 0, add.out);
      const bob = await s.spawnAgent("bob", "probe.py", [tport, uport, "127.0.0.1"], true);
      console.log(`a second --net host spawn now: exit ${bob.code}: ${bob.out.trim().slice(-240)}`);
      const agentLog = await waitFor(`${s.work}/a/probe.log`, /done/, 40_000);
      await sleep(1_000);
      const heard = await Deno.readTextFile(got).catch(() => "");
      const lines = agentLog.trim().split("\n");
      const count = (re: RegExp) => lines.filter((l) => re.test(l)).length;
      console.log(
        `agent: tcp 10.40.200.1 connected ${count(/^tcp 10\.40\.200\.1 connected/)} of ${
          count(/^tcp 10\.40\.200\.1 /)
        }; tcp 10.40.1.1 refused ${count(/^tcp 10\.40\.1\.1 refused/)} of ${
          count(/^tcp 10\.40\.1\.1 /)
        }`,
      );
      console.log("agent (first lines):\n" + lines.slice(0, 6).join("\n"));
      const reached = heard.split("\n").filter((l) => l.startsWith("got"));
      console.log(`host-only service heard ${reached.length}:\n${reached.slice(0, 4).join("\n")}`);
      assert.match(agentLog, /tcp 10\.40\.1\.1 refused: Operation not permitted/, "the guard runs");
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
