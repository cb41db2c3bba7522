import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { bwrapSuites, findBwrap } from "../../lib/manager/sandbox/bwrap.ts";
import {
  chooseIsolation,
  probeSandbox,
  protectedPaths,
  resolveIsolation,
} from "../../lib/manager/sandbox/isolation.ts";
import { scopeUnavailable } from "../../lib/manager/sandbox/landlock.ts";
import { DEFAULT_AGENT_LIMITS } from "../../lib/manager/sandbox/limits.ts";
import { assertExposable, bwrapArgs, etcContents } from "../../lib/manager/sandbox/plan.ts";
import { tempDir } from "../_harness/broker.ts";
import { testBwrap } from "./_agent_fixture.ts";

function withEnv<T>(name: string, value: string | undefined, fn: () => Promise<T>): Promise<T> {
  const before = Deno.env.get(name);
  if (value === undefined) Deno.env.delete(name);
  else Deno.env.set(name, value);
  return fn().finally(() => {
    if (before === undefined) Deno.env.delete(name);
    else Deno.env.set(name, before);
  });
}

Deno.test("manager - protected paths: the state root, secrets outside it, the machine home", () => {
  assert.deepEqual(
    protectedPaths({
      root: "/var/lib/cotal",
      store: "/etc/cotal/secrets",
      signer: "/etc/cotal/secrets/auth",
      runDir: "/run/cotal",
      machineHome: "/home/op/.cotal",
      broker: [],
    }),
    [
      "/var/lib/cotal",
      "/etc/cotal/secrets",
      "/etc/cotal/secrets/auth",
      "/run/cotal",
      "/var/lib/cotal/logs",
      "/home/op/.cotal",
    ],
  );
});

Deno.test("manager - a workdir or exposed path may not overlap Cotal's state or be a system root", () => {
  const forbidden = ["/srv/x/.cotal", "/home/op/.cotal"];
  for (const p of ["/", "/etc", "/root", "/home", "/proc", "/tmp", "/run", "/var"]) {
    assert.throws(
      () => assertExposable(p, forbidden, "workdir"),
      (e) => isCotalError(e, "sandbox_path_refused") && e.message.includes(p),
      p,
    );
  }
  for (const p of ["/srv/x", "/srv/x/.cotal/agents", "/home/op", "/home/op/.cotal/meshes"]) {
    assert.throws(
      () => assertExposable(p, forbidden, "exposed path"),
      (e) => isCotalError(e, "sandbox_path_refused") && /overlaps/.test(e.message),
      p,
    );
  }
  assert.doesNotThrow(() => assertExposable("/srv/project", forbidden, "workdir"));
  assert.doesNotThrow(() => assertExposable("/home/op/src/app", forbidden, "workdir"));
});

Deno.test("manager - the sandbox plan binds only what it names and refuses relative paths", () => {
  const plan = {
    launchDir: "/R/agents/a1",
    etcFiles: { passwd: "/R/agents/a1/etc/passwd" },
    controlSocket: "/R/run/sockets/0.control",
    brokerSocket: "/R/run/sockets/0.broker",
    net: "relay" as const,
    expose: [],
    code: ["/opt/deno/deno"],
    limits: DEFAULT_AGENT_LIMITS,
    cgroupMemory: false,
    uid: 1_500_000_001,
    gid: 1_500_000_000,
    switchUser: true,
    env: { PATH: "/usr/bin" },
  };
  const args = bwrapArgs(plan);
  const sources = args.flatMap((a, i) =>
    (a === "--ro-bind" || a === "--bind") ? [args[i + 1]] : []
  );
  const allowed = (src: string) =>
    src.startsWith("/usr") || src.startsWith("/etc/") || src.startsWith("/R/agents/a1") ||
    src.startsWith("/R/run/sockets/0.") || src === "/opt/deno/deno" ||
    ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"].includes(src);
  for (const src of sources) assert.ok(allowed(src), src);
  for (const secret of ["/etc/shadow", "/etc/gshadow", "/etc/ssl/private", "/etc/npmrc"]) {
    assert.ok(!sources.includes(secret), secret);
  }
  // The parent dirs of a bind are made 0755, so the agent's uid can reach a binary under /opt.
  assert.ok(args.join(" ").includes("--perms 0755 --dir /opt --perms 0755 --dir /opt/deno"));
  assert.ok(args.includes("--new-session") === false);
  assert.ok(bwrapArgs({ ...plan, newSession: true }).includes("--new-session"));
  assert.throws(
    () => bwrapArgs({ ...plan, workdir: "srv/project" }),
    (e) => isCotalError(e, "sandbox_bad_path"),
  );
  assert.throws(
    () => bwrapArgs({ ...plan, expose: ["/srv/../etc"] }),
    (e) => isCotalError(e, "sandbox_bad_path"),
  );
  assert.throws(
    () => bwrapArgs({ ...plan, brokerSocket: undefined }),
    (e) => isCotalError(e, "sandbox_bad_path") && /broker socket/.test(e.message),
  );
});

Deno.test("manager - an agent's passwd and group name only itself, root and nobody", () => {
  const etc = etcContents({ uid: 1_500_000_007, gid: 1_500_000_000 });
  assert.match(etc.passwd, /^agent:x:1500000007:1500000000:Cotal agent:\/home\/agent:\/bin\/sh$/m);
  assert.equal(etc.passwd.trim().split("\n").length, 3);
  assert.match(etc.group, /^agent:x:1500000000:$/m);
  assert.match(etc.hosts, /^127\.0\.0\.1\tlocalhost/m);
});

Deno.test("manager - isolation: bwrap by default, refusal without it unless deno-only or trusted", () => {
  assert.deepEqual(chooseIsolation({ bwrap: "/usr/bin/bwrap" }).mode, "bwrap");
  assert.throws(
    () => chooseIsolation({ bwrapProblem: "bwrap was not found" }),
    (e) =>
      isCotalError(e, "sandbox_unavailable") && /untrusted agent/.test(e.message) &&
      /apt-get install bubblewrap/.test(e.message) && /deno-only/.test(e.message),
  );
  const optIn = chooseIsolation({ mode: "deno-only" });
  assert.equal(optIn.mode, "deno-only");
  assert.match(optIn.summary, /opt-in/);
  // Opting into deno-only is honoured even where bwrap exists.
  assert.equal(chooseIsolation({ mode: "deno-only", bwrap: "/usr/bin/bwrap" }).mode, "deno-only");
  assert.equal(chooseIsolation({ trusted: true }).mode, "deno-only");
  assert.throws(
    () => chooseIsolation({ mode: "bogus" as "bwrap" }),
    (e) => isCotalError(e, "sandbox_bad_mode"),
  );
});

Deno.test("manager - deno-only as root refuses an untrusted agent: its runner would be root (red team 26)", () => {
  assert.throws(
    () => chooseIsolation({ mode: "deno-only", asRoot: true }),
    (e) =>
      isCotalError(e, "sandbox_root_needs_trust") && /as root/.test(e.message) &&
      /--trusted/.test(e.message),
  );
  assert.throws(
    () => chooseIsolation({ mode: "deno-only", asRoot: true, program: "/bin/sh" }),
    (e) => isCotalError(e, "sandbox_root_needs_trust"),
  );
  assert.equal(
    chooseIsolation({ mode: "deno-only", asRoot: true, trusted: true }).mode,
    "deno-only",
  );
  // Not root: an untrusted module may run under the operator's opt-in.
  assert.equal(chooseIsolation({ mode: "deno-only", asRoot: false }).mode, "deno-only");
});

Deno.test("manager - deno-only refuses an untrusted agent's external program", () => {
  assert.throws(
    () => chooseIsolation({ mode: "deno-only", program: "/bin/sh" }),
    (e) =>
      isCotalError(e, "sandbox_program_needs_bwrap") && e.message.includes("/bin/sh") &&
      /do not reach a child program/.test(e.message),
  );
  assert.equal(
    chooseIsolation({ mode: "deno-only", program: "/bin/sh", trusted: true }).mode,
    "deno-only",
  );
  assert.equal(chooseIsolation({ bwrap: "/b", program: "/bin/sh" }).mode, "bwrap");
});

Deno.test("manager - a bwrap that cannot start the default sandbox is refused for untrusted agents", async () => {
  const dir = await tempDir();
  const fake = `${dir}/bwrap`;
  await Deno.writeTextFile(fake, "#!/bin/sh\necho 'bwrap: no user namespaces' >&2\nexit 1\n");
  await Deno.chmod(fake, 0o755);
  const problem = await probeSandbox(fake, { switchUser: Deno.uid() === 0, netns: true });
  assert.match(problem!, /default sandbox did not start.*no user namespaces/);
  await assert.rejects(
    resolveIsolation({}, { bwrap: fake }),
    (e) => isCotalError(e, "sandbox_unavailable") && e.message.includes("no user namespaces"),
  );
  // deno-only as root runs only an agent the operator trusts with root (red team 26).
  const trusted = Deno.uid() === 0 ? { trusted: true } : {};
  assert.equal(
    (await resolveIsolation({ mode: "deno-only", ...trusted }, { bwrap: fake })).mode,
    "deno-only",
  );
  await withEnv("COTAL_BWRAP", `${dir}/absent`, () => {
    assert.throws(() => findBwrap(), (e) => isCotalError(e, "bwrap_not_found"));
    return Promise.resolve();
  });
});

Deno.test("manager - the real default sandbox starts here and its facts are what status shows", async () => {
  const bwrap = await testBwrap();
  assert.equal(await probeSandbox(bwrap, { switchUser: Deno.uid() === 0, netns: true }), undefined);
  const iso = await resolveIsolation({}, { bwrap });
  assert.equal(iso.mode, "bwrap");
  assert.equal(iso.switchUser, Deno.uid() === 0);
  assert.match(iso.summary, /allowlist root/);
  assert.match(iso.summary, /seccomp/);
  assert.match(iso.summary, iso.cgroup ? /cgroup v[12]/ : /rlimits \(no cgroup\)/);
  // Said only where the agents' sandboxes take Landlock's scopes.
  assert.equal(/Landlock scopes/.test(iso.summary), scopeUnavailable() === undefined);
});

Deno.test("manager - bwrap is taken from this Debian release, not a newer suite", () => {
  assert.deepEqual(bwrapSuites("ID=debian\nVERSION_CODENAME=bookworm\n"), ["bookworm"]);
  assert.deepEqual(bwrapSuites('ID="ubuntu"\nVERSION_CODENAME=noble\n'), ["stable"]);
  assert.deepEqual(bwrapSuites(""), ["stable"]);
});

Deno.test({
  name: "manager - a Deno the agents' uid cannot run fails the probe, not every spawn (needs root)",
  ignore: Deno.uid() !== 0,
  async fn() {
    const bwrap = await testBwrap();
    const dir = await tempDir("cotal-private-deno-");
    const deno = `${dir}/deno`;
    await Deno.copyFile(Deno.execPath(), deno);
    await Deno.chmod(deno, 0o700);
    const problem = await probeSandbox(bwrap, { switchUser: true, netns: true, deno });
    assert.match(problem!, /default sandbox did not start.*Permission denied/);
    await Deno.chmod(deno, 0o755);
    assert.equal(await probeSandbox(bwrap, { switchUser: true, netns: true, deno }), undefined);
  },
});
