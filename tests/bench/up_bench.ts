/**
 * `cotal up` from cold to every component healthy, against starting a bare nats-server on the
 * same machine in the same run; and `cotal space add` to serving with a sibling space publishing
 * throughout (no acknowledged message may be lost).
 *
 *   deno run -A tests/bench/up_bench.ts [--write]
 */
import { ensureServer, startBrokerProcess } from "../../lib/broker/mod.ts";
import { spaceAdd } from "../../lib/mesh/space.ts";
import { loadSpaceAccount } from "../../lib/mesh/trust_state.ts";
import { down } from "../../lib/mesh/up.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { chatSubject, connectBroker, streamNames } from "../../lib/wire/mod.ts";
import { workspaceSecretStore } from "../../lib/workspace/mod.ts";
import { freePort, plainConfig } from "../_harness/broker.ts";
import { publishWithRetry } from "../_harness/publish.ts";
import { percentile, runContext, writeSection } from "./_report.ts";

const RUNS = 5;
const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;
const server = await ensureServer();

async function rawStart(): Promise<number> {
  const dir = await Deno.makeTempDir();
  const port = freePort();
  await Deno.writeTextFile(`${dir}/n.conf`, plainConfig({ port, storeDir: `${dir}/js` }));
  const t0 = performance.now();
  const p = await startBrokerProcess({ binary: server.path, configPath: `${dir}/n.conf` });
  const ms = performance.now() - t0;
  await p.stop();
  await Deno.remove(dir, { recursive: true });
  return ms;
}

async function cotalUp(): Promise<{ ms: number; root: string; url: string }> {
  const root = await Deno.makeTempDir({ prefix: "cotal-bench-" });
  const t0 = performance.now();
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      COTAL,
      "up",
      "--detach",
      "--json",
      "--root",
      root,
      "--port",
      `${freePort()}`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const ms = performance.now() - t0;
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
  return { ms, root, url: JSON.parse(new TextDecoder().decode(out.stdout)).url };
}

const raw: number[] = [];
const ours: number[] = [];
const adds: number[] = [];
const serving: number[] = [];
let lost = 0;
let published = 0;
for (let i = 0; i < RUNS; i++) {
  raw.push(await rawStart());
  const { ms, root, url } = await cotalUp();
  ours.push(ms);
  // space add with the default space publishing throughout.
  const account = (await loadSpaceAccount(workspaceSecretStore(root), "default"))!;
  const creds = await mintCreds(
    { space: "default", account: account.account },
    await newIdentity(),
    "operator",
    { principal: { owner: "local", actor: "bench" } },
  );
  const nc = await connectBroker({ servers: url, creds });
  const js = nc.jetstream();
  const subject = chatSubject("default", { owner: "local", actor: "bench" }, "general");
  let acked = 0;
  let stop = false;
  const pub = (async () => {
    while (!stop) {
      await publishWithRetry(js, subject, "x", `${i}-${acked}`);
      acked++;
    }
  })();
  await new Promise((r) => setTimeout(r, 50));
  const t0 = performance.now();
  await spaceAdd(root, `extra-${i}`, { onServing: () => serving.push(performance.now() - t0) });
  adds.push(performance.now() - t0);
  stop = true;
  await pub;
  const obs = await connectBroker({
    servers: url,
    creds: await mintCreds(
      { space: "default", account: account.account },
      await newIdentity(),
      "observer",
    ),
  });
  const stored = (await (await obs.jetstreamManager()).streams.info(streamNames("default").chat))
    .state.last_seq; // CHAT keeps a bounded history: count by sequence
  await obs.close();
  lost += acked - stored;
  published += acked;
  await nc.close();
  await down(root);
  await Deno.remove(root, { recursive: true });
}

const f = (ms: number) => `${ms.toFixed(0)} ms`;
const table = [
  "| measure | p50 | max | raw nats-server start p50 | ratio |",
  "|---|---:|---:|---:|---:|",
  `| \`cotal up --detach\` cold → healthy (CLI process incl. Deno start-up) | ${
    f(percentile(ours, 50))
  } | ${f(Math.max(...ours))} | ${f(percentile(raw, 50))} | ${
    (percentile(ours, 50) / percentile(raw, 50)).toFixed(1)
  }× |`,
  `| \`space add\` → serving (account signed, config reloaded in place, streams created) | ${
    f(percentile(serving, 50))
  } | ${f(Math.max(...serving))} | — | — |`,
  `| \`space add\` → its delivery and supervisor daemons ready too | ${f(percentile(adds, 50))} | ${
    f(Math.max(...adds))
  } | — | — |`,
].join("\n");
const md = `## cotal up and space add

${
  runContext("deno run -A tests/bench/up_bench.ts --write")
} nats-server ${server.version.text}, cached; ${RUNS} runs each.
Components brought up: every component \`cotal up\` starts in this build.

${table}

Sibling space published ${published} messages across the ${RUNS} reloads; acknowledged but lost: **${lost}**.
Targets: up ≤ 3 s, space add ≤ 1 s with nothing lost.`;
console.log(md);
if (Deno.args.includes("--write")) await writeSection("up", md);
