/**
 * Red team 29, attempt 2: a member writes its own presence row with a card whose fields have
 * the wrong types: `role` an object with its own `toString`, an oversized description, tags
 * that are numbers, extra fields. Every reader rendered what the row said; `cotal join` threw
 * rendering the role, so the operator never saw that member come or go. A reader now keeps only
 * well-formed fields, and a writer's own card is refused when peers would leave a field out.
 */
import assert from "node:assert/strict";
import { connect } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { isCotalError } from "../../lib/errors.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { CotalEndpoint, type Presence } from "../../lib/endpoint/mod.ts";
import { startMesh } from "../endpoint/_mesh.ts";

Deno.test("red team 29 - a presence row's malformed card fields never reach a reader", async () => {
  await using mesh = await startMesh("rt29");
  const mallory = await mesh.agent("mallory", {});
  const carol = await mesh.agent("carol", {});
  const c = carol.endpoint();
  await c.start();
  const raw = await connect({
    servers: mesh.url,
    authenticator: credsAuthenticatorFast(mallory.creds),
    inboxPrefix: `_INBOX_${mallory.identity.id}`,
    maxReconnectAttempts: 0,
  });
  try {
    const row = {
      card: {
        id: "local.mallory",
        name: "mallory",
        kind: "admin",
        role: { toString: 1, valueOf: 1 },
        description: "x".repeat(5000),
        tags: [1, 2],
        skills: [{ id: "a", name: { toString: 1 } }],
        meta: { ok: "fine" },
        injected: "extra",
      },
      status: "idle",
      activity: { toString: 1 },
      lifecycleTag: "not-a-tag",
      extra: { deep: true },
      ts: Date.now(),
    };
    // Its own key, which its grants let it write.
    await raw.jetstream().publish(
      `$KV.cotal_presence_${mesh.space}.local.mallory`,
      JSON.stringify(row),
    );
    let seen: Presence | undefined;
    await waitFor(() => {
      seen = c.getRoster().find((r) => r.card.id === "local.mallory");
      return seen !== undefined;
    }, { what: "mallory's row in carol's roster" });
    assert.deepEqual(seen, {
      card: { id: "local.mallory", name: "mallory", kind: "agent", meta: { ok: "fine" } },
      status: "idle",
      ts: row.ts,
    });
    // What a renderer does with any field is safe: every kept value is plain data.
    assert.doesNotThrow(() => `${seen!.card.role ?? ""} ${seen!.activity ?? ""}`);
  } finally {
    await raw.close();
    await c.stop();
  }
});

Deno.test("red team 29 - an endpoint's own card is refused when peers would drop a field", () => {
  for (
    const card of [
      { name: "a", description: "x".repeat(5000) },
      { name: "a", tags: Array.from({ length: 40 }, (_, i) => `t${i}`) },
      { name: "a", meta: { k: 1 } as unknown as Record<string, string> },
    ]
  ) {
    assert.throws(
      () => new CotalEndpoint({ space: "s", card }),
      (e) =>
        isCotalError(e) && e.code === "invalid_card" && /malformed or too large/.test(e.message),
    );
  }
});
