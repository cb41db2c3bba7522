/**
 * Fault pass 12: the full detached stack; a member (bob) provisioned and offline; a burst of DMs
 * to him and channel posts to #general (`cotal send`, each its own process), and partway through
 * a kill -9 of the broker AND the delivery daemon at the same instant, twice. Every send that
 * printed "sent <id>" was acknowledged; once the stack is healthy again bob's `cotal mcp` must get
 * every one of them.
 */
import assert from "node:assert/strict";
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

Deno.test("fault pass 12 - DMs and posts acknowledged across kill -9 of broker + delivery together reach the offline member", async () => {
  await using stack = await startStack("bd");
  const bob = await provisionCli(stack, "bob");
  // The first member to start makes the durable join; bob goes offline right after.
  const first = await mcpOn(stack, bob);
  await first.call("channels", {});
  await first.close();
  const kill = (i: number) => {
    if (i === 8 || i === 20) {
      kill9([...pidsOf(stack.root, "nats-server"), ...pidsOf(stack.root, "cmd/delivery.ts")]);
    }
  };
  const dms = await sendBurst(stack.root, ["--to", "local.bob"], "dm", 30, kill);
  const posts = await sendBurst(stack.root, ["--channel", "general"], "post", 30, kill);
  await waitHealthy(stack.root);
  const acked = [...dms.acked, ...posts.acked];
  assert.ok(acked.length > 30, `most sends acknowledged: ${dms.refused} ${posts.refused}`);
  const agent = await mcpOn(stack, bob, undefined);
  try {
    const { got, missing } = await collect(agent, acked, 120_000);
    assert.deepEqual(
      missing,
      [],
      `${acked.length} sends acknowledged; bob got ${got.length} ` +
        `(refused: ${JSON.stringify([...dms.refused, ...posts.refused])})`,
    );
  } finally {
    await agent.close();
  }
});
