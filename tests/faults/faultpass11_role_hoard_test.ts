/**
 * Fault pass 11: two agents serve one role through `cotal mcp`; the harness of one of them
 * never reads (hung, SIGSTOPped, busy in a long turn). Every task sent to the role must still
 * reach the agent that reads, within a bound. Found: `cotal mcp` pulls tasks from the role's
 * shared `svc_` queue eagerly and reports each one "in progress" every 20 s until its harness
 * reads it (lib/mcp/server.ts, HELD_WORKING_MS), so the broker never redelivers it: about half
 * the role's tasks stay pinned on the member that does not read, for as long as its process
 * lives, while the other member idles.
 */
import assert from "node:assert/strict";
import { startDaemonProcess } from "../delivery/_helpers.ts";
import { startRangeSpace } from "./_fp11.ts";
import { provision, startMcp } from "../mcp/_mcp_agent.ts";

Deno.test({
  name:
    "fault pass 11 - a role's tasks reach the member that reads, though the other member's harness never reads (skipped: known gap, not fixed; cotal mcp keeps an unread task in progress for as long as it lives, and a hold limit needs its inbox to withdraw a task it gives back, so a later copy is not taken as already read after a restart)",
  ignore: true,
}, async () => {
  await using s = await startRangeSpace("fp11role");
  const daemon = startDaemonProcess(s);
  const alice = await startMcp(s, await provision(s, "alice"));
  const reader = await startMcp(s, await provision(s, "reader", "solo"));
  // Its client initialises and then never calls inbox or wait (a harness that hangs).
  const idle = await startMcp(s, await provision(s, "idle", "solo"));
  try {
    const sent: string[] = [];
    for (let i = 1; i <= 8; i++) {
      const r = await alice.call("task", { role: "solo", text: `t${i}` });
      assert.equal(r.isError, false, r.text);
      sent.push(`t${i}`);
    }
    const got = new Set<string>();
    // 100 s: past the queue's 60 s ack wait, so a copy the idle member merely holds would
    // have come back to the queue by now.
    const deadline = Date.now() + 100_000;
    while (Date.now() < deadline && got.size < sent.length) {
      const r = await reader.call("wait", { timeout_seconds: 10, max: 100 });
      for (const m of r.json.messages) got.add(m.text);
    }
    const held = (await Deno.readTextFile(`${idle.inbox}/inbox.jsonl`).catch(() => ""))
      .split("\n").filter((l) => l.includes('"kind":"task"')).length;
    assert.deepEqual(
      [...got].sort(),
      sent.sort(),
      `after 100 s the reading member got ${got.size} of ${sent.length} tasks; ` +
        `the member whose harness never reads holds ${held} in its inbox`,
    );
  } finally {
    await alice.close();
    await reader.close();
    await idle.close();
    daemon.kill();
    await daemon.exited;
  }
});
