/**
 * Red team 19c: a pull's status answer (`NATS/1.0 404 No Messages`, empty body) aimed, through
 * the reply subject of the agent's own MSG.NEXT on its own DM durable, at a key of the members,
 * channels or ACL bucket. It is stored there as a row. The delivery daemon mirrors those buckets
 * with npm:nats's `kv.watch()`, whose callback adapter turns a status message into an error and
 * stops the watch: the mirror would silently stop following the bucket (every later freshness
 * barrier times out), and a restarted daemon's initial replay would never finish.
 * nats-server 2.10 stores the status with its status header (2.11+ without), which is what
 * made npm:nats's watch drop it. Each test asserts the defence holds on both: durable delivery
 * goes on after the aimed status, and a restarted daemon comes up.
 */
import type { NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { bucketNames, dmDurableName, streamNames } from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import {
  type Agent,
  connectAs,
  dlvCount,
  post,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

/** Aims the 404 status of a no-wait pull on `agent`'s own (empty) DM durable at `subject`. */
export async function aimStatus(
  nc: NatsConnection,
  space: string,
  agent: Agent,
  subject: string,
): Promise<void> {
  const next = `$JS.API.CONSUMER.MSG.NEXT.${streamNames(space).dm}.${
    dmDurableName(agent.principal, agent.uid)
  }`;
  nc.publish(next, new TextEncoder().encode(JSON.stringify({ batch: 1, no_wait: true })), {
    reply: subject,
  });
  await nc.flush();
}

for (const which of ["members", "channels", "acl"] as const) {
  Deno.test({
    name:
      `redteam19c - a 404 status aimed at a junk key of the ${which} bucket: durable delivery goes on, a restarted daemon comes up`,
    fn: async () => {
      await using s = await startDeliverySpace({ prefix: `rt19c${which}` });
      let daemon = startDaemonProcess(s);
      const mallory = await s.agent("mallory");
      const alice = await s.agent("alice");
      const bob = await s.agent("bob");
      const mn = await connectAs(s.url, mallory.creds);
      const an = await connectAs(s.url, alice.creds);
      const bn = await connectAs(s.url, bob.creds);
      try {
        await daemon.waitForLine(/delivery daemon up/, 30_000);
        await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
        await post(an, s.space, alice, "general", "before");
        await waitFor(async () => await dlvCount(bn, s.space, bob) === 1, {
          what: "bob's first copy",
          timeoutMs: 15_000,
        });
        await aimStatus(mn, s.space, mallory, `$KV.${bucketNames(s.space)[which]}.zz_junk`);
        await new Promise((r) => setTimeout(r, 500));
        await post(an, s.space, alice, "general", "after");
        await waitFor(async () => await dlvCount(bn, s.space, bob) === 2, {
          what: "bob's copy of the post after the aimed status",
          timeoutMs: 20_000,
        });
        // A restarted daemon replays the bucket, the stored status included.
        daemon.kill();
        await daemon.exited;
        daemon = startDaemonProcess(s);
        await daemon.waitForLine(/delivery daemon up/, 40_000);
        await post(an, s.space, alice, "general", "after restart");
        await waitFor(async () => await dlvCount(bn, s.space, bob) === 3, {
          what: "bob's copy after the restart",
          timeoutMs: 20_000,
        });
      } catch (e) {
        console.error("daemon stderr:\n" + daemon.stderr().slice(-3000));
        throw e;
      } finally {
        for (const c of [mn, an, bn]) await c.close().catch(() => {});
        daemon.kill();
        await daemon.exited;
      }
    },
  });
}
