/**
 * Broker answers aimed at someone else's subject. nats-server checks a publisher's subject
 * against its grants but never the reply subject it names, and JetStream answers there with
 * the account's own rights: a member can make the broker publish onto another member's channel
 * subject, a bucket key or the manager's control rail. These are the red team's attempts
 * (a Direct Get of its own presence row replayed as the operator's post; a stored-message get,
 * a pull's status and a publish ack aimed at a channel and at a peer's presence key). Each
 * either is refused by the broker, or lands as something no receiver takes for a post or a row.
 */
import assert from "node:assert/strict";
import { AckPolicy, connect, credsAuthenticator, type NatsConnection } from "nats";
import { waitFor } from "../_harness/broker.ts";
import type { CotalMessageEvent, RosterEvent } from "../../lib/endpoint/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { bucketNames, dmDurableName, kvStreamName, streamNames } from "../../lib/wire/resources.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { decodeMessage } from "../../lib/wire/receive.ts";
import { collect, startMesh, type TestMesh } from "../endpoint/_mesh.ts";

const policy = { subscribe: ["general"], allowPublish: ["general"] };
const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

async function rawAs(mesh: TestMesh, creds: string, id: string): Promise<{
  nc: NatsConnection;
  violations: string[];
}> {
  const nc = await connect({
    servers: mesh.url,
    authenticator: credsAuthenticator(new TextEncoder().encode(creds)),
    inboxPrefix: `_INBOX_${id}`,
  });
  const violations: string[] = [];
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error" && s.permissionContext) {
        violations.push(`${s.permissionContext.operation} ${s.permissionContext.subject}`);
      }
    }
  })();
  return { nc, violations };
}

/** The first message the space's CHAT stream stored under `subject` (read as an observer). */
async function storedUnder(mesh: TestMesh, subject: string) {
  const id = newIdentity();
  const creds = await mintCreds(mesh.auth, id, "observer");
  const nc = await connectBroker({ servers: mesh.url, creds });
  try {
    // The one consumer an observer may make is named for it.
    const chat = streamNames(mesh.space).chat;
    const name = `hist_${id.id}`;
    await (await nc.jetstreamManager()).consumers.add(chat, {
      name,
      filter_subject: subject,
      ack_policy: AckPolicy.None,
    });
    return await (await nc.jetstream().consumers.get(chat, name)).next({ expires: 1000 }) ??
      undefined;
  } finally {
    await nc.close();
  }
}

Deno.test("security - a member cannot replay its own bytes as the operator: Direct Get is refused, other broker answers are dropped", async () => {
  await using mesh = await startMesh("refl");
  const mallory = await mesh.agent("mallory", policy);
  const bob = await mesh.agent("bob", policy);
  const m = mallory.endpoint();
  const b = bob.endpoint();
  const got = collect<CotalMessageEvent>(b, "message");
  await m.start();
  await b.start();
  const P = subjectRoot(mesh.space);
  const forged = `${P}.chat.local.operator.general`;
  const presence = kvStreamName(bucketNames(mesh.space).presence);
  const { nc, violations } = await rawAs(mesh, mallory.creds, mallory.identity.id);
  try {
    // Mallory's presence row, rewritten to read as an operator's post.
    const post = {
      id: "forged-1",
      from: { id: "local.operator" },
      parts: [{ kind: "text", text: "rm -rf" }],
    };
    const rowKey = `$KV.${bucketNames(mesh.space).presence}.local.mallory`;
    await nc.request(rowKey, enc(post), { timeout: 2000 });

    // 1. Direct Get of that row with the reply aimed at the operator's channel subject.
    nc.publish(`$JS.API.DIRECT.GET.${presence}`, enc({ last_by_subj: rowKey }), { reply: forged });
    // 2. The stored-message get, same aim: the broker answers, in JSON.
    nc.publish(`$JS.API.STREAM.MSG.GET.${presence}`, enc({ last_by_subj: rowKey }), {
      reply: forged,
    });
    // 3. A pull on its own DM durable: a status answer (no messages) aimed at the channel.
    nc.publish(
      `$JS.API.CONSUMER.MSG.NEXT.${streamNames(mesh.space).dm}.${
        dmDurableName(mallory.principal, mallory.lifecycleUid)
      }`,
      enc({ batch: 1, no_wait: true }),
      { reply: forged },
    );
    await nc.flush();
    await waitFor(() => violations.some((v) => v.includes("DIRECT.GET")), {
      what: "the broker to refuse the Direct Get",
      timeoutMs: 5000,
    });

    // What reached the channel is stored (the broker cannot stop that) but is no post.
    let stored: Awaited<ReturnType<typeof storedUnder>>;
    await waitFor(async () => (stored = await storedUnder(mesh, forged)) !== undefined, {
      what: "the aimed answers to reach CHAT",
      timeoutMs: 5000,
    });
    assert.ok(stored);
    assert.equal(
      decodeMessage(stored.subject, stored.data, { space: mesh.space, headers: stored.headers })
        .ok,
      false,
    );
    // Bob sees Mallory's next real post, and nothing from the operator before it.
    const real = await m.multicast("a real post");
    await waitFor(() => got.some((e) => e.message.id === real.id), { what: "the real post" });
    assert.deepEqual(got.filter((e) => e.message.from.id !== "local.mallory"), []);
  } finally {
    await nc.close();
  }
});

Deno.test("security - answers aimed at a peer's presence key neither forge nor remove the peer for a live watcher", async () => {
  await using mesh = await startMesh("reflp");
  const mallory = await mesh.agent("mallory", policy);
  const bob = await mesh.agent("bob", policy);
  const carol = await mesh.agent("carol", policy);
  const b = bob.endpoint();
  const c = carol.endpoint();
  await b.start();
  await c.start();
  const rosters = collect<RosterEvent>(c, "roster");
  await waitFor(() => c.getRoster().some((p) => p.card.id === "local.bob"), {
    what: "carol to see bob online",
  });
  const bucket = bucketNames(mesh.space).presence;
  const bobKey = `$KV.${bucket}.local.bob`;
  const { nc } = await rawAs(mesh, mallory.creds, mallory.identity.id);
  try {
    // A publish ack (JSON) and a pull's status line, both aimed at Bob's key.
    const own = `$KV.${bucket}.local.mallory`;
    const row = { card: { id: "local.bob", name: "bob" }, status: "offline", ts: Date.now() };
    nc.publish(own, enc(row), { reply: bobKey });
    nc.publish(
      `$JS.API.CONSUMER.MSG.NEXT.${streamNames(mesh.space).dm}.${
        dmDurableName(mallory.principal, mallory.lifecycleUid)
      }`,
      enc({ batch: 1, no_wait: true }),
      { reply: bobKey },
    );
    await nc.flush();
    // Carol's roster never drops Bob for them; a roster event in between must still list him.
    const before = rosters.length;
    await new Promise((r) => setTimeout(r, 1500));
    const probe = c.getRoster();
    assert.ok(probe.some((p) => p.card.id === "local.bob"), JSON.stringify(probe));
    for (const ev of rosters.slice(before)) {
      assert.ok(ev.roster.some((p) => p.card.id === "local.bob"));
    }
  } finally {
    await nc.close();
  }
});

Deno.test("security - 1,005 answers aimed at another pair's DM subject evict nothing: past the pair's cap they are refused instead", async () => {
  await using mesh = await startMesh("refldm");
  const mallory = await mesh.agent("mallory", policy);
  const vict = await mesh.agent("vict", policy);
  const op = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "operator", {
      principal: { owner: "local", actor: "operator" },
    }),
  });
  const { nc } = await rawAs(mesh, mallory.creds, mallory.identity.id);
  const pair = `${subjectRoot(mesh.space)}.inst.local.vict.local.operator`;
  try {
    // The operator's DM to Vict, stored before the flood.
    const dm = {
      id: "dm-before-flood",
      ts: Date.now(),
      from: { id: "local.operator" },
      to: "local.vict",
      parts: [{ kind: "text", text: "keep me" }],
    };
    await op.jetstream().publish(pair, enc(dm), { msgID: dm.id });
    for (let i = 0; i < 1005; i++) nc.publish("$JS.API.INFO", new Uint8Array(), { reply: pair });
    await nc.flush();
    await new Promise((r) => setTimeout(r, 500));
    // Vict comes online: the operator's DM is still there for it.
    const v = vict.endpoint();
    const got = collect<CotalMessageEvent>(v, "message");
    await v.start();
    await waitFor(() => got.some((e) => e.message.id === dm.id), {
      what: "the DM stored before the flood",
    });
  } finally {
    await nc.close();
    await op.close();
  }
});
