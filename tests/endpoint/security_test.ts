/**
 * The broker stops forgery and snooping by an agent's own credential: each attempt is made on
 * a raw connection with the agent's minted creds (not through the endpoint, which would never
 * build such subjects) and the broker's refusal is observed.
 */
import assert from "node:assert/strict";
import { AckPolicy, connect, type NatsConnection } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { isCotalError } from "../../lib/errors.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { chathistDurableName, dlvDurableName, dmDurableName } from "../../lib/wire/resources.ts";
import type { CotalMessageEvent } from "../../lib/endpoint/mod.ts";
import { collect, startMesh, type TestAgent, type TestMesh } from "./_mesh.ts";

const policy = { subscribe: ["general"], allowPublish: ["general"] };

async function rawAs(mesh: TestMesh, agent: TestAgent): Promise<RawConn> {
  const nc = await connect({
    servers: mesh.url,
    authenticator: credsAuthenticatorFast(agent.creds),
    inboxPrefix: `_INBOX_${agent.identity.id}`,
    maxReconnectAttempts: 0,
  });
  const denied: string[] = [];
  (async () => {
    for await (const s of nc.status()) {
      if (s.permissionContext) {
        denied.push(`${s.permissionContext.operation} ${s.permissionContext.subject}`);
      }
    }
  })();
  return { nc, denied };
}

interface RawConn {
  nc: NatsConnection;
  /** `"<publish|subscription> <subject>"` for every permission violation the broker sent. */
  denied: string[];
}

async function refusedRequest(what: string, op: () => Promise<unknown>): Promise<void> {
  await assert.rejects(op, (err: { code?: string; message?: string }) => {
    assert.equal(err.code, "PERMISSIONS_VIOLATION", `${what}: ${err.message}`);
    return true;
  }, what);
}

async function refusedPublish(raw: RawConn, subject: string): Promise<void> {
  raw.nc.publish(subject, "{}");
  await raw.nc.flush();
  await waitFor(() => raw.denied.includes(`publish ${subject}`), {
    what: `a refusal of ${subject}`,
  });
}

async function refusedSubscribe(raw: RawConn, subject: string): Promise<void> {
  let refusal: Error | undefined;
  raw.nc.subscribe(subject, { callback: (err) => void (refusal = err ?? refusal) });
  await raw.nc.flush();
  assert.match(String(refusal), /permissions violation/i, `subscribe ${subject}`);
}

Deno.test("endpoint - the broker stops an agent publishing as another principal", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  const carol = await mesh.agent("carol", policy);
  const c = carol.endpoint();
  const got = collect<CotalMessageEvent>(c, "message");
  await c.start();
  const raw = await rawAs(mesh, alice);
  try {
    const P = `cotal.${mesh.space}`;
    const forged = (sender: string) =>
      JSON.stringify({
        id: crypto.randomUUID(),
        ts: Date.now(),
        space: mesh.space,
        from: { id: sender, name: "bob" },
        parts: [],
      });
    const js = raw.nc.jetstream();
    await refusedRequest(
      "chat as bob",
      () => js.publish(`${P}.chat.local.bob.general`, forged("local.bob")),
    );
    await refusedRequest(
      "DM as bob",
      () => js.publish(`${P}.inst.local.carol.local.bob`, forged("local.bob")),
    );
    await refusedRequest(
      "task as bob",
      () => js.publish(`${P}.svc.reviewer.local.bob`, forged("local.bob")),
    );
    await refusedPublish(raw, `${P}.chat.local.bob.general`);
    // Alice's own subject works, so the refusals above are about the sender tokens.
    await js.publish(`${P}.chat.local.alice.general`, forged("local.alice"));
    await waitFor(() => got.length === 1, { what: "alice's genuine message" });
    assert.equal(got[0].message.from.id, "local.alice");
    void bob;
  } finally {
    await raw.nc.close();
  }
});

Deno.test("endpoint - the broker stops an agent reading another agent's DMs or creating consumers", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", { ...policy, role: "reviewer" });
  const bob = await mesh.agent("bob", policy);
  const raw = await rawAs(mesh, alice);
  try {
    const P = `cotal.${mesh.space}`;
    const s = mesh.space;
    // Core subscriptions on bob's DM subjects, or everyone's.
    await refusedSubscribe(raw, `${P}.inst.local.bob.>`);
    await refusedSubscribe(raw, `${P}.inst.>`);
    await refusedSubscribe(raw, `_INBOX_${bob.identity.id}.>`);
    // Binding bob's DM or delivery durable.
    const js = raw.nc.jetstream();
    await refusedRequest(
      "bind bob's dm_",
      () => js.consumers.get(`DM_${s}`, dmDurableName(bob.principal, bob.lifecycleUid)),
    );
    await refusedRequest(
      "bind bob's dlv_",
      () => js.consumers.get(`DLV_${s}`, dlvDurableName(bob.principal, bob.lifecycleUid)),
    );
    // Creating any consumer on DM, TASK or DLV: the filter would be the attacker's choice.
    const jsm = await raw.nc.jetstreamManager({ checkAPI: false });
    for (
      const [stream, filter] of [
        [`DM_${s}`, `${P}.inst.local.bob.>`],
        [`TASK_${s}`, `${P}.svc.reviewer.>`],
        [`DLV_${s}`, `${P}.dlv.>`],
      ]
    ) {
      await refusedRequest(
        `ephemeral on ${stream}`,
        () => jsm.consumers.add(stream, { ack_policy: AckPolicy.None, filter_subject: filter }),
      );
      await refusedRequest(
        `durable on ${stream}`,
        () =>
          jsm.consumers.add(stream, {
            durable_name: "snoop",
            ack_policy: AckPolicy.Explicit,
            filter_subject: filter,
          }),
      );
      await refusedRequest(
        `named on ${stream}`,
        () =>
          jsm.consumers.add(stream, {
            name: "snoop2",
            ack_policy: AckPolicy.None,
            filter_subject: filter,
          }),
      );
    }
    // Direct Get of a DM by sequence.
    await refusedRequest(
      "direct get on DM",
      () => raw.nc.request(`$JS.API.DIRECT.GET.DM_${s}`, JSON.stringify({ seq: 1 })),
    );
  } finally {
    await raw.nc.close();
  }
});

Deno.test("endpoint - a channel outside allowSubscribe or allowPublish is refused by the broker", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", {
    subscribe: ["general"],
    allowSubscribe: ["general", "secret"],
    allowPublish: ["general", "secret"],
  });
  const b = bob.endpoint();
  await b.start();
  await b.multicast("classified", { channel: "secret" });
  const a = alice.endpoint();
  const errors = collect<Event & { error: { code: string } }>(a, "error");
  await a.start();
  // Through the endpoint: a join, a history read and a post, each with its own code.
  await assert.rejects(
    () => a.joinChannel("secret"),
    (err) =>
      isCotalError(err, "channel_refused") &&
      // How to grant it, in the operator's words (newcomer pass 8 read "allowSubscribe").
      /'cotal spawn --allow-subscribe secret'/.test(err.message),
  );
  assert.deepEqual(a.joinedChannels(), ["general"]);
  await assert.rejects(
    () => a.channelHistory("secret"),
    (err) => isCotalError(err, "permission_denied"),
  );
  await assert.rejects(() => a.multicast("hi", { channel: "secret" }), (err) => {
    assert.ok(isCotalError(err, "permission_denied"));
    assert.match(err.message, /outside this credential's publish grant/);
    return true;
  });
  // Raw: the same refusals straight from the broker.
  const raw = await rawAs(mesh, alice);
  try {
    const P = `cotal.${mesh.space}`;
    await refusedSubscribe(raw, `${P}.chat.*.*.secret`);
    await refusedSubscribe(raw, `${P}.chat.>`);
    await refusedRequest(
      "post to secret",
      () => raw.nc.jetstream().publish(`${P}.chat.local.alice.secret`, "{}"),
    );
  } finally {
    await raw.nc.close();
  }
  // What the broker refused never surfaced as an error of a healthy endpoint elsewhere.
  assert.ok(errors.every((e) => e.error.code !== "message_dropped"));
});

Deno.test("endpoint - a history consumer aimed at the presence watch does not forge a row", async () => {
  await using mesh = await startMesh();
  // Mallory may read "general"; carol watches presence like every endpoint.
  const mallory = await mesh.agent("mallory", {
    subscribe: ["general"],
    allowPublish: ["general"],
  });
  const carol = await mesh.agent("carol", policy);
  const poster = await mesh.agent("poster", { allowPublish: ["general"] });
  const c = carol.endpoint();
  await c.start();
  const p = poster.endpoint();
  await p.start();
  const raw = await rawAs(mesh, mallory);
  try {
    const name = chathistDurableName(mallory.principal, mallory.lifecycleUid);
    const jsm = await raw.nc.jetstreamManager();
    // Its own post, shaped as a presence row (the broker does not look inside a payload).
    const ghost = { card: { id: "local.ghost", name: "ghost" }, status: "online", ts: Date.now() };
    await raw.nc.jetstream().publish(
      `cotal.${mesh.space}.chat.local.mallory.general`,
      JSON.stringify(ghost),
    );
    // A stream cannot deliver into subjects it captures (the broker calls it a cycle), so a
    // CHAT consumer cannot be aimed at a live channel or a DM...
    await assert.rejects(
      jsm.consumers.add(`CHAT_${mesh.space}`, {
        name,
        filter_subject: `cotal.${mesh.space}.chat.*.*.general`,
        deliver_subject: `cotal.${mesh.space}.chat.local.carol.general`,
        ack_policy: AckPolicy.None,
      }),
      /cycle/,
    );
    // ...but it can be aimed at a presence key, which every endpoint's watch subscribes to.
    await jsm.consumers.add(`CHAT_${mesh.space}`, {
      name,
      filter_subject: `cotal.${mesh.space}.chat.*.*.general`,
      deliver_subject: `$KV.cotal_presence_${mesh.space}.local.ghost`,
      ack_policy: AckPolicy.None,
    });
    await new Promise((r) => setTimeout(r, 700));
    // A delivery keeps its stream subject (a chat subject, not a presence key), and the watch
    // also drops anything with a JetStream ack reply: no ghost appears.
    assert.ok(!c.getRoster().some((r) => r.card.id === "local.ghost"));
    // Its one permitted name is all it gets: another name is refused outright.
    await refusedRequest("another name", () =>
      jsm.consumers.add(`CHAT_${mesh.space}`, {
        name: "aimed",
        filter_subject: `cotal.${mesh.space}.chat.*.*.general`,
        ack_policy: AckPolicy.None,
      }));
  } finally {
    await raw.nc.close();
    await p.stop();
    await c.stop();
  }
});
