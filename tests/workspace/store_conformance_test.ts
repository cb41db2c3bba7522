/**
 * The `SecretStore` conformance cases (what Cotal relies on of a store) on the stores Cotal
 * ships and on the specification's bare get/put/delete store; and each case failing on a store
 * that breaks its property, so the suite can tell a broken store from a good one.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  FsSecretStore,
  MemorySecretStore,
  type SecretStore,
  secretStoreConformance,
} from "../../lib/workspace/mod.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";
import { MapStore } from "../_harness/map_store.ts";

for (const c of secretStoreConformance()) {
  Deno.test(`store conformance - FsSecretStore: ${c.name}`, async () => {
    const dir = await tempDir("cotal-conformance-");
    try {
      await c.run(new FsSecretStore(dir));
    } finally {
      await removeTempDir(dir);
    }
  });
  Deno.test(`store conformance - MemorySecretStore: ${c.name}`, () =>
    c.run(new MemorySecretStore()));
  Deno.test(`store conformance - get/put/delete only: ${c.name}`, () => c.run(new MapStore()));
}

/** A store that breaks one property each. */
class Broken extends MapStore {
  constructor(readonly breaks: "atomic" | "delete" | "create" | "roundtrip") {
    super();
  }
  override async put(key: string, value: string) {
    if (this.breaks === "atomic") {
      // Half a value is visible between two writes.
      this.m.set(key, value.slice(0, value.length / 2));
      await new Promise((r) => setTimeout(r, 1));
    }
    this.m.set(key, this.breaks === "roundtrip" ? value.trimEnd() : value);
  }
  override delete(key: string) {
    if (this.breaks === "delete" && !this.m.has(key)) return Promise.reject(new Error("ENOENT"));
    return super.delete(key);
  }
  create(key: string, value: string) {
    if (this.breaks !== "create" && this.m.has(key)) return Promise.resolve(false);
    this.m.set(key, value);
    return Promise.resolve(true);
  }
}

Deno.test("store conformance - a store that breaks a property fails the case for it, naming it", async () => {
  const cases = secretStoreConformance();
  const fails = async (store: SecretStore) => {
    const failed: string[] = [];
    for (const c of cases) {
      await c.run(store).catch((e) => {
        assert.ok(isCotalError(e, "store_nonconformant"), String(e));
        failed.push(e.message);
      });
    }
    return failed;
  };
  assert.deepEqual(await fails(new MapStore()), []);
  const atomic = await fails(new Broken("atomic"));
  assert.ok(atomic.some((m) => /"put is atomic"/.test(m)), atomic.join("\n"));
  const del = await fails(new Broken("delete"));
  assert.ok(del.some((m) => /"delete is idempotent"/.test(m)), del.join("\n"));
  const create = await fails(new Broken("create"));
  assert.ok(create.some((m) => /"create on present"/.test(m)), create.join("\n"));
  const trip = await fails(new Broken("roundtrip"));
  assert.ok(trip.some((m) => /"round trip of auth\/broker\.json"/.test(m)), trip.join("\n"));
});
