/**
 * Red team 42: an agent in the default sandbox (its own network namespace) exhausts a kernel
 * table every namespace on the machine shares, the IPv6 flow label table, and it stays full
 * after the agent is despawned.
 *
 * `IPV6_FLOWLABEL_MGR` (any IPv6 socket, no privilege) makes a flow label in a table whose size
 * count, `fl_size`, is one for the whole machine (net/ipv6/ip6_flowlabel.c, FL_MAX_SIZE 4096):
 * without CAP_NET_ADMIN a process may create labels until 3,072 are held (32 per socket until
 * 2,048, then one per socket), so one process that holds them leaves every other unprivileged
 * process on the host, in any namespace, with ENOBUFS. A label lingers after its socket closes
 * for the time its maker asked (up to 150 s without privilege). The sandbox gives a default
 * agent IPv6 TCP sockets and does not filter this `setsockopt`; cgroups do not count the table.
 *
 * Setup: the agent (`rt42_fixtures/flowlabel_fill.py`, default sandbox) makes labels with a
 * 30 s linger until refused; an unprivileged process of the host (uid 65534, the stack's
 * namespace: another one than the agent's) then asks for 64 labels, once while the agent runs
 * and once right after its despawn.
 *
 * Observed (before any fix): the agent held 3,009 labels on 1,151 sockets within a second; the
 * host process got 64 of 64 before the spawn, 0 of 64 while the agent ran and 0 of 64 right
 * after `cotal despawn` (the table drains only as the lingers run out). A probe outside any stack, by hand: one unprivileged process in a fresh network
 * namespace holding 2,216 labels left an unprivileged process of the host's namespace 2 of 64.
 *
 * Passes when the host process gets all 64 both times. About 30 s; leaves the machine's table
 * filled for at most the 30 s linger after it ends.
 */
import assert from "node:assert/strict";
import { rt42Stack, sleep, waitFor } from "./rt42_fixtures/stack.ts";

const ASK = 64;

Deno.test({
  name: "red team 42 - an agent cannot fill the machine-wide IPv6 flow label table",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt42Stack("fl", ["flowlabel_fill.py", "flowlabel_victim.py"]);
    let spawned = false;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const victim = async () => {
        const r = await s.inNs([
          ...["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"],
          ...["/usr/bin/python3", `${s.work}/a/flowlabel_victim.py`, String(ASK)],
        ], 20_000);
        return Number(r.out.match(/^got (\d+) of/m)?.[1] ?? -1);
      };
      const before = await victim();
      const m = await s.spawnAgent("mallory", "flowlabel_fill.py", ["30"], false);
      assert.equal(m.code, 0, m.out);
      spawned = true;
      const log = await waitFor(`${s.work}/a/fl.log`, /held \d+/, 20_000);
      console.log("agent:", log.trim());
      assert.match(log, /held \d+/, "the agent ran");
      const during = await victim();
      const d = await s.cotal(["despawn", "mallory"], 60_000);
      spawned = false;
      console.log("despawn:", d.out.trim().split("\n").slice(-1)[0]);
      await sleep(500);
      const after = await victim();
      console.log(`host process: ${before} before, ${during} while the agent ran, ${after} after`);
      assert.equal(before, ASK, "the host process gets its labels on a quiet machine");
      assert.deepEqual(
        { during, after },
        { during: ASK, after: ASK },
        `an unprivileged host process got ${during} of ${ASK} flow labels while the agent ran ` +
          `and ${after} after its despawn`,
      );
    } finally {
      if (spawned) await s.cotal(["despawn", "mallory"], 60_000).catch(() => {});
      await s.close();
    }
  },
});
