import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  CONNECTION_EVICTOR_CREDS_KIND,
  connectionEvictorCredsKey,
  DELIVERY_CREDS_KIND,
  deliveryCredsKey,
  MEMBERSHIP_CONFIG_KIND,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
  MEMBERSHIP_RW_CREDS_KIND,
  membershipConfigKey,
  membershipObserverCredsKey,
  membershipRwCredsKey,
  spaceKeyHex,
  spaceSecretKey,
} from "../../lib/workspace/mod.ts";
import { checkStoreKey } from "../../lib/workspace/mod.ts";
import { isCotalError } from "../../lib/errors.ts";

Deno.test("workspace - spaceKeyHex is the first 16 bytes of SHA-256, lowercase hex", () => {
  const expected = createHash("sha256").update("alpha").digest("hex").slice(0, 32);
  assert.equal(spaceKeyHex("alpha"), expected);
  assert.match(spaceKeyHex("alpha"), /^[0-9a-f]{32}$/);
  assert.notEqual(spaceKeyHex("alpha"), spaceKeyHex("Alpha"));
  // Fixed length even for a long name, so the segment never overflows a filename.
  assert.equal(spaceKeyHex("x".repeat(10_000)).length, 32);
  assert.equal(
    spaceKeyHex("espace-é"),
    createHash("sha256").update("espace-é", "utf8").digest("hex").slice(0, 32),
  );
});

Deno.test("workspace - spaceKeyHex refuses empty names and unpaired surrogates", () => {
  assert.throws(() => spaceKeyHex(""), (e) => isCotalError(e, "store_bad_space"));
  assert.throws(() => spaceKeyHex("a\uD800"), (e) => isCotalError(e, "store_bad_space"));
  assert.throws(() => spaceKeyHex("\uDC00b"), (e) => isCotalError(e, "store_bad_space"));
  assert.match(spaceKeyHex("emoji-\u{1F600}"), /^[0-9a-f]{32}$/);
});

Deno.test("workspace - key builders give space.<hex>/<kind> for either composition", () => {
  const hex = spaceKeyHex("team");
  const cases: [(s: string, c: { injected: true } | { root: string }) => string, string][] = [
    [deliveryCredsKey, "delivery.creds"],
    [membershipRwCredsKey, "membership-rw.creds"],
    [membershipObserverCredsKey, "membership-observer.creds"],
    [connectionEvictorCredsKey, "connection-evictor.creds"],
    [membershipConfigKey, "membership.json"],
  ];
  for (const [build, kind] of cases) {
    const injected = build("team", { injected: true });
    assert.equal(injected, `space.${hex}/${kind}`);
    assert.equal(build("team", { root: "/srv/.cotal" }), injected);
    assert.deepEqual(checkStoreKey(injected), [`space.${hex}`, kind]);
  }
  assert.equal(DELIVERY_CREDS_KIND, "delivery.creds");
  assert.equal(MEMBERSHIP_RW_CREDS_KIND, "membership-rw.creds");
  assert.equal(MEMBERSHIP_OBSERVER_CREDS_KIND, "membership-observer.creds");
  assert.equal(CONNECTION_EVICTOR_CREDS_KIND, "connection-evictor.creds");
  assert.equal(MEMBERSHIP_CONFIG_KIND, "membership.json");
  // A kind is not a key: the builder never returns the bare kind.
  assert.notEqual(deliveryCredsKey("team", { injected: true }), DELIVERY_CREDS_KIND);
});

Deno.test("workspace - key builders refuse a bad composition or kind", () => {
  const bad = [{}, { injected: false }, { root: "" }, null] as unknown as { injected: true }[];
  for (const composition of bad) {
    assert.throws(
      () => deliveryCredsKey("team", composition),
      (e) => isCotalError(e, "store_bad_composition"),
    );
  }
  for (const kind of ["", "a/b", "..", "."]) {
    assert.throws(
      () => spaceSecretKey("team", kind, { injected: true }),
      (e) => isCotalError(e, "store_bad_key"),
    );
  }
  assert.throws(
    () => deliveryCredsKey("", { injected: true }),
    (e) => isCotalError(e, "store_bad_space"),
  );
});
