/**
 * What one member can put in the space's members bucket is bounded, and what an ended lifecycle
 * left there goes: red team 9's S2 filled the 64 MiB bucket in 30 s with joins of channels
 * nobody uses (a wildcard read grant), and every member's join was refused for good, through
 * despawns and a restart.
 */
import assert from "node:assert/strict";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { MAX_MEMBERSHIPS_PER_LIFECYCLE } from "../../lib/delivery/constants.ts";
import { isCotalError } from "../../lib/errors.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import {
  bucketNames,
  buildMessage,
  chatSubject,
  deprovisionAgent,
  encodeMessage,
  listKeys,
  streamNames,
  subjectRoot,
} from "../../lib/wire/mod.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "./_helpers.ts";

Deno.test("delivery - a lifecycle holds at most its share of durable channels, and an ended one's rows are removed", async () => {
  await using s = await startDeliverySpace({ prefix: "rows" });
  let daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory", { allowSubscribe: ["x.>"] });
  const mn = await connectAs(s.url, mallory.creds);
  const prov = await connectAs(s.url, await s.mint("provisioner"));
  try {
    await daemon.waitForLine(/delivery daemon up/);
    const long = "a".repeat(2_000);
    for (let i = 0; i < MAX_MEMBERSHIPS_PER_LIFECYCLE; i++) {
      const r = await deliveryRequest(mn, s.space, mallory.principal, "durableJoin", {
        channel: `x.${long}${i}`,
      });
      assert.equal(r.durable, true, JSON.stringify(r));
    }
    const over = await deliveryRequest(mn, s.space, mallory.principal, "durableJoin", {
      channel: "x.one_more",
    }).then(() => undefined, (e) => e);
    assert.ok(isCotalError(over, "too_many_memberships"), String(over));
    assert.match(over.message, /already has 64 durable channels/);
    // A channel it already holds is still joined (idempotent), not refused.
    const again = await deliveryRequest(mn, s.space, mallory.principal, "durableJoin", {
      channel: `x.${long}0`,
    });
    assert.equal(again.durable, true);

    // recipientKnown: mallory is, nobody is not, a malformed question is refused.
    const known = (args: Record<string, unknown>) =>
      deliveryRequest(mn, s.space, mallory.principal, "recipientKnown", args);
    assert.deepEqual(await known({ to: "local.mallory" }), { known: true });
    assert.deepEqual(await known({ to: "local.nobody" }), { known: false });
    assert.deepEqual(await known({ role: "nosuchrole" }), { known: false });
    for (const bad of [{}, { to: "nodot" }, { to: "local.a", role: "r" }, { role: 7 }]) {
      const e = await known(bad).then(() => undefined, (err) => err);
      assert.ok(isCotalError(e, "bad_request"), `${JSON.stringify(bad)}: ${e}`);
    }

    // Its lifecycle ends (despawn deprovisions it); the next daemon start removes its rows.
    const jsm = await prov.jetstreamManager();
    const bucket = bucketNames(s.space).members;
    assert.equal((await listKeys(jsm, bucket)).length, MAX_MEMBERSHIPS_PER_LIFECYCLE);
    await deprovisionAgent({
      servers: s.url,
      creds: await mintCreds(s.auth, newIdentity(), "deprovisioner", {
        deprovisionTarget: { ...mallory.principal, lifecycleUid: mallory.uid },
      }),
      space: s.space,
      principal: mallory.principal,
      lifecycleUid: mallory.uid,
    });
    daemon.kill();
    await daemon.exited;
    daemon = startDaemonProcess(s);
    await daemon.waitForLine(/delivery daemon up/, 60_000);
    await daemon.waitForLine(/removed 64 member rows of ended lifecycles/, 30_000);
    assert.deepEqual(await listKeys(jsm, bucket), []);
    // A DM to it would no longer be kept, and the daemon says so.
    assert.deepEqual(await known({ to: "local.mallory" }), { known: false });
    // And the daemon's own view forgets them: a post to one of those channels is copied for
    // nobody (newcomer pass 8: the purged rows stayed in its mirror, were removed again every
    // minute, and posts were still copied for the ended lifecycle, then refused by the reader).
    const poster = await s.agent("poster", { allowPublish: [`x.${long}0`] });
    const pn = await connectAs(s.url, poster.creds);
    try {
      await pn.jetstream().publish(
        chatSubject(s.space, poster.principal, `x.${long}0`),
        encodeMessage(
          buildMessage({
            space: s.space,
            from: { id: "local.poster", name: "poster" },
            channel: `x.${long}0`,
            text: "for nobody",
          }),
        ),
      );
    } finally {
      await pn.close();
    }
    const inbox = streamNames(s.space).inbox;
    const copiesFor = async () => {
      const info = await jsm.streams.info(inbox, {
        subjects_filter: `${subjectRoot(s.space)}.dinbox.local.mallory.>`,
      });
      return Object.keys(info.state.subjects ?? {}).length;
    };
    const until = Date.now() + 5_000;
    while (Date.now() < until) {
      assert.equal(await copiesFor(), 0, "a post was copied for an ended lifecycle");
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await mn.close();
    await prov.close();
    daemon.kill();
    await daemon.exited;
  }
});
