/**
 * Red team 48: a user-mode agent takes another connection's inbox through its relay.
 *
 * In user mode the relay (lib/manager/sandbox/protocol_guard.ts) rewrites the agent's CONNECT:
 * the sentinel JWT, the sentinel's nonce signature, the agent's bearer, and `name` set to the
 * agent's own inbox id, because the callout grants `_INBOX_<name>.>` from the CONNECT's name.
 * The guard reads and sets the lowercase keys only, and passes every other key through; but
 * nats-server decodes CONNECT with Go's encoding/json, which matches keys case-insensitively
 * and lets the last duplicate win. An agent that sends `"NAME": "<victim id>"` after its
 * `name` keeps it past the guard (`{"name": <own>, ..., "NAME": <victim>}`), the broker takes
 * the victim's id as the name, and the callout admits the agent with `_INBOX_<victim>.>`: every
 * reply aimed at the victim's inbox (JetStream API answers, request replies) reaches it.
 *
 * The test drives the real guard with the real broker and the real auth-service callout over
 * a raw socket, as the relay does. Passes when the defence holds: the agent cannot subscribe
 * under another id's inbox.
 */
import assert from "node:assert/strict";
import { connect } from "nats";
import { ProtocolGuard } from "../../lib/manager/sandbox/protocol_guard.ts";
import { agentDescriptorCreds } from "../../lib/manager/agent_bearers.ts";
import { parseCreds } from "../../lib/nats/mod.ts";
import {
  credsAuthenticatorFast,
  mintCreds,
  newIdentity,
  nonceProver,
} from "../../lib/trust/mod.ts";
import { ask, OPEN_GRANT, startRt48, uid } from "./_rt48.ts";
import type { AgentPlan } from "../../lib/manager/managed_agent.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** One relayed connection: the broker's answer to what the agent sent, up to its PONG. */
async function relayed(
  brokerPort: number,
  guard: ProtocolGuard,
  agentSends: (info: Record<string, unknown>) => string,
  probe?: () => Promise<void>,
): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: brokerPort });
  let text = "";
  const buf = new Uint8Array(65_536);
  const readUntil = async (pred: (t: string) => boolean) => {
    const deadline = Date.now() + 10_000;
    while (!pred(text) && Date.now() < deadline) {
      const n = await Promise.race([
        conn.read(buf),
        new Promise<null>((r) => setTimeout(() => r(null), deadline - Date.now())),
      ]);
      if (n === null) break;
      text += dec.decode(buf.subarray(0, n));
    }
  };
  try {
    await readUntil((t) => t.includes("\r\n"));
    const infoLine = text.slice(0, text.indexOf("\r\n"));
    text = "";
    guard.serverInfo(infoLine);
    const info = JSON.parse(infoLine.slice(5));
    const step = guard.push(enc.encode(agentSends(info)));
    if (step.refused) return `relay refused: ${step.refused}`;
    for (const piece of step.out) await conn.write(piece);
    await readUntil((t) => t.includes("PONG") || t.includes("-ERR"));
    if (probe && !text.includes("-ERR")) {
      await probe();
      const s2 = guard.push(enc.encode("PING\r\n"));
      for (const piece of s2.out) await conn.write(piece);
      await readUntil((t) => t.split("PONG").length > 2 || t.includes("MSG "));
    }
    return text;
  } finally {
    conn.close();
  }
}

Deno.test("redteam48 connect case - a relayed CONNECT with an upper-case NAME cannot take another inbox", async () => {
  const t = await startRt48();
  try {
    const { mesh, svc } = t;
    const url = svc.discovery.url;
    // The attacker's agent, as the supervisor sets it up: a row, a bearer, a launch JWT.
    const me = newIdentity();
    const life = uid();
    assert.equal(
      (await ask(
        url,
        { op: "grant", actor: "mallory", lifecycleUid: life, grant: OPEN_GRANT },
        t
          .supervisor,
      )).status,
      200,
    );
    const b = await ask(url, { op: "bearer", actor: "mallory", lifecycleUid: life }, t.supervisor);
    assert.equal(b.status, 200);
    const bearer = b.body.token as string;
    const launch = await parseCreds(
      await agentDescriptorCreds({
        identity: me,
        principal: { owner: t.owner, actor: "mallory" },
      } as unknown as AgentPlan),
    );
    const sentinel = await parseCreds(mesh.callout.sentinelCreds);
    const sentinelProver = nonceProver(sentinel.seed);
    const guard = () =>
      new ProtocolGuard({
        inboxPrefix: `_INBOX_${me.id}`,
        proveKey: nonceProver(me.seed),
        bearer: {
          sentinelJwt: sentinel.jwt,
          sign: (n) => sentinelProver.sign(n),
          current: () => bearer,
          connId: me.id,
        },
      });
    // The victim: another agent's inbox id (its public key, as its launch JWT names it).
    const victim = newIdentity().id;
    const connectLine = (extra: Record<string, unknown>) => (info: Record<string, unknown>) =>
      `CONNECT ${
        JSON.stringify({
          verbose: false,
          pedantic: false,
          protocol: 1,
          headers: true,
          jwt: launch.jwt,
          sig: nonceProver(me.seed).sign(String(info.nonce)),
          name: "mallory",
          ...extra,
        })
      }\r\nSUB _INBOX_${victim}.> 1\r\nPING\r\n`;

    // Control: with the lowercase name only, the victim's inbox is refused.
    const plain = await relayed(mesh.broker.port, guard(), connectLine({}));
    console.log(`plain CONNECT: ${plain.replace(/\r\n/g, " | ").slice(0, 300)}`);
    assert.match(plain, /Permissions Violation/);

    // The attack: NAME (upper case) after name.
    const publisher = await connect({
      servers: mesh.broker.url,
      authenticator: credsAuthenticatorFast(
        await mintCreds(mesh.auth, newIdentity(), "supervisor", {
          principal: { owner: "local", actor: "manager_probe" },
        }),
      ),
    });
    try {
      const got = await relayed(
        mesh.broker.port,
        guard(),
        connectLine({ NAME: victim }),
        async () => {
          // A reply aimed at the victim's inbox (as the broker sends a JetStream API answer).
          publisher.publish(`_INBOX_${victim}.rt48`, enc.encode("for the victim only"));
          await publisher.flush();
        },
      );
      console.log(`NAME CONNECT: ${got.replace(/\r\n/g, " | ").slice(0, 400)}`);
      const events = svc.events.filter((e) => e.event === "callout").slice(-1);
      console.log(`callout: ${JSON.stringify(events)}`);
      assert.ok(
        !got.includes("MSG _INBOX_") && /Permissions Violation|relay refused|-ERR/.test(got),
        "the agent subscribed under another connection's inbox and read a reply meant for it",
      );
    } finally {
      await publisher.close();
    }
  } finally {
    await t.close();
  }
});
