/**
 * The specification's `SecretStore`: `get`, `put` and `delete` over a Map, nothing else (no
 * `create`), as an embedder writes one. `m` is open so a test can look inside or break it.
 */
import type { SecretStore } from "../../lib/workspace/types.ts";

export class MapStore implements SecretStore {
  readonly m = new Map<string, string>();
  get(key: string): Promise<string | undefined> {
    return Promise.resolve(this.m.get(key));
  }
  put(key: string, value: string): Promise<void> {
    this.m.set(key, value);
    return Promise.resolve();
  }
  delete(key: string): Promise<void> {
    this.m.delete(key);
    return Promise.resolve();
  }
  /** The keys held, sorted. */
  keys(): string[] {
    return [...this.m.keys()].sort();
  }
}
