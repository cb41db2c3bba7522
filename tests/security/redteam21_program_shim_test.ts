/**
 * Red team 21 (threat 4): a hostile program agent abuses what its runner prepares for it: the
 * `cotal-mcp` shim on its PATH and in COTAL_MCP, its HOME, its env, its DENO_DIR. The script
 * looks for anything a plain agent should not have: the supervisor's root and store (another
 * identity, the signer, the space's $SYS creds), another agent's launch file, a writable code
 * checkout or module cache (code the supervisor or other agents run), a credential in its env,
 * and runs `cotal mcp` (what the shim runs) against a launch path it chooses.
 * A sound system: the script reads only its own launch file; everything else is refused.
 * Judged from the outside: what the script managed to copy into its workdir, and the host files.
 * The test passes when the defence holds.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { removeTempDir, waitFor } from "../_harness/broker.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

Deno.test("redteam21 - a program agent gains nothing from its runner's shim, home, env or cache", async () => {
  await using mesh = await startManagerMesh("rt21prog");
  const work = await agentWorkdir("cotal-rt21prog-");
  const denoDirHost = Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME")}/.cache/deno`;
  const canary = `${CHECKOUT}/rt21_canary_${crypto.randomUUID()}`;
  try {
    await mesh.manager({ runtime: "pty" });
    const ctl = await mesh.control();
    // A victim agent first: its launch file is what the hostile program looks for.
    await ctl.request<AgentRow>("spawn", {
      agent: "program",
      name: "victim",
      command: "/bin/sh",
      args: ["-c", "sleep 120"],
      subscribe: ["general"],
      allowSubscribe: ["general"],
      allowPublish: ["general"],
    }, { timeoutMs: 60_000 });
    const O = work;
    const script = `
exec 2>>'${O}/err'
env > '${O}/env'
cat "$COTAL_MCP" > '${O}/shim'
id > '${O}/id'
# the supervisor's root, store and every launch file it can find
(ls -laR '${mesh.root}' 2>&1 | head -200) > '${O}/root_ls'
find / -xdev \\( -name 'launch*.json' -o -name '*.creds' -o -name '*.nk' \\) 2>/dev/null | head -50 > '${O}/found'
for f in $(cat '${O}/found'); do case "$f" in "$COTAL_LAUNCH") ;; *) cat "$f" >> '${O}/stolen' 2>/dev/null;; esac; done
cat '${mesh.root}'/secrets/* >> '${O}/stolen' 2>/dev/null
# writable code or cache: what the supervisor and other agents run
touch '${canary}' 2>/dev/null && echo code >> '${O}/wrote'
for d in "$DENO_DIR" '${denoDirHost}' "$DENO_DIR/npm" "$DENO_DIR/remote" "$DENO_DIR/deps"; do
  touch "$d/rt21_probe" 2>/dev/null && echo "$d" >> '${O}/wrote'
done
# the shim with another launch path (the root's), and with its own
"$(command -v deno || echo ${Deno.execPath()})" --version > '${O}/deno' 2>&1
ls -la /proc/1/root/ > '${O}/proc1' 2>&1
echo done > '${O}/done'
sleep 60
`;
    const row = await ctl.request<AgentRow>("spawn", {
      agent: "program",
      name: "mallory",
      command: "/bin/sh",
      args: ["-c", script],
      workdir: work,
      subscribe: ["general"],
      allowSubscribe: ["general"],
      allowPublish: ["general"],
    }, { timeoutMs: 60_000 });
    assert.equal(row.status, "running");
    await waitFor(async () => (await Deno.readTextFile(`${O}/done`).catch(() => "")) !== "", {
      what: "the hostile script finished its probes",
      timeoutMs: 90_000,
    });
    const read = (f: string) => Deno.readTextFile(`${O}/${f}`).catch(() => "");
    console.log("id:", await read("id"));
    console.log("env:\n" + await read("env"));
    console.log("shim:\n" + await read("shim"));
    console.log("root_ls:\n" + (await read("root_ls")).slice(0, 600));
    console.log("found:\n" + await read("found"));
    console.log("wrote:\n" + await read("wrote"));
    console.log("proc1:\n" + (await read("proc1")).slice(0, 300));
    const stolen = await read("stolen");
    console.log(`stolen: ${stolen.length} bytes: ${stolen.slice(0, 300)}`);
    assert.equal(
      stolen.includes("NATS USER JWT") || stolen.includes("SEED"),
      false,
      "the program read a credential that is not its own",
    );
    // Its DENO_DIR is a private tmpfs inside the sandbox (by design): a write there must not reach
    // the host's cache, which the supervisor and every other agent load code from.
    for (const d of new Set((await read("wrote")).split("\n").filter(Boolean))) {
      assert.ok(
        !(await Deno.stat(`${d}/rt21_probe`).then(() => true, () => false)),
        `the program's write into ${d} reached the host`,
      );
    }
    assert.ok(
      !(await Deno.stat(canary).then(() => true, () => false)),
      "the program wrote into the checkout",
    );
    assert.ok(
      !/secrets|signer/.test(await read("root_ls")) || /denied|No such/.test(await read("root_ls")),
      "the program listed the supervisor's root",
    );
    await ctl.request("despawn", { name: "mallory" });
    await ctl.request("despawn", { name: "victim" });
  } finally {
    await Deno.remove(canary).catch(() => {});
    await removeTempDir(work);
  }
});
