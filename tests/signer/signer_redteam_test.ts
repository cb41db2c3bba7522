/**
 * The thirteenth red team's attempts on `cotal-signer`, kept: names that read as the mesh's own
 * in another case, a deprovisioner aimed at a reserved name, one caller filling the replay
 * memory every caller shared, megabyte bodies proven before their size was checked, an audit
 * trail its own row could not rotate, and junk lines that crashed `cotal signer audit`. The
 * OS-level ones (the supervisor reading `$SYS` creds and rewriting the trail) are in
 * tests/mesh/systemd_store_test.ts.
 */
import assert from "node:assert/strict";
import { signRailTokenFor } from "../../lib/trust/mod.ts";
import type { NatsConnection } from "nats";
import { CotalError, isCotalError } from "../../lib/errors.ts";
import { denoRunFlags } from "../../lib/permissions.ts";
import { readAudit, remoteSigner, SIGN_CONTEXT, signerAuditPath } from "../../lib/signer/mod.ts";
import { MAX_SIGN_REQUEST_BYTES } from "../../lib/signer/rail.ts";
import { signRail, spaceNames } from "../../lib/trust/grant_names.ts";
import {
  mintCreds,
  mintWith,
  newIdentity,
  proveRequest,
  requestProver,
} from "../../lib/trust/mod.ts";
import { REQUEST_PROOF_WINDOW_MS, RequestVerifier } from "../../lib/trust/request_proof.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { spaceKeyHex } from "../../lib/workspace/keys.ts";
import { tempDir } from "../_harness/broker.ts";
import { type DeliverySpace, startDeliverySpace } from "../delivery/_helpers.ts";
import { refusedWith, startSigner } from "./_signer.ts";

const SUPERVISOR = { owner: "local", actor: "manager_rt" };
const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

/** A request of `bytes` bytes on the supervisor's rail, proven with `creds` or not at all. */
async function sized(
  s: DeliverySpace,
  nc: NatsConnection,
  creds: string | undefined,
  bytes: number,
): Promise<void> {
  const root = spaceNames(s.space).root;
  const nonce = crypto.randomUUID().replaceAll("-", "");
  const token = await signRailTokenFor(s.auth);
  const subject = signRail.request(root, token, SUPERVISOR.owner, SUPERVISOR.actor, nonce);
  const body = new TextEncoder().encode(
    JSON.stringify({ v: 1, publicKey: newIdentity().id, profile: "provisioner", pad: "" })
      .replace('"pad":""', `"pad":"${"x".repeat(bytes)}"`),
  );
  const reply = nc.subscribe(
    signRail.reply(root, token, SUPERVISOR.owner, SUPERVISOR.actor, nonce),
    {
      max: 1,
    },
  );
  const headers = creds
    ? await proveRequest(await requestProver(creds), SIGN_CONTEXT, subject, body)
    : undefined;
  nc.publish(subject, body, headers ? { headers } : {});
  const timer = setTimeout(() => reply.unsubscribe(), 3_000);
  try {
    for await (const m of reply) {
      const a = JSON.parse(new TextDecoder().decode(m.data));
      if (a.ok) return;
      throw new CotalError(a.error.code, a.error.message);
    }
  } finally {
    clearTimeout(timer);
  }
  throw new Error("no answer within 3 s");
}

Deno.test("signer - red team 13: reserved names in any case and as a deprovision target are refused; a body over the cap is refused before its proof is checked, and a megabyte one never reaches the signer", async () => {
  await using s = await startDeliverySpace({ prefix: "signrt" });
  const daemon = startSigner(s);
  const creds = await mintCreds(s.auth, newIdentity(), "supervisor", { principal: SUPERVISOR });
  const nc = await connectBroker({ servers: s.url, creds });
  const signer = remoteSigner({ nc, space: s.space, principal: SUPERVISOR, creds: () => creds });
  try {
    await daemon.waitForLine(/cotal-signer up for space/);
    for (const actor of ["Manager", "SIGNER", "Delivery", "Operator_x", "Status"]) {
      await refusedWith(
        mintWith(signer, newIdentity(), "agent", {
          principal: { owner: "local", actor },
          lifecycleUid: newLifecycleUid(),
        }),
        "signer_reserved_name",
      );
    }
    await refusedWith(
      mintWith(signer, newIdentity(), "control-caller", {
        principal: { owner: "local", actor: "Operator" },
      }),
      "signer_reserved_name",
    );
    await refusedWith(
      mintWith(signer, newIdentity(), "deprovisioner", {
        deprovisionTarget: { owner: "local", actor: "delivery", lifecycleUid: newLifecycleUid() },
      }),
      "signer_reserved_name",
    );
    // A name that merely contains a reserved word is an ordinary name.
    assert.match(
      await mintWith(signer, newIdentity(), "agent", {
        principal: { owner: "local", actor: "my_manager" },
        lifecycleUid: newLifecycleUid(),
      }),
      /BEGIN NATS USER JWT/,
    );
    // Over the body cap but within the rail's message cap: with no proof at all refused as
    // such, proven refused for its size; neither has a hash or a signature check spent on it.
    const over = MAX_SIGN_REQUEST_BYTES + 1_000;
    await refusedWith(sized(s, nc, undefined, over), "signer_unauthenticated");
    await refusedWith(sized(s, nc, creds, over), "signer_bad_request");
    // 1 MB never reaches the signer: the rail's stream refuses it (tests/signer/signer_flood_test.ts).
    await assert.rejects(sized(s, nc, creds, 1_000_000), /no answer within 3 s/);
    // One caller's flood fills its own slots (and then its rate); another caller is served.
    const other = { owner: "local", actor: "manager_other" };
    const otherCreds = await mintCreds(s.auth, newIdentity(), "supervisor", { principal: other });
    const onc = await connectBroker({ servers: s.url, creds: otherCreds });
    const otherSigner = remoteSigner({
      nc: onc,
      space: s.space,
      principal: other,
      creds: () => otherCreds,
    });
    try {
      const flood = Promise.allSettled(
        Array.from({ length: 3_000 }, () => mintWith(signer, newIdentity(), "provisioner")),
      );
      let served = 0;
      for (let i = 0; i < 20; i++) {
        await mintWith(otherSigner, newIdentity(), "provisioner");
        served++;
      }
      const flooded = await flood;
      assert.equal(served, 20);
      assert.ok(
        flooded.some((r) => r.status === "rejected" && isCotalError(r.reason, "signer_busy")),
        "the flood never met its in-flight cap",
      );
    } finally {
      otherSigner.close();
      await onc.close();
    }
    // What was allowed names the principal it speaks for.
    const audit = await readAudit(signerAuditPath(s.root, s.space));
    assert.ok(audit.some((e) => e.decision === "allowed" && e.principal === "local.my_manager"));
    assert.ok(
      audit.some((e) => e.code === "signer_unauthenticated" && e.unproven === true),
      "an unproven refusal says so",
    );
  } finally {
    signer.close();
    await nc.close();
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("signer - red team 13: one caller filling its replay memory refuses only itself, and a future timestamp holds no memory past its time", () => {
  let now = 1_000_000_000_000;
  const trust = { accountPub: "A", issuers: ["A"] };
  const v = new RequestVerifier(trust, {
    context: "t",
    profiles: ["supervisor"],
    code: "signer_unauthenticated",
    what: "request",
    hint: "",
  }, { now: () => now, replayCapPerCaller: 3 });
  const a = { owner: "local", actor: "a" };
  const b = { owner: "local", actor: "b" };
  for (const n of ["1", "2", "3"]) v.remember(a, n);
  assert.throws(() => v.remember(a, "4"), /this caller sent too many requests inside the window/);
  assert.throws(() => v.remember(a, "1"), /a replay/);
  // Another caller is untouched by a's full memory.
  for (const n of ["1", "2", "3"]) v.remember(b, n);
  // Past twice the window every nonce is forgotten, in arrival order, whatever its timestamp.
  now += 2 * REQUEST_PROOF_WINDOW_MS + 1;
  v.remember(a, "4");
  v.remember(a, "1");
});

Deno.test("signer - red team 13: the audit trail rotates under the signer's own row", async () => {
  const root = await tempDir("cotal-audit-rot-");
  const path = signerAuditPath(root, "rot");
  const script = `${root}/rotate.ts`;
  await Deno.writeTextFile(
    script,
    `import { AuditLog } from ${
      JSON.stringify(new URL("../../lib/signer/audit.ts", import.meta.url).href)
    };
const log = new AuditLog(${JSON.stringify(path)}, { maxBytes: 4096 });
for (let i = 0; i < 200; i++) {
  log.record({ caller: "local.m", callerProfile: "supervisor", profile: "agent", subject: "U" + i, ttlSeconds: 60, decision: "allowed" });
}
`,
  );
  const flags = denoRunFlags("cotal-signer", {
    root,
    broker: ["127.0.0.1:4222"],
    spaceKey: `space.${spaceKeyHex("rot")}`,
  });
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, err);
  assert.doesNotMatch(err, /could not be rotated/);
  const size = (await Deno.stat(path)).size;
  assert.ok(size <= 4096, `the trail is ${size} bytes past its 4096-byte cap`);
  assert.ok((await Deno.stat(`${path}.1`)).size <= 4096);
});

Deno.test("signer - red team 13: cotal signer audit reads past junk lines and prints what is untrusted text safely", async () => {
  const root = await tempDir("cotal-audit-junk-");
  await Deno.mkdir(`${root}/secrets`, { recursive: true, mode: 0o700 });
  const path = signerAuditPath(root, "default");
  await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
  const good = {
    at: "2026-12-04T00:00:00.000Z",
    caller: "local.m\u001b]52;c;AAAA\u0007",
    profile: "agent",
    decision: "allowed",
  };
  await Deno.writeTextFile(
    path,
    ["null", "[1,2]", "42", '{"caller":1}', JSON.stringify(good), "{torn"].join("\n"),
  );
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, "signer", "audit", "--root", root],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.equal(stdout.trim().split("\n").length, 1, stdout);
  assert.match(stdout, /allowed local\.m/);
  assert.ok(
    !stdout.includes("\u001b") && !stdout.includes("\u0007"),
    "a raw escape reached the terminal",
  );
});

Deno.test("signer - red team 13 again: made-up caller names share one refusal limit, and the trail keeps four rotated files", async () => {
  const { AuditLog, AUDIT_KEEP_FILES } = await import("../../lib/signer/audit.ts");
  const root = await tempDir("cotal-audit-names-");
  const path = `${root}/audit/trail.jsonl`;
  const log = new AuditLog(path, { maxBytes: 2048 });
  // An answer aimed under 2,000 invented names: a handful of lines in all, not five per name.
  for (let i = 0; i < 2_000; i++) {
    log.record({
      caller: `local.x${i}`,
      unproven: true,
      decision: "refused",
      code: "signer_unauthenticated",
    });
  }
  log.flush();
  const refused = (await readAudit(path)).filter((e) => e.decision === "refused");
  assert.ok(refused.length <= 6, `${refused.length} refusal lines`);
  assert.ok(refused.every((e) => e.unproven === true), "every unproven line, summary too, says so");
  assert.equal(refused.at(-1)?.notWritten, 1_995);
  // A proven caller's mints rotate through the kept files; the oldest beyond them go.
  for (let i = 0; i < 400; i++) {
    log.record({
      caller: "local.m",
      callerProfile: "supervisor",
      profile: "agent",
      subject: `U${i}`,
      decision: "allowed",
    });
  }
  for (let n = 1; n <= AUDIT_KEEP_FILES; n++) assert.ok((await Deno.stat(`${path}.${n}`)).isFile);
  await assert.rejects(Deno.stat(`${path}.${AUDIT_KEEP_FILES + 1}`));
  const kept = (await readAudit(path)).filter((e) => e.decision === "allowed");
  assert.equal(kept.at(-1)?.subject, "U399", "the newest mint is in the trail");
  assert.ok(kept.length > 20, `${kept.length} mints read back across the files`);
});
