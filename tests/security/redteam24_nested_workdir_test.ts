/**
 * Red team 24: one agent re-points another's bind through its own workdir.
 *
 * Attack: the operator gives agent A the workdir `/P` and agent B the workdir `/P/sub` (both
 * group-writable, as a shared project is). A runs `mv /P/sub /P/sub.orig; ln -s <host dir>
 * /P/sub`. At B's next start (a crash restart, or `down --keep-agents` then `up`), bwrap, as
 * root, resolved B's bind source through A's link: when written, B's workdir became a host
 * directory neither agent was given, read-write. The same held for B's exposed paths and its
 * program inside A's workdir.
 *
 * Fixed: a spawn whose paths lie in another agent's workdir, or whose workdir holds another
 * agent's paths, is refused with a sentence; and every start re-checks that the workdir and
 * exposed paths still resolve to themselves, so a link put in place since is never bound.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

const SLEEPER = { agent: "program", command: "/bin/sleep", args: ["600"] };

/** A dir an agent's own uid may write (a root supervisor switches agents to their own uids). */
async function shared(path: string): Promise<void> {
  await Deno.mkdir(path, { recursive: true });
  await Deno.chmod(path, 0o777);
}

Deno.test("redteam24 - no agent's paths may lie in another agent's workdir, either way round", async () => {
  await using mesh = await startManagerMesh("rt24n");
  await mesh.manager();
  const ctl = await mesh.control();
  const base = await tempDir("cotal-rt24n-");
  const p = `${base}/P`;
  await shared(p);
  await shared(`${p}/sub`);
  await shared(`${p}/bin`);
  await Deno.writeTextFile(`${p}/notes.txt`, "shared");
  await Deno.copyFile("/bin/sleep", `${p}/bin/sleep`);
  await Deno.chmod(`${p}/bin/sleep`, 0o755);
  await ctl.request<AgentRow>("spawn", { ...SLEEPER, name: "a", workdir: p }, {
    timeoutMs: 40_000,
  });
  const refused = (what: RegExp) => (e: unknown) =>
    isCotalError(e, "sandbox_path_refused") && what.test(e.message);
  // B's workdir, exposed path or program inside A's workdir.
  await assert.rejects(
    ctl.request("spawn", { ...SLEEPER, name: "b", workdir: `${p}/sub` }),
    refused(/P\/sub is inside a's workdir .*P, which a can change under this agent/),
  );
  await assert.rejects(
    ctl.request("spawn", { ...SLEEPER, name: "b", expose: [`${p}/notes.txt`] }),
    refused(/notes\.txt is inside a's workdir/),
  );
  await assert.rejects(
    ctl.request("spawn", { ...SLEEPER, name: "b", command: `${p}/bin/sleep` }),
    refused(/bin\/sleep is inside a's workdir/),
  );
  // Red team 25: the same program spelled `//P/...`, or reached through a link elsewhere.
  await assert.rejects(
    ctl.request("spawn", { ...SLEEPER, name: "b", command: `/${p}/bin/sleep` }),
    (e) => isCotalError(e, "spawn_bad_args") && /without '\.\.', '\.' or '\/\/'/.test(e.message),
  );
  await Deno.symlink(`${p}/bin`, `${base}/alias`);
  await assert.rejects(
    ctl.request("spawn", { ...SLEEPER, name: "b", command: `${base}/alias/sleep` }),
    refused(/P\/bin\/sleep is inside a's workdir/),
  );
  // Its own workdir through an alias: bound at the spelled path, bwrap would follow it.
  const own = `${base}/own`;
  await shared(own);
  await shared(`${own}/bin`);
  await Deno.copyFile("/bin/sleep", `${own}/bin/sleep`);
  await Deno.chmod(`${own}/bin/sleep`, 0o755);
  await Deno.symlink(`${own}/bin`, `${base}/ownalias`);
  await assert.rejects(
    ctl.request("spawn", {
      ...SLEEPER,
      name: "b",
      workdir: own,
      command: `${base}/ownalias/sleep`,
    }),
    refused(/resolves to .*own\/bin\/sleep, inside the agent's own workdir, through a link/),
  );
  // The other way: a workdir that holds what an agent already has bound.
  const q = `${base}/Q`;
  await shared(q);
  await shared(`${q}/sub`);
  await ctl.request<AgentRow>("spawn", { ...SLEEPER, name: "d", workdir: `${q}/sub` }, {
    timeoutMs: 40_000,
  });
  await assert.rejects(
    ctl.request("spawn", { ...SLEEPER, name: "e", workdir: q }),
    refused(/The workdir .*Q holds .*Q\/sub, which d has bound/),
  );
  // One workdir for two agents is sharing, not nesting: neither can rename the mount point.
  await ctl.request<AgentRow>("spawn", { ...SLEEPER, name: "a2", workdir: p }, {
    timeoutMs: 40_000,
  });
  // Side by side is fine.
  await shared(`${base}/R`);
  const row = await ctl.request<AgentRow>(
    "spawn",
    { ...SLEEPER, name: "f", workdir: `${base}/R` },
    {
      timeoutMs: 40_000,
    },
  );
  assert.equal(row.status, "running");
  const names = (await ctl.request<{ agents: AgentRow[] }>("ps")).agents.map((a) => a.name).sort();
  assert.deepEqual(names, ["a", "a2", "d", "f"]);
});

Deno.test("redteam24 - a workdir a link replaced since the spawn is not bound at the restart", async () => {
  await using mesh = await startManagerMesh("rt24l");
  await mesh.manager();
  const ctl = await mesh.control();
  const base = await tempDir("cotal-rt24l-");
  const work = `${base}/w`;
  const host = `${base}/host-only`;
  await shared(work);
  await shared(host);
  await Deno.writeTextFile(`${host}/secret`, "host only");
  // Exits after 2 s: a crash the restart policy answers with a new start.
  const row = await ctl.request<AgentRow>("spawn", {
    agent: "program",
    command: "/bin/sh",
    args: ["-c", "sleep 2; exit 3"],
    name: "victim",
    workdir: work,
    restarts: 3,
  }, { timeoutMs: 40_000 });
  assert.equal(row.status, "running");
  await Deno.rename(work, `${work}.orig`);
  await Deno.symlink(host, work);
  let last: AgentRow | undefined;
  await waitFor(async () => {
    last = (await ctl.request<{ agents: AgentRow[] }>("ps")).agents.find((a) =>
      a.name === "victim"
    );
    return last?.status === "retired";
  }, { timeoutMs: 30_000, what: "the restart refused" });
  assert.match(
    last!.reason!,
    /restart failed .*w now resolves to .*host-only \(a link in its place\)/,
  );
});
