/**
 * Red team 18: header bytes nats.js cannot decode (a key with a space) throw when a message's
 * headers are first read, and a throw in a subscription's callback ends the connection's read
 * loop. One such message crashed the signer and silenced the delivery daemon's rail. Each is sent
 * here at the real processes on a real broker; each keeps serving.
 */
import assert from "node:assert/strict";
import { signRailTokenFor } from "../../lib/trust/mod.ts";
import { headers, type NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { ctlSubject } from "../../lib/wire/mod.ts";
import { remoteSigner } from "../../lib/signer/mod.ts";
import { mintWith } from "../../lib/trust/credential_signer.ts";
import { signRail, spaceNames } from "../../lib/trust/grant_names.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { connectAs, startDaemonProcess, startDeliverySpace } from "../delivery/_helpers.ts";
import { startSigner } from "../signer/_signer.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import { buildMessage, publishMessage, subjectForMessage } from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";

/** Publishes `subject` with a header block nats.js refuses to decode (past its own check). */
async function sendBadHeaders(nc: NatsConnection, subject: string, n = 3): Promise<void> {
  for (let i = 0; i < n; i++) {
    const h = headers();
    (h as unknown as { headers: Map<string, string[]> }).headers.set("Bad Key", ["x"]);
    nc.publish(subject, new TextEncoder().encode("{}"), { headers: h });
  }
  await nc.flush();
}

const SUPERVISOR = { owner: "local", actor: "manager_badhdr" };

Deno.test("security - undecodable headers on the signer's rail: refused, and the signer keeps signing", async () => {
  await using s = await startDeliverySpace({ prefix: "badhdrsig" });
  const signer = startSigner(s);
  const creds = await mintCreds(s.auth, newIdentity(), "supervisor", { principal: SUPERVISOR });
  const nc = await connectBroker({ servers: s.url, creds });
  try {
    await signer.waitForLine(/cotal-signer up for space/);
    await sendBadHeaders(
      nc,
      signRail.request(
        spaceNames(s.space).root,
        await signRailTokenFor(s.auth),
        SUPERVISOR.owner,
        SUPERVISOR.actor,
        "n1",
      ),
    );
    const via = remoteSigner({ nc, space: s.space, principal: SUPERVISOR, creds: () => creds });
    const agent = await mintWith(via, newIdentity(), "agent", {
      principal: { owner: "local", actor: "w1" },
      lifecycleUid: newLifecycleUid(),
    });
    assert.match(agent, /BEGIN NATS USER JWT/);
    via.close();
  } finally {
    await nc.close();
    signer.kill();
    const st = await signer.exited;
    assert.notEqual(st.signal, undefined, "the signer ran until it was stopped");
  }
});

Deno.test("security - undecodable headers on the delivery rail: the daemon still answers", async () => {
  await using s = await startDeliverySpace({ prefix: "badhdrdlv" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await sendBadHeaders(mn, ctlSubject(s.space, "delivery", mallory.principal));
    // Answered at once, not after the connection's read loop was rebuilt.
    const r = await deliveryRequest(an, s.space, alice.principal, "listMemberships", {}, {
      timeoutMs: 2_000,
    });
    assert.ok(r);
  } finally {
    await mn.close();
    await an.close();
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("security - an undecodable post on a channel: a member's endpoint drops it and still receives the next", async () => {
  await using s = await startDeliverySpace({ prefix: "badhdrep" });
  const alice = await s.agent("alice");
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  const ep = new CotalEndpoint({
    servers: s.url,
    space: s.space,
    card: { name: "alice" },
    creds: alice.creds,
    lifecycleUid: alice.uid,
    channels: ["general"],
  });
  const got: string[] = [];
  ep.addEventListener("message", (ev) => {
    const p = ev.message.parts[0];
    if (p?.kind === "text") got.push((p as { text: string }).text);
  });
  ep.addEventListener("error", () => {});
  ep.addEventListener("warning", () => {});
  try {
    await ep.start();
    const good = buildMessage({
      space: s.space,
      from: { id: mallory.id, name: mallory.name },
      channel: "general",
      text: "after",
    });
    await sendBadHeaders(mn, subjectForMessage(good));
    await publishMessage(mn, good);
    await waitFor(() => got.includes("after"), { timeoutMs: 10_000, what: "the next post" });
  } finally {
    await ep.stop();
    await mn.close();
  }
});
