/**
 * Red team 37: an agent on the host's network (`--net host`) pins host kernel memory far past
 * its memory limit, charged to no cgroup, through NETLINK_ROUTE sockets it never reads.
 *
 * Red team finding E (docs/SECURITY.md) pinned 4.6 GiB through NETLINK_USERSOCK; the answer
 * left a `--net host` agent routing netlink (protocol 0) "for interface lookups". But routing
 * netlink pins the same way: every RTM_GETLINK request is answered by the kernel into the
 * requester's receive queue, and a socket that is never read keeps the answers, up to its
 * receive buffer (2 x net.core.rmem_max, 8 MiB here; 416 KiB at the kernel's default). The
 * kernel allocates those skbs charged to no memory cgroup (the agent's v1 group stays at tens
 * of MiB while gigabytes are pinned, measured as SUnreclaim), and a netlink socket is no IP
 * socket, so the socket cap (`bind_guard.ts`, 1,024) never counts it. Sockets x buffer is
 * bounded only by descriptors: 4,096 per process, 256 processes.
 *
 * The fixture (`rt37_fixtures/nlpin.py`) stops at 2 GiB (or a quarter of what the machine has
 * free) so the machine running the test survives; nothing in Cotal stopped it there. First run,
 * this machine (24 GiB, rmem_max 4 MiB): 257 sockets held 2,055 MiB in 9.2 s, SUnreclaim
 * 59 MiB -> 2,114 MiB, the agent's memory group 64 MiB of its 1 GiB.
 *
 * The test passes when what the agent pins stays within its memory limit (1 GiB): refused
 * sockets, or buffers charged to its group (the group's OOM kill ends it), both pass.
 * About a minute (a stack in a network namespace of its own).
 */
import assert from "node:assert/strict";
import { meminfo, netlinkRmem, rt37Stack, sleep } from "./rt37_fixtures/stack.ts";

const GiB = 1024 ** 3;

function agentMemoryGroup(script: string): string | undefined {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if (!Deno.readTextFileSync(`/proc/${e.name}/cmdline`).includes(script)) continue;
      const line = Deno.readTextFileSync(`/proc/${e.name}/cgroup`).split("\n")
        .find((l) => /:memory:/.test(l));
      if (line) return `/sys/fs/cgroup/memory${line.split(":")[2]}`;
    } catch {
      // Gone.
    }
  }
  return undefined;
}

Deno.test({
  name:
    "red team 37 - a --net host agent cannot pin host kernel memory past its memory limit with unread NETLINK_ROUTE answers",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const free = meminfo("MemAvailable");
    const targetMiB = Math.min(2048, Math.floor(free / 4 / 1024 ** 2));
    assert.ok(targetMiB > 1100, `this machine has too little free memory (${free} B) to show it`);
    const s = await rt37Stack("nl", ["nlpin.py"]);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const rmem0 = await netlinkRmem(s);
      const slab0 = meminfo("SUnreclaim");
      const m = await s.spawnHostAgent("mallory", "nlpin.py", [String(targetMiB), "60"], [
        "--limit",
        "memory=1G",
      ]);
      assert.equal(m.code, 0, m.out);
      let peak = 0;
      let slabPeak = 0;
      let group = 0;
      const end = Date.now() + 60_000;
      while (Date.now() < end) {
        await sleep(2_000);
        peak = Math.max(peak, (await netlinkRmem(s)) - rmem0);
        slabPeak = Math.max(slabPeak, meminfo("SUnreclaim") - slab0);
        const g = agentMemoryGroup(`${s.work}/a/nlpin.py`);
        if (g) {
          group = Math.max(
            group,
            Number(await Deno.readTextFile(`${g}/memory.usage_in_bytes`).catch(() => "0")),
          );
        }
        const log = await Deno.readTextFile(`${s.work}/a/nlpin.log`).catch(() => "");
        if (/HELD/.test(log)) {
          await sleep(2_000);
          peak = Math.max(peak, (await netlinkRmem(s)) - rmem0);
          slabPeak = Math.max(slabPeak, meminfo("SUnreclaim") - slab0);
          break;
        }
      }
      const log = await Deno.readTextFile(`${s.work}/a/nlpin.log`).catch(() => "");
      console.log(log.trim().split("\n").slice(-3).join("\n"));
      const mib = (n: number) => `${Math.round(n / 1024 ** 2)} MiB`;
      console.log(
        `netlink receive queues pinned: ${mib(peak)}; host SUnreclaim +${mib(slabPeak)}; ` +
          `the agent's memory group at most ${mib(group)} (limit 1 GiB)`,
      );
      assert.ok(
        peak <= GiB,
        `the agent pinned ${mib(peak)} of kernel memory in netlink queues, past its 1 GiB limit`,
      );
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
    }
  },
});
