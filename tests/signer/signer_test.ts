/**
 * `cotal-signer` as a real process under its permission row, against a real broker: a
 * supervisor's creds ask it for an agent's JWT and the agent connects with it (no seed on the
 * wire: the request names a public key, the caller renders the creds); a hostile caller holding
 * a supervisor cred asks for what the policy refuses (another profile, a longer TTL, a grant
 * outside the space, another key's renewal, a reserved name, a proof of another space, junk
 * aimed at the rail) and floods it: each is refused with its code and audited, and the signer
 * keeps serving.
 */
import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { signRailTokenFor } from "../../lib/trust/mod.ts";
import type { NatsConnection } from "nats";
import { CotalError, isCotalError } from "../../lib/errors.ts";
import { readAudit, remoteSigner, SIGN_CONTEXT, signerAuditPath } from "../../lib/signer/mod.ts";
import {
  createSpaceAuth,
  mintCreds,
  mintWith,
  newIdentity,
  proveRequest,
  requestProver,
} from "../../lib/trust/mod.ts";
import { signRail, spaceNames } from "../../lib/trust/grant_names.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { waitFor } from "../_harness/broker.ts";
import { type DeliverySpace, startDeliverySpace } from "../delivery/_helpers.ts";
import { refusedWith, startSigner } from "./_signer.ts";

const SUPERVISOR = { owner: "local", actor: "manager_test" };

async function supervisorOf(s: DeliverySpace, principal = SUPERVISOR) {
  const identity = newIdentity();
  const creds = await mintCreds(s.auth, identity, "supervisor", { principal });
  const nc = await connectBroker({ servers: s.url, creds });
  const signer = remoteSigner({ nc, space: s.space, principal, creds: () => creds });
  return { identity, creds, nc, signer };
}

Deno.test("signer - a supervisor's agent creds come from cotal-signer under its row, and work on the broker", async () => {
  await using s = await startDeliverySpace({ prefix: "signok" });
  const daemon = startSigner(s);
  const sup = await supervisorOf(s);
  try {
    await daemon.waitForLine(/cotal-signer up for space/);
    const agent = newIdentity();
    const principal = { owner: "local", actor: "worker" };
    const creds = await mintWith(sup.signer, agent, "agent", {
      principal,
      lifecycleUid: newLifecycleUid(),
      allowSubscribe: ["general"],
    });
    const claims = decodeJwtUnverified(/BEGIN NATS USER JWT-+\n(\S+)\n/.exec(creds)![1]);
    assert.equal(claims.sub, agent.id);
    assert.equal(claims.name, "agent");
    assert.equal((claims.nats as { issuer_account?: string }).issuer_account, s.auth.account.pub);
    // Capped at a day by the policy, even though the agent profile allows a week.
    assert.ok(claims.exp! - claims.iat! <= 86_400);
    const nc = await connectBroker({ servers: s.url, creds });
    await nc.flush();
    await nc.close();
    // Its own renewal.
    const renewed = await mintWith(sup.signer, sup.identity, "supervisor", {
      principal: SUPERVISOR,
    });
    assert.match(renewed, /BEGIN NATS USER JWT/);
    const audit = await readAudit(signerAuditPath(s.root, s.space));
    assert.deepEqual(
      audit.map((e) => [e.decision, e.profile, e.subject, e.caller]),
      [
        ["allowed", "agent", agent.id, "local.manager_test"],
        ["allowed", "supervisor", sup.identity.id, "local.manager_test"],
      ],
    );
  } finally {
    sup.signer.close();
    await sup.nc.close();
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("signer - a request sent while the signer restarts is sent again and answered, not failed", async () => {
  await using s = await startDeliverySpace({ prefix: "signre" });
  const sup = await supervisorOf(s);
  let daemon: ReturnType<typeof startSigner> | undefined;
  try {
    // Fault pass 9: the request went out while the watchdog was starting a new signer, reached
    // nobody, and the spawn failed after 10 s though the signer was back within one.
    const agent = newIdentity();
    const asked = mintWith(sup.signer, agent, "agent", {
      principal: { owner: "local", actor: "late" },
      lifecycleUid: newLifecycleUid(),
    });
    await new Promise((r) => setTimeout(r, 1_500));
    daemon = startSigner(s);
    const creds = await asked;
    const claims = decodeJwtUnverified(/BEGIN NATS USER JWT-+\n(\S+)\n/.exec(creds)![1]);
    assert.equal(claims.sub, agent.id);
  } finally {
    sup.signer.close();
    await sup.nc.close();
    daemon?.kill();
    await daemon?.exited;
  }
});

Deno.test("signer - what the policy does not allow is refused, audited, and the signer keeps serving", async () => {
  await using s = await startDeliverySpace({ prefix: "signno" });
  const daemon = startSigner(s);
  const sup = await supervisorOf(s);
  const agentOpts = () => ({
    principal: { owner: "local", actor: "worker" },
    lifecycleUid: newLifecycleUid(),
  });
  try {
    await daemon.waitForLine(/cotal-signer up for space/);
    const id = newIdentity();
    await refusedWith(
      mintWith(sup.signer, id, "admin"),
      "signer_profile_refused",
      /A supervisor may not ask for "admin" credentials/,
    );
    await refusedWith(mintWith(sup.signer, id, "delivery"), "signer_profile_refused");
    await refusedWith(
      mintWith(sup.signer, id, "provisioner", { expiresInSeconds: 3600 }),
      "signer_ttl_refused",
      /lives at most 300 s; 3600 s was asked/,
    );
    await refusedWith(
      mintWith(sup.signer, id, "agent", { ...agentOpts(), allowPublish: [">"] }),
      "invalid_channel",
    );
    await refusedWith(
      mintWith(sup.signer, id, "supervisor", { principal: SUPERVISOR }),
      "signer_not_self",
    );
    await refusedWith(
      mintWith(sup.signer, sup.identity, "supervisor", {
        principal: { owner: "local", actor: "x" },
      }),
      "signer_not_self",
    );
    await refusedWith(
      mintWith(sup.signer, id, "agent", {
        ...agentOpts(),
        principal: { owner: "local", actor: "operator" },
      }),
      "signer_reserved_name",
    );
    // A proof made with another space's supervisor creds, on this supervisor's own connection.
    await refusedWith(
      rawRequest(
        s,
        sup.nc,
        await mintCreds(await createSpaceAuth("elsewhere"), newIdentity(), "supervisor", {
          principal: SUPERVISOR,
        }),
      ),
      "signer_unauthenticated",
      /not signed by this space/,
    );
    // No proof at all: what a broker answer aimed at the rail looks like.
    await refusedWith(
      rawRequest(s, sup.nc, undefined),
      "signer_unauthenticated",
      /no caller proof/,
    );
    // An agent's creds cannot even reach the rail: the broker refuses the publish.
    const agentCreds = await mintCreds(s.auth, newIdentity(), "agent", agentOpts());
    const an = await connectBroker({ servers: s.url, creds: agentCreds });
    const denied = (async () => {
      for await (const st of an.status()) {
        const c = st.permissionContext;
        if (st.type === "error" && c) return `${st.data}: ${c.operation} ${c.subject}`;
      }
      return "";
    })();
    const rail = signRail.request(
      spaceNames(s.space).root,
      await signRailTokenFor(s.auth),
      "local",
      "worker",
      "n1",
    );
    an.publish(rail, "{}");
    await an.flush();
    const timeout = new Promise<string>((r) => setTimeout(() => r("none"), 5000));
    assert.equal(await Promise.race([denied, timeout]), `PERMISSIONS_VIOLATION: publish ${rail}`);
    await an.close();

    // A flood from one caller: its in-flight slots and then its rate answer, the signer stays
    // up and serves after. Sent in waves, so the rate is met, not only the slots; the keys are
    // made first and the waves go on until the rate answers (a loaded machine sends slower).
    const flood: PromiseSettledResult<string>[] = [];
    const refusedAs = (code: CotalErrorCode) =>
      flood.filter((r) => r.status === "rejected" && isCotalError(r.reason, code)).length;
    const keys = Array.from({ length: 120 }, () => newIdentity());
    for (let wave = 0; wave < 200 && refusedAs("signer_rate_limited") === 0; wave++) {
      flood.push(
        ...await Promise.allSettled(keys.map((k) => mintWith(sup.signer, k, "provisioner"))),
      );
    }
    const limited = refusedAs("signer_rate_limited");
    const busy = refusedAs("signer_busy");
    const ok = flood.filter((r) => r.status === "fulfilled").length;
    assert.ok(limited > 0, `no request was rate limited (${ok} signed, ${busy} busy)`);
    assert.equal(
      ok + limited + busy,
      flood.length,
      "every request is signed, rate limited or refused as busy",
    );
    await new Promise((r) => setTimeout(r, 1_500));
    assert.match(await mintWith(sup.signer, newIdentity(), "provisioner"), /BEGIN NATS USER JWT/);

    await waitFor(async () => {
      const audit = await readAudit(signerAuditPath(s.root, s.space));
      return audit.some((e) => e.code === "signer_rate_limited");
    }, { what: "the flood audited" });
    const audit = await readAudit(signerAuditPath(s.root, s.space));
    const codes = new Set(audit.filter((e) => e.decision === "refused").map((e) => e.code));
    for (
      const c of [
        "signer_profile_refused",
        "signer_ttl_refused",
        "invalid_channel",
        "signer_not_self",
        "signer_reserved_name",
        "signer_unauthenticated",
        "signer_rate_limited",
      ]
    ) assert.ok(codes.has(c), `${c} not audited: ${[...codes].join(", ")}`);
    // The flood's refusals are written a few times, not once each.
    assert.ok(audit.filter((e) => e.code === "signer_rate_limited").length <= 5);

    // The operator reads the trail with the CLI.
    const cli = async (...args: string[]) => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          new URL("../../cmd/cotal.ts", import.meta.url).pathname,
          "signer",
          "audit",
          "--root",
          s.root,
          "--space",
          s.space,
          ...args,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      return {
        code: out.code,
        stdout: new TextDecoder().decode(out.stdout),
        stderr: new TextDecoder().decode(out.stderr),
      };
    };
    const refusedOnly = await cli("--refused", "--json");
    assert.equal(refusedOnly.code, 0, refusedOnly.stderr);
    const rows = JSON.parse(refusedOnly.stdout) as { decision: string; code: string }[];
    assert.ok(rows.length > 0 && rows.every((r) => r.decision === "refused"));
    const text = await cli("--last", "2");
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stdout.trim().split("\n").length, 2);
    const bad = await cli("--last", "x");
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /--last takes a positive whole number; "x" is not one/);
  } finally {
    sup.signer.close();
    await sup.nc.close();
    daemon.kill();
    await daemon.exited;
  }
});

/** A request on the supervisor's rail, proven with `creds` (or not at all). */
async function rawRequest(
  s: DeliverySpace,
  nc: NatsConnection,
  creds: string | undefined,
): Promise<string> {
  const root = spaceNames(s.space).root;
  const nonce = crypto.randomUUID().replaceAll("-", "");
  const token = await signRailTokenFor(s.auth);
  const subject = signRail.request(root, token, SUPERVISOR.owner, SUPERVISOR.actor, nonce);
  const body = new TextEncoder().encode(
    JSON.stringify({ v: 1, publicKey: newIdentity().id, profile: "provisioner" }),
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
  for await (const m of reply) {
    const a = JSON.parse(new TextDecoder().decode(m.data));
    if (a.ok) return a.jwt;
    throw new CotalError(a.error.code, a.error.message);
  }
  throw new Error("no answer");
}
