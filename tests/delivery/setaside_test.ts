/**
 * No poison message and nothing lost in silence, with the daemon as a real process:
 * - posts of every size up to the broker's max_payload and malformed payloads of every kind an
 *   agent's grants allow never stop the daemon; what fits is delivered, what cannot be framed
 *   is set aside as a dead letter the operator can list, and the stream flows on;
 * - twice its backlog of posts to an offline member: it reads its backlog, then a gap marker
 *   with the count and range of the other 1,000.
 */
import { resignedWithoutPayloadCap } from "../_harness/short_creds.ts";
import assert from "node:assert/strict";
import { headers as natsHeaders } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { CotalEndpoint, type GapEvent } from "../../lib/endpoint/mod.ts";
import { decodeFrame, deliveryRequest } from "../../lib/delivery/mod.ts";
import { buildMessage, chatSubject, dlvDurableName, streamNames } from "../../lib/wire/mod.ts";
import { CHAT_MAX_MESSAGE_BYTES, MEMBER_BACKLOG_CAP } from "../../lib/wire/streams.ts";
import {
  connectAs,
  dlvCount,
  post,
  startDaemonProcess,
  startDeliverySpace,
  waitSettled,
} from "./_helpers.ts";

const OPERATOR = { owner: "local", actor: "operator" };

Deno.test("delivery - posts of every size and malformed payloads: the daemon lives, what fits is delivered, the rest is set aside", async () => {
  await using s = await startDeliverySpace({ prefix: "poison" });
  const daemon = startDaemonProcess(s);
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  // A cred signed before members' 128 KiB cap: posts up to the broker's 1 MiB reach CHAT.
  const an = await connectAs(s.url, await resignedWithoutPayloadCap(s.auth, alice.creds));
  const bn = await connectAs(s.url, bob.creds);
  const prov = await connectAs(s.url, await s.mint("provisioner"));
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    const chat = streamNames(s.space).chat;
    const subject = chatSubject(s.space, alice.principal, "general");
    const text = (bytes: number) => "x".repeat(bytes);

    // Entry check: a post over CHAT's cap is refused to its sender before sending (the library)
    // and at publish (the broker, raw).
    await assert.rejects(
      post(an, s.space, alice, "general", text(CHAT_MAX_MESSAGE_BYTES)),
      /a post holds at most 65536/,
    );
    await assert.rejects(
      an.jetstream().publish(subject, new Uint8Array(CHAT_MAX_MESSAGE_BYTES + 1)),
      /maximum|exceeds/i,
    );

    // A space set up before the entry cap stores what the daemon cannot frame, from a client
    // that does not check sizes itself.
    const jsm = await prov.jetstreamManager();
    await jsm.streams.update(chat, { max_msg_size: -1 });
    const postRaw = async (body: string) => {
      const msg = buildMessage({
        space: s.space,
        from: { id: alice.id, name: alice.name },
        channel: "general",
        text: body,
      });
      await an.jetstream().publish(subject, JSON.stringify(msg), { msgID: msg.id });
      return msg;
    };
    const deliverable: string[] = [];
    for (const size of [0, 1, 1_000, 64 * 1024, 512 * 1024, 1024 * 1024 - 16 * 1024 - 2_000]) {
      deliverable.push((await postRaw(text(size))).id);
    }
    // Within a hundred-odd bytes of the broker's 1 MiB (its Nats-Msg-Id header included):
    // stored in CHAT, too large once framed.
    const big = buildMessage({
      space: s.space,
      from: { id: alice.id, name: alice.name },
      channel: "general",
      text: "",
    });
    const overhead = JSON.stringify(big).length;
    const huge = { ...big, parts: [{ kind: "text", text: text(1024 * 1024 - overhead - 150) }] };
    await an.jetstream().publish(subject, JSON.stringify(huge), { msgID: huge.id });
    // Malformed, every way an agent can write its own chat subject.
    const h = natsHeaders();
    h.set("Cotal-Anything", "x".repeat(4_000));
    for (
      const body of [
        new Uint8Array(),
        new TextEncoder().encode("{not json"),
        new Uint8Array([0xff, 0xfe, 0x7b, 0x7d]),
        new TextEncoder().encode(JSON.stringify({ id: "x", parts: "nope" })),
        new TextEncoder().encode(JSON.stringify([1, 2, 3])),
        new TextEncoder().encode("null"),
      ]
    ) {
      await an.jetstream().publish(subject, body, { headers: h });
    }
    deliverable.push((await post(an, s.space, alice, "general", "after the poison")).id);

    await waitSettled(s, 60_000);
    await waitFor(async () => await dlvCount(bn, s.space, bob) === deliverable.length, {
      what: `${deliverable.length} copies for bob`,
      timeoutMs: 30_000,
    });
    const consumer = await bn.jetstream().consumers.get(
      streamNames(s.space).dlv,
      dlvDurableName(bob.principal, bob.uid),
    );
    const got: string[] = [];
    for (let i = 0; i < deliverable.length; i++) {
      const m = await consumer.next({ expires: 5_000 });
      if (!m) break;
      const f = decodeFrame(m.headers, m.data);
      if (f.ok) got.push(f.frame.msg.id);
      m.ack();
    }
    assert.deepEqual(got, deliverable);

    // The operator's listing: one dead letter, the huge post, no body.
    const ctl = await connectAs(
      s.url,
      await s.mint("control-caller", { principal: OPERATOR }),
    );
    try {
      const listed = await deliveryRequest(ctl, s.space, OPERATOR, "setAside", {}, {
        service: "delivery-admin",
      }) as { deadLetters: { msgId: string; stage: string; reason: string }[] };
      assert.deepEqual(listed.deadLetters.map((d) => [d.msgId, d.stage]), [[huge.id, "fanout"]]);
      assert.match(listed.deadLetters[0].reason, /too large/);
      assert.ok(!JSON.stringify(listed).includes("xxxxxxxx"), "no body in the record");
    } finally {
      await ctl.close();
    }
    assert.match(daemon.stderr(), /set aside .*chat.* for local\.bob \(too large once framed/);
  } finally {
    for (const c of [an, bn, prov]) await c.close().catch(() => {});
    daemon.kill();
    const st = await daemon.exited;
    assert.equal(st.code, 0, daemon.stderr());
  }
});

Deno.test("delivery - twice its backlog of posts to an offline member: it reads its backlog, then a gap marker for the rest", async () => {
  await using s = await startDeliverySpace({ prefix: "gap" });
  const daemon = startDaemonProcess(s);
  const senders = await Promise.all(["ann", "amy", "abe", "art"].map((n) => s.agent(n)));
  const bob = await s.agent("bob");
  const conns = await Promise.all(senders.map((a) => connectAs(s.url, a.creds)));
  const bn = await connectAs(s.url, bob.creds);
  const TOTAL = 2 * MEMBER_BACKLOG_CAP;
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    // Four senders: CHAT keeps 1000 per sender and channel.
    const acks = [];
    for (let i = 0; i < TOTAL; i++) {
      const k = i % senders.length;
      const msg = buildMessage({
        space: s.space,
        from: { id: senders[k].id, name: senders[k].name },
        channel: "general",
        text: `m ${i}`,
      });
      acks.push(
        conns[k].jetstream().publish(
          chatSubject(s.space, senders[k].principal, "general"),
          JSON.stringify(msg),
          { msgID: msg.id },
        ),
      );
    }
    await Promise.all(acks);
    await waitSettled(s, 120_000);
    assert.equal(await dlvCount(bn, s.space, bob), MEMBER_BACKLOG_CAP);
    assert.match(daemon.stderr(), /local\.bob's backlog is full/);

    // Bob comes back (a real endpoint on his lifecycle): 1,000 copies, then, once reading made
    // room, the marker as a `gap` event.
    const ep = new CotalEndpoint({
      servers: s.url,
      space: s.space,
      card: { name: bob.name },
      lifecycleUid: bob.uid,
      creds: bob.creds,
      channels: ["general"],
    });
    let copies = 0;
    const gaps: GapEvent[] = [];
    ep.addEventListener("message", (ev) => {
      if (ev.meta.source === "durable") copies++;
    });
    ep.addEventListener("gap", (ev) => void gaps.push(ev));
    await ep.start();
    try {
      await waitFor(() => gaps.reduce((n, g) => n + g.count, 0) >= MEMBER_BACKLOG_CAP, {
        timeoutMs: 60_000,
        what: `gap events for ${MEMBER_BACKLOG_CAP} copies (have ${copies} copies)`,
      });
    } finally {
      await ep.stop();
    }
    assert.equal(copies, MEMBER_BACKLOG_CAP);
    assert.equal(gaps.reduce((n, g) => n + g.count, 0), MEMBER_BACKLOG_CAP);
    assert.ok(gaps[0].first.seq <= gaps.at(-1)!.last.seq);
    assert.equal(gaps[0].first.channel, "general");
    // Logged right after the marker is stored: it may reach the log a moment after the event.
    await daemon.waitForLine(/local\.bob \(.*\) missed \d+ copies from #\d+ to #\d+/, 10_000);
    // The operator still sees it once the member was told (red team 7 saw nothing listed).
    const ctl = await connectAs(s.url, await s.mint("control-caller", { principal: OPERATOR }));
    try {
      await waitFor(async () => {
        const listed = await deliveryRequest(ctl, s.space, OPERATOR, "setAside", {}, {
          service: "delivery-admin",
        }) as { told: { member: string; count: number }[] };
        return listed.told.some((t) => t.member === "local.bob" && t.count === MEMBER_BACKLOG_CAP);
      }, { what: "bob's told total in the operator's listing" });
    } finally {
      await ctl.close();
    }
  } finally {
    for (const c of [...conns, bn]) await c.close().catch(() => {});
    daemon.kill();
    const st = await daemon.exited;
    assert.equal(st.code, 0, daemon.stderr());
  }
});
