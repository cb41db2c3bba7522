/**
 * Fault pass 12 (found while checking the disk-full case): a member made with
 * `cotal mint --profile agent --provision --actor carol --channel general` ("its durables are
 * made") that has not started yet gets none of the #general posts acknowledged between its
 * provisioning and its first `cotal mcp`: the membership row (what the delivery daemon copies
 * posts for) is written only by the endpoint's join at start, at the channel's frontier, so the
 * posts are acknowledged to their sender and never copied for carol. A DM sent in the same
 * window does reach her. (Contract question as much as a fault: the README says provisioning
 * makes the durables a member needs for delivery while offline.)
 */
import assert from "node:assert/strict";
import { collect, mcpOn, provisionCli, sendBurst, startStack } from "./_fp12.ts";

Deno.test("fault pass 12 - posts to a channel a provisioned member was given reach it though it had not started yet", async () => {
  await using stack = await startStack("pns");
  const carolP = await provisionCli(stack, "carol");
  const posts = await sendBurst(stack.root, ["--channel", "general"], "early-post", 3);
  const dms = await sendBurst(stack.root, ["--to", "local.carol"], "early-dm", 1);
  assert.equal(posts.acked.length + dms.acked.length, 4, [...posts.refused, ...dms.refused].join());
  const carol = await mcpOn(stack, carolP);
  try {
    const { got, missing } = await collect(carol, [...dms.acked, ...posts.acked], 60_000);
    assert.deepEqual(
      missing,
      [],
      `acknowledged before carol's first start; she got ${JSON.stringify(got)}`,
    );
  } finally {
    await carol.close();
  }
});
