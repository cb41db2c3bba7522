/**
 * The supervisor–agent boundary: whatever an agent leaves where it can write (symlinks to the
 * signer, FIFOs, a frozen runner), despawn, a manager's stop and the next manager's sweep of a
 * crashed predecessor finish within their deadlines and never touch what the links point at.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { indexKey } from "../../lib/manager/lifecycle.ts";
import { waitFor } from "../_harness/broker.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { type ManagerMesh, startManagerMesh } from "../manager/_manager_mesh.ts";
import { agentDirOf } from "../../lib/manager/sandbox/isolation.ts";

/** Live processes whose working dir is under `dir` (the agent's program runs in its home). */
function processesIn(dir: string): number[] {
  const out: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if (Deno.readLinkSync(`/proc/${e.name}/cwd`).startsWith(dir)) out.push(Number(e.name));
    } catch {
      // Gone, or not ours to read.
    }
  }
  return out;
}

/** A digest of every file in the store's signer dir, to prove nothing there changed. */
async function signerDigest(mesh: ManagerMesh): Promise<string> {
  const dir = `${mesh.root}/secrets/auth`;
  const parts: string[] = [];
  for (const e of [...Deno.readDirSync(dir)].sort((a, b) => a.name < b.name ? -1 : 1)) {
    const bytes = await Deno.readFile(`${dir}/${e.name}`);
    const sum = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    parts.push(`${e.name}:${[...sum].map((b) => b.toString(16).padStart(2, "0")).join("")}`);
  }
  return parts.join("\n");
}

/** A script that plants traps where it can write, then freezes its runner. */
function trapper(places: string[], signer: string): string {
  const lines = places.flatMap((d) => [
    `mkdir -p ${d} 2>/dev/null`,
    `ln -sf ${signer} ${d}/launch.json 2>/dev/null`,
    `ln -sf ${signer} ${d}/.cotal-stop 2>/dev/null || true`,
    `mkfifo ${d}/fifo ${d}/control.sock 2>/dev/null`,
    `ln -sfn / ${d}/rootlink 2>/dev/null`,
  ]);
  // The runner is frozen once it is online (spawn waits for its presence), then it says so.
  const flag = `${places.at(-1)}/frozen`;
  return [...lines, "sleep 3", "kill -STOP $PPID", `touch ${flag}`, "sleep 600"].join("\n");
}

Deno.test("security - despawn of an agent that froze its runner and planted links ends on time, signer intact", async () => {
  await using mesh = await startManagerMesh("boundary");
  await mesh.manager();
  const ctl = await mesh.control();
  const before = await signerDigest(mesh);
  const signer = `${mesh.root}/secrets/auth/broker.json`;
  const work = await agentWorkdir("cotal-boundary-");
  await ctl.request<AgentRow>("spawn", {
    agent: "program",
    name: "trapper",
    command: "/bin/bash",
    args: ["-c", trapper(["$HOME", "/tmp", work], signer)],
    workdir: work,
  }, { timeoutMs: 40_000 });
  await waitFor(() => Deno.stat(`${work}/frozen`).then(() => true, () => false), {
    what: "the traps and the frozen runner",
  });
  const t0 = Date.now();
  await ctl.request("despawn", { name: "trapper" }, { timeoutMs: 30_000 });
  // The control stop is never read (the runner is frozen): the grace, then SIGKILL, and done.
  assert.ok(Date.now() - t0 < 15_000, `despawn took ${Date.now() - t0} ms`);
  assert.equal(await signerDigest(mesh), before);
  await assert.rejects(
    Deno.stat(`${agentDirOf(mesh, mesh.space, "trapper")}`),
    Deno.errors.NotFound,
  );
  // The operator's workdir is the agent's to keep: the supervisor never walks it.
  assert.ok((await Deno.lstat(`${work}/launch.json`)).isSymlink);
});

Deno.test("security - a trusted deno-only agent's traps in its host dir: despawn and stop finish, nothing followed", async () => {
  await using mesh = await startManagerMesh("boundary2");
  const manager = await mesh.manager({ isolation: "deno-only" });
  const ctl = await mesh.control();
  const before = await signerDigest(mesh);
  const signer = `${mesh.root}/secrets/auth/broker.json`;
  for (const name of ["first", "second"]) {
    await ctl.request<AgentRow>("spawn", {
      agent: "program",
      name,
      trusted: true,
      command: "/bin/bash",
      args: ["-c", trapper(["$HOME", "$HOME/deeper"], signer)],
    }, { timeoutMs: 40_000 });
    await waitFor(
      () =>
        Deno.stat(`${agentDirOf(mesh, mesh.space, name)}/home/deeper/frozen`).then(
          () => true,
          () => false,
        ),
      {
        what: "the traps and the frozen runner",
      },
    );
  }
  const t0 = Date.now();
  await ctl.request("despawn", { name: "first" }, { timeoutMs: 30_000 });
  assert.ok(Date.now() - t0 < 15_000, `despawn took ${Date.now() - t0} ms`);
  await assert.rejects(Deno.stat(`${agentDirOf(mesh, mesh.space, "first")}`), Deno.errors.NotFound);
  // Its program and that program's children went with the runner (its process group).
  await waitFor(() => processesIn(`${agentDirOf(mesh, mesh.space, "first")}/`).length === 0, {
    what: "the first agent's processes to end",
  });
  // A manager stop tears down the other one the same way.
  const t1 = Date.now();
  await manager.stop();
  assert.ok(Date.now() - t1 < 15_000, `stop took ${Date.now() - t1} ms`);
  await assert.rejects(
    Deno.stat(`${agentDirOf(mesh, mesh.space, "second")}`),
    Deno.errors.NotFound,
  );
  assert.equal(await signerDigest(mesh), before);
  // What the links pointed at is all still there.
  assert.ok(Deno.statSync("/usr/bin").isDirectory);
});

Deno.test("security - the sweep of a crashed manager's leftovers ends on time through FIFOs and links", async () => {
  await using mesh = await startManagerMesh("boundary3");
  const before = await signerDigest(mesh);
  const signer = `${mesh.root}/secrets/auth/broker.json`;
  // What a crashed manager left: an indexed agent whose dir holds every trap.
  const first = await mesh.manager({ isolation: "deno-only" });
  const key = indexKey(
    { space: mesh.space, injected: false, root: mesh.root } as Parameters<typeof indexKey>[0],
    first.instanceId,
  );
  await first.stop();
  const dir = `${agentDirOf(mesh, mesh.space, "ghost")}`;
  await Deno.mkdir(`${dir}/home/deeper`, { recursive: true });
  for (const d of [dir, `${dir}/home`, `${dir}/home/deeper`]) {
    await Deno.symlink(signer, `${d}/launch.json`);
    await Deno.symlink(signer, `${d}/.cotal-stop`);
    await Deno.symlink("/", `${d}/rootlink`);
    const mk = await new Deno.Command("/usr/bin/mkfifo", { args: [`${d}/fifo`] }).output();
    assert.ok(mk.success);
  }
  await mesh.store.put(
    key,
    JSON.stringify({
      agents: [{
        name: "ghost",
        principal: { owner: "local", actor: "ghost" },
        lifecycleUid: "g0000000000000000000000000000000",
        agentDir: dir,
        credsKey: `space.x/agent.ghost.g.creds`,
      }],
    }),
  );
  const t0 = Date.now();
  await mesh.manager({ isolation: "deno-only" });
  assert.ok(Date.now() - t0 < 20_000, `the sweep took ${Date.now() - t0} ms`);
  await assert.rejects(Deno.stat(dir), Deno.errors.NotFound);
  assert.equal(await signerDigest(mesh), before);
});
