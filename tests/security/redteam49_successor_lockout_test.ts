/**
 * Red team 49 (promises 4 and 5): the auth callout admits each principal 64 connects at once,
 * then 64 a minute, and a supervised agent's principal is `<supervised owner>.<its name>`, the
 * same for every lifecycle of that name. The relay's own bucket is per lifecycle, so a hostile
 * agent may spend its whole callout bucket through its relay. The next agent spawned under the
 * same name (a respawn after despawn, or the operator's fresh agent) must still come up: the
 * attacker's spending must not refuse its successor's connects.
 */
import assert from "node:assert/strict";
import { startRt49 } from "./_rt49.ts";

Deno.test("redteam49 - a despawned agent's connect burst does not lock its successor of the same name out of the callout", async () => {
  const t = await startRt49();
  try {
    // The hostile agent spends its connects (the relay holds it to 20 a second, 64 at once).
    // The first run spends the burst; the second keeps spending each token as it refills, up to
    // the moment of the despawn.
    await t.hostile("worker", [["burst", "80"], ["burst", "100000"]]);
    const lines = await t.done("worker", 90_000);
    // A few refills spent by the second run.
    await new Promise((r) => setTimeout(r, 3_000));
    const outcomes = lines.filter((l) => "first" in l).map((l) => String(l.first));
    const ok = outcomes.filter((o) => o === "PONG").length;
    console.log(`hostile connects: ${ok} PONG of ${outcomes.length}; others:`, [
      ...new Set(outcomes.filter((o) => o !== "PONG")),
    ]);
    const denies = t.svc.events.filter((e) => e.event === "callout" && e.outcome === "deny");
    console.log(`callout denies so far: ${denies.length}`, [...new Set(denies.map((e) => e.code))]);
    await t.manager.despawn("worker");
    // The operator spawns a fresh, honest agent under the same name at once.
    const from = t.svc.events.length;
    const started = Date.now();
    let row;
    let err: unknown;
    try {
      row = await t.manager.spawn({
        agent: "task-runner",
        name: "worker",
        role: "shout",
        command: "/bin/sh",
        args: ["-c", "tr a-z A-Z"],
      });
    } catch (e) {
      err = e;
    }
    const ms = Date.now() - started;
    const after = t.svc.events.slice(from).filter((e) => e.event === "callout");
    console.log(
      `successor spawn: ${
        err ? `FAILED (${(err as Error).message.slice(0, 300)})` : "ok"
      } in ${ms} ms;` +
        ` callout after: ${JSON.stringify(after.map((e) => `${e.outcome}:${e.code}`))}`,
    );
    assert.equal(err, undefined, "the successor's spawn failed");
    assert.equal(row?.present, true, "the successor came up");
    assert.ok(
      !after.some((e) => e.code === "callout_connect_rate"),
      "the successor's connects were refused for its predecessor's rate",
    );
  } finally {
    await t.close();
  }
});
