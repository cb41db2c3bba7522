/**
 * What Cotal relies on of a `SecretStore`, as cases any implementation can run in its own test
 * framework: values round-trip exactly, a put replaces atomically (a reader never sees half a
 * value), keys are independent, delete is idempotent, and `create`, when the store has it, writes
 * only an absent key and lets exactly one of racing creators win. Each case throws a
 * `CotalError` (`store_nonconformant`) naming the property that failed.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { SecretStore } from "./types.ts";

/** One property of the contract: its name and a check against a fresh, empty store. */
export interface SecretStoreCase {
  /** What the case checks, as a test name. */
  readonly name: string;
  /** Checks it against `store` (fresh and empty); throws `store_nonconformant` when broken. */
  run(store: SecretStore): Promise<void>;
}

function fail(property: string, detail: string): never {
  throw new CotalError("store_nonconformant", `The store breaks "${property}": ${detail}.`);
}

function same(property: string, got: unknown, want: unknown): void {
  if (got !== want) {
    const show = (v: unknown) =>
      typeof v === "string" && v.length > 60 ? `${v.length} characters` : JSON.stringify(v);
    fail(property, `read ${show(got)}, expected ${show(want)}`);
  }
}

/** Keys in the shapes Cotal writes (signer records, per-space creds, rosters). */
const KEYS = [
  "auth/broker.json",
  "auth/account.AB12.json",
  "space.0f1e/delivery.creds",
  "space.0f1e/agent.local.w_1.creds",
  "space.0f1e/manager.x.agents.json",
];

/** A creds-like value: lines, dashes, and text outside ASCII. */
const VALUE = "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1Qi\n------END NATS USER JWT------\n" +
  "ünïcødé ✓\n";

/**
 * The conformance cases. Run each against a fresh, empty store, e.g.
 *
 * @example
 * ```ts
 * import { MemorySecretStore, secretStoreConformance } from "@cotal/deno";
 * for (const c of secretStoreConformance()) {
 *   Deno.test(`my store - ${c.name}`, () => c.run(new MemorySecretStore()));
 * }
 * ```
 */
export function secretStoreConformance(): SecretStoreCase[] {
  return [
    {
      name: "an absent key reads as undefined",
      async run(s) {
        same("absent is undefined", await s.get(KEYS[0]), undefined);
      },
    },
    {
      name: "a value reads back exactly, in every key shape Cotal writes",
      async run(s) {
        const big = VALUE.repeat(1_500); // ~100 KiB: a roster of many agents
        for (const [i, key] of KEYS.entries()) await s.put(key, `${i}:${i === 0 ? big : VALUE}`);
        for (const [i, key] of KEYS.entries()) {
          const got = await s.get(key);
          if (typeof got !== "string") fail("values are strings", `${key} read as ${typeof got}`);
          same(`round trip of ${key}`, got, `${i}:${i === 0 ? big : VALUE}`);
        }
      },
    },
    {
      name: "put replaces, and keys are independent",
      async run(s) {
        await s.put(KEYS[1], "one");
        await s.put(KEYS[2], "other");
        await s.put(KEYS[1], "two");
        same("put replaces", await s.get(KEYS[1]), "two");
        await s.delete(KEYS[1]);
        same("delete removes", await s.get(KEYS[1]), undefined);
        same("delete leaves other keys", await s.get(KEYS[2]), "other");
      },
    },
    {
      name: "delete of an absent key resolves",
      async run(s) {
        await s.delete(KEYS[3]).catch((err) =>
          fail("delete is idempotent", `delete of an absent key threw ${(err as Error).message}`)
        );
        await s.put(KEYS[3], "x");
        await s.delete(KEYS[3]);
        await s.delete(KEYS[3]).catch((err) =>
          fail("delete is idempotent", `a second delete threw ${(err as Error).message}`)
        );
      },
    },
    {
      name: "a reader during puts sees a whole old or new value, never part of one",
      async run(s) {
        const a = "a".repeat(200_000);
        const b = "b".repeat(200_000);
        await s.put(KEYS[4], a);
        let stop = false;
        const reader = (async () => {
          let reads = 0;
          while (!stop || reads === 0) {
            const v = await s.get(KEYS[4]);
            if (v !== a && v !== b) {
              fail("put is atomic", `a read during a put returned ${v?.length ?? "no"} characters`);
            }
            reads++;
          }
        })().then(() => undefined, (err: unknown) => err);
        for (let i = 0; i < 20; i++) await s.put(KEYS[4], i % 2 ? a : b);
        stop = true;
        const broken = await reader;
        if (broken) throw broken;
      },
    },
    {
      name: "concurrent puts leave one of the values written",
      async run(s) {
        const values = Array.from({ length: 8 }, (_, i) => `${i}`.repeat(10_000));
        await Promise.all(values.map((v) => s.put(KEYS[0], v)));
        const got = await s.get(KEYS[0]);
        if (!values.includes(got ?? "")) {
          fail("concurrent puts", `the key holds none of the values written`);
        }
      },
    },
    {
      name: "create, when the store has it, writes only an absent key; one of racing creators wins",
      async run(s) {
        if (typeof s.create !== "function") return; // optional: Cotal reads then puts instead
        same("create on absent", await s.create(KEYS[2], "first"), true);
        same("create on absent stores", await s.get(KEYS[2]), "first");
        same("create on present", await s.create(KEYS[2], "second"), false);
        same("create on present keeps", await s.get(KEYS[2]), "first");
        const raced = await Promise.all(
          Array.from({ length: 8 }, (_, i) => s.create!(KEYS[3], `${i}`)),
        );
        same("racing creates, winners", raced.filter((r) => r === true).length, 1);
        same("racing creates, the value", await s.get(KEYS[3]), `${raced.indexOf(true)}`);
      },
    },
  ];
}
