/**
 * Red team 45: a compromised supervisor asks the signer, with well-proven requests, for what its
 * policy should refuse: raw bodies with options a remote signer never sends (`expiresAt`,
 * `connId`, `__proto__`, `constructor`), profiles outside its row, a renewal for another key,
 * a TTL over the cap written as a float or a string, channel grants reaching outside the chat
 * plane, and reserved names hidden behind case or another owner. Every one must be refused and
 * the signer must keep serving.
 *
 * Result when written: held, all 26 refused (a channel subtree such as `x.>` in allowSubscribe
 * is signed, but it stays under `<root>.chat.*.*.`: within the policy, so not asked here).
 */
import assert from "node:assert/strict";
import { signRailTokenFor } from "../../lib/trust/mod.ts";
import { CotalError } from "../../lib/errors.ts";
import { SIGN_CONTEXT } from "../../lib/signer/mod.ts";
import { signRail, spaceNames } from "../../lib/trust/grant_names.ts";
import { newIdentity, proveRequest, requestProver } from "../../lib/trust/mod.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { honestMint, type Rt45Stack, startRt45, SUPERVISOR } from "./_rt45.ts";

/** Sends `raw` (a JSON text) proven as the supervisor; the signer's answer. */
async function rawAsk(st: Rt45Stack, raw: string): Promise<{ ok: boolean; code?: string }> {
  const root = spaceNames(st.s.space).root;
  const nonce = crypto.randomUUID().replaceAll("-", "");
  // The compromised supervisor's creds carry the rail's token.
  const token = await signRailTokenFor(st.s.auth);
  const subject = signRail.request(root, token, SUPERVISOR.owner, SUPERVISOR.actor, nonce);
  const body = new TextEncoder().encode(raw);
  const sub = st.supNc.subscribe(
    signRail.reply(root, token, SUPERVISOR.owner, SUPERVISOR.actor, nonce),
    {
      max: 1,
    },
  );
  const timer = setTimeout(() => sub.unsubscribe(), 5_000);
  const headers = await proveRequest(await requestProver(st.supCreds), SIGN_CONTEXT, subject, body);
  st.supNc.publish(subject, body, { headers });
  try {
    for await (const m of sub) {
      const a = JSON.parse(new TextDecoder().decode(m.data));
      return { ok: a.ok === true, code: a.error?.code };
    }
  } finally {
    clearTimeout(timer);
  }
  throw new CotalError("signer_unreachable", "no answer in 5 s");
}

Deno.test("redteam45 - out-of-policy asks from a supervisor's cred are all refused, and the signer keeps serving", async () => {
  const st = await startRt45("rt45po");
  try {
    const key = newIdentity().id;
    const uid = newLifecycleUid();
    const agent = (opts: Record<string, unknown>, profile = "agent") =>
      JSON.stringify({
        v: 1,
        publicKey: key,
        profile,
        opts: { principal: { owner: "local", actor: "w" }, lifecycleUid: uid, ...opts },
      });
    const asks: Record<string, string> = {
      admin: JSON.stringify({ v: 1, publicKey: key, profile: "admin", opts: {} }),
      signer: JSON.stringify({ v: 1, publicKey: key, profile: "signer", opts: {} }),
      operator: JSON.stringify({ v: 1, publicKey: key, profile: "operator", opts: {} }),
      delivery: JSON.stringify({ v: 1, publicKey: key, profile: "delivery", opts: {} }),
      teardown: JSON.stringify({ v: 1, publicKey: key, profile: "teardown", opts: {} }),
      protoProfile: JSON.stringify({ v: 1, publicKey: key, profile: "__proto__", opts: {} }),
      renewOther: JSON.stringify({
        v: 1,
        publicKey: key,
        profile: "supervisor",
        opts: { principal: SUPERVISOR },
      }),
      expiresAt: agent({ expiresAt: Math.floor(Date.now() / 1000) + 7 * 86_400 }),
      connId: agent({ connId: "UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }),
      proto:
        `{"v":1,"publicKey":"${key}","profile":"agent","opts":{"__proto__":{"expiresInSeconds":604800},"lifecycleUid":"${uid}"}}`,
      constructor: agent({ constructor: { name: "x" } }),
      ttlFloat: agent({ expiresInSeconds: 86_400.5 }),
      ttlString: agent({ expiresInSeconds: "604800" }),
      ttlWeek: agent({ expiresInSeconds: 604_800 }),
      ttlHuge: agent({ expiresInSeconds: 1e300 }),
      subJsApi: agent({ allowSubscribe: ["$JS.API.>"] }),
      pubWildcard: agent({ allowPublish: [">"] }),
      roleDotted: agent({ role: "a.b" }),
      reservedCase: agent({ principal: { owner: "local", actor: "SiGnEr" } }),
      reservedPrefix: agent({ principal: { owner: "local", actor: "manager_x" } }),
      reservedOtherOwner: agent({ principal: { owner: "evil", actor: "Delivery" } }),
      principalDotted: agent({ principal: { owner: "local", actor: "a.b" } }),
      ownerDotted: agent({ principal: { owner: "a.b", actor: "w" } }),
      deprovTarget: agent({}, "deprovisioner"),
      controlStatus: JSON.stringify({
        v: 1,
        publicKey: key,
        profile: "control-caller",
        opts: { principal: { owner: "local", actor: "status" } },
      }),
      notUserKey: JSON.stringify({
        v: 1,
        publicKey: (await newIdentity()).id.replace(/^U/, "A"),
        profile: "provisioner",
      }),
    };
    const signed: string[] = [];
    for (const [what, raw] of Object.entries(asks)) {
      const a = await rawAsk(st, raw);
      if (a.ok) signed.push(what);
    }
    assert.deepEqual(signed, [], `signed out of policy: ${signed.join(", ")}`);
    assert.equal(await honestMint(st.signer), undefined, "the signer still serves");
  } finally {
    await st.close();
  }
});
