import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { bwrapSuites, findBwrap, probeBwrap } from "../../lib/manager/sandbox/bwrap.ts";
import {
  chooseIsolation,
  hiddenPaths,
  resolveIsolation,
  sandboxArgs,
} from "../../lib/manager/sandbox/isolation.ts";
import { tempDir } from "../_harness/broker.ts";
import { agentFixture, testBwrap } from "./_agent_fixture.ts";

function withEnv<T>(name: string, value: string | undefined, fn: () => Promise<T>): Promise<T> {
  const before = Deno.env.get(name);
  if (value === undefined) Deno.env.delete(name);
  else Deno.env.set(name, value);
  return fn().finally(() => {
    if (before === undefined) Deno.env.delete(name);
    else Deno.env.set(name, before);
  });
}

Deno.test("manager - the sandbox argv hides, then binds the agent dir back, and drops everything", () => {
  const args = sandboxArgs({
    agentDir: "/R/agents/a1/",
    hide: ["/tmp", "/R", "/etc/cotal"],
    env: { PATH: "/usr/bin", COTAL_LAUNCH: "/R/agents/a1/launch.json" },
  });
  assert.deepEqual(args, [
    "--ro-bind",
    "/",
    "/",
    "--tmpfs",
    "/tmp",
    "--tmpfs",
    "/R",
    "--tmpfs",
    "/etc/cotal",
    "--bind",
    "/R/agents/a1",
    "/R/agents/a1",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--unshare-pid",
    "--unshare-ipc",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
    "--clearenv",
    "--setenv",
    "PATH",
    "/usr/bin",
    "--setenv",
    "COTAL_LAUNCH",
    "/R/agents/a1/launch.json",
    "--chdir",
    "/R/agents/a1",
    "--",
  ]);
  assert.ok(
    sandboxArgs({ agentDir: "/R/a", hide: [], env: {}, newSession: true }).includes(
      "--new-session",
    ),
  );
});

Deno.test("manager - the sandbox refuses a relative agent dir and supervisor state inside it", () => {
  assert.throws(
    () => sandboxArgs({ agentDir: "agents/a1", hide: [], env: {} }),
    (e) => isCotalError(e, "sandbox_bad_path"),
  );
  assert.throws(
    () => sandboxArgs({ agentDir: "/R/a1", hide: ["/R/a1/secrets"], env: {} }),
    (e) => isCotalError(e, "sandbox_bad_path") && e.message.includes("/R/a1/secrets"),
  );
});

Deno.test("manager - hidden paths cover the root, secrets outside it, the machine home and /tmp", () => {
  assert.deepEqual(
    hiddenPaths({
      root: "/var/lib/cotal",
      store: "/etc/cotal/secrets",
      signer: "/etc/cotal/secrets/auth",
      runDir: "/run/cotal",
      machineHome: "/home/op/.cotal",
      broker: [],
    }),
    ["/tmp", "/run/cotal", "/var/lib/cotal", "/home/op/.cotal", "/etc/cotal/secrets"],
  );
  // Everything under the root collapses into the root.
  assert.deepEqual(hiddenPaths({ root: "/srv/x/.cotal", machineHome: "/m/.cotal", broker: [] }), [
    "/tmp",
    "/m/.cotal",
    "/srv/x/.cotal",
  ]);
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

Deno.test("manager - a COTAL_BWRAP that cannot sandbox is refused for untrusted agents", async () => {
  const dir = await tempDir();
  const fake = `${dir}/bwrap`;
  await Deno.writeTextFile(fake, "#!/bin/sh\necho 'bwrap: no user namespaces' >&2\nexit 1\n");
  await Deno.chmod(fake, 0o755);
  await withEnv("COTAL_BWRAP", fake, async () => {
    assert.match((await probeBwrap(fake))!, /no user namespaces/);
    await assert.rejects(
      resolveIsolation({}),
      (e) => isCotalError(e, "sandbox_unavailable") && e.message.includes("no user namespaces"),
    );
    assert.equal((await resolveIsolation({ mode: "deno-only" })).mode, "deno-only");
  });
  await withEnv("COTAL_BWRAP", `${dir}/absent`, () => {
    assert.throws(() => findBwrap(), (e) => isCotalError(e, "bwrap_not_found"));
    return Promise.resolve();
  });
});

Deno.test("manager - bwrap is taken from this Debian release, not a newer suite", () => {
  assert.deepEqual(bwrapSuites("ID=debian\nVERSION_CODENAME=bookworm\n"), ["bookworm"]);
  assert.deepEqual(bwrapSuites('ID="ubuntu"\nVERSION_CODENAME=noble\n'), ["stable"]);
  assert.deepEqual(bwrapSuites(""), ["stable"]);
});

Deno.test("manager - the real sandbox hides secrets, binds the agent dir writable, drops caps", async () => {
  const bwrap = await testBwrap();
  const fx = await agentFixture();
  await Deno.mkdir(`${fx.root}/secrets/auth`, { recursive: true });
  await Deno.writeTextFile(`${fx.root}/secrets/auth/seed`, "SIGNER");
  await Deno.mkdir(`${fx.root}/agents/a2`);
  await Deno.writeTextFile(`${fx.root}/agents/a2/creds`, "OTHER");
  await Deno.mkdir(`${fx.root}/home/.cotal`, { recursive: true });
  const args = sandboxArgs({
    agentDir: fx.agentDir,
    hide: hiddenPaths(fx.layout),
    env: { PATH: "/usr/bin:/bin" },
  });
  const script = [
    `cat ${fx.root}/secrets/auth/seed ${fx.root}/agents/a2/creds`,
    `ls -A ${fx.root} ${fx.root}/agents`,
    "echo written > mine && cat mine",
    "grep CapEff /proc/self/status",
    "ls /proc | grep -c '^[0-9]'",
    "env",
  ].join("; ");
  const out = await new Deno.Command(bwrap, {
    args: [...args, "/bin/sh", "-c", script],
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  const err = new TextDecoder().decode(out.stderr);
  assert.ok(out.success, err);
  assert.ok(!text.includes("SIGNER") && !text.includes("OTHER"), text);
  assert.match(err, /secrets\/auth\/seed: No such file/);
  // The root is an empty tmpfs with only the path back to a1 in it.
  assert.match(text, new RegExp(`${fx.root}:\\nagents\\n\\n${fx.root}/agents:\\na1\\n`));
  assert.match(text, /written/);
  assert.match(text, /CapEff:\s+0000000000000000/);
  // Only the sandbox's own processes: the reaper, the shell, ls, grep (no supervisor pids).
  assert.ok(Number(/\n(\d+)\n(?=PATH=)/.exec(text)?.[1]) <= 5, text);
  assert.match(text, /^PATH=\/usr\/bin:\/bin$/m);
  assert.equal(await Deno.readTextFile(`${fx.agentDir}/mine`), "written\n");
});
