import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  aclKey,
  bucketNames,
  chatReadFilter,
  chatSubject,
  ctlSubject,
  dinboxSubject,
  dlvDurableName,
  dlvSubject,
  dmDurableName,
  dmFilter,
  instSubject,
  isPrincipalOwnerToken,
  liveSubject,
  memberKey,
  parseSubject,
  streamNames,
  subjectMatches,
  svcDurableName,
  svcFilter,
  svcSubject,
} from "../../lib/wire/mod.ts";

// The reference SPEC §12 parsing vectors use these two derived owners.
const A = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa";
const B = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb";
const alice = { owner: A, actor: "alice" };
const bob = { owner: B, actor: "bob" };
const UID = "0123456789abcdefghijklmnop";

Deno.test("wire - vector: chat subject parses with a dotted channel", () => {
  const r = parseSubject(`cotal.main.chat.${A}.alice.team.backend`);
  assert.ok(r.ok && r.kind === "chat");
  assert.deepEqual(r.sender, alice);
  assert.equal(r.channel, "team.backend");
  assert.equal(r.rest, "team.backend");
  assert.equal(r.space, "main");
});

Deno.test("wire - vector: inst subject parses sender from tokens 5 and 6", () => {
  const r = parseSubject(`cotal.main.inst.${B}.bob.${A}.alice`);
  assert.ok(r.ok && r.kind === "inst");
  assert.deepEqual(r.sender, alice);
  assert.deepEqual(r.recipient, bob);
  assert.equal(r.rest, `${B}.bob`);
});

Deno.test("wire - vector: svc subject parses role and sender", () => {
  const r = parseSubject(`cotal.main.svc.reviewer.${A}.alice`);
  assert.ok(r.ok && r.kind === "svc");
  assert.deepEqual(r.sender, alice);
  assert.equal(r.role, "reviewer");
  assert.equal(r.rest, "reviewer");
});

Deno.test("wire - vector: ctl.manager is retired and not handled", () => {
  assert.deepEqual(parseSubject(`cotal.main.ctl.manager.${A}.alice`), {
    ok: false,
    reason: "retired",
  });
  const d = parseSubject(`cotal.main.ctl.delivery.${A}.alice`);
  assert.ok(d.ok && d.kind === "ctl" && d.service === "delivery");
});

Deno.test("wire - vector: a chat subject without a channel is malformed", () => {
  assert.deepEqual(parseSubject(`cotal.main.chat.${A}.alice`), { ok: false, reason: "malformed" });
});

Deno.test("wire - vector: an nkey owner split-parses but is not a principal owner", () => {
  const nkey = "UAQ3XKZQJ5W7OQ2VZ2Q3QCADQKZQJ5W7OQ2VZ2Q3QCADQKZQJ5W7QCAD";
  const r = parseSubject(`cotal.main.chat.${nkey}.team.backend`);
  assert.ok(r.ok && r.kind === "chat");
  assert.equal(r.sender.owner, nkey);
  assert.equal(r.sender.actor, "team");
  assert.equal(r.channel, "backend");
  assert.equal(isPrincipalOwnerToken(r.sender.owner), false);
});

Deno.test("wire - parseSubject refuses wrong arity, foreign spaces and bad tokens", () => {
  const bad = [
    `cotal.main.inst.${B}.bob.${A}`,
    `cotal.main.inst.${B}.bob.${A}.alice.x`,
    `cotal.main.svc.reviewer.${A}.alice.x`,
    `cotal.main.dinbox.${A}.alice`,
    `cotal.main.dlv.${A}.alice.NOTAUID`,
    `cotal.main.chat.${A}.al-ice.general`,
    `other.main.chat.${A}.alice.general`,
    `cotal.main.chat.${A}.alice.gen*`,
  ];
  for (const s of bad) assert.deepEqual(parseSubject(s), { ok: false, reason: "malformed" }, s);
  assert.deepEqual(parseSubject(`cotal.main.trace.x.y.z`), { ok: false, reason: "unknown-kind" });
  assert.deepEqual(parseSubject(`cotal.main.chat.${A}.alice.g`, { space: "other" }), {
    ok: false,
    reason: "other-space",
  });
  assert.ok(parseSubject(`cotal.my_space.chat.${A}.alice.g`, { space: "my space" }).ok);
});

Deno.test("wire - builders round-trip through parseSubject", () => {
  const chat = chatSubject("my space", alice, "team.backend");
  assert.equal(chat, `cotal.my_space.chat.${A}.alice.team.backend`);
  const inst = instSubject("main", bob, alice);
  assert.equal(inst, `cotal.main.inst.${B}.bob.${A}.alice`);
  assert.equal(svcSubject("main", "reviewer", alice), `cotal.main.svc.reviewer.${A}.alice`);
  const din = parseSubject(dinboxSubject("main", alice, UID));
  assert.ok(din.ok && din.kind === "dinbox" && din.lifecycleUid === UID);
  const dlv = parseSubject(dlvSubject("main", alice, UID));
  assert.ok(dlv.ok && dlv.kind === "dlv");
  assert.deepEqual(dlv.member, alice);
  const live = parseSubject(liveSubject("main", "delivery", alice));
  assert.ok(live.ok && live.kind === "live" && live.plane === "delivery");
  assert.equal(ctlSubject("main", "delivery", alice), `cotal.main.ctl.delivery.${A}.alice`);
});

Deno.test("wire - builders refuse what would alias or be unroutable", () => {
  const refuses = (fn: () => unknown, code: CotalErrorCode) =>
    assert.throws(fn, (e: unknown) => isCotalError(e, code));
  refuses(() => chatSubject("main", alice, "team.*"), "invalid_channel");
  refuses(() => chatSubject("main", alice, "foo/bar"), "invalid_channel");
  refuses(() => chatSubject("main", { owner: A, actor: "a.b" }, "g"), "invalid_principal");
  refuses(() => svcSubject("main", "a.b", alice), "invalid_role");
  refuses(() => ctlSubject("main", "manager", alice), "invalid_ctl_service");
  refuses(() => liveSubject("main", "auth", alice), "invalid_plane");
  refuses(() => dlvSubject("main", alice, "nope"), "invalid_lifecycle_uid");
});

Deno.test("wire - read and serve filters", () => {
  assert.equal(chatReadFilter("main", "team.>"), "cotal.main.chat.*.*.team.>");
  assert.equal(dmFilter("main", alice), `cotal.main.inst.${A}.alice.>`);
  assert.equal(svcFilter("main", "reviewer"), "cotal.main.svc.reviewer.>");
  assert.ok(subjectMatches(chatReadFilter("main", "team.>"), chatSubject("main", bob, "team.x")));
  assert.ok(subjectMatches(dmFilter("main", alice), instSubject("main", alice, bob)));
  assert.ok(!subjectMatches(dmFilter("main", alice), instSubject("main", bob, alice)));
});

Deno.test("wire - subjectMatches follows NATS semantics", () => {
  assert.ok(subjectMatches("a.>", "a.b"));
  assert.ok(subjectMatches("a.>", "a.b.c"));
  assert.ok(!subjectMatches("a.>", "a"));
  assert.ok(subjectMatches("a.*.c", "a.b.c"));
  assert.ok(!subjectMatches("a.*", "a.b.c"));
  assert.ok(!subjectMatches("a.b", "a.b.c"));
  assert.ok(subjectMatches(">", "x"));
});

Deno.test("wire - stream, bucket, durable and registry names match the reference", () => {
  assert.deepEqual({ ...streamNames("my space") }, {
    chat: "CHAT_my_space",
    dm: "DM_my_space",
    task: "TASK_my_space",
    inbox: "INBOX_my_space",
    dlv: "DLV_my_space",
  });
  assert.deepEqual({ ...bucketNames("main") }, {
    presence: "cotal_presence_main",
    channels: "cotal_channels_main",
    members: "cotal_members_main",
    acl: "cotal_acl_main",
    membership: "cotal_membership_main",
    delivery: "cotal_delivery_main",
    manager: "cotal_manager_main",
    setaside: "cotal_setaside_main",
  });
  assert.equal(dmDurableName(alice, UID), `dm_${A}-alice-${UID}`);
  assert.equal(dlvDurableName(alice, UID), `dlv_${A}-alice-${UID}`);
  assert.equal(svcDurableName("reviewer"), "svc_reviewer");
  assert.equal(aclKey(alice, UID), `${A}.alice.${UID}`);
  assert.equal(memberKey("team.backend", alice, UID), `team.backend/${A}.alice.${UID}`);
});
