/**
 * Red team 49 (promise 3): despawning an agent ends its admission. The hostile agent leaves
 * things behind before it goes: connections held open through its relay, and a detached
 * (setsid, double-forked) loop that dials its relay again every half second with its launch
 * creds. After the despawn nothing of it may be admitted again: no callout allow for its
 * principal, and no PONG written by anything it left.
 */
import assert from "node:assert/strict";
import { supervisedOwner } from "../../lib/auth/agent_bearers.ts";
import { startRt49 } from "./_rt49.ts";

Deno.test("redteam49 - a detached reconnect loop and held connections are not admitted after despawn", async () => {
  const t = await startRt49();
  try {
    const owner = await supervisedOwner(t.mesh.ownerSecret);
    const deno = `"$(command -v deno || echo ${Deno.execPath()})"`;
    const client = `${t.work}/raw_connect.ts`;
    const out = `${t.work}/ghost.out`;
    // A detached loop of single connects, and 6 held connections, then the agent waits.
    const loop = `while :; do ${deno} run -A '${client}' '${out}' burst 1 2>/dev/null; ` +
      `sleep 0.5; done`;
    const script = `(setsid sh -c "(${loop.replace(/"/g, '\\"')}) &" &) ; ` +
      `${deno} run -A '${client}' '${t.work}/held.out' hold 6 600 2>/dev/null & sleep 600`;
    await t.manager.spawn({
      agent: "program",
      name: "ghost",
      command: "/bin/sh",
      args: ["-c", script],
      workdir: t.work,
    });
    // Its loop is admitted while it runs.
    const ghost = `${owner}.ghost`;
    const allowsNow = () =>
      t.svc.events.filter((e) =>
        e.event === "callout" && e.outcome === "allow" && e.principal === ghost
      ).length;
    const deadline = Date.now() + 60_000;
    while (allowsNow() < 8 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    const loopPongs = () =>
      t.lines("ghost").then((ls) => ls.filter((l) => l.first === "PONG").length);
    while ((await loopPongs()) < 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
    }
    console.log(`admitted before despawn: ${allowsNow()}; loop PONGs: ${await loopPongs()}`);
    assert.ok(allowsNow() >= 8, "the held connections were admitted before the despawn");
    assert.ok((await loopPongs()) >= 2, "the detached loop was connecting before the despawn");
    await t.manager.despawn("ghost");
    const at = Date.now();
    const before = allowsNow();
    await new Promise((r) => setTimeout(r, 8_000));
    const after = allowsNow() - before;
    const pongs = (await t.lines("ghost")).filter((l) =>
      l.first === "PONG" && typeof l.at === "number" && l.at > at + 200
    );
    console.log(`callout allows after despawn: ${after}; PONGs after despawn: ${pongs.length}`);
    assert.equal(after, 0, "the ghost was admitted after its despawn");
    assert.equal(pongs.length, 0, "something the ghost left behind connected after its despawn");
  } finally {
    await t.close();
  }
});
