/**
 * `cotal spawn | ps | attach | despawn` as real CLI processes against a running manager: a program agent on its pty, driven both ways through attach, resized, then
 * removed; refusals come back with their codes.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { waitFor } from "../_harness/broker.ts";
import { lineFileReady } from "../_harness/files.ts";
import { type ManagerMesh, startManagerMesh } from "./_manager_mesh.ts";
import { agentWorkdir } from "./_agent_fixture.ts";

// Each answer comes after an OSC 52 clipboard write, which attach must not pass on.
const SHELL = 'while read l; do printf "\\033]52;c;b3duZWQ=\\007"; echo "got:$l"; stty size; done';

function cotalArgs(mesh: ManagerMesh, args: string[]): string[] {
  return [
    "run",
    // -A, not the `cotal` row: that row lacks USER, which lib/mesh/commands/ops.ts reads at
    // import (reported; not this test's subject).
    "-A",
    `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
    new URL("../../cmd/cotal.ts", import.meta.url).pathname,
    ...args,
    "--root",
    mesh.root,
    "--space",
    mesh.space,
    "--server",
    mesh.url,
  ];
}

const ENV = { PATH: "/usr/bin:/bin", HOME: Deno.env.get("HOME") ?? "/root" };

async function cotal(mesh: ManagerMesh, ...args: string[]) {
  // Flags go before "--": the spawned program's argv follows it.
  const dash = args.indexOf("--");
  const [head, tail] = dash < 0 ? [args, []] : [args.slice(0, dash), args.slice(dash)];
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...cotalArgs(mesh, head), ...tail],
    clearEnv: true,
    env: ENV,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("manager - cotal spawn, ps, attach (both ways, resized) and despawn", async () => {
  await using mesh = await startManagerMesh("cli");
  await mesh.manager();

  const spawned = await cotal(
    mesh,
    "spawn",
    "--agent",
    "program",
    "--name",
    "shell",
    "--json",
    "--",
    "/bin/sh",
    "-c",
    SHELL,
  );
  assert.equal(spawned.code, 0, spawned.stderr);
  const row: AgentRow = JSON.parse(spawned.stdout);
  assert.equal(row.name, "shell");
  assert.equal(row.agent, "program");
  assert.equal(row.present, true);

  const ps = await cotal(mesh, "ps", "--json");
  assert.equal(ps.code, 0, ps.stderr);
  assert.deepEqual(
    JSON.parse(ps.stdout).agents.map((a: AgentRow) => [a.name, a.status]),
    [["shell", "running"]],
  );
  const human = await cotal(mesh, "ps");
  // The sandbox column: its own uid (or the supervisor's, not as root), its own network.
  assert.match(
    human.stdout,
    /^shell\s+program\s+-\s+running\s+online\s+\d+\s+uid \d+ net:relay( cgv[12])?$/m,
  );

  // attach: keystrokes in, the terminal's output out, at the size asked for; Ctrl-] leaves.
  const attach = new Deno.Command(Deno.execPath(), {
    args: cotalArgs(mesh, ["attach", "shell", "--size", "100x40"]),
    clearEnv: true,
    env: ENV,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let seen = "";
  const dec = new TextDecoder();
  const reading = (async () => {
    for await (const c of attach.stdout) seen += dec.decode(c, { stream: true });
  })();
  const w = attach.stdin.getWriter();
  const enc = new TextEncoder();
  await waitFor(async () => {
    await w.write(enc.encode("hello\n"));
    await new Promise((r) => setTimeout(r, 200));
    // The answer and the size are two writes: wait for both, not the first.
    return /got:hello\r?\n40 100/.test(seen);
  }, { what: "the shell's answer through attach" });
  assert.doesNotMatch(seen, /cache database|cache file/, "Deno's cache warnings reached the pty");
  assert.ok(!seen.includes("\x1b]52"), "the agent's clipboard write reached the terminal");
  await w.write(new Uint8Array([0x1d]));
  const st = await attach.status;
  await reading;
  const err = dec.decode(await new Response(attach.stderr).arrayBuffer());
  assert.equal(st.code, 0, err);
  assert.match(err, /\[cotal attach: detached\]/);
  assert.match(err, /\[cotal attach: shell; Ctrl-\] detaches\]/);

  // A resize while attached reaches the pty (the library client; the CLI does it on SIGWINCH).
  const ctl = await mesh.control();
  let out = "";
  const session = await ctl.attach("shell", (b) => (out += dec.decode(b)));
  session.resize(90, 30);
  await waitFor(async () => {
    session.write("again\n");
    await new Promise((r) => setTimeout(r, 200));
    return /got:again\r?\n30 90/.test(out);
  }, { what: "the resized terminal" });
  // The backlog came first: what happened before this session opened is replayed.
  assert.match(out, /got:hello/);
  // input types one line (Enter appended) without a session.
  const typed = await ctl.request<{ bytes: number }>("input", { name: "shell", text: "typed" });
  assert.equal(typed.bytes, 6);
  await waitFor(() => out.includes("got:typed"), { what: "the typed line's answer" });
  await session.close();

  const gone = await cotal(mesh, "despawn", "shell");
  assert.equal(gone.code, 0, gone.stderr);
  assert.match(gone.stdout, /despawned shell/);
  assert.match((await cotal(mesh, "ps")).stdout, /no agents/);
  const missing = await cotal(mesh, "despawn", "shell", "--json");
  assert.notEqual(missing.code, 0);
  assert.equal(JSON.parse(missing.stdout).error.code, "not_found");
  // Without a program, a usage error at the terminal (exit 2), before the supervisor is asked.
  const bad = await cotal(mesh, "spawn", "--json");
  assert.equal(bad.code, 2);
  assert.equal(JSON.parse(bad.stdout).error.code, "usage");
});

Deno.test("manager - cotal spawn --workdir, --limit, --net, --expose: what ps reports, what is refused", async () => {
  await using mesh = await startManagerMesh("clisbx");
  await mesh.manager();
  const work = await agentWorkdir("cotal-cli-work-");
  const ok = await cotal(
    mesh,
    "spawn",
    "--agent",
    "program",
    "--name",
    "worker",
    "--workdir",
    work,
    "--limit",
    "memory=2G",
    "--limit",
    "processes=128",
    "--json",
    "--",
    "/bin/sh",
    "-c",
    "pwd > where.txt; sleep 60",
  );
  assert.equal(ok.code, 0, ok.stderr);
  const row: AgentRow = JSON.parse(ok.stdout);
  assert.equal(row.sandbox?.workdir, await Deno.realPath(work));
  assert.equal(row.sandbox?.limits.memory, "2G");
  assert.equal(row.sandbox?.limits.processes, "128");
  assert.equal(row.sandbox?.net, "relay");
  await waitFor(() => lineFileReady(`${work}/where.txt`), {
    what: "the agent to write in its workdir",
  });
  assert.equal((await Deno.readTextFile(`${work}/where.txt`)).trim(), await Deno.realPath(work));
  const host = await cotal(
    mesh,
    "spawn",
    "--agent",
    "program",
    "--name",
    "onhost",
    "--net",
    "host",
    "--json",
    "--",
    "/bin/sleep",
    "60",
  );
  assert.equal(host.code, 0, host.stderr);
  assert.equal((JSON.parse(host.stdout) as AgentRow).sandbox?.net, "host");
  assert.match((await cotal(mesh, "ps")).stdout, /^onhost\s.*net:HOST/m);

  // Refusals: a sentence, a code, a non-zero exit, nothing spawned.
  await Deno.symlink("/etc/hostname", `${work}/planted`);
  const other = await agentWorkdir("cotal-other-root-");
  await Deno.mkdir(`${other}/.cotal/logs`, { recursive: true });
  const tooBig = await cotal(
    mesh,
    "spawn",
    "--agent",
    "program",
    "--limit",
    "memory=100G",
    "--",
    "/bin/true",
  );
  assert.equal(tooBig.code, 2);
  assert.match(tooBig.stderr, /The memory limit must be a whole size from 1G to 64G/);
  const badNet = await cotal(
    mesh,
    "spawn",
    "--agent",
    "program",
    "--net",
    "bridge",
    "--",
    "/bin/true",
  );
  assert.equal(badNet.code, 2);
  assert.match(badNet.stderr, /--net must be relay or host/);
  for (
    const [flag, path, why] of [
      ["--workdir", mesh.root, /Cotal state dir/],
      ["--workdir", "/etc", /not allowed/],
      ["--expose", `${mesh.root}/secrets`, /Cotal state dir/],
      ["--workdir", `${work}/absent`, /does not exist/],
      // An agent's own link in its workdir, later handed to another agent (red-team finding).
      ["--expose", `${work}/planted`, /goes through a symlink/],
      // Another root's state dir, not this mesh's.
      ["--expose", `${other}/.cotal/logs`, /inside a Cotal state dir/],
    ] as const
  ) {
    const r = await cotal(
      mesh,
      "spawn",
      "--agent",
      "program",
      flag,
      path,
      "--json",
      "--",
      "/bin/true",
    );
    assert.notEqual(r.code, 0, `${flag} ${path}`);
    const err = JSON.parse(r.stdout).error;
    assert.equal(err.code, "sandbox_path_refused", `${flag} ${path}`);
    assert.match(err.message, why);
  }
  // An agent that prints escape sequences and dies before it is online: its last output
  // reaches the operator's terminal in the refusal as its words only, the sequences dropped,
  // never run (OSC 52 would write the operator's clipboard).
  const loudModule = `${work}/loud.js`;
  await Deno.writeTextFile(
    loudModule,
    "export function run() { console.log('\\x1b]52;c;Zm9v\\x07\\x1b[2J\\x1b]0;title\\x07boom'); return 3; }",
  );
  const loud = await cotal(
    mesh,
    "spawn",
    "--agent",
    "module",
    "--module",
    loudModule,
    "--name",
    "loud",
  );
  assert.notEqual(loud.code, 0);
  assert.match(loud.stderr, /exited \(exit code 3\) before it appeared in presence/);
  // Its words are shown; the terminal sequences around them are not (not even as text).
  assert.match(loud.stderr, /last output: boom/);
  assert.ok(!loud.stderr.includes("Zm9v"), loud.stderr);
  // Deno's own first-run "Download <package>" lines (a fresh module cache) are not Cotal's.
  // deno-lint-ignore no-control-regex
  const ours = loud.stderr.replace(/^(\x1b\[[0-9;]*m)*Download(\x1b\[[0-9;]*m)* .*\n/gm, "");
  // deno-lint-ignore no-control-regex
  assert.doesNotMatch(ours, /[\x07\x1b]/);
  const rows = JSON.parse((await cotal(mesh, "ps", "--json")).stdout).agents as AgentRow[];
  assert.deepEqual(rows.map((a) => a.name).sort(), ["onhost", "worker"]);
});
