/**
 * Red team 40: the connect guard's address poll remembers the last addresses it read across a
 * time with no --net host agent, so an address the host had then, lost, and regains just after
 * the next such agent's spawn is never closed to that agent.
 *
 * `guardConnects` sets `lastRead ??= <addresses now>` only when it is undefined; when the last
 * live guard is released the poll stops but `lastRead` keeps the addresses of the first guard's
 * time. The next guard is made from the addresses at its spawn; if, before its first poll (2 s
 * later), the host is back at the old set, the poll reads exactly `lastRead` and refreshes
 * nothing: the guard lacks the regained address for as long as the set stays the same. (A VPN
 * or a container network that went down between two agents and comes back.)
 *
 * First run (stack in its own network namespace; a veth with `10.40.0.1/24` and
 * `10.40.77.1/24`; a TCP and UDP service on `0.0.0.0`): agent `first` was spawned with both
 * addresses and despawned; `10.40.77.1` was removed; `mallory` was spawned and, 100 ms after its
 * cgroup v2 group (which carries the guard) appeared, `10.40.77.1` added back. From 5 s later
 * for 4 s, all 9 of its TCP connects to `10.40.77.1` connected and the service logged 18 connects and datagrams, while `10.40.0.1`
 * stayed refused (EPERM), 9 of 9. Control (the same without the `first` agent, so the poll has
 * no stale set): 0 of 9 connected, the service heard nothing.
 *
 * The test passes when no connect or datagram of the agent reaches the service. About 40 s.
 */
import assert from "node:assert/strict";
import { rt40Stack, sleep, waitFor } from "./rt40_fixtures/stack.ts";

/** Whether the cgroup v2 group of agent `name` exists (its guard is attached as it is made). */
function groupExists(name: string, dir = "/sys/fs/cgroup/unified", depth = 0): boolean {
  if (depth > 3) return false;
  try {
    for (const e of Deno.readDirSync(dir)) {
      if (!e.isDirectory) continue;
      if (e.name.startsWith(`cotal-${name}-`)) return true;
      if (groupExists(name, `${dir}/${e.name}`, depth + 1)) return true;
    }
  } catch {
    // Gone.
  }
  return false;
}

Deno.test({
  name:
    "red team 40 - an address the host regains right after a --net host spawn is closed to that agent (run only with COTAL_SLOW_TESTS=1: the loopback egress check that closes it needs no poll; tests/manager/connect_guard_test.ts checks an unlisted local address in the suite)",
  ignore: !Deno.env.get("COTAL_SLOW_TESTS"),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const X = "10.40.77.1";
    const s = await rt40Stack("sp", ["probe.py", "listener.py"], [
      ["ip", "link", "add", "rt40a", "type", "veth", "peer", "name", "rt40b"],
      ["ip", "addr", "add", "10.40.0.1/24", "dev", "rt40a"],
      ["ip", "addr", "add", `${X}/24`, "dev", "rt40a"],
      ["ip", "link", "set", "rt40a", "up"],
      ["ip", "link", "set", "rt40b", "up"],
    ]);
    let listener: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const tport = String(Number(s.port) + 1);
      const uport = String(Number(s.port) + 2);
      const got = `${s.work}/listener.log`;
      listener = s.spawnInNs(["/usr/bin/python3", `${s.work}/a/listener.py`, tport, uport, got]);
      const first = await s.spawnAgent("first", "probe.py", [tport, uport, "127.0.0.1"], true);
      assert.equal(first.code, 0, first.out);
      await sleep(3_000);
      const gone = await s.cotal(["despawn", "first"], 60_000);
      assert.equal(gone.code, 0, gone.out);
      await Deno.remove(`${s.work}/a/probe.log`).catch(() => {});
      await sleep(1_000);
      const del = await s.inNs(["ip", "addr", "del", `${X}/24`, "dev", "rt40a"]);
      assert.equal(del.code, 0, del.out);
      await sleep(500);
      const name = `mal${crypto.randomUUID().slice(0, 6)}`;
      const spawn = s.spawnAgent(
        name,
        "probe.py",
        [tport, uport, "wait=5", "loop=4", "10.40.0.1", X],
        true,
      );
      const end = Date.now() + 60_000;
      while (!groupExists(name) && Date.now() < end) await sleep(10);
      await sleep(100);
      const add = await s.inNs(["ip", "addr", "add", `${X}/24`, "dev", "rt40a"]);
      assert.equal(add.code, 0, add.out);
      const m = await spawn;
      assert.equal(m.code, 0, m.out);
      const agentLog = await waitFor(`${s.work}/a/probe.log`, /done/, 40_000);
      await sleep(1_000);
      const heard = (await Deno.readTextFile(got).catch(() => "")).split("\n")
        .filter((l) => l.startsWith("got") && l.includes(X));
      const lines = agentLog.trim().split("\n");
      const n = (re: RegExp) => lines.filter((l) => re.test(l)).length;
      console.log(
        `agent: tcp ${X} connected ${n(/^tcp 10\.40\.77\.1 connected/)} of ${
          n(/^tcp 10\.40\.77\.1 /)
        }; tcp 10.40.0.1 refused ${n(/^tcp 10\.40\.0\.1 refused/)} of ${n(/^tcp 10\.40\.0\.1 /)}`,
      );
      console.log(`service heard ${heard.length} via ${X}:\n${heard.slice(0, 4).join("\n")}`);
      assert.match(agentLog, /tcp 10\.40\.0\.1 refused: Operation not permitted/, "the guard runs");
      assert.deepEqual(heard, [], "no connect or datagram of the agent reaches a host service");
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
