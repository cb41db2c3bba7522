/**
 * Fault pass 12: the full detached stack, one task runner for role `up` (`tr a-z A-Z`), a sender
 * (`cotal mcp` as alice). kill -9 at one instant of the watchdog, the broker, the supervisor and
 * the agent's sandbox (outer bwrap); then tasks are sent to the role while its only runner is
 * gone (each acknowledged with an id, or refused). Expected: the watchdog-peer brings the
 * watchdog back, it brings the broker and the supervisor back, the supervisor brings the runner
 * back, and every acknowledged task is answered.
 */
import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import { cotalRun, kill9, mcpOn, pidsOf, provisionCli, startStack, waitHealthy } from "./_fp12.ts";

Deno.test("fault pass 12 - tasks sent to a role while watchdog, broker, supervisor and runner are all killed are answered once healed", async () => {
  await using stack = await startStack("tk");
  const sp = await cotalRun(stack.root, [
    "spawn",
    "--role",
    "up",
    "--name",
    "up1",
    "--",
    "/usr/bin/tr",
    "a-z",
    "A-Z",
  ]);
  assert.equal(sp.code, 0, sp.text);
  const aliceP = await provisionCli(stack, "alice");
  let alice = await mcpOn(stack, aliceP);
  try {
    const warm = await alice.call("task", { role: "up", text: "warm" });
    assert.equal(warm.isError, false, warm.text);
    // The outer bwrap of the agent is the supervisor's child running the bwrap binary.
    const sup = pidsOf(stack.root, "cmd/supervise.ts");
    const bw = sup.flatMap((s) => {
      try {
        return Deno.readTextFileSync(`/proc/${s}/task/${s}/children`).trim().split(/\s+/)
          .map(Number).filter((p) => p > 0);
      } catch {
        return [];
      }
    });
    const watchdog = pidsOf(stack.root, "cmd/watchdog.ts").filter((p) =>
      !Deno.readTextFileSync(`/proc/${p}/cmdline`).includes("peer")
    );
    assert.equal(watchdog.length, 1, "one watchdog (beside its peer)");
    kill9([...watchdog, ...pidsOf(stack.root, "nats-server"), ...sup, ...bw]);
    // Tasks while the role's runner is gone: sent as soon as the broker takes them.
    const acked: { id: string; text: string }[] = [];
    const refused: string[] = [];
    const deadline = Date.now() + 90_000;
    for (let i = 0; i < 5; i++) {
      for (;;) {
        const r = await alice.call("task", { role: "up", text: `job-${i}` });
        if (!r.isError && r.json?.id) {
          acked.push({ id: r.json.id, text: `job-${i}` });
          break;
        }
        refused.push(r.text.slice(0, 160));
        if (Date.now() > deadline) break;
        await new Promise((res) => setTimeout(res, 2_000));
      }
    }
    assert.ok(acked.length > 0, `no task acknowledged within 90 s: ${refused.join(" | ")}`);
    await waitHealthy(stack.root, 120_000);
    // Every acknowledged task gets its reply (JOB-i).
    const replies = new Map<string, string>();
    const until = Date.now() + 150_000;
    while (Date.now() < until && acked.some((a) => !replies.has(a.id))) {
      const r = await alice.call("wait", { timeout_seconds: 5 });
      if (r.isError) {
        // A server that lost its broker for good would show here; restart it on the same inbox.
        await alice.close().catch(() => {});
        alice = await mcpOn(stack, aliceP, alice.inbox);
        continue;
      }
      for (const m of r.json?.messages ?? []) if (m.replyTo) replies.set(m.replyTo, m.text);
    }
    const unanswered = acked.filter((a) => !replies.has(a.id)).map((a) => a.text);
    assert.deepEqual(
      unanswered,
      [],
      `${acked.length} tasks acknowledged; answered: ${JSON.stringify([...replies.values()])}; ` +
        `ps:\n${(await cotalRun(stack.root, ["ps"], 60_000)).text}`,
    );
    await waitFor(async () => (await cotalRun(stack.root, ["status"], 30_000)).code === 0, {
      timeoutMs: 60_000,
      intervalMs: 2_000,
    });
  } finally {
    await alice.close().catch(() => {});
  }
});
