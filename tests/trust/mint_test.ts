import assert from "node:assert/strict";
import {
  assertExplicitPermissions,
  createSpaceAuth,
  mintConnectionEvictorCreds,
  mintCreds,
  mintMembershipObserverCreds,
  type MintOpts,
  newIdentity,
  newLifecycleUid,
  permissionsFor,
  type Profile,
  PROFILES,
  stripSpaceAuth,
} from "../../lib/trust/mod.ts";
import { credsClaims } from "./_helpers.ts";

const auth = await createSpaceAuth("mint space");
const uid = newLifecycleUid();

function code(c: string) {
  return (err: unknown) => {
    assert.equal((err as { code?: string }).code, c, String(err));
    return true;
  };
}

function optsFor(profile: Profile): MintOpts {
  if (profile === "agent") {
    return {
      lifecycleUid: uid,
      allowSubscribe: ["general", "team.>"],
      allowPublish: ["general"],
      role: "reviewer",
    };
  }
  if (profile === "deprovisioner") {
    return { deprovisionTarget: { owner: "local", actor: "a1", lifecycleUid: uid } };
  }
  return {};
}

Deno.test("trust - an unknown profile is refused, never treated as agent", async () => {
  for (const p of ["manager", "Agent", "", "membership-observer", "__proto__", "toString"]) {
    await assert.rejects(mintCreds(auth, newIdentity(), p as Profile), code("unknown_profile"), p);
  }
  await assert.rejects(
    mintCreds(auth, newIdentity(), "connection-evictor" as Profile),
    /mintConnectionEvictorCreds/,
  );
});

Deno.test("trust - an agent without a lifecycleUid is refused", async () => {
  await assert.rejects(mintCreds(auth, newIdentity(), "agent"), code("missing_lifecycle_uid"));
  await assert.rejects(
    mintCreds(auth, newIdentity(), "agent", { lifecycleUid: "short" }),
    code("invalid_lifecycle_uid"),
  );
});

Deno.test("trust - channel names the token rules would rewrite are refused", async () => {
  for (const ch of ["foo/bar", "a b", "ünï", "a..b", "", "a.>.b", ">x", "caf\u00e9"]) {
    await assert.rejects(
      mintCreds(auth, newIdentity(), "agent", { lifecycleUid: uid, allowSubscribe: [ch] }),
      code("invalid_channel"),
      JSON.stringify(ch),
    );
  }
  await assert.rejects(
    mintCreds(auth, newIdentity(), "agent", { lifecycleUid: uid, allowPublish: ["team.*"] }),
    code("invalid_channel"),
  );
  const ok = await credsClaims(
    await mintCreds(auth, newIdentity(), "agent", {
      lifecycleUid: uid,
      allowSubscribe: ["team-a.*", "x_y.>", "*"],
    }),
  );
  assert.ok(ok.nats.type === "user" && ok.nats.sub?.allow?.includes("cotal.mint_space.chat.*.*.*"));
});

Deno.test("trust - options that do not belong to the profile are refused", async () => {
  await assert.rejects(
    mintCreds(auth, newIdentity(), "provisioner", { role: "x" }),
    code("invalid_mint_option"),
  );
  await assert.rejects(
    mintCreds(auth, newIdentity(), "observer", { allowSubscribe: ["general"] }),
    code("invalid_mint_option"),
  );
  await assert.rejects(
    mintCreds(auth, newIdentity(), "deprovisioner"),
    code("missing_deprovision_target"),
  );
  await assert.rejects(
    mintCreds(auth, newIdentity(), "operator", { principal: { owner: "UABC", actor: "x" } }),
    code("invalid_principal"),
  );
  await assert.rejects(
    mintCreds(auth, newIdentity(), "operator", { principal: { owner: "local", actor: "a.b" } }),
    code("invalid_principal"),
  );
});

Deno.test("trust - no profile holds an allow-all or a $JS.> grant", () => {
  const broad = new Set([">", "$JS.>", "$JS.API.>", "$SYS.>", "$KV.>", "cotal.>", "_INBOX.>"]);
  for (const profile of PROFILES) {
    const perms = permissionsFor("s", profile, { ...optsFor(profile), connId: "CONNID12345" });
    for (const s of [...perms.pub.allow, ...perms.sub.allow]) {
      assert.ok(!broad.has(s), `${profile} allows ${s}`);
      assert.ok(!s.startsWith("$SYS."), `${profile} reaches $SYS: ${s}`);
    }
    assert.ok(perms.sub.allow.includes("_INBOX_CONNID12345.>"), profile);
    assert.ok(perms.pub.allow.length > 0 || perms.pub.deny.includes(">"), profile);
  }
});

Deno.test("trust - the agent is forge-locked, bind-only and has no manager lease or INBOX grant", () => {
  const p = permissionsFor("s", "agent", {
    ...optsFor("agent"),
    principal: { owner: "local", actor: "alice" },
    connId: "CONNID12345",
  });
  const all = [...p.pub.allow, ...p.sub.allow];
  assert.ok(p.pub.allow.includes("cotal.s.chat.local.alice.general"));
  assert.ok(p.pub.allow.includes("cotal.s.inst.*.*.local.alice"));
  assert.ok(!all.some((s) => s.includes("cotal_manager_s") || s.includes("INBOX_s")));
  assert.ok(!p.pub.allow.some((s) => /STREAM\.INFO\.(DM|DLV)_s/.test(s)));
  assert.ok(!p.pub.allow.some((s) => /CONSUMER\.(DURABLE\.)?CREATE\.(DM|TASK|DLV)_s/.test(s)));
  for (const st of ["DM_s", "TASK_s", "DLV_s"]) {
    assert.ok(p.pub.deny.includes(`$JS.API.CONSUMER.CREATE.${st}`));
    assert.ok(p.pub.deny.includes(`$JS.API.CONSUMER.CREATE.${st}.>`));
    assert.ok(p.pub.deny.includes(`$JS.API.CONSUMER.DURABLE.CREATE.${st}.>`));
  }
  // Presence: its own key only.
  const kv = p.pub.allow.filter((s) => s.startsWith("$KV."));
  assert.deepEqual(kv, ["$KV.cotal_presence_s.local.alice"]);
  // History create is pinned to its own durable and its ACL filter.
  assert.ok(p.pub.allow.includes(
    `$JS.API.CONSUMER.CREATE.CHAT_s.chathist_local-alice-${uid}.cotal.s.chat.*.*.general`,
  ));
});

Deno.test("trust - every KV watcher can delete its watch consumer", () => {
  for (const profile of PROFILES) {
    const perms = permissionsFor("s", profile, { ...optsFor(profile), connId: "CONNID12345" });
    for (const s of perms.pub.allow) {
      const m = /^\$JS\.API\.CONSUMER\.CREATE\.(KV_[^.]+)\.>$/.exec(s);
      if (m) {
        assert.ok(perms.pub.allow.includes(`$JS.API.CONSUMER.DELETE.${m[1]}.>`), `${profile}`);
      }
    }
  }
});

Deno.test("trust - minted user JWTs are signed by the signing key for the data account", async () => {
  const id = newIdentity();
  const c = await credsClaims(
    await mintCreds(auth, id, "operator", { principal: { owner: "local", actor: "op" } }),
  );
  assert.equal(c.sub, id.id);
  assert.equal(c.iss, auth.account.signingPub);
  assert.equal(c.name, "operator");
  assert.ok(c.nats.type === "user");
  assert.equal(c.nats.issuer_account, auth.account.pub);
  assert.deepEqual(c.nats.tags, ["owner:local", "actor:op", "principal:local.op"]);
});

Deno.test("trust - a stripped bundle still mints; a bundle without the signing seed does not", async () => {
  const stripped = stripSpaceAuth(auth);
  assert.equal(stripped.operator.seed, "");
  assert.equal(stripped.account.seed, "");
  assert.equal(stripped.account.jwt, "");
  assert.equal(stripped.sys.signingSeed, undefined);
  const c = await credsClaims(await mintCreds(stripped, newIdentity(), "probe"));
  assert.equal(c.iss, auth.account.signingPub);
  await assert.rejects(
    mintCreds(
      { space: "x", account: { pub: auth.account.pub, signingSeed: "" } },
      newIdentity(),
      "probe",
    ),
    code("missing_signing_seed"),
  );
  await assert.rejects(
    mintCreds(auth, { id: "nope", seed: "nope" }, "probe"),
    code("invalid_identity"),
  );
});

Deno.test("trust - $SYS users always carry an explicit, narrow permission block", async () => {
  for (
    const creds of [
      await mintMembershipObserverCreds(auth, newIdentity()),
      await mintConnectionEvictorCreds(auth, newIdentity()),
    ]
  ) {
    const c = await credsClaims(creds);
    assert.equal(c.iss, auth.sys.pub);
    assert.ok(c.nats.type === "user");
    assert.ok((c.nats.pub?.allow ?? []).length > 0, "pub.allow present");
    assert.ok((c.nats.sub?.allow ?? []).length > 0, "sub.allow present");
    for (const s of [...c.nats.pub!.allow!, ...c.nats.sub!.allow!]) {
      assert.ok(!["", ">", "$SYS.>", "_INBOX.>"].includes(s), s);
    }
  }
  // The guard itself: an empty block is refused rather than minted.
  assert.throws(
    () =>
      assertExplicitPermissions(
        { pub: { allow: [], deny: [] }, sub: { allow: [], deny: [] } },
        "membership-observer",
      ),
    code("missing_permissions"),
  );
  const noSeed = { ...auth, sys: { pub: auth.sys.pub, jwt: auth.sys.jwt } };
  await assert.rejects(mintConnectionEvictorCreds(noSeed, newIdentity()), code("missing_sys_seed"));
});
