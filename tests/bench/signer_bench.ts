/**
 * Minting through `cotal-signer` against minting in process, on one broker in one run: the
 * latency of one agent cred (p50, p99) and the sustained rate with 64 requests in flight. The
 * signer is a real process under its permission row; the caller is a supervisor's cred.
 *
 *   deno run -A tests/bench/signer_bench.ts           # print the table
 *   deno run -A tests/bench/signer_bench.ts --write   # also update docs/BENCHMARKS.md
 *
 * Rounds alternate between the columns. Not a test: timings are reported, never asserted.
 */
import { percentile, runContext, writeSection } from "./_report.ts";
import { remoteSigner } from "../../lib/signer/mod.ts";
import {
  type CredentialSigner,
  localSigner,
  mintCreds,
  mintWith,
  newIdentity,
} from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { spaceKeyHex } from "../../lib/workspace/keys.ts";
import { startDeliverySpace, startExecutable } from "../delivery/_helpers.ts";

const ROUNDS = 5;
const LATENCY_PER_ROUND = 200;
const RATE_PER_ROUND = 1_500;
const IN_FLIGHT = 64;

await using s = await startDeliverySpace({ prefix: "signbench" });
const port = new URL(s.url).port;
const daemon = startExecutable("cotal-signer", {
  root: s.root,
  broker: [`127.0.0.1:${port}`],
  spaceKey: `space.${spaceKeyHex(s.space)}`,
}, ["--space", s.space, "--server", s.url, "--root", s.root]);
await daemon.waitForLine(/cotal-signer up for space/);
const principal = { owner: "local", actor: "manager_bench" };
const supCreds = await mintCreds(s.auth, newIdentity(), "supervisor", { principal });
const nc = await connectBroker({ servers: s.url, creds: supCreds });
const remote = remoteSigner({ nc, space: s.space, principal, creds: () => supCreds });
const local = localSigner(s.auth);
const agentOpts = () => ({
  principal: { owner: "local", actor: "worker" },
  lifecycleUid: newLifecycleUid(),
  allowSubscribe: ["general"],
  allowPublish: ["general"],
});
const mint = (signer: CredentialSigner) => mintWith(signer, newIdentity(), "agent", agentOpts());

const columns = [
  { name: "in process (localSigner)", signer: local, lat: [] as number[], rate: [] as number[] },
  {
    name: "cotal-signer (remoteSigner)",
    signer: remote,
    lat: [] as number[],
    rate: [] as number[],
  },
];
for (const c of columns) for (let i = 0; i < 100; i++) await mint(c.signer);
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < LATENCY_PER_ROUND; i++) {
    for (const c of columns) {
      const t0 = performance.now();
      await mint(c.signer);
      c.lat.push(performance.now() - t0);
    }
  }
  for (let k = 0; k < columns.length; k++) {
    const c = columns[(round + k) % columns.length];
    // Under the signer's per-caller rate (1,000/s past a 2,000 burst), as a supervisor is.
    await new Promise((r) => setTimeout(r, 2_000));
    let sent = 0;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (sent < RATE_PER_ROUND) {
        sent++;
        await mint(c.signer);
      }
    }));
    c.rate.push((RATE_PER_ROUND * 1000) / (performance.now() - t0));
  }
}
remote.close();
await nc.close();
daemon.kill();
await daemon.exited;

const [l, r] = columns;
const p50 = (c: typeof l) => percentile(c.lat, 50);
const p99 = (c: typeof l) => percentile(c.lat, 99);
const rate = (c: typeof l) => percentile(c.rate, 50);
const md = `## lib/signer: minting through cotal-signer vs in process

${
  runContext("deno run -A tests/bench/signer_bench.ts --write")
} One operator-mode broker; the signer is a real process under its \`cotal-signer\` row and the caller a supervisor's cred; each mint is an agent cred (grants for one channel) rendered with the caller's own seed. ${ROUNDS} rounds of ${LATENCY_PER_ROUND} one-at-a-time mints per column (interleaved), then ${
  RATE_PER_ROUND.toLocaleString("en-US")
} mints with ${IN_FLIGHT} in flight (order rotating); medians of rounds.

| measure | ${l.name} | ${r.name} | difference |
|---|---:|---:|---:|
| one agent cred, p50 | ${p50(l).toFixed(2)} ms | ${p50(r).toFixed(2)} ms | +${
  (p50(r) - p50(l)).toFixed(2)
} ms |
| one agent cred, p99 | ${p99(l).toFixed(2)} ms | ${p99(r).toFixed(2)} ms | +${
  (p99(r) - p99(l)).toFixed(2)
} ms |
| creds/s, ${IN_FLIGHT} in flight | ${Math.round(rate(l)).toLocaleString("en-US")} | ${
  Math.round(rate(r)).toLocaleString("en-US")
} | ${(rate(r) / rate(l)).toFixed(2)}× |

Targets (issue 13): p50 within 2 ms of in-process minting, ≥ 1,000 creds/s sustained through the signer.`;
console.log(md);
if (Deno.args.includes("--write")) await writeSection("signer", md);
