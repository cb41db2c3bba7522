/**
 * A hostile agent module and a hostile external program each try to reach the signer, the
 * store, the supervisor and another agent. Each runs four ways: with no protection at all (the
 * control: proves every attempt works when nothing stops it), under the Deno layer alone, under
 * the bwrap layer alone, and under both (what the supervisor runs). Under both, nothing leaks;
 * the per-layer results are asserted against the table in docs/SECURITY.md.
 */
import assert from "node:assert/strict";
import { processRuntime } from "../../lib/manager/pty_runtime.ts";
import { runnerLaunchSpec, startRunner } from "../../lib/manager/start_runner.ts";
import type { AgentSpec } from "../../lib/manager/launch.ts";
import { seccompFilter } from "../../lib/manager/sandbox/seccomp.ts";
import { spawnWithFds } from "../../lib/manager/sandbox/spawn_fds.ts";
import type { RuntimeHandle } from "../../lib/registry.ts";
import { collect, type SandboxedAgent, sandboxedAgent } from "../manager/_agent_fixture.ts";

type Mode = "none" | "deno" | "bwrap" | "both";
type Layer = "Deno" | "bwrap" | "both" | "only together";

function marker(what: string): string {
  return `COTALMARK${what}${crypto.randomUUID().replaceAll("-", "")}`;
}

/** The secrets one run plants, by name. */
interface Planted {
  fx: SandboxedAgent;
  markers: string[];
  supervisor: Deno.ChildProcess;
  envMarker: string;
}

async function plant(kind: "module" | "program", mode: Mode): Promise<Planted> {
  const spec = specFor(kind);
  // "none" and "deno" run the runner without bwrap, as a deno-only supervisor would.
  const fx = await sandboxedAgent(spec, {
    mode: mode === "none" || mode === "deno" ? "deno-only" : "bwrap",
    ...(kind === "module" ? { moduleText: HOSTILE_MODULE } : {}),
  });
  const r = fx.root;
  const m = {
    signer: marker("signer"),
    store: marker("store"),
    run: marker("run"),
    log: marker("log"),
    other: marker("otheragent"),
    home: marker("machinehome"),
    env: marker("supervisorenv"),
  };
  const files: Record<string, string> = {
    [`${r}/secrets/auth/seed.json`]: JSON.stringify({ seed: m.signer }),
    [`${r}/secrets/space.abc/delivery.creds`]: m.store,
    [`${r}/run/auth-service.json`]: m.run,
    [`${r}/logs/manager.log`]: m.log,
    [`${r}/agents/a2/launch.json`]: m.other,
    [`${r}/home/.cotal/meshes/space.abc.json`]: m.home,
  };
  for (const [path, text] of Object.entries(files)) {
    await Deno.mkdir(path.replace(/\/[^/]+$/, ""), { recursive: true, mode: 0o700 });
    await Deno.writeTextFile(path, text, { mode: 0o600 });
  }
  const signer = `${r}/secrets/auth/seed.json`;
  // Symlinks planted from outside the sandbox (by a careless operator or an earlier process).
  await Deno.symlink(signer, `${fx.agentDir}/planted`);
  await Deno.symlink(signer, `${fx.agentDir}/planted.json`);
  await Deno.symlink(`${r}/secrets`, `${fx.agentDir}/planted-dir`);
  await Deno.symlink(`${r}/agents/a2/launch.json`, `${fx.agentDir}/planted-other`);
  // A stand-in supervisor: the env marker in its environ and memory, the signer open on fd 3.
  const supervisor = new Deno.Command("/bin/sh", {
    args: ["-c", 'exec 3<"$1"; exec sleep 600', "sh", signer],
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin", COTAL_SUPERVISOR_SECRET: m.env },
    stdout: "null",
    stderr: "null",
  }).spawn();
  const targets = {
    root: r,
    signer,
    signerDir: `${r}/secrets/auth`,
    store: `${r}/secrets/space.abc/delivery.creds`,
    runFile: `${r}/run/auth-service.json`,
    logFile: `${r}/logs/manager.log`,
    otherAgent: `${r}/agents/a2/launch.json`,
    machineHome: `${r}/home/.cotal/meshes/space.abc.json`,
    supervisorPid: supervisor.pid,
  };
  const owner = fx.runner.sandbox.switchUser
    ? { uid: fx.runner.sandbox.uid, gid: fx.runner.sandbox.gid }
    : undefined;
  const own = async (file: string) => {
    if (owner) await Deno.chown(file, owner.uid, owner.gid);
  };
  if (kind === "module") {
    await Deno.writeTextFile(`${fx.agentDir}/targets.json`, JSON.stringify(targets));
    await own(`${fx.agentDir}/targets.json`);
  } else {
    await Deno.copyFile(
      new URL("./_hostile_program.sh", import.meta.url),
      `${fx.agentDir}/hostile.sh`,
    );
    const sh = [
      `ROOT='${targets.root}'`,
      `SIGNER='${targets.signer}'`,
      `SIGNER_DIR='${targets.signerDir}'`,
      `STORE='${targets.store}'`,
      `RUN_FILE='${targets.runFile}'`,
      `LOG_FILE='${targets.logFile}'`,
      `OTHER_AGENT='${targets.otherAgent}'`,
      `MACHINE_HOME='${targets.machineHome}'`,
      `SUPERVISOR_PID=${targets.supervisorPid}`,
      `DENO='${Deno.execPath()}'`,
    ];
    await Deno.writeTextFile(`${fx.agentDir}/targets.sh`, sh.join("\n") + "\n");
    await own(`${fx.agentDir}/hostile.sh`);
    await own(`${fx.agentDir}/targets.sh`);
  }
  return { fx, markers: Object.values(m), supervisor, envMarker: m.env };
}

const HOSTILE_MODULE = Deno.readTextFileSync(new URL("./_hostile_agent.ts", import.meta.url));

function specFor(kind: "module" | "program"): AgentSpec {
  // The program reads its scripts from its launch dir, wherever that is for the mode.
  return kind === "module" ? { kind: "module", module: "agent.ts" } : {
    kind: "program",
    command: "/bin/bash",
    args: ["-c", 'd=$(dirname "$COTAL_LAUNCH"); exec /bin/bash "$d/hostile.sh" "$d/targets.sh"'],
  };
}

/** Starts one mode; `both` is exactly what the supervisor runs. */
async function start(mode: Mode, p: Planted): Promise<RuntimeHandle> {
  const { fx } = p;
  if (mode === "both" || mode === "deno") {
    return (await startRunner({ ...fx.runner, runtime: processRuntime })).handle;
  }
  const allowAll = (args: readonly string[]) => {
    // The runner's own row replaced with every permission: only the OS layer is left.
    const run = args.indexOf("run");
    const config = args.findIndex((a) => a.startsWith("--config="));
    return [...args.slice(0, run + 1), "-A", ...args.slice(config)];
  };
  if (mode === "bwrap") {
    const { result } = await spawnWithFds({ seccomp: seccompFilter() }, (fds) => {
      const spec = runnerLaunchSpec(fx.runner, fds);
      return processRuntime.spawn({ ...spec, args: allowAll(spec.args) });
    });
    return result;
  }
  // No protection: every permission and the supervisor's whole environment.
  const spec = runnerLaunchSpec(fx.runner);
  return await processRuntime.spawn({
    command: Deno.execPath(),
    args: allowAll(spec.args),
    env: { ...Deno.env.toObject(), ...spec.env },
    cwd: fx.agentDir,
  });
}

/** Runs one mode; returns every attempt's output by name, and the whole output. */
async function runMode(kind: "module" | "program", mode: Mode) {
  const p = await plant(kind, mode);
  // The supervisor's own environment holds a secret too: nothing of it may reach the sandbox
  // (bwrap's pid-1 reaper shows its environ to the agent, so bwrap itself must get a clean env).
  Deno.env.set("COTAL_TEST_SUPERVISOR_SECRET", p.envMarker);
  try {
    const handle = await start(mode, p);
    const { out, code } = await collect(handle);
    assert.match(out, /@@end/, `${kind}/${mode} did not finish (exit ${code}):\n${out}`);
    const attempts = new Map<string, string>();
    for (const block of out.split("@@attempt ").slice(1)) {
      const nl = block.indexOf("\n");
      attempts.set(block.slice(0, nl), block.slice(nl + 1).replace(/@@end[\s\S]*/, ""));
    }
    const leaked = (text: string) => p.markers.some((m) => text.includes(m));
    return { attempts, out, leaked };
  } finally {
    Deno.env.delete("COTAL_TEST_SUPERVISOR_SECRET");
    p.supervisor.kill("SIGKILL");
    await p.supervisor.status;
    await p.fx[Symbol.asyncDispose]();
  }
}

/**
 * Which layer stops each attempt on its own, as measured on Deno 2.9.6 + bwrap 0.8 as root.
 * docs/SECURITY.md carries the same table; update both together.
 */
const EXPECTED: Record<"module" | "program", Record<string, Layer>> = {
  module: {
    "direct path": "both",
    "dot-dot from the agent dir": "both",
    "planted symlink to the signer": "bwrap",
    "planted symlink to the secrets dir": "bwrap",
    "planted symlink, imported as JSON": "bwrap",
    "new symlink": "both",
    "new hard link": "both",
    "/proc/self/root": "both",
    "chdir, then a relative path": "both",
    "fetch file: URL": "both",
    "/proc/<supervisor>/environ": "both",
    "/proc/<supervisor>/mem": "both",
    "/proc/<supervisor>/fd/3": "both",
    "the whole environment": "both",
    "spawn a shell": "both",
    "DENO_* env and a deno child": "both",
    "the store": "both",
    "the supervisor's run file": "both",
    "the supervisor's log": "both",
    "another agent's launch file": "both",
    "planted symlink to another agent": "bwrap",
    "the machine home": "both",
  },
  program: {
    "direct path": "bwrap",
    "dot-dot from the agent dir": "bwrap",
    "planted symlink to the signer": "bwrap",
    "planted symlink to the secrets dir": "bwrap",
    "new symlink": "bwrap",
    "new hard link": "bwrap",
    "/proc/self/root": "bwrap",
    "/proc/<supervisor>/root": "bwrap",
    "/proc/<supervisor>/environ": "bwrap",
    "/proc/<supervisor>/mem": "bwrap",
    "/proc/<supervisor>/fd/3": "bwrap",
    "every /proc/*/environ": "bwrap",
    "the whole environment": "both",
    "unmount the tmpfs": "bwrap",
    "enter the supervisor's mount namespace": "bwrap",
    "DENO_* env and a deno child": "bwrap",
    "the store": "bwrap",
    "the supervisor's run file": "bwrap",
    "the supervisor's log": "bwrap",
    "another agent's launch file": "bwrap",
    "planted symlink to another agent": "bwrap",
    "the machine home": "bwrap",
    "search the state root": "bwrap",
  },
};

for (const kind of ["module", "program"] as const) {
  Deno.test(`security - a hostile agent ${kind} reaches no secret under the supervisor's sandbox`, async () => {
    const runs = {} as Record<Mode, Awaited<ReturnType<typeof runMode>>>;
    for (const mode of ["none", "deno", "bwrap", "both"] as const) {
      runs[mode] = await runMode(kind, mode);
    }
    const names = [...runs.none.attempts.keys()];
    assert.ok(names.length >= 15, `only ${names.length} attempts`);
    assert.deepEqual(names.sort(), Object.keys(EXPECTED[kind]).sort());
    // The whole output of the real configuration, not just the attempt blocks, is clean.
    assert.ok(
      !runs.both.leaked(runs.both.out),
      `a secret leaked under both layers:\n${runs.both.out}`,
    );
    const measured: Record<string, Layer> = {};
    for (const name of names) {
      const got = (mode: Mode) => runs[mode].leaked(runs[mode].attempts.get(name) ?? "");
      // The control proves the attempt is real: with nothing in the way it gets the secret.
      assert.ok(
        got("none"),
        `${kind} "${name}" does not work even unprotected:\n${runs.none.attempts.get(name)}`,
      );
      assert.ok(!got("both"), `${kind} "${name}" leaked under both layers`);
      const deno = !got("deno");
      const bwrap = !got("bwrap");
      measured[name] = deno && bwrap ? "both" : deno ? "Deno" : bwrap ? "bwrap" : "only together";
    }
    if (Deno.env.get("COTAL_SECURITY_REPORT")) {
      // Prints the measured table (markdown rows) for docs/SECURITY.md.
      for (const [name, layer] of Object.entries(measured)) {
        console.log(`| ${kind} | ${name} | ${layer} |`);
      }
    }
    assert.deepEqual(measured, EXPECTED[kind], "update docs/SECURITY.md along with EXPECTED");
  });
}
