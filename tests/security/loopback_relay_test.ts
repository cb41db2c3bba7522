/**
 * An agent on the host's network (`--net host`) or under Deno permissions alone reaches the
 * broker only through its relay too, on a loopback port (red team 12's A3: such agents held
 * their seed and connected straight to the broker, where nothing checks a reply subject, so
 * they could aim broker answers at another pair's DMs). Attacked as its accomplice on the host
 * would: the launch creds are refused by the broker; the relay's port, which anything on the
 * host can dial, lets in nobody who does not prove the launch creds, and drops a silent
 * connection; through the relay, an aimed answer is refused as for any sandboxed agent.
 */
import { launchOf, PRESENT_AGENT } from "./_present_agent.ts";
import assert from "node:assert/strict";
import { credsAuthenticator } from "nats";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { readLaunchMaterial } from "../../lib/manager/launch.ts";
import { RELAY_PROOF_DEADLINE_MS } from "../../lib/manager/sandbox/relay.ts";
import { connect } from "../../lib/nats/connect.ts";
import { isRelayedCreds, parseRelayedCreds } from "../../lib/nats/creds.ts";
import { nonceProver } from "../../lib/trust/connect_auth.ts";
import { newIdentity } from "../../lib/trust/sync_keys.ts";
import { instSubject } from "../../lib/wire/subjects.ts";
import { tempDir } from "../_harness/broker.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/**
 * One raw connection to `port`: reads the INFO, sends what `line(nonce)` makes, and returns
 * what came back until the other end closed, with how long that took (within `ms`).
 */
async function raw(
  port: number,
  line: (nonce: string) => string | undefined,
  ms = 15_000,
): Promise<{ text: string; closedAfterMs?: number }> {
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  const started = Date.now();
  const buf = new Uint8Array(65536);
  let text = "";
  const deadline = setTimeout(() => c.close(), ms);
  try {
    for (;;) {
      const n = await c.read(buf).catch(() => null);
      if (n === null) return { text };
      text += new TextDecoder().decode(buf.subarray(0, n));
      if (/^INFO [^\r\n]*\r\n/.test(text)) break;
    }
    const nonce = JSON.parse(/^INFO ([^\r\n]*)/.exec(text)![1].trim()).nonce as string;
    const send = line(nonce);
    if (send !== undefined) await c.write(new TextEncoder().encode(send));
    for (;;) {
      const n = await c.read(buf).catch(() => null);
      if (n === null) return { text, closedAfterMs: Date.now() - started };
      text += new TextDecoder().decode(buf.subarray(0, n));
    }
  } finally {
    clearTimeout(deadline);
    try {
      c.close();
    } catch {
      // Closed by the other end.
    }
  }
}

for (const mode of ["net host", "deno-only"] as const) {
  Deno.test(`security - an agent under ${mode} holds its JWT alone and reaches the broker only through a relay on a loopback port that lets in the launch creds' holder alone`, async () => {
    await using mesh = await startManagerMesh(mode === "net host" ? "loophost" : "loopdeno");
    await mesh.manager(mode === "deno-only" ? { isolation: "deno-only" } : {});
    const ctl = await mesh.control();
    const dir = await tempDir("cotal-loopback-relay-");
    await Deno.writeTextFile(`${dir}/agent.js`, PRESENT_AGENT);
    const row = await ctl.request<AgentRow>("spawn", {
      agent: "module",
      module: `${dir}/agent.js`,
      name: "hosted",
      workdir: await agentWorkdir("cotal-loopback-"),
      // Under a root supervisor deno-only runs only agents the operator trusts with root.
      ...(mode === "net host" ? { net: "host" } : { trusted: true }),
    }, { timeoutMs: 40_000 });
    assert.equal(row.sandbox?.net, mode === "net host" ? "host" : "host (deno-only)");
    const material = await readLaunchMaterial(await launchOf(mesh.root, "hosted"));
    const text = material.auth.kind === "creds" ? material.auth.creds : "";
    // Its launch creds are relayed (no seed of its own), and its broker is a loopback port of
    // its relay, not the broker's.
    assert.ok(isRelayedCreds(text), "the agent was given its seed");
    const { jwt } = parseRelayedCreds(text);
    const port = Number(new URL(material.servers[0]).port);
    assert.notEqual(port, Number(new URL(mesh.url).port));
    assert.equal(new URL(material.servers[0]).hostname, "127.0.0.1");

    // Straight to the broker with the launch creds: refused.
    const direct = await connect({
      servers: mesh.url,
      authenticator: credsAuthenticator(new TextEncoder().encode(text)),
      reconnect: false,
      maxReconnectAttempts: 0,
      timeout: 5_000,
    }).then(async (nc) => {
      await nc.close();
      return undefined;
    }, (e: Error) => e);
    assert.match(String(direct?.message), /Authorization Violation/i);

    // The relay's port with the agent's JWT but another key's proof: refused at the relay.
    const stranger = nonceProver(newIdentity().seed);
    const forged = await raw(
      port,
      (nonce) =>
        `CONNECT ${
          JSON.stringify({ jwt, sig: stranger.sign(nonce), verbose: false, protocol: 1 })
        }\r\nPING\r\n`,
    );
    assert.match(forged.text, /-ERR 'cotal relay: CONNECT does not prove the launch creds'/);
    assert.doesNotMatch(forged.text, /PONG/);
    // No proof at all: refused the same way.
    const bare = await raw(port, () => `CONNECT ${JSON.stringify({ jwt })}\r\nPING\r\n`);
    assert.match(bare.text, /-ERR 'cotal relay: CONNECT does not prove the launch creds'/);
    // A connection that says nothing is not kept (it would hold one of the agent's slots): the
    // broker's authentication timeout or the relay's deadline, whichever comes first, ends it.
    const silent = await raw(port, () => undefined, RELAY_PROOF_DEADLINE_MS + 10_000);
    assert.ok(silent.closedAfterMs !== undefined, "the relay kept a silent connection open");
    assert.ok(silent.closedAfterMs <= RELAY_PROOF_DEADLINE_MS + 2_000, `${silent.closedAfterMs}`);

    // With the launch creds, through the relay: in, and guarded (an aimed answer is refused).
    const nc = await connect({
      servers: [...material.servers],
      authenticator: credsAuthenticator(new TextEncoder().encode(text)),
      reconnect: false,
      maxReconnectAttempts: 0,
      timeout: 5_000,
    });
    const closed = nc.closed();
    await nc.flush();
    const pair = instSubject(
      mesh.space,
      { owner: "local", actor: "bob" },
      { owner: "local", actor: "alice" },
    );
    nc.publish("$JS.API.INFO", new Uint8Array(), { reply: pair });
    const err = await Promise.race([
      closed,
      new Promise((r) => setTimeout(() => r("still open"), 10_000)),
    ]);
    assert.match(String(err), /cotal relay: .*reply/i);

    // The agent itself is on the mesh through the same relay.
    const rows = (await ctl.request<{ agents: AgentRow[] }>("ps")).agents;
    assert.equal(rows.find((a) => a.name === "hosted")?.status, "running");
  });
}
