/**
 * The relay's protocol guard on its own: what a sandboxed agent may send the broker, chunked
 * any way, in canonical form; and each refusal, with its reason. The same attacks through a
 * real supervisor, relay and broker are in tests/security/relay_guard_test.ts.
 */
import assert from "node:assert/strict";
import { GUARD_MAX_PAYLOAD, ProtocolGuard } from "../../lib/manager/sandbox/protocol_guard.ts";

const INBOX = "_INBOX_UAGENT";
const enc = new TextEncoder();
const dec = new TextDecoder();

/** A user JWT shape naming `sub` (the guard reads its subject; nothing checks its signature). */
function jwtFor(sub: string): string {
  return `eyJhbGciOiJlZDI1NTE5LW5rZXkifQ.${
    btoa(JSON.stringify({ sub })).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_")
  }.sig`;
}

/** Feeds `text` in chunks of `step` bytes; returns what went on and the refusal. */
function feed(text: string | Uint8Array, step = Infinity): { out: string; refused?: string } {
  const g = new ProtocolGuard({ inboxPrefix: INBOX });
  const bytes = typeof text === "string" ? enc.encode(text) : text;
  let out = "";
  for (let at = 0; at < bytes.length; at += Math.min(step, bytes.length)) {
    const r = g.push(bytes.subarray(at, at + Math.min(step, bytes.length)));
    out += r.out.map((b) => dec.decode(b)).join("");
    if (r.refused) return { out, refused: r.refused };
  }
  return { out };
}

const CLIENT = [
  'CONNECT {"verbose":false,"jwt":"eyJ","sig":"x"}\r\n',
  "PING\r\n",
  "SUB _INBOX_UAGENT.> 1\r\n",
  "SUB cotal.s.chat.*.*.general q 2\r\n",
  "PUB cotal.s.chat.local.a.general 5\r\nhello\r\n",
  "PUB $JS.API.INFO _INBOX_UAGENT.abc 0\r\n\r\n",
  "HPUB cotal.s.inst.local.b.local.a _INBOX_UAGENT.r1 12 17\r\nNATS/1.0\r\n\r\nhello\r\n",
  'PUB $JS.API.CONSUMER.CREATE.CHAT_s.h.f _INBOX_UAGENT.c 99\r\n{"stream_name":"CHAT_s","config":{"name":"h","inactive_threshold":30000000000,"ack_policy":"none"}}\r\n',
  "PUB $JS.API.STREAM.INFO.KV_x _INBOX_UAGENT.i 0\r\n\r\n",
  "UNSUB 1 5\r\n",
  "UNSUB 2\r\n",
  "PONG\r\n",
].join("");

Deno.test("protocol guard - what a client sends passes unchanged, however it is chunked", () => {
  for (const step of [Infinity, 1, 2, 3, 7, 64]) {
    const r = feed(CLIENT, step);
    assert.equal(r.refused, undefined, `step ${step}`);
    assert.equal(r.out, CLIENT, `step ${step}`);
  }
});

Deno.test("protocol guard - lenient spellings reach the broker in one canonical form", () => {
  const r = feed('pub\tcotal.x  _INBOX_UAGENT.a\t3\nabc\r\nping\nConnect   { "a" : 1 }\r\n');
  assert.equal(r.refused, undefined);
  assert.equal(r.out, 'PUB cotal.x _INBOX_UAGENT.a 3\r\nabc\r\nPING\r\nCONNECT {"a":1}\r\n');
});

function refused(text: string, why: RegExp): void {
  const r = feed(text);
  assert.ok(r.refused, `not refused: ${JSON.stringify(text.slice(0, 80))}`);
  assert.match(r.refused!, why);
}

Deno.test("protocol guard - a reply subject outside the agent's own inbox is refused (aimed answers)", () => {
  const why = /a reply subject must be under the inbox of this agent, _INBOX_UAGENT\.>/;
  refused("PUB $JS.API.INFO cotal.s.chat.local.operator.general 0\r\n\r\n", why);
  refused("PUB $JS.API.INFO $KV.cotal_acl_s.x 0\r\n\r\n", why);
  refused(
    "HPUB $JS.API.INFO $KV.cotal_presence_s.local.operator 12 12\r\nNATS/1.0\r\n\r\n\r\n",
    why,
  );
  // The inbox itself, a sibling's inbox and a prefix that only starts alike.
  refused("PUB $JS.API.INFO _INBOX_UAGENT 0\r\n\r\n", why);
  refused("PUB $JS.API.INFO _INBOX_UOTHER.x 0\r\n\r\n", why);
  refused("PUB $JS.API.INFO _INBOX_UAGENTX.x 0\r\n\r\n", why);
  // Nothing of a refused line goes on.
  assert.equal(feed("PING\r\nPUB a cotal.x 0\r\n\r\n").out, "PING\r\n");
});

Deno.test("protocol guard - a consumer create may not aim its deliveries, in any spelling the broker reads", () => {
  const create = (body: string) =>
    `PUB $JS.API.CONSUMER.CREATE.CHAT_s.h.f _INBOX_UAGENT.c ${
      enc.encode(body).length
    }\r\n${body}\r\n`;
  const aimed = /a consumer of an agent has no deliver subject/;
  refused(create('{"config":{"deliver_subject":"$KV.cotal_acl_s.x"}}'), aimed);
  refused(create('{"config":{"deliver\\u005fsubject":"$KV.cotal_acl_s.x"}}'), aimed);
  refused(create('{"config":{"deliver_subject":5}}'), aimed);
  const spelled = /field name that is not lowercase ASCII/;
  refused(create('{"config":{"DELIVER_SUBJECT":"$KV.cotal_acl_s.x"}}'), spelled);
  refused(create('{"config":{"deliver_\u017fubject":"$KV.cotal_acl_s.x"}}'), spelled);
  refused(create('{"CONFIG":{"deliver_subject":"x"}}'), spelled);
  refused(create('{"config":"x"}'), /config is not an object/);
  refused(create("not json"), /not JSON/);
  refused(
    `PUB $JS.API.CONSUMER.DURABLE.CREATE.CHAT_s.d _INBOX_UAGENT.c 40\r\n{"config":{"deliver_subject":"a.b.c.d"}}\r\n`,
    /an agent creates no durable consumer/,
  );
  // Headers first: the body after them is what is checked.
  const body = '{"config":{"deliver_subject":"evil"}}';
  const h = "NATS/1.0\r\n\r\n";
  refused(
    `HPUB $JS.API.CONSUMER.CREATE.X.y _INBOX_UAGENT.c ${h.length} ${
      h.length + body.length
    }\r\n${h}${body}\r\n`,
    aimed,
  );
  // Not even its own inbox: agents read by pulling.
  refused(create('{"config":{"deliver_subject":"_INBOX_UAGENT.d"}}'), aimed);
});

Deno.test("protocol guard - an agent's consumer goes when idle: durable, or idle past a minute, is refused (red team 20a)", () => {
  const create = (body: string) =>
    `PUB $JS.API.CONSUMER.CREATE.CHAT_s.h.f _INBOX_UAGENT.c ${
      enc.encode(body).length
    }\r\n${body}\r\n`;
  // What red team 20a sent: a history consumer made durable, left on CHAT after its despawn.
  refused(
    create('{"config":{"name":"h","durable_name":"h","ack_policy":"explicit"}}'),
    /a consumer of an agent is not durable/,
  );
  const idle = /needs an inactive_threshold of at most 60 s/;
  refused(create('{"config":{"name":"h"}}'), idle);
  refused(create('{"config":{"name":"h","inactive_threshold":0}}'), idle);
  refused(create('{"config":{"name":"h","inactive_threshold":60000000001}}'), idle);
  refused(create('{"config":{"name":"h","inactive_threshold":"30s"}}'), idle);
  refused(create('{"config":{"name":"h","inactive_threshold":1e300}}'), idle);
  refused(create("{}"), idle);
  // What a history read asks for passes.
  const ok = create(
    '{"config":{"name":"h","inactive_threshold":30000000000,"mem_storage":true,"ack_policy":"none"}}',
  );
  assert.equal(feed(ok).refused, undefined);
  // Acked, it would be redelivered at an ack_wait the agent names (red team 44: 1 ms, no cap).
  const acked = /has ack_policy "none"/;
  for (
    const policy of [
      '"ack_policy":"explicit","ack_wait":1000000,"max_deliver":-1',
      '"ack_policy":"all"',
      "",
    ]
  ) {
    const cfg = `{"config":{"name":"h","inactive_threshold":30000000000${
      policy ? "," + policy : ""
    }}}`;
    refused(create(cfg), acked);
  }
  // Past the fields a history read names, nothing (an allowlist: each field found was another
  // amplifier).
  for (
    const extra of [
      '"max_deliver":5',
      '"ack_wait":1000000',
      '"max_waiting":1',
      '"sample_freq":"100%"',
    ]
  ) {
    refused(
      create(
        `{"config":{"name":"h","inactive_threshold":30000000000,"ack_policy":"none",${extra}}}`,
      ),
      /a consumer of an agent may not set \w+ \(it may set name, /,
    );
  }
  refused(
    create(
      '{"config":{"name":"h","inactive_threshold":30000000000,"ack_policy":"none"},"pedantic":true}',
    ),
    /a consumer create may not set pedantic/,
  );
});

Deno.test("protocol guard - a pull's idle heartbeat is at least a second and its wait at most five minutes (red team 43)", () => {
  const pull = (body: string) =>
    `PUB $JS.API.CONSUMER.MSG.NEXT.DM_s.dm_x _INBOX_UAGENT.p ${body.length}\r\n${body}\r\n`;
  // What red team 43 sent: a heartbeat every nanosecond to a pull waiting an hour.
  const heartbeat = /idle_heartbeat is 0 or at least 1 s/;
  refused(pull('{"batch":1,"expires":3600000000000,"idle_heartbeat":1}'), heartbeat);
  refused(pull('{"batch":1,"expires":30000000000,"idle_heartbeat":999999999}'), heartbeat);
  refused(pull('{"batch":1,"idle_heartbeat":"1s"}'), heartbeat);
  const wait = /a pull waits at most 300 s/;
  refused(pull('{"batch":1,"expires":300000000001}'), wait);
  refused(pull('{"batch":1,"expires":-1}'), wait);
  refused(pull('{"batch":1,"group":"g","min_pending":1}'), /a pull may not set group/);
  // What nats.js's consume() asks for (30 s, a heartbeat at half) and a plain pull pass.
  for (
    const ok of [
      '{"batch":100,"expires":30000000000,"idle_heartbeat":15000000000}',
      '{"batch":1,"no_wait":true}',
      '{"batch":1,"expires":2000000000,"idle_heartbeat":0}',
    ]
  ) {
    assert.equal(feed(pull(ok)).refused, undefined, ok);
  }
});

Deno.test("protocol guard - a stream info may not list subjects or deletions (amplified answers)", () => {
  const info = (body: string) =>
    `PUB $JS.API.STREAM.INFO.CHAT_s _INBOX_UAGENT.i ${body.length}\r\n${body}\r\n`;
  refused(info('{"subjects_filter":">"}'), /may not list subjects/);
  refused(info('{"deleted_details":true}'), /may not list subjects/);
  refused(info('{"Subjects_Filter":">"}'), /not lowercase ASCII/);
  assert.equal(feed(info("{}")).refused, undefined);
});

Deno.test("protocol guard - malformed or foreign operations end the connection", () => {
  refused("INFO {}\r\n", /the operation "INFO" is not one a client sends/);
  refused("MSG a 1 0\r\n\r\n", /the operation "MSG"/);
  refused("PUB a 3\r\nabcdef\r\n", /not followed by CRLF/);
  refused("PUB a b c 3\r\nabc\r\n", /PUB has 4 arguments/);
  refused("PUB a -3\r\n", /size that is not a number/);
  refused(`PUB a ${GUARD_MAX_PAYLOAD + 1}\r\n`, /larger than the broker limit of 1 MiB/);
  refused("HPUB a 10 5\r\n", /headers larger than its message/);
  refused("PUB a\x01b 0\r\n\r\n", /malformed argument/);
  refused("CONNECT [1]\r\n", /CONNECT is not an object/);
  refused("CONNECT {\r\n", /not followed by JSON/);
  refused("PING x\r\n", /PING takes no arguments/);
  refused("SUB a\r\n", /SUB takes/);
  refused("UNSUB 1 x\r\n", /UNSUB takes/);
  refused(" PING\r\n", /not an operation/);
  refused("x".repeat(70_000), /longer than 64 KiB/);
  // Once refused, always refused.
  const g = new ProtocolGuard({ inboxPrefix: INBOX });
  assert.ok(g.push(enc.encode("INFO {}\r\n")).refused);
  assert.ok(g.push(enc.encode("PING\r\n")).refused);
});

Deno.test("protocol guard - a message goes on only whole, and a large one arrives intact", () => {
  const g = new ProtocolGuard({ inboxPrefix: INBOX });
  const body = new Uint8Array(GUARD_MAX_PAYLOAD).map((_, i) => i % 251);
  const msg = new Uint8Array([...enc.encode(`PUB big ${body.length}\r\n`), ...body, 13, 10]);
  const out: Uint8Array[] = [];
  for (let at = 0; at < msg.length; at += 65_536) {
    const r = g.push(msg.slice(at, at + 65_536));
    assert.equal(r.refused, undefined);
    // Nothing before the last chunk: a PUB line never reaches the broker without its body.
    if (at + 65_536 < msg.length) assert.equal(r.out.length, 0);
    out.push(...r.out.map((b) => b.slice()));
  }
  const sent = new Uint8Array(out.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const b of out) {
    sent.set(b, at);
    at += b.length;
  }
  assert.deepEqual(sent, msg);
  // A refused body: the operations before it go on, nothing of it does.
  const r = feed(
    'PING\r\nPUB $JS.API.STREAM.INFO.S _INBOX_UAGENT.i 23\r\n{"subjects_filter":">"}\r\nPING\r\n',
    5,
  );
  assert.match(r.refused!, /may not list subjects/);
  assert.equal(r.out, "PING\r\n");
});

Deno.test("protocol guard - the byte-level reading of canonical PUB lines decides as the full parser does", () => {
  // "PUB" takes the byte-level path when canonical; "Pub" always takes the full parser.
  const subjects = [
    "a",
    "$JS.API.INFO",
    "$JS.API.STREAM.INFO.S",
    "x".repeat(4096),
    "x".repeat(4097),
  ];
  const replies = [
    undefined,
    "_INBOX_UAGENT.r",
    "_INBOX_UAGENT.",
    "_INBOX_UAGENT",
    "_INBOX_UAGENTX.r",
    "r",
  ];
  const bodies = ["", "{}", '{"subjects_filter":">"}', "hello"];
  let n = 0;
  for (const subject of subjects) {
    for (const reply of replies) {
      for (const body of bodies) {
        for (const size of [String(body.length), `00${body.length}`]) {
          const tail = `${subject}${reply === undefined ? "" : ` ${reply}`} ${size}\r\n${body}\r\n`;
          const fast = feed(`PUB ${tail}`);
          const full = feed(`Pub ${tail}`);
          assert.equal(fast.refused, full.refused, tail.slice(0, 60));
          if (!fast.refused && !subject.startsWith("$JS.API.")) {
            assert.equal(fast.out, `PUB ${tail}`);
          }
          n++;
        }
      }
    }
  }
  assert.equal(n, 240);
});

Deno.test("protocol guard - the broker reads the JetStream API body the guard checked (red team 5: M, O, N)", () => {
  // A repeated key: JSON.parse keeps the last, nats-server merges the first into the struct.
  const dup =
    '{"config":{"deliver_subject":"cotal.s.inst.local.a.local.a","name":"h"},"config":{"inactive_threshold":1,"ack_policy":"none"}}';
  const r = feed(
    `PUB $JS.API.CONSUMER.CREATE.CHAT_s.h.f _INBOX_UAGENT.c ${dup.length}\r\n${dup}\r\n`,
  );
  assert.equal(r.refused, undefined);
  assert.equal(
    r.out,
    'PUB $JS.API.CONSUMER.CREATE.CHAT_s.h.f _INBOX_UAGENT.c 55\r\n{"config":{"inactive_threshold":1,"ack_policy":"none"}}\r\n',
  );
  // Headers stay, the body is re-serialized, the sizes follow.
  const h = "NATS/1.0\r\nX: 1\r\n\r\n";
  const body = '{ "batch" : 1 ,"batch":2}';
  const hr = feed(
    `HPUB $JS.API.CONSUMER.MSG.NEXT.S.c _INBOX_UAGENT.n ${h.length} ${
      h.length + body.length
    }\r\n${h}${body}\r\n`,
    3,
  );
  assert.equal(hr.refused, undefined);
  assert.equal(
    hr.out,
    `HPUB $JS.API.CONSUMER.MSG.NEXT.S.c _INBOX_UAGENT.n ${h.length} ${
      h.length + 11
    }\r\n${h}{"batch":2}\r\n`,
  );
  // A megabyte of keys is refused before it is parsed.
  const big = `{${Array.from({ length: 1000 }, (_, i) => `"k${i}":1`).join(",")}}`;
  const b = feed(`PUB $JS.API.STREAM.INFO.S _INBOX_UAGENT.i ${big.length}\r\n${big}\r\n`);
  assert.match(b.refused!, /a JetStream API request is larger than 8 KiB/);
  // Data publishes are not JSON-checked (and pass byte for byte).
  assert.equal(
    feed("PUB cotal.s.chat.local.a.g 3\r\n{x}\r\n").out,
    "PUB cotal.s.chat.local.a.g 3\r\n{x}\r\n",
  );
});

Deno.test("protocol guard - a reply bound to the agent's delivery rail is allowed there and nowhere else", () => {
  const rail = "cotal.s.ctl.delivery.local.me";
  const g = () => new ProtocolGuard({ inboxPrefix: INBOX, boundRails: [rail] });
  const run = (text: string) => {
    const r = g().push(enc.encode(text));
    return { out: r.out.map((b) => dec.decode(b)).join(""), refused: r.refused };
  };
  const ok = `PUB ${rail} ${rail}.reply.abc123 2\r\n{}\r\n`;
  assert.deepEqual(run(ok), { out: ok, refused: undefined });
  // Through the full parser too.
  assert.equal(run(`pub ${rail} ${rail}.reply.abc123 2\r\n{}\r\n`).refused, undefined);
  const why = /a reply subject must be under the inbox of this agent/;
  // Another subject's bound reply, a reply to the rail itself, wildcards, more tokens.
  assert.match(
    run(`PUB cotal.s.chat.local.me.g cotal.s.chat.local.me.g.reply.x 2\r\n{}\r\n`).refused!,
    why,
  );
  assert.match(run(`PUB ${rail} ${rail} 2\r\n{}\r\n`).refused!, why);
  assert.match(run(`PUB ${rail} ${rail}.reply.> 2\r\n{}\r\n`).refused!, why);
  assert.match(run(`PUB ${rail} ${rail}.reply.a.b 2\r\n{}\r\n`).refused!, why);
  // Without the rail in its policy, the same line is refused.
  assert.match(feed(ok).refused!, why);
});

Deno.test("protocol guard - a long line sent a byte at a time is read once (red team 6)", () => {
  const g = new ProtocolGuard({ inboxPrefix: INBOX });
  const line = `CONNECT {"pass":"${"n".repeat(60_000)}"}\r\n`;
  const bytes = enc.encode(line);
  let out = "";
  for (let i = 0; i < bytes.length; i++) {
    const r = g.push(bytes.subarray(i, i + 1));
    assert.equal(r.refused, undefined);
    out += r.out.map((b) => dec.decode(b)).join("");
  }
  assert.equal(out, line);
  // Past 64 KiB without an end: refused while still arriving.
  const g2 = new ProtocolGuard({ inboxPrefix: INBOX });
  let refusal: string | undefined;
  for (let i = 0; i < 70_000 && !refusal; i += 1000) {
    refusal = g2.push(enc.encode("x".repeat(1000))).refused;
  }
  assert.match(refusal!, /longer than 64 KiB/);
});

Deno.test("protocol guard - holding the agent's key, it signs the broker's nonce into the agent's CONNECT, and only for the agent's own JWT", async () => {
  const { newIdentity } = await import("../../lib/trust/sync_keys.ts");
  const { nonceProver } = await import("../../lib/trust/connect_auth.ts");
  const { verifySignature } = await import("../../lib/nats/signer.ts");
  const { base64urlDecode } = await import("../../lib/nats/base64url.ts");
  const me = newIdentity();
  const other = newIdentity();
  const guard = () => new ProtocolGuard({ inboxPrefix: INBOX, proveKey: nonceProver(me.seed) });

  // Before the broker's INFO there is nothing to sign: the CONNECT ends the connection.
  const early = guard();
  assert.equal(early.needsServerNonce, true);
  const r0 = early.push(enc.encode(`CONNECT {"jwt":"${jwtFor(me.id)}"}\r\n`));
  assert.equal(r0.refused, "the broker sent no nonce to sign");

  // After it: the agent's own JWT kept, every other proof dropped, the nonce signed.
  const g = guard();
  g.serverInfo('INFO {"server_id":"x","nonce":"n0nce-123","auth_required":true}');
  const connect = {
    verbose: false,
    jwt: jwtFor(me.id),
    nkey: other.id,
    sig: "forged",
    user: "u",
    pass: "p",
    auth_token: "t",
  };
  const r1 = g.push(enc.encode(`CONNECT ${JSON.stringify(connect)}\r\nPING\r\n`));
  assert.equal(r1.refused, undefined);
  const out = r1.out.map((b) => dec.decode(b)).join("");
  const sent = JSON.parse(/^CONNECT (.*)\r\n/.exec(out)![1]);
  assert.deepEqual(Object.keys(sent).sort(), ["jwt", "sig", "verbose"]);
  assert.equal(sent.jwt, connect.jwt);
  assert.ok(
    await verifySignature(me.id, enc.encode("n0nce-123"), base64urlDecode(sent.sig)!),
    "the signature is the agent's key over the broker's nonce",
  );
  assert.match(out, /\r\nPING\r\n$/);

  // Another key's JWT, or none: refused before anything is signed.
  for (
    const [line, why] of [
      [`CONNECT {"jwt":"${jwtFor(other.id)}"}`, "CONNECT names the JWT of another key"],
      ['CONNECT {"verbose":false}', "CONNECT carries no user JWT"],
      ['CONNECT {"jwt":"not-a-jwt"}', "CONNECT names the JWT of another key"],
    ]
  ) {
    const h = guard();
    h.serverInfo('INFO {"nonce":"abc"}');
    assert.equal(h.push(enc.encode(`${line}\r\n`)).refused, why, line);
  }

  // Without a held key the guard signs nothing and passes the agent's own proof on.
  const plain = new ProtocolGuard({ inboxPrefix: INBOX });
  assert.equal(plain.needsServerNonce, false);
  const r2 = plain.push(enc.encode('CONNECT {"jwt":"j","sig":"s"}\r\n'));
  assert.equal(dec.decode(r2.out[0]), 'CONNECT {"jwt":"j","sig":"s"}\r\n');
});

Deno.test("protocol guard - a CONNECT field in another case is refused: the broker would read it instead of the one checked (red team 14)", async () => {
  const { newIdentity } = await import("../../lib/trust/sync_keys.ts");
  const { nonceProver } = await import("../../lib/trust/connect_auth.ts");
  const me = newIdentity();
  for (
    const extra of ['"Jwt":"garbage"', '"JWT":"x"', '"Sig":"x"', '"NKEY":"x"', '"verbosE":true']
  ) {
    const g = new ProtocolGuard({ inboxPrefix: INBOX, proveKey: nonceProver(me.seed) });
    g.serverInfo('INFO {"nonce":"abc"}');
    const r = g.push(enc.encode(`CONNECT {"jwt":"j",${extra}}\r\n`));
    assert.equal(r.refused, "CONNECT has a field name that is not lowercase ASCII", extra);
    assert.equal(r.out.length, 0);
  }
  // What client libraries send (nats.js, nats.go, nats.py: lowercase with underscores) passes.
  const plain = new ProtocolGuard({ inboxPrefix: INBOX });
  const ok = plain.push(
    enc.encode('CONNECT {"verbose":false,"no_responders":true,"tls_required":false}\r\n'),
  );
  assert.equal(ok.refused, undefined);
});

Deno.test("protocol guard - one CONNECT per connection: a second is refused before it is parsed or signed (red team 15)", () => {
  const g = new ProtocolGuard({ inboxPrefix: INBOX });
  const first = g.push(enc.encode('CONNECT {"verbose":false}\r\nPING\r\n'));
  assert.equal(first.refused, undefined);
  const again = g.push(enc.encode('CONNECT {"verbose":false}\r\n'));
  assert.equal(again.refused, "a connection sends one CONNECT");
});

Deno.test("protocol guard - it counts the lines it re-writes, which canonical lines are not", () => {
  const g = new ProtocolGuard({ inboxPrefix: INBOX });
  assert.equal(g.push(enc.encode("PING\r\nPONG\r\n")).rewritten, 0);
  assert.equal(g.push(enc.encode("PING\nPING\nping\r\n")).rewritten, 3);
});

Deno.test("protocol guard - a connection name, version or lang the broker would log with a verdict's words is dropped (red teams 26, 27)", () => {
  for (
    const name of [
      "x: no space left on device",
      "Failed to reload",
      "a\nb",
      "\u001b]0;title\u0007",
      "n".repeat(65),
      `${"A".repeat(57_000)} no space left on device`,
      42,
    ]
  ) {
    for (const field of ["name", "version", "lang"]) {
      const r = feed(
        `CONNECT ${JSON.stringify({ verbose: false, [field]: name })}\r\nPING\r\n`,
      );
      assert.equal(r.refused, undefined);
      assert.equal(r.out, 'CONNECT {"verbose":false}\r\nPING\r\n', `${field} ${name}`);
    }
  }
  // Plain tokens, as Cotal's clients send them, pass.
  const ok = feed('CONNECT {"name":"cotal:alice","version":"2.29.3","lang":"javascript"}\r\n');
  assert.equal(ok.out, 'CONNECT {"name":"cotal:alice","version":"2.29.3","lang":"javascript"}\r\n');
});

Deno.test("protocol guard - in user mode it presents the sentinel JWT, the sentinel's signature, the current bearer and the agent's inbox id, never the agent's", async () => {
  const { newIdentity } = await import("../../lib/trust/sync_keys.ts");
  const { nonceProver } = await import("../../lib/trust/connect_auth.ts");
  const { verifySignature } = await import("../../lib/nats/signer.ts");
  const { base64urlDecode } = await import("../../lib/nats/base64url.ts");
  const me = newIdentity();
  const sentinel = newIdentity();
  let bearer: string | undefined = "bearer-1";
  const guard = () =>
    new ProtocolGuard({
      inboxPrefix: `_INBOX_${me.id}`,
      proveKey: nonceProver(me.seed),
      bearer: {
        sentinelJwt: "SENTINEL.JWT.x",
        sign: nonceProver(sentinel.seed).sign,
        current: () => bearer,
        connId: me.id,
      },
    });
  const connectOf = (g: ProtocolGuard, fields: Record<string, unknown>) => {
    g.serverInfo('INFO {"server_id":"x","nonce":"n0nce-9","auth_required":true}');
    const r = g.push(enc.encode(`CONNECT ${JSON.stringify(fields)}\r\n`));
    return {
      refused: r.refused,
      sent: r.refused
        ? undefined
        : JSON.parse(/^CONNECT (.*)\r\n/.exec(r.out.map((b) => dec.decode(b)).join(""))![1]),
    };
  };

  // The agent's own token, name and proof are all replaced.
  const a = connectOf(guard(), {
    verbose: false,
    jwt: jwtFor(me.id),
    sig: "forged",
    auth_token: "agent-chosen-bearer",
    name: "_INBOX_someone_else",
    user: "u",
    pass: "p",
  });
  assert.equal(a.refused, undefined);
  assert.deepEqual(Object.keys(a.sent).sort(), ["auth_token", "jwt", "name", "sig", "verbose"]);
  assert.equal(a.sent.jwt, "SENTINEL.JWT.x");
  assert.equal(a.sent.auth_token, "bearer-1");
  assert.equal(a.sent.name, me.id);
  assert.ok(
    await verifySignature(sentinel.id, enc.encode("n0nce-9"), base64urlDecode(a.sent.sig)!),
    "the signature is the sentinel's key over the broker's nonce",
  );

  // Each connect presents the bearer of that moment (renewed in the supervisor's memory).
  bearer = "bearer-2";
  assert.equal(connectOf(guard(), { jwt: jwtFor(me.id) }).sent.auth_token, "bearer-2");

  // No fresh bearer: the connect is refused, nothing is sent.
  bearer = undefined;
  assert.equal(
    connectOf(guard(), { jwt: jwtFor(me.id) }).refused,
    "the agent's bearer is not ready; connect again shortly",
  );
  bearer = "bearer-3";
  // Past the callout's rate the relay refuses the connect itself: a reconnect loop costs the
  // callout (which every login shares) nothing.
  let admits = 2;
  const limited = () =>
    new ProtocolGuard({
      inboxPrefix: `_INBOX_${me.id}`,
      proveKey: nonceProver(me.seed),
      bearer: {
        sentinelJwt: "SENTINEL.JWT.x",
        sign: nonceProver(sentinel.seed).sign,
        current: () => bearer,
        admit: () => admits-- > 0,
        connId: me.id,
      },
    });
  assert.equal(connectOf(limited(), { jwt: jwtFor(me.id) }).refused, undefined);
  assert.equal(connectOf(limited(), { jwt: jwtFor(me.id) }).refused, undefined);
  assert.equal(
    connectOf(limited(), { jwt: jwtFor(me.id) }).refused,
    "the agent connects more often than the auth callout admits; wait a minute",
  );
  // Another key's JWT (another agent's launch file) is refused before any bearer is used.
  assert.equal(
    connectOf(guard(), { jwt: jwtFor(sentinel.id) }).refused,
    "CONNECT names the JWT of another key",
  );
});
