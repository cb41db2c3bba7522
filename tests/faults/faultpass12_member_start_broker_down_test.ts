/**
 * Fault pass 12: a member's `cotal mcp` started while the broker is down (kill -9, the watchdog
 * pair frozen for 15 s so the outage is certain, then continued: the watchdog restarts the
 * broker). Once it is back the member reads the channel; then it goes offline (kill -9 of its
 * server), posts are acknowledged, it comes back: it must get them (the fault pass 11 case with
 * the delivery daemon down, here with the broker itself down at the member's start).
 */
import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import type { McpAgent } from "../mcp/_mcp_agent.ts";
import {
  collect,
  kill9,
  mcpOn,
  pidsOf,
  provisionCli,
  sendBurst,
  startStack,
  waitHealthy,
} from "./_fp12.ts";

Deno.test({
  name:
    "fault pass 12 - a member that started while the broker was down gets the posts sent while it is later offline (run only with COTAL_SLOW_TESTS=1: half a minute or more of a full stack, kept out of the suite for its time)",
  ignore: !Deno.env.get("COTAL_SLOW_TESTS"),
  async fn() {
    await using stack = await startStack("mb");
    const carolP = await provisionCli(stack, "carol");
    const watchdogs = pidsOf(stack.root, "cmd/watchdog.ts");
    assert.equal(watchdogs.length, 2);
    for (const p of watchdogs) Deno.kill(p, "SIGSTOP");
    let carol: McpAgent | undefined;
    try {
      kill9(pidsOf(stack.root, "nats-server"));
      await waitFor(() => pidsOf(stack.root, "nats-server").length === 0, { timeoutMs: 10_000 });
      const starting = mcpOn(stack, carolP);
      await new Promise((r) => setTimeout(r, 15_000));
      for (const p of watchdogs) Deno.kill(p, "SIGCONT");
      carol = await starting;
      await waitHealthy(stack.root, 90_000);
      // Carol is live: a post reaches her.
      assert.deepEqual((await sendBurst(stack.root, ["--channel", "general"], "live", 1)).acked, [
        "live-0",
      ]);
      const live = await collect(carol, ["live-0"], 60_000);
      assert.deepEqual(live.missing, [], `the live post: got ${JSON.stringify(live.got)}`);
      // Offline; three posts acknowledged; back.
      const inbox = carol.inbox;
      Deno.kill(carol.pid, "SIGKILL");
      await carol.close().catch(() => {});
      const sent = await sendBurst(stack.root, ["--channel", "general"], "off", 3);
      assert.equal(sent.acked.length, 3, sent.refused.join(" | "));
      carol = await mcpOn(stack, carolP, inbox);
      const back = await collect(carol, sent.acked, 90_000);
      assert.deepEqual(
        back.missing,
        [],
        `posts acknowledged while carol was offline; after her restart she got ${
          JSON.stringify(back.got)
        }`,
      );
    } finally {
      for (const p of watchdogs) {
        try {
          Deno.kill(p, "SIGCONT");
        } catch {
          // Gone.
        }
      }
      await carol?.close().catch(() => {});
    }
  },
});
