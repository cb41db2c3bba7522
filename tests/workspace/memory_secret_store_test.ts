import assert from "node:assert/strict";
import { MemorySecretStore } from "../../lib/workspace/mod.ts";
import { isCotalError } from "../../lib/errors.ts";

Deno.test("workspace - MemorySecretStore keeps the SecretStore contract", async () => {
  const store = new MemorySecretStore([["auth/broker.json", "{}"]]);
  assert.equal(await store.get("auth/broker.json"), "{}");
  assert.equal(await store.get("missing"), undefined);
  await store.put("space.ab/delivery.creds", "one");
  assert.equal(await store.create("space.ab/delivery.creds", "two"), false);
  assert.equal(await store.get("space.ab/delivery.creds"), "one");
  const raced = await Promise.all([store.create("k", "a"), store.create("k", "b")]);
  assert.equal(raced.filter((r) => r).length, 1);
  await store.delete("k");
  await store.delete("k");
  assert.equal(await store.get("k"), undefined);
  assert.deepEqual((store as MemorySecretStore).keys(), [
    "auth/broker.json",
    "space.ab/delivery.creds",
  ]);
});

Deno.test("workspace - MemorySecretStore refuses the keys FsSecretStore refuses", async () => {
  const store = new MemorySecretStore();
  for (const key of ["", "a\0", "/abs", "../x", "a/../b", "a\\b"]) {
    await assert.rejects(store.put(key, "v"), (e) => isCotalError(e, "store_bad_key"));
    await assert.rejects(store.get(key), (e) => isCotalError(e, "store_bad_key"));
    await assert.rejects(store.create(key, "v"), (e) => isCotalError(e, "store_bad_key"));
    await assert.rejects(store.delete(key), (e) => isCotalError(e, "store_bad_key"));
  }
  assert.throws(
    () => new MemorySecretStore([["/abs", "v"]]),
    (e) => isCotalError(e, "store_bad_key"),
  );
});
