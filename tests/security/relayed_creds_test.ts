/**
 * A sandboxed agent never holds its own seed: its launch file carries its JWT and a stand-in
 * seed of another key, and its relay signs each connection's broker nonce with the real one.
 * Attacked as a hostile agent with an accomplice outside would: the launch creds, taken out of
 * the sandbox, are refused by the broker however they are presented; a second agent presenting
 * the first one's JWT through its own relay is stopped there; a client that sends no JWT at all
 * gets nothing signed. The agent's own programs,
 * using their launch creds with a stock NATS client, still connect through the relay.
 */
import { launchOf, PRESENT_AGENT } from "./_present_agent.ts";
import assert from "node:assert/strict";
import { credsAuthenticator, jwtAuthenticator } from "nats";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { readLaunchMaterial } from "../../lib/manager/launch.ts";
import { connect } from "../../lib/nats/connect.ts";
import { isRelayedCreds, parseCreds, parseRelayedCreds } from "../../lib/nats/creds.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/** Tries its own relay with the victim's creds, with no proof, and with its own creds. */
const THIEF = `
import { connect, credsAuthenticator, jwtAuthenticator } from "nats";

export async function run(ctx) {
  const victim = @@VICTIM@@;
  const m = ctx.launch;
  const report = {};
  const within = (p, ms, what) =>
    Promise.race([p, new Promise((r) => setTimeout(() => r(what), ms))]);
  async function attempt(name, authenticator) {
    try {
      const nc = await within(
        connect({ servers: m.servers, authenticator, reconnect: false, maxReconnectAttempts: 0 }),
        8000,
        undefined,
      );
      if (!nc) throw new Error("connect timed out");
      await within(nc.flush(), 3000);
      report[name] = "connected";
      await within(nc.close(), 2000);
    } catch (err) {
      report[name] = "refused: " + (err?.message ?? err);
    }
  }
  const enc = (t) => new TextEncoder().encode(t);
  await attempt("victimCreds", credsAuthenticator(enc(victim.creds)));
  await attempt("victimJwt", jwtAuthenticator(victim.jwt));
  await attempt("ownCreds", credsAuthenticator(enc(m.auth.creds)));
  // Raw: a CONNECT with no JWT at all.
  for (const [name, line] of [["noJwt", 'CONNECT {"verbose":false,"protocol":1}\\r\\nPING\\r\\n']]) {
    try {
      const c = await Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(m.servers[0]).port) });
      const buf = new Uint8Array(65536);
      let text = "";
      const first = await within(c.read(buf), 5000, null);
      if (first) text += new TextDecoder().decode(buf.subarray(0, first));
      await c.write(enc(line));
      for (;;) {
        const n = await within(c.read(buf), 5000, null);
        if (n === null) break;
        text += new TextDecoder().decode(buf.subarray(0, n));
      }
      report[name] = text.replace(/^INFO [^\\n]*\\n/, "");
      c.close();
    } catch (err) {
      report[name] = "threw: " + err.message;
    }
  }
  await ctx.endpoint();
  await Deno.writeTextFile(ctx.agentDir + "/report.json", JSON.stringify(report));
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

Deno.test("security - a sandboxed agent holds its JWT alone: its launch creds connect nowhere but through its own relay, and no relay proves another agent's key", async () => {
  await using mesh = await startManagerMesh("relayedcreds");
  await mesh.manager();
  const ctl = await mesh.control();
  const dir = await tempDir("cotal-relayed-creds-");
  await Deno.writeTextFile(`${dir}/victim.js`, PRESENT_AGENT);
  await ctl.request<AgentRow>("spawn", {
    agent: "module",
    module: `${dir}/victim.js`,
    name: "victim",
    workdir: await agentWorkdir("cotal-relayed-victim-"),
  }, { timeoutMs: 40_000 });
  const material = await readLaunchMaterial(await launchOf(mesh.root, "victim"));
  assert.equal(material.auth.kind, "creds");
  const text = material.auth.kind === "creds" ? material.auth.creds : "";

  // The launch file holds the JWT and a stand-in: not the JWT's key.
  assert.ok(isRelayedCreds(text));
  const { jwt } = parseRelayedCreds(text);
  await assert.rejects(parseCreds(text), /does not belong to the JWT's subject/);

  // An accomplice outside the sandbox with the launch file: refused however it is presented.
  for (
    const [what, authenticator] of [
      ["the launch creds", credsAuthenticator(new TextEncoder().encode(text))],
      ["the JWT with no signature", jwtAuthenticator(jwt)],
    ] as const
  ) {
    const err = await connect({
      servers: mesh.url,
      authenticator,
      reconnect: false,
      maxReconnectAttempts: 0,
      timeout: 5_000,
    }).then(async (nc) => {
      await nc.close();
      return undefined;
    }, (e: Error) => e);
    assert.ok(err, `${what} connected straight to the broker`);
    assert.match(String(err.message), /Authorization Violation/i, what);
  }

  // Another agent, through its own relay, with the victim's creds or JWT: stopped at the relay.
  await Deno.writeTextFile(
    `${dir}/thief.js`,
    THIEF.replace("@@VICTIM@@", JSON.stringify({ creds: text, jwt })),
  );
  const work = await agentWorkdir("cotal-relayed-thief-");
  await ctl.request<AgentRow>("spawn", {
    agent: "module",
    module: `${dir}/thief.js`,
    name: "thief",
    workdir: work,
  }, { timeoutMs: 40_000 });
  await waitFor(() => jsonFileReady(`${work}/report.json`), {
    timeoutMs: 60_000,
    what: "the thief's report",
  });
  const r = JSON.parse(await Deno.readTextFile(`${work}/report.json`)) as Record<string, string>;
  assert.match(r.victimCreds, /cotal relay: CONNECT names the JWT of another key/, r.victimCreds);
  assert.match(r.victimJwt, /cotal relay: CONNECT names the JWT of another key/, r.victimJwt);
  assert.match(r.noJwt, /^-ERR 'cotal relay: CONNECT carries no user JWT'/, r.noJwt);
  // Its own launch creds, stand-in seed and all, with a stock client: the relay proves its key.
  assert.equal(r.ownCreds, "connected");
  // Both agents stayed on the mesh.
  const rows = (await ctl.request<{ agents: AgentRow[] }>("ps")).agents;
  for (const name of ["victim", "thief"]) {
    assert.equal(rows.find((a) => a.name === name)?.status, "running", name);
  }
  assert.equal(decodeJwtUnverified(jwt).nats.type, "user");
});
