import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  assertFitsPayload,
  buildMessage,
  chatSubject,
  type CotalMessage,
  decodeMessage,
  encodedSize,
  encodeMessage,
  instSubject,
  type Part,
  svcSubject,
  validateMessage,
} from "../../lib/wire/mod.ts";
import { DIRECT_MAX_MESSAGE_BYTES } from "../../lib/wire/streams.ts";

const A = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa";
const B = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb";
const alice = { owner: A, actor: "alice" };
const bob = { owner: B, actor: "bob" };
const from = { id: `${A}.alice`, name: "Alice" };
const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

function refuses(fn: () => unknown, code: CotalErrorCode, text?: RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(isCotalError(e, code), `expected ${code}, got ${String(e)}`);
    if (text) assert.match((e as Error).message, text);
    return true;
  });
}

Deno.test("wire - buildMessage fills id and ts and keeps the envelope fields", () => {
  const m = buildMessage({
    space: "main",
    from,
    channel: "team.backend",
    text: "hi",
    parts: [{ kind: "data", data: { n: 1, xs: [true, null] } }],
    mentions: [" Bob ", "bob", "CAROL", ""],
    replyTo: "parent",
    contextId: "ctx",
  });
  assert.match(m.id, /^[0-9a-f-]{36}$/);
  assert.ok(Number.isSafeInteger(m.ts));
  assert.deepEqual(m.parts, [{ kind: "text", text: "hi" }, {
    kind: "data",
    data: { n: 1, xs: [true, null] },
  }]);
  assert.deepEqual(m.mentions, ["bob", "carol"]);
  assert.equal(m.replyTo, "parent");
  assert.equal(m.contextId, "ctx");
  const dm = buildMessage({ space: "main", from, to: `${B}.bob`, text: "x", mentions: [] });
  assert.equal("mentions" in dm, false, "empty mentions are omitted");
});

Deno.test("wire - exactly one routing field", () => {
  refuses(() => buildMessage({ space: "main", from, text: "x" }), "invalid_message", /exactly one/);
  refuses(
    () => buildMessage({ space: "main", from, channel: "g", to: `${B}.bob`, text: "x" }),
    "invalid_message",
    /2 routing fields/,
  );
  refuses(
    () => buildMessage({ space: "main", from, channel: "g.*", text: "x" }),
    "invalid_channel",
  );
  refuses(() => buildMessage({ space: "main", from, to: "bob", text: "x" }), "invalid_principal");
  refuses(() => buildMessage({ space: "main", from, toService: "a.b", text: "x" }), "invalid_role");
  refuses(
    () => buildMessage({ space: "main", from, to: `${B}.bob`, text: "x", mentions: ["bob"] }),
    "invalid_message",
    /mentions outside a channel/,
  );
});

Deno.test("wire - from must be a principal", () => {
  refuses(
    () => buildMessage({ space: "main", from: { id: "alice", name: "A" }, channel: "g" }),
    "invalid_principal",
  );
  refuses(
    () =>
      buildMessage({
        space: "main",
        from: { id: "UABCDEF.alice", name: "A" },
        channel: "g",
      }),
    "invalid_principal",
    /not a principal owner/,
  );
});

Deno.test("wire - part kinds: text, data, artifact and reverse-DNS extensions", () => {
  const digest = "sha256:" + "ab".repeat(32);
  const ok: Part[] = [
    { kind: "text", text: "t" },
    { kind: "data", data: [1, "x", { y: null }] },
    { kind: "artifact", name: "f.txt", mediaType: "text/plain", digest, size: 10 },
    { kind: "ai.cotal.note", body: "n" },
    { kind: "ag-ui.frame", event: { type: "x" } },
  ];
  buildMessage({ space: "main", from, channel: "g", parts: ok });
  const bad: [Part, RegExp][] = [
    [{ kind: "text" } as unknown as Part, /without text/],
    [{ kind: "image", url: "x" }, /part kind "image"/],
    [{ kind: "artifact", name: "f", mediaType: "t", digest: "md5:x", size: 1 }, /digest/],
    [{ kind: "artifact", name: "f", mediaType: "t", digest, size: -1 }, /size/],
    [{ kind: "data", data: { when: new Date() } } as unknown as Part, /parts\[0\]\.data\.when/],
    [{ kind: "data", data: { n: NaN } } as unknown as Part, /parts\[0\]\.data\.n/],
    [{ kind: "data", data: { u: undefined } } as unknown as Part, /parts\[0\]\.data\.u/],
    [{ kind: "data" } as unknown as Part, /without data/],
  ];
  for (const [part, text] of bad) {
    refuses(
      () => buildMessage({ space: "main", from, channel: "g", parts: [part] }),
      "invalid_message",
      text,
    );
  }
});

Deno.test("wire - encodedSize counts the Nats-Msg-Id header and the body exactly", () => {
  const m = buildMessage({ space: "main", from, channel: "g", text: "héllo", id: "abc" });
  const body = encodeMessage(m);
  const header = "NATS/1.0\r\nNats-Msg-Id: abc\r\n\r\n";
  assert.equal(encodedSize(m), header.length + body.length);
  assert.equal(assertFitsPayload(m, encodedSize(m)), encodedSize(m));
  refuses(() => assertFitsPayload(m, encodedSize(m) - 1), "message_too_large", /max_payload/);
});

Deno.test("wire - a DM, task or post over what its stream stores is refused before sending", () => {
  const text = "x".repeat(DIRECT_MAX_MESSAGE_BYTES);
  const dm = buildMessage({ space: "main", from, to: "local.bob", text });
  const task = buildMessage({ space: "main", from, toService: "review", text });
  const post = buildMessage({ space: "main", from, channel: "g", text });
  const max = 1024 * 1024;
  refuses(() => assertFitsPayload(dm, max), "message_too_large", /a DM holds at most 65536/);
  refuses(() => assertFitsPayload(task, max), "message_too_large", /a task holds at most 65536/);
  refuses(() => assertFitsPayload(post, max), "message_too_large", /a post holds at most 65536/);
  const small = buildMessage({ space: "main", from, to: "local.bob", text: "x".repeat(60_000) });
  assert.equal(assertFitsPayload(small, max), encodedSize(small));
  // A broker with a smaller max_payload still names the broker's limit.
  refuses(() => assertFitsPayload(small, 4096), "message_too_large", /max_payload is 4096/);
});

Deno.test("wire - validateMessage refuses unnormalized mentions and a bad ts", () => {
  const m = buildMessage({ space: "main", from, channel: "g", text: "x" });
  refuses(() => validateMessage({ ...m, mentions: ["Bob"] }), "invalid_message", /unnormalized/);
  refuses(() => validateMessage({ ...m, ts: 1.5 }), "invalid_message", /ts/);
  refuses(() => validateMessage({ ...m, id: "" }), "invalid_message", /id/);
});

Deno.test("wire - decodeMessage derives kind and route from the subject", () => {
  const m = buildMessage({ space: "main", from, channel: "g", text: "x" });
  const forged = { ...m, channel: "elsewhere", to: `${B}.bob`, extra: 1 };
  const r = decodeMessage(chatSubject("main", alice, "team.backend"), enc(forged));
  assert.ok(r.ok);
  assert.equal(r.kind, "channel");
  assert.equal(r.message.channel, "team.backend");
  assert.equal(r.message.to, undefined);
  assert.equal((r.message as CotalMessage & { extra: number }).extra, 1, "unknown fields kept");

  const dm = decodeMessage(instSubject("main", bob, alice), enc(m));
  assert.ok(dm.ok && dm.kind === "dm" && dm.message.to === `${B}.bob` && !dm.message.channel);
  const task = decodeMessage(svcSubject("main", "reviewer", alice), enc(m));
  assert.ok(task.ok && task.kind === "anycast" && task.message.toService === "reviewer");
});

Deno.test("wire - decodeMessage drops the conformance anomalies", () => {
  const m = buildMessage({ space: "main", from, channel: "g", text: "x" });
  const subj = chatSubject("main", alice, "g");
  const reason = (s: string, d: Uint8Array, o = {}) => {
    const r = decodeMessage(s, d, o);
    return r.ok ? "ok" : r.reason;
  };
  assert.equal(reason(`cotal.main.chat.${A}.alice`, enc(m)), "malformed-subject");
  assert.equal(reason(`cotal.main.ctl.manager.${A}.alice`, enc(m)), "malformed-subject");
  assert.equal(reason(subj, new TextEncoder().encode("{nope")), "malformed-json");
  assert.equal(reason(subj, new Uint8Array([0xff, 0xfe])), "malformed-json");
  assert.equal(reason(subj, enc({ ...m, from: { id: `${B}.bob`, name: "B" } })), "sender-mismatch");
  assert.equal(reason(subj, enc({ ...m, from: undefined })), "sender-mismatch");
  const nkey = "UAQ3XKZQJ5W7OQ2VZ2Q3QCAD";
  assert.equal(
    reason(`cotal.main.chat.${nkey}.team.backend`, enc({ ...m, from: { id: `${nkey}.team` } })),
    "not-principal-owner",
  );
  assert.equal(reason(subj, enc({ ...m, id: "" })), "unusable-id");
  assert.equal(reason(subj, enc(m), { self: alice }), "echo");
  assert.equal(reason(subj, enc(m), { space: "other" }), "malformed-subject");
  assert.equal(reason(subj, enc(m), { self: bob, space: "main" }), "ok");
});
