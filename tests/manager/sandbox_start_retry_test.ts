/**
 * A sandbox bwrap could not set up once is tried once more. Under the full suite's load, bwrap
 * now and then ended before it reported its sandbox's pid ("Write to info_fd: Bad file
 * descriptor"), or the kernel's namespace clone passed its deadline, and the spawn failed for
 * good. Here the supervisor's bwrap (COTAL_BWRAP, a wrapper around the real one) fails its
 * first sandbox start and runs the real bwrap after that: the agent runs, and the supervisor's
 * log says why it tried again.
 */
import assert from "node:assert/strict";
import { denoRunFlags } from "../../lib/permissions.ts";
import { agentSocketDir } from "../../lib/manager/agent_setup.ts";
import { managerInstanceId } from "../../lib/manager/manager_types.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { waitFor } from "../_harness/broker.ts";
import { testBwrap } from "./_agent_fixture.ts";
import { startManagerMesh } from "./_manager_mesh.ts";

Deno.test("manager - a sandbox that failed to start once is started on the second try", async () => {
  await using mesh = await startManagerMesh("retry");
  const bwrap = await testBwrap();
  const dir = await Deno.makeTempDir({ prefix: "cotal-bwrap-retry-" });
  const wrapper = `${dir}/bwrap`;
  // The probe at start-up passes no --info-fd; the first sandbox start does, and ends at once
  // as bwrap does when it cannot set a sandbox up.
  await Deno.writeTextFile(
    wrapper,
    `#!/bin/sh
case " $* " in
  *" --info-fd "*) if [ ! -e "${dir}/failed" ]; then : > "${dir}/failed"; echo "bwrap: Write to info_fd: Bad file descriptor" >&2; exit 1; fi ;;
esac
exec "${bwrap}" "$@"
`,
  );
  await Deno.chmod(wrapper, 0o755);
  const layout = { root: mesh.root, broker: [mesh.url.replace("nats://", "")] };
  const flags = denoRunFlags("cotal-supervise", {
    ...layout,
    supervisorPrograms: [Deno.execPath(), wrapper],
    agentSocketDir: agentSocketDir(layout, managerInstanceId(mesh.root, mesh.space)),
  });
  const sup = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...flags,
      `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
      new URL("../../cmd/supervise.ts", import.meta.url).pathname,
      ...["--root", mesh.root, "--space", mesh.space, "--server", mesh.url],
      ...["--isolation", "bwrap"],
    ],
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin", HOME: Deno.env.get("HOME") ?? "/root", COTAL_BWRAP: wrapper },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  try {
    const ctl = await mesh.control();
    await waitFor(
      async () =>
        (await ctl.request("status", {}, { timeoutMs: 1_000 }).catch(() => null)) !== null,
      { timeoutMs: 30_000, what: "the supervisor answering status" },
    );
    const row = await ctl.request<AgentRow>("spawn", { name: "worker", command: "/bin/cat" }, {
      timeoutMs: 60_000,
    });
    assert.equal(row.status, "running");
    assert.ok((await Deno.stat(`${dir}/failed`)).isFile, "the first start failed");
  } finally {
    sup.kill("SIGTERM");
    const log = new TextDecoder().decode((await sup.output()).stderr);
    await Deno.remove(dir, { recursive: true });
    assert.match(
      log,
      /worker's sandbox did not start \(.*Bad file descriptor.*\); trying once more/,
    );
  }
});
