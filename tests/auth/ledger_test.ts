import assert from "node:assert/strict";
import { createUserTokenIssuer } from "../../lib/auth/issuer.ts";
import { actorLedgerKey } from "../../lib/auth/keys.ts";
import { type ActorGrant, createActorLedger } from "../../lib/auth/ledger.ts";
import { channelCovers } from "../../lib/wire/provision.ts";
import { validateUserToken } from "../../lib/auth/validate.ts";
import { MemorySecretStore } from "../../lib/workspace/memory_secret_store.ts";
import { tempDir } from "../_harness/broker.ts";
import { code, ownerFor } from "./_helpers.ts";

const SPACE = "alpha";
const owner = await ownerFor("alice");

function grantFor(actor: string, over: Partial<ActorGrant> = {}): ActorGrant {
  return {
    owner,
    actor,
    subscribe: ["general"],
    allowSubscribe: ["general", "team.>"],
    allowPublish: ["general"],
    scope: ["spawn"],
    ...over,
  };
}

Deno.test("auth - ledger grant, list, get and revoke per space", async () => {
  const store = new MemorySecretStore();
  const ledger = createActorLedger({ space: SPACE, store });
  const other = createActorLedger({ space: "beta", store });
  assert.deepEqual(await ledger.list(), []);
  const row = await ledger.grant(grantFor("alice"));
  assert.match(row.lifecycleUid, /^[a-z0-9]{26,32}$/);
  assert.deepEqual(row.allowSubscribe, ["general", "team.>"]);
  await ledger.grant(grantFor("bob", { allowPublish: [], subscribe: [] }));
  assert.deepEqual((await ledger.list()).map((r) => r.actor), ["alice", "bob"]);
  assert.deepEqual(await other.list(), [], "rows are per space");
  assert.equal((await ledger.get(owner, "alice"))?.lifecycleUid, row.lifecycleUid);
  assert.equal((await ledger.authorize(owner, "alice")).actor, "alice");
  assert.equal(await ledger.revoke(owner, "alice"), true);
  assert.equal(await ledger.revoke(owner, "alice"), false);
  assert.equal(await ledger.get(owner, "alice"), undefined);
  await assert.rejects(ledger.authorize(owner, "alice"), code("actor_not_granted"));
  await assert.rejects(ledger.authorize(owner, "nobody"), code("actor_not_granted"));
  await assert.rejects(ledger.authorize("local", "bob"), code("actor_bad_name"));
});

Deno.test("auth - ledger grants state every ACL list and keep subscribe within allowSubscribe", async () => {
  const ledger = createActorLedger({ space: SPACE, store: new MemorySecretStore() });
  const cases: [Record<string, unknown>, string][] = [
    [{ allowPublish: undefined }, "allowPublish is missing"],
    [{ allowSubscribe: undefined }, "allowSubscribe is missing"],
    [{ subscribe: undefined }, "subscribe is missing"],
    [{ subscribe: ["secret"] }, "outside allowSubscribe"],
    [{ subscribe: ["team.>"], allowSubscribe: ["team.*"] }, "outside allowSubscribe"],
    [{ allowPublish: ["foo/bar"] }, "valid channels"],
    [{ allowPublish: ["a", "a"] }, "valid channels"],
    [{ scope: ["root"] }, "scope"],
    [{ owner: "local" }, "principal"],
    [{ actor: "a.b" }, "principal"],
    [{ role: "a b" }, "role"],
  ];
  for (const [over, why] of cases) {
    await assert.rejects(
      ledger.grant({ ...grantFor("alice"), ...over } as ActorGrant),
      (e: Error) => {
        code(over.owner || over.actor ? "actor_bad_name" : "ledger_bad_grant")(e);
        assert.ok(e.message.includes(why) || why === "principal", e.message);
        return true;
      },
    );
  }
  assert.deepEqual(await ledger.list(), [], "a refused grant writes nothing");
  const ok = await ledger.grant(grantFor("alice", { subscribe: ["team.eng"], role: "reviewer" }));
  assert.equal(ok.role, "reviewer");
});

Deno.test("auth - re-grant rotates the lifecycle uid so an earlier bearer goes stale", async () => {
  const ledger = createActorLedger({ space: SPACE, store: new MemorySecretStore() });
  const issuer = await createUserTokenIssuer({ space: SPACE });
  const first = await ledger.grant(grantFor("alice", { scope: ["spawn", "admin"] }));
  const mint = async (uid: string | undefined, scope: string[]) => {
    const { token } = await issuer.issue({
      space: SPACE,
      owner,
      actor: "alice",
      scope,
      lifecycleUid: uid,
    });
    return await validateUserToken(token, { space: SPACE, resolver: issuer.resolver() });
  };
  const bearer = await mint(first.lifecycleUid, ["spawn", "admin"]);
  assert.equal((await ledger.authorizeBearer(bearer)).lifecycleUid, first.lifecycleUid);
  // Narrowing the grant (it is a whole-row upsert) makes the wider bearer stale.
  const second = await ledger.grant(grantFor("alice", { scope: ["spawn"] }));
  assert.notEqual(second.lifecycleUid, first.lifecycleUid);
  await assert.rejects(ledger.authorizeBearer(bearer), code("bearer_stale"));
  await assert.rejects(
    ledger.authorizeBearer(await mint(second.lifecycleUid, ["spawn", "admin"])),
    code("bearer_scope_exceeds_grant"),
  );
  await assert.rejects(ledger.authorizeBearer(await mint(undefined, [])), code("bearer_stale"));
  const current = await mint(second.lifecycleUid, ["spawn"]);
  assert.equal((await ledger.authorizeBearer(current)).actor, "alice");
  // Revocation denies the next connect while the bearer is still unexpired.
  await ledger.revoke(owner, "alice");
  await assert.rejects(ledger.authorizeBearer(current), code("actor_not_granted"));
  await assert.rejects(
    ledger.authorizeBearer({ ...current, space: "beta" }),
    code("bearer_bad_audience"),
  );
});

Deno.test("auth - a corrupted ledger file fails closed for reads and writes", async () => {
  const dir = await tempDir("cotal-ledger-");
  const ledger = createActorLedger({ space: SPACE, stateDir: dir });
  await ledger.grant(grantFor("alice"));
  await ledger.grant(grantFor("bob"));
  const path = `${dir}/${actorLedgerKey(SPACE)}`;
  const good = await Deno.readTextFile(path);
  const doc = JSON.parse(good);
  assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);

  const variants: [string, string][] = [
    ["{not json", "not JSON"],
    [JSON.stringify({ ...doc, ver: 2 }), "version 1"],
    [JSON.stringify({ ...doc, space: "beta" }), "another space"],
    [JSON.stringify({ ...doc, actors: [doc.actors[0], doc.actors[0]] }), "listed twice"],
    // One bad row poisons the ledger; the good row next to it is not served either.
    [
      JSON.stringify({ ...doc, actors: [doc.actors[0], { ...doc.actors[1], allowPublish: ">" }] }),
      "allowPublish",
    ],
    [JSON.stringify({ ...doc, actors: [{ ...doc.actors[0], admin: true }] }), "unknown field"],
    [JSON.stringify({ ...doc, actors: [{ ...doc.actors[0], lifecycleUid: 5 }] }), "lifecycleUid"],
  ];
  for (const [text, why] of variants) {
    await Deno.writeTextFile(path, text);
    const unreadable = (e: Error) => code("ledger_unreadable")(e) && e.message.includes(why);
    await assert.rejects(ledger.authorize(owner, "alice"), unreadable);
    await assert.rejects(ledger.list(), unreadable);
    await assert.rejects(ledger.grant(grantFor("carol")), unreadable);
    await assert.rejects(ledger.revoke(owner, "alice"), unreadable);
    assert.equal(await Deno.readTextFile(path), text, "a corrupt ledger is never overwritten");
  }
  // A symlinked ledger file is refused by the store, and so denies.
  await Deno.remove(path);
  await Deno.writeTextFile(`${dir}/elsewhere.json`, good);
  await Deno.symlink(`${dir}/elsewhere.json`, path);
  await assert.rejects(ledger.authorize(owner, "alice"), code("ledger_unreadable"));
  await Deno.remove(path);
  await Deno.writeTextFile(path, good);
  assert.equal((await ledger.authorize(owner, "alice")).actor, "alice");
});

Deno.test("auth - concurrent grants in one process are serialised, not lost", async () => {
  const ledger = createActorLedger({ space: SPACE, store: new MemorySecretStore() });
  await Promise.all(["a1", "a2", "a3", "a4", "a5"].map((a) => ledger.grant(grantFor(a))));
  assert.equal((await ledger.list()).length, 5);
});

Deno.test("auth - ledger options need a space and exactly one backend", () => {
  assert.throws(() => createActorLedger({ space: SPACE }), code("ledger_bad_options"));
  assert.throws(
    () => createActorLedger({ space: SPACE, store: new MemorySecretStore(), stateDir: "/tmp" }),
    code("ledger_bad_options"),
  );
  assert.throws(
    () => createActorLedger({ space: "", store: new MemorySecretStore() }),
    code("ledger_bad_options"),
  );
});

Deno.test("auth - channelCovers is NATS pattern containment", () => {
  const yes: [string, string][] = [
    ["general", "general"],
    [">", "a.b.c"],
    ["team.>", "team.eng"],
    ["team.>", "team.*"],
    ["team.>", "team.>"],
    ["team.*", "team.eng"],
    ["*.eng", "team.eng"],
  ];
  const no: [string, string][] = [
    ["general", "generals"],
    ["team.>", "team"],
    ["team.*", "team.>"],
    ["team.*", "team.eng.x"],
    ["team.eng", "team.*"],
    ["a.b", "a"],
  ];
  for (const [p, c] of yes) assert.ok(channelCovers(p, c), `${p} covers ${c}`);
  for (const [p, c] of no) assert.ok(!channelCovers(p, c), `${p} does not cover ${c}`);
});
