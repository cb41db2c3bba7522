/**
 * Red team 21: hide a live channel subscription from the membership view. The feed lists a
 * subscription only when it literally starts with `<root>.chat.*.*.`, but an agent allowed
 * `<root>.chat.*.*.general` may subscribe any narrower form: `<root>.chat.local.*.general`
 * (every local sender on general), or `<root>.chat.<owner>.<actor>.general` per sender. It
 * receives the channel live while the view shows no row (or no channel) for it.
 * A sound system lists mallory on general (or refuses the narrower subscription).
 * The test passes when the defence holds.
 * Result when written: the broker accepted both narrower subscriptions, mallory heard bob's
 * post on general, alice (the control, `chat.*.*.general`) got a row with live ["general"],
 * mallory got no row at all.
 */
import assert from "node:assert/strict";
import { connect } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { bucketNames, kvStreamName } from "../../lib/wire/resources.ts";
import { chatReadFilter, chatSubject, subjectRoot } from "../../lib/wire/subjects.ts";
import {
  connectAs,
  credSubject,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

Deno.test("redteam21 - a narrower chat subscription is still listed in the membership view", async () => {
  await using s = await startDeliverySpace({ prefix: "rt21hide" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const obsCreds = await s.mint("observer");
  const obs = await connect({
    servers: s.url,
    authenticator: credsAuthenticatorFast(obsCreds),
    inboxPrefix: `_INBOX_${credSubject(obsCreds)}`,
  });
  const m = await connectAs(s.url, mallory.creds);
  const a = await connectAs(s.url, alice.creds);
  const b = await connectAs(s.url, bob.creds);
  const P = subjectRoot(s.space);
  try {
    await daemon.waitForLine(/membership feed up/, 40_000);
    const heard: string[] = [];
    // Mallory: every local sender on general, and bob in particular, without `*.*`.
    const sub1 = m.subscribe(`${P}.chat.local.*.general`, {
      callback: (_e, msg) => heard.push(msg.subject),
    });
    const sub2 = m.subscribe(`${P}.chat.local.bob.general`, { callback: () => {} });
    // Alice: the ordinary filter (the control).
    a.subscribe(chatReadFilter(s.space, "general"));
    await m.flush();
    await a.flush();
    b.publish(chatSubject(s.space, bob.principal, "general"), new TextEncoder().encode("hi"));
    await b.flush();
    await waitFor(() => heard.length > 0, {
      what: "mallory hears bob on general",
      timeoutMs: 5000,
    });
    assert.ok(
      !sub1.isClosed() && !sub2.isClosed(),
      "the broker refused the narrower subscriptions",
    );
    console.log(`mallory heard ${heard}`);
    const jsm = await obs.jetstreamManager();
    const bucket = bucketNames(s.space).membership;
    const row = async (p: string) => {
      const r = await jsm.streams.getMessage(kvStreamName(bucket), {
        last_by_subj: `$KV.${bucket}.${p}`,
      }).catch(() => undefined);
      return r && r.data.length ? JSON.parse(new TextDecoder().decode(r.data)) : undefined;
    };
    await waitFor(async () => (await row("local.alice")) !== undefined, {
      what: "alice's row (control)",
      timeoutMs: 30_000,
    });
    await new Promise((r) => setTimeout(r, 2000));
    const mr = await row("local.mallory");
    console.log("alice's row:", JSON.stringify(await row("local.alice")));
    console.log("mallory's row:", JSON.stringify(mr));
    assert.ok(
      mr && Array.isArray(mr.live) && mr.live.length > 0,
      "mallory receives general live but the membership view shows no live channel for it",
    );
  } finally {
    await m.close();
    await a.close();
    await b.close();
    await obs.close();
    daemon.kill();
    await daemon.exited;
  }
});
