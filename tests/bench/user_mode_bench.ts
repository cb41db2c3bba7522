/**
 * User mode against static creds, on one broker in one run: spawn-to-presence of the built-in
 * task runner (bwrap, pty, relay, readiness wait) under a Manager that mints its agents' creds,
 * and under one whose agents are admitted by the auth callout on bearers from the real
 * auth-service daemon; and the supervisor's bearer round trip (`POST /agents`, op `bearer`)
 * against a broker round trip of the same connection's kind. The modes alternate by round.
 *
 *   deno run -A tests/bench/user_mode_bench.ts [--write]
 */
import { Manager } from "../../lib/manager/manager.ts";
import {
  mintCreds,
  newIdentity,
  proveAgentBearerRequest,
  requestProver,
} from "../../lib/trust/mod.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { testBwrap } from "../manager/_agent_fixture.ts";
import { startServiceMesh } from "../auth/_service_mesh.ts";
import { percentile, runContext, writeSection } from "./_report.ts";

const ROUNDS = 6;
const SPAWNS_PER_ROUND = 2;
const BEARER_RUNS = 200;

await testBwrap();
const mesh = await startServiceMesh({ streams: true });
const svc = await mesh.start();
const latency: Record<"static" | "user", number[]> = { static: [], user: [] };
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of round % 2 ? ["user", "static"] as const : ["static", "user"] as const) {
      const manager = new Manager({
        space: mesh.space,
        servers: mesh.broker.url,
        workspaceRoot: mesh.root,
        layout: { machineHome: `${mesh.root}/home/.cotal` },
        ...(mode === "user" ? { userAuth: { url: svc.discovery.url } } : {}),
        log: () => {},
      });
      await manager.start();
      try {
        for (let i = 0; i < SPAWNS_PER_ROUND; i++) {
          const name = `b${round}x${i}${mode[0]}`;
          const t0 = performance.now();
          await manager.spawn({
            agent: "task-runner",
            name,
            command: "/bin/cat",
          });
          latency[mode].push(performance.now() - t0);
          await manager.despawn(name);
        }
      } finally {
        await manager.stop();
      }
    }
  }

  // The supervisor's bearer round trip, against an HTTP round trip to the same server's /health.
  const creds = await mintCreds(mesh.auth, newIdentity(), "supervisor", {
    principal: { owner: "local", actor: "manager_bench" },
  });
  const prover = await requestProver(creds);
  const lifecycleUid = newLifecycleUid();
  const post = async (body: Record<string, unknown>) => {
    const bytes = new TextEncoder().encode(JSON.stringify({
      caller: { owner: "local", actor: "manager_bench" },
      nonce: crypto.randomUUID(),
      ...body,
    }));
    const headers = await proveAgentBearerRequest(prover, bytes);
    headers.set("content-type", "application/json");
    const res = await fetch(`${svc.discovery.url}/agents`, {
      method: "POST",
      headers,
      body: bytes,
    });
    if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
    return await res.json();
  };
  await post({
    op: "grant",
    actor: "bench",
    lifecycleUid,
    grant: { subscribe: [], allowSubscribe: [], allowPublish: [] },
  });
  const bearer: number[] = [];
  const health: number[] = [];
  for (let i = 0; i < BEARER_RUNS; i++) {
    // Under the supervisor's rate (20 a second past a burst of 256).
    if (i % 100 === 99) await new Promise((r) => setTimeout(r, 5_000));
    let t0 = performance.now();
    await post({ op: "bearer", actor: "bench", lifecycleUid });
    bearer.push(performance.now() - t0);
    t0 = performance.now();
    await (await fetch(`${svc.discovery.url}/health`)).body?.cancel();
    health.push(performance.now() - t0);
  }

  const f = (n: number) => n.toFixed(0);
  const f2 = (n: number) => n.toFixed(2);
  const s50 = percentile(latency.static, 50);
  const u50 = percentile(latency.user, 50);
  const report = `## User mode: spawn to presence, bearer round trip

${runContext("deno run -A tests/bench/user_mode_bench.ts --write")} One broker with the callout
account preloaded, the real \`cotal-auth-service\` under its permission row, a Manager in this
process, started and stopped per round; the modes alternate by round (${ROUNDS} rounds of
${SPAWNS_PER_ROUND} spawns each, \`task-runner\` with \`/bin/cat\`, despawned after each).

| measure | static creds | user mode | ratio |
|---|---|---|---|
| spawn to presence, p50 | ${f(s50)} ms | ${f(u50)} ms | ${(u50 / s50).toFixed(2)}× |
| spawn to presence, p90 | ${f(percentile(latency.static, 90))} ms | ${
    f(percentile(latency.user, 90))
  } ms | |

A user-mode spawn adds a ledger grant and a first bearer (two \`POST /agents\`) and admits the
agent through the callout instead of a minted cred. The supervisor's bearer round trip (proof
made and checked, the ledger read, the bearer signed), ${BEARER_RUNS} runs against an HTTP
round trip to the same daemon's \`/health\`:

| measure | /health | bearer | difference |
|---|---|---|---|
| p50 | ${f2(percentile(health, 50))} ms | ${f2(percentile(bearer, 50))} ms | ${
    f2(percentile(bearer, 50) - percentile(health, 50))
  } ms |
| p99 | ${f2(percentile(health, 99))} ms | ${f2(percentile(bearer, 99))} ms | |

Target: user-mode spawn to presence within 1.2× of static; a bearer renewal (one per agent
every 450 s) well under the spawn's cost.
`;
  console.log(report);
  if (Deno.args.includes("--write")) await writeSection("user-mode", report);
} finally {
  await mesh.close();
}
