import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  assertConcreteChannel,
  assertValidChannel,
  assertValidLifecycleUid,
  assertValidPrincipal,
  assertValidRole,
  isLifecycleUid,
  isPrincipalOwnerToken,
  newLifecycleUid,
  parsePrincipalId,
  principalId,
  principalName,
  token,
} from "../../lib/wire/mod.ts";
import { token as trustToken } from "../../lib/trust/space_token.ts";

const A = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa";

function refuses(fn: () => unknown, code: CotalErrorCode, text?: RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(isCotalError(e, code), `expected ${code}, got ${String(e)}`);
    if (text) assert.match((e as Error).message, text);
    return true;
  });
}

Deno.test("wire - token maps every character outside [A-Za-z0-9_-] to _ and trims", () => {
  assert.equal(token("main"), "main");
  assert.equal(token(" my space "), "my_space");
  assert.equal(token("a.b/c*d>e"), "a_b_c_d_e");
  assert.equal(token("team-1_x"), "team-1_x");
  assert.equal(token(""), "_");
  assert.equal(token("   "), "_");
  assert.equal(token("é"), "_");
  // One implementation: wire's token is lib/trust's.
  assert.equal(token, trustToken);
});

Deno.test("wire - owner and actor tokens are validated, never rewritten", () => {
  assert.deepEqual(assertValidPrincipal({ owner: A, actor: "alice" }), {
    owner: A,
    actor: "alice",
  });
  assert.deepEqual(assertValidPrincipal({ owner: "local", actor: "UABC_123" }), {
    owner: "local",
    actor: "UABC_123",
  });
  for (const actor of ["al.ice", "al-ice", "*", ">", "", "a b", "x".repeat(65)]) {
    refuses(() => assertValidPrincipal({ owner: A, actor }), "invalid_principal");
  }
  for (const owner of ["lo-cal", "u.x", "*"]) {
    refuses(() => assertValidPrincipal({ owner, actor: "alice" }), "invalid_principal");
  }
});

Deno.test("wire - only local and derived u_ owners are principal owners", () => {
  assert.ok(isPrincipalOwnerToken("local"));
  assert.ok(isPrincipalOwnerToken(A));
  assert.ok(!isPrincipalOwnerToken("UAQ3XKZQJ5W7OQ2VZ2Q3QCAD"));
  assert.ok(!isPrincipalOwnerToken("u_AAAAAAAAAAAAAAAAAAAAAAAAAA"));
  assert.ok(!isPrincipalOwnerToken("u_aaaa"));
  refuses(
    () => assertValidPrincipal({ owner: "UAQ3XKZQJ5W7OQ2VZ2Q3QCAD", actor: "a" }),
    "invalid_principal",
    /not a principal owner/,
  );
  // Grammar-only checks accept the nkey-shaped owner (for parsing old subjects).
  assert.ok(assertValidPrincipal({ owner: "UAQ3XKZQ", actor: "a" }, { anyOwner: true }));
});

Deno.test("wire - principal dot and dash forms", () => {
  const p = { owner: A, actor: "alice" };
  assert.equal(principalId(p), `${A}.alice`);
  assert.equal(principalName(p), `${A}-alice`);
  assert.deepEqual(parsePrincipalId(`${A}.alice`), p);
  refuses(() => parsePrincipalId(`${A}.alice.x`), "invalid_principal");
  refuses(() => parsePrincipalId("alice"), "invalid_principal");
});

Deno.test("wire - lifecycle uids: minted fresh, validated strictly", () => {
  const a = newLifecycleUid();
  const b = newLifecycleUid();
  assert.notEqual(a, b);
  assert.ok(isLifecycleUid(a) && a.length >= 26 && a.length <= 32, a);
  assertValidLifecycleUid(a);
  for (const bad of ["short", "A".repeat(26), "a".repeat(33), "a".repeat(25) + "-"]) {
    refuses(() => assertValidLifecycleUid(bad), "invalid_lifecycle_uid");
  }
});

Deno.test("wire - channel validation fails loud instead of aliasing", () => {
  for (const ok of ["general", "team.backend", "team.*", "team.>", ">", "a-b_c.d"]) {
    assertValidChannel(ok);
  }
  for (const bad of ["foo/bar", "", "a..b", "a.>.b", "a b", ".a", "a.", "x".repeat(4097)]) {
    refuses(() => assertValidChannel(bad), "invalid_channel");
  }
  assertConcreteChannel("team.backend");
  refuses(() => assertConcreteChannel("team.*"), "invalid_channel", /wildcard/);
  refuses(() => assertConcreteChannel(">"), "invalid_channel");
});

Deno.test("wire - roles are single subject tokens", () => {
  assertValidRole("reviewer");
  assertValidRole("code-review_2");
  for (const bad of ["a.b", "*", "", "x".repeat(65)]) {
    refuses(() => assertValidRole(bad), "invalid_role");
  }
});
