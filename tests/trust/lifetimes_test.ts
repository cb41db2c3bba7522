import assert from "node:assert/strict";
import {
  createSpaceAuth,
  CREDENTIAL_LIFETIMES,
  type CredentialKind,
  mintConnectionEvictorCreds,
  mintCreds,
  mintMembershipObserverCreds,
  type MintOpts,
  newIdentity,
  newLifecycleUid,
  type Profile,
  PROFILES,
  resolveExpiry,
} from "../../lib/trust/mod.ts";
import { STANDING_MIN_TTL_SEC } from "../../lib/trust/lifetimes.ts";
import { credsClaims } from "./_helpers.ts";

const auth = await createSpaceAuth("lifetimes");

function optsFor(profile: Profile): MintOpts {
  if (profile === "agent") return { lifecycleUid: newLifecycleUid() };
  if (profile === "deprovisioner") {
    return { deprovisionTarget: { owner: "local", actor: "a1", lifecycleUid: newLifecycleUid() } };
  }
  return {};
}

function assertCode(code: string) {
  return (err: unknown) => {
    assert.equal((err as { code?: string }).code, code, String(err));
    return true;
  };
}

Deno.test("trust - every credential kind has a bounded default no larger than its maximum", () => {
  const kinds = Object.keys(CREDENTIAL_LIFETIMES) as CredentialKind[];
  assert.deepEqual(
    new Set(kinds),
    new Set([...PROFILES, "membership-observer", "connection-evictor"]),
  );
  for (const k of kinds) {
    const p = CREDENTIAL_LIFETIMES[k];
    assert.ok(Number.isSafeInteger(p.defaultTtlSeconds) && p.defaultTtlSeconds > 0, k);
    assert.ok(p.defaultTtlSeconds <= p.maxTtlSeconds, k);
  }
  assert.equal(CREDENTIAL_LIFETIMES.probe.defaultTtlSeconds, 60);
  assert.equal(CREDENTIAL_LIFETIMES.provisioner.defaultTtlSeconds, 300);
  assert.equal(CREDENTIAL_LIFETIMES.delivery.defaultTtlSeconds, 86400);
});

Deno.test("trust - every profile mints with an exp equal to its default (agent and teardown included)", async () => {
  for (const profile of PROFILES) {
    const before = Math.floor(Date.now() / 1000);
    const claims = await credsClaims(
      await mintCreds(auth, newIdentity(), profile, optsFor(profile)),
    );
    const after = Math.floor(Date.now() / 1000);
    const def = CREDENTIAL_LIFETIMES[profile].defaultTtlSeconds;
    assert.ok(claims.exp !== undefined, `${profile} has no exp`);
    assert.ok(claims.exp! >= before + def && claims.exp! <= after + def, profile);
  }
});

Deno.test("trust - CREDENTIAL_LIFETIMES cannot be mutated to widen a lifetime", async () => {
  const table = CREDENTIAL_LIFETIMES as unknown as Record<string, Record<string, unknown>>;
  assert.throws(() => {
    table.provisioner.defaultTtlSeconds = undefined;
  }, TypeError);
  assert.throws(() => {
    table.provisioner.maxTtlSeconds = 1e12;
  }, TypeError);
  assert.throws(() => {
    table.provisioner = { class: "one-shot", defaultTtlSeconds: 1e9, maxTtlSeconds: 1e9 };
  }, TypeError);
  assert.throws(() => Object.defineProperty(table, "teardown", { value: {} }), TypeError);
  assert.ok(Object.isFrozen(CREDENTIAL_LIFETIMES));
  const claims = await credsClaims(await mintCreds(auth, newIdentity(), "provisioner"));
  assert.ok(claims.exp! - claims.iat <= 300);
});

Deno.test("trust - a TTL above the profile maximum is refused", async () => {
  const max = CREDENTIAL_LIFETIMES.provisioner.maxTtlSeconds;
  await assert.rejects(
    mintCreds(auth, newIdentity(), "provisioner", { expiresInSeconds: max + 1 }),
    assertCode("invalid_lifetime"),
  );
  await assert.rejects(
    mintCreds(auth, newIdentity(), "probe", { expiresInSeconds: Number.MAX_SAFE_INTEGER }),
    assertCode("invalid_lifetime"),
  );
  await assert.rejects(
    mintCreds(auth, newIdentity(), "provisioner", {
      expiresAt: Math.floor(Date.now() / 1000) + max + 60,
    }),
    assertCode("invalid_lifetime"),
  );
  const ok = await credsClaims(
    await mintCreds(auth, newIdentity(), "provisioner", { expiresInSeconds: max }),
  );
  assert.equal(ok.exp! - ok.iat, max);
});

Deno.test("trust - a standing cred shorter than its frozen minimum is refused; a one-shot may be 1 s", async () => {
  for (const kind of ["delivery", "membership-rw", "supervisor", "agent"] as const) {
    const min = CREDENTIAL_LIFETIMES[kind].minTtlSeconds;
    assert.equal(min, STANDING_MIN_TTL_SEC, kind);
    for (const ttl of [1, 2, 5, min - 1]) {
      await assert.rejects(
        mintCreds(auth, newIdentity(), kind, { ...optsFor(kind), expiresInSeconds: ttl }),
        (e: Error & { code?: string }) =>
          e.code === "invalid_lifetime" && /below the minimum 30 s/.test(e.message),
        `${kind} ${ttl} s`,
      );
    }
    await assert.rejects(
      mintCreds(auth, newIdentity(), kind, {
        ...optsFor(kind),
        expiresAt: Math.floor(Date.now() / 1000) + 5,
      }),
      assertCode("invalid_lifetime"),
    );
    const ok = await credsClaims(
      await mintCreds(auth, newIdentity(), kind, { ...optsFor(kind), expiresInSeconds: min }),
    );
    assert.equal(ok.exp! - ok.iat, min);
  }
  assert.equal(CREDENTIAL_LIFETIMES["membership-observer"].minTtlSeconds, 3600);
  const probe = await credsClaims(
    await mintCreds(auth, newIdentity(), "probe", { expiresInSeconds: 1 }),
  );
  assert.equal(probe.exp! - probe.iat, 1);
  // Frozen like the maximum.
  assert.throws(() => {
    (CREDENTIAL_LIFETIMES.delivery as { minTtlSeconds: number }).minTtlSeconds = 1;
  });
});

Deno.test("trust - NaN, Infinity, non-integer, zero and negative lifetimes are refused", async () => {
  for (const bad of [NaN, Infinity, -Infinity, 1.5, 0, -1, "60" as unknown as number]) {
    await assert.rejects(
      mintCreds(auth, newIdentity(), "operator", { expiresInSeconds: bad }),
      assertCode("invalid_lifetime"),
      `expiresInSeconds ${String(bad)}`,
    );
    await assert.rejects(
      mintCreds(auth, newIdentity(), "operator", { expiresAt: bad }),
      assertCode("invalid_lifetime"),
      `expiresAt ${String(bad)}`,
    );
  }
  await assert.rejects(
    mintCreds(auth, newIdentity(), "operator", { expiresAt: Math.floor(Date.now() / 1000) - 5 }),
    /not in the future/,
  );
});

Deno.test("trust - expiresAt together with expiresInSeconds is refused", async () => {
  await assert.rejects(
    mintCreds(auth, newIdentity(), "operator", {
      expiresAt: Math.floor(Date.now() / 1000) + 60,
      expiresInSeconds: 60,
    }),
    (err: Error) => {
      assertCode("invalid_lifetime")(err);
      assert.match(err.message, /both expiresAt and expiresInSeconds/);
      return true;
    },
  );
  assert.throws(
    () => resolveExpiry("probe", { expiresAt: 2_000_000_000, expiresInSeconds: 1 }, 1_999_999_990),
    assertCode("invalid_lifetime"),
  );
});

Deno.test("trust - $SYS creds are bounded by the same policy", async () => {
  const obs = await credsClaims(await mintMembershipObserverCreds(auth, newIdentity()));
  assert.equal(obs.exp! - obs.iat, CREDENTIAL_LIFETIMES["membership-observer"].defaultTtlSeconds);
  await assert.rejects(
    mintConnectionEvictorCreds(auth, newIdentity(), { expiresInSeconds: 90 * 86400 }),
    assertCode("invalid_lifetime"),
  );
  await assert.rejects(
    mintMembershipObserverCreds(auth, newIdentity(), { expiresInSeconds: NaN }),
    assertCode("invalid_lifetime"),
  );
});

Deno.test("trust - no environment variable lengthens a credential", async () => {
  const vars = [
    "COTAL_TTL",
    "COTAL_CREDS_TTL",
    "COTAL_EXPIRES_IN_SECONDS",
    "COTAL_PROVISIONER_TTL",
    "COTAL_MAX_TTL",
    "COTAL_CREDENTIAL_LIFETIME",
    "NATS_JWT_EXPIRY",
  ];
  for (const v of vars) Deno.env.set(v, "999999999");
  try {
    for (const profile of PROFILES) {
      const claims = await credsClaims(
        await mintCreds(auth, newIdentity(), profile, optsFor(profile)),
      );
      assert.ok(
        claims.exp! - claims.iat <= CREDENTIAL_LIFETIMES[profile].defaultTtlSeconds,
        profile,
      );
    }
  } finally {
    for (const v of vars) Deno.env.delete(v);
  }
});
