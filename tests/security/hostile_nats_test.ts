/**
 * A hostile agent spawned by the manager (a module, inside bwrap, with its own minted creds)
 * attacks the mesh over NATS: it publishes as another principal, tries to read another agent's
 * DMs (live and through its DM durable), and asks the control rail for a mint. The broker
 * refuses each one, and the refusal is observed with its exact message; the manager refuses a
 * mint from a real control caller with its own code. See docs/SECURITY.md.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { subjectRoot } from "../../lib/wire/subjects.ts";
import { streamNames } from "../../lib/wire/resources.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/** The hostile module; `@@P@@` (the space's subject root) and the victim are filled in. */
const HOSTILE = `
import { connect, credsAuthenticator } from "nats";

export async function run(ctx) {
  const P = "@@P@@";
  const DM = "@@DM@@";
  const victimDurable = "@@VICTIM_DURABLE@@";
  await ctx.endpoint();
  const m = ctx.launch;
  const me = m.principal.actor;
  const jwt = /BEGIN NATS USER JWT-+\\n(\\S+)\\n/.exec(m.auth.creds)[1];
  const nkey = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const nc = await connect({
    servers: m.servers,
    authenticator: credsAuthenticator(new TextEncoder().encode(m.auth.creds)),
    inboxPrefix: "_INBOX_" + nkey,
  });
  const violations = [];
  (async () => {
    for await (const s of nc.status()) {
      const c = s.permissionContext;
      if (s.type === "error" && c) violations.push(s.data + ": " + c.operation + " " + c.subject);
    }
  })();
  const got = [];
  const subErrors = [];
  const uid = "abcdefghijklmnopqrstuvwxyz";
  const nonce = "AAAAAAAAAAAAAAAAAAAAAA";
  const attempts = {
    forgeDm: P + ".inst.local.victim.local.operator",
    forgeChat: P + ".chat.local.victim.general",
    forgeTask: P + ".svc.shout.local.victim",
    readDms: P + ".inst.local.victim.>",
    readDurable: "$JS.API.CONSUMER.INFO." + DM + "." + victimDurable,
    pullDurable: "$JS.API.CONSUMER.MSG.NEXT." + DM + "." + victimDurable,
    mint: P + ".ep.one.manager.mint.local." + me + "." + uid + "." + nonce,
    spawn: P + ".ep.one.manager.spawn.local." + me + "." + uid + "." + nonce,
    replies: P + ".ep.reply.manager.>",
    deliveryAdmin: P + ".ctl.delivery-admin.local." + me,
  };
  for (const k of ["forgeDm", "forgeChat", "forgeTask", "deliveryAdmin"]) {
    nc.publish(attempts[k], "forged");
  }
  for (const k of ["readDms", "replies"]) {
    nc.subscribe(attempts[k], {
      callback: (e, msg) => {
        if (e) subErrors.push(k + ": " + (e.code ?? e.message));
        else got.push(msg.subject);
      },
    });
  }
  const answers = {};
  for (const k of ["readDurable", "pullDurable", "mint", "spawn"]) {
    try {
      // A well-formed pull for the durable (the relay refuses a pull body with other fields
      // before the broker sees it): the broker's grant is what this asks.
      const body = k === "pullDurable"
        ? JSON.stringify({ batch: 1 })
        : JSON.stringify({ v: 1, id: nonce, command: k, args: { profile: "admin" } });
      const r = await nc.request(attempts[k], body, { timeout: 1500 });
      answers[k] = "answered: " + new TextDecoder().decode(r.data).slice(0, 200);
    } catch (err) {
      answers[k] = "refused: " + (err.code ?? err.message);
    }
  }
  await nc.flush();
  await new Promise((r) => setTimeout(r, 1500));
  await Deno.writeTextFile(ctx.agentDir + "/hostile.json", JSON.stringify({ attempts, violations, answers, got, subErrors }));
  await nc.close();
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

Deno.test("security - a spawned agent's NATS attacks are refused by the broker and the manager", async () => {
  await using mesh = await startManagerMesh("hostnats");
  await mesh.manager();
  const ctl = await mesh.control();
  const victim = await ctl.request<AgentRow>("spawn", {
    name: "victim",
    role: "shout",
    command: "/bin/cat",
  }, { timeoutMs: 40_000 });
  const src = `${await tempDir("cotal-hostile-nats-")}/hostile.js`;
  await Deno.writeTextFile(
    src,
    HOSTILE.replace("@@P@@", subjectRoot(mesh.space))
      .replace("@@DM@@", streamNames(mesh.space).dm)
      .replace("@@VICTIM_DURABLE@@", `dm_local-victim-${victim.lifecycleUid}`),
  );
  // A DM for the victim while the hostile agent listens on the victim's subjects.
  const { ep } = await mesh.client("operator");
  // Its report goes to a workdir the test reads (its home is private to its sandbox).
  const work = await agentWorkdir("cotal-hostile-work-");
  await ctl.request("spawn", { agent: "module", module: src, name: "hostile", workdir: work }, {
    timeoutMs: 40_000,
  });
  const report = `${work}/hostile.json`;
  const sending = setInterval(() => void ep.unicast("local.victim", "for the victim only"), 200);
  try {
    await waitFor(() => jsonFileReady(report), {
      timeoutMs: 20_000,
      what: "the hostile agent's report",
    });
  } finally {
    clearInterval(sending);
  }
  const r = JSON.parse(await Deno.readTextFile(report)) as {
    attempts: Record<string, string>;
    violations: string[];
    answers: Record<string, string>;
    got: string[];
    subErrors: string[];
  };
  const refusedPub = (k: string) =>
    assert.ok(
      r.violations.includes(`PERMISSIONS_VIOLATION: publish ${r.attempts[k]}`),
      `${k}: ${r.violations.join(" | ")}`,
    );
  const refusedSub = (k: string) =>
    assert.ok(
      r.violations.includes(`PERMISSIONS_VIOLATION: subscription ${r.attempts[k]}`),
      `${k}: ${r.violations.join(" | ")}`,
    );
  // Publishing as another principal: every plane forge-locks the sender in the subject.
  for (const k of ["forgeDm", "forgeChat", "forgeTask"]) refusedPub(k);
  // Reading another agent's DMs: neither the live subjects nor its DM durable.
  refusedSub("readDms");
  for (const k of ["readDurable", "pullDurable"]) {
    refusedPub(k);
    assert.equal(r.answers[k], "refused: PERMISSIONS_VIOLATION", k);
  }
  // Asking the control rail for a mint (or a spawn, or the delivery-admin rail): no grant.
  for (const k of ["mint", "spawn", "deliveryAdmin"]) refusedPub(k);
  for (const k of ["mint", "spawn"]) {
    assert.equal(r.answers[k], "refused: PERMISSIONS_VIOLATION", k);
  }
  refusedSub("replies");
  assert.deepEqual(r.got, [], "the hostile agent received nothing it subscribed to");
  // The client library closes each refused subscription with the broker's verdict.
  assert.deepEqual(r.subErrors.sort(), [
    "readDms: PERMISSIONS_VIOLATION",
    "replies: PERMISSIONS_VIOLATION",
  ]);
  // And a real control caller asking the manager for a mint gets the manager's own refusal.
  await assert.rejects(
    ctl.request("mint", { profile: "admin" }),
    (e) => isCotalError(e, "unknown_command") && /no command "mint"/.test(e.message),
  );
});
