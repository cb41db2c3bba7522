/**
 * Create-only writes over any {@linkcode SecretStore}, including one with only the
 * specification's `get`, `put` and `delete`.
 *
 * @module
 */
import type { SecretStore } from "./types.ts";

/**
 * Writes `value` at `key` only when the key is absent; false when it exists. Through the
 * store's own `create` when it has one (then exactly one of two concurrent creators wins).
 * Without it, a read then a put: within one process the same, across processes two first
 * starts may both write and the last put wins; every caller re-reads the key after creating,
 * so both then adopt the one record that stayed.
 */
export async function createOnce(store: SecretStore, key: string, value: string): Promise<boolean> {
  if (store.create) return await store.create(key, value);
  if ((await store.get(key)) !== undefined) return false;
  await store.put(key, value);
  return true;
}
