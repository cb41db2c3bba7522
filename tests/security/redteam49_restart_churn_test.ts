/**
 * Red team 49 (promises 4 and 5): a broker restart drops every agent at once, and each relay
 * reconnects its agent through the callout. A hostile agent holds its 8 relay connections and
 * keeps dialling in a tight loop across the restart (every attempt while the broker or the
 * callout is away, and every one after), trying to crowd the callout when every honest agent
 * needs it. The honest agent must be admitted again after the restart, and never refused for
 * a connect rate.
 */
import assert from "node:assert/strict";
import { supervisedOwner } from "../../lib/auth/agent_bearers.ts";
import { startRt49 } from "./_rt49.ts";

Deno.test("redteam49 - a hostile agent's connect storm across a broker restart does not keep an honest agent out", async () => {
  const t = await startRt49();
  try {
    const owner = await supervisedOwner(t.mesh.ownerSecret);
    await t.manager.spawn({
      agent: "task-runner",
      name: "honest",
      role: "shout",
      command: "/bin/sh",
      args: ["-c", "tr a-z A-Z"],
    });
    const deno = `"$(command -v deno || echo ${Deno.execPath()})"`;
    const client = `${t.work}/raw_connect.ts`;
    const script = `${deno} run -A '${client}' '${t.work}/held.out' hold 6 600 2>/dev/null & ` +
      `while :; do ${deno} run -A '${client}' '${t.work}/storm.out' burst 50 2>/dev/null; done`;
    await t.manager.spawn({
      agent: "program",
      name: "storm",
      command: "/bin/sh",
      args: ["-c", script],
      workdir: t.work,
    });
    await new Promise((r) => setTimeout(r, 5_000));
    const from = t.svc.events.length;
    await t.mesh.restartBroker(() => new Promise((r) => setTimeout(r, 2_000)));
    const restarted = Date.now();
    const honest = `${owner}.honest`;
    let admitted: Record<string, unknown> | undefined;
    const deadline = Date.now() + 60_000;
    while (!admitted && Date.now() < deadline) {
      admitted = t.svc.events.slice(from).find((e) =>
        e.event === "callout" && e.outcome === "allow" && e.principal === honest
      );
      if (!admitted) await new Promise((r) => setTimeout(r, 250));
    }
    const mine = t.svc.events.slice(from).filter((e) => e.event === "callout");
    const storm = mine.filter((e) => e.principal === `${owner}.storm`);
    const honestDenies = mine.filter((e) => e.principal === honest && e.outcome !== "allow");
    console.log(
      `honest admitted ${admitted ? `after ${Date.now() - restarted} ms` : "NEVER"}; ` +
        `storm decisions ${storm.length} (${
          [...new Set(storm.map((e) => `${e.outcome}:${e.code}`))].join(", ")
        }); honest denies ${JSON.stringify(honestDenies.map((e) => e.code))}`,
    );
    assert.ok(admitted, "the honest agent was not admitted again after the broker restart");
    assert.ok(
      !honestDenies.some((e) => e.code === "callout_connect_rate"),
      "the honest agent was refused for a connect rate",
    );
  } finally {
    await t.close();
  }
});
