/**
 * Red team 49's shared set-up: a user-mode space (the real auth-service daemon, the broker's
 * real callout), a Manager with `userAuth`, and hostile program agents that run
 * `rt49_fixtures/raw_connect.ts` (a raw NATS client with no imports) inside their sandbox,
 * writing what they saw to a workdir the test reads. Not a test file (leading underscore).
 */
import { Manager } from "../../lib/manager/manager.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { removeTempDir, waitFor } from "../_harness/broker.ts";
import { type ServiceMesh, type ServiceProcess, startServiceMesh } from "../auth/_service_mesh.ts";
import { agentWorkdir, testBwrap } from "../manager/_agent_fixture.ts";

const CLIENT = new URL("./rt49_fixtures/raw_connect.ts", import.meta.url).pathname;

export interface Rt49 {
  mesh: ServiceMesh;
  svc: ServiceProcess;
  manager: Manager;
  logs: string[];
  work: string;
  /** Spawns a program agent running the raw client with `args`; its lines go to `<work>/<name>.out`. */
  hostile(
    name: string,
    runs: string[][],
    extra?: Record<string, unknown>,
  ): Promise<AgentRow>;
  /** The JSON lines the hostile agent `name` wrote so far. */
  lines(name: string): Promise<Record<string, unknown>[]>;
  /** Waits for `runs` of the hostile agent's `{done: true}` lines (default 1). */
  done(name: string, timeoutMs: number, runs?: number): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

export async function startRt49(): Promise<Rt49> {
  await testBwrap();
  const mesh = await startServiceMesh({ streams: true });
  const closers: (() => Promise<unknown>)[] = [() => mesh.close()];
  try {
    const svc = await mesh.start();
    const logs: string[] = [];
    const manager = new Manager({
      space: mesh.space,
      servers: mesh.broker.url,
      workspaceRoot: mesh.root,
      layout: { machineHome: `${mesh.root}/home/.cotal` },
      userAuth: { url: svc.discovery.url },
      log: (l) => logs.push(l),
    });
    await manager.start();
    closers.push(() => manager.stop());
    const work = await agentWorkdir("cotal-rt49-");
    closers.push(() => removeTempDir(work));
    await Deno.copyFile(CLIENT, `${work}/raw_connect.ts`);
    const lines = async (name: string) =>
      (await Deno.readTextFile(`${work}/${name}.out`).catch(() => ""))
        .split("\n").filter(Boolean).map((l) => JSON.parse(l));
    return {
      mesh,
      svc,
      manager,
      logs,
      work,
      hostile: (name, runs, extra = {}) => {
        const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
        const deno = `"$(command -v deno || echo ${Deno.execPath()})"`;
        const one = (args: string[]) =>
          `${deno} run -A ${q(`${work}/raw_connect.ts`)} ${q(`${work}/${name}.out`)} ${
            args.map(q).join(" ")
          } 2>>${q(`${work}/${name}.err`)}`;
        const script = `${runs.map(one).join("; ")}; sleep 300`;
        return manager.spawn({
          agent: "program",
          name,
          command: "/bin/sh",
          args: ["-c", script],
          workdir: work,
          ...extra,
        });
      },
      lines,
      async done(name, timeoutMs, runs = 1) {
        await waitFor(
          async () => (await lines(name)).filter((l) => l.done === true).length >= runs,
          {
            what: `${name}'s hostile client to finish`,
            timeoutMs,
          },
        );
        return await lines(name);
      },
      async close() {
        for (const c of closers.reverse()) await c().catch(() => {});
      },
    };
  } catch (err) {
    for (const c of closers.reverse()) await c().catch(() => {});
    throw err;
  }
}
