/**
 * lib/nats hot paths, side by side in one run: WebCrypto vs nkeys.js (pure-JS tweetnacl).
 *
 *   deno run -A tests/bench/nats_sign_bench.ts           # print the table
 *   deno run -A tests/bench/nats_sign_bench.ts --write   # also update docs/BENCHMARKS.md
 *
 * Not a test: timings are reported, never asserted.
 */
import * as nkeysJs from "nkeys.js";
import {
  createAccount,
  createCurve,
  createUser,
  encodeJwt,
  renderCreds,
  seedSigner,
  type Signer,
  verifySignature,
  xkeyOpen,
  XKeyPair,
  xkeySeal,
} from "../../lib/nats/mod.ts";
import { writeSection } from "./_report.ts";

const TE = new TextEncoder();
// Rounds alternate ours/theirs and the median is kept, so load from other processes on a
// shared machine hits both columns alike.
const ROUNDS = 5;
const ROUND_MS = 150;
const MIN_RUNS = 5;

interface Result {
  name: string;
  ours: number; // µs per op
  theirs: number;
}

type Op = () => unknown | Promise<unknown>;

/** Runs `op` for one round (ROUND_MS and MIN_RUNS); returns µs per op. */
async function round(op: Op): Promise<number> {
  let runs = 0;
  const start = performance.now();
  while (runs < MIN_RUNS || performance.now() - start < ROUND_MS) {
    await op();
    runs++;
  }
  return ((performance.now() - start) * 1000) / runs;
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)];
}

async function compare(name: string, ours: Op, theirs: Op): Promise<Result> {
  for (let i = 0; i < 3; i++) await ours(), await theirs(); // warm up
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    a.push(await round(ours));
    b.push(await round(theirs));
  }
  return { name, ours: median(a), theirs: median(b) };
}

/** The Signer seam over nkeys.js, so the JWT encode comparison differs only in the signer. */
function nkeysJsSigner(seed: string): Signer {
  const kp = nkeysJs.fromSeed(TE.encode(seed));
  const publicKey = kp.getPublicKey();
  return { publicKey, sign: (data) => Promise.resolve(kp.sign(data)) };
}

const account = await createAccount();
const user = await createUser();
const ours = await seedSigner(account.seed);
const theirs = nkeysJsSigner(account.seed);
const theirKp = nkeysJs.fromSeed(TE.encode(account.seed));
const nonce = crypto.getRandomValues(new Uint8Array(32));
const sig = await ours.sign(nonce);

async function credsJwt(signer: Signer): Promise<string> {
  const jwt = await encodeJwt({
    sub: user.publicKey,
    name: "bench",
    exp: Math.floor(Date.now() / 1000) + 3600,
    nats: {
      type: "user",
      issuer_account: account.publicKey,
      pub: { allow: ["cotal.s.chat.local.bench.>", "$JS.API.INFO"] },
      sub: { allow: ["_INBOX_bench.>", "cotal.s.chat.*.*.general"] },
      tags: ["owner:local", "actor:bench"],
    },
  }, signer);
  return renderCreds(jwt, user.seed);
}

const a = await createCurve();
const b = await createCurve();
const aPair = await XKeyPair.fromSeed(a.seed);
const bPair = await XKeyPair.fromSeed(b.seed);
const aJs = nkeysJs.fromCurveSeed(TE.encode(a.seed));
const bJs = nkeysJs.fromCurveSeed(TE.encode(b.seed));
const request = TE.encode("x".repeat(1500)); // about an authorization request JWT

const results: Result[] = [
  await compare(
    "ed25519 sign (32-byte nonce)",
    () => ours.sign(nonce),
    () => theirKp.sign(nonce),
  ),
  await compare(
    "ed25519 verify",
    () => verifySignature(account.publicKey, nonce, sig),
    () => nkeysJs.fromPublic(account.publicKey).verify(nonce, sig),
  ),
  await compare("user JWT encode + creds render", () => credsJwt(ours), () => credsJwt(theirs)),
  await compare(
    "xkey seal + open, seeds each time (no cache)",
    async () => {
      const sealed = await xkeySeal(request, a.seed, b.publicKey);
      await xkeyOpen(sealed, b.seed, a.publicKey);
    },
    () => {
      const sealed = nkeysJs.fromCurveSeed(TE.encode(a.seed)).seal(request, b.publicKey);
      nkeysJs.fromCurveSeed(TE.encode(b.seed)).open(sealed, a.publicKey);
    },
  ),
  await compare(
    "xkey seal + open, imported key pairs",
    async () => {
      const sealed = await xkeySeal(request, aPair, b.publicKey);
      await xkeyOpen(sealed, bPair, a.publicKey);
    },
    () => {
      const sealed = aJs.seal(request, b.publicKey);
      bJs.open(sealed, a.publicKey);
    },
  ),
];

function fmtUs(us: number): string {
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} µs`;
}
function fmtRate(us: number): string {
  return Math.round(1e6 / us).toLocaleString("en-US");
}

const table = [
  "| operation | lib/nats (WebCrypto) | nkeys.js (pure JS) | ops/s ours | ops/s nkeys.js | speed-up |",
  "|---|---:|---:|---:|---:|---:|",
  ...results.map((r) =>
    `| ${r.name} | ${fmtUs(r.ours)} | ${fmtUs(r.theirs)} | ${fmtRate(r.ours)} | ${
      fmtRate(r.theirs)
    } | ${(r.theirs / r.ours).toFixed(1)}× |`
  ),
].join("\n");

const section = [
  "## lib/nats: signing, JWT encode and xkeys",
  "",
  `Measured ${
    new Date().toISOString().slice(0, 10)
  } with Deno ${Deno.version.deno} (V8 ${Deno.version.v8}) ` +
  `on ${Deno.build.os}/${Deno.build.arch} by \`deno run -A tests/bench/nats_sign_bench.ts --write\`; ` +
  `load average ${
    Deno.loadavg()[0].toFixed(1)
  } on ${navigator.hardwareConcurrency} CPUs at the start; ` +
  `both columns in the same run, alternating over ${ROUNDS} rounds (median shown). ` +
  '"Imported key pairs" reuse an `XKeyPair` (its per-peer shared key ' +
  "is cached, as a callout replying to the same server does) and nkeys.js key pairs made once.",
  "",
  table,
].join("\n");

console.log(section);

if (Deno.args.includes("--write")) {
  await writeSection("nats-sign", section);
  console.log("\nupdated docs/BENCHMARKS.md");
}
