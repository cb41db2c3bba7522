/**
 * A spawn's `env` (what `cotal spawn --env NAME` sends: a harness's provider key) reaches that
 * agent's program inside the real sandbox, and nowhere it could be read back from: not its
 * launch file, not `ps`. Another agent spawned without it does not get it. The CLI refuses a
 * variable its shell does not have, naming it.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { removeTempDir, waitFor } from "../_harness/broker.ts";
import { agentWorkdir } from "./_agent_fixture.ts";
import { startManagerMesh } from "./_manager_mesh.ts";
import { agentDirOf } from "../../lib/manager/sandbox/isolation.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

async function fileReady(path: string): Promise<boolean> {
  try {
    return (await Deno.readTextFile(path)).includes("DONE");
  } catch {
    return false;
  }
}

Deno.test("manager - a spawn's env reaches its program in the sandbox, and neither its launch file nor ps", async () => {
  await using mesh = await startManagerMesh("spawnenv");
  const work = await agentWorkdir("cotal-spawnenv-");
  const secret = `sk-${crypto.randomUUID()}`;
  try {
    await mesh.manager();
    const ctl = await mesh.control();
    const spawn = (name: string, env?: Record<string, string>) =>
      ctl.request<AgentRow>("spawn", {
        agent: "program",
        name,
        command: "/bin/sh",
        args: ["-c", `env > ${work}/${name}.env; echo DONE >> ${work}/${name}.env; sleep 600`],
        workdir: work,
        ...(env ? { env } : {}),
      }, { timeoutMs: 60_000 });
    await spawn("keyed", { PROVIDER_API_KEY: secret });
    await spawn("plain");
    for (const n of ["keyed", "plain"]) {
      await waitFor(() => fileReady(`${work}/${n}.env`), { what: `${n}'s environment` });
    }
    assert.match(
      await Deno.readTextFile(`${work}/keyed.env`),
      new RegExp(`^PROVIDER_API_KEY=${secret}$`, "m"),
    );
    assert.doesNotMatch(await Deno.readTextFile(`${work}/plain.env`), /PROVIDER_API_KEY/);
    // Not in any launch file, not in ps.
    for await (const e of Deno.readDir(`${mesh.root}/agents`)) {
      const launch = await Deno.readTextFile(`${agentDirOf(mesh, mesh.space, e.name)}/launch.json`)
        .catch(() => "");
      assert.ok(!launch.includes(secret), `${e.name}'s launch file holds the value`);
    }
    const ps = await ctl.request<{ agents: AgentRow[] }>("ps");
    assert.ok(!JSON.stringify(ps).includes(secret), "ps shows the value");

    // The CLI reads the value from its own shell; one the shell lacks is refused by name.
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        COTAL,
        "spawn",
        "--root",
        mesh.root,
        "--space",
        mesh.space,
        "--env",
        "COTAL_TEST_UNSET_KEY",
        "--",
        "/bin/true",
      ],
      env: { COTAL_HOME: mesh.layout.machineHome },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 2);
    assert.match(
      new TextDecoder().decode(out.stderr),
      /--env COTAL_TEST_UNSET_KEY: COTAL_TEST_UNSET_KEY is not set in this shell; export it first/,
    );
  } finally {
    await removeTempDir(work);
  }
});
