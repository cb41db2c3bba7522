/**
 * lib/trust hot paths: creds minted per second, and connect latency with minted creds next to
 * a no-auth connect, in one run.
 *
 *   deno run -A tests/bench/mint_bench.ts           # print the table
 *   deno run -A tests/bench/mint_bench.ts --write   # also update docs/BENCHMARKS.md
 *
 * An operator-mode broker (from serverConfig) cannot also accept unauthenticated clients, so
 * the no-auth column runs against a second nats-server (same binary, same machine), started
 * side by side; connects alternate between the columns so load hits both alike.
 *
 * Not a test: timings are reported, never asserted.
 */
import { type Authenticator, connect, credsAuthenticator } from "nats";
import { startTestBroker } from "../_harness/broker.ts";
import {
  createSpaceAuth,
  credsAuthenticatorFast,
  mintCreds,
  type MintOpts,
  newIdentity,
  newLifecycleUid,
  serverConfig,
} from "../../lib/trust/mod.ts";
import { writeSection } from "./_report.ts";

const MINT_MS = 1500;
const CONNECTS = 300;

const auth = await createSpaceAuth("bench");
const agentOpts: MintOpts = {
  principal: { owner: "local", actor: "bench" },
  lifecycleUid: newLifecycleUid(),
  allowSubscribe: ["general", "team.>", "review"],
  allowPublish: ["general", "review"],
  role: "reviewer",
};

/** Mints for MINT_MS with `parallel` mints kept in flight; returns creds per second. */
async function mintRate(parallel: number, fresh: boolean): Promise<number> {
  const id = newIdentity();
  let n = 0;
  const start = performance.now();
  const worker = async () => {
    while (performance.now() - start < MINT_MS) {
      await mintCreds(auth, fresh ? newIdentity() : id, "agent", agentOpts);
      n++;
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return (n * 1000) / (performance.now() - start);
}

for (let i = 0; i < 200; i++) await mintCreds(auth, newIdentity(), "agent", agentOpts); // warm up
const mints = [
  { name: "agent creds, one at a time, fresh identity each", rate: await mintRate(1, true) },
  { name: "agent creds, one at a time, same identity (re-sign)", rate: await mintRate(1, false) },
  { name: "agent creds, 32 in flight, fresh identity each", rate: await mintRate(32, true) },
  { name: "agent creds, 32 in flight, same identity (re-sign)", rate: await mintRate(32, false) },
];

await using authBroker = await startTestBroker({
  config: ({ port, storeDir }) => serverConfig(auth, [auth], { port, storeDir }),
});
await using openBroker = await startTestBroker();
const creds = await mintCreds(auth, newIdentity(), "agent", agentOpts);
const credsBytes = new TextEncoder().encode(creds);

type Column = { name: string; once: () => Promise<void>; samples: number[] };
const timed = (f: () => Promise<{ close(): Promise<void> }>) => async () => {
  const nc = await f();
  await nc.close();
};
// An endpoint builds its authenticator once and reuses it on every reconnect.
const fast = credsAuthenticatorFast(creds);
const slow = credsAuthenticator(credsBytes);

/**
 * INFO, CONNECT, PING, PONG on a bare socket: what the broker itself spends on a connect,
 * without any client library around it.
 */
async function rawConnect(url: string, auth?: Authenticator): Promise<void> {
  const { hostname, port } = new URL(url.replace(/^nats:/, "http:"));
  const conn = await Deno.connect({ hostname, port: Number(port) });
  const reader = conn.readable.getReader();
  const dec = new TextDecoder();
  let buf = "";
  const readUntil = async (marker: string) => {
    while (!buf.includes(marker)) buf += dec.decode((await reader.read()).value);
  };
  try {
    await readUntil("\r\n");
    const info = JSON.parse(buf.slice(5, buf.indexOf("\r\n")));
    buf = "";
    const opts = { verbose: false, pedantic: false, protocol: 1, ...(auth?.(info.nonce) ?? {}) };
    const w = conn.writable.getWriter();
    await w.write(new TextEncoder().encode(`CONNECT ${JSON.stringify(opts)}\r\nPING\r\n`));
    await readUntil("PONG\r\n");
  } finally {
    conn.close();
  }
}

const columns: Column[] = [
  {
    name: "npm:nats, no auth (plain broker)",
    once: timed(() => connect({ servers: openBroker.url, reconnect: false })),
    samples: [],
  },
  {
    name: "npm:nats, minted creds, credsAuthenticatorFast (built once)",
    once: timed(() => connect({ servers: authBroker.url, reconnect: false, authenticator: fast })),
    samples: [],
  },
  {
    name: "npm:nats, minted creds, credsAuthenticatorFast (built per connect)",
    once: timed(() =>
      connect({
        servers: authBroker.url,
        reconnect: false,
        authenticator: credsAuthenticatorFast(creds),
      })
    ),
    samples: [],
  },
  {
    name: "npm:nats, minted creds, npm:nats credsAuthenticator",
    once: timed(() => connect({ servers: authBroker.url, reconnect: false, authenticator: slow })),
    samples: [],
  },
  {
    name: "raw protocol, no auth (plain broker)",
    once: () => rawConnect(openBroker.url),
    samples: [],
  },
  {
    name: "raw protocol, minted creds (nonce signed natively)",
    once: () => rawConnect(authBroker.url, fast),
    samples: [],
  },
];
for (const c of columns) for (let i = 0; i < 10; i++) await c.once(); // warm up
for (let i = 0; i < CONNECTS; i++) {
  for (const c of columns) {
    const t = performance.now();
    await c.once();
    c.samples.push(performance.now() - t);
  }
}

function pct(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))];
}
// Each column is compared with the no-auth connect of its own kind (library or raw socket).
const baseOf = (c: Column) =>
  pct((c.name.startsWith("raw") ? columns[4] : columns[0]).samples, 0.5);
const ms = (v: number) => `${v.toFixed(2)} ms`;

const section = [
  "## lib/trust: minting and connect latency",
  "",
  `Measured ${new Date().toISOString().slice(0, 10)} with Deno ${Deno.version.deno} on ` +
  `${Deno.build.os}/${Deno.build.arch}, ${navigator.hardwareConcurrency} CPUs (load average ${
    Deno.loadavg()[0].toFixed(1)
  } at the end) by \`deno run -A tests/bench/mint_bench.ts --write\`. Targets: >= 5,000 creds/s; ` +
  "connect with minted creds <= 1.2x the no-auth connect at p50.",
  "",
  "| mint | creds/s |",
  "|---|---:|",
  ...mints.map((m) => `| ${m.name} | ${Math.round(m.rate).toLocaleString("en-US")} |`),
  "",
  `Connect (connect() resolved, i.e. CONNECT + PING/PONG answered; close not timed), ${CONNECTS} ` +
  "connects per column, interleaved:",
  "",
  "| connect | p50 | p90 | p50 vs no auth |",
  "|---|---:|---:|---:|",
  ...columns.map((c) =>
    `| ${c.name} | ${ms(pct(c.samples, 0.5))} | ${ms(pct(c.samples, 0.9))} | ${
      (pct(c.samples, 0.5) / baseOf(c)).toFixed(2)
    }x |`
  ),
  "",
  "Where the time goes (CPU profile of the mint loop): private-key import and ed25519 signing",
  "in `node:crypto` (about a quarter each), JWT encoding and GC. `jti` hashing and public-key",
  "derivation are synchronous (they were WebCrypto round trips, a third of each mint), and",
  "pairs generated in-process are remembered, so a re-sign skips a second derivation; a fresh",
  "identity still pays its own key generation. The raw-protocol rows show the broker's own cost of",
  "verifying a user JWT and nonce signature at connect; the client-side cost of",
  "credsAuthenticatorFast is ~30 µs per connect (npm:nats's credsAuthenticator: ~11 ms).",
].join("\n");

console.log(section);

if (Deno.args.includes("--write")) {
  await writeSection("mint", section);
  console.log("\nupdated docs/BENCHMARKS.md");
}
