/**
 * Red team 48: `POST /agents` of the real auth-service daemon, asked by everyone but the
 * supervisor (a local process with no cred, a member with an agent cred, a provisioner cred, a
 * supervisor cred's replayed or re-aimed proof), and by the supervisor for what it may not have
 * (an IdP user's row, scope, reserved names). Each test passes when the defence holds.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { validateUserToken } from "../../lib/auth/validate.ts";
import {
  mintCreds,
  newIdentity,
  proveAgentBearerRequest,
  requestProver,
} from "../../lib/trust/mod.ts";
import { ask, OPEN_GRANT, post, startRt48, SUPERVISOR, tryConnect, uid } from "./_rt48.ts";

Deno.test("redteam48 agents rail - no cred, a member's cred, a provisioner's cred or a re-used supervisor proof gets no row and no bearer", async () => {
  const t = await startRt48();
  try {
    const { mesh, svc, owner } = t;
    const url = svc.discovery.url;
    // A row the supervisor granted: the target of every bearer attempt below.
    const life = uid();
    const g = await ask(url, {
      op: "grant",
      actor: "victim",
      lifecycleUid: life,
      grant: OPEN_GRANT,
    }, t.supervisor);
    assert.equal(g.status, 200, JSON.stringify(g.body));

    const member = await requestProver(
      await mintCreds(mesh.auth, newIdentity(), "agent", {
        principal: SUPERVISOR,
        lifecycleUid: uid(),
        allowSubscribe: [],
        allowPublish: [],
      }),
    );
    const provisioner = await requestProver(
      await mintCreds(mesh.auth, newIdentity(), "provisioner", { principal: SUPERVISOR }),
    );
    // A supervisor cred of another space's account: the same profile, the wrong signer.
    const { createSpaceAuth } = await import("../../lib/trust/mod.ts");
    const foreign = await requestProver(
      await mintCreds(await createSpaceAuth("rt48other"), newIdentity(), "supervisor", {
        principal: SUPERVISOR,
      }),
    );
    const attempts: [string, () => Promise<{ status: number; body: Record<string, unknown> }>][] = [
      [
        "no proof",
        () => ask(url, { op: "bearer", actor: "victim", lifecycleUid: life }, undefined),
      ],
      [
        "member cred",
        () => ask(url, { op: "bearer", actor: "victim", lifecycleUid: life }, member),
      ],
      [
        "provisioner cred",
        () => ask(url, { op: "bearer", actor: "victim", lifecycleUid: life }, provisioner),
      ],
      [
        "foreign supervisor",
        () => ask(url, { op: "bearer", actor: "victim", lifecycleUid: life }, foreign),
      ],
      [
        "supervisor cred, another caller named",
        () =>
          ask(url, { op: "bearer", actor: "victim", lifecycleUid: life }, t.supervisor, {
            caller: { owner: "local", actor: "manager_other" },
          }),
      ],
      [
        "member cred: revoke",
        () => ask(url, { op: "revoke", actor: "victim", lifecycleUid: life }, member),
      ],
      ["member cred: hello (the sentinel creds)", () => ask(url, { op: "hello" }, member)],
    ];
    for (const [what, run] of attempts) {
      const r = await run();
      assert.ok(
        r.status === 401 || r.status === 429,
        `${what}: ${r.status} ${JSON.stringify(r.body)}`,
      );
      assert.equal(r.body.token, undefined, what);
      assert.equal(r.body.sentinelCreds, undefined, what);
    }

    // A proven request re-sent as is (a replay), and its proof on another body (a re-aim).
    const body = new TextEncoder().encode(JSON.stringify({
      caller: SUPERVISOR,
      nonce: crypto.randomUUID(),
      op: "bearer",
      actor: "victim",
      lifecycleUid: life,
    }));
    const headers = await proveAgentBearerRequest(t.supervisor, body);
    headers.set("content-type", "application/json");
    const first = await post(url, body, headers);
    assert.equal(first.status, 200);
    const again = await post(url, body, headers);
    assert.notEqual(again.status, 200, "a replayed proof got a second bearer");
    const other = new TextEncoder().encode(JSON.stringify({
      caller: SUPERVISOR,
      nonce: crypto.randomUUID(),
      op: "revoke",
      actor: "victim",
      lifecycleUid: life,
    }));
    const reaimed = await post(url, other, headers);
    assert.notEqual(reaimed.status, 200, "a proof re-aimed at another body was taken");

    assert.equal((await mesh.ledger.get(owner, "victim"))?.lifecycleUid, life, "the row stands");
  } finally {
    await t.close();
  }
});

Deno.test("redteam48 agents rail - the supervisor gets no row or bearer of an IdP user, no scope and no reserved name", async () => {
  const t = await startRt48();
  try {
    const { mesh, svc, owner } = t;
    const url = svc.discovery.url;
    // A human's row (the IdP's default subject).
    const human = await mesh.grant("alice");
    const tries: [string, Record<string, unknown>][] = [
      ["grant naming the human's owner", {
        op: "grant",
        owner: mesh.owner,
        actor: "alice",
        lifecycleUid: human.lifecycleUid,
        grant: OPEN_GRANT,
      }],
      ["grant with scope in the grant", {
        op: "grant",
        actor: "scoped",
        lifecycleUid: uid(),
        grant: { ...OPEN_GRANT, scope: ["admin"] },
      }],
      ["grant with a top-level scope", {
        op: "grant",
        actor: "scoped2",
        lifecycleUid: uid(),
        scope: ["admin", "supervise"],
        grant: OPEN_GRANT,
      }],
      ["grant of a reserved name", {
        op: "grant",
        actor: "Manager_x",
        lifecycleUid: uid(),
        grant: OPEN_GRANT,
      }],
      ["grant of a delivery name", {
        op: "grant",
        actor: "delivery",
        lifecycleUid: uid(),
        grant: OPEN_GRANT,
      }],
      ["bearer for the human's name and lifecycle", {
        op: "bearer",
        owner: mesh.owner,
        actor: "alice",
        lifecycleUid: human.lifecycleUid,
      }],
      ["revoke of the human", {
        op: "revoke",
        owner: mesh.owner,
        actor: "alice",
        lifecycleUid: human.lifecycleUid,
      }],
    ];
    const bearers: string[] = [];
    for (const [what, doc] of tries) {
      const r = await ask(url, doc, t.supervisor);
      if (typeof r.body.token === "string") bearers.push(r.body.token);
      console.log(`${what}: ${r.status} ${JSON.stringify(r.body).slice(0, 160)}`);
    }
    // Whatever was answered: the human's row is as the operator granted it.
    const now = await mesh.ledger.get(mesh.owner, "alice");
    assert.deepEqual(now, human, "the human's row was rewritten or removed");
    for (const row of await mesh.ledger.list()) {
      if (row.owner === owner) {
        assert.deepEqual(row.scope, [], `${row.actor} got scope`);
        assert.ok(!/^(manager|delivery)/i.test(row.actor), `${row.actor} is a reserved name`);
      } else {
        assert.equal(row.owner, mesh.owner);
        assert.equal(row.actor, "alice");
      }
    }
    for (const b of bearers) {
      const v = await validateUserToken(b, {
        resolver: t.mesh.issuer.resolver(),
        space: mesh.space,
      }).catch((e) => e);
      if (isCotalError(v)) continue;
      assert.equal(v.owner, owner, "a bearer for another owner");
      assert.deepEqual(v.scope, [], "a bearer with scope");
    }
  } finally {
    await t.close();
  }
});

Deno.test("redteam48 agents rail - a local flood of unproven and throttled requests does not stop the supervisor's bearers", async () => {
  const t = await startRt48();
  try {
    const { svc } = t;
    const url = svc.discovery.url;
    const life = uid();
    assert.equal(
      (await ask(
        url,
        { op: "grant", actor: "worker", lifecycleUid: life, grant: OPEN_GRANT },
        t
          .supervisor,
      )).status,
      200,
    );
    // The flood: a member cred whose proofs verify up to the profile check, 32 KiB bodies, 16
    // at a time, for 8 s (the unproven budget is spent within the first second).
    const member = await requestProver(
      await mintCreds(t.mesh.auth, newIdentity(), "agent", {
        principal: SUPERVISOR,
        lifecycleUid: uid(),
        allowSubscribe: [],
        allowPublish: [],
      }),
    );
    const pad = "x".repeat(30_000);
    const stop = Date.now() + 8_000;
    let sent = 0;
    const statuses = new Map<number, number>();
    const flood = Array.from({ length: 16 }, async () => {
      while (Date.now() < stop) {
        const r = await ask(url, { op: "hello", pad }, member, { timeoutMs: 20_000 }).catch(
          () => ({ status: 0, body: {}, ms: 0 }),
        );
        sent++;
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      }
    });
    // The supervisor renews its agent's bearer every 500 ms meanwhile.
    const lat: number[] = [];
    const fails: string[] = [];
    await new Promise((r) => setTimeout(r, 1_000));
    while (Date.now() < stop) {
      const r = await ask(
        url,
        { op: "bearer", actor: "worker", lifecycleUid: life },
        t.supervisor,
        {
          timeoutMs: 10_000,
        },
      ).catch((e) => ({ status: 0, body: { error: String(e) }, ms: 10_000 }));
      lat.push(r.ms);
      if (r.status !== 200) fails.push(`${r.status} ${JSON.stringify(r.body).slice(0, 120)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    await Promise.all(flood);
    console.log(
      `flood sent ${sent} (${JSON.stringify([...statuses])}); supervisor latencies ms ${
        lat.join(",")
      }`,
    );
    assert.deepEqual(fails, [], "the supervisor was refused during the flood");
    // The supervisor's own request timeout is 10 s; a renewal must not come near it.
    assert.ok(Math.max(...lat) < 5_000, `a supervisor request took ${Math.max(...lat)} ms`);
  } finally {
    await t.close();
  }
});

Deno.test("redteam48 agents rail - a bearer held before revoke connects neither after it nor under the name's next lifecycle", async () => {
  const t = await startRt48();
  try {
    const { mesh, svc } = t;
    const url = svc.discovery.url;
    const life = uid();
    await ask(
      url,
      { op: "grant", actor: "gone", lifecycleUid: life, grant: OPEN_GRANT },
      t
        .supervisor,
    );
    const old = (await ask(url, { op: "bearer", actor: "gone", lifecycleUid: life }, t.supervisor))
      .body.token as string;
    assert.equal(await tryConnect(mesh, old), "connected");
    // Despawn: the supervisor revokes the row.
    const r = await ask(url, { op: "revoke", actor: "gone", lifecycleUid: life }, t.supervisor);
    assert.equal(r.body.revoked, true);
    const tryOld = () => tryConnect(mesh, old);
    assert.match(await tryOld(), /refused/, "the revoked row's bearer still connects");
    // The same name spawned again: a new lifecycle, and the old bearer is still refused.
    await ask(
      url,
      { op: "grant", actor: "gone", lifecycleUid: uid(), grant: OPEN_GRANT },
      t
        .supervisor,
    );
    assert.match(
      await tryOld(),
      /refused/,
      "an earlier lifecycle's bearer connects as the new one",
    );
    // And a bearer for the old lifecycle is not issued any more.
    const stale = await ask(url, { op: "bearer", actor: "gone", lifecycleUid: life }, t.supervisor);
    assert.equal(stale.status, 409);
  } finally {
    await t.close();
  }
});
