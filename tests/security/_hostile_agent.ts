/**
 * A hostile agent module: copied into an agent's dir as `agent.ts` and run by cotal-agent, it
 * tries every way it knows to reach the signer, the store, the supervisor and another agent,
 * printing whatever it obtains after an `@@attempt <name>` line. The test decides what leaked.
 * Self-contained on purpose: the runner only loads files from the agent's dir.
 */

interface Targets {
  root: string;
  signer: string;
  signerDir: string;
  store: string;
  runFile: string;
  logFile: string;
  otherAgent: string;
  machineHome: string;
  supervisorPid: number;
}

const MARK = /COTALMARK[A-Za-z0-9]*/g;

async function attempt(name: string, fn: () => Promise<string> | string): Promise<void> {
  let out: string;
  try {
    out = await fn();
  } catch (err) {
    out = `refused: ${(err as Error).name}: ${(err as Error).message}`;
  }
  console.log(`@@attempt ${name}\n${out.slice(0, 2000)}`);
}

function read(path: string): Promise<string> {
  return Deno.readTextFile(path);
}

async function readMem(pid: number): Promise<string> {
  const maps = await read(`/proc/${pid}/maps`);
  const found: string[] = [];
  for (const line of maps.split("\n")) {
    if (!line.includes("[stack]")) continue;
    const [start, end] = line.split(" ")[0].split("-").map((h) => parseInt(h, 16));
    using mem = await Deno.open(`/proc/${pid}/mem`);
    await mem.seek(start, Deno.SeekMode.Start);
    const buf = new Uint8Array(end - start);
    let at = 0;
    while (at < buf.length) {
      const n = await mem.read(buf.subarray(at));
      if (n === null) break;
      at += n;
    }
    found.push(...(new TextDecoder("latin1").decode(buf.subarray(0, at)).match(MARK) ?? []));
  }
  return found.join(" ") || "no marker in the stack";
}

async function shell(cmd: string, args: string[], env?: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" })
    .output();
  return new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
}

/** The agent entry point. */
export async function run(ctx: { agentDir: string; launchDir: string }): Promise<number> {
  // Planted files are in its launch dir; it writes in its own (writable) dir.
  const d = ctx.launchDir;
  const w = ctx.agentDir;
  const t: Targets = JSON.parse(await read(`${d}/targets.json`));
  const rel = t.signer.slice(t.root.length + 1);
  await attempt("direct path", () => read(t.signer));
  await attempt("dot-dot from the agent dir", () => read(`${d}/../../${rel}`));
  await attempt("planted symlink to the signer", () => read(`${d}/planted`));
  await attempt(
    "planted symlink to the secrets dir",
    () => read(`${d}/planted-dir/auth/seed.json`),
  );
  await attempt("planted symlink, imported as JSON", async () => {
    const mod = await import(`file://${d}/planted.json`, { with: { type: "json" } });
    return JSON.stringify(mod.default);
  });
  await attempt("new symlink", async () => {
    await Deno.symlink(t.signer, `${w}/made-symlink`);
    return await read(`${w}/made-symlink`);
  });
  await attempt("new hard link", async () => {
    await Deno.link(t.signer, `${w}/made-hardlink`);
    return await read(`${w}/made-hardlink`);
  });
  await attempt("/proc/self/root", () => read(`/proc/self/root${t.signer}`));
  await attempt("chdir, then a relative path", () => {
    Deno.chdir(t.signerDir);
    return read("seed.json");
  });
  await attempt("fetch file: URL", async () => await (await fetch(`file://${t.signer}`)).text());
  await attempt("/proc/<supervisor>/environ", () => read(`/proc/${t.supervisorPid}/environ`));
  await attempt("/proc/<supervisor>/mem", () => readMem(t.supervisorPid));
  await attempt("/proc/<supervisor>/fd/3", () => read(`/proc/${t.supervisorPid}/fd/3`));
  await attempt("the whole environment", () => {
    // Cotal's and Deno's own variables first: each attempt's output is capped, and a host's
    // environment (npx adds dozens of npm_* entries) would push them past the cap.
    const env = Object.entries(Deno.env.toObject());
    const first = env.filter(([k]) => /^(COTAL|DENO)/.test(k));
    return JSON.stringify(Object.fromEntries([...first, ...env.filter((e) => !first.includes(e))]));
  });
  await attempt("spawn a shell", () => shell("/bin/sh", ["-c", `cat ${t.signer}`]));
  await attempt(
    "DENO_* env and a deno child",
    () =>
      shell(Deno.execPath(), [
        "eval",
        `console.log(Deno.readTextFileSync(${JSON.stringify(t.signer)}))`,
      ], {
        DENO_DIR: `${w}/deno-dir`,
        DENO_NO_PROMPT: "1",
      }),
  );
  await attempt("the store", () => read(t.store));
  await attempt("the supervisor's run file", () => read(t.runFile));
  await attempt("the supervisor's log", () => read(t.logFile));
  await attempt("another agent's launch file", () => read(t.otherAgent));
  await attempt("planted symlink to another agent", () => read(`${d}/planted-other`));
  await attempt("the machine home", () => read(t.machineHome));
  console.log("@@end");
  return 0;
}
