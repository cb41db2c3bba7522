import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { createRuntime } from "../../lib/manager/pty_runtime.ts";
import { chooseIsolation } from "../../lib/manager/sandbox/isolation.ts";
import { DEFAULT_AGENT_LIMITS } from "../../lib/manager/sandbox/limits.ts";
import {
  denoDir,
  runnerLaunchSpec,
  type RunnerOptions,
  type RunnerSandbox,
  startRunner,
} from "../../lib/manager/start_runner.ts";
import type { AgentSpec } from "../../lib/manager/launch.ts";
import { collect, sandboxedAgent } from "./_agent_fixture.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";

const LAYOUT = { root: "/R", broker: ["127.0.0.1:4222"], machineHome: "/H/.cotal" };
const PROGRAM: AgentSpec = { kind: "program", command: "/bin/sh", args: ["x.sh"] };
const SANDBOX: RunnerSandbox = {
  controlSocket: "/R/run/sockets/0.control",
  brokerSocket: "/R/run/sockets/0.broker",
  net: "relay",
  uid: 1_500_000_001,
  gid: 1_500_000_000,
  switchUser: true,
  limits: DEFAULT_AGENT_LIMITS,
  etcFiles: { passwd: "/R/agents/a1/etc/passwd" },
  expose: [],
};
const BASE: RunnerOptions = {
  layout: LAYOUT,
  agentDir: "/R/agents/a1",
  spec: PROGRAM,
  isolation: chooseIsolation({ bwrap: "/usr/bin/bwrap", switchUser: true }),
  sandbox: SANDBOX,
  env: { LANG: "C.UTF-8" },
  deno: "/usr/bin/deno",
  entry: "/src/cmd/agent.ts",
  config: "/src/deno.json",
};

function flag(args: readonly string[], name: string): string | undefined {
  return args.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
}

/** Pairs `--flag a b` out of bwrap's argv. */
function ops(args: readonly string[], name: string, width = 2): string[][] {
  const out: string[][] = [];
  args.forEach((a, i) => a === name && out.push(args.slice(i + 1, i + 1 + width)));
  return out;
}

Deno.test("manager - the runner's argv: an allowlist root, the exec chain, then deno run under its row", () => {
  const spec = runnerLaunchSpec(BASE, { seccomp: 9 });
  assert.equal(spec.command, "/usr/bin/bwrap");
  const sep = spec.args.indexOf("--");
  const outer = spec.args.slice(0, sep);
  const inner = spec.args.slice(sep + 1);
  // No view of the host's root: only named binds, nothing of the state root or the home.
  assert.ok(!ops(outer, "--ro-bind").some(([src]) => src === "/"), "the host's / is not bound");
  for (const [src] of [...ops(outer, "--ro-bind"), ...ops(outer, "--bind")]) {
    assert.ok(
      !src.startsWith("/R/") || src.startsWith("/R/agents/a1") ||
        src.startsWith("/R/run/sockets/0."),
      src,
    );
    assert.ok(!src.startsWith("/H"), src);
  }
  assert.deepEqual(ops(outer, "--ro-bind").find(([, d]) => d === "/run/cotal/launch"), [
    "/R/agents/a1",
    "/run/cotal/launch",
  ]);
  assert.deepEqual(ops(outer, "--bind").find(([, d]) => d === "/run/cotal/broker.sock"), [
    "/R/run/sockets/0.broker",
    "/run/cotal/broker.sock",
  ]);
  for (
    const ns of [
      "--unshare-pid",
      "--unshare-ipc",
      "--unshare-net",
      "--unshare-uts",
      "--die-with-parent",
    ]
  ) {
    assert.ok(outer.includes(ns), ns);
  }
  assert.deepEqual(ops(outer, "--seccomp", 1), [["9"]]);
  // As root: every capability but the three setpriv drops on its way to the agent's uid.
  assert.deepEqual(ops(outer, "--cap-add", 1).flat(), ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]);
  // Size-capped private tmpfs for /tmp, /dev/shm, the home and Deno's own caches (under the
  // read-only module cache binds, which come after it).
  const sized = ops(outer, "--size", 3).map(([n, , d]) => [n, d]);
  const cache = spec.env?.DENO_DIR;
  assert.deepEqual(sized, [
    ["67108864", "/dev/shm"],
    ["67108864", "/tmp"],
    ["268435456", "/home/agent"],
    ["67108864", cache],
  ]);
  const cacheAt = outer.indexOf(cache!);
  for (const [src] of ops(outer, "--ro-bind").filter(([s]) => s.startsWith(`${cache}/`))) {
    assert.ok(outer.indexOf(src) > cacheAt, `${src} is bound over the cache tmpfs, not under it`);
  }
  assert.ok(outer.includes("--remount-ro"));
  const exec = inner.slice(0, inner.indexOf("/usr/bin/deno"));
  assert.deepEqual(exec.slice(0, 6), [
    "/usr/bin/prlimit",
    "--nproc=256",
    "--nofile=4096",
    "--fsize=268435456",
    "--core=0",
    "--data=1073741824",
  ]);
  assert.ok(exec.includes("/usr/bin/choom") && exec.includes("/usr/bin/nice"));
  assert.deepEqual(exec.slice(exec.indexOf("/usr/bin/setpriv")), [
    "/usr/bin/setpriv",
    "--reuid=1500000001",
    "--regid=1500000000",
    "--clear-groups",
    "--bounding-set=-all",
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--no-new-privs",
    "--",
  ]);
  const deno = inner.slice(inner.indexOf("/usr/bin/deno"));
  assert.deepEqual(deno.slice(0, 3), ["/usr/bin/deno", "run", "--no-prompt"]);
  assert.deepEqual(deno.slice(-2), ["--config=/src/deno.json", "/src/cmd/agent.ts"]);
  assert.equal(
    flag(deno, "--allow-read"),
    "/run/cotal/launch,/home/agent,/tmp,/run/cotal/control.sock,/run/cotal/broker.sock",
  );
  assert.equal(flag(deno, "--deny-read"), "/R/secrets/auth,/R/secrets");
  assert.equal(flag(deno, "--allow-run"), "/bin/sh");
  assert.ok(!deno.includes("--allow-ffi") && !deno.includes("-A"));
  assert.deepEqual(spec.env, {
    LANG: "C.UTF-8",
    HOME: "/home/agent",
    COTAL_LAUNCH: "/run/cotal/launch/launch.json",
    DENO_DIR: spec.env!.DENO_DIR,
    DENO_NO_UPDATE_CHECK: "1",
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    USER: "agent",
    LOGNAME: "agent",
  });
  // Nothing secret on the command line: only paths and names.
  assert.ok(!spec.args.some((a) => /SU[A-Z2-7]{50,}|BEGIN NATS/.test(a)));
});

Deno.test("manager - a non-root supervisor's sandbox is an unprivileged user namespace that cannot nest", () => {
  const spec = runnerLaunchSpec({
    ...BASE,
    isolation: chooseIsolation({ bwrap: "/usr/bin/bwrap", switchUser: false }),
    sandbox: { ...SANDBOX, switchUser: false },
  });
  assert.ok(spec.args.includes("--unshare-user") && spec.args.includes("--disable-userns"));
  assert.ok(!spec.args.includes("--cap-add") && !spec.args.includes("/usr/bin/setpriv"));
});

Deno.test("manager - --net host is the recorded opt-out: no network namespace, no relay", () => {
  const spec = runnerLaunchSpec({
    ...BASE,
    sandbox: { ...SANDBOX, net: "host", brokerSocket: undefined },
  });
  assert.ok(!spec.args.includes("--unshare-net"));
  assert.ok(!spec.args.includes("/run/cotal/broker.sock"));
  assert.equal(flag(spec.args, "--allow-net"), "127.0.0.1:4222,unix:/run/cotal/control.sock");
});

Deno.test("manager - under deno-only the runner is deno run itself with host paths", () => {
  const spec = runnerLaunchSpec({
    ...BASE,
    spec: { kind: "module", module: "agent.ts" },
    isolation: chooseIsolation({ mode: "deno-only" }),
    sandbox: { ...SANDBOX, net: "host", brokerSocket: undefined, switchUser: false },
    env: {},
  });
  assert.equal(spec.command, "/usr/bin/deno");
  assert.equal(spec.args[0], "run");
  assert.equal(flag(spec.args, "--allow-run"), undefined);
  assert.equal(spec.env!.COTAL_LAUNCH, "/R/agents/a1/launch.json");
  assert.equal(spec.cwd, "/R/agents/a1/home");
  // With its relay on a loopback port, the runner may dial that port and not the broker.
  const relayed = runnerLaunchSpec({
    ...BASE,
    spec: { kind: "module", module: "agent.ts" },
    isolation: chooseIsolation({ mode: "deno-only" }),
    sandbox: {
      ...SANDBOX,
      net: "host",
      brokerSocket: undefined,
      brokerPort: 41234,
      switchUser: false,
    },
    env: {},
  });
  const net = flag(relayed.args, "--allow-net")!.split(",");
  assert.ok(net.includes("127.0.0.1:41234"), net.join(","));
  assert.ok(!net.some((n) => n.endsWith(":4222")), net.join(","));
});

Deno.test("manager - the supervisor's DENO_* and COTAL_* variables never reach the runner", () => {
  Deno.env.set("DENO_COTAL_TEST_TRICK", "1");
  Deno.env.set("COTAL_TEST_SECRET", "s");
  try {
    const spec = runnerLaunchSpec({ ...BASE, env: undefined });
    for (const k of Object.keys(spec.env!)) {
      assert.ok(
        ["COTAL_LAUNCH", "DENO_DIR", "DENO_NO_UPDATE_CHECK"].includes(k) ||
          (!k.startsWith("DENO_") && !k.startsWith("COTAL_")),
        k,
      );
    }
  } finally {
    Deno.env.delete("DENO_COTAL_TEST_TRICK");
    Deno.env.delete("COTAL_TEST_SECRET");
  }
});

Deno.test("manager - the runner refuses env outside the allowlist and bad paths", () => {
  assert.throws(
    () => runnerLaunchSpec({ ...BASE, env: { DENO_DIR: "/tmp/x" } }),
    (e) => isCotalError(e, "runner_env_not_allowed") && e.message.includes("DENO_DIR"),
  );
  assert.throws(
    () => runnerLaunchSpec({ ...BASE, env: { COTAL_LAUNCH: "/elsewhere" } }),
    (e) => isCotalError(e, "runner_env_not_allowed"),
  );
  for (const agentDir of ["agents/a1", "/R/agents/../secrets"]) {
    assert.throws(
      () => runnerLaunchSpec({ ...BASE, agentDir }),
      (e) => isCotalError(e, "runner_bad_paths"),
      agentDir,
    );
  }
  assert.throws(
    () => runnerLaunchSpec({ ...BASE, isolation: { mode: "bwrap", summary: "" } }),
    (e) => isCotalError(e, "sandbox_unavailable"),
  );
});

Deno.test("manager - a runner started on the pty runtime inside bwrap gets a terminal and TERM", async () => {
  const spec: AgentSpec = { kind: "module", module: "agent.ts" };
  await using fx = await sandboxedAgent(spec, {
    moduleText: `export function run() {
      const size = Deno.consoleSize();
      console.log("isatty:" + Deno.stdin.isTerminal() + " size:" + size.columns + "x" + size.rows);
      return 0;
    }\n`,
  });
  const r = await startRunner({
    ...fx.runner,
    runtime: await createRuntime("pty"),
    cols: 101,
    rows: 29,
  });
  assert.equal(r.runtime, "pty");
  assert.ok(!r.spec.args.includes("--new-session"));
  assert.equal(r.spec.env!.TERM, "xterm-256color");
  const { out, code } = await collect(r.handle);
  assert.equal(code, 0, out);
  assert.match(out, /isatty:true size:101x29/);
});

Deno.test("manager - killing a sandboxed runner leaves none of its processes behind", async () => {
  const spec: AgentSpec = {
    kind: "program",
    command: "/bin/sh",
    args: ["-c", "sleep 600 & echo started:$!; wait"],
  };
  await using fx = await sandboxedAgent(spec);
  const r = await startRunner({ ...fx.runner, runtime: await createRuntime("process") });
  const dec = new TextDecoder();
  let out = "";
  r.handle.onData((d) => (out += dec.decode(d)));
  const exited = new Promise((res) => r.handle.onExit(res));
  await waitFor(() => out.includes("started:"), {
    timeoutMs: 20_000,
    what: "the program to start",
  });
  r.handle.kill("SIGKILL");
  await exited;
  // Every process of the sandbox ran as the agent's own uid: none may be left.
  const uid = fx.runner.sandbox.uid;
  await waitFor(() => processesOf(uid).length === 0, {
    timeoutMs: 5_000,
    what: "the sandbox to end",
  });
});

function processesOf(uid: number): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const st = Deno.readTextFileSync(`/proc/${e.name}/status`);
      if (new RegExp(`^Uid:\\s+${uid}\\s`, "m").test(st)) out.push(e.name);
    } catch {
      // Gone.
    }
  }
  return out;
}

Deno.test("manager - a runner whose Deno, module cache and checkout all live under /tmp still starts", async () => {
  // As with `HOME=/tmp/x npx deno task up`: the sandbox's own /tmp must not hide them.
  const base = await tempDir("cotal-tmp-install-");
  const deno = `${base}/home/.npm/deno`;
  await Deno.mkdir(`${base}/home/.npm`, { recursive: true });
  await Deno.mkdir(`${base}/home/.cache`, { recursive: true });
  await Deno.mkdir(`${base}/checkout`, { recursive: true });
  await Deno.link(Deno.execPath(), deno).catch(() => Deno.copyFile(Deno.execPath(), deno));
  const checkout = `${base}/checkout`;
  const src = new URL("../../", import.meta.url).pathname;
  // Its module caches, not the SQLite caches other Deno processes of this machine are writing
  // (a copy met their journal files vanishing mid-copy, with `deno fmt` running beside it).
  await Deno.mkdir(`${base}/home/.cache/deno`);
  for await (const e of Deno.readDir(denoDir())) {
    if (e.isDirectory) {
      await copyTree(`${denoDir()}/${e.name}`, `${base}/home/.cache/deno/${e.name}`);
    }
  }
  for (const part of ["cmd", "lib"]) await copyTree(`${src}${part}`, `${checkout}/${part}`);
  for (const f of ["deno.json", "deno.lock"]) await Deno.copyFile(`${src}${f}`, `${checkout}/${f}`);
  await Deno.chmod(base, 0o755);
  const spec: AgentSpec = { kind: "module", module: "agent.ts" };
  await using fx = await sandboxedAgent(spec, {
    moduleText: "export function run() { console.log('ran from ' + Deno.execPath()); }\n",
  });
  const r = await startRunner({
    ...fx.runner,
    deno,
    denoDir: `${base}/home/.cache/deno`,
    entry: `${checkout}/cmd/agent.ts`,
    config: `${checkout}/deno.json`,
    runtime: await createRuntime("process"),
  });
  const { out, code } = await collect(r.handle);
  assert.equal(code, 0, out);
  assert.match(out, new RegExp(`ran from ${deno}`));
});

async function copyTree(from: string, to: string): Promise<void> {
  const out = await new Deno.Command("/bin/cp", { args: ["-a", from, to] }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

Deno.test("manager - a sandbox bwrap cannot set up fails the start with bwrap's own reason, and nothing runs", async () => {
  const spec: AgentSpec = { kind: "program", command: "/bin/sh", args: ["-c", "echo ran"] };
  await using fx = await sandboxedAgent(spec);
  const missing = `/nonexistent-${crypto.randomUUID()}`;
  const reason = `Can't find source path ${missing}`;
  // bwrap reports its sandbox's pid before it sets the sandbox up: when the set-up fails after
  // the runner joined it to its cgroup, the start resolves and the handle ends with bwrap's
  // words (the supervisor's readiness wait then fails the spawn); before, the start is refused.
  const started = await startRunner({
    ...fx.runner,
    sandbox: { ...fx.runner.sandbox, expose: [missing] },
    runtime: await createRuntime("process"),
  }).then((r) => ({ r }), (e: unknown) => ({ e }));
  if ("e" in started) {
    const e = started.e;
    assert.ok(isCotalError(e, "sandbox_start_failed"), String(e));
    assert.match(
      e.message,
      /bwrap exited before it reported its sandbox.s pid|the sandbox ended while bwrap was setting it up/,
    );
    assert.ok(e.message.includes(`bwrap said: bwrap: ${reason}`), e.message);
  } else {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const { out, code } = await Promise.race([
      collect(started.r.handle),
      new Promise<never>((_, reject) =>
        timer = setTimeout(
          () => reject(new Error("the failed sandbox did not end in 30 s")),
          30_000,
        )
      ),
    ]).finally(() => clearTimeout(timer));
    assert.notEqual(code, 0, out);
    assert.doesNotMatch(out, /^ran$/m, "nothing ran");
    // bwrap writes its "bwrap: " prefix, the reason and ": <errno text>" apart; what it wrote
    // before the handle was returned went to the start's own capture. What is left is the rest
    // of bwrap's words and nothing else.
    const tail = new RegExp(
      `^(bwrap: )?(${
        reason.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      })?(: No such file or directory)?\\s*$`,
    );
    assert.match(out, tail);
  }
});
