/**
 * Fault pass 14: kill -9 of the `cotal spawn` CLI itself (not the supervisor) 100, 300 and
 * 700 ms into a spawn, then of the `cotal despawn` CLI 80 and 160 ms into a despawn of each,
 * on a running detached stack; then the supervisor killed -9 twice in a row (the one the
 * watchdog brought back, the moment it runs). Expected: each spawned name ends running or free
 * (a new spawn of it works), each despawned name ends gone or despawnable, the agents that ran
 * come back after the double kill, and status exits 0 again without a human.
 */
import assert from "node:assert/strict";
import {
  cotalRun,
  cotalSpawn,
  daemonPids,
  fp14Root,
  healsWithin,
  kill9,
  newDaemon,
  upDetached,
} from "./_fp14.ts";

const PROGRAM = ["--", "/usr/bin/tr", "a-z", "A-Z"];

async function running(root: string): Promise<string[]> {
  const ps = await cotalRun(root, ["ps", "--json"], 30_000);
  try {
    const j = JSON.parse(ps.text.slice(ps.text.indexOf("{")));
    return (j.agents as { name: string; state?: string }[]).filter((a) =>
      !a.state || a.state === "running"
    ).map((a) => a.name);
  } catch {
    return [];
  }
}

Deno.test({
  name:
    "fault pass 14 - spawn and despawn CLIs killed -9 mid-command, then the supervisor twice in a row: names end running or free, agents come back",
  async fn() {
    const r = await fp14Root("sdk");
    const problems: string[] = [];
    const killAfter = async (args: string[], ms: number) => {
      const c = cotalSpawn(r.root, args);
      await new Promise((res) => setTimeout(res, ms));
      try {
        c.kill("SIGKILL");
      } catch {
        // It ended first.
      }
      const out = await c.output();
      if (out.code !== 137 && out.signal !== "SIGKILL") {
        const t = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
        console.log(`${args.join(" ")} ended (${out.code}) before its kill at ${ms} ms: ${t}`);
      }
    };
    try {
      await upDetached(r);
      const names = ["k100", "k300", "k700"];
      for (const name of names) {
        await killAfter(
          ["spawn", "--role", "up", "--name", name, ...PROGRAM],
          Number(name.slice(1)),
        );
      }
      await new Promise((res) => setTimeout(res, 3_000));
      let live = await running(r.root);
      for (const name of names.filter((n) => !live.includes(n))) {
        const again = await cotalRun(r.root, ["spawn", "--role", "up", "--name", name, ...PROGRAM]);
        if (again.code !== 0) {
          problems.push(`spawn of ${name} killed: a new spawn of it said ${again.text.trim()}`);
        }
      }
      live = await running(r.root);
      for (const [name, ms] of [["k100", 80], ["k300", 160]] as const) {
        if (!live.includes(name)) continue;
        await killAfter(["despawn", name], ms);
      }
      await new Promise((res) => setTimeout(res, 3_000));
      live = await running(r.root);
      for (const name of ["k100", "k300"].filter((n) => live.includes(n))) {
        const again = await cotalRun(r.root, ["despawn", name], 60_000);
        if (again.code !== 0) {
          problems.push(`despawn of ${name} killed: a new despawn of it said ${again.text.trim()}`);
        }
      }
      const before = (await running(r.root)).sort();
      assert.ok(before.includes("k700"), `k700 is not running: ${before}`);
      // The supervisor twice in a row: the first, then the one the watchdog starts for it.
      const sup = daemonPids(r.root, "cmd/supervise.ts");
      kill9(sup);
      kill9(await newDaemon(r.root, "cmd/supervise.ts", sup, 30_000));
      const h = await healsWithin(r.root, 60_000);
      assert.ok(h.healed, `status after the supervisor's double kill:\n${h.status}`);
      let after: string[] = [];
      const t0 = Date.now();
      while (Date.now() - t0 < 30_000) {
        after = (await running(r.root)).sort();
        if (before.every((n) => after.includes(n))) break;
        await new Promise((res) => setTimeout(res, 1_000));
      }
      if (!before.every((n) => after.includes(n))) {
        problems.push(`agents before the double kill: ${before}; after: ${after}`);
      }
      assert.deepEqual(problems, [], problems.join("\n"));
    } finally {
      await r.cleanup();
    }
  },
});
