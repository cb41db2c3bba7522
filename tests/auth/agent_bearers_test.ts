/**
 * The auth service's `POST /agents` on its own: what a user-mode supervisor gets (its agents'
 * rows and bearers, under the owner kept for them) and every refusal: no proof, a member's or
 * another space's cred, a replay, a tampered body, a reserved name, a widened grant, a stale
 * lifecycle, a human's row, a full ledger, a flood. The daemon end to end is in
 * tests/manager/user_mode_test.ts.
 */
import assert from "node:assert/strict";
import {
  AGENT_BEARER_RATE,
  createAgentBearerHandler,
  MAX_SUPERVISED_ROWS,
  supervisedOwner,
} from "../../lib/auth/agent_bearers.ts";
import { createUserTokenIssuer } from "../../lib/auth/issuer.ts";
import { createActorLedger } from "../../lib/auth/ledger.ts";
import { deriveOwnerForIdpSubject } from "../../lib/auth/owner.ts";
import { validateUserToken } from "../../lib/auth/validate.ts";
import {
  createSpaceAuth,
  mintCreds,
  newIdentity,
  proveAgentBearerRequest,
  requestProver,
  requestTrustOf,
} from "../../lib/trust/mod.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { MemorySecretStore } from "../../lib/workspace/mod.ts";

const SUPERVISOR = { owner: "local", actor: "manager_0123456789abcdef" };

async function setup(opts: { now?: () => number } = {}) {
  const space = `ab${crypto.randomUUID().slice(0, 8)}`;
  const auth = await createSpaceAuth(space);
  const ledger = createActorLedger({ space, store: new MemorySecretStore() });
  const issuer = await createUserTokenIssuer({ space });
  const secret = crypto.getRandomValues(new Uint8Array(32));
  const owner = await supervisedOwner(secret);
  const handler = createAgentBearerHandler({
    space,
    trust: await requestTrustOf(auth),
    ledger,
    issuer,
    owner,
    sentinelCreds: "SENTINEL CREDS TEXT",
    ...(opts.now ? { now: opts.now } : {}),
  });
  const supervisorCreds = await mintCreds(auth, newIdentity(), "supervisor", {
    principal: SUPERVISOR,
  });
  const now = opts.now ?? Date.now;
  /** A proven request: `body` signed by `creds`, then optionally changed by `after`. */
  const call = async (
    body: Record<string, unknown>,
    o: {
      creds?: string;
      caller?: { owner: string; actor: string };
      after?: (b: Uint8Array, h: Headers) => { body: Uint8Array; headers: Headers };
      proof?: boolean;
      nonce?: string;
      raw?: { body: BodyInit; headers: Record<string, string> };
    } = {},
  ) => {
    let bytes: Uint8Array = new TextEncoder().encode(JSON.stringify({
      caller: o.caller ?? SUPERVISOR,
      nonce: o.nonce ?? crypto.randomUUID(),
      ...body,
    }));
    let headers = o.proof === false ? new Headers() : await proveAgentBearerRequest(
      await requestProver(o.creds ?? supervisorCreds),
      bytes,
      now(),
    );
    headers.set("content-type", "application/json");
    if (o.after) ({ body: bytes, headers } = o.after(bytes, headers));
    const res = await handler(
      o.raw
        ? new Request("http://127.0.0.1/agents", { method: "POST", ...o.raw })
        : new Request("http://127.0.0.1/agents", {
          method: "POST",
          headers,
          body: bytes as Uint8Array<ArrayBuffer>,
        }),
    );
    return { status: res.status, body: await res.json() as Record<string, unknown> };
  };
  const grantBody = (actor: string, lifecycleUid = newLifecycleUid(), extra = {}) => ({
    op: "grant",
    actor,
    lifecycleUid,
    grant: { subscribe: ["general"], allowSubscribe: ["general"], allowPublish: ["general"] },
    ...extra,
  });
  return { space, auth, ledger, issuer, owner, secret, call, grantBody, supervisorCreds };
}

Deno.test("agent bearers - a supervisor gets its agents' owner, a row per lifecycle and bearers of that row, and no more", async () => {
  const t = await setup();
  const hello = await t.call({ op: "hello" });
  assert.equal(hello.status, 200);
  assert.deepEqual(hello.body, { owner: t.owner, sentinelCreds: "SENTINEL CREDS TEXT" });

  const uid = newLifecycleUid();
  const granted = await t.call(t.grantBody("worker", uid, {
    grant: {
      subscribe: ["general"],
      allowSubscribe: ["general", "ops.*"],
      allowPublish: ["general"],
      role: "builders",
    },
  }));
  assert.equal(granted.status, 200, JSON.stringify(granted.body));
  const row = await t.ledger.get(t.owner, "worker");
  assert.equal(row?.lifecycleUid, uid, "the row is for the agent's own lifecycle");
  assert.deepEqual(row?.scope, []);
  assert.equal(row?.role, "builders");
  assert.equal(row?.label, "cotal-supervise");

  const issued = await t.call({ op: "bearer", actor: "worker", lifecycleUid: uid });
  assert.equal(issued.status, 200);
  const bearer = await validateUserToken(issued.body.token as string, {
    resolver: t.issuer.resolver(),
    space: t.space,
  });
  assert.equal(bearer.owner, t.owner);
  assert.equal(bearer.actor, "worker");
  assert.equal(bearer.lifecycleUid, uid);
  assert.deepEqual(bearer.scope, []);
  assert.ok(bearer.exp - Math.floor(Date.now() / 1000) <= 900);
  // The ledger's connect gate (what the callout asks) takes it.
  assert.equal((await t.ledger.authorizeBearer(bearer)).actor, "worker");

  // A bearer only for the row's lifecycle; a revoke only of it.
  const stale = await t.call({ op: "bearer", actor: "worker", lifecycleUid: newLifecycleUid() });
  assert.equal(stale.status, 409);
  assert.equal(stale.body.code, "agent_bearer_stale");
  const wrongRevoke = await t.call({
    op: "revoke",
    actor: "worker",
    lifecycleUid: newLifecycleUid(),
  });
  assert.deepEqual(wrongRevoke.body, { revoked: false });
  assert.ok(await t.ledger.get(t.owner, "worker"), "another lifecycle's revoke left the row");
  // Concurrent with a grant of the name's next lifecycle, an old lifecycle's revoke never takes
  // the new row (checked inside the ledger's write).
  const next = newLifecycleUid();
  const [, raced] = await Promise.all([
    t.call(t.grantBody("racer", next)),
    t.call({ op: "revoke", actor: "racer", lifecycleUid: uid }),
  ]);
  assert.deepEqual(raced.body, { revoked: false });
  assert.equal((await t.ledger.get(t.owner, "racer"))?.lifecycleUid, next);
  const revoked = await t.call({ op: "revoke", actor: "worker", lifecycleUid: uid });
  assert.deepEqual(revoked.body, { revoked: true });
  const after = await t.call({ op: "bearer", actor: "worker", lifecycleUid: uid });
  assert.equal(after.status, 404);
  assert.equal(after.body.code, "actor_not_granted");
});

Deno.test("agent bearers - only a proven supervisor of this space is answered, once per request", async () => {
  const t = await setup();
  const refused = (r: { status: number; body: Record<string, unknown> }, why: RegExp) => {
    assert.equal(r.status, 401, JSON.stringify(r.body));
    assert.equal(r.body.code, "agent_bearer_refused");
    assert.match(r.body.error as string, why);
  };
  refused(await t.call({ op: "hello" }, { proof: false }), /carries no caller proof/);
  // A member's cred of the space (an agent's), and a control caller's.
  const member = await mintCreds(t.auth, newIdentity(), "agent", {
    principal: { owner: "local", actor: "mallory" },
    lifecycleUid: newLifecycleUid(),
  });
  refused(
    await t.call({ op: "hello" }, { creds: member, caller: { owner: "local", actor: "mallory" } }),
    /"agent" credential, not supervisor/,
  );
  const controller = await mintCreds(t.auth, newIdentity(), "control-caller", {
    principal: { owner: "local", actor: "operator" },
  });
  refused(
    await t.call({ op: "hello" }, {
      creds: controller,
      caller: { owner: "local", actor: "operator" },
    }),
    /not supervisor/,
  );
  // Another space's supervisor.
  const other = await createSpaceAuth("elsewhere");
  const foreign = await mintCreds(other, newIdentity(), "supervisor", { principal: SUPERVISOR });
  refused(await t.call({ op: "hello" }, { creds: foreign }), /not signed by this space/);
  // A caller its cred does not name.
  refused(
    await t.call({ op: "hello" }, { caller: { owner: "local", actor: "someone" } }),
    /names another caller/,
  );
  // A body changed after it was signed (a grant widened in flight).
  const tampered = await t.call(t.grantBody("worker"), {
    after: (b, h) => ({
      body: new TextEncoder().encode(
        new TextDecoder().decode(b).replace('"allowPublish":["general"]', '"allowPublish":[">"]'),
      ),
      headers: h,
    }),
  });
  refused(tampered, /signature does not verify/);
  // The same request twice: the copy is refused.
  const nonce = crypto.randomUUID();
  const body = new TextEncoder().encode(
    JSON.stringify({ caller: SUPERVISOR, nonce, op: "hello" }),
  );
  const headers = await proveAgentBearerRequest(await requestProver(t.supervisorCreds), body);
  headers.set("content-type", "application/json");
  const send = () => t.call({}, { raw: { body, headers: Object.fromEntries(headers) } });
  assert.equal((await send()).status, 200);
  refused(await send(), /used before \(a replay\)/);
});

Deno.test("agent bearers - a supervisor cannot name the mesh's own actors, add scope or fields, or touch a human's row", async () => {
  const t = await setup();
  for (const actor of ["manager", "Delivery_x", "operator", "bad name", "x".repeat(65)]) {
    const r = await t.call(t.grantBody(actor));
    assert.equal(r.status, 400, actor);
    assert.equal(r.body.code, "actor_bad_name", actor);
  }
  const widened = await t.call(t.grantBody("worker", newLifecycleUid(), {
    grant: { subscribe: [], allowSubscribe: [], allowPublish: [], scope: ["admin"] },
  }));
  assert.equal(widened.status, 400);
  assert.equal(widened.body.code, "agent_bearer_bad_request");
  const badAcl = await t.call(t.grantBody("worker", newLifecycleUid(), {
    grant: { subscribe: ["ops"], allowSubscribe: [], allowPublish: [] },
  }));
  assert.equal(badAcl.status, 400);
  assert.equal(badAcl.body.code, "ledger_bad_grant");
  // A grant that would make the ledger (read at every connect) heavy.
  const many = Array.from({ length: 200 }, (_, i) => `team${i}.updates`);
  const heavy = await t.call(t.grantBody("worker", newLifecycleUid(), {
    grant: { subscribe: [], allowSubscribe: many, allowPublish: [] },
  }));
  assert.equal(heavy.status, 400);
  assert.equal(heavy.body.code, "agent_bearer_bad_request");
  assert.match(heavy.body.error as string, /over 2048 bytes/);
  const badUid = await t.call(t.grantBody("worker", "not-a-uid"));
  assert.equal(badUid.body.code, "agent_bearer_bad_request");
  const unknownOp = await t.call({ op: "mint", actor: "worker", lifecycleUid: newLifecycleUid() });
  assert.equal(unknownOp.body.code, "agent_bearer_bad_request");

  // A human's row (an IdP login's owner) under the same actor name is never touched.
  const human = await deriveOwnerForIdpSubject(t.secret, "https://idp.example", "alice-sub");
  const humanRow = await t.ledger.grant({
    owner: human,
    actor: "alice",
    subscribe: [],
    allowSubscribe: ["general"],
    allowPublish: ["general"],
    scope: ["admin"],
  });
  const uid = newLifecycleUid();
  assert.equal((await t.call(t.grantBody("alice", uid))).status, 200);
  assert.deepEqual(await t.ledger.get(human, "alice"), humanRow, "the human's row is unchanged");
  const supervised = await t.call({ op: "bearer", actor: "alice", lifecycleUid: uid });
  const b = await validateUserToken(supervised.body.token as string, {
    resolver: t.issuer.resolver(),
    space: t.space,
  });
  assert.notEqual(b.owner, human);
  assert.equal(
    (await t.call({ op: "revoke", actor: "alice", lifecycleUid: humanRow.lifecycleUid }))
      .body.revoked,
    false,
  );
  assert.deepEqual(await t.ledger.get(human, "alice"), humanRow);
});

Deno.test("agent bearers - a supervisor holds at most its share of the ledger, at its rate", async () => {
  let clock = Date.now();
  const t = await setup({ now: () => clock });
  for (let i = 0; i < MAX_SUPERVISED_ROWS; i++) {
    clock += 100;
    const r = await t.call(t.grantBody(`a${i}`));
    assert.equal(r.status, 200, `${i}: ${JSON.stringify(r.body)}`);
  }
  clock += 100;
  const full = await t.call(t.grantBody("one_more"));
  assert.equal(full.status, 400);
  assert.equal(full.body.code, "ledger_full");
  // A human can still be granted: the ledger is not full for them.
  await t.ledger.grant({
    owner: await deriveOwnerForIdpSubject(t.secret, "https://idp.example", "bob"),
    actor: "bob",
    subscribe: [],
    allowSubscribe: [],
    allowPublish: [],
  });
  // Rewriting an existing agent's row is not a new row.
  clock += 100;
  assert.equal((await t.call(t.grantBody("a0"))).status, 200);

  // A burst past the rate is refused while the clock stands still.
  clock += 60_000;
  let throttled = 0;
  for (let i = 0; i < AGENT_BEARER_RATE.burst + 10; i++) {
    const r = await t.call({ op: "hello" });
    if (r.status === 429) {
      assert.equal(r.body.code, "throttled");
      throttled++;
    }
  }
  assert.equal(throttled, 10);
});

Deno.test("agent bearers - a browser, a non-JSON body or an oversized one is refused before any proof is read", async () => {
  const t = await setup();
  const r1 = await t.call({}, {
    raw: { body: "{}", headers: { "content-type": "application/json", origin: "http://x" } },
  });
  assert.deepEqual([r1.status, r1.body.code], [403, "origin_refused"]);
  const r2 = await t.call({}, { raw: { body: "{}", headers: { "content-type": "text/plain" } } });
  assert.deepEqual([r2.status, r2.body.code], [415, "unsupported_media_type"]);
  const r3 = await t.call({}, {
    raw: { body: "x".repeat(40_000), headers: { "content-type": "application/json" } },
  });
  assert.deepEqual([r3.status, r3.body.code], [413, "body_too_large"]);
  const r4 = await t.call({}, {
    raw: { body: "{", headers: { "content-type": "application/json" } },
  });
  assert.deepEqual([r4.status, r4.body.code], [400, "bad_json"]);
});
