/**
 * The manager's control rail takes a command only with a proof of its caller (a control-caller
 * JWT of the space and a signature over subject, time and body). These are the ways around it
 * a hostile member or a stolen-looking request would try: no proof (what a broker answer aimed
 * at the rail carries), another profile's JWT, another space's control-caller, a JWT naming
 * another caller than the subject, a changed body, an old timestamp, and a
 * publish ack an agent aims at the rail. Each is refused and nothing is spawned. A proven
 * command sent again (a replay, or the caller's re-send on silence) runs once.
 */
import assert from "node:assert/strict";
import { connect, credsAuthenticator, type Msg, type MsgHdrs, type NatsConnection } from "nats";
import { waitFor } from "../_harness/broker.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import {
  CONTROL_PROOF_WINDOW_MS,
  controlProver,
  proveControlRequest,
} from "../../lib/manager/control_auth.ts";
import {
  CONTROL_VERSION,
  encodeEnvelope,
  newNonce,
  replyFilter,
  requestSubject,
} from "../../lib/manager/control_rail.ts";
import { createSpaceAuth, mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { bucketNames } from "../../lib/wire/resources.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

const ENC = new TextEncoder();
const DEC = new TextDecoder();

Deno.test("security - the control rail refuses every command without a valid proof of its caller", async () => {
  await using mesh = await startManagerMesh("proof");
  const mgr = await mesh.manager();
  const caller = { owner: "local", actor: "operator", uid: newLifecycleUid() };
  const creds = await mintCreds(mesh.auth, newIdentity(), "control-caller", {
    principal: { owner: caller.owner, actor: caller.actor },
  });
  const jwtOf = (c: string) => /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(c)![1];
  const nkey = JSON.parse(atob(jwtOf(creds).split(".")[1].replace(/-/g, "+").replace(/_/g, "/")))
    .sub;
  const nc: NatsConnection = await connect({
    servers: mesh.url,
    authenticator: credsAuthenticator(ENC.encode(creds)),
    inboxPrefix: `_INBOX_${nkey}`,
  });
  const replies = new Map<string, { ok: boolean; error?: { code: string; message: string } }>();
  nc.subscribe(replyFilter(mesh.space, caller), {
    callback: (_e, m: Msg) => {
      const r = JSON.parse(DEC.decode(m.data));
      replies.set(r.id, r);
    },
  });
  const prover = await controlProver(creds);
  const spawnArgs = { agent: "program", name: "evil", argv: ["/bin/true"] };
  const send = async (
    opts: {
      headers?: (subject: string, body: Uint8Array) => Promise<MsgHdrs | undefined>;
      command?: string;
      nonce?: string;
      body?: (nonce: string) => Uint8Array;
    } = {},
  ) => {
    const nonce = opts.nonce ?? newNonce();
    const command = opts.command ?? "spawn";
    const subject = requestSubject(mesh.space, command, caller, nonce);
    const body = opts.body?.(nonce) ??
      encodeEnvelope({ v: CONTROL_VERSION, id: nonce, command, args: spawnArgs });
    const headers = opts.headers
      ? await opts.headers(subject, body)
      : await proveControlRequest(prover, subject, body);
    nc.publish(subject, body, headers ? { headers } : {});
    await waitFor(() => replies.has(nonce), { what: `the manager's answer to ${nonce}` });
    return replies.get(nonce)!;
  };
  const refused = (r: { ok: boolean; error?: { code: string; message: string } }, why: RegExp) => {
    assert.equal(r.ok, false, JSON.stringify(r));
    assert.equal(r.error?.code, "unauthenticated_request", JSON.stringify(r));
    assert.match(r.error!.message, why);
  };
  try {
    // No proof at all.
    refused(await send({ headers: () => Promise.resolve(undefined) }), /no caller proof/);
    // An agent's JWT and key (the broker would not even let it publish here; the proof alone
    // is refused too).
    const agentCreds = await mintCreds(mesh.auth, newIdentity(), "agent", {
      principal: { owner: caller.owner, actor: caller.actor },
      lifecycleUid: newLifecycleUid(),
    });
    const agentProver = await controlProver(agentCreds);
    refused(
      await send({ headers: (s, b) => proveControlRequest(agentProver, s, b) }),
      /not control-caller/,
    );
    // A control-caller of another space.
    const other = await createSpaceAuth("elsewhere");
    const foreign = await controlProver(
      await mintCreds(other, newIdentity(), "control-caller", {
        principal: { owner: caller.owner, actor: caller.actor },
      }),
    );
    refused(
      await send({ headers: (s, b) => proveControlRequest(foreign, s, b) }),
      /not signed by this space/,
    );
    // A control-caller of this space whose JWT names someone else than the subject.
    const someone = await controlProver(
      await mintCreds(mesh.auth, newIdentity(), "control-caller", {
        principal: { owner: "local", actor: "someone" },
      }),
    );
    refused(
      await send({ headers: (s, b) => proveControlRequest(someone, s, b) }),
      /another caller/,
    );
    // A valid proof of a different body (the arguments changed on the way).
    refused(
      await send({
        headers: (s) => proveControlRequest(prover, s, ENC.encode("{}")),
      }),
      /signature does not verify/,
    );
    // A valid proof from long ago.
    refused(
      await send({
        headers: (s, b) =>
          proveControlRequest(prover, s, b, Date.now() - 2 * CONTROL_PROOF_WINDOW_MS),
      }),
      /timestamp/,
    );
    // A publish ack an agent aims at the rail.
    const agentNc = await connect({
      servers: mesh.url,
      authenticator: credsAuthenticator(ENC.encode(agentCreds)),
    });
    const aimed = newNonce();
    agentNc.publish(
      `$KV.${bucketNames(mesh.space).presence}.${caller.owner}.${caller.actor}`,
      ENC.encode("{}"),
      { reply: requestSubject(mesh.space, "despawn", caller, aimed) },
    );
    await agentNc.flush();
    await agentNc.close();

    // The real thing works once; the same signed request again is a replay.
    const nonce = newNonce();
    const subject = requestSubject(mesh.space, "ps", caller, nonce);
    const psBody = encodeEnvelope({ v: CONTROL_VERSION, id: nonce, command: "ps", args: {} });
    const ok = await send({ command: "ps", nonce, body: () => psBody });
    assert.equal(ok.ok, true, JSON.stringify(ok));
    // A command with effects, sent again with its proof (a replay, or the caller's own re-send
    // on silence), runs once: every copy gets the first one's reply, and nothing is done twice.
    const sNonce = newNonce();
    const sSubject = requestSubject(mesh.space, "spawn", caller, sNonce);
    const sBody = encodeEnvelope({
      v: CONTROL_VERSION,
      id: sNonce,
      command: "spawn",
      args: { agent: "program", command: "/bin/sleep", args: ["600"], role: "replayed" },
    });
    const sHeaders = await proveControlRequest(prover, sSubject, sBody);
    nc.publish(sSubject, sBody, { headers: sHeaders });
    // A copy while the first runs, and one after it answered.
    nc.publish(sSubject, sBody, { headers: sHeaders });
    await waitFor(() => replies.has(sNonce), { timeoutMs: 40_000, what: "the spawn's answer" });
    const first = replies.get(sNonce) as unknown as { ok: boolean; data: AgentRow };
    assert.equal(first.ok, true, JSON.stringify(first));
    replies.delete(sNonce);
    nc.publish(sSubject, sBody, { headers: sHeaders });
    await waitFor(() => replies.has(sNonce), { what: "the replay's answer" });
    const again = replies.get(sNonce) as unknown as { ok: boolean; data: AgentRow };
    assert.equal(again.ok, true);
    assert.equal(again.data.lifecycleUid, first.data.lifecycleUid);
    assert.deepEqual(mgr.ps().map((a) => a.name), [first.data.name], "spawned twice");
    await mgr.despawn(first.data.name);
    void subject;

    // The aimed ack carries no proof: refused like any other unproven request.
    await waitFor(() => replies.has(aimed), { what: "the answer to the aimed publish ack" });
    refused(replies.get(aimed)!, /no caller proof/);
    assert.deepEqual(mgr.ps(), [], "something was spawned");
  } finally {
    await nc.close();
  }
});
