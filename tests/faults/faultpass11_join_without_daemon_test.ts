/**
 * Fault pass 11: a member whose `cotal mcp` starts while the space's delivery daemon is down
 * (killed, or hung until the watchdog restarts it) joins its channel live only: the durable
 * join is asked once at start (lib/endpoint/channels.ts `join`), its failure is not said and not
 * retried once the daemon is back. The member then reads the channel's live posts, so nothing
 * looks wrong; but no membership row exists, and every post sent while it is next offline is
 * never copied for it. Its restart joins again at the channel's frontier, past those posts: they
 * are lost for it, though each was acknowledged to its sender.
 *
 * On the full stack (fault pass 11): the delivery daemon SIGSTOPped (the watchdog killed and
 * restarted it after 20 s), a fresh member's `cotal mcp` started meanwhile; 40 s later it got
 * the live post JD-0, was killed, five posts were acknowledged, it was restarted: it got none.
 */
import assert from "node:assert/strict";
import { startDaemonProcess } from "../delivery/_helpers.ts";
import { provision, startMcp } from "../mcp/_mcp_agent.ts";
import { BACKSTOP_RETRY_MS } from "../../lib/endpoint/channels.ts";
import { startRangeSpace } from "./_fp11.ts";

Deno.test("fault pass 11 - a member that started while the delivery daemon was down still gets the durable copies of posts sent while it is later offline", async () => {
  await using s = await startRangeSpace("fp11join");
  const bobAgent = await provision(s, "bob");
  const aliceAgent = await provision(s, "alice");
  // The delivery daemon is down while bob's cotal mcp starts (a kill -9 the watchdog has not
  // healed yet, or a hung daemon it has not killed yet).
  let bob = await startMcp(s, bobAgent);
  const daemon = startDaemonProcess(s);
  await daemon.waitForLine(/delivery daemon up/, 30_000);
  // Some time passes with the daemon back (40 s in the pass's manual run): long enough for the
  // member to ask again (BACKSTOP_RETRY_MS doubling).
  await new Promise((r) => setTimeout(r, 4 * BACKSTOP_RETRY_MS));
  const alice = await startMcp(s, aliceAgent);
  try {
    // Bob reads the channel: the live post reaches him.
    assert.equal((await alice.call("post", { channel: "general", text: "p0" })).isError, false);
    let seen: string[] = [];
    for (let i = 0; i < 10 && !seen.includes("p0"); i++) {
      const r = await bob.call("wait", { timeout_seconds: 3 });
      seen = seen.concat(r.json.messages.map((m: { text: string }) => m.text));
    }
    assert.deepEqual(seen, ["p0"]);
    // Bob's server is killed; three posts are acknowledged while he is gone.
    Deno.kill(bob.pid, "SIGKILL");
    await bob.close().catch(() => {});
    for (const t of ["p1", "p2", "p3"]) {
      assert.equal((await alice.call("post", { channel: "general", text: t })).isError, false);
    }
    bob = await startMcp(s, bobAgent, bob.inbox);
    const got: string[] = [];
    // Past the 60 s ack wait: whatever the broker holds for bob has come by then.
    const deadline = Date.now() + 75_000;
    const missing = () => ["p1", "p2", "p3"].filter((t) => !got.includes(t));
    while (Date.now() < deadline && missing().length > 0) {
      const r = await bob.call("wait", { timeout_seconds: 10 });
      got.push(...r.json.messages.map((m: { text: string }) => m.text));
    }
    // p0 may come once more: bob read it, and was killed before his next request confirmed it.
    assert.deepEqual(
      got.filter((t) => t !== "p0").sort(),
      ["p1", "p2", "p3"],
      `posts acknowledged while bob was offline; after his restart he got ${JSON.stringify(got)}`,
    );
  } finally {
    await alice.close();
    await bob.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});
