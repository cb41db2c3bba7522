/**
 * Connect latency through the auth callout against static minted creds, on the same broker in
 * the same run, plus sustained callouts per second and the auth-service daemon's memory.
 *
 *   deno run -A tests/bench/callout_bench.ts           # print the table
 *   deno run -A tests/bench/callout_bench.ts --write   # also update docs/BENCHMARKS.md
 *
 * The daemon runs as a real process under its permission row (as in the service tests). Not a
 * test: timings are reported, never asserted.
 */
import { connect, type NatsConnection } from "nats";
import { loadServiceKeys } from "../../lib/auth/callout_store.ts";
import { freshReadStore } from "../../lib/auth/fresh_reads.ts";
import { createActorLedger } from "../../lib/auth/ledger.ts";
import { authServicePaths } from "../../lib/auth/service_files.ts";
import { validateUserToken } from "../../lib/auth/validate.ts";
import {
  createCurve,
  createKeyPair,
  createUser,
  decodeJwt,
  encodeJwt,
  seedSigner,
  type Signer,
  xkeyOpen,
  XKeyPair,
  xkeySeal,
} from "../../lib/nats/mod.ts";
import { permissionsFor } from "../../lib/trust/profiles.ts";
import { syncSigner } from "../../lib/trust/sync_keys.ts";
import { credsAuthenticatorFast, mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { FsSecretStore, workspaceSecretStore } from "../../lib/workspace/fs_secret_store.ts";
import { natsServerPath } from "../_harness/broker.ts";
import { startServiceMesh } from "../auth/_service_mesh.ts";
import { nonce } from "../auth/_callout_mesh.ts";
import { writeSection } from "./_report.ts";

const TE = new TextEncoder();
const TD = new TextDecoder();
const ROUNDS = 10;
const PER_ROUND = 40;
const SUSTAIN_MS = 5_000;
const WORKERS = 16;

const mesh = await startServiceMesh();
const svc = await mesh.start();
const row = await mesh.grant("bench", { sub: ["general"], pub: ["general"] });
const exchange = await mesh.exchange(svc, { idpToken: await mesh.idp.sign(), actor: "bench" });
const bearer = exchange.body.token as string;
// The callout admits 64 connects a minute per principal (CALLOUT_CONNECT_RATE): the measured
// connects rotate over enough principals that none is refused.
const PRINCIPALS = 128;
const bearers: string[] = [];
for (let i = 0; i < PRINCIPALS; i++) {
  await mesh.grant(`bench${i}`, { sub: ["general"], pub: ["general"] });
  const x = await mesh.exchange(svc, { idpToken: await mesh.idp.sign(), actor: `bench${i}` });
  bearers.push(x.body.token as string);
}
let nextBearer = 0;
const rotated = () => bearers[nextBearer++ % bearers.length];
const identity = newIdentity();
const staticCreds = await mintCreds(mesh.auth, identity, "agent", {
  principal: { owner: row.owner, actor: row.actor },
  lifecycleUid: row.lifecycleUid,
  allowSubscribe: row.allowSubscribe,
  allowPublish: row.allowPublish,
});
const staticAuth = credsAuthenticatorFast(staticCreds);
const issuerResolver = mesh.issuer.resolver();
const sentinelAuth = credsAuthenticatorFast(mesh.callout.sentinelCreds);

function connectStatic(): Promise<NatsConnection> {
  return connect({
    servers: mesh.broker.url,
    authenticator: staticAuth,
    inboxPrefix: `_INBOX_${identity.id}`,
    reconnect: false,
  });
}

function connectCallout(): Promise<NatsConnection> {
  const name = nonce();
  return connect({
    servers: mesh.broker.url,
    authenticator: sentinelAuth,
    token: rotated(),
    name,
    inboxPrefix: `_INBOX_${name}`,
    reconnect: false,
  });
}

/** ms from dial to the first PONG (npm:nats resolves connect after its initial ping). */
async function timeConnect(dial: () => Promise<NatsConnection>): Promise<number> {
  const t0 = performance.now();
  const nc = await dial();
  const ms = performance.now() - t0;
  await nc.close();
  return ms;
}

function pct(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

for (let i = 0; i < 20; i++) await timeConnect(connectStatic), await timeConnect(connectCallout);
const sequentialFrom = svc.events.length;
const staticMs: number[] = [];
const calloutMs: number[] = [];
// Rounds alternate, so load from other processes on a shared machine hits both columns alike.
for (let r = 0; r < ROUNDS; r++) {
  for (let i = 0; i < PER_ROUND; i++) staticMs.push(await timeConnect(connectStatic));
  for (let i = 0; i < PER_ROUND; i++) calloutMs.push(await timeConnect(connectCallout));
}

const sequentialMs = svc.events.slice(sequentialFrom)
  .filter((e) => e.event === "callout" && typeof e.ms === "number").map((e) => e.ms as number);

/** CPU seconds (user + system) a process has used so far. */
async function cpuSec(pid: number | "self"): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
const pids = { daemon: svc.child.pid, broker: mesh.broker.process.pid } as const;
const cpuBefore = {
  daemon: await cpuSec(pids.daemon),
  broker: await cpuSec(pids.broker),
  client: await cpuSec("self"),
};

// Sustained: WORKERS clients connect and close back to back through the callout.
const sustainFrom = svc.events.length;
let done = 0;
let failed = 0;
const until = performance.now() + SUSTAIN_MS;
const t0 = performance.now();
await Promise.all(Array.from({ length: WORKERS }, async () => {
  while (performance.now() < until) {
    try {
      const nc = await connectCallout();
      done++;
      await nc.close();
    } catch {
      failed++;
    }
  }
}));
const elapsed = (performance.now() - t0) / 1000;
const cpuMs = {
  daemon: ((await cpuSec(pids.daemon)) - cpuBefore.daemon) * 1000,
  broker: ((await cpuSec(pids.broker)) - cpuBefore.broker) * 1000,
  client: ((await cpuSec("self")) - cpuBefore.client) * 1000,
};
const rate = done / elapsed;
await new Promise((r) => setTimeout(r, 300));
const decided = svc.events.slice(sustainFrom).filter((e) => e.event === "callout").length;
const calloutRate = decided / elapsed;
const ms = svc.events.slice(sustainFrom).filter((e) =>
  e.event === "callout" && typeof e.ms === "number"
).map((e) => e.ms as number);

const status = await Deno.readTextFile(`/proc/${svc.child.pid}/status`);
const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
const rssMb = kb("VmRSS") / 1024;
const hwmMb = kb("VmHWM") / 1024;
const anonMb = kb("RssAnon") / 1024;
const fileMb = kb("RssFile") / 1024;
const version = new TextDecoder().decode(
  (await new Deno.Command(await natsServerPath(), { args: ["--version"] }).output()).stdout,
).trim();

// The responder's steps in this process, on a realistic request: where a decision's CPU goes.
const steps = await responderSteps();

await svc.stop();
await mesh.close();

async function responderSteps(): Promise<[string, number][]> {
  const server = await createKeyPair("server");
  const serverXkey = await createCurve();
  const user = await createUser();
  const serverSigner = await seedSigner(server.seed);
  const xkp = await XKeyPair.fromSeed(mesh.callout.xkey.seed);
  const signer = (seed: string): Signer => {
    const s = syncSigner(seed);
    return { publicKey: s.publicKey, sign: (d) => Promise.resolve(s.sign(d)) };
  };
  const keys = await loadServiceKeys(workspaceSecretStore(mesh.root), mesh.space);
  const userSigner = signer(keys.dataAccount.signingSeed);
  const responseSigner = signer(mesh.callout.account.signingSeed);
  const ledger = createActorLedger({
    space: mesh.space,
    store: freshReadStore(new FsSecretStore(authServicePaths(mesh.root, mesh.space).stateDir)),
  });
  const request = await encodeJwt({
    sub: mesh.callout.account.pub,
    aud: "nats-authorization-request",
    nats: {
      type: "authorization_request",
      server_id: { name: "n", host: "h", id: server.publicKey, xkey: serverXkey.publicKey },
      user_nkey: user.publicKey,
      client_info: {},
      connect_opts: { protocol: 1, auth_token: bearer, name: nonce() },
    },
  }, serverSigner);
  const sealed = await xkeySeal(TE.encode(request), serverXkey.seed, mesh.callout.xkey.pub);
  const total = new Map<string, number>();
  const N = 300;
  for (let i = 0; i < N + 30; i++) {
    let t = performance.now();
    const lap = (name: string) => {
      if (i >= 30) total.set(name, (total.get(name) ?? 0) + performance.now() - t);
      t = performance.now();
    };
    const text = TD.decode(await xkeyOpen(sealed, xkp, serverXkey.publicKey));
    lap("xkey open");
    const req = await decodeJwt(text, { type: "authorization_request" });
    lap("request JWT decode + verify");
    const b = await validateUserToken(req.nats.connect_opts.auth_token!, {
      resolver: issuerResolver,
      space: mesh.space,
    });
    lap("bearer validation");
    const r = await ledger.authorizeBearer(b);
    lap("ledger read + connect gate");
    const perms = permissionsFor(mesh.space, "agent", {
      connId: req.nats.connect_opts.name!,
      principal: { owner: b.owner, actor: b.actor },
      lifecycleUid: r.lifecycleUid,
      allowSubscribe: r.allowSubscribe,
      allowPublish: r.allowPublish,
    });
    lap("ACL (permissionsFor)");
    const jwt = await encodeJwt({
      sub: user.publicKey,
      exp: b.exp,
      nats: { type: "user", issuer_account: keys.dataAccount.pub, pub: perms.pub, sub: perms.sub },
    }, userSigner);
    lap("user JWT encode + sign");
    const res = await encodeJwt({
      sub: user.publicKey,
      aud: server.publicKey,
      nats: { type: "authorization_response", jwt, issuer_account: mesh.callout.account.pub },
    }, responseSigner);
    lap("response JWT encode + sign");
    await xkeySeal(TE.encode(res), xkp, serverXkey.publicKey);
    lap("xkey seal");
  }
  return [...total].map(([k, v]) => [k, (v / N) * 1000]);
}

const f = (n: number) => n.toFixed(2);
const table = [
  "| connect | p50 | p99 | mean | samples |",
  "|---|---:|---:|---:|---:|",
  `| static minted creds | ${f(pct(staticMs, 50))} ms | ${f(pct(staticMs, 99))} ms | ${
    f(staticMs.reduce((a, b) => a + b, 0) / staticMs.length)
  } ms | ${staticMs.length} |`,
  `| auth callout (sentinel + bearer) | ${f(pct(calloutMs, 50))} ms | ${
    f(pct(calloutMs, 99))
  } ms | ${f(calloutMs.reduce((a, b) => a + b, 0) / calloutMs.length)} ms | ${calloutMs.length} |`,
  `| callout overhead (p50 difference) | ${f(pct(calloutMs, 50) - pct(staticMs, 50))} ms | | | |`,
  `| of which the responder's own time per decision | ${f(pct(sequentialMs, 50))} ms | ${
    f(pct(sequentialMs, 99))
  } ms | | ${sequentialMs.length} |`,
].join("\n");
const sustain = [
  "| sustained, " + `${WORKERS} clients for ${SUSTAIN_MS / 1000} s` + " | value |",
  "|---|---:|",
  `| connects through the callout | ${Math.round(rate).toLocaleString("en-US")}/s |`,
  `| callout decisions in the daemon | ${Math.round(calloutRate).toLocaleString("en-US")}/s |`,
  `| failed connects | ${failed} |`,
  `| responder time per decision (p50 / p99) | ${f(pct(ms, 50))} / ${f(pct(ms, 99))} ms |`,
  `| CPU per connect: daemon / broker / bench client | ${f(cpuMs.daemon / done)} / ${
    f(cpuMs.broker / done)
  } / ${f(cpuMs.client / done)} ms |`,
  `| auth-service RSS after the run (peak) | ${rssMb.toFixed(1)} MB (${hwmMb.toFixed(1)} MB) |`,
  `| of which anonymous / file-backed (the deno binary) | ${anonMb.toFixed(1)} / ${
    fileMb.toFixed(1)
  } MB |`,
].join("\n");

const stepTable = [
  "| responder step (in-process, one request) | µs |",
  "|---|---:|",
  ...steps.map(([k, us]) => `| ${k} | ${us.toFixed(0)} |`),
  `| total | ${steps.reduce((a, [, us]) => a + us, 0).toFixed(0)} |`,
].join("\n");

const section = [
  "## Auth callout: connect latency, throughput, daemon memory",
  "",
  `Measured ${new Date().toISOString().slice(0, 10)} with Deno ${Deno.version.deno} on ` +
  `${Deno.build.os}/${Deno.build.arch}, ${navigator.hardwareConcurrency} CPUs (load average ` +
  `${Deno.loadavg()[0].toFixed(1)} at the end), ${version || "nats-server"}, by ` +
  "`deno run -A tests/bench/callout_bench.ts --write`. One broker, one run: the static and " +
  `callout columns alternate over ${ROUNDS} rounds of ${PER_ROUND} connects (connect = dial to ` +
  "first PONG, then close). The auth service is the real daemon process under its permission " +
  "row; the bench client, the broker and the daemon share the machine.",
  "",
  table,
  "",
  sustain,
  "",
  stepTable,
  "",
  "Targets: callout p50 within static p50 + 3 ms; at least 200 callouts/s on 2 cores; " +
  "auth-service at most 80 MB RSS.",
].join("\n");

console.log(section);

if (Deno.args.includes("--write")) {
  await writeSection("callout", section);
  console.log("\nupdated docs/BENCHMARKS.md");
}
